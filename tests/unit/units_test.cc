// core/units: the forms users write, round trips, and the messages for what is not accepted.
#include "core/units.h"

#include <gtest/gtest.h>

namespace tb {
namespace {

#define EXPECT_HAS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

TEST(Units, RateForms) {
  EXPECT_EQ(parse_rate("10mbit")->bps, 10e6);
  EXPECT_EQ(parse_rate("400Gbit")->bps, 400e9);
  EXPECT_EQ(parse_rate("1.5tbit")->bps, 1.5e12);
  EXPECT_EQ(parse_rate("900GB/s")->bps, 7.2e12);
  EXPECT_EQ(parse_rate("64MB/s")->bps, 512e6);
  EXPECT_EQ(parse_rate("1kB/s")->bps, 8e3);  // the SI "kB/s"
  EXPECT_EQ(parse_rate("100bit")->bps, 100);
  EXPECT_EQ(parse_rate(" 25 gbit ")->bps, 25e9);
  EXPECT_EQ(parse_rate("0")->bps, 0);
}

TEST(Units, RateBpsIsAmbiguous) {
  auto r = parse_rate("10gbps");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_HAS(r.error().message, "\"10gbps\" is not a rate (\"bps\" is ambiguous");
  EXPECT_HAS(r.error().message, "write \"10gbit\" or \"10GB/s\"); use a number with bit");
  // A bare "bps" suggests "B/s", not "BB/s".
  auto b = parse_rate("300bps");
  ASSERT_FALSE(b);
  EXPECT_HAS(b.error().message, "write \"300bit\" or \"300B/s\")");
}

TEST(Units, RateSmallBIsNotBytes) {
  // "Mb/s" means megabits by convention; reading it as megabytes would be 8x off.
  auto r = parse_rate("100Mb/s");
  ASSERT_FALSE(r);
  EXPECT_HAS(r.error().message, "write \"100mbit\" for bits or \"100MB/s\" for bytes");
  EXPECT_FALSE(parse_rate("1gb/s"));
  EXPECT_TRUE(parse_rate("1GB/s"));
}

TEST(Units, RateRejects) {
  for (const char* bad :
       {"", "fast", "400", "-1gbit", "-0", "nan", "inf", "1e400gbit", "1e300tbit", "10 furlongs"}) {
    auto r = parse_rate(bad);
    EXPECT_FALSE(r) << bad;
    if (!r) {
      EXPECT_EQ(r.error().exit_code, kExitBadInput);
    }
  }
  EXPECT_HAS(parse_rate("-1gbit").error().message, "(must not be negative)");
  EXPECT_HAS(parse_rate("1e300tbit").error().message, "(too large)");
}

TEST(Units, DurationForms) {
  EXPECT_EQ(parse_duration("100ns")->ns, 100);
  EXPECT_EQ(parse_duration("2us")->ns, 2000);
  EXPECT_EQ(parse_duration("2µs")->ns, 2000);
  EXPECT_EQ(parse_duration("25ms")->ns, 25'000'000);
  EXPECT_EQ(parse_duration("1.5s")->ns, 1'500'000'000);
  EXPECT_EQ(parse_duration("0")->ns, 0);
  EXPECT_EQ(parse_duration("25MS")->ns, 25'000'000);
}

TEST(Units, DurationRejects) {
  for (const char* bad : {"", "5", "5 minutes", "-5ms", "1e300s", "ms"}) {
    auto d = parse_duration(bad);
    EXPECT_FALSE(d) << bad;
    if (!d) {
      EXPECT_EQ(d.error().exit_code, kExitBadInput);
      EXPECT_HAS(d.error().message, "is not a duration");
    }
  }
  EXPECT_HAS(parse_duration("-5ms").error().message, "(must not be negative)");
  EXPECT_HAS(parse_duration("1e300s").error().message, "(too large)");
}

TEST(Units, SizeForms) {
  EXPECT_EQ(*parse_size("512"), 512u);
  EXPECT_EQ(*parse_size("8K"), 8192u);
  EXPECT_EQ(*parse_size("64M"), 64u << 20);
  EXPECT_EQ(*parse_size("1G"), 1u << 30);
  EXPECT_EQ(*parse_size("0.5K"), 512u);
  EXPECT_EQ(*parse_size("2GiB"), 2ull << 30);
}

TEST(Units, SizeRejects) {
  for (const char* bad : {"", "-8K", "8T", "1.5", "1e30G", "lots"}) {
    auto s = parse_size(bad);
    EXPECT_FALSE(s) << bad;
    if (!s) {
      EXPECT_EQ(s.error().exit_code, kExitBadInput);
    }
  }
  EXPECT_HAS(parse_size("1.5").error().message, "(not a whole number of bytes)");
  EXPECT_HAS(parse_size("1e30G").error().message, "(too large)");
}

TEST(Units, Percent) {
  EXPECT_EQ(*parse_percent("0.5%"), 0.5);
  EXPECT_EQ(*parse_percent("10"), 10);
  EXPECT_EQ(*parse_percent("100%"), 100);
  EXPECT_FALSE(parse_percent("101%"));
  EXPECT_HAS(parse_percent("101%").error().message, "(more than 100)");
  EXPECT_FALSE(parse_percent("-1%"));
  EXPECT_HAS(parse_percent("-1%").error().message, "(must not be negative)");
  EXPECT_FALSE(parse_percent("5 percent"));
}

TEST(Units, FormatRate) {
  EXPECT_EQ(format_rate(Rate{400e9}), "400Gbit");
  EXPECT_EQ(format_rate(Rate{2.5e6}), "2.5Mbit");
  EXPECT_EQ(format_rate(Rate{7.2e12}), "7.2Tbit");
  EXPECT_EQ(format_rate(Rate{1500}), "1.5Kbit");
  EXPECT_EQ(format_rate(Rate{10}), "10bit");
  EXPECT_EQ(format_rate(Rate{0}), "0bit");
}

TEST(Units, FormatDuration) {
  EXPECT_EQ(format_duration(Duration{0}), "0");
  EXPECT_EQ(format_duration(Duration{100}), "100ns");
  EXPECT_EQ(format_duration(Duration{2000}), "2us");
  EXPECT_EQ(format_duration(Duration{25'000'000}), "25ms");
  EXPECT_EQ(format_duration(Duration{1'500'000'000}), "1.5s");
  EXPECT_EQ(format_duration(Duration{-5'000'000}), "-5ms");
}

TEST(Units, FormatSize) {
  EXPECT_EQ(format_size(0), "0");
  EXPECT_EQ(format_size(1536), "1536");
  EXPECT_EQ(format_size(8192), "8K");
  EXPECT_EQ(format_size(64u << 20), "64M");
  EXPECT_EQ(format_size(3ull << 30), "3G");
}

TEST(Units, RoundTrips) {
  for (const char* text : {"10mbit", "400gbit", "1.5tbit", "900GB/s", "25gbit", "1kbit", "0"}) {
    Rate r = *parse_rate(text);
    EXPECT_EQ(*parse_rate(format_rate(r)), r) << text << " -> " << format_rate(r);
  }
  for (const char* text : {"100ns", "2us", "250us", "25ms", "1.5s", "3s", "0"}) {
    Duration d = *parse_duration(text);
    EXPECT_EQ(*parse_duration(format_duration(d)), d) << text << " -> " << format_duration(d);
  }
  for (uint64_t n : {0ull, 1ull, 1000ull, 8192ull, 64ull << 20, 1ull << 30, 12345ull}) {
    EXPECT_EQ(*parse_size(format_size(n)), n) << n;
  }
}

}  // namespace
}  // namespace tb
