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

DirMirror results_mirror(const workload::Job& job) {
  return DirMirror(job.results_dir, DirMirror::Mode::kAppend, {"store", "job.json"});
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

Result<JobHosts> job_hosts(const lab::LabState& lab, const workload::Job& job) {
  JobHosts h;
  h.local.assign(job.ranks.size(), 1);
  if (lab.host.empty() || lab.hosts.empty()) return h;
  h.me = lab.host;
  std::map<std::string, int> ranks_on;
  for (const auto& r : job.ranks) {
    const plan::Node* n = lab.topo.node(r.node);
    if (!n || n->host.empty())
      return bad_input("rank on " + r.node + ": lab " + lab.lab + " places that node on no host");
    h.rank_host.push_back(n->host);
    ++ranks_on[n->host];
  }
  for (size_t r = 0; r < job.ranks.size(); ++r) h.local[r] = h.rank_host[r] == h.me ? 1 : 0;
  for (const auto& host : lab.hosts) {
    if (!ranks_on.contains(host.name)) continue;
    if (h.coordinator.empty()) {
      h.coordinator = host.name;
      h.coordinator_addr = host.underlay;
    } else {
      h.peers.push_back(host.name);
    }
  }
  if (!h.peers.empty() && job.transport.kind == workload::Transport::kRdma)
    return bad_input("--transport rdma: the selected ranks are on hosts " + h.summary() +
                     "; RDMA over the VXLAN seam between hosts is not supported yet: use "
                     "--transport tcp, or --ranks on one host");
  return h;
}

std::string job_digest(const workload::Job& job) {
  nlohmann::json j = workload::to_json(job);
  for (const char* k : {"run_id", "results_dir", "store_dir", "rdma", "rdma_fallback"}) j.erase(k);
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : j.dump()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

CoordinatorRelay::CoordinatorRelay(multihost::Coordinator c, const workload::Job& job,
                                   JobHosts hosts)
    : coord_(std::move(c)),
      hosts_(std::move(hosts)),
      store_(job.store_dir, DirMirror::Mode::kWhole),
      results_(results_mirror(job)) {}

Result<CoordinatorRelay> CoordinatorRelay::open(const workload::Job& job, const JobHosts& hosts,
                                                const std::string& verb,
                                                const std::string& plan_digest, int port,
                                                const std::atomic<bool>& stop) {
  auto c =
      multihost::Coordinator::gather(hello_for(job, hosts, verb, plan_digest),
                                     hosts.coordinator_addr, port, hosts.peers, kJoinTimeout, stop);
  if (!c) return std::unexpected(c.error());
  c->broadcast({{"job", workload::to_json(job)}});
  return CoordinatorRelay(std::move(*c), job, hosts);
}

bool CoordinatorRelay::pump(RankGroup& group, int wait_ms) {
  bool activity = false;
  for (auto& chunk : store_.scan()) coord_.broadcast({{"put", multihost::to_json(chunk)}});
  for (auto& m : coord_.receive(wait_ms)) {
    activity = true;
    const auto& b = m.body;
    if (b.contains("put") || b.contains("append")) {
      const bool put = b.contains("put");
      auto chunk = multihost::chunk_from_json(put ? b["put"] : b["append"]);
      Status w = chunk ? (put ? store_.apply(*chunk) : results_.apply(*chunk))
                       : Status(std::unexpected(chunk.error()));
      if (!w) {
        errors_.push_back("from host " + m.host + ": " + w.error().message);
        continue;
      }
      if (put) coord_.broadcast({{"put", b["put"]}}, m.host);
    } else if (b.contains("exit")) {
      const auto& e = b["exit"];
      const size_t r = e.value("rank", size_t{0});
      if (r < hosts_.rank_host.size() && hosts_.rank_host[r] == m.host)
        group.remote_exit(r, e.value("code", 1), e.value("how", std::string("exit ?")));
    } else if (b.contains("bye")) {
      byes_.push_back(m.host);
    } else if (b.contains("closed")) {
      const bool said_bye = std::find(byes_.begin(), byes_.end(), m.host) != byes_.end();
      if (!said_bye)
        errors_.push_back("host " + m.host + " went away before its ranks were done" +
                          (b.contains("why") ? " (" + b["why"].get<std::string>() + ")" : ""));
      for (size_t r = 0; r < hosts_.rank_host.size(); ++r)
        if (hosts_.rank_host[r] == m.host)
          group.remote_exit(r, 128 + 9, "host " + m.host + "'s testbedctl went away");
    }
  }
  return activity;
}

void CoordinatorRelay::kill(int grace_ms) {
  coord_.broadcast({{"kill", grace_ms}});
}

void CoordinatorRelay::finish(RankGroup& group, std::chrono::milliseconds limit) {
  const auto deadline = Clock::now() + limit;
  for (int rounds = 0; rounds < 100000 && Clock::now() < deadline; ++rounds) {
    const bool all_bye = std::all_of(hosts_.peers.begin(), hosts_.peers.end(), [&](const auto& h) {
      return std::find(byes_.begin(), byes_.end(), h) != byes_.end() || !coord_.open(h);
    });
    if (all_bye && group.all_exited()) return;
    pump(group, 20);
  }
  for (const auto& h : hosts_.peers)
    if (std::find(byes_.begin(), byes_.end(), h) == byes_.end())
      errors_.push_back("host " + h + " sent no last word within " +
                        std::to_string(limit.count() / 1000) + " s");
  for (size_t r = 0; r < hosts_.rank_host.size(); ++r)
    if (!hosts_.local[r]) group.remote_exit(r, 128 + 9, "no word from host " + hosts_.rank_host[r]);
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
  std::optional<workload::Job> job;
  const auto job_deadline = Clock::now() + std::chrono::seconds(30);
  while (!job && Clock::now() < job_deadline && !stop.load()) {
    auto got = peer->receive(100);
    if (!got) return std::unexpected(got.error());
    for (const auto& m : *got) {
      if (m.contains("closed"))
        return fail("host " + hosts.coordinator + " went away before sending the job");
      if (!m.contains("job")) continue;
      auto j = workload::job_from_json(m["job"]);
      if (!j)
        return std::unexpected(with_context(j.error(), "the job from host " + hosts.coordinator));
      job = std::move(*j);
    }
  }
  if (!job) return fail("no job from host " + hosts.coordinator + " within 30 s");
  if (job->ranks.size() != mine.ranks.size() || job_digest(*job) != job_digest(mine))
    return bad_input("host " + hosts.coordinator + " sent another job than this host prepared");

  PeerOutcome out;
  out.coordinator = hosts.coordinator;
  out.results_dir = job->results_dir;
  out.ranks = hosts.local_count();
  std::vector<RankProc> procs;
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
  DirMirror results = results_mirror(*job);
  std::vector<char> exit_sent(job->ranks.size(), 0);
  bool bye_sent = false, done = false;
  // Bounded: the coordinator's own limits end a run; this host gives up when it heard nothing
  // for longer than the coordinator's idle limit (bench_run.h IdleWatch) and a grace.
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
    }
    auto got = peer->receive(20);
    if (!got) {
      out.errors.push_back(got.error().message);
      break;
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
    if (Clock::now() - last_word > quiet_limit) {
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

}  // namespace tb::launch
