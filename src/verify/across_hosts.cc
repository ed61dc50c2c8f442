#include "verify/across_hosts.h"

#include <algorithm>
#include <map>
#include <memory>

#include "lab/link_change.h"
#include "lab/live.h"
#include "plan/plan.h"
#include "verify/result_json.h"

namespace tb::verify {
namespace {
using Clock = std::chrono::steady_clock;

bool same_figures(const plan::EmulatedFigures& x, const plan::EmulatedFigures& y) {
  return x.rate == y.rate && x.delay == y.delay && x.jitter == y.jitter &&
         x.loss_pct == y.loss_pct && x.mtu == y.mtu;
}

// The link of class `cls` with the figures in force on this host.
plan::Link link_in_force(const ClassContext& ctx, const LinkClass& cls) {
  plan::Link l = ctx.st->topo.links.at(cls.link);
  l.emulated = ctx.figures(cls.link);
  return l;
}

// The target of a link between hosts: A's half from the topology, B's from the host serving it.
Result<ProbeTarget> remote_target(const plan::Topology& t, const plan::Link& l,
                                  const RemoteEnd& e) {
  auto p = a_side_target(t, l);
  if (!p) return p;
  p->addr = e.addr;
  p->server_dev = e.server_dev;
  p->why = e.why + "; its server runs on host " + e.host + ", the probes cross the tunnel";
  return p;
}

// B's end of class `cls` served on this host for another host's clients, and what to tell it.
struct Served {
  ServeEnd server;
  RemoteEnd end;
};
Result<Served> serve_here(const ClassContext& ctx, const LinkClass& cls, size_t n,
                          const std::atomic<bool>& stop) {
  const auto& st = *ctx.st;
  const plan::Link l = link_in_force(ctx, cls);
  const plan::Node* b = st.topo.node(l.b.node);
  if (!b) return bad_input("link " + l.a.node + " - " + l.b.node + " names an unknown node");
  auto ifaces = lab::interfaces_in(b->netns);
  if (!ifaces) return std::unexpected(ifaces.error());
  auto target = probe_target(st.topo, l, *ifaces);
  if (!target) return std::unexpected(target.error());
  MeasureRequest r = plan_request(l, *target, ctx.settings);
  r.tb_probe = ctx.tb_probe;
  r.owner = plan::owner_marker(st.lab);
  r.work_dir = ctx.work_dir + "/serve" + std::to_string(n);
  auto server = ServeEnd::start(r, static_cast<int>(class_limit(l, ctx.settings).count()), stop);
  if (!server) return std::unexpected(server.error());
  RemoteEnd end{st.host, target->addr, target->server_dev, target->why, server->notes()};
  return Served{std::move(*server), std::move(end)};
}

std::string again_text(const std::string& host, const std::string& why) {
  return why + ", on host " + host;
}

}  // namespace

FiguresOf figures_in_force(const lab::LabState& st) {
  auto overrides = std::make_shared<std::map<std::string, plan::EmulatedFigures>>(
      lab::load_link_overrides(st.lab));
  const plan::Topology* t = &st.topo;
  return [overrides, t](size_t i) {
    const auto& l = t->links.at(i);
    auto it = overrides->find(lab::link_key(l));
    return it != overrides->end() ? it->second : l.emulated;
  };
}

nlohmann::json to_json(const RemoteEnd& e) {
  return {{"host", e.host},
          {"addr", e.addr.to_string()},
          {"server_dev", e.server_dev},
          {"why", e.why},
          {"notes", e.notes}};
}

Result<RemoteEnd> remote_end_from_json(const nlohmann::json& j) {
  try {
    RemoteEnd e;
    e.host = j.at("host");
    auto a = parse_ipv4(j.at("addr").get<std::string>());
    if (!a) return fail("malformed server end: " + a.error().message);
    e.addr = *a;
    e.server_dev = j.at("server_dev");
    e.why = j.at("why");
    e.notes = j.at("notes").get<std::vector<std::string>>();
    return e;
  } catch (const nlohmann::json::exception& x) {
    return fail(std::string("malformed server end: ") + x.what());
  }
}

ClassResult unmeasured(const ClassContext& ctx, const LinkClass& cls, const std::string& why) {
  ClassResult c;
  c.cls = cls;
  c.link = ctx.st->topo.links.at(cls.link);
  const auto in_force = ctx.figures(cls.link);
  if (!same_figures(in_force, c.link.emulated)) c.scenario = c.link.emulated;
  c.link.emulated = in_force;
  c.outcome.errors.push_back(why);
  c.checks = evaluate(c.link.emulated, c.outcome.m);
  return c;
}

ClassResult measure_here(const ClassContext& ctx, const LinkClass& cls, size_t n,
                         const std::optional<RemoteEnd>& remote, const std::atomic<bool>& stop,
                         const std::function<void(int, const std::string&)>& on_again) {
  const auto& st = *ctx.st;
  const plan::Link l = link_in_force(ctx, cls);
  ClassResult c;
  c.cls = cls;
  c.link = l;
  // Judged against what is in force; the scenario's figures are shown beside when they differ.
  if (const auto& scen = st.topo.links.at(cls.link).emulated; !same_figures(l.emulated, scen))
    c.scenario = scen;
  Result<ProbeTarget> target = fail("no target");
  if (remote) {
    target = remote_target(st.topo, l, *remote);
  } else {
    auto ifaces = lab::interfaces_in(st.topo.node(l.b.node)->netns);
    target = ifaces ? probe_target(st.topo, l, *ifaces)
                    : Result<ProbeTarget>(std::unexpected(ifaces.error()));
  }
  if (!target) {
    c.outcome.errors.push_back(target.error().message);
    c.checks = evaluate(c.link.emulated, c.outcome.m);
    return c;
  }
  c.target = *target;
  c.request = plan_request(l, *target, ctx.settings);
  c.request.tb_probe = ctx.tb_probe;
  c.request.owner = plan::owner_marker(st.lab);
  c.request.remote_server = remote.has_value();
  const std::string dir = ctx.work_dir + "/" + std::to_string(n);
  int reading = 0;
  // One reading: the host sampled around the measurement (its stages' lateness, the CPUs),
  // the checks, and whether the host stalled (result.h).
  auto measure = [&]() {
    Reading r;
    c.request.work_dir = dir + (reading++ ? "-" + std::to_string(reading) : "");
    const auto before = sample_host(ctx.stage_files);
    PromptnessWatch watch;
    r.outcome = measure_link(c.request, stop);
    if (remote)
      r.outcome.notes.insert(r.outcome.notes.end(), remote->notes.begin(), remote->notes.end());
    r.host = host_load(before, sample_host(ctx.stage_files));
    r.host->promptness = watch.stop();
    r.checks = evaluate(c.link.emulated, r.outcome.m);
    r.stall = reading_stall(r.checks, r.outcome.m, r.host);
    return r;
  };
  measure_class(
      c, measure, [&] { return stop.load(); }, on_again);
  return c;
}

std::chrono::seconds class_limit(const plan::Link& l, const Settings& s) {
  const MeasureRequest r = plan_request(l, ProbeTarget{}, s);
  // Each reading within its servers' own bound, plus their start and the host's sampling.
  return std::chrono::seconds(kMaxReadings * (r.serve_seconds + 20));
}

bool VerifyHosts::has_part() const {
  return !me.empty() && std::ranges::find(parts, me) != parts.end();
}

VerifyHosts verify_hosts(const lab::LabState& st, const std::vector<LinkClass>& classes) {
  VerifyHosts h;
  h.me = st.host;
  std::vector<multihost::HostAddr> hosts;
  for (const auto& host : st.hosts) hosts.push_back({host.name, host.underlay});
  static_cast<multihost::Roles&>(h) =
      multihost::choose_roles(st.host, hosts, [&](const std::string& name) {
        return std::ranges::any_of(
            classes, [&](const LinkClass& c) { return c.host == name || c.serve_host == name; });
      });
  return h;
}

std::string verify_digest(const std::vector<LinkClass>& classes, const std::string& flags) {
  std::string text = flags;
  for (const auto& c : classes)
    text += "\n" + c.name() + " " + std::to_string(c.link) + " " + c.host + " " + c.serve_host;
  return multihost::digest(text);
}

Result<VerifyCoordinator> VerifyCoordinator::open(const lab::LabState& st, const VerifyHosts& hosts,
                                                  const std::string& digest, int port,
                                                  const std::atomic<bool>& stop) {
  const multihost::Hello hello{st.lab, hosts.me, "verify", st.digest, digest};
  auto r = multihost::CoordinatorRelay::open(hello, hosts, port, kVerifyJoinTimeout, stop);
  if (!r) return std::unexpected(r.error());
  return VerifyCoordinator(std::move(*r), hosts.me);
}

Result<nlohmann::json> VerifyCoordinator::await(
    const std::string& host, const std::string& key, std::chrono::seconds limit,
    const std::atomic<bool>& stop, const std::function<void(int, const std::string&)>& on_again) {
  // Other messages of `host` are dropped: hosts speak only when asked.
  return relay_.await(host, key, limit, stop, [&](const nlohmann::json& m) {
    if (!m.contains("again")) return;
    const auto& a = m["again"];
    on_again(a.value("n", 0), again_text(host, a.value("why", "")));
  });
}

ClassResult VerifyCoordinator::measure(
    const ClassContext& ctx, const LinkClass& cls, size_t n, const std::atomic<bool>& stop,
    const std::function<void(int, const std::string&)>& on_again) {
  const plan::Link l = link_in_force(ctx, cls);
  std::optional<Served> served;  // B's end here: stopped when this returns
  std::optional<RemoteEnd> remote;
  const bool remote_serve = cls.crosses() && cls.serve_host != me_;
  if (cls.crosses() && !remote_serve) {
    auto s = serve_here(ctx, cls, n, stop);
    if (!s)
      return unmeasured(ctx, cls, "serving B's end on host " + me_ + ": " + s.error().message);
    remote = s->end;
    served.emplace(std::move(*s));
  } else if (remote_serve) {
    auto got = relay_.send(cls.serve_host, {{"serve", n}});
    auto ans = got ? await(cls.serve_host, "serving", std::chrono::seconds(30), stop, on_again)
                   : Result<nlohmann::json>(std::unexpected(got.error()));
    if (ans && ans->contains("error")) ans = fail((*ans)["error"].get<std::string>());
    auto end = ans ? remote_end_from_json(ans->value("end", nlohmann::json::object()))
                   : Result<RemoteEnd>(std::unexpected(ans.error()));
    if (!end)
      return unmeasured(ctx, cls,
                        "serving B's end on host " + cls.serve_host + ": " + end.error().message);
    remote = *end;
  }
  ClassResult r;
  if (cls.host == me_) {
    r = measure_here(ctx, cls, n, remote, stop, on_again);
  } else {
    nlohmann::json ask = {{"measure", n}};
    if (remote) ask["end"] = to_json(*remote);
    auto sent = relay_.send(cls.host, ask);
    auto ans = sent ? await(cls.host, "result",
                            class_limit(l, ctx.settings) + std::chrono::seconds(30), stop, on_again)
                    : Result<nlohmann::json>(std::unexpected(sent.error()));
    auto got = ans ? class_from_wire(ans->value("result", nlohmann::json()), cls)
                   : Result<ClassResult>(std::unexpected(ans.error()));
    r = got ? std::move(*got)
            : unmeasured(ctx, cls, "measured on host " + cls.host + ": " + got.error().message);
  }
  if (remote_serve && relay_.send(cls.serve_host, {{"unserve", n}})) {
    auto ans = await(cls.serve_host, "unserved", std::chrono::seconds(15), stop, on_again);
    if (!ans)
      r.outcome.notes.push_back("stopping the server on host " + cls.serve_host + ": " +
                                ans.error().message);
  }
  return r;
}

void VerifyCoordinator::done(int rc, const std::string& where) {
  relay_.done({rc == 0, rc, where});
}

Result<PeerVerdict> serve_verify(const ClassContext& ctx, const std::vector<LinkClass>& classes,
                                 const VerifyHosts& hosts, const std::string& digest, int port,
                                 const std::function<void(const std::string&)>& say,
                                 const std::atomic<bool>& stop) {
  const auto& st = *ctx.st;
  const multihost::Hello hello{st.lab, hosts.me, "verify", st.digest, digest};
  auto peer = multihost::PeerRelay::join(hello, hosts, port, kVerifyJoinTimeout, stop);
  if (!peer) return std::unexpected(peer.error());
  say("joined host " + hosts.coordinator +
      "; it walks the classes and asks this host for its part");
  // The whole run's bound: every class at its longest, and the join of the others.
  auto limit = std::chrono::seconds(120);
  for (const auto& c : classes) limit += class_limit(link_in_force(ctx, c), ctx.settings);
  const auto deadline = Clock::now() + limit;
  PeerVerdict v;
  v.coordinator = hosts.coordinator;
  std::optional<Served> served;  // the one B end this host serves now; stopped however this ends
  auto index = [&](const nlohmann::json& m, const char* key) -> std::optional<size_t> {
    const auto& i = m[key];
    if (!i.is_number_unsigned() || i.get<size_t>() >= classes.size()) return std::nullopt;
    return i.get<size_t>();
  };
  for (int rounds = 0; rounds < 1'000'000 && Clock::now() < deadline; ++rounds) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    auto next = peer->next(std::max(left, std::chrono::milliseconds(1)), stop);
    if (!next) {
      if (Clock::now() >= deadline) break;
      if (stop.load()) return fail("interrupted");
      return fail(next.error().message + " before its verdict");
    }
    const nlohmann::json& m = *next;
    if (m.contains("done")) {
      const auto verdict = multihost::verdict_from_json(m["done"]);
      v.rc = verdict.rc;
      v.where = verdict.where;
      return v;
    }
    if (m.contains("serve")) {
      served.reset();
      const auto i = index(m, "serve");
      nlohmann::json ans = {{"class", m["serve"]}};
      if (!i) {
        ans["error"] = "no class " + m["serve"].dump() + " here (testbedctl versions differ?)";
      } else {
        say("serving B's end of " + classes[*i].name() + " for host " + classes[*i].host);
        auto s = serve_here(ctx, classes[*i], *i, stop);
        if (s) {
          ans["end"] = to_json(s->end);
          served.emplace(std::move(*s));
          ++v.served;
        } else {
          ans["error"] = s.error().message;
        }
      }
      TB_TRY(peer->send({{"serving", ans}}));
    } else if (m.contains("unserve")) {
      served.reset();
      TB_TRY(peer->send({{"unserved", m["unserve"]}}));
    } else if (m.contains("measure")) {
      const auto i = index(m, "measure");
      if (!i)
        return fail("host " + hosts.coordinator + " asked for class " + m["measure"].dump() +
                    ", which this host does not have");
      std::optional<RemoteEnd> end;
      if (m.contains("end")) {
        auto e = remote_end_from_json(m["end"]);
        if (!e) return std::unexpected(e.error());
        end = *e;
      }
      say("measuring " + classes[*i].name() + " (" + classes[*i].where() + ")");
      ClassResult r =
          measure_here(ctx, classes[*i], *i, end, stop, [&](int k, const std::string& why) {
            say(classes[*i].name() + ": measuring it again (reading " + std::to_string(k) + ": " +
                why + ")");
            (void)peer->send({{"again", {{"class", *i}, {"n", k}, {"why", why}}}});
          });
      TB_TRY(peer->send({{"result", {{"class", *i}, {"result", class_to_wire(r)}}}}));
      ++v.measured;
    }
  }
  return fail("no verdict from host " + hosts.coordinator + " within " +
              std::to_string(limit.count()) + " s");
}

}  // namespace tb::verify
