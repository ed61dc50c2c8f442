#include "multihost/session.h"

#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <thread>

namespace tb::multihost {
namespace {
using Clock = std::chrono::steady_clock;

Hello hello_from_json(const nlohmann::json& j) {
  Hello h;
  h.lab = j.value("lab", "");
  h.host = j.value("host", "");
  h.verb = j.value("verb", "");
  h.plan_digest = j.value("plan_digest", "");
  h.job_digest = j.value("job_digest", "");
  return h;
}

int64_t ms_left(Clock::time_point deadline) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
}

}  // namespace

std::string digest(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

Roles choose_roles(const std::string& me, const std::vector<HostAddr>& hosts,
                   const std::function<bool(const std::string&)>& has_part) {
  Roles r;
  r.me = me;
  if (me.empty() || hosts.empty()) return r;
  for (const auto& h : hosts) {
    if (!has_part(h.name)) continue;
    r.parts.push_back(h.name);
    if (r.coordinator.empty()) {
      r.coordinator = h.name;
      r.coordinator_addr = h.underlay;
    } else {
      r.peers.push_back(h.name);
    }
  }
  return r;
}

nlohmann::json to_json(const Verdict& v) {
  return {{"ok", v.ok}, {"rc", v.rc}, {"where", v.where}};
}

Verdict verdict_from_json(const nlohmann::json& j) {
  Verdict v;
  if (!j.is_object()) return v;
  v.ok = j.value("ok", false);
  v.rc = j.value("rc", v.ok ? 0 : 1);
  v.where = j.value("where", "");
  return v;
}

namespace {
const ClockSample* shortest(const std::vector<ClockSample>& samples) {
  const ClockSample* best = nullptr;
  for (const auto& c : samples)
    if (!best || c.received_ns - c.sent_ns < best->received_ns - best->sent_ns) best = &c;
  return best;
}
}  // namespace

int64_t clock_offset(const std::vector<ClockSample>& samples) {
  const ClockSample* best = shortest(samples);
  if (!best) return 0;
  return best->host_ns - (best->sent_ns + (best->received_ns - best->sent_ns) / 2);
}

int64_t clock_error(const std::vector<ClockSample>& samples) {
  const ClockSample* best = shortest(samples);
  return best ? (best->received_ns - best->sent_ns + 1) / 2 : 0;
}

nlohmann::json to_json(const Hello& h) {
  return {{"hello", kProtocol},
          {"lab", h.lab},
          {"host", h.host},
          {"verb", h.verb},
          {"plan_digest", h.plan_digest},
          {"job_digest", h.job_digest}};
}

std::string mismatch(const Hello& mine, const Hello& theirs) {
  if (theirs.lab != mine.lab)
    return "host " + theirs.host + " runs lab " + theirs.lab + ", host " + mine.host + " lab " +
           mine.lab;
  if (theirs.verb != mine.verb)
    return "host " + theirs.host + " runs " + theirs.verb + ", host " + mine.host + " " +
           mine.verb + " (start the same verb on every host)";
  if (theirs.plan_digest != mine.plan_digest)
    return "host " + theirs.host + "'s plan digest " + theirs.plan_digest + " differs from host " +
           mine.host + "'s " + mine.plan_digest + ": the hosts built lab " + mine.lab +
           " from different scenarios (compare `testbedctl plan SCENARIO --host NAME` on each; "
           "bring the lab down and up again from one file)";
  if (theirs.job_digest != mine.job_digest)
    return "host " + theirs.host + " asked for another " + mine.verb + " than host " + mine.host +
           " (job digest " + theirs.job_digest + " vs " + mine.job_digest +
           "): give every host the same flags";
  return "";
}

Result<Coordinator> Coordinator::gather(const Hello& mine, Ipv4 addr, int port,
                                        const std::vector<std::string>& peers,
                                        std::chrono::milliseconds timeout,
                                        const std::atomic<bool>& stop) {
  auto listener = Listener::open(addr, port);
  if (!listener) return std::unexpected(listener.error());
  Coordinator c;
  // Connections that have not said hello yet, with when they came.
  std::vector<std::pair<Conn, Clock::time_point>> pending;
  const auto deadline = Clock::now() + timeout;
  auto missing = [&] {
    std::string m;
    for (const auto& p : peers)
      if (!c.conns_.contains(p)) m += (m.empty() ? "" : ", ") + p;
    return m;
  };
  for (int rounds = 0; c.conns_.size() < peers.size(); ++rounds) {
    if (stop.load()) return fail("waiting for hosts " + missing() + " to join: interrupted");
    if (ms_left(deadline) <= 0)
      return std::unexpected(Error{
          "host(s) " + missing() + " did not join host " + mine.host + " at " + addr.to_string() +
              ":" + std::to_string(port) + " within " + std::to_string(timeout.count() / 1000) +
              " s: start `testbedctl " + mine.verb + " " + mine.lab +
              " ...` with the same flags there too (scripts/tb-srun does it on every host), and "
              "check the underlay between the hosts",
          0, kExitBadInput});
    auto conn = listener->accept(20);
    if (!conn) return std::unexpected(conn.error());
    if (*conn) pending.emplace_back(std::move(**conn), Clock::now());
    for (size_t i = 0; i < pending.size();) {
      auto& [p, since] = pending[i];
      std::vector<nlohmann::json> got;
      const bool bad = !p.receive(got);
      if (bad || p.closed() || (got.empty() && Clock::now() - since > std::chrono::seconds(10))) {
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
        continue;
      }
      if (got.empty()) {
        ++i;
        continue;
      }
      const Hello theirs = hello_from_json(got.front());
      std::string why;
      if (got.front().value("hello", 0) != kProtocol)
        why = "host " + theirs.host + " speaks another protocol (testbedctl versions differ)";
      else if (std::find(peers.begin(), peers.end(), theirs.host) == peers.end())
        why = "host " + theirs.host + " holds no rank of this " + mine.verb +
              " (or is not a host of lab " + mine.lab + ")";
      else if (c.conns_.contains(theirs.host))
        why = "host " + theirs.host + " joined twice";
      else
        why = mismatch(mine, theirs);
      if (!why.empty()) {
        (void)p.send({{"refused", why}});
        const bool fatal = theirs.host.empty() || !mismatch(mine, theirs).empty();
        pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
        if (fatal) return bad_input(why);
        continue;
      }
      TB_TRY(p.send({{"welcome", mine.host}}));
      c.conns_.emplace(theirs.host, std::move(p));
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }
  return c;
}

void Coordinator::broadcast(const nlohmann::json& msg, const std::string& except) {
  for (auto& [host, conn] : conns_)
    if (host != except && !conn.closed()) (void)conn.send(msg);
}

Status Coordinator::send(const std::string& host, const nlohmann::json& msg) {
  auto it = conns_.find(host);
  if (it == conns_.end()) return fail("no host " + host + " in this session");
  return it->second.send(msg);
}

std::vector<Message> Coordinator::receive(int wait_ms) {
  std::vector<Message> out;
  if (wait_ms > 0 && !conns_.empty()) {
    std::vector<pollfd> fds;
    for (auto& [host, conn] : conns_)
      if (!conn.closed()) fds.push_back({conn.fd(), POLLIN, 0});
    if (!fds.empty()) ::poll(fds.data(), fds.size(), wait_ms);
  }
  for (auto& [host, conn] : conns_) {
    if (reported_closed_[host]) continue;
    std::vector<nlohmann::json> got;
    if (auto r = conn.receive(got); !r) {
      // A broken line: the host is treated as gone.
      reported_closed_[host] = true;
      out.push_back({host, {{"closed", true}, {"why", r.error().message}}});
      continue;
    }
    for (auto& g : got) out.push_back({host, std::move(g)});
    if (conn.closed() && !reported_closed_[host]) {
      reported_closed_[host] = true;
      nlohmann::json c = {{"closed", true}};
      if (!conn.closed_why().empty()) c["why"] = conn.closed_why();
      out.push_back({host, std::move(c)});
    }
  }
  return out;
}

std::vector<std::string> Coordinator::hosts() const {
  std::vector<std::string> out;
  for (const auto& [host, conn] : conns_) out.push_back(host);
  return out;
}

bool Coordinator::open(const std::string& host) const {
  auto it = conns_.find(host);
  auto gone = reported_closed_.find(host);
  return it != conns_.end() && !it->second.closed() &&
         (gone == reported_closed_.end() || !gone->second);
}

Result<Peer> Peer::join(const Hello& mine, const std::string& coordinator, Ipv4 addr, int port,
                        std::chrono::milliseconds timeout, const std::atomic<bool>& stop) {
  const auto deadline = Clock::now() + timeout;
  const std::string where =
      "host " + coordinator + " (" + addr.to_string() + ":" + std::to_string(port) + ")";
  for (int attempt = 0; attempt < 1000; ++attempt) {
    auto conn = connect_to(addr, port, deadline, stop);
    if (!conn)
      return std::unexpected(Error{"could not reach the coordinator, " + where + ", within " +
                                       std::to_string(timeout.count() / 1000) + " s (" +
                                       conn.error().message + "): start `testbedctl " + mine.verb +
                                       " " + mine.lab + " ...` there too, and check the underlay",
                                   conn.error().sys_errno, kExitBadInput});
    TB_TRY(conn->send(to_json(mine)));
    // The answer: welcome or refused. A connection closed before it (the coordinator's listener
    // of an earlier run going away) is tried again.
    while (ms_left(deadline) > 0 && !stop.load()) {
      std::vector<nlohmann::json> got;
      TB_TRY(conn->receive(got, 100));
      if (!got.empty()) {
        if (got.front().contains("refused"))
          return bad_input(where +
                           " refused this host: " + got.front()["refused"].get<std::string>());
        if (got.front().contains("welcome")) {
          Peer p(std::move(*conn), coordinator);
          p.early_.assign(got.begin() + 1, got.end());
          return p;
        }
        return fail(where + " answered the hello with something else");
      }
      if (conn->closed()) break;
    }
    if (stop.load()) return fail("joining " + where + ": interrupted");
    if (ms_left(deadline) <= 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return bad_input(where + " did not answer the hello within " +
                   std::to_string(timeout.count() / 1000) + " s");
}

Result<std::vector<nlohmann::json>> Peer::receive(int wait_ms) {
  std::vector<nlohmann::json> got = std::move(early_);
  early_.clear();
  if (auto r = conn_.receive(got, got.empty() ? wait_ms : 0); !r) return std::unexpected(r.error());
  if (conn_.closed() && !told_closed_) {
    told_closed_ = true;
    nlohmann::json c = {{"closed", true}};
    if (!conn_.closed_why().empty()) c["why"] = conn_.closed_why();
    got.push_back(std::move(c));
  }
  return got;
}

}  // namespace tb::multihost
