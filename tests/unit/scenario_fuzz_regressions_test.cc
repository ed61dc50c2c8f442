// What fuzzing the scenario loader found (tests/fuzz, scripts/fuzz; docs/scenario.md "Fuzzing"),
// one test per finding, each with the input that found it or its essence. The fuzz build runs
// under ASan; this suite does not, so each test checks the fix's behaviour (the input refused
// before the parser, a linear-time load, a bounded lab), not the sanitizer report.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "plan/plan.h"
#include "scenario/bounds.h"
#include "scenario/loader.h"
#include "scenario_text.h"

namespace tb::scenario {
namespace {

using testing_text::kHead;
using testing_text::load_error;

// toml11 3.7.1 checks a literal string's UTF-8 after lexing it and, on a bad byte, resets a
// location over the token's copy to an iterator into the whole file: std::count then runs off
// the end of the copy (heap-buffer-overflow under ASan, parse_literal_string, region.hpp:134).
// Fuzzing toml::parse alone (the same engine and seeds) found it in seconds with a literal-
// string key of 0xDE bytes; `a = '\xff'` is enough.
TEST(ScenarioFuzzRegressions, InvalidUtf8IsRefusedBeforeTheParser) {
  EXPECT_EQ(load_error("[lab]\nname = '\xff'\n"),
            "x.toml:2:9: not valid UTF-8 (byte 0xFF); a scenario file must be UTF-8 text");
  const std::string found =
      "'\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde\xde'\xff\xff";
  EXPECT_EQ(load_error(found + std::string("\0\0\x13\x0e]\xe3\xdd s\x0e]\xe3s\xcd\xdd", 17)),
            "x.toml:1:2: not valid UTF-8 (byte 0xDE); a scenario file must be UTF-8 text");
  // The project's own fuzz target found the same bug in multi-line literal strings
  // (parse_ml_literal_string) within a minute once this check was taken out.
  EXPECT_EQ(load_error("[lab]\nname = \'\'\'\x8e\'\'\'\n"),
            "x.toml:2:11: not valid UTF-8 (byte 0x8E); a scenario file must be UTF-8 text");
  // Each kind of malformed sequence, at its first byte.
  for (const char* bad : {"\x80",              // a continuation byte with no lead
                          "\xc0\xaf",          // overlong '/'
                          "\xe0\x80\xaf",      // overlong, 3 bytes
                          "\xed\xa0\x80",      // a UTF-16 surrogate (U+D800)
                          "\xf4\x90\x80\x80",  // above U+10FFFF
                          "\xf8\x88\x80\x80",  // 5-byte form
                          "\xe4\xbd",          // cut short by the end of the file
                          "\xe4\xbd\"\n"}) {   // cut short by the closing quote
    EXPECT_HAS(load_error(std::string(kHead) + "description = \"ok " + bad),
               "x.toml:11:19: not valid UTF-8");
  }
  // Well-formed UTF-8 of every length is text like any other, in comments and strings.
  auto s = load_text(std::string(kHead) +
                         "description = \"caf\xc3\xa9 \xe6\x9d\xad\xe5\xb7\x9e "
                         "\xf0\x9f\x9a\x80\" # \xe2\x9c\x93\n",
                     "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->regions[0].description, "caf\xc3\xa9 \xe6\x9d\xad\xe5\xb7\x9e \xf0\x9f\x9a\x80");
}

// Loading took time quadratic in the file: every integer's place (and every error's) came from
// toml11's location(), which counts the newlines from the top of the file and copies the line
// on each call. Measured before the fix (testbedctl validate, RelWithDebInfo): 25,000 integers
// 2.5 s, 50,000 11.5 s; 200,000 (one per line, 600 KB, under the 1 MiB file bound) would take
// minutes. Now the line starts are indexed once per file. The bound: the linear load takes well
// under a second here; 10 s is far below the old minutes and far above a loaded machine's noise.
TEST(ScenarioFuzzRegressions, ManyValuesLoadInLinearTime) {
  std::string values;
  for (int i = 0; i < 200'000; ++i) values += i ? ",\n1" : "1";
  const auto t0 = std::chrono::steady_clock::now();
  auto m1 = load_error(std::string(kHead) + "description = [" + values + "]\n");
  // An integer that does not fit is still found, and placed, far down.
  auto m2 =
      load_error(std::string(kHead) + "description = [" + values + ",\n99999999999999999999]\n");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);
  EXPECT_EQ(m1, "x.toml:11:15: region \"hz\": description: must be a string (got an array)");
  EXPECT_EQ(m2,
            "x.toml:200011:1: region.description: \"99999999999999999999\" does not fit in a "
            "64-bit integer (-9223372036854775808 to 9223372036854775807)");
}

// Many unknown keys: each one's place came from toml11's location() too (and was searched for
// from the start of its line). 50,000 took tens of seconds; now linear, as above.
TEST(ScenarioFuzzRegressions, ManyUnknownKeysLoadInLinearTime) {
  std::string keys;
  for (int i = 0; i < 50'000; ++i) keys += "k" + std::to_string(i) + " = 1\n";
  const auto t0 = std::chrono::steady_clock::now();
  auto m = load_error(std::string(kHead) + "[profiles.p]\nrate = \"1gbit\"\n" + keys);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(s, 10.0);  // as above
  EXPECT_HAS(m, "x.toml:13:1: unknown key \"k0\" in [profiles.p]");
  EXPECT_HAS(m, "x.toml:50012:1: unknown key \"k49999\" in [profiles.p]");
  // A key is placed where it is written, not at an earlier occurrence of its name on the line.
  EXPECT_EQ(load_error(std::string(kHead) + "[scale]\nbandwidth = 1\nx = {zz = 1}\n"),
            "x.toml:13:1: unknown key \"x\" in [scale]; valid keys: bandwidth, delay, compute");
  EXPECT_EQ(load_error(std::string(kHead) + "[profiles]\nzz = {rate = \"1gbit\", zz = 1}\n"),
            "x.toml:12:23: unknown key \"zz\" in [profiles.zz]; valid keys: preset, rate, delay, "
            "jitter, jitter_mode, loss, mtu, source, congestion, xoff, xon, headroom, buffer, "
            "kmin, kmax, pmax");
}

// toml11 3.7.1 reads each value's comments (region::comments(), even when it discards them) by
// scanning the value's whole line, so parsing takes time that grows with the square of the
// values on one line: toml::parse alone took 0.03 s for 4,000 integers on one line, 1.4 s for
// 32,000; a 1 MiB line of them minutes (the fuzzer's slow input; the library cannot be changed
// here). At most 256 values per line bounds the scans to 256 times the file's size.
TEST(ScenarioFuzzRegressions, ValuesPerLineAreBounded) {
  auto line = [](int n) {  // "description = [1,1,...]": '=', '[', n - 1 commas, ']'
    std::string v = "description = [1";
    for (int i = 1; i < n; ++i) v += ",1";
    return std::string(kHead) + v + "]\n";
  };
  const int most = detail::kMaxLineItems - 2;  // values in the array
  EXPECT_HAS(load_error(line(most)), "x.toml:11:15: region \"hz\": description: must be a string");
  EXPECT_EQ(load_error(line(most + 1)),
            "x.toml:11:" + std::to_string(17 + 2 * most) +
                ": more than 256 values on one line; the TOML parser takes time that grows with "
                "the square of a line's values: spread them over several lines");
  // Punctuation inside strings and comments is not counted.
  const std::string commas(1000, ',');
  auto s = load_text(std::string(kHead) + "description = \"" + commas + "\" # " + commas + "\n",
                     "x.toml");
  EXPECT_TRUE(s) << s.error().message;
  // The same values over several lines load (here: the type error, not the bound).
  std::string many = "description = [1";
  for (int i = 1; i < 10'000; ++i) many += i % 100 ? ",1" : ",\n1";
  EXPECT_HAS(load_error(std::string(kHead) + many + "]\n"), "must be a string (got an array)");
}

// servers x gpus_per_server x regions without a bound made `validate` plan a lab of hundreds of
// thousands of namespaces (and a hosts file per namespace naming every node).
TEST(ScenarioFuzzRegressions, AbsurdLabSizeIsRefused) {
  std::string big = "[lab]\nname = \"t\"\n";
  for (int i = 0; i < 3; ++i)
    big += "[[region]]\nname = \"r" + std::to_string(i) +
           "\"\nservers = 1023\ngpus_per_server = 64\nscale_up = \"nvlink\"\nrail = \"hpn\"\n"
           "frontend = \"vpc\"\nspines = 2\n";
  // Region r0: 2 + 2 spines + 64 ToRs + 1023 x 65 = 66563 namespaces, the lab 3 times that.
  EXPECT_EQ(load_error(big),
            "x.toml:3:1: region \"r0\": the lab would have 199689 network namespaces (one per GPU, "
            "server, ToR, spine, VPC switch and transit router; 66563 in this region); at most "
            "4096 in one lab");
  // The largest lab allowed loads: 2 + 1 spine + 8 ToRs + 453 servers x (1 + 8 GPUs) = 4088;
  // one server more is 4097. (Planning it takes seconds and ~700 MB, the hosts files: not here.)
  auto region = [](int servers, const std::string& more = "") {
    return "[lab]\nname = \"t\"\n[[region]]\nname = \"hz\"\nservers = " + std::to_string(servers) +
           "\ngpus_per_server = 8\nscale_up = \"nvlink\"\nrail = \"hpn\"\nfrontend = \"vpc\"\n" +
           more;
  };
  EXPECT_HAS(load_error(region(454)), "the lab would have 4097 network namespaces");
  auto s = load_text(region(453), "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(detail::region_namespaces(s->regions[0]), 4088);
  // The count is the planner's: one namespace per node (here dual-ToR, 4 rails, 2 spines).
  s = load_text(region(3, "rails = 4\ndual_tor = true\nspines = 2\n"), "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->topo.nodes.size(), 2u + 2 + 4 * 2 + 3 * 9);
  EXPECT_EQ(detail::region_namespaces(s->regions[0]), static_cast<int64_t>(p->topo.nodes.size()));
}

}  // namespace
}  // namespace tb::scenario
