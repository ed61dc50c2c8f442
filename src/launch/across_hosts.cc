#include "launch/across_hosts.h"

#include <algorithm>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/shm_names.h"
#include "launch/bench_run.h"
#include "plan/rxe.h"
#include "plan/topology.h"

namespace tb::launch {
namespace {
using Clock = std::chrono::steady_clock;
using multihost::Chunk;

multihost::Hello hello_for(const workload::Job& job, const JobHosts& hosts, const std::string& verb,
                           const std::string& plan_digest) {
  return {job.lab, hosts.me, verb, plan_digest, job_digest(job)};
}

// The joining host's side of a job's directories: its store both ways, its ranks' rows and logs
// to the coordinator (the store is mirrored on its own; job.json is each host's).
multihost::Dirs job_dirs(const std::string& store_dir, const std::string& results_dir) {
  return {store_dir, results_dir, {"store", "job.json"}};
}

std::string joined_text(const JobHosts& hosts, int port) {
  return "joined host " + hosts.coordinator + " (" + hosts.coordinator_addr.to_string() + ":" +
         std::to_string(port) + ")";
}

// The parent directory of `path` ("" : none).
std::string parent_of(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "" : path.substr(0, slash);
}

}  // namespace

int JobHosts::local_count() const {
  return static_cast<int>(std::count(local.begin(), local.end(), 1));
}

std::string JobHosts::summary() const {
  std::map<std::string, int> count;
  std::vector<std::string> order;
  for (const auto& h : rank_host)
    if (count[h]++ == 0) order.push_back(h);
  std::string out;
  for (const auto& h : order)
    out += (out.empty() ? "" : ", ") + h + " (" + std::to_string(count[h]) + ")";
  return out;
}

std::vector<multihost::HostAddr> lab_hosts(const lab::LabState& lab) {
  std::vector<multihost::HostAddr> out;
  for (const auto& h : lab.hosts) out.push_back({h.name, h.underlay});
  return out;
}

Result<JobHosts> hosts_of(const lab::LabState& lab, const std::vector<std::string>& nodes) {
  JobHosts h;
  h.local.assign(nodes.size(), 1);
  if (lab.host.empty() || lab.hosts.empty()) return h;
  std::map<std::string, int> ranks_on;
  for (const auto& node : nodes) {
    const plan::Node* n = lab.topo.node(node);
    if (!n || n->host.empty())
      return bad_input("rank on " + node + ": lab " + lab.lab + " places that node on no host");
    h.rank_host.push_back(n->host);
    ++ranks_on[n->host];
  }
  static_cast<multihost::Roles&>(h) = multihost::choose_roles(
      lab.host, lab_hosts(lab), [&](const std::string& host) { return ranks_on.contains(host); });
  for (size_t r = 0; r < nodes.size(); ++r) h.local[r] = h.rank_host[r] == h.me ? 1 : 0;
  return h;
}

Result<JobHosts> job_hosts(const lab::LabState& lab, const workload::Job& job, RdmaAcross rdma) {
  std::vector<std::string> nodes;
  for (const auto& r : job.ranks) nodes.push_back(r.node);
  auto h = hosts_of(lab, nodes);
  if (!h) return h;
  if (!h->peers.empty() && job.transport.kind == workload::Transport::kRdma &&
      rdma == RdmaAcross::kRefused)
    return bad_input("--transport rdma: the selected ranks are on hosts " + h->summary() +
                     "; this verb does not run RDMA between hosts yet (`bench --transport rdma` "
                     "does): use --transport tcp, or ranks on one host");
  return h;
}

std::vector<apply::RxeDevice> rxe_for_marks(const lab::LabState& lab) {
  std::vector<apply::RxeDevice> out = lab.rxe;
  if (lab.host.empty() || lab.hosts.empty() || lab.rdma != "rxe") return out;
  for (const auto& nic : plan::rail_nics(lab.topo)) {
    const plan::Node* n = lab.topo.node(nic.node);
    if (!n || n->host.empty() || n->host == lab.host) continue;
    out.push_back({nic.node, nic.netns, nic.ifname, plan::rxe_name(nic.netns, nic.ifname), -1, ""});
  }
  return out;
}

std::string rdma_marks_differ(const workload::Job& theirs, const workload::Job& mine,
                              const JobHosts& hosts) {
  const size_t n = mine.ranks.size();
  auto mark = [](const workload::Job& j, size_t a, size_t b) {
    return a < j.rdma.size() && b < j.rdma[a].size() && j.rdma[a][b] != 0;
  };
  auto host_of = [&](size_t r) { return r < hosts.rank_host.size() ? hosts.rank_host[r] : "?"; };
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const bool t = mark(theirs, i, j), m = mark(mine, i, j);
      if (t == m) continue;
      const auto pair = "ranks " + std::to_string(i) + " (" + mine.ranks[i].node + ", host " +
                        host_of(i) + ") and " + std::to_string(j) + " (" + mine.ranks[j].node +
                        ", host " + host_of(j) + ")";
      return "--transport rdma: host " + hosts.coordinator + " runs " + pair + " over " +
             (t ? "RDMA" : "TCP") + ", this host (" + hosts.me + ") over " + (m ? "RDMA" : "TCP") +
             ": a host takes a rail pair over RDMA when it made rxe devices (`up` on a kernel "
             "with rdma_rxe: `testbedctl status` on each host says rdma) and holds one for its "
             "own rank, and counts on the other hosts having made theirs; bring the lab up with "
             "rxe on every host (the same kernel support), or use --transport tcp";
    }
  return "";
}

Result<JobHosts> command_hosts(const lab::LabState& lab, const CommandJob& job) {
  std::vector<std::string> nodes;
  for (const auto& r : job.ranks) nodes.push_back(r.node);
  auto h = hosts_of(lab, nodes);
  if (!h) return h;
  if (!h->peers.empty() && job.mpi)
    return bad_input("--mpi: the selected ranks are on hosts " + h->summary() +
                     "; mpirun's daemons start through `testbedctl exec` on this host only: "
                     "select ranks on one host, or drop --mpi (one process per rank, on every "
                     "host)");
  return h;
}

std::string job_digest(const workload::Job& job) {
  nlohmann::json j = workload::to_json(job);
  for (const char* k : {"run_id", "results_dir", "store_dir", "rdma", "rdma_fallback"}) j.erase(k);
  return multihost::digest(j.dump());
}

std::string job_digest(const CommandJob& job) {
  nlohmann::json j = to_json(job, nullptr);
  for (const char* k : {"run_id", "results_dir"}) j.erase(k);
  return multihost::digest(j.dump());
}

workload::Job job_here(const workload::Job& theirs, const workload::Job& mine) {
  workload::Job j = theirs;
  j.results_dir = parent_of(mine.results_dir) + "/" + theirs.run_id;
  j.store_dir = j.results_dir + "/store";
  return j;
}

CommandJob command_here(CommandJob mine, const std::string& run_id) {
  mine.results_dir = parent_of(mine.results_dir) + "/" + run_id;
  mine.run_id = run_id;
  return mine;
}

Result<multihost::CoordinatorRelay> open_relay(const workload::Job& job, const JobHosts& hosts,
                                               const std::string& verb,
                                               const std::string& plan_digest, int port,
                                               const std::atomic<bool>& stop) {
  return open_relay(hello_for(job, hosts, verb, plan_digest), hosts, workload::to_json(job),
                    job.store_dir, job.results_dir, port, stop);
}

Result<multihost::CoordinatorRelay> open_relay(const multihost::Hello& hello, const JobHosts& hosts,
                                               const nlohmann::json& job_msg,
                                               const std::string& store_dir,
                                               const std::string& results_dir, int port,
                                               const std::atomic<bool>& stop) {
  auto relay = multihost::CoordinatorRelay::open(hello, hosts, port, kJoinTimeout, stop);
  if (!relay) return std::unexpected(relay.error());
  // The other hosts' files may come before this host's ranks start: the directories first.
  if (auto d = open_results_dir(results_dir); !d)
    return std::unexpected(with_context(d.error(), "create results directory"));
  if (!store_dir.empty())
    if (auto d = open_results_dir(store_dir); !d)
      return std::unexpected(with_context(d.error(), "create rendezvous store"));
  relay->attach(job_dirs(store_dir, results_dir), hosts.rank_host);
  relay->broadcast({{"job", job_msg}});
  return relay;
}

bool pump(multihost::CoordinatorRelay& relay, RankGroup& group, int wait_ms) {
  const bool activity = relay.turn(wait_ms);
  for (const auto& e : relay.take_ends())
    group.remote_exit(static_cast<size_t>(e.rank), e.code, e.how);
  return activity;
}

void finish(multihost::CoordinatorRelay& relay, RankGroup& group, const JobHosts& hosts,
            std::chrono::milliseconds limit) {
  relay.finish(limit, [&] {
    pump(relay, group);
    return group.all_exited();
  });
  pump(relay, group);
  for (size_t r = 0; r < hosts.rank_host.size(); ++r)
    if (!hosts.local[r]) group.remote_exit(r, 128 + 9, "no word from host " + hosts.rank_host[r]);
}

namespace {

constexpr const char* kRefused = "refused the job";
constexpr const char* kCannotStart = "could not start its ranks";

// A joining host that gives up before its part: the coordinator is told why (PeerRelay::leave:
// "host X went away (host X refused the job: ...)" in its output), then `e` is this host's.
Result<PeerOutcome> leave(multihost::PeerRelay& relay, const JobHosts& hosts, const char* what,
                          Error e) {
  relay.leave("host " + hosts.me + " " + what + ": " + e.message);
  return std::unexpected(std::move(e));
}

}  // namespace

Result<PeerOutcome> serve_job(const workload::Job& mine, const JobHosts& hosts,
                              const std::string& verb, const std::string& plan_digest, int port,
                              const std::string& tb_rank,
                              const std::function<void(const std::string&)>& say,
                              const std::atomic<bool>& stop) {
  auto relay = multihost::PeerRelay::join(hello_for(mine, hosts, verb, plan_digest), hosts, port,
                                          kJoinTimeout, stop);
  if (!relay) return std::unexpected(relay.error());
  if (say) say(joined_text(hosts, port));
  // The job: the coordinator's (its run id names this run everywhere), under this host's root.
  auto msg = relay->await_job(stop);
  if (!msg) return std::unexpected(msg.error());
  PeerOutcome out;
  std::optional<workload::Job> job;
  {
    auto j = workload::job_from_json(*msg);
    if (!j)
      return leave(*relay, hosts, kRefused,
                   with_context(j.error(), "the job from host " + hosts.coordinator));
    if (j->ranks.size() != mine.ranks.size() || job_digest(*j) != job_digest(mine))
      return leave(*relay, hosts, kRefused,
                   bad_input("host " + hosts.coordinator +
                             " sent another job than this host "
                             "prepared")
                       .error());
    if (auto why = rdma_marks_differ(*j, mine, hosts); !why.empty())
      return leave(*relay, hosts, kRefused, bad_input(why).error());
    out.results_dir = j->results_dir;  // where the rows are gathered
    job = job_here(*j, mine);
  }
  out.coordinator = hosts.coordinator;
  out.ranks = hosts.local_count();
  auto group = start_ranks(*job, tb_rank, hosts.local);
  if (!group) return leave(*relay, hosts, kCannotStart, group.error());
  if (say)
    say("started " + std::to_string(out.ranks) + " rank(s) of " +
        std::to_string(job->ranks.size()) + "; results gathered on host " + hosts.coordinator +
        " in " + out.results_dir + " (this host's copy in " + job->results_dir + ")");
  relay->attach(job_dirs(job->store_dir, job->results_dir), hosts.local, [&] {
    std::vector<multihost::RankState> s;
    for (const auto& e : group->ranks()) s.push_back({e.running, e.code, e.how});
    return s;
  });
  relay->on_kill([&](int grace_ms) { group->kill_all(grace_ms); });
  // Bounded: while this host's ranks run, their own timeouts and the coordinator's limits end
  // the run (a coordinator gone, or silent for multihost/wire.h kSilentMs, closes the
  // connection); once they have all exited, this host waits for the verdict no longer than the
  // coordinator's idle limit (bench_run.h IdleWatch) and a grace.
  const auto quiet_limit = std::chrono::milliseconds(std::max(2 * job->timeout_ms, 120000) + 60000);
  auto local_exited = [&] {
    for (size_t r = 0; r < job->ranks.size(); ++r)
      if (hosts.local[r] && group->ranks()[r].running) return false;
    return true;
  };
  std::string why_not;  // the verdict did not come
  for (int rounds = 0; rounds < 100000000; ++rounds) {
    group->poll();
    (void)relay->turn(20);
    if (local_exited()) {
      (void)relay->finish();
      auto v = relay->verdict(quiet_limit, stop);
      if (v) out.ok = v->ok;
      if (!v) why_not = v.error().message;
      break;
    }
    // The coordinator gone (or its verdict early) before this host's ranks ended.
    auto v = relay->check_verdict();
    if (!v) why_not = v.error().message;
    if (!v || *v) break;
    if (stop.load()) {
      group->kill_all(1000);
      out.errors.push_back("interrupted: this host's ranks killed");
    }
  }
  if (!local_exited()) {
    group->kill_all(1000);
    group->poll();
    (void)relay->finish();
  }
  if (!why_not.empty()) out.errors.push_back(why_not);
  if (job->transport.intra_server == workload::IntraServer::kShm)
    if (auto left = remove_shm_files(shm_job_prefix(job->lab, job->run_id)); !left)
      out.errors.push_back("remove shared-memory segments: " + left.error().message);
  for (const auto& e : relay->errors()) out.errors.push_back(e);
  for (size_t r = 0; r < job->ranks.size(); ++r) {
    const auto& e = group->ranks()[r];
    if (hosts.local[r] && e.code != 0)
      out.errors.push_back("rank " + std::to_string(r) + " (" + job->ranks[r].node + "): " + e.how);
  }
  if (!out.errors.empty()) out.ok = false;
  return out;
}

namespace {

// Lines of other hosts' ranks from their logs' chunks (logs/rank<N>.log), whole lines only.
class RemoteLines {
 public:
  void take(const std::vector<Chunk>& appended, std::vector<std::pair<int, std::string>>& lines) {
    for (const auto& c : appended) {
      if (!c.rel.starts_with("logs/rank") || !c.rel.ends_with(".log")) continue;
      const std::string num = c.rel.substr(9, c.rel.size() - 13);
      if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
      const int r = std::stoi(num);
      std::string& p = partial_[r];
      p += c.data;
      size_t start = 0;
      for (size_t nl; (nl = p.find('\n', start)) != std::string::npos; start = nl + 1)
        lines.emplace_back(r, p.substr(start, nl - start));
      p.erase(0, start);
    }
  }

 private:
  std::map<int, std::string> partial_;
};

multihost::Hello command_hello(const CommandJob& job, const JobHosts& hosts,
                               const std::string& plan_digest) {
  return {job.lab, hosts.me, "launch", plan_digest, job_digest(job)};
}

}  // namespace

Result<CommandResult> coordinate_command(
    const CommandJob& job, const JobHosts& hosts, const std::string& plan_digest,
    const CommandOptions& o, const std::atomic<bool>& stop,
    const std::function<void(int, std::string_view)>& on_line) {
  auto relay = open_relay(command_hello(job, hosts, plan_digest), hosts,
                          {{"run_id", job.run_id}, {"results_dir", job.results_dir}}, "",
                          job.results_dir, o.rendezvous_port, stop);
  if (!relay) return std::unexpected(relay.error());
  relay->keep_appended();
  RemoteLines remote;
  CommandHooks h;
  h.local = hosts.local;
  h.remote_ends = true;
  h.turn = [&](std::vector<RemoteEnd>& ends, std::vector<std::pair<int, std::string>>& lines,
               std::string&) {
    relay->turn(0);
    for (const auto& e : relay->take_ends()) ends.push_back({e.rank, e.code, e.how});
    remote.take(relay->take_appended(), lines);
  };
  h.ending = [&](const std::string&, int grace_ms) { relay->kill(grace_ms); };
  auto res = run_command(job, o, stop, on_line, h);
  auto print_remote = [&] {
    std::vector<std::pair<int, std::string>> lines;
    remote.take(relay->take_appended(), lines);
    for (const auto& [r, line] : lines)
      if (on_line) on_line(r, line);
  };
  relay->finish(std::chrono::milliseconds(o.grace_ms + 15000), [&] {
    print_remote();
    return true;
  });
  print_remote();
  if (res) {
    for (const auto& e : relay->errors()) res->errors.push_back(e);
    res->hosts = hosts.summary();
  }
  const bool ok = res && res->ok();
  relay->done({ok, ok ? 0 : 1, job.results_dir});
  return res;
}

Result<PeerOutcome> serve_command(CommandJob mine, const JobHosts& hosts,
                                  const std::string& plan_digest, const CommandOptions& o,
                                  const std::function<void(int, std::string_view)>& on_line,
                                  const std::function<void(const std::string&)>& say,
                                  const std::atomic<bool>& stop) {
  auto relay = multihost::PeerRelay::join(command_hello(mine, hosts, plan_digest), hosts,
                                          o.rendezvous_port, kJoinTimeout, stop);
  if (!relay) return std::unexpected(relay.error());
  if (say) say(joined_text(hosts, o.rendezvous_port));
  auto msg = relay->await_job(stop);
  if (!msg) return std::unexpected(msg.error());
  const std::string run_id = msg->value("run_id", "");
  if (run_id.empty())
    return leave(*relay, hosts, kRefused,
                 fail("host " + hosts.coordinator + " sent a job without its run id").error());
  // The coordinator's run id, under this host's own results root.
  mine = command_here(std::move(mine), run_id);
  PeerOutcome out;
  out.coordinator = hosts.coordinator;
  out.results_dir = msg->value("results_dir", "");  // where every rank's log is gathered
  out.ranks = hosts.local_count();
  if (auto d = open_results_dir(mine.results_dir); !d)
    return leave(*relay, hosts, kCannotStart, with_context(d.error(), "create results directory"));
  relay->attach(job_dirs("", mine.results_dir), hosts.local);
  bool killed = false;
  relay->on_kill([&](int) { killed = true; });
  std::string why_not;  // the verdict did not come
  CommandHooks h;
  h.local = hosts.local;
  h.local_end = [&](int r, const RankEnd& e) { relay->rank_ended(r, e.code, e.how); };
  h.turn = [&](std::vector<RemoteEnd>&, std::vector<std::pair<int, std::string>>&,
               std::string& end) {
    (void)relay->turn(0);
    if (killed) end = "host " + hosts.coordinator + " ended the job";
    if (auto v = relay->check_verdict(); !v) {
      why_not = v.error().message;
      end = why_not;
    }
  };
  if (say)
    say("running " + std::to_string(out.ranks) + " of " + std::to_string(mine.ranks.size()) +
        " rank(s) here; every rank's log gathered on host " + hosts.coordinator +
        " (this host's copy in " + mine.results_dir + ")");
  auto res = run_command(mine, o, stop, on_line, h);
  (void)relay->finish();
  // The coordinator's verdict once every host's ranks ended (bounded).
  if (why_not.empty()) {
    auto v = relay->verdict(std::chrono::milliseconds(o.grace_ms + 60000 + o.timeout_ms), stop);
    if (v) out.ok = v->ok;
    if (!v) why_not = v.error().message;
  }
  if (!why_not.empty()) out.errors.push_back(why_not);
  if (!res) return std::unexpected(res.error());
  for (size_t r = 0; r < mine.ranks.size(); ++r)
    if (hosts.local[r] && res->ranks[r].code != 0)
      out.errors.push_back("rank " + std::to_string(r) + " (" + mine.ranks[r].node +
                           "): " + res->ranks[r].how);
  if (!out.errors.empty()) out.ok = false;
  return out;
}

}  // namespace tb::launch
