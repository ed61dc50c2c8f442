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
// The session, the job, the file relay and the verdict are multihost/relay.h's; what is bench's
// or launch's own is here: the job message (bench: job.json; launch: its run id), a joining
// host's results under its own results root with the coordinator's run id (job_here), bench's
// rank group fed the other hosts' exits (pump), launch's log chunks turned into lines.
// Messages: multihost/relay.h's {"job"}, {"put"}, {"append"}, {"exit"}, {"bye"}, {"kill":
// grace_ms}, {"done"}.
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
#include "multihost/relay.h"
#include "multihost/session.h"
#include "workload/job.h"

namespace tb::launch {

// How long the coordinator waits for the other hosts to join, and a host for the coordinator.
inline constexpr std::chrono::seconds kJoinTimeout = multihost::kJoinTimeout;

// The roles (multihost/session.h: the first [[host]] with a selected rank coordinates) and,
// per rank, its host and whether it runs here.
struct JobHosts : multihost::Roles {
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

// The lab's hosts as the session names them.
std::vector<multihost::HostAddr> lab_hosts(const lab::LabState& lab);
// The roles for ranks on `nodes` (in rank order) on the host whose state `lab` is.
Result<JobHosts> hosts_of(const lab::LabState& lab, const std::vector<std::string>& nodes);
// Whether a verb runs --transport rdma between hosts: bench does (its marks from
// rxe_for_marks, checked by every joining host: rdma_marks_differ); `run` not yet.
enum class RdmaAcross { kRefused, kBench };
// The roles for `job` on the host whose state `lab` is. A lab on one host: every rank local.
// A rank on a node of no known host, or --transport rdma across hosts under kRefused: exit 2.
Result<JobHosts> job_hosts(const lab::LabState& lab, const workload::Job& job,
                           RdmaAcross rdma = RdmaAcross::kRefused);

// The rxe devices the RDMA marks of a job count on (launch::mark_rdma_pairs), the same on every
// host of a lab whose hosts all made rxe devices: this host's own (lab.rxe) and, when this host
// made some (lab.rdma "rxe") in a lab over several hosts, the ones `up` makes on every other
// host's GPU rail NICs (plan/rxe.h: one per GPU rail NIC wherever the kernel carries rxe) —
// assumed there, not seen: each joining host checks its marks against the coordinator's
// (rdma_marks_differ) before it starts a rank. A lab on one host: lab.rxe.
std::vector<apply::RxeDevice> rxe_for_marks(const lab::LabState& lab);

// "" when the coordinator's job (`theirs`) marks the same rank pairs RDMA as this host's
// (`mine`, from rxe_for_marks here); else why not, naming the first pair that differs, its
// ranks' hosts and what to do (exit 2 on the joining host: a pair one end dials over RDMA and
// the other over TCP would never meet).
std::string rdma_marks_differ(const workload::Job& theirs, const workload::Job& mine,
                              const JobHosts& hosts);

// What every host of a job must agree on (FNV-1a 64 of job.json without the run's own names).
std::string job_digest(const workload::Job& job);
std::string job_digest(const CommandJob& job);

// The coordinator's job as this host runs it: the coordinator's run id (it names the run on
// every host), but this host's own results root — never the coordinator's absolute paths,
// which need not exist, or mean the same, here. `mine`: the job this host prepared.
workload::Job job_here(const workload::Job& theirs, const workload::Job& mine);
// The same for `launch`: `mine` with the coordinator's run id, under this host's results root.
CommandJob command_here(CommandJob mine, const std::string& run_id);

// The coordinator's side of bench and launch, inside the verb's wait loop: waits for every
// peer to join (exit 2 on a mismatch, a host that does not come, a port in use), makes the
// directories, relays them (`store_dir` "" : none) and hands each host {"job": job_msg}.
Result<multihost::CoordinatorRelay> open_relay(const multihost::Hello& hello, const JobHosts& hosts,
                                               const nlohmann::json& job_msg,
                                               const std::string& store_dir,
                                               const std::string& results_dir, int port,
                                               const std::atomic<bool>& stop);
Result<multihost::CoordinatorRelay> open_relay(const workload::Job& job, const JobHosts& hosts,
                                               const std::string& verb,
                                               const std::string& plan_digest, int port,
                                               const std::atomic<bool>& stop);
// One turn of the relay; other hosts' rank ends into `group`. True when something arrived.
bool pump(multihost::CoordinatorRelay& relay, RankGroup& group, int wait_ms = 0);
// After the ranks ended: every host's last files and exits (at most `limit`); a rank of a host
// without its last word is failed.
void finish(multihost::CoordinatorRelay& relay, RankGroup& group, const JobHosts& hosts,
            std::chrono::milliseconds limit);

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
