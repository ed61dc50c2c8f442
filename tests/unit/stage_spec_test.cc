// stage/queue_spec: the queue spec's text forms, the config file, and queue sizing.
#include "stage/queue_spec.h"

#include <gtest/gtest.h>

namespace tb::stage {
namespace {

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

constexpr int64_t kOneMs = 1'000'000;

TEST(QueueSpec, ParsesTheCommandLineForm) {
  auto s = parse_queue_spec("10:delay_us=25000:jitter_us=1000:maxlen=65536");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->num, 10);
  EXPECT_EQ(s->delay.ns, 25 * kOneMs);
  EXPECT_EQ(s->jitter.ns, 1 * kOneMs);
  EXPECT_EQ(s->maxlen, 65536u);
}

TEST(QueueSpec, DefaultsAndOtherUnits) {
  auto s = parse_queue_spec(" 7:delay=2.5ms ");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->num, 7);
  EXPECT_EQ(s->delay.ns, 2'500'000);
  EXPECT_EQ(s->jitter.ns, 0);
  EXPECT_EQ(s->maxlen, kDefaultMaxlen);
  EXPECT_EQ(parse_queue_spec("65535:delay_ns=1500:jitter=10us")->jitter.ns, 10'000);
  EXPECT_EQ(parse_queue_spec("0:delay_us=0")->delay.ns, 0);
}

TEST(QueueSpec, PrintsWhatItParses) {
  for (QueueSpec s : {QueueSpec{10, Duration{25 * kOneMs}, Duration{1 * kOneMs}, 65536},
                      QueueSpec{0, Duration{0}, Duration{0}, 1024},
                      QueueSpec{65535, Duration{1500}, Duration{7}, 1}}) {
    std::string arg = to_arg(s);
    auto back = parse_queue_spec(arg);
    ASSERT_TRUE(back) << arg << ": " << back.error().message;
    EXPECT_EQ(*back, s) << arg;
  }
  EXPECT_EQ(to_arg({10, Duration{25 * kOneMs}, Duration{1 * kOneMs}, 65536}),
            "10:delay_us=25000:jitter_us=1000:maxlen=65536");
  EXPECT_EQ(to_arg({3, Duration{1500}, Duration{0}, 1024}),
            "3:delay_ns=1500:jitter_us=0:maxlen=1024");
  // An ECN marking queue (mark_table.h): its slot.
  const QueueSpec marking{7, Duration{250'000}, Duration{0}, 2048, 12};
  EXPECT_EQ(to_arg(marking), "7:delay_us=250:jitter_us=0:maxlen=2048:mark=12");
  auto back = parse_queue_spec(to_arg(marking));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, marking);
  EXPECT_EQ(parse_queue_spec("7:delay_us=0:mark=0")->mark, 0);
  EXPECT_EQ(parse_queue_spec("7:delay_us=0")->mark, -1);
}

TEST(QueueSpec, RejectsWithReasons) {
  struct Case {
    const char* text;
    const char* why;
  } cases[] = {
      {"", "must start with a queue number"},
      {"65536:delay_us=1", "must start with a queue number"},
      {"x:delay_us=1", "must start with a queue number"},
      {"10", "no delay"},
      {"10:jitter_us=5", "no delay"},
      {"10:delay_us=-5", "is not a whole number"},
      {"10:delay_us=1.5", "is not a whole number"},
      {"10:delay_us=99999999999", "is not a whole number up to 3600000000"},
      {"10:delay=5 furlongs", "is not a duration"},
      {"10:delay=2h", "is not a duration"},
      {"10:delay_us=5:delay=5ms", "given twice"},
      {"10:delay_us=5:maxlen=0", "is not a packet count"},
      {"10:delay_us=5:maxlen=99999999", "is not a packet count 1-16777216"},
      {"10:delay_us=5:mark=4096", "is not a mark table slot 0-4095"},
      {"10:delay_us=5:mark=-1", "is not a mark table slot"},
      {"10:delay_us=5:color=red", "unknown key \"color\""},
      {"10:delay_us=5:oops", "is not key=value"},
      {"10:delay_ms=5", "unknown key \"delay_ms\""},
  };
  for (const auto& c : cases) {
    auto s = parse_queue_spec(c.text);
    ASSERT_FALSE(s) << c.text;
    EXPECT_EQ(s.error().exit_code, kExitBadInput) << c.text;
    EXPECT_HAS(s.error().message, c.why);
    EXPECT_HAS(s.error().message, std::string("queue spec \"") + c.text + "\"");
  }
}

TEST(QueueSpec, ConfigFile) {
  auto specs = parse_queue_config(
      "# link a-b\n10:delay_us=10000\n\n  11:delay_us=20000:maxlen=4096\r\n# end\n");
  ASSERT_TRUE(specs) << specs.error().message;
  ASSERT_EQ(specs->size(), 2u);
  EXPECT_EQ((*specs)[1].num, 11);
  EXPECT_EQ((*specs)[1].maxlen, 4096u);
  auto again = parse_queue_config(to_config(*specs));
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *specs);
  EXPECT_TRUE(parse_queue_config("")->empty());

  auto dup = parse_queue_config("10:delay_us=1\n10:delay_us=2\n");
  ASSERT_FALSE(dup);
  EXPECT_HAS(dup.error().message, "line 2: queue 10 is given twice");
  auto bad = parse_queue_config("10:delay_us=1\n\n11:delay=x\n");
  ASSERT_FALSE(bad);
  EXPECT_HAS(bad.error().message, "line 3: queue spec \"11:delay=x\"");
}

TEST(QueueSpec, MaxlenHoldsPacketsInFlight) {
  // 10 ms at 100 Mbit: 64-byte frames could be 195k pps -> 2 x 1953 = 3907.
  EXPECT_EQ(queue_maxlen_for(Rate{100e6}, Duration{10 * kOneMs}, 1500), 3907u);
  // Small links and short delays keep the kernel's default.
  EXPECT_EQ(queue_maxlen_for(Rate{10e6}, Duration{1 * kOneMs}, 1500), kDefaultMaxlen);
  EXPECT_EQ(queue_maxlen_for(Rate{400e9}, Duration{0}, 1500), kDefaultMaxlen);
  // 10 Gbit, 25 ms: small packets are capped by the stage's own rate (250k pps), but full-size
  // frames at line rate (833k pps) must fit: 2 x 833333 x 0.025 = 41667.
  EXPECT_EQ(queue_maxlen_for(Rate{10e9}, Duration{25 * kOneMs}, 1500), 41667u);
  // Jumbo frames: 10G / 9000 B is below the ceiling, so the ceiling rules: 2 x 250k x 0.025.
  EXPECT_EQ(queue_maxlen_for(Rate{10e9}, Duration{25 * kOneMs}, 9000), 12500u);
  // Unshaped (rate 0): the stage ceiling. Monotonic in delay and rate.
  EXPECT_EQ(queue_maxlen_for(Rate{0}, Duration{10 * kOneMs}, 1500), 5000u);
  EXPECT_LE(queue_maxlen_for(Rate{1e9}, Duration{5 * kOneMs}, 1500),
            queue_maxlen_for(Rate{1e9}, Duration{10 * kOneMs}, 1500));
  EXPECT_LE(queue_maxlen_for(Rate{1e8}, Duration{10 * kOneMs}, 1500),
            queue_maxlen_for(Rate{1e9}, Duration{10 * kOneMs}, 1500));
  // Never above what a spec accepts.
  EXPECT_EQ(queue_maxlen_for(Rate{1e15}, Duration{3'600'000 * kOneMs}, 1500), kMaxMaxlen);
  EXPECT_TRUE(parse_queue_spec(to_arg(
      {1, Duration{kOneMs}, Duration{0}, queue_maxlen_for(Rate{1e15}, Duration{kOneMs}, 1500)})));
}

}  // namespace
}  // namespace tb::stage
