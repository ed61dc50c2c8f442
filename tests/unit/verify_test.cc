// verify: tolerance math (binomial interval, 3% + 0.2 ms, 5% of the ideal goodput, 25% jitter),
// link classes, --link lookup, probe targets and buffer sizing, on the shipped scenarios.
#include <gtest/gtest.h>

#include <cmath>

#include "plan/plan.h"
#include "report/verify.h"
#include "scenario/loader.h"
#include "verify/classes.h"
#include "verify/measure.h"
#include "verify/result.h"
#include "verify/tolerance.h"

namespace tb::verify {
namespace {

probe::RttResult rtt(double mean_us, double stdev_us, int sent = 1000, int received = 1000) {
  probe::RttResult r;
  r.sent = sent;
  r.received = received;
  r.summary.n = static_cast<size_t>(received);
  r.summary.mean = mean_us;
  r.summary.stdev = stdev_us;
  // Quartiles of a normal sample with this mean and stdev.
  r.summary.p50 = mean_us;
  r.summary.p25 = mean_us - 0.6745 * stdev_us;
  r.summary.p75 = mean_us + 0.6745 * stdev_us;
  return r;
}

probe::GoodputResult goodput(double bps, int mss = 1448) {
  probe::GoodputResult g;
  g.goodput_bps = bps;
  g.mss = mss;
  g.timestamps = true;
  return g;
}

Duration ms(double v) {
  return Duration{static_cast<int64_t>(v * 1e6)};
}

plan::Topology topo(const std::string& scenario) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + scenario);
  EXPECT_TRUE(s.has_value()) << (s ? "" : s.error().message);
  auto p = plan::compile(*s);
  EXPECT_TRUE(p.has_value());
  return p->topo;
}

// The interfaces the kernel would report in a node's namespace: one per port on a link,
// holding the link's address, plus bridges holding the node's bridge addresses.
std::vector<apply::IfaceInfo> ifaces_of(
    const plan::Topology& t, const std::string& node,
    const std::vector<std::pair<std::string, std::string>>& bridges = {}) {
  std::vector<apply::IfaceInfo> out;
  for (const auto& l : t.links)
    for (const auto* e : {&l.a, &l.b})
      if (e->node == node) {
        apply::IfaceInfo i;
        i.ifname = e->ifname;
        if (e->addr) i.addrs.push_back(*e->addr);
        out.push_back(i);
      }
  for (const auto& [ifname, role] : bridges) {
    apply::IfaceInfo i;
    i.ifname = ifname;
    for (const auto& [r, p] : t.node(node)->addrs)
      if (r == role) i.addrs.push_back(p);
    out.push_back(i);
  }
  return out;
}

TEST(VerifyTolerance, PayloadRatioFromMtu) {
  EXPECT_NEAR(tcp_payload_ratio(1500), 1448.0 / 1514.0, 1e-12);
  EXPECT_NEAR(tcp_payload_ratio(1500), 0.9564, 1e-4);
  EXPECT_NEAR(tcp_payload_ratio(9000), 8948.0 / 9014.0, 1e-12);
  EXPECT_NEAR(tcp_payload_ratio(1400), 1348.0 / 1414.0, 1e-12);
}

TEST(VerifyTolerance, BinomialRangeMatchesExactQuantiles) {
  // Reference values from exact sums with Python's math.comb.
  EXPECT_EQ(binomial_range(1000, 0.01), (BinomialRange{3, 19}));
  EXPECT_EQ(binomial_range(1000, round_trip_loss(0.01)), (BinomialRange{10, 32}));
  EXPECT_EQ(binomial_range(200, 0.05), (BinomialRange{3, 19}));
  EXPECT_EQ(binomial_range(10000, 0.001), (BinomialRange{3, 19}));
  EXPECT_EQ(binomial_range(1000, 0.5), (BinomialRange{459, 541}));
  EXPECT_EQ(binomial_range(100, 0.0001), (BinomialRange{0, 1}));
  EXPECT_EQ(binomial_range(1000, 0), (BinomialRange{0, 0}));
  EXPECT_EQ(binomial_range(50, 1), (BinomialRange{50, 50}));
  EXPECT_EQ(binomial_range(0, 0.3), (BinomialRange{0, 0}));
}

TEST(VerifyTolerance, RoundTripLoss) {
  EXPECT_DOUBLE_EQ(round_trip_loss(0), 0);
  EXPECT_NEAR(round_trip_loss(0.01), 0.0199, 1e-12);
  EXPECT_DOUBLE_EQ(round_trip_loss(1), 1);
}

TEST(VerifyTolerance, LossInsideAndOutsideTheInterval) {
  // 1% per direction, 1000 probes: 10..32 lost is fine.
  EXPECT_EQ(check_loss(1, rtt(0, 0, 1000, 1000 - 20)).verdict, Verdict::kPass);
  EXPECT_EQ(check_loss(1, rtt(0, 0, 1000, 1000 - 10)).verdict, Verdict::kPass);
  EXPECT_EQ(check_loss(1, rtt(0, 0, 1000, 1000 - 9)).verdict, Verdict::kFail);
  EXPECT_EQ(check_loss(1, rtt(0, 0, 1000, 1000 - 33)).verdict, Verdict::kFail);
  // No loss configured: a single lost probe fails.
  EXPECT_EQ(check_loss(0, rtt(0, 0)).verdict, Verdict::kPass);
  auto one = check_loss(0, rtt(0, 0, 1000, 999));
  EXPECT_EQ(one.verdict, Verdict::kFail);
  EXPECT_NE(one.reason.find("[0, 0]"), std::string::npos);
  EXPECT_EQ(check_loss(0, std::nullopt).verdict, Verdict::kFail);
}

TEST(VerifyTolerance, DelayThreePercentPlusPointTwoMs) {
  const auto base = rtt(20, 5);
  // 25 ms one way: tolerance 0.75 + 0.2 = 0.95 ms. RTT = 2 x one-way + base.
  auto at = [&](double one_way_ms) {
    return check_delay(ms(25), rtt(20 + 2 * one_way_ms * 1000, 30), base);
  };
  EXPECT_EQ(at(25).verdict, Verdict::kPass);
  EXPECT_NEAR(*at(25).achieved, 25, 1e-9);
  EXPECT_EQ(at(25.94).verdict, Verdict::kPass);
  EXPECT_EQ(at(24.06).verdict, Verdict::kPass);
  EXPECT_EQ(at(25.96).verdict, Verdict::kFail);
  EXPECT_EQ(at(24.04).verdict, Verdict::kFail);
  EXPECT_NEAR(at(25).high, 25.95, 1e-9);
  // 1 ms: 0.03 + 0.2.
  EXPECT_EQ(check_delay(ms(1), rtt(20 + 2 * 1220, 1), base).verdict, Verdict::kPass);
  EXPECT_EQ(check_delay(ms(1), rtt(20 + 2 * 1240, 1), base).verdict, Verdict::kFail);
  // An unshaped link asked to be 30 ms fails honestly.
  EXPECT_EQ(check_delay(ms(30), rtt(40, 10), base).verdict, Verdict::kFail);
}

TEST(VerifyTolerance, BaseIsTakenRobustly) {
  // A base run with one 5 ms scheduler hiccup: its mean and stdev move, its median and IQR not.
  auto base = rtt(20, 5);
  base.summary.mean = 45;
  base.summary.stdev = 160;
  const auto link = rtt(20 + 2 * 10'000, std::sqrt(2.0) * 1000);
  EXPECT_NEAR(*check_delay(ms(10), link, base).achieved, 10, 1e-9);
  EXPECT_NEAR(*check_jitter(ms(1), link, base).achieved, std::sqrt((2e6 - 25) / 2) / 1000, 1e-9);
}

TEST(VerifyTolerance, DelayBelowOneMsIsNotChecked) {
  auto c = check_delay(ms(0.25), rtt(40, 10), rtt(20, 5));
  EXPECT_EQ(c.verdict, Verdict::kNotChecked);
  EXPECT_FALSE(c.reason.empty());
  EXPECT_TRUE(c.achieved.has_value());  // still reported
  EXPECT_EQ(check_delay(Duration{0}, std::nullopt, std::nullopt).verdict, Verdict::kNotChecked);
  // In range but not measured: a failure, not a pass.
  EXPECT_EQ(check_delay(ms(10), std::nullopt, rtt(20, 5)).verdict, Verdict::kFail);
}

TEST(VerifyTolerance, RateFivePercentOfIdealGoodput) {
  const double ideal = 100e6 * 1448 / 1514;
  EXPECT_EQ(check_rate(Rate{100e6}, 1500, goodput(ideal)).verdict, Verdict::kPass);
  EXPECT_EQ(check_rate(Rate{100e6}, 1500, goodput(ideal * 1.049)).verdict, Verdict::kPass);
  EXPECT_EQ(check_rate(Rate{100e6}, 1500, goodput(ideal * 0.951)).verdict, Verdict::kPass);
  EXPECT_EQ(check_rate(Rate{100e6}, 1500, goodput(ideal * 1.051)).verdict, Verdict::kFail);
  EXPECT_EQ(check_rate(Rate{100e6}, 1500, goodput(ideal * 0.949)).verdict, Verdict::kFail);
  // Exactly the configured rate is 4.6% above the ideal: still within 5%...
  EXPECT_EQ(check_rate(Rate{100e6}, 1500, goodput(100e6)).verdict, Verdict::kPass);
  // ...but at MTU 9000 the overhead is smaller and the ideal is higher.
  EXPECT_NEAR(check_rate(Rate{1e9}, 9000, goodput(1e9, 8948)).expected, 1e9 * 8948 / 9014, 1);
  // Unshaped veth (~20 Gbit/s) against a 25 Mbit/s scenario: an honest failure.
  auto c = check_rate(Rate{25e6}, 1500, goodput(19.8e9));
  EXPECT_EQ(c.verdict, Verdict::kFail);
  EXPECT_NE(c.reason.find("from the ideal"), std::string::npos);
  // An MSS that does not match the MTU is called out.
  EXPECT_NE(check_rate(Rate{100e6}, 1500, goodput(ideal, 1400)).detail.find("MSS was 1400"),
            std::string::npos);
}

TEST(VerifyTolerance, RateOutsideTenMbitToTwoGbitIsNotChecked) {
  for (double r : {0.0, 5e6, 2.5e9, 7.2e9}) {
    auto c = check_rate(Rate{r}, 1500, goodput(1e9));
    EXPECT_EQ(c.verdict, Verdict::kNotChecked) << r;
    EXPECT_FALSE(c.reason.empty()) << r;
  }
  EXPECT_EQ(check_rate(Rate{10e6}, 1500, goodput(10e6 * 1448 / 1514)).verdict, Verdict::kPass);
  EXPECT_EQ(check_rate(Rate{2e9}, 1500, goodput(2e9 * 1448 / 1514)).verdict, Verdict::kPass);
  EXPECT_EQ(check_rate(Rate{1e9}, 1500, std::nullopt).verdict, Verdict::kFail);
}

TEST(VerifyTolerance, JitterTwentyFivePercentOfOneWayStdev) {
  const auto base = rtt(20, 10);
  // 1 ms one-way stdev on each direction: RTT variance 2 ms^2 (+ the base's).
  auto with = [&](double sigma_ms) {
    const double var = 2 * sigma_ms * sigma_ms * 1e6 + 100;
    return check_jitter(ms(1), rtt(2000, std::sqrt(var)), base);
  };
  EXPECT_NEAR(*with(1).achieved, 1, 1e-9);
  EXPECT_EQ(with(1).verdict, Verdict::kPass);
  EXPECT_EQ(with(1.24).verdict, Verdict::kPass);
  EXPECT_EQ(with(0.76).verdict, Verdict::kPass);
  EXPECT_EQ(with(1.26).verdict, Verdict::kFail);
  EXPECT_EQ(with(0.74).verdict, Verdict::kFail);
  EXPECT_EQ(check_jitter(Duration{0}, rtt(20, 10), base).verdict, Verdict::kNotChecked);
  EXPECT_EQ(check_jitter(ms(0.2), rtt(20, 10), base).verdict, Verdict::kNotChecked);
  // Less spread than the base: zero, not NaN.
  EXPECT_EQ(*check_jitter(ms(1), rtt(20, 1), base).achieved, 0);
}

TEST(VerifyTolerance, EvaluateOrderAndNothingMeasured) {
  plan::EmulatedFigures f;
  f.rate = Rate{25e6};
  f.delay = ms(30);
  auto checks = evaluate(f, Measurement{});
  ASSERT_EQ(checks.size(), 4u);
  EXPECT_EQ(checks[0].name, "rate");
  EXPECT_EQ(checks[1].name, "delay");
  EXPECT_EQ(checks[2].name, "jitter");
  EXPECT_EQ(checks[3].name, "loss");
  EXPECT_EQ(checks[0].verdict, Verdict::kFail);
  EXPECT_EQ(checks[1].verdict, Verdict::kFail);
  EXPECT_EQ(checks[2].verdict, Verdict::kNotChecked);
  EXPECT_EQ(checks[3].verdict, Verdict::kFail);
}

TEST(VerifyClasses, MiniHasFourClassesWithRepresentatives) {
  const auto t = topo("mini.toml");
  const auto cs = link_classes(t);
  ASSERT_EQ(cs.size(), 4u);
  std::vector<std::string> names;
  int members = 0;
  for (const auto& c : cs) {
    names.push_back(c.name());
    members += c.members;
    EXPECT_EQ(t.links[c.link].tier, c.tier);
    EXPECT_EQ(t.links[c.link].profile, c.profile);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"uplink/vpc", "frontend/vpc", "scale-up/nvlink",
                                             "scale-out/hpn"}));
  EXPECT_EQ(members, static_cast<int>(t.links.size()));
  EXPECT_EQ(cs[2].members, 4);
}

TEST(VerifyClasses, HzBjSeparatesWanProfilesAndSpineProfiles) {
  const auto t = topo("hz-bj.toml");
  std::set<std::string> names;
  for (const auto& c : link_classes(t)) names.insert(c.name());
  EXPECT_TRUE(names.contains("wan/express-connect"));
  EXPECT_TRUE(names.contains("wan/vpn"));
  EXPECT_TRUE(names.contains("aggregation/spine"));  // hz: its own spine profile
  EXPECT_TRUE(names.contains("aggregation/rail"));   // bj: spine_link defaults to rail
}

TEST(VerifyClasses, FindLinkEitherOrderAndAmbiguity) {
  const auto t = topo("hz-bj.toml");
  auto i = find_link(t, parse_endpoint("hz/s0/g0"), parse_endpoint("hz-tor0a"));
  ASSERT_TRUE(i.has_value()) << i.error().message;
  EXPECT_EQ(t.links[*i].a.ifname, "raila");
  auto j = find_link(t, parse_endpoint("hz/tor0a"), parse_endpoint("hz/s0/g0"));
  ASSERT_TRUE(j.has_value());
  EXPECT_EQ(*i, *j);
  // Two WAN links join the transit routers: ambiguous until a port is named.
  auto both = find_link(t, parse_endpoint("hz/tr"), parse_endpoint("bj/tr"));
  ASSERT_FALSE(both.has_value());
  EXPECT_EQ(both.error().exit_code, kExitBadInput);
  EXPECT_NE(both.error().message.find("hz/tr:vpn bj/tr:vpn"), std::string::npos);
  auto vpn = find_link(t, parse_endpoint("hz/tr:vpn"), parse_endpoint("bj/tr"));
  ASSERT_TRUE(vpn.has_value());
  EXPECT_EQ(t.links[*vpn].profile, "vpn");
  EXPECT_EQ(find_link(t, parse_endpoint("hz/nope"), parse_endpoint("bj/tr")).error().exit_code,
            kExitBadInput);
  EXPECT_FALSE(find_link(t, parse_endpoint("hz/s0/g0"), parse_endpoint("bj/tr")).has_value());
  EXPECT_EQ(class_of(t, *vpn).members, 1);
}

TEST(VerifyTargets, AddressOnTheLinkOrTheBridge) {
  const auto t = topo("mini.toml");
  // Rail link: B (the ToR) has the same /32 on every port; the server binds to this port.
  const auto& rail = t.links[*find_link(t, parse_endpoint("dc/s0/g1"), parse_endpoint("dc/tor0"))];
  auto p = probe_target(t, rail, ifaces_of(t, "dc/tor0"));
  ASSERT_TRUE(p.has_value()) << p.error().message;
  EXPECT_EQ(p->addr, rail.b.addr->addr);
  EXPECT_EQ(p->server_dev, "s0g1");
  EXPECT_EQ(p->a_dev, "rail");
  EXPECT_EQ(p->a_netns, "tb-mini-dc-s0-g1");
  EXPECT_EQ(p->why, "B's address on this link");
  // NVLink port of the NVSwitch bridge: no address on B's port, so B's "nvl" address.
  const auto& nvl = t.links[*find_link(t, parse_endpoint("dc/s1/g0"), parse_endpoint("dc/s1"))];
  ASSERT_FALSE(nvl.b.addr.has_value());
  auto q = probe_target(t, nvl, ifaces_of(t, "dc/s1", {{"nvsw", "nvl"}}));
  ASSERT_TRUE(q.has_value()) << q.error().message;
  EXPECT_EQ(q->addr.to_string(), "198.18.0.49");
  EXPECT_EQ(q->server_dev, "nvsw");
  EXPECT_NE(q->why.find("bridge port"), std::string::npos);
  EXPECT_NE(q->why.find("\"nvl\""), std::string::npos);
  // Frontend port of the VPC switch: B's "fe" address on br.
  const auto& fe = t.links[*find_link(t, parse_endpoint("dc/s0"), parse_endpoint("dc/vpc"))];
  auto r = probe_target(t, fe, ifaces_of(t, "dc/vpc", {{"br", "fe"}}));
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_EQ(r->addr.to_string(), "198.18.0.33");
  EXPECT_EQ(r->server_dev, "br");
  // Nothing in B holds the address (lab not up): an error, not a guess.
  EXPECT_FALSE(probe_target(t, fe, {}).has_value());
}

TEST(VerifyTargets, BufferIsTwiceTheBdpWithinBounds) {
  EXPECT_EQ(tcp_buffer_bytes(Rate{25e6}, ms(0.25)), uint64_t{256} << 10);  // floor
  // 1 Gbit/s, 30 ms: 2 x 1e9 x 0.062 / 8 = 15.5 MB.
  EXPECT_NEAR(static_cast<double>(tcp_buffer_bytes(Rate{1e9}, ms(30))), 15.5e6, 1e3);
  EXPECT_EQ(tcp_buffer_bytes(Rate{400e9}, ms(25)), uint64_t{256} << 20);  // cap
  // Not rate-limited: sized for the host's ~20 Gbit/s.
  EXPECT_NEAR(static_cast<double>(tcp_buffer_bytes(Rate{0}, ms(1))), 2 * 20e9 * 0.004 / 8, 1e3);
}

TEST(VerifyPlan, RequestBoundsAndSlowLinks) {
  const auto t = topo("hz-bj.toml");
  const auto& ec = t.links[*find_link(t, parse_endpoint("hz/tr:ec"), parse_endpoint("bj/tr"))];
  ProbeTarget target;
  auto r = plan_request(ec, target, settings(false));
  EXPECT_EQ(r.probes, 1000);
  EXPECT_EQ(r.interval_us, 1000);
  EXPECT_GE(r.wait_ms, 1000 + 8 * 25);
  EXPECT_GT(r.serve_seconds, 2 * (1 + r.wait_ms / 1000) + r.goodput_seconds + r.drain_ms / 1000);
  EXPECT_EQ(r.buffer, tcp_buffer_bytes(ec.emulated.rate, ec.emulated.delay));
  // The VPN is 1 Gbit/s / 1000 = 1 Mbit/s: probes stretched to use at most 5% of it
  // (74 B x 8 bits / 50 kbit/s = 11.84 ms), the wait covers 30 ms + 4 x 1 ms jitter.
  const auto& vpn = t.links[*find_link(t, parse_endpoint("hz/tr:vpn"), parse_endpoint("bj/tr"))];
  ASSERT_EQ(vpn.emulated.rate.bps, 1e6);
  auto slow = plan_request(vpn, target, settings(true));
  EXPECT_EQ(slow.interval_us, 11840);
  EXPECT_GE(slow.wait_ms, 1000 + 8 * 34);
  EXPECT_EQ(settings(true).probes, 200);
}

TEST(VerifyReport, FailsWhenAnyClassFailsAndSaysWhy) {
  VerifyReport rep;
  rep.lab = "t";
  rep.shaping = "none: unshaped";
  ClassResult c;
  c.cls = {plan::Tier::kUplink, "vpc", 0, 1};
  c.link.emulated.rate = Rate{25e6};
  c.outcome.m.goodput = goodput(19.8e9);
  c.outcome.m.rtt = rtt(30, 5);
  c.outcome.m.base = rtt(20, 5);
  c.checks = evaluate(c.link.emulated, c.outcome.m);
  rep.classes.push_back(c);
  EXPECT_FALSE(rep.passed());
  const auto text = report::verify_text(rep);
  EXPECT_NE(text.find("shaping backend (as status reports it): none: unshaped"), std::string::npos);
  EXPECT_NE(text.find("FAIL"), std::string::npos);
  EXPECT_NE(text.find("not checked"), std::string::npos);
  const auto j = report::verify_json(rep);
  EXPECT_EQ(j["result"], "fail");
  EXPECT_EQ(j["classes"][0]["checks"][0]["verdict"], "fail");
  EXPECT_EQ(j["summary"]["checks_failed"], 1);
  // Within tolerance everywhere: pass.
  rep.classes[0].outcome.m.goodput = goodput(25e6 * 1448 / 1514);
  rep.classes[0].checks = evaluate(rep.classes[0].link.emulated, rep.classes[0].outcome.m);
  EXPECT_TRUE(rep.passed());
  // A failed step fails the class even if every check was out of range.
  rep.classes[0].outcome.errors.push_back("tb-probe exited 1");
  EXPECT_FALSE(rep.passed());
  EXPECT_FALSE(VerifyReport{}.passed());  // nothing measured is not a pass
}

}  // namespace
}  // namespace tb::verify
