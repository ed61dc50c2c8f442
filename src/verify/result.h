// What `verify` found: per link class, the link and address measured, how (the request: probe
// counts, sizes, durations, buffers), what was measured, and the checks with their verdicts;
// and whether the whole run passed. report/verify.h renders it as a table and its
// JSON twin. Plain values: no locking; share a const one between threads freely.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "lab/state.h"
#include "verify/classes.h"
#include "verify/host.h"
#include "verify/measure.h"
#include "verify/paths.h"
#include "verify/tolerance.h"

namespace tb::verify {

// A class's verdict: every check within tolerance (pass), one out of it or a step failed
// (fail), or a check out of it while the host was stalled (not judged: the reading says more
// about the host than about the link; exit 2, measure again on a quieter host).
enum class ClassVerdict { kPass, kFail, kNotJudged };
const char* to_string(ClassVerdict v);  // "pass", "fail", "not judged"

// The host stalled during a reading when the probes' own path over lo (the base, SCHED_FIFO
// like every probe) read a median or an IQR at least this long. On the 2-core development host
// 44 readings of mini's classes, idle and under a CPU hog on both cores, read medians of
// 0.06-0.16 ms and IQRs of 0.01-0.09 ms; the stalled reading seen in the suite read median
// 0.93 ms, IQR 5 ms, and a SCHED_FIFO 60 loop taking 30 ms of every 50 on the probes' CPU an
// IQR of 0.16-0.17 ms (docs/usage.md, verify).
inline constexpr double kBaseStallMedianUs = 300;
inline constexpr double kBaseStallIqrUs = 150;
// Or when host.h's promptness watch, over the whole reading (the goodput transfer included),
// found the host stalled (wake-ups >= 1 ms late) this share of the time or more. Measured on
// the same host: idle 0-0.7% per reading; under the CPU hog 0-1.7%, but 2-11% while mini's
// 10 Gbit/s NVLink class moved its own transfer (no rate or delay checked there, > 2 Gbit/s);
// the SCHED_FIFO 60 loop above 60%, and a host at load 9 that failed a 25 Mbit/s rate by 6.7%
// 5.2% (89 ms at worst).
inline constexpr double kPromptStallShare = 0.02;
// Or when the delay stages released packets host.h's kStageLateUs late on average over it.
// (At load 9 — the hog and other sessions' builds on the 2 cores — the base's IQR reached
// 0.15-0.21 ms and the stages 30-65 us late: such a host stalls, and verify's misses there
// passed on a later reading.) CPUs busy alone are not a stall: the probes and the stages run
// SCHED_FIFO, ahead of any other work (under a CPU hog on both cores the base read as above, the
// CPUs 99-100% busy, and verify passed; verify's own transfers alone took them to 89%); the busy
// share is shown beside.

// What stalled the host during a reading, in words ("" when nothing did): the base over lo
// (m.base) and the host's state over the reading (`host`: sample_host before and after). Pure.
std::string host_stall(const Measurement& m, const std::optional<HostLoad>& host);

// A rootless lab's timing without real-time priority (docs/design-rootless.md Risks): when every
// check out of tolerance is a delay or jitter check of a sub-millisecond delay and the delay
// stages or verify's own threads ran SCHED_OTHER (`host`: the stages' and the promptness
// watcher's scheduling), the reason, in words, that such a miss says more about the missing
// priority than about the link; "" otherwise. The readings take it as they take host_stall():
// measured again, and NOT JUDGED with this reason if it stays. Pure.
inline constexpr double kSubMsDelayMs = 1.0;
std::string without_realtime(const std::vector<Check>& checks, const std::optional<HostLoad>& host);

// A jitter reading that one host stall spoiled: when every check out of tolerance is jitter (a
// standard deviation, which a few outliers move: two probes held 16-18 ms on a 1 ms-jitter link
// read +18%), the probes' worst round trip lies more than kOutlierSigmas standard deviations of
// the configured jitter past their median (a normal sample goes that far about once in 3 million
// probes), and verify's promptness watcher (host.h) saw the host stall at least half that long in
// the same reading, the reason in words; "" otherwise. A heavy tail the host did not stall for
// stays a FAIL. The readings take it as they take host_stall(). Pure.
inline constexpr double kOutlierSigmas = 5;
std::string outlier_stall(const std::vector<Check>& checks, const Measurement& m,
                          const std::optional<HostLoad>& host);

// A class reading's stall, wherever it is judged (the host that measured it, or the coordinator
// reading it off the wire): host_stall, else without_realtime, else outlier_stall. Pure.
std::string reading_stall(const std::vector<Check>& checks, const Measurement& m,
                          const std::optional<HostLoad>& host);

// One measurement of a class and its checks, with the host's state over it.
struct Reading {
  MeasureOutcome outcome;
  std::vector<Check> checks;
  std::optional<HostLoad> host;  // over the reading; absent when not sampled
  std::string stall;             // host_stall(); empty: the host was fine
};

// Whether every failed step of a reading ran out of time (MeasureOutcome::timeouts) and the host
// stalled over it (`stall`, host_stall()): a goodput report that never came while the probes'
// own path over lo, or the host, stalled says nothing about the link. Pure.
bool timed_out_while_stalled(const MeasureOutcome& o, const std::string& stall);

// The verdict of one reading (pure): a failed step fails, unless every failed step timed out
// while the host stalled (not judged); a check out of tolerance fails when the host was fine and
// is not judged when it stalled; otherwise pass.
ClassVerdict judge(const Reading& r);

// A class is measured at most this many times.
inline constexpr int kMaxReadings = 3;
// Whether to measure a class again after `readings` (in order, the newest last; pure). A
// reading that passed, or in which a step failed (not a tolerance matter), is the last. One
// with a check out of tolerance is measured again once whatever the host showed (one probe
// train lasts 0.2-1 s, and a hiccup inside it moves a median by tens of µs where a
// sub-millisecond delay is allowed 45, without showing in the base), and again while the host
// stalled during the newest, up to kMaxReadings in all. One whose failed steps all timed out while
// the host stalled is measured again too (timed_out_while_stalled). The newest reading is judged.
bool measure_again(const std::vector<Reading>& readings);

struct ClassResult {
  LinkClass cls;
  plan::Link link;  // the representative link; `emulated` holds the figures in force
  // The scenario's figures when `link set` changed the link (the checks judge `link.emulated`).
  std::optional<plan::EmulatedFigures> scenario;
  ProbeTarget target;  // empty addr when it could not be chosen
  MeasureRequest request;
  // The judged reading: the last one taken (measure_again).
  MeasureOutcome outcome;
  std::vector<Check> checks;
  std::optional<HostLoad> host;  // the host over the judged reading
  std::string stall;             // host_stall() of the judged reading
  // The readings taken before it, oldest first, reported beside (empty when measured once).
  std::vector<Reading> earlier;
  ClassVerdict verdict() const;
  bool failed() const { return verdict() == ClassVerdict::kFail; }
  bool not_judged() const { return verdict() == ClassVerdict::kNotJudged; }
};

// Measures a class with `measure` (one reading each call) until measure_again says no or `stop`
// is set; the last reading becomes the class's judged one, the others `earlier`. `on_again` is
// told before each further reading (its number from 2, and why). Pure but for what the
// callbacks do.
void measure_class(ClassResult& c, const std::function<Reading()>& measure,
                   const std::function<bool()>& stop,
                   const std::function<void(int n, const std::string& why)>& on_again);

// One path class of `verify --paths`.
struct PathResult {
  PathPair pair;
  ProbeTarget target;  // a_netns/addr/b_netns; a_addr = the source address the replies go to
  Path out, back;      // the links crossed, there and back (the figures in force on each)
  MeasureRequest request;
  MeasureOutcome outcome;
  PathCheck check;
  std::optional<HostLoad> host;  // the host over the judged reading
  std::string stall;             // host_stall() of the judged reading
  // The readings taken before the judged one, oldest first, reported beside.
  struct Earlier {
    PathCheck check;
    std::string stall;
  };
  std::vector<Earlier> earlier;
  std::vector<std::string> errors;  // the path could not be found
  // As a class's (judge): the path not found or a step failed, fail; out of tolerance, fail
  // on a fine host and not judged while it stalled (`stall`); else pass.
  ClassVerdict verdict() const;
  bool failed() const { return verdict() == ClassVerdict::kFail; }
  bool not_judged() const { return verdict() == ClassVerdict::kNotJudged; }
};

// Whether a path is measured again after `readings` readings, the newest `check`/`outcome`
// with host_stall() `stall`, as a class is (measure_again above): its check failed and every
// step ran, once whatever the host showed and again while it stalled, up to kMaxReadings. The
// newest is judged.
bool measure_again(const PathCheck& check, const MeasureOutcome& outcome, int readings,
                   const std::string& stall);

struct VerifyReport {
  std::string lab;
  std::string scenario;
  std::string shaping;      // the shaping backend as `status` reports it
  nlohmann::json backends;  // all of `status --json`'s "backends" (stage health included)
  bool quick = false;
  Settings settings;
  bool single_link = false;  // --link
  std::vector<ClassResult> classes;
  // A lab over several hosts: this host (the coordinator) and every host that took part, in
  // [[host]] order (each class says where it was measured: LinkClass::host, serve_host).
  std::string lab_host;
  std::vector<std::string> hosts;
  bool paths_mode = false;  // --paths: `paths` instead of `classes`
  std::vector<PathResult> paths;
  bool under_load = false;        // --under-load: measured while `load` flows ran
  std::vector<std::string> load;  // each flow and what it carried
  std::vector<std::string> load_errors;
  std::optional<HostLoad> host;  // over the measuring window
  bool interrupted = false;
  bool passed() const;
  // Pass; fail (a class or path failed, the run was interrupted, the load did not start); or
  // not judged (no class failed and at least one was not judged). Exit 0, 1, 2.
  ClassVerdict verdict() const;
};

}  // namespace tb::verify
