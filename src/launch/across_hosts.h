// A job whose ranks run on several hosts of a lab (issue 19). Every host runs the same verb
// (`testbedctl bench LAB ...`, by hand or through scripts/tb-srun); each works out the same
// roles from its lab state: the coordinator is the first [[host]] (scenario order) holding a
// selected rank; the other hosts holding ranks join it over the underlay (multihost/session.h,
// TCP, --rendezvous-port) with the plan digest and the job digest; a host without a selected
// rank has nothing to do.
//
// The ranks still meet through their FileStore directory (collective/store.h) and write their
// rows into the results directory, as on one host: each host's testbedctl relays them
// (multihost/mirror.h) — a store key written on any host reaches every other host's store
// through the coordinator, and every rank's rows and log are gathered into the coordinator's
// results directory, where the rows are combined, bench.json written and the report drawn.
// Ranks never reach the underlay; they talk to each other over the lab's own links (VXLAN
// across the seam). A rank's progress board (collective/progress.h) counts the ranks of its own
// host only.
//
// Messages, coordinator → host: {"job": job.json}, {"put": chunk} (a store file), {"kill":
// grace_ms}, {"done": {"ok": bool}}; host → coordinator: {"put": chunk}, {"append": chunk} (its
// ranks' rows and logs), {"exit": {"rank", "code", "how"}}, {"bye": true} once its ranks have
// all exited and their files are sent.
// Not thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ipv4.h"
#include "lab/state.h"
#include "launch/command.h"
#include "launch/rank_group.h"
#include "multihost/mirror.h"
#include "multihost/session.h"
#include "workload/job.h"

namespace tb::launch {

// How long the coordinator waits for the other hosts to join, and a host for the coordinator.
inline constexpr std::chrono::seconds kJoinTimeout{60};

struct JobHosts {
  std::string me;           // this host ("" : the lab is on one host)
  std::string coordinator;  // "" : the lab is on one host
  Ipv4 coordinator_addr;
  std::vector<std::string> peers;      // hosts with ranks other than the coordinator
  std::vector<std::string> rank_host;  // per rank
  std::vector<char> local;             // per rank: on this host

  // Ranks on several hosts, this one coordinating / joining; none here at all.
  bool coordinates() const { return !me.empty() && me == coordinator && !peers.empty(); }
  bool joins() const { return !me.empty() && me != coordinator && local_count() > 0; }
  bool idle() const { return !me.empty() && local_count() == 0; }
  int local_count() const;
  // "node1 (10), node2 (10)"
  std::string summary() const;
};

// The roles for ranks on `nodes` (in rank order) on the host whose state `lab` is.
Result<JobHosts> hosts_of(const lab::LabState& lab, const std::vector<std::string>& nodes);
// The roles for `job` on the host whose state `lab` is. A lab on one host: every rank local.
// A rank on a node of no known host, or --transport rdma across hosts: exit 2.
Result<JobHosts> job_hosts(const lab::LabState& lab, const workload::Job& job);

// What every host of a job must agree on (FNV-1a 64 of job.json without the run's own names).
std::string job_digest(const workload::Job& job);
std::string job_digest(const CommandJob& job);

// One turn of the coordinator's relay: the other hosts' ranks that ended, the bytes of their
// files that arrived (already written here), whether anything arrived.
struct RelayTurn {
  bool activity = false;
  std::vector<RemoteEnd> ends;
  std::vector<multihost::Chunk> appended;
  // Messages the relay does not know (a verb's own: `run`'s "ready", "part", "clock"), in order.
  std::vector<multihost::Message> other;
};

// The coordinator's side, inside the verb's wait loop.
class CoordinatorRelay {
 public:
  // Waits for every peer to join (exit 2 on a mismatch, a host that does not come, a port in
  // use), then hands each the job.
  static Result<CoordinatorRelay> open(const workload::Job& job, const JobHosts& hosts,
                                       const std::string& verb, const std::string& plan_digest,
                                       int port, const std::atomic<bool>& stop);
  // The same for any job: `job_msg` is what the hosts get as {"job": ...}; `store_dir` "" : none.
  static Result<CoordinatorRelay> open(const multihost::Hello& hello, const JobHosts& hosts,
                                       const nlohmann::json& job_msg, const std::string& store_dir,
                                       const std::string& results_dir, int port,
                                       const std::atomic<bool>& stop);
  RelayTurn turn(int wait_ms = 0);
  // Relays store files both ways, takes the peers' rows and logs and their ranks' exits; a host
  // that goes away fails its running ranks. True when something arrived.
  bool pump(RankGroup& group, int wait_ms = 0);
  // Tells every host to kill its ranks.
  void kill(int grace_ms);
  // A verb's own message to every host, or to one.
  void broadcast(const nlohmann::json& msg) { coord_.broadcast(msg); }
  Status send(const std::string& host, const nlohmann::json& msg) { return coord_.send(host, msg); }
  // After the ranks ended: waits (at most `limit`) for every host's last files and exits.
  void finish(RankGroup& group, std::chrono::milliseconds limit);
  // The same without a group: every turn's files to `on_turn`.
  void finish(const std::function<void(const RelayTurn&)>& on_turn,
              std::chrono::milliseconds limit);
  // The verdict, to every host; they exit with it.
  void done(bool ok);
  // What went wrong on the way (a host gone, a file that could not be written).
  const std::vector<std::string>& errors() const { return errors_; }

 private:
  CoordinatorRelay(multihost::Coordinator c, JobHosts hosts, const std::string& store_dir,
                   const std::string& results_dir);
  bool all_bye() const;
  multihost::Coordinator coord_;
  JobHosts hosts_;
  std::optional<multihost::DirMirror> store_;
  multihost::DirMirror results_;
  std::vector<std::string> byes_;
  std::vector<std::string> errors_;
};

struct PeerOutcome {
  bool ok = false;  // the coordinator's verdict
  std::string coordinator, results_dir;
  int ranks = 0;  // ranks run here
  std::vector<std::string> errors;
};

// A joining host's whole part: join, take the job, start this host's ranks, relay until the
// coordinator says done. `say` sees progress lines (joined, ranks started).
Result<PeerOutcome> serve_job(const workload::Job& mine, const JobHosts& hosts,
                              const std::string& verb, const std::string& plan_digest, int port,
                              const std::string& tb_rank,
                              const std::function<void(const std::string&)>& say,
                              const std::atomic<bool>& stop);

// `launch` over several hosts: the coordinator runs its ranks with run_command and relays the
// others' ends and lines (printed through `on_line` as they arrive); a joining host runs its
// ranks and relays them. --mpi across hosts: exit 2 (job_hosts_for_command).
Result<JobHosts> command_hosts(const lab::LabState& lab, const CommandJob& job);
Result<CommandResult> coordinate_command(const CommandJob& job, const JobHosts& hosts,
                                         const std::string& plan_digest, const CommandOptions& o,
                                         const std::atomic<bool>& stop,
                                         const std::function<void(int, std::string_view)>& on_line);
Result<PeerOutcome> serve_command(CommandJob mine, const JobHosts& hosts,
                                  const std::string& plan_digest, const CommandOptions& o,
                                  const std::function<void(int, std::string_view)>& on_line,
                                  const std::function<void(const std::string&)>& say,
                                  const std::atomic<bool>& stop);

}  // namespace tb::launch
