// tb-probe's wire format, statistics and option bounds (no sockets).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "probe/goodput.h"
#include "probe/packet.h"
#include "probe/rtt.h"
#include "probe/serve.h"
#include "probe/stats.h"

namespace tb::probe {
namespace {

TEST(ProbePacket, BytesArePinnedAndRoundTrip) {
  const ProbePacket p{0x0102030405060708, 42, 1'000'000'123};
  const auto b = encode(p);
  EXPECT_EQ(b[0], 't');
  EXPECT_EQ(b[1], 'b');
  EXPECT_EQ(b[2], 'p');
  EXPECT_EQ(b[3], 'r');
  EXPECT_EQ(b[7], 1);     // version
  EXPECT_EQ(b[8], 0x01);  // session, big-endian
  EXPECT_EQ(b[15], 0x08);
  EXPECT_EQ(b[23], 42);
  EXPECT_EQ(decode_probe(b), p);
  auto bad = b;
  bad[0] = 'x';
  EXPECT_FALSE(decode_probe(bad).has_value());
  EXPECT_FALSE(decode_probe(std::span<const uint8_t>(b.data(), 31)).has_value());
}

TEST(ProbePacket, HelloAndReportRoundTrip) {
  EXPECT_EQ(decode_hello(encode(GoodputHello{1500})), GoodputHello{1500});
  const GoodputReport r{123456789012, 5'000'000'000, 100000000000, 4'000'000'000};
  EXPECT_EQ(decode_report(encode(r)), r);
  EXPECT_FALSE(decode_report(encode(GoodputHello{1})).has_value());
}

TEST(ProbeStats, SummaryMatchesHandComputed) {
  const auto s = summarize({4, 1, 3, 2, 5});
  EXPECT_EQ(s.n, 5u);
  EXPECT_DOUBLE_EQ(s.mean, 3);
  EXPECT_NEAR(s.stdev, std::sqrt(2.5), 1e-12);  // sample stdev (n-1)
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 5);
  EXPECT_DOUBLE_EQ(s.p50, 3);
  EXPECT_NEAR(s.p99, 4.96, 1e-12);  // linear interpolation between ranks
  EXPECT_EQ(summarize({}).n, 0u);
  EXPECT_EQ(summarize({7}).stdev, 0);
  EXPECT_EQ(summary_from_json(to_json(s)), s);
}

TEST(ProbeOptions, BoundedInCountAndTime) {
  RttOptions r{"198.18.0.1", 47000, "", 100, 1000, 1000, false};
  EXPECT_TRUE(validate(r).has_value());
  r.count = 0;
  EXPECT_EQ(validate(r).error().exit_code, kExitBadInput);
  r.count = 1'000'000;
  r.interval_us = 1000;  // 1000 s > 600 s
  EXPECT_FALSE(validate(r).has_value());
  r = {"198.18.0.1", 47000, "", 100, 5, 1000, false};
  EXPECT_FALSE(validate(r).has_value());
  r = {"198.18.0.1", 47000, "", 100, 1000, 1000, false};
  r.warmup_ms = kMaxWarmupMs;
  EXPECT_TRUE(validate(r).has_value());
  r.warmup_ms = kMaxWarmupMs + 1;
  EXPECT_EQ(validate(r).error().exit_code, kExitBadInput);
  r.warmup_ms = -1;
  EXPECT_FALSE(validate(r).has_value());
  GoodputOptions g{"198.18.0.1", 47000, "", 5, 1000, 0, 15000};
  EXPECT_TRUE(validate(g).has_value());
  g.warmup_ms = 5000;
  EXPECT_FALSE(validate(g).has_value());
  g = {"198.18.0.1", 47000, "", 1000, 0, 0, 15000};
  EXPECT_FALSE(validate(g).has_value());
  ServeOptions s{47000, "", "0.0.0.0", 0, 0};
  EXPECT_FALSE(validate(s).has_value());
  s.seconds = 10;
  EXPECT_TRUE(validate(s).has_value());
}

TEST(ProbeJson, RttAndGoodputRoundTrip) {
  RttOptions o{"198.18.0.1", 47000, "rail", 3, 1000, 1000, true};
  RttResult r;
  r.sent = 3;
  r.received = 2;
  r.rtt_us = {10, 20};
  r.summary = summarize(r.rtt_us);
  const auto j = to_json(o, r);
  EXPECT_EQ(j["lost"], 1);
  EXPECT_EQ(j["payload_bytes"], 32);
  EXPECT_FALSE(j.contains("warmup"));  // none asked for
  auto back = rtt_from_json(j);
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->rtt_us, r.rtt_us);
  o.warmup_ms = 2500;
  r.warmup_sent = 2;
  r.warmup_answered = true;
  auto warm = rtt_from_json(to_json(o, r));
  ASSERT_TRUE(warm.has_value());
  EXPECT_EQ(warm->warmup_sent, 2);
  EXPECT_TRUE(warm->warmup_answered);
  EXPECT_EQ(back->summary, r.summary);
  EXPECT_FALSE(rtt_from_json(nlohmann::json{{"mode", "rtt"}}).has_value());

  GoodputOptions go{"198.18.0.1", 47000, "rail", 2, 500, 1 << 20, 15000};
  GoodputResult g;
  g.sent_bytes = 1000;
  g.receiver = {1000, 2'000'000'000, 800, 1'500'000'000};
  g.confirmed = true;
  g.goodput_bps = 800 * 8 / 1.5;
  g.mss = 1448;
  auto gb = goodput_from_json(to_json(go, g));
  ASSERT_TRUE(gb.has_value());
  EXPECT_EQ(gb->receiver, g.receiver);
  EXPECT_DOUBLE_EQ(gb->goodput_bps, g.goodput_bps);
}

}  // namespace
}  // namespace tb::probe
