#include "launch/across_hosts.h"

#include <algorithm>
#include <map>
#include <thread>

#include <nlohmann/json.hpp>

#include "core/shm_names.h"
#include "launch/bench_run.h"
#include "plan/topology.h"

namespace tb::launch {
namespace {
using Clock = std::chrono::steady_clock;
using multihost::Chunk;
using multihost::DirMirror;

multihost::Hello hello_for(const workload::Job& job, const JobHosts& hosts, const std::string& verb,
                           const std::string& plan_digest) {
  return {job.lab, hosts.me, verb, plan_digest, job_digest(job)};
}

// A job's results directory as the other hosts send it: their ranks' rows and logs (the store
// is mirrored on its own; job.json is each host's).
DirMirror results_mirror(const std::string& results_dir) {
  return DirMirror(results_dir, DirMirror::Mode::kAppend, {"store", "job.json"});
}

// The coordinator's {"job": ...} (within 30 s) and whatever came after it in the same read.
Result<std::pair<nlohmann::json, std::vector<nlohmann::json>>> await_job(
    multihost::Peer& peer, const std::string& coordinator, const std::atomic<bool>& stop) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline && !stop.load()) {
    auto got = peer.receive(100);
    if (!got) return std::unexpected(got.error());
    for (size_t i = 0; i < got->size(); ++i) {
      const auto& m = (*got)[i];
      if (m.contains("closed"))
        return fail("host " + coordinator + " went away before sending the job");
      if (m.contains("refused"))
        return bad_input("host " + coordinator + ": " + m["refused"].get<std::string>());
      if (!m.contains("job")) continue;
      return std::pair{
          m["job"], std::vector<nlohmann::json>(got->begin() + static_cast<std::ptrdiff_t>(i) + 1,
                                                got->end())};
    }
  }
  return fail("no job from host " + coordinator + " within 30 s");
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

Result<JobHosts> hosts_of(const lab::LabState& lab, const std::vector<std::string>& nodes) {
  JobHosts h;
  h.local.assign(nodes.size(), 1);
  if (lab.host.empty() || lab.hosts.empty()) return h;
  h.me = lab.host;
  std::map<std::string, int> ranks_on;
  for (const auto& node : nodes) {
    const plan::Node* n = lab.topo.node(node);
    if (!n || n->host.empty())
      return bad_input("rank on " + node + ": lab " + lab.lab + " places that node on no host");
    h.rank_host.push_back(n->host);
    ++ranks_on[n->host];
  }
  for (size_t r = 0; r < nodes.size(); ++r) h.local[r] = h.rank_host[r] == h.me ? 1 : 0;
  for (const auto& host : lab.hosts) {
    if (!ranks_on.contains(host.name)) continue;
    if (h.coordinator.empty()) {
      h.coordinator = host.name;
      h.coordinator_addr = host.underlay;
    } else {
      h.peers.push_back(host.name);
    }
  }
  return h;
}

Result<JobHosts> job_hosts(const lab::LabState& lab, const workload::Job& job) {
  std::vector<std::string> nodes;
  for (const auto& r : job.ranks) nodes.push_back(r.node);
  auto h = hosts_of(lab, nodes);
  if (!h) return h;
  if (!h->peers.empty() && job.transport.kind == workload::Transport::kRdma)
    return bad_input("--transport rdma: the selected ranks are on hosts " + h->summary() +
                     "; RDMA over the VXLAN seam between hosts is not supported yet: use "
                     "--transport tcp, or --ranks on one host");
  return h;
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

CoordinatorRelay::CoordinatorRelay(multihost::Coordinator c, JobHosts hosts,
                                   const std::string& store_dir, const std::string& results_dir)
    : coord_(std::move(c)), hosts_(std::move(hosts)), results_(results_mirror(results_dir)) {
  if (!store_dir.empty()) store_.emplace(store_dir, DirMirror::Mode::kWhole);
}

Result<CoordinatorRelay> CoordinatorRelay::open(const workload::Job& job, const JobHosts& hosts,
                                                const std::string& verb,
                                                const std::string& plan_digest, int port,
                                                const std::atomic<bool>& stop) {
  return open(hello_for(job, hosts, verb, plan_digest), hosts, workload::to_json(job),
              job.store_dir, job.results_dir, port, stop);
}

Result<CoordinatorRelay> CoordinatorRelay::open(const multihost::Hello& hello,
                                                const JobHosts& hosts,
                                                const nlohmann::json& job_msg,
                                                const std::string& store_dir,
                                                const std::string& results_dir, int port,
                                                const std::atomic<bool>& stop) {
  auto c = multihost::Coordinator::gather(hello, hosts.coordinator_addr, port, hosts.peers,
                                          kJoinTimeout, stop);
  if (!c) return std::unexpected(c.error());
  // The other hosts' files may come before this host's ranks start: the directories first.
  if (auto d = open_results_dir(results_dir); !d)
    return std::unexpected(with_context(d.error(), "create results directory"));
  if (!store_dir.empty())
    if (auto d = open_results_dir(store_dir); !d)
      return std::unexpected(with_context(d.error(), "create rendezvous store"));
  c->broadcast({{"job", job_msg}});
  return CoordinatorRelay(std::move(*c), hosts, store_dir, results_dir);
}

RelayTurn CoordinatorRelay::turn(int wait_ms) {
  RelayTurn t;
  if (store_)
    for (auto& chunk : store_->scan()) coord_.broadcast({{"put", multihost::to_json(chunk)}});
  for (auto& m : coord_.receive(wait_ms)) {
    t.activity = true;
    const auto& b = m.body;
    if (b.contains("put") || b.contains("append")) {
      const bool put = b.contains("put");
      auto chunk = multihost::chunk_from_json(put ? b["put"] : b["append"]);
      Status w = !chunk ? Status(std::unexpected(chunk.error()))
                 : put  ? (store_ ? store_->apply(*chunk) : Status{})
                        : results_.apply(*chunk);
      if (!w) {
        errors_.push_back("from host " + m.host + ": " + w.error().message);
        continue;
      }
      if (put) coord_.broadcast({{"put", b["put"]}}, m.host);
      if (!put) t.appended.push_back(std::move(*chunk));
    } else if (b.contains("exit")) {
      const auto& e = b["exit"];
      const size_t r = e.value("rank", size_t{0});
      if (r < hosts_.rank_host.size() && hosts_.rank_host[r] == m.host)
        t.ends.push_back(
            {static_cast<int>(r), e.value("code", 1), e.value("how", std::string("exit ?"))});
    } else if (b.contains("bye")) {
      byes_.push_back(m.host);
    } else if (b.contains("closed")) {
      const bool said_bye = std::find(byes_.begin(), byes_.end(), m.host) != byes_.end();
      if (!said_bye)
        errors_.push_back("host " + m.host + " went away before its ranks were done" +
                          (b.contains("why") ? " (" + b["why"].get<std::string>() + ")" : ""));
      for (size_t r = 0; r < hosts_.rank_host.size(); ++r)
        if (hosts_.rank_host[r] == m.host)
          t.ends.push_back(
              {static_cast<int>(r), 128 + 9, "host " + m.host + "'s testbedctl went away"});
      t.other.push_back(m);
    } else {
      t.other.push_back(m);
    }
  }
  return t;
}

bool CoordinatorRelay::pump(RankGroup& group, int wait_ms) {
  RelayTurn t = turn(wait_ms);
  for (const auto& e : t.ends) group.remote_exit(static_cast<size_t>(e.rank), e.code, e.how);
  return t.activity;
}

bool CoordinatorRelay::all_bye() const {
  return std::all_of(hosts_.peers.begin(), hosts_.peers.end(), [&](const auto& h) {
    return std::find(byes_.begin(), byes_.end(), h) != byes_.end() || !coord_.open(h);
  });
}

void CoordinatorRelay::kill(int grace_ms) {
  coord_.broadcast({{"kill", grace_ms}});
}

void CoordinatorRelay::finish(RankGroup& group, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (int rounds = 0; rounds < 100000 && Clock::now() < deadline; ++rounds) {
    if (all_bye() && group.all_exited()) return;
    pump(group, 20);
  }
  for (const auto& h : hosts_.peers)
    if (std::find(byes_.begin(), byes_.end(), h) == byes_.end())
      errors_.push_back("host " + h + " sent no last word within " +
                        std::to_string(limit.count() / 1000) + " s");
  for (size_t r = 0; r < hosts_.rank_host.size(); ++r)
    if (!hosts_.local[r]) group.remote_exit(r, 128 + 9, "no word from host " + hosts_.rank_host[r]);
}

void CoordinatorRelay::finish(const std::function<void(const RelayTurn&)>& on_turn,
                              std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (int rounds = 0; rounds < 100000 && Clock::now() < deadline && !all_bye(); ++rounds)
    on_turn(turn(20));
  for (const auto& h : hosts_.peers)
    if (std::find(byes_.begin(), byes_.end(), h) == byes_.end() && coord_.open(h))
      errors_.push_back("host " + h + " sent no last word within " +
                        std::to_string(limit.count() / 1000) + " s");
}

void CoordinatorRelay::done(bool ok) {
  coord_.broadcast({{"done", {{"ok", ok}}}});
}

Result<PeerOutcome> serve_job(const workload::Job& mine, const JobHosts& hosts,
                              const std::string& verb, const std::string& plan_digest, int port,
                              const std::string& tb_rank,
                              const std::function<void(const std::string&)>& say,
                              const std::atomic<bool>& stop) {
  auto peer = multihost::Peer::join(hello_for(mine, hosts, verb, plan_digest), hosts.coordinator,
                                    hosts.coordinator_addr, port, kJoinTimeout, stop);
  if (!peer) return std::unexpected(peer.error());
  if (say)
    say("joined host " + hosts.coordinator + " (" + hosts.coordinator_addr.to_string() + ":" +
        std::to_string(port) + ")");
  // The job: the coordinator's (its run id and results directory name this run everywhere).
  auto msg = await_job(*peer, hosts.coordinator, stop);
  if (!msg) return std::unexpected(msg.error());
  std::vector<nlohmann::json> early = std::move(msg->second);
  std::optional<workload::Job> job;
  {
    auto j = workload::job_from_json(msg->first);
    if (!j)
      return std::unexpected(with_context(j.error(), "the job from host " + hosts.coordinator));
    job = std::move(*j);
  }
  if (job->ranks.size() != mine.ranks.size() || job_digest(*job) != job_digest(mine))
    return bad_input("host " + hosts.coordinator + " sent another job than this host prepared");

  PeerOutcome out;
  out.coordinator = hosts.coordinator;
  out.results_dir = job->results_dir;
  out.ranks = hosts.local_count();
  auto group = start_ranks(*job, tb_rank, hosts.local);
  if (!group) {
    (void)peer->send({{"bye", true}});
    return std::unexpected(group.error());
  }
  if (say)
    say("started " + std::to_string(out.ranks) + " rank(s) of " +
        std::to_string(job->ranks.size()) + "; results gathered on host " + hosts.coordinator +
        " in " + job->results_dir);
  DirMirror store(job->store_dir, DirMirror::Mode::kWhole);
  DirMirror results = results_mirror(job->results_dir);
  std::vector<char> exit_sent(job->ranks.size(), 0);
  bool bye_sent = false, done = false;
  // Bounded: while this host's ranks run, their own timeouts and the coordinator's limits end
  // the run (a coordinator gone closes the connection); once they have all exited, this host
  // waits for the verdict no longer than the coordinator's idle limit (bench_run.h IdleWatch)
  // and a grace.
  const auto quiet_limit = std::chrono::milliseconds(std::max(2 * job->timeout_ms, 120000) + 60000);
  auto last_word = Clock::now();
  auto local_exited = [&] {
    for (size_t r = 0; r < job->ranks.size(); ++r)
      if (hosts.local[r] && group->ranks()[r].running) return false;
    return true;
  };
  auto send_files = [&](bool final) {
    for (auto& c : store.scan()) (void)peer->send({{"put", multihost::to_json(c)}});
    for (auto& c : results.scan(final)) (void)peer->send({{"append", multihost::to_json(c)}});
  };
  for (int rounds = 0; rounds < 100000000 && !done; ++rounds) {
    group->poll();
    send_files(false);
    for (size_t r = 0; r < job->ranks.size(); ++r) {
      const auto& e = group->ranks()[r];
      if (!hosts.local[r] || e.running || exit_sent[r]) continue;
      send_files(true);  // its last rows and log lines before its exit
      (void)peer->send({{"exit", {{"rank", r}, {"code", e.code}, {"how", e.how}}}});
      exit_sent[r] = 1;
    }
    if (!bye_sent && local_exited()) {
      send_files(true);
      (void)peer->send({{"bye", true}});
      bye_sent = true;
      last_word = Clock::now();
    }
    auto got = peer->receive(20);
    if (!got) {
      out.errors.push_back(got.error().message);
      break;
    }
    if (!early.empty()) {  // what came with the job, first
      got->insert(got->begin(), early.begin(), early.end());
      early.clear();
    }
    if (!got->empty()) last_word = Clock::now();
    for (const auto& m : *got) {
      if (m.contains("put")) {
        auto c = multihost::chunk_from_json(m["put"]);
        Status w = c ? store.apply(*c) : Status(std::unexpected(c.error()));
        if (!w)
          out.errors.push_back("store file from host " + hosts.coordinator + ": " +
                               w.error().message);
      } else if (m.contains("kill")) {
        group->kill_all(m.value("kill", 1000));
      } else if (m.contains("done")) {
        out.ok = m["done"].value("ok", false);
        done = true;
      } else if (m.contains("closed")) {
        if (!done)
          out.errors.push_back("host " + hosts.coordinator + " went away before the run was done");
        done = true;
      }
    }
    if (stop.load() && !local_exited()) {
      group->kill_all(1000);
      out.errors.push_back("interrupted: this host's ranks killed");
    }
    if (bye_sent && Clock::now() - last_word > quiet_limit) {
      out.errors.push_back("no word from host " + hosts.coordinator + " for " +
                           std::to_string(quiet_limit.count() / 1000) + " s");
      break;
    }
  }
  group->kill_all(1000);
  if (job->transport.intra_server == workload::IntraServer::kShm)
    if (auto left = remove_shm_files(shm_job_prefix(job->lab, job->run_id)); !left)
      out.errors.push_back("remove shared-memory segments: " + left.error().message);
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
  void take(const RelayTurn& t, std::vector<std::pair<int, std::string>>& lines) {
    for (const auto& c : t.appended) {
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
  auto relay = CoordinatorRelay::open(command_hello(job, hosts, plan_digest), hosts,
                                      {{"run_id", job.run_id}, {"results_dir", job.results_dir}},
                                      "", job.results_dir, o.rendezvous_port, stop);
  if (!relay) return std::unexpected(relay.error());
  RemoteLines remote;
  CommandHooks h;
  h.local = hosts.local;
  h.remote_ends = true;
  h.turn = [&](std::vector<RemoteEnd>& ends, std::vector<std::pair<int, std::string>>& lines,
               std::string&) {
    RelayTurn t = relay->turn(0);
    ends = std::move(t.ends);
    remote.take(t, lines);
  };
  h.ending = [&](const std::string& why, int grace_ms) {
    relay->kill(grace_ms);
    (void)why;
  };
  auto res = run_command(job, o, stop, on_line, h);
  relay->finish(
      [&](const RelayTurn& t) {
        std::vector<std::pair<int, std::string>> lines;
        remote.take(t, lines);
        for (const auto& [r, line] : lines)
          if (on_line) on_line(r, line);
      },
      std::chrono::milliseconds(o.grace_ms + 15000));
  if (res) {
    for (const auto& e : relay->errors()) res->errors.push_back(e);
    res->hosts = hosts.summary();
  }
  relay->done(res && res->ok());
  return res;
}

Result<PeerOutcome> serve_command(CommandJob mine, const JobHosts& hosts,
                                  const std::string& plan_digest, const CommandOptions& o,
                                  const std::function<void(int, std::string_view)>& on_line,
                                  const std::function<void(const std::string&)>& say,
                                  const std::atomic<bool>& stop) {
  auto peer = multihost::Peer::join(command_hello(mine, hosts, plan_digest), hosts.coordinator,
                                    hosts.coordinator_addr, o.rendezvous_port, kJoinTimeout, stop);
  if (!peer) return std::unexpected(peer.error());
  if (say)
    say("joined host " + hosts.coordinator + " (" + hosts.coordinator_addr.to_string() + ":" +
        std::to_string(o.rendezvous_port) + ")");
  auto msg = await_job(*peer, hosts.coordinator, stop);
  if (!msg) return std::unexpected(msg.error());
  std::vector<nlohmann::json> early = std::move(msg->second);
  mine.run_id = msg->first.value("run_id", "");
  mine.results_dir = msg->first.value("results_dir", "");
  if (mine.run_id.empty() || mine.results_dir.empty())
    return fail("host " + hosts.coordinator + " sent a job without its run id");
  PeerOutcome out;
  out.coordinator = hosts.coordinator;
  out.results_dir = mine.results_dir;
  out.ranks = hosts.local_count();
  DirMirror results = results_mirror(mine.results_dir);
  bool done = false;
  auto handle = [&](const std::vector<nlohmann::json>& got, std::string& end) {
    for (const auto& m : got) {
      if (m.contains("kill")) {
        end = "host " + hosts.coordinator + " ended the job";
      } else if (m.contains("done")) {
        out.ok = m["done"].value("ok", false);
        done = true;
      } else if (m.contains("closed")) {
        if (!done) {
          out.errors.push_back("host " + hosts.coordinator + " went away before the job was done");
          end = "host " + hosts.coordinator + " went away";
        }
        done = true;
      }
    }
  };
  auto send_files = [&](bool final) {
    for (auto& c : results.scan(final)) (void)peer->send({{"append", multihost::to_json(c)}});
  };
  CommandHooks h;
  h.local = hosts.local;
  h.local_end = [&](int r, const RankEnd& e) {
    send_files(true);
    (void)peer->send({{"exit", {{"rank", r}, {"code", e.code}, {"how", e.how}}}});
  };
  h.turn = [&](std::vector<RemoteEnd>&, std::vector<std::pair<int, std::string>>&,
               std::string& end) {
    send_files(false);
    auto got = peer->receive(0);
    if (!got) {
      out.errors.push_back(got.error().message);
      end = "the connection to host " + hosts.coordinator + " broke";
      return;
    }
    if (!early.empty()) {
      got->insert(got->begin(), early.begin(), early.end());
      early.clear();
    }
    handle(*got, end);
  };
  if (say)
    say("running " + std::to_string(out.ranks) + " of " + std::to_string(mine.ranks.size()) +
        " rank(s) here; every rank's log gathered on host " + hosts.coordinator + " in " +
        mine.results_dir);
  auto res = run_command(mine, o, stop, on_line, h);
  send_files(true);
  (void)peer->send({{"bye", true}});
  // The coordinator's verdict once every host's ranks ended (bounded).
  const auto deadline = Clock::now() + std::chrono::milliseconds(o.grace_ms + 60000) +
                        std::chrono::milliseconds(o.timeout_ms);
  while (!done && Clock::now() < deadline) {
    auto got = peer->receive(50);
    if (!got) {
      out.errors.push_back(got.error().message);
      break;
    }
    std::string end;
    handle(*got, end);
  }
  if (!done) out.errors.push_back("no verdict from host " + hosts.coordinator);
  if (!res) return std::unexpected(res.error());
  for (size_t r = 0; r < mine.ranks.size(); ++r)
    if (hosts.local[r] && res->ranks[r].code != 0)
      out.errors.push_back("rank " + std::to_string(r) + " (" + mine.ranks[r].node +
                           "): " + res->ranks[r].how);
  if (!out.errors.empty()) out.ok = false;
  return out;
}

}  // namespace tb::launch
