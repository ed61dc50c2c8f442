// verify on a lab over several hosts (issue 19): which host measures which class
// and which serves B's end of a link between hosts (the same answer on every host), the roles
// (who coordinates, who joins, who has no part), the digest of what every host must agree on,
// a class's measurement as one host sends it to another, judged alike on arrival, and the
// coordinator's side of the session over loopback (fake joining hosts).
#include <gtest/gtest.h>
#include <unistd.h>

#include <thread>

#include "lab/state.h"
#include "multihost_text.h"
#include "plan/plan.h"
#include "scenario/loader.h"
#include "scenario_text.h"
#include "verify/across_hosts.h"
#include "verify/classes.h"
#include "verify/result_json.h"

namespace tb::verify {
namespace {

using scenario::testing_text::kBjWan;
using scenario::testing_text::kHead;
using scenario::testing_text::kTwoHosts;

plan::Plan hosts_plan_of(const std::string& text) {
  auto s = scenario::load_text(text, "x.toml");
  EXPECT_TRUE(s) << s.error().message;
  auto p =
      plan::compile(*s, plan::assumed_host("test host"), plan::PlanOptions{"", "auto", "none", ""});
  EXPECT_TRUE(p) << p.error().message;
  return p ? *p : plan::Plan{};
}

lab::LabState state_of(const plan::Plan& p, const std::string& host) {
  lab::LabState st;
  st.lab = "t";
  st.topo = p.topo;
  st.host = host;
  st.digest = p.digest;
  for (const auto& h : p.hosts) st.hosts.push_back({h.name, h.underlay});
  return st;
}

const plan::Node& node(const plan::Topology& t, const std::string& name) {
  return *t.node(name);
}

// hz on host a, bj on host b, and hz/s1 on b too: a class with a link wholly on one host is
// measured there (the first such link); the WAN class, whose only link crosses, is measured from
// a (its A end, hz's router) with b serving B's end; the classes and roles are the same whichever
// host asks, and the one-host answer is unchanged.
TEST(VerifyHosts, EachClassOnAHostHoldingItWholeElseAcrossTheTunnel) {
  const auto p = hosts_plan_of(std::string(kHead) + kBjWan + kTwoHosts + "servers = [\"hz/s1\"]\n");
  const auto one = link_classes(hosts_plan_of(std::string(kHead) + kBjWan).topo);
  const auto classes = link_classes(p.topo);
  ASSERT_EQ(classes.size(), one.size());
  int crossing = 0;
  for (size_t i = 0; i < classes.size(); ++i) {
    const auto& c = classes[i];
    EXPECT_EQ(c.name(), one[i].name());
    EXPECT_EQ(c.members, one[i].members);
    EXPECT_TRUE(one[i].host.empty() && one[i].serve_host.empty()) << one[i].name();
    const auto& l = p.topo.links[c.link];
    EXPECT_EQ(c.host, node(p.topo, l.a.node).host) << c.name();
    if (c.crosses()) {
      ++crossing;
      EXPECT_EQ(c.tier, plan::Tier::kWan) << c.name();
      EXPECT_NE(l.vni, 0u);
      EXPECT_EQ(c.host, "a");
      EXPECT_EQ(c.serve_host, "b");
      EXPECT_EQ(c.where(), "a -> b (a VXLAN tunnel)");
    } else {
      EXPECT_EQ(node(p.topo, l.b.node).host, c.host) << c.name();
      EXPECT_EQ(l.vni, 0u) << c.name();
      // The first link of the class wholly on one host.
      for (size_t k = 0; k < c.link; ++k) {
        const auto& o = p.topo.links[k];
        if (o.tier == c.tier && o.profile == c.profile) {
          EXPECT_NE(node(p.topo, o.a.node).host, node(p.topo, o.b.node).host) << c.name();
        }
      }
    }
  }
  EXPECT_EQ(crossing, 1);
  // The rail class has links crossing (hz/s1's) and links wholly on a: one on a is measured.
  for (const auto& c : classes)
    if (c.tier == plan::Tier::kScaleOut && c.profile == "hpn") {
      EXPECT_EQ(c.where(), "on host a") << c.link;
    }

  const auto on_a = verify_hosts(state_of(p, "a"), classes);
  const auto on_b = verify_hosts(state_of(p, "b"), classes);
  EXPECT_TRUE(on_a.coordinates());
  EXPECT_FALSE(on_a.joins());
  EXPECT_TRUE(on_b.joins());
  EXPECT_FALSE(on_b.coordinates());
  for (const auto* h : {&on_a, &on_b}) {
    EXPECT_EQ(h->coordinator, "a");
    EXPECT_EQ(h->coordinator_addr.to_string(), "10.0.0.1");
    EXPECT_EQ(h->peers, std::vector<std::string>{"b"});
    EXPECT_EQ(h->parts, (std::vector<std::string>{"a", "b"}));
  }
  // A lab on one host: no roles at all.
  const auto single = verify_hosts(state_of(hosts_plan_of(std::string(kHead) + kBjWan), ""), one);
  EXPECT_FALSE(single.across());
  EXPECT_FALSE(single.has_part());
}

// --link: the class of that one link. The tunnel: both hosts, a coordinating. A link wholly on
// b: b measures it alone (no session), a has no part.
TEST(VerifyHosts, OneLinkInvolvesTheHostsOfItsEndsOnly) {
  const auto p = hosts_plan_of(std::string(kHead) + kBjWan + kTwoHosts);
  size_t wan = p.topo.links.size(), bj_nvl = p.topo.links.size();
  for (size_t i = 0; i < p.topo.links.size(); ++i) {
    const auto& l = p.topo.links[i];
    if (l.vni && wan == p.topo.links.size()) wan = i;
    if (l.tier == plan::Tier::kScaleUp && node(p.topo, l.a.node).region == "bj" &&
        bj_nvl == p.topo.links.size())
      bj_nvl = i;
  }
  ASSERT_LT(wan, p.topo.links.size());
  ASSERT_LT(bj_nvl, p.topo.links.size());
  const auto tunnel = class_of(p.topo, wan);
  EXPECT_EQ(tunnel.link, wan);
  EXPECT_EQ(tunnel.host, "a");
  EXPECT_EQ(tunnel.serve_host, "b");
  EXPECT_TRUE(verify_hosts(state_of(p, "a"), {tunnel}).coordinates());
  EXPECT_TRUE(verify_hosts(state_of(p, "b"), {tunnel}).joins());

  const auto local = class_of(p.topo, bj_nvl);
  EXPECT_EQ(local.where(), "on host b");
  const auto on_a = verify_hosts(state_of(p, "a"), {local});
  const auto on_b = verify_hosts(state_of(p, "b"), {local});
  EXPECT_FALSE(on_a.has_part());
  EXPECT_TRUE(on_b.has_part());
  EXPECT_FALSE(on_b.across());  // measured on b alone, no session
  EXPECT_EQ(on_a.parts, std::vector<std::string>{"b"});
}

// Three hosts, every link of two classes crossing: the client runs on A's host, the server on
// B's, and a host that is A's for one class and neither for another still has a part; the first
// [[host]] with a part coordinates even when it only serves.
TEST(VerifyHosts, ThreeHostsEveryLinkCrossing) {
  plan::Topology t;
  for (const auto& [name, host] :
       std::vector<std::pair<std::string, std::string>>{{"x", "a"}, {"y", "b"}, {"z", "c"}}) {
    plan::Node n;
    n.name = name;
    n.host = host;
    t.nodes.push_back(n);
  }
  plan::Link xy, zy, yx;
  xy.a.node = "x", xy.b.node = "y", xy.profile = "p1", xy.tier = plan::Tier::kScaleOut;
  zy.a.node = "z", zy.b.node = "y", zy.profile = "p2", zy.tier = plan::Tier::kScaleOut;
  yx.a.node = "y", yx.b.node = "x", yx.profile = "p3", yx.tier = plan::Tier::kScaleOut;
  t.links = {xy, zy, yx};
  const auto classes = link_classes(t);
  ASSERT_EQ(classes.size(), 3u);
  EXPECT_EQ(classes[0].where(), "a -> b (a VXLAN tunnel)");
  EXPECT_EQ(classes[1].where(), "c -> b (a VXLAN tunnel)");
  EXPECT_EQ(classes[2].where(), "b -> a (a VXLAN tunnel)");
  lab::LabState st;
  st.topo = t;
  st.hosts = {{"a", Ipv4{}}, {"b", Ipv4{}}, {"c", Ipv4{}}};
  st.host = "c";
  const auto on_c = verify_hosts(st, {classes[1]});
  EXPECT_EQ(on_c.coordinator, "b");  // only b and c have a part; b comes first
  EXPECT_TRUE(on_c.joins());
  st.host = "a";
  EXPECT_FALSE(verify_hosts(st, {classes[1]}).has_part());
  EXPECT_TRUE(verify_hosts(st, classes).coordinates());
}

TEST(VerifyHosts, TheDigestCoversTheFlagsAndTheClasses) {
  const auto p = hosts_plan_of(std::string(kHead) + kBjWan + kTwoHosts);
  const auto classes = link_classes(p.topo);
  const std::string d = verify_digest(classes, "quick=0");
  EXPECT_EQ(d, verify_digest(link_classes(p.topo), "quick=0"));
  EXPECT_EQ(d.size(), 16u);
  EXPECT_NE(d, verify_digest(classes, "quick=1"));
  EXPECT_NE(d, verify_digest({classes.front()}, "quick=0"));
}

probe::RttResult hosts_rtt(double median_us, double stdev_us) {
  probe::RttResult r;
  r.sent = r.received = 200;
  r.seconds = 0.4;
  r.summary = {200,
               median_us,
               stdev_us,
               median_us - 5,
               median_us + 40,
               median_us - stdev_us,
               median_us,
               median_us + stdev_us,
               median_us + 30};
  return r;
}

// A class measured on another host arrives with its figures, target, request and every
// reading, and is judged here to the same checks, stall and verdict as there.
TEST(VerifyHosts, AClassResultCrossesTheWireAndIsJudgedAlike) {
  const auto p = hosts_plan_of(std::string(kHead) + kBjWan + kTwoHosts);
  const auto classes = link_classes(p.topo);
  const auto wan = std::ranges::find_if(classes, [](const LinkClass& c) { return c.crosses(); });
  ASSERT_NE(wan, classes.end());
  ClassResult c;
  c.cls = *wan;
  c.link = p.topo.links[wan->link];
  c.scenario = c.link.emulated;
  // A `link set` in force on the measuring host: 40 ms, no jitter, no loss.
  c.link.emulated.delay = Duration{40'000'000};
  c.link.emulated.jitter = Duration{0};
  c.link.emulated.loss_pct = 0;
  c.target.a_netns = "tb-t-hz-tr";
  c.target.a_dev = "ec";
  c.target.a_addr = *parse_ipv4("10.1.0.1");
  c.target.b_netns = "tb-t-bj-tr";
  c.target.addr = *parse_ipv4("10.1.0.2");
  c.target.server_dev = "ec";
  c.target.why = "B's address on this link; its server runs on host b";
  c.request = plan_request(c.link, c.target, settings(true));
  c.request.remote_server = true;
  // Two readings: the first out of tolerance while the base stalled, the second fine.
  auto reading = [&](double base_median_us, double delay_ms) {
    Reading r;
    r.outcome.m.base = hosts_rtt(base_median_us, 20);
    r.outcome.m.rtt = hosts_rtt(base_median_us + 2 * delay_ms * 1000, 30);
    probe::GoodputResult g;
    g.goodput_bps = c.link.emulated.rate.bps * tcp_payload_ratio(c.link.emulated.mtu);
    g.mss = c.link.emulated.mtu - 52;
    g.timestamps = true;
    g.confirmed = true;
    r.outcome.m.goodput = g;
    r.outcome.notes = {"tcp_rmem max raised 1 -> 2 in tb-t-bj-tr for the run"};
    r.host = HostLoad{};
    r.host->cpu_busy = 0.4;
    r.host->promptness = Promptness{1000, 1.0, 12, 300, 0.001, "SCHED_FIFO 51"};
    r.checks = evaluate(c.link.emulated, r.outcome.m);
    r.stall = host_stall(r.outcome.m, r.host);
    return r;
  };
  Reading first = reading(900, 43);
  Reading last = reading(60, 40);
  ASSERT_FALSE(first.stall.empty());
  ASSERT_EQ(judge(first), ClassVerdict::kNotJudged);
  c.earlier.push_back(first);
  c.outcome = last.outcome;
  c.checks = last.checks;
  c.host = last.host;
  c.stall = last.stall;
  ASSERT_EQ(c.verdict(), ClassVerdict::kPass);

  const std::string line = class_to_wire(c).dump();  // as it crosses
  auto back = class_from_wire(nlohmann::json::parse(line), *wan);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->verdict(), ClassVerdict::kPass);
  EXPECT_EQ(back->cls.where(), "a -> b (a VXLAN tunnel)");
  EXPECT_EQ(back->link.emulated.delay, Duration{40'000'000});
  EXPECT_EQ(back->link.emulated.mtu, c.link.emulated.mtu);
  ASSERT_TRUE(back->scenario);
  EXPECT_EQ(back->scenario->delay, c.scenario->delay);
  EXPECT_EQ(back->target.addr.to_string(), "10.1.0.2");
  EXPECT_EQ(back->target.why, c.target.why);
  EXPECT_EQ(back->request.probes, c.request.probes);
  EXPECT_EQ(back->request.buffer, c.request.buffer);
  EXPECT_TRUE(back->request.remote_server);
  ASSERT_EQ(back->checks.size(), c.checks.size());
  for (size_t i = 0; i < c.checks.size(); ++i) {
    EXPECT_EQ(back->checks[i].name, c.checks[i].name);
    EXPECT_EQ(back->checks[i].verdict, c.checks[i].verdict) << c.checks[i].name;
    EXPECT_EQ(back->checks[i].achieved.has_value(), c.checks[i].achieved.has_value());
    if (c.checks[i].achieved) {
      EXPECT_NEAR(*back->checks[i].achieved, *c.checks[i].achieved, 1e-9) << c.checks[i].name;
    }
  }
  EXPECT_EQ(back->outcome.notes, c.outcome.notes);
  ASSERT_EQ(back->earlier.size(), 1u);
  EXPECT_EQ(back->earlier[0].stall, first.stall);
  EXPECT_EQ(judge(back->earlier[0]), ClassVerdict::kNotJudged);
  ASSERT_TRUE(back->host && back->host->promptness);
  EXPECT_EQ(back->host->promptness->scheduling, "SCHED_FIFO 51");
  EXPECT_DOUBLE_EQ(back->host->cpu_busy, 0.4);

  // A reading with a failed step stays failed; a message without readings is an error.
  nlohmann::json j = class_to_wire(c);
  j["readings"][1]["errors"] = {"rtt over the link: tb-probe exited 1"};
  auto failed = class_from_wire(j, *wan);
  ASSERT_TRUE(failed);
  EXPECT_EQ(failed->verdict(), ClassVerdict::kFail);
  j["readings"] = nlohmann::json::array();
  EXPECT_FALSE(class_from_wire(j, *wan));
  j.erase("request");
  auto missing = class_from_wire(j, *wan);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("malformed class result"), std::string::npos);
}

// A jitter reading a host stall spoiled (verify/result.h outlier_stall) is the host's on the
// coordinator too: measured on host b, it arrives NOT JUDGED, not a FAIL (the coordinator had
// re-derived the stall without that rule).
TEST(VerifyHosts, AJitterReadingTheHostStalledForStaysTheHostsAcrossTheWire) {
  const auto p = hosts_plan_of(std::string(kHead) + kBjWan + kTwoHosts);
  const auto classes = link_classes(p.topo);
  const auto wan = std::ranges::find_if(classes, [](const LinkClass& c) { return c.crosses(); });
  ASSERT_NE(wan, classes.end());
  ClassResult c;
  c.cls = *wan;
  c.link = p.topo.links[wan->link];
  c.link.emulated.rate = Rate{0};
  c.link.emulated.loss_pct = 0;
  c.link.emulated.delay = Duration{30'000'000};
  c.link.emulated.jitter = Duration{1'000'000};
  c.request = plan_request(c.link, c.target, settings(true));
  Reading r;
  r.outcome.m.base = hosts_rtt(160, 30);
  // 1.66 ms of round-trip sd (+18% one way) from two probes held 16-18 ms.
  r.outcome.m.rtt = hosts_rtt(60'217, 1'664);
  r.outcome.m.rtt->summary.n = 800;
  r.outcome.m.rtt->summary.max = 78'176;
  r.host = HostLoad{};
  r.host->promptness = Promptness{18'000, 18.4, 48, 16'218, 0.006, "SCHED_FIFO 11"};
  r.checks = evaluate(c.link.emulated, r.outcome.m);
  r.stall = reading_stall(r.checks, r.outcome.m, r.host);
  ASSERT_NE(r.stall.find("the host stalled 16.2 ms"), std::string::npos) << r.stall;
  ASSERT_EQ(judge(r), ClassVerdict::kNotJudged);
  c.outcome = r.outcome;
  c.checks = r.checks;
  c.host = r.host;
  c.stall = r.stall;
  auto back = class_from_wire(nlohmann::json::parse(class_to_wire(c).dump()), *wan);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->stall, c.stall);
  EXPECT_EQ(back->verdict(), ClassVerdict::kNotJudged);
}

TEST(VerifyHosts, TheServedEndCrossesTheWire) {
  RemoteEnd e{"b", *parse_ipv4("10.1.0.2"), "ec", "B's address on this link", {"raised"}};
  auto back = remote_end_from_json(nlohmann::json::parse(to_json(e).dump()));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->host, "b");
  EXPECT_EQ(back->addr.to_string(), "10.1.0.2");
  EXPECT_EQ(back->server_dev, "ec");
  EXPECT_EQ(back->notes, std::vector<std::string>{"raised"});
  EXPECT_FALSE(remote_end_from_json({{"host", "b"}, {"addr", "not an address"}}));
}

// A joining host played by a thread over loopback: joins as `host`, answers each message with
// `answer`'s replies until {"done"} (whose rc it keeps), or hangs up when told to.
struct FakePeer {
  std::string host;
  std::function<std::vector<nlohmann::json>(const nlohmann::json&)> answer;
  std::atomic<bool> hang_up{false};  // set: it hangs up at the next {"measure"} instead
  std::vector<nlohmann::json> got;
  int rc = -1;
  std::string error;
  std::thread t;

  void start(const multihost::Hello& hello, int port) {
    t = std::thread([this, hello, port] {
      std::atomic<bool> stop{false};
      multihost::Hello mine = hello;
      mine.host = host;
      auto peer =
          multihost::Peer::join(mine, "a", Ipv4{0x7f000001}, port, std::chrono::seconds(10), stop);
      if (!peer) {
        error = peer.error().message;
        return;
      }
      for (int turn = 0; turn < 200; ++turn) {  // 200 x 100 ms at most
        auto msgs = peer->receive(100);
        if (!msgs) return;
        for (const auto& m : *msgs) {
          if (m.contains("closed")) return;
          got.push_back(m);
          if (m.contains("done")) {
            rc = m["done"]["rc"];
            return;
          }
          if (hang_up && m.contains("measure")) return;
          for (const auto& r : answer(m)) (void)peer->send(r);
        }
      }
    });
  }
  ~FakePeer() {
    if (t.joinable()) t.join();
  }
};

// The coordinator's side of the session over loopback, with hosts b and c played by threads:
// a tunnel class measured by b to the end c serves (c asked first, b told where it listens, c
// told to stop after); c failing to serve fails the class without asking b; b hanging up
// mid-measurement fails its class; every host hears the verdict.
TEST(VerifySession, TheCoordinatorAsksTheServerThenTheClientAndFailsWhatGoesAway) {
  const auto p = hosts_plan_of(std::string(kHead) + kBjWan + kTwoHosts);
  lab::LabState st = state_of(p, "a");
  const Ipv4 lo{0x7f000001};
  auto classes = link_classes(p.topo);
  const auto wan = std::ranges::find_if(classes, [](const LinkClass& c) { return c.crosses(); });
  ASSERT_NE(wan, classes.end());
  LinkClass tunnel = *wan;  // as if A's end were on b and B's on c
  tunnel.host = "b";
  tunnel.serve_host = "c";
  const size_t n = static_cast<size_t>(wan - classes.begin());
  VerifyHosts hosts;
  hosts.me = hosts.coordinator = "a";
  hosts.coordinator_addr = lo;
  hosts.peers = {"b", "c"};
  hosts.parts = {"a", "b", "c"};
  ClassContext ctx;
  ctx.st = &st;
  ctx.settings = settings(true);
  ctx.figures = [&](size_t i) { return st.topo.links.at(i).emulated; };
  const std::string digest = verify_digest(classes, "quick=1");
  // Below the ephemeral range (multihost_session_test.cc test_port says why).
  const int port = 24000 + static_cast<int>(::getpid() % 1000) * 2;

  // What b sends back: the class measured (one passing reading of made-up figures).
  ClassResult measured = unmeasured(ctx, tunnel, "placeholder");
  measured.outcome = {};
  measured.target.addr = *parse_ipv4("10.9.9.9");
  measured.request.target = measured.target;
  nlohmann::json end_seen;
  FakePeer b{"b", [&](const nlohmann::json& m) -> std::vector<nlohmann::json> {
               if (!m.contains("measure")) return {};
               end_seen = m.value("end", nlohmann::json());
               return {
                   {{"again", {{"class", m["measure"]}, {"n", 2}, {"why", "a check out"}}}},
                   {{"result", {{"class", m["measure"]}, {"result", class_to_wire(measured)}}}}};
             }};
  int serves = 0;
  FakePeer c{"c", [&](const nlohmann::json& m) -> std::vector<nlohmann::json> {
               if (m.contains("serve")) {
                 if (serves++ == 1)
                   return {{{"serving", {{"class", m["serve"]}, {"error", "no address on br"}}}}};
                 RemoteEnd e{"c", *parse_ipv4("10.9.9.9"), "ec", "B's address on this link", {}};
                 return {{{"serving", {{"class", m["serve"]}, {"end", to_json(e)}}}}};
               }
               if (m.contains("unserve")) return {{{"unserved", m["unserve"]}}};
               return {};
             }};
  const multihost::Hello hello{st.lab, "", "verify", st.digest, digest};
  b.start(hello, port);
  c.start(hello, port);
  std::atomic<bool> stop{false};
  auto coord = VerifyCoordinator::open(st, hosts, digest, port, stop);
  ASSERT_TRUE(coord) << coord.error().message;
  std::vector<std::string> agains;
  auto on_again = [&](int k, const std::string& why) {
    agains.push_back(std::to_string(k) + " " + why);
  };

  ClassResult ok = coord->measure(ctx, tunnel, n, stop, on_again);
  EXPECT_TRUE(ok.outcome.errors.empty()) << ok.outcome.errors.front();
  EXPECT_EQ(ok.target.addr.to_string(), "10.9.9.9");
  EXPECT_EQ(ok.cls.where(), "b -> c (a VXLAN tunnel)");
  EXPECT_EQ(end_seen.value("host", ""), "c");  // b was told where c listens
  EXPECT_EQ(end_seen.value("addr", ""), "10.9.9.9");
  EXPECT_EQ(agains, std::vector<std::string>{"2 a check out, on host b"});

  ClassResult no_server = coord->measure(ctx, tunnel, n, stop, on_again);
  ASSERT_EQ(no_server.outcome.errors.size(), 1u);
  EXPECT_EQ(no_server.outcome.errors[0], "serving B's end on host c: no address on br");
  EXPECT_TRUE(no_server.failed());

  b.hang_up = true;  // b hangs up when asked next
  ClassResult gone = coord->measure(ctx, tunnel, n, stop, on_again);
  ASSERT_EQ(gone.outcome.errors.size(), 1u);
  EXPECT_EQ(gone.outcome.errors[0], "measured on host b: host b went away");
  coord->done(1, "host a's report on its stdout");
  b.t.join();
  c.t.join();
  EXPECT_EQ(b.error, "");
  EXPECT_EQ(c.rc, 1);
  // c was asked to serve three times and told to stop after the first and the third; b was
  // asked to measure twice (not after c could not serve).
  int serve = 0, unserve = 0, measure = 0;
  for (const auto& m : c.got) serve += m.contains("serve"), unserve += m.contains("unserve");
  for (const auto& m : b.got) measure += m.contains("measure");
  EXPECT_EQ(serve, 3);
  EXPECT_EQ(unserve, 2);
  EXPECT_EQ(measure, 2);
}

}  // namespace
}  // namespace tb::verify
