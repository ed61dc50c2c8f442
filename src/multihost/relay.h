// The session plumbing every verb across hosts shares (bench, launch, verify, run), one class
// per side, over session.h's connections:
//   - roles and the join (session.h choose_roles, Coordinator::gather, Peer::join);
//   - the job: the coordinator sends {"job": ...} once every host joined; a joined host waits
//     for it as long as the coordinator may still be gathering the others (kJoinTimeout after
//     this host joined) and a margin, so hosts started up to kJoinTimeout apart all meet;
//   - an attachable file relay (mirror.h): a rendezvous store kept alike on every host (a file
//     written on any host reaches the others through the coordinator) and each joining host's
//     ranks' rows and logs appended into the coordinator's results directory, with the ranks'
//     exits ({"exit": {rank, code, how}}) and the host's last word ({"bye": true});
//   - waits for a key (await: one host's answer; from_all: every host's), each bounded, a host
//     gone or `stop` an error naming it;
//   - the clock exchange (kClockRounds round trips per host, the shortest taken) and t0: the
//     coordinator's t0 moved onto each host's own clock by its measured offset
//     ({"start": {"t0_ns"}}), so a host fires at the same moment whenever the message reaches it;
//   - the verdict ({"done": Verdict}), which every joining host exits with.
// What differs stays in the verb: bench's rows, launch's log lines, verify's per-class
// requests, run's ready barrier, stop iteration and part.
//
// Thread-safety: one thread drives a relay, unless run_in_background() is on: then a thread of
// the relay's own turns it every few ms and every method may be called from one other thread
// (run's main thread, while its timeline fires). Callbacks (on_ends, on_kill) run under the
// relay's lock, on whichever thread turns it: they must not call back into the relay.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "multihost/mirror.h"
#include "multihost/session.h"

namespace tb::multihost {

using NowNs = std::function<int64_t()>;  // a clock in ns (core/clock.h monotonic_ns unless set)

inline constexpr int kClockRounds = 5;
// How much longer than the join timeout a joined host waits for the job (the coordinator's
// own preparation once the last host joined).
inline constexpr std::chrono::seconds kJobMargin{30};

// A rank that ended on another host (the coordinator's view), or on this one (a joining host's).
struct RankEnd {
  int rank = 0;
  int code = 1;
  std::string how;
};
struct RankState {
  bool running = true;
  int code = 0;
  std::string how;
};

// What a job keeps alike across hosts. "" : none.
struct Dirs {
  std::string store;                                // kWhole, both ways through the coordinator
  std::string results;                              // kAppend, joining hosts → the coordinator
  std::set<std::string> skip{"store", "job.json"};  // top-level names of `results` not sent
};

class CoordinatorRelay {
 public:
  // Coordinator::gather (exit 2 on a mismatch, a host that does not come, a port in use).
  static Result<CoordinatorRelay> open(const Hello& mine, const Roles& roles, int port,
                                       std::chrono::milliseconds join_timeout,
                                       const std::atomic<bool>& stop);
  CoordinatorRelay(CoordinatorRelay&&) noexcept;
  CoordinatorRelay& operator=(CoordinatorRelay&&) noexcept;
  ~CoordinatorRelay();

  // Relays `dirs` from now on; `rank_host`: per rank, the host it runs on (a rank's exit is
  // taken from that host only; a host gone ends its ranks).
  void attach(const Dirs& dirs, std::vector<std::string> rank_host);
  // Other hosts' rank ends as they arrive; unset: kept for take_ends().
  void on_ends(std::function<void(const std::vector<RankEnd>&)> f);
  // A host that goes away before its bye (its machine down, the underlay cut): its name and
  // "host X went away (why)", as it is noticed (under the relay's lock, on the thread that
  // turns). Unset: only errors() says so.
  void on_gone(std::function<void(const std::string& host, const std::string& what)> f);
  // Keeps the appended chunks (already written here) for take_appended().
  void keep_appended();

  void broadcast(const nlohmann::json& msg, const std::string& except = "");
  Status send(const std::string& host, const nlohmann::json& msg);
  // One turn: files relayed, exits, byes and closings taken, the verb's messages kept. True
  // when something arrived. With the background thread on, the thread turns: false at once.
  bool turn(int wait_ms = 0);
  std::vector<RankEnd> take_ends();
  std::vector<Chunk> take_appended();

  // The next {key: ...} from `host`; that host's other messages go to `on_other` (unset: kept),
  // other hosts' are kept. Gone, `stop`, `limit`: an error ("host X went away", "host X did not
  // answer "key" within N s").
  Result<nlohmann::json> await(const std::string& host, const std::string& key,
                               std::chrono::milliseconds limit, const std::atomic<bool>& stop,
                               const std::function<void(const nlohmann::json&)>& on_other = {});
  // {key: ...} from every joined host, by host.
  Result<std::map<std::string, nlohmann::json>> from_all(const std::string& key,
                                                         std::chrono::milliseconds limit,
                                                         const std::atomic<bool>& stop);
  // Each joined host's clock minus this one's, and the bound of its error (clock_error).
  struct Clocks {
    std::map<std::string, int64_t> offset, error;
  };
  Result<Clocks> measure_clocks(const std::atomic<bool>& stop);
  // {"start": {"t0_ns"}} to every joined host: `t0` (this host's clock) on that host's clock.
  void start_at(int64_t t0, const std::map<std::string, int64_t>& offsets);

  void kill(int grace_ms);
  // Turns until every joined host said bye (or went away) and `also()` holds, at most `limit`;
  // a host without its last word: an error.
  void finish(std::chrono::milliseconds limit, const std::function<bool()>& also = {});
  // Stops the background thread and tells every host the verdict.
  void done(const Verdict& v);
  std::vector<std::string> errors() const;
  std::vector<std::string> hosts() const;

  void run_in_background();
  void halt();
  void set_clock(NowNs now);

 private:
  struct State;
  explicit CoordinatorRelay(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

class PeerRelay {
 public:
  // Peer::join (exit 2 when refused or the coordinator is not reached within `join_timeout`).
  static Result<PeerRelay> join(const Hello& mine, const Roles& roles, int port,
                                std::chrono::milliseconds join_timeout,
                                const std::atomic<bool>& stop);
  PeerRelay(PeerRelay&&) noexcept;
  PeerRelay& operator=(PeerRelay&&) noexcept;
  ~PeerRelay();

  // The coordinator's {"job": ...}, within join_timeout + kJobMargin.
  Result<nlohmann::json> await_job(const std::atomic<bool>& stop);
  // Relays `dirs`; `local`: per rank, whether it runs here; `ranks`: their states (unset: the
  // verb says each end itself, rank_ended).
  void attach(const Dirs& dirs, std::vector<char> local,
              std::function<std::vector<RankState>()> ranks = {});
  // {"kill": grace_ms} from the coordinator (unset: ignored, the verb's own limits act).
  void on_kill(std::function<void(int)> f);
  // The coordinator gone before this host finished (its machine down, the underlay cut, its
  // testbedctl killed: "host X went away (why)"), or its verdict come before it (it failed on
  // its side: "host X ended the run before this host's part ..."): said once, as it is noticed
  // (under the relay's lock, on the thread that turns). Unset: the next await or verdict says so.
  void on_gone(std::function<void(const std::string& what)> f);

  Status send(const nlohmann::json& msg);
  // One turn: this host's new files and its ranks' ends out, the coordinator's messages in
  // (store files written, kill, clock answered at once, the rest kept). With the background
  // thread on: nothing (the thread turns).
  Status turn(int wait_ms = 0);
  // Rank `r` ended here: its last files, then its exit (once).
  void rank_ended(int r, int code, const std::string& how);
  // The coordinator's next {key: ...}. Its verdict first, gone, `stop`, `limit`: an error.
  Result<nlohmann::json> await(const std::string& key, std::chrono::milliseconds limit,
                               const std::atomic<bool>& stop);
  // The coordinator's next message of any kind that the relay does not handle itself (its
  // verdict included); gone, `stop`, `limit`: an error.
  Result<nlohmann::json> next(std::chrono::milliseconds limit, const std::atomic<bool>& stop);
  // Until the coordinator's clock exchange is answered (turn answers each round at once).
  Status answer_clocks(std::chrono::milliseconds limit, const std::atomic<bool>& stop);
  // The coordinator's t0 from its {"start": ...}, on this host's clock (bounded to within a
  // minute of now: a nonsense offset cannot park the timeline).
  int64_t t0_of(const nlohmann::json& start) const;
  // Stops the background thread; this host's last files, every local rank's exit not said yet
  // (a rank still running as killed), bye; then `tail` when given.
  Status finish(const nlohmann::json* tail = nullptr);
  // This host gives up its part before starting it (it refuses the job): `why` goes to the
  // coordinator, which says "host X went away (why)" when the connection ends. Best effort.
  void leave(const std::string& why);
  // The verdict if it came; an error when the coordinator went away before it.
  Result<std::optional<Verdict>> check_verdict();
  // Turns until the verdict, at most `limit`.
  Result<Verdict> verdict(std::chrono::milliseconds limit, const std::atomic<bool>& stop);
  std::vector<std::string> errors() const;
  const std::string& coordinator() const;

  void run_in_background();
  void halt();
  void set_clock(NowNs now);

 private:
  struct State;
  explicit PeerRelay(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

}  // namespace tb::multihost
