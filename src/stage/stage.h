// DelayStage: the userspace delay stage for kernels without sch_netem. One process serves several
// NFQUEUE queues (one per link direction) in the network namespace it runs in, holding each
// packet for its queue's delay (plus jitter, never reordering) and releasing due packets with
// one batch verdict per queue. A port of the prototype in research/limits.md 4.
//
// Fail-closed: the caller installs its NFQUEUE rules WITHOUT --queue-bypass (netfilter_rules.h
// does), so when this process is gone the kernel drops the link's packets instead of passing
// them undelayed; with `fail_open` a full queue passes packets undelayed instead of dropping.
// Closing: on SIGTERM/SIGINT (or when `duration` ends) every held packet is accepted at once, then
// the queues are unbound. SIGHUP re-reads `config_path` and applies it in place: queues are added,
// changed (later packets get the new delay) or removed (their packets accepted first); write the
// file atomically (rename over it) before signalling. A config that does not parse is refused
// whole (the queues stay as they were); one that partly fails to apply keeps what succeeded;
// either way the stats file's "reload_error" says why. Confirmed changes: the config's
// "# generation N" line (queue_spec.h) is published as the stats file's "generation", with
// "reload_error" the result of that read, and the stats file is rewritten at once after each
// reload, so a writer waits for its own N and reads whether it was taken (lab/daemons.h).
//
// Timing (calibration.h): each packet's deadline counts from the kernel's receive stamp, less the
// release cost, so the stage's own wake-up and verdict no longer add to the delay; the loop
// sleeps in ppoll until shortly before the next deadline and busy-waits the rest (WakeTimer:
// bounded advance, at most 5% of a core). A burst being read never holds back a due packet:
// the drain releases and sends due verdicts between datagrams. `calibrate = false` is the old
// behaviour (deadline = read time + delay, sleep to the deadline), kept for comparison.
// The release cost is the stage's own, measured (calibration.h ReleaseCalibration): at start
// and every kProbeIntervalNs it sends itself a marked UDP probe over loopback, which its own
// rule queues to kProbeQueue; it accepts the probe in a verdict of its own and reads the probe's
// kernel receive stamp. A probe is sent only when no packet is due within kProbeHeadroomNs, so
// it never holds back a due packet; one that is not back within a second is counted lost.
// Without loopback or iptables (or with `release_probe` off) it keeps kReleaseCostNs and the
// stats file says why.
//
// Owns its netlink socket, a timestamp-enabling socket and the DelayLines. Single-threaded:
// run() is the only loop.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "core/units.h"
#include "stage/calibration.h"
#include "stage/delay_line.h"
#include "stage/mark_table.h"
#include "stage/nfq_socket.h"
#include "stage/queue_spec.h"
#include "stage/stats.h"

namespace tb::stage {

struct StageOptions {
  std::vector<QueueSpec> queues;  // from the command line; always served
  std::string config_path;        // more queues, one per line; re-read on SIGHUP ("" = none)
  std::string stats_path;         // "" = no stats file
  Duration stats_interval{500'000'000};
  Duration duration{};  // 0 = until a signal
  bool fail_open = false;
  int rcvbuf_bytes = 64 << 20;  // as the prototype: bursts of 64 KB super-packets
  // How the process is scheduled, as the stats file reports it (set by tb-delayd's main).
  std::string scheduling = "SCHED_OTHER";
  bool calibrate = true;  // kernel stamps, release cost, early wake and spin (calibration.h)
  // Measure the release cost with loopback probes (needs `calibrate`); off: kReleaseCostNs.
  bool release_probe = true;
  // The release probe's rule is already in place, installed by whoever started the stage (a
  // lab's `up`, with the namespace's other rules: netfilter_rules.h NetnsRules); the stage
  // neither adds nor removes it, so it starts and stops without running iptables. A rule that
  // is missing after all shows as probes that never come back: the constant is used instead.
  bool probe_rule_installed = false;
  // The host's ECN mark table (mark_table.h), read by the queues with a `mark` slot: they copy
  // whole packets and mark ECT ones CE with their slot's probability. "" = no marking.
  std::string mark_table;
};

class DelayStage {
 public:
  // Opens the socket in the calling thread's namespace, reads the config file, binds every
  // queue (an error names the queue; EPERM: another process serves it) and writes the
  // first stats file, so its appearance tells a caller the stage is ready.
  static Result<DelayStage> open(StageOptions options);

  // Runs until SIGTERM/SIGINT arrives on `signal_fd` (a signalfd for SIGTERM, SIGINT and SIGHUP
  // that the caller owns and has blocked) or `duration` ends; then accepts every held packet,
  // unbinds and writes the last stats. Fails only when the socket breaks.
  Status run(int signal_fd);

 private:
  explicit DelayStage(StageOptions options, NfqSocket socket);

  // The queues of the command line and the config file; `generation` gets the config's
  // "# generation N" (0 without one), also when the queues do not parse.
  Result<std::vector<QueueSpec>> wanted_queues(uint64_t* generation = nullptr) const;
  // Brings the served queues to `wanted`; keeps going past a failed queue, returns the first
  // error.
  Status apply(const std::vector<QueueSpec>& wanted);
  void reload();
  void on_event(const NlEvent& event);
  void release_due();
  // The earliest deadline of any queue, if a packet is held.
  std::optional<int64_t> next_deadline() const;
  // Releases what is due now and sends the verdicts (between datagrams of a drain).
  Status release_and_flush();
  // Busy-waits until `deadline` (bounded by the timer's advance), counting the spin.
  void spin_until(int64_t deadline);
  // Seeds the timer with a few timed sleeps (the first packets then get an advance too).
  void probe_timer();
  Status flush_verdicts();
  // The release probe (ReleaseCalibration). setup_probe opens its socket, binds kProbeQueue and
  // installs the rule, then takes kStartProbes probes; a failure leaves the constant and a note.
  void setup_probe();
  // Sends one probe when none is in flight and one is due (a lost one is given up after 1 s).
  void maybe_probe(int64_t now, bool force = false);
  // The probe's notice: every pending verdict goes first, then the probe's alone, timed.
  void on_probe_notice(const PacketNotice& p);
  // Reads the probe's datagrams; one with the awaited sequence is one release sample.
  void read_probe();
  void close_probe();
  void write_stats();
  void close_all();

  // ECN marking (mark_table.h): a marked packet's changed bytes wait with it in its DelayLine's
  // order; release_due gives it its own verdict with the bytes, the rest in batches around it.
  struct Marked {
    uint32_t id;
    std::vector<uint8_t> bytes;
  };
  struct MarkQueue {
    int slot = -1;
    std::deque<Marked> held;
    QueueMarks counts;
  };
  // Marks (or not) the packet just admitted to a marking queue.
  void mark(MarkQueue& mq, const PacketNotice& p);
  // The mark table, opened on first need (retried at most once a second while it fails).
  MarkTable* mark_table();
  // Verdicts for `line`'s packets up to `last`, the first of them `first`: batches, and each
  // marked one alone with its bytes.
  void release_marked(uint16_t num, MarkQueue& mq, uint32_t first, uint32_t last);

  StageOptions options_;
  NfqSocket socket_;
  std::map<uint16_t, MarkQueue> marking_;
  std::optional<MarkTable> mark_table_;
  std::string mark_table_error_;
  int64_t mark_table_retry_ns_ = 0;
  std::mt19937 mark_rng_;
  // A socket with SO_TIMESTAMPNS, held open so the kernel stamps received packets (the flag is
  // host-wide while any such socket exists: net_enable_timestamp). Empty when uncalibrated.
  UniqueFd stamp_socket_;
  WakeTimer timer_;
  std::map<uint16_t, DelayLine> lines_;
  NlBuffer verdicts_;  // pending verdict messages, sent in order
  ProcessStats process_;
  std::string stats_error_;  // last stats write failure, logged once
  int64_t start_ns_ = 0;
  // When a read last found the socket empty (taken before that read): an unstamped packet read
  // later arrived after it, which bounds its estimated wait (calibration.h, UnstampedWait).
  int64_t last_empty_ns_ = 0;
  uint64_t seed_ = 0;
  // The release probe: a UDP socket connected to itself on loopback, SO_MARK kProbeMark,
  // SO_TIMESTAMPNS. Empty when not probing (release_note_ says why).
  UniqueFd probe_socket_;
  bool probe_rule_ = false;       // the release probe's rule is in force
  bool probe_rule_ours_ = false;  // ... and this stage added it: it removes it when it stops
  bool probe_bound_ = false;
  ReleaseCalibration release_;
  std::string release_note_;
  uint64_t probe_seq_ = 0;
  bool probe_in_flight_ = false;
  int64_t probe_sent_ns_ = 0;       // CLOCK_MONOTONIC, when the awaited probe was sent
  int64_t probe_verdict_real_ = 0;  // CLOCK_REALTIME, when its verdict's send began (0: not yet)
  int64_t next_probe_ns_ = 0;
};

}  // namespace tb::stage
