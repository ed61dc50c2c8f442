// Hostile or odd scenario input (issue 12, "Bad input"): nesting deep enough to overflow the
// parser's stack, oversized files, integers that do not fit, huge values, a bare address, a
// string where an array belongs, and the one-format error report. Every case ends in a
// bad-input error (exit code 2) with a message, never a signal.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "cli/exit_code.h"
#include "scenario/bounds.h"
#include "scenario/loader.h"
#include "scenario/reader.h"
#include "scenario_text.h"

namespace tb::scenario {
namespace {

using testing_text::load_error;

// Lines 1-19: a valid lab with regions "hz" and "bj"; tests append from line 20.
constexpr const char* kTwoRegions = R"([lab]
name = "t"

[[region]]
name = "hz"
servers = 2
gpus_per_server = 2
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"

[[region]]
name = "bj"
servers = 1
gpus_per_server = 1
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"
spines = 1
)";

std::string nested(int levels) {
  return "[lab]\nname = " + std::string(levels, '[') + std::string(levels, ']') + "\n";
}

TEST(ScenarioInput, HeadIsValid) {
  auto s = load_text(kTwoRegions, "x.toml");
  EXPECT_TRUE(s) << s.error().message;
}

// 6,000 nested arrays overflowed toml11's recursion (SIGSEGV). The loader runs in a forked
// child, so a regression fails this test instead of taking the test binary down.
TEST(ScenarioInput, DeepNestingIsRefusedNotACrash) {
  const std::string deep = nested(6000);
  EXPECT_EXIT(
      {
        auto s = load_text(deep, "x.toml");
        std::exit(!s && s.error().exit_code == kExitBadInput ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  // Refused by the byte scan, before the parser sees the text, at the bracket one too deep.
  auto why = detail::exceeds_bounds(deep, "x.toml");
  ASSERT_TRUE(why);
  EXPECT_EQ(*why,
            "x.toml:2:" + std::to_string(8 + detail::kMaxNesting) +
                ": arrays and inline tables nested more than 32 levels deep; a scenario needs "
                "three or four");
  EXPECT_EQ(load_error(deep), *why);
  EXPECT_FALSE(detail::exceeds_bounds(nested(detail::kMaxNesting), "x.toml"));
  // The parser then reports what is really wrong with a shallow one.
  EXPECT_HAS(load_error(nested(3)), "lab: name: must be a string (got an array)");
}

TEST(ScenarioInput, BracketsInStringsAndCommentsDoNotCount) {
  const std::string brackets(100, '[');
  const std::string text = std::string(kTwoRegions) + "# " + brackets + "\n" + "[scale] # " +
                           brackets + "\n" + "delay = 1.0\n";
  EXPECT_FALSE(detail::exceeds_bounds(text, "x.toml"));
  EXPECT_FALSE(detail::exceeds_bounds("a = \"" + brackets + "\\\"\"\nb = '" + brackets +
                                          "'\nc = \"\"\"\n" + brackets + "\n\"\"\"\n" + "d = '''" +
                                          brackets + "'''\n",
                                      "x.toml"));
  auto s = load_text(std::string(kTwoRegions) + "# " + brackets + "\n", "x.toml");
  EXPECT_TRUE(s) << s.error().message;
}

TEST(ScenarioInput, LongDottedKeysAreRefused) {
  std::string key = "a";
  for (int i = 1; i <= detail::kMaxKeyParts; ++i) key += ".a";  // one part too many
  EXPECT_EQ(load_error("[lab]\nname = \"t\"\n[x]\n" + key + " = 1\n"),
            "x.toml:4:" + std::to_string(2 * detail::kMaxKeyParts) +
                ": a dotted key or table name of more than 32 parts; a scenario needs two or "
                "three");
  EXPECT_HAS(load_error("[" + key + "]\n"), "x.toml:1:");
  EXPECT_HAS(load_error("[lab]\nx = {" + key + " = 1}\n"), "x.toml:2:");
  // Dots in values and quoted keys are not key parts.
  EXPECT_FALSE(
      detail::exceeds_bounds("\"" + key + "\" = 1\nb = \"" + key + "\"\nc = 1.5\n", "x.toml"));
}

TEST(ScenarioInput, FileTooLargeIsRefused) {
  const std::string big = "[lab]\nname = \"t\"\n# " + std::string(detail::kMaxFileBytes, 'x');
  EXPECT_EQ(load_error(big), "x.toml: scenario file too large (" + std::to_string(big.size()) +
                                 " bytes); at most 1048576 bytes (1 MiB)");
}

// 9999999999999999999 was clamped by the parser and reported as "(got 9223372036854775807)".
TEST(ScenarioInput, IntegerThatDoesNotFitIsAnError) {
  const std::string head = "[lab]\nname = \"t\"\n\n[[region]]\nname = \"hz\"\n";
  auto m = load_error(head + "servers = 9999999999999999999\n");
  EXPECT_EQ(m,
            "x.toml:6:11: region.servers: \"9999999999999999999\" does not fit in a 64-bit "
            "integer (-9223372036854775808 to 9223372036854775807)");
  EXPECT_HAS(load_error(head + "servers = -9_223_372_036_854_775_809\n"),
             "x.toml:6:11: region.servers: \"-9_223_372_036_854_775_809\" does not fit");
  EXPECT_HAS(load_error(head + "servers = 0x1_0000_0000_0000_0000\n"), "does not fit");
  EXPECT_HAS(load_error(head + "servers = [1, 99999999999999999999]\n"), "x.toml:6:15: ");
  // The largest and smallest that fit are read as they are.
  EXPECT_HAS(load_error(head + "servers = 9223372036854775807\n"),
             "must be at most 1023 (got 9223372036854775807)");
  EXPECT_HAS(load_error(head + "servers = -9223372036854775808\n"),
             "must be at least 1 (got -9223372036854775808)");
}

// A 500,000-character value was quoted in full in the message.
TEST(ScenarioInput, LongValuesAreQuotedShortened) {
  const std::string v(500'000, 'a');
  auto m = load_error("[lab]\nname = \"" + v + "\"\n");
  EXPECT_LT(m.size(), 400u) << m.substr(0, 400);
  EXPECT_HAS(m, "\"" + std::string(60, 'a') + "\u2026\" (500000 characters)");
  // Also in a message made by a unit parser, which quotes the value itself.
  m = load_error(std::string(kTwoRegions) + "[profiles.p]\nrate = \"" + v + "\"\n");
  EXPECT_LT(m.size(), 1000u) << m.substr(0, 1000);
  EXPECT_HAS(m, "(500000 characters)");
  // And in a syntax error, whose snippet would quote the whole line.
  m = load_error("[lab]\nname = \"t\" " + v + "\n");
  EXPECT_LT(m.size(), 1000u) << m.substr(0, 1000);
  EXPECT_HAS(m, "x.toml:2:");
  // Short values are quoted whole; characters, not bytes, are counted.
  EXPECT_EQ(detail::quote("abc"), "\"abc\"");
  std::string u;
  for (int i = 0; i < 70; ++i) u += "\u00e9";
  EXPECT_EQ(detail::quote(u), "\"" + u.substr(0, 120) + "\u2026\" (70 characters)");
}

// "198.18.0.0" was read as a /32 and reported as "(got /32)", which the user never wrote.
TEST(ScenarioInput, AddressWithoutPrefixLength) {
  EXPECT_EQ(load_error(std::string(kTwoRegions).insert(17, "address_space = \"198.18.0.0\"\n")),
            "x.toml:3:17: lab: address_space: \"198.18.0.0\" has no prefix length; write "
            "ADDRESS/LEN with LEN at most 24, e.g. \"198.18.0.0/15\"");
}

// A string where the array belongs was counted as one region.
TEST(ScenarioInput, BetweenWrittenAsString) {
  EXPECT_EQ(load_error(std::string(kTwoRegions) + "\n[[wan]]\nname = \"ec\"\nbetween = \"hz,bj\"\n"
                                                  "profile = \"express-connect\"\n"),
            "x.toml:23:11: wan \"ec\": between: must be an array of two region names, e.g. "
            "[\"hz\", \"bj\"] (got a string, \"hz,bj\")");
}

// Every line of a report with several problems is FILE:LINE:COL: ..., the first one too.
TEST(ScenarioInput, EveryReportLineHasOneFormat) {
  auto s = load_text("[lab]\nname = \"t\"\nnmae = 1\n[[region]]\nname = \"hz\"\nservers = 0\n",
                     "x.toml");
  ASSERT_FALSE(s);
  const std::string out = cli::report_text(s.error());
  size_t lines = 0;
  for (size_t at = 0; at < out.size();) {
    size_t nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    EXPECT_TRUE(out.compare(at, 7, "x.toml:") == 0) << out;
    ++lines;
    at = nl + 1;
  }
  EXPECT_GE(lines, 3u) << out;
  // A message without a place keeps the program's name.
  EXPECT_EQ(cli::report_text(Error{"lab x is down, not up", 0, kExitBadInput}),
            "testbedctl: lab x is down, not up");
  EXPECT_EQ(cli::report_text(Error{"x.toml: cannot read scenario file: it is a directory"}),
            "testbedctl: x.toml: cannot read scenario file: it is a directory");
  EXPECT_EQ(cli::report_text(Error{"a:b: c"}), "testbedctl: a:b: c");
  EXPECT_EQ(cli::report_text(Error{"x.toml:3:1: lab: name: missing"}),
            "x.toml:3:1: lab: name: missing");
}

}  // namespace
}  // namespace tb::scenario
