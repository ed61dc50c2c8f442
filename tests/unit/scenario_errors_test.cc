// Bad scenario input: every problem is exit code 2, names FILE:LINE:COL and the field, and says
// what would be valid. One test per class of mistake.
#include <gtest/gtest.h>

#include "scenario/loader.h"
#include "scenario_text.h"

namespace tb::scenario {
namespace {

using testing_text::kHead;
using testing_text::load_error;

// Lines 11-19: a second region "bj" (1 x 1); tests append from line 20.
constexpr const char* kBj = R"([[region]]
name = "bj"
servers = 1
gpus_per_server = 1
scale_up = "nvlink"
rail = "hpn"
frontend = "vpc"
spines = 1
dual_tor = false
)";

TEST(ScenarioErrors, HeadIsValid) {
  auto s = load_text(std::string(kHead) + kBj, "x.toml");
  EXPECT_TRUE(s) << s.error().message;
}

TEST(ScenarioErrors, MalformedToml) {
  auto m = load_error("[lab]\nname = \n");
  EXPECT_HAS(m, "x.toml:2:8: malformed TOML: ");
  EXPECT_HAS(m, "missing value");
}

TEST(ScenarioErrors, MalformedTomlDuplicateKey) {
  auto m = load_error("[lab]\nname = \"a\"\nname = \"b\"\n");
  EXPECT_HAS(m, "x.toml:3:8: malformed TOML: ");
  EXPECT_HAS(m, "already exists");
}

TEST(ScenarioErrors, MissingFile) {
  auto s = load("/nonexistent/dir/x.toml");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().exit_code, kExitBadInput);
  EXPECT_EQ(s.error().message,
            "/nonexistent/dir/x.toml: cannot read scenario file: No such file or directory");
  auto d = load(TB_SOURCE_DIR "/scenarios");
  ASSERT_FALSE(d);
  EXPECT_EQ(d.error().exit_code, kExitBadInput);
  EXPECT_HAS(d.error().message, "is a directory");
}

TEST(ScenarioErrors, UnknownKeySuggestsClosest) {
  auto m = load_error(std::string(kHead) + "gpu_per_server = 4\n");
  EXPECT_EQ(m,
            "x.toml:11:1: unknown key \"gpu_per_server\" in [[region]]; did you mean "
            "\"gpus_per_server\"?");
}

TEST(ScenarioErrors, UnknownKeyListsValidKeys) {
  auto m = load_error(std::string(kHead) + "[expect]\nzzzzzz = 1\n");
  EXPECT_EQ(m,
            "x.toml:12:1: unknown key \"zzzzzz\" in [expect]; valid keys: max_stall_ms, "
            "min_busbw_fraction, max_detection_ms, max_recovery_ms, checkpoint_on_time, "
            "max_gold_p99_ms");
}

TEST(ScenarioErrors, UnknownTopLevelTable) {
  auto m = load_error(std::string(kHead) + "[[regions]]\nname = \"x\"\n");
  EXPECT_HAS(m, "x.toml:11:3: unknown key \"regions\" in the top level; did you mean \"region\"?");
}

TEST(ScenarioErrors, WrongType) {
  auto m = load_error(std::string(kHead) + "dual_tor = \"yes\"\n[scale]\nbandwidth = \"x\"\n");
  EXPECT_HAS(m, "x.toml:11:12: region \"hz\": dual_tor: must be true or false (got a string)");
  EXPECT_HAS(m, "x.toml:13:13: scale: bandwidth: must be a number (got a string)");
}

TEST(ScenarioErrors, WrongTypeInteger) {
  auto m = load_error(std::string(kHead) + "spines = 2.0\n");
  EXPECT_EQ(m,
            "x.toml:11:10: region \"hz\": spines: must be an integer (got a float); write 2 "
            "without a decimal point");
}

TEST(ScenarioErrors, ZeroCount) {
  std::string text = kHead;
  text.replace(text.find("servers = 2"), 11, "servers = 0");
  EXPECT_EQ(load_error(text), "x.toml:6:11: region \"hz\": servers: must be at least 1 (got 0)");
}

TEST(ScenarioErrors, NegativeCounts) {
  std::string text = kHead;
  text.replace(text.find("gpus_per_server = 2"), 19, "gpus_per_server = -2");
  auto m = load_error(text + "spines = -1\n");
  EXPECT_HAS(m, "x.toml:7:19: region \"hz\": gpus_per_server: must be at least 1 (got -2)");
  EXPECT_HAS(m, "x.toml:11:10: region \"hz\": spines: must be at least 0 (got -1)");
}

TEST(ScenarioErrors, LimitsExceeded) {
  std::string text = kHead;
  text.replace(text.find("servers = 2"), 11, "servers = 1024");
  text.replace(text.find("gpus_per_server = 2"), 19, "gpus_per_server = 65");
  auto m = load_error(text);
  EXPECT_HAS(m, "x.toml:6:11: region \"hz\": servers: must be at most 1023 (got 1024); ");
  EXPECT_HAS(m, "1023 ports");
  EXPECT_HAS(m, "x.toml:7:19: region \"hz\": gpus_per_server: must be at most 64 (got 65); ");
}

TEST(ScenarioErrors, NameTooLong) {
  std::string text = kHead;
  text.replace(text.find("name = \"hz\""), 11, "name = \"hangzhou\"");
  text.replace(text.find("name = \"t\""), 10, "name = \"alabnamelongerthanthirtytwocharsx\"");
  auto m = load_error(text);
  EXPECT_HAS(m,
             "x.toml:2:8: lab: name: \"alabnamelongerthanthirtytwocharsx\" is too long (33 "
             "characters); at most 32");
  EXPECT_HAS(m,
             "x.toml:5:8: region \"hangzhou\": name: \"hangzhou\" is too long (8 characters); "
             "at most 6");
}

TEST(ScenarioErrors, BadNameCharacters) {
  std::string text = kHead;
  text.replace(text.find("name = \"t\""), 10, "name = \"Lab\"");
  EXPECT_HAS(load_error(text),
             "x.toml:2:8: lab: name: \"Lab\" is not a valid lab name; use a "
             "lowercase letter followed by lowercase letters or digits");
}

TEST(ScenarioErrors, MissingRequiredFields) {
  auto m = load_error("[lab]\n\n[[region]]\nname = \"hz\"\nservers = 1\n");
  EXPECT_HAS(m, "x.toml:1:1: lab: name: missing");
  EXPECT_HAS(m, "x.toml:3:1: region \"hz\": gpus_per_server: missing");
  EXPECT_HAS(m, "x.toml:3:1: region \"hz\": scale_up: missing");
  EXPECT_HAS(m, "x.toml:3:1: region \"hz\": rail: missing");
  EXPECT_HAS(m, "x.toml:3:1: region \"hz\": frontend: missing");
  EXPECT_EQ(load_error("[lab]\nname = \"t\"\n"),
            "x.toml:1:1: region: missing; a lab needs at least one [[region]] table");
  EXPECT_HAS(load_error("[[region]]\nname = \"a\"\n"), "x.toml:1:1: lab: missing");
}

TEST(ScenarioErrors, DuplicateRegion) {
  std::string text = std::string(kHead) + kBj;
  text.replace(text.find("name = \"bj\""), 11, "name = \"hz\"");
  EXPECT_EQ(load_error(text),
            "x.toml:12:8: region \"hz\": name: duplicate region \"hz\" (first at "
            "line 5); region names must be unique");
}

TEST(ScenarioErrors, DuplicateWanAndWorkload) {
  auto m = load_error(std::string(kHead) + kBj + R"([[wan]]
name = "ec"
between = ["hz", "bj"]
profile = "express-connect"
[[wan]]
name = "ec"
between = ["hz", "bj"]
profile = "vpn"
role = "backup"
[[workload]]
name = "w"
kind = "checkpoint"
from = "hz"
to = "bj"
bytes = "1G"
[[workload]]
name = "w"
kind = "checkpoint"
from = "bj"
to = "hz"
bytes = "1G"
)");
  EXPECT_HAS(m, "x.toml:25:8: wan \"ec\": name: duplicate WAN link \"ec\" (first at line 21)");
  EXPECT_HAS(m, "x.toml:36:8: workload \"w\": name: duplicate workload \"w\" (first at line 30)");
}

// [expect] max_gold_p99_ms: a number above 0, and only with a checkpoint workload (run's gold
// probe crosses its WAN).
TEST(ScenarioErrors, MaxGoldP99) {
  const std::string ckpt = std::string(kHead) + kBj + R"([[wan]]
name = "ec"
between = ["hz", "bj"]
profile = "vpn"
[[workload]]
name = "ck"
kind = "checkpoint"
from = "hz"
to = "bj"
bytes = "1G"
)";
  auto s = load_text(ckpt + "[expect]\nmax_gold_p99_ms = 150\n", "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  ASSERT_TRUE(s->expect.max_gold_p99_ms);
  EXPECT_DOUBLE_EQ(*s->expect.max_gold_p99_ms, 150);
  auto zero = load_error(ckpt + "[expect]\nmax_gold_p99_ms = 0\n");  // line 31
  EXPECT_HAS(zero, "x.toml:31:");
  EXPECT_HAS(zero, "max_gold_p99_ms");
  auto text = load_error(ckpt + "[expect]\nmax_gold_p99_ms = \"fast\"\n");
  EXPECT_HAS(text, "x.toml:31:");
  EXPECT_HAS(text, "max_gold_p99_ms");
  auto none = load_error(std::string(kHead) + "[expect]\nmax_gold_p99_ms = 150\n");
  EXPECT_HAS(none, "x.toml:12:");
  EXPECT_HAS(none, "max_gold_p99_ms: needs a [[workload]] of kind = \"checkpoint\"");
}

TEST(ScenarioErrors, UnitsMessage) {
  auto m = load_error(std::string("[profiles.rail]\nrate = \"10gbps\"\n") + kHead);
  EXPECT_HAS(m, "x.toml:2:8: profiles.rail: rate: \"10gbps\" is not a rate (\"bps\" is ambiguous");
  EXPECT_HAS(m, "write \"10gbit\" or \"10GB/s\"); use ");
  auto d = load_error(std::string(kHead) +
                      "[[fault]]\nat = \"5 minutes\"\nkind = \"link-up\"\n"
                      "a = \"hz/tor0\"\nb = \"hz/spine0\"\n");
  EXPECT_HAS(d, "x.toml:12:6: fault #1: at: \"5 minutes\" is not a duration; use a number with ns");
}

TEST(ScenarioErrors, DanglingProfile) {
  std::string text = kHead;
  text.replace(text.find("rail = \"hpn\""), 12, "rail = \"hnp\"");
  EXPECT_EQ(load_error(text),
            "x.toml:9:8: region \"hz\": rail: no profile or preset named \"hnp\"; did you mean "
            "\"hpn\"?");
  text = kHead;
  text.replace(text.find("rail = \"hpn\""), 12, "rail = \"zzzz\"");
  EXPECT_HAS(load_error(text),
             "x.toml:9:8: region \"hz\": rail: no profile or preset named "
             "\"zzzz\"; declared profiles: (none); presets: nvlink, pcie");
}

TEST(ScenarioErrors, UnknownPresetAndProfileWithoutRate) {
  auto m = load_error(std::string("[profiles.a]\npreset = \"hpm\"\n[profiles.vpc]\nmtu = 9000\n") +
                      kHead);
  EXPECT_HAS(m, "x.toml:2:10: profiles.a: preset: \"hpm\" is not a preset; did you mean \"hpn\"?");
  EXPECT_HAS(m,
             "x.toml:3:1: profiles.vpc: rate: missing; a profile without a preset must give "
             "rate; to start from the built-in \"vpc\", add preset = \"vpc\"");
}

TEST(ScenarioErrors, DanglingRegion) {
  auto m = load_error(std::string(kHead) + kBj + R"([[wan]]
name = "ec"
between = ["hz", "bjj"]
profile = "cen"
)");
  EXPECT_EQ(m, "x.toml:22:18: wan \"ec\": between: no region named \"bjj\"; did you mean \"bj\"?");
}

TEST(ScenarioErrors, DanglingNode) {
  auto m = load_error(std::string(kHead) + R"([[fault]]
at = "1s"
kind = "flap"
a = "hz/s0/g2"
b = "hz/tor0"
period = "1s"
count = 2
)");
  EXPECT_HAS(m,
             "x.toml:14:5: fault #1 (flap): a: no node \"hz/s0/g2\" in this lab; did you mean "
             "\"hz/s0/g");
  EXPECT_HAS(m,
             "(region \"hz\" has servers s0..s1 with GPUs g0..g1, ToRs tor0..tor1, spines "
             "spine0, vpc and tr)");
  auto r = load_error(std::string(kHead) +
                      "[[fault]]\nat = \"1s\"\nkind = \"rank-kill\"\n"
                      "node = \"hx/s0/g0\"\n");
  EXPECT_HAS(r,
             "x.toml:14:8: fault #1 (rank-kill): node: no node \"hx/s0/g0\": no region named "
             "\"hx\"; did you mean \"hz\"?");
}

TEST(ScenarioErrors, ReportsAllProblemsInFileOrder) {
  std::string text = kHead;
  text.replace(text.find("servers = 2"), 11, "servers = 0");
  text.replace(text.find("name = \"t\""), 10, "name = \"T\"");
  auto m = load_error(text + "frobnicate = 1\n");
  EXPECT_EQ(m,
            "x.toml:2:8: lab: name: \"T\" is not a valid lab name; use a lowercase letter "
            "followed by lowercase letters or digits, 32 characters at most\n"
            "x.toml:6:11: region \"hz\": servers: must be at least 1 (got 0)\n"
            "x.toml:11:1: unknown key \"frobnicate\" in [[region]]; valid keys: name, "
            "description, servers, gpus_per_server, rails, scale_up, rail, dual_tor, spines, "
            "spine_link, frontend, ecmp_hash");
}

TEST(ScenarioErrors, EcmpHashIsL3OrL4) {
  EXPECT_HAS(load_error(std::string(kHead) + "ecmp_hash = \"L4\"\n"),
             "x.toml:11:13: region \"hz\": ecmp_hash: \"L4\" is not valid; did you mean \"l4\"?");
  EXPECT_HAS(load_error(std::string(kHead) + "ecmp_hash = 1\n"),
             "x.toml:11:13: region \"hz\": ecmp_hash: must be a string");
  auto s = load_text(std::string(kHead) + "ecmp_hash = \"l4\"\n", "x.toml");
  ASSERT_TRUE(s) << s.error().message;
  EXPECT_EQ(s->regions[0].ecmp_hash, "l4");
  auto d = load_text(kHead, "x.toml");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->regions[0].ecmp_hash, "l3");
}

TEST(ScenarioErrors, SpinesZeroNeedsOneRail) {
  EXPECT_HAS(load_error(std::string(kHead) + "spines = 0\n"),
             "x.toml:11:10: region \"hz\": spines: must be at least 1 when the region has more "
             "than one rail (rails = 2)");
  EXPECT_TRUE(load_text(std::string(kHead) + "spines = 0\nrails = 1\n", "x.toml"));
  EXPECT_HAS(load_error(std::string(kHead) + "rails = 3\n"),
             "x.toml:11:9: region \"hz\": rails: must be at most 2 (got 3)");
}

TEST(ScenarioErrors, AddressSpace) {
  auto m = load_error("[lab]\nname = \"t\"\naddress_space = \"10.0.0.0/25\"\n" +
                      std::string(kHead).substr(std::string(kHead).find("[[region]]")));
  EXPECT_HAS(m, "x.toml:3:17: lab: address_space: prefix length must be at most 24 (got /25)");
  auto h = load_error("[lab]\nname = \"t\"\naddress_space = \"10.0.0.1/16\"\n" +
                      std::string(kHead).substr(std::string(kHead).find("[[region]]")));
  EXPECT_HAS(h, "has host bits set; did you mean \"10.0.0.0/16\"?");
}

TEST(ScenarioErrors, ScaleAndExpectRanges) {
  auto m = load_error(std::string(kHead) +
                      "[scale]\nbandwidth = 0\n[expect]\nmin_busbw_fraction = 1.5\n"
                      "max_stall_ms = -1\n");
  EXPECT_HAS(m, "x.toml:12:13: scale: bandwidth: must be greater than 0 (got 0)");
  EXPECT_HAS(m, "x.toml:14:22: expect: min_busbw_fraction: must be at most 1 (got 1.5)");
  EXPECT_HAS(m, "x.toml:15:16: expect: max_stall_ms: must be at least 0 (got -1)");
}

TEST(ScenarioErrors, WanRoles) {
  auto m = load_error(std::string(kHead) + kBj + R"([[wan]]
name = "a"
between = ["hz", "bj"]
profile = "cen"
[[wan]]
name = "b"
between = ["bj", "hz"]
profile = "cen"
role = "primery"
[[wan]]
name = "c"
between = ["bj", "bj"]
profile = "cen"
)");
  EXPECT_HAS(m,
             "x.toml:28:8: wan \"b\": role: \"primery\" is not valid; did you mean "
             "\"primary\"?");
  EXPECT_HAS(m, "x.toml:31:18: wan \"c\": between: must name two different regions");
  auto p = load_error(std::string(kHead) + kBj + R"([[wan]]
name = "a"
between = ["hz", "bj"]
profile = "cen"
[[wan]]
name = "b"
between = ["bj", "hz"]
profile = "cen"
)");
  EXPECT_HAS(p,
             "x.toml:24:1: wan \"b\": role: a second primary link between \"bj\" and \"hz\" "
             "(\"a\" at line 20 is primary too)");
}

TEST(ScenarioErrors, FaultLinkMustNameWan) {
  const std::string wans = std::string(kHead) + kBj + R"([[wan]]
name = "ec"
between = ["hz", "bj"]
profile = "express-connect"
[[wan]]
name = "vpn"
between = ["hz", "bj"]
profile = "vpn"
role = "backup"
[[fault]]
at = "1s"
kind = "link-down"
a = "hz/tr"
b = "bj/tr"
)";
  EXPECT_HAS(load_error(wans),
             "x.toml:29:1: fault #1 (link-down): link: missing; \"hz/tr\" and "
             "\"bj/tr\" are joined by 2 WAN links (ec, vpn)");
  EXPECT_HAS(load_error(wans + "link = \"ecc\"\n"),
             "x.toml:34:8: fault #1 (link-down): link: \"ecc\" does not join \"hz/tr\" and "
             "\"bj/tr\"; did you mean \"ec\"?");
  EXPECT_TRUE(load_text(wans + "link = \"vpn\"\n", "x.toml"));
}

TEST(ScenarioErrors, FaultKindSpecificFields) {
  auto m = load_error(std::string(kHead) + R"([[fault]]
at = "1s"
kind = "flap"
a = "hz/s0/g0"
b = "hz/tor0"
loss = "5%"
[[fault]]
at = "1s"
kind = "link_down"
[[fault]]
at = "1s"
kind = "rank-kill"
node = "hz/tor1"
[[fault]]
at = "1s"
kind = "node-crash"
node = "hz/s1/g1"
[[fault]]
at = "1s"
kind = "pfc-storm"
node = "hz/tor1"
)");
  EXPECT_HAS(m, "x.toml:11:1: fault #1 (flap): period: missing");
  EXPECT_HAS(m, "x.toml:11:1: fault #1 (flap): count: missing");
  EXPECT_HAS(m, "x.toml:16:8: fault #1 (flap): loss: only for kind = \"loss\"");
  EXPECT_HAS(m,
             "x.toml:19:8: fault #2: kind: \"link_down\" is not valid; did you mean "
             "\"link-down\"?");
  EXPECT_HAS(m, "x.toml:23:8: fault #3 (rank-kill): node: \"hz/tor1\" is not a GPU");
  EXPECT_HAS(m, "x.toml:27:8: fault #4 (node-crash): node: \"hz/s1/g1\" is a GPU");
  EXPECT_HAS(m,
             "x.toml:31:8: fault #5 (pfc-storm): node: \"hz/tor1\" is not a GPU; pfc-storm takes "
             "the GPU whose NIC keeps pausing the ToR port facing it, such as \"hz/s0/g0\" (its "
             "rail must be lossless)");
}

TEST(ScenarioErrors, WorkloadChecks) {
  auto m = load_error(std::string(kHead) + R"([[workload]]
name = "w"
kind = "collective"
op = "allreduce"
ranks = ["hz/s5", "hz/tor0", "bj"]
min_bytes = "1M"
max_bytes = "8K"
qos = "gold"
step_factor = 1
[[workload]]
name = "c"
kind = "checkpoint"
from = "hz"
to = "hz"
bytes = 0
channels = 2
)");
  EXPECT_HAS(m, "x.toml:15:10: workload \"w\": ranks: no node \"hz/s5\" in this lab");
  EXPECT_HAS(m, "x.toml:15:19: workload \"w\": ranks: \"hz/tor0\" is not a server or a GPU");
  EXPECT_HAS(m, "x.toml:15:30: workload \"w\": ranks: no region named \"bj\"; regions: hz");
  EXPECT_HAS(m,
             "x.toml:17:13: workload \"w\": max_bytes: min_bytes (1M) must not exceed "
             "max_bytes (8K)");
  EXPECT_HAS(m, "x.toml:18:7: workload \"w\": qos: only for kind = \"checkpoint\"");
  EXPECT_HAS(m, "x.toml:19:15: workload \"w\": step_factor: must be at least 2 (got 1)");
  EXPECT_HAS(m, "x.toml:24:6: workload \"c\": to: must differ from from");
  EXPECT_HAS(m, "x.toml:25:9: workload \"c\": bytes: must be greater than 0 (got 0)");
  EXPECT_HAS(m, "x.toml:26:12: workload \"c\": channels: only for kind = \"collective\"");
  EXPECT_HAS(load_error(std::string(kHead) + "[[workload]]\nname = \"w\"\nkind = \"collective\"\n"),
             "x.toml:11:1: workload \"w\": op: missing");
}

TEST(ScenarioErrors, ArrayOfTablesWrittenAsTable) {
  EXPECT_HAS(load_error(std::string(kHead) + "[wan]\nname = \"x\"\n"),
             "x.toml:11:1: wan: must be an array of tables: write [[wan]], not [wan] (got a "
             "table)");
}

// jitter_mode: "ordered" (the default) or "reorder"; anything else names the choices.
TEST(ScenarioErrors, JitterModeIsOrderedOrReorder) {
  auto ok = load_text(std::string(kHead) +
                          "[profiles.vpc]\npreset = \"vpc\"\njitter = \"1ms\"\n"
                          "jitter_mode = \"reorder\"\n",
                      "x.toml");
  ASSERT_TRUE(ok) << ok.error().message;
  EXPECT_TRUE(ok->profile("vpc").reorder);
  EXPECT_FALSE(ok->profile("hpn").reorder);  // presets keep packets in order
  auto m = load_error(std::string(kHead) +
                      "[profiles.wan]\nrate = \"1gbit\"\njitter_mode = \"shuffle\"\n");
  EXPECT_HAS(m, "x.toml:13:15: profiles.wan: jitter_mode: \"shuffle\" is not valid");
  EXPECT_HAS(m, "reorder");
}

// Congestion models (issue 32): congestion is "droptail", "ecn" or "lossless"; PFC thresholds
// only on a lossless profile (xon below xoff), marking thresholds only on an ecn one (kmin below
// kmax, pmax above 0).
TEST(ScenarioErrors, CongestionModelTypoSuggestsClosest) {
  EXPECT_EQ(load_error(std::string(kHead) +
                       "[profiles.rail]\npreset = \"hpn\"\ncongestion = \"lossles\"\n"),
            "x.toml:13:14: profiles.rail: congestion: \"lossles\" is not valid; did you mean "
            "\"lossless\"?");
}

TEST(ScenarioErrors, CongestionEcnThresholds) {
  // Against the preset's kmax (200K)...
  EXPECT_EQ(load_error(std::string(kHead) + "[profiles.fe]\npreset = \"vpc\"\nkmin = \"300K\"\n"),
            "x.toml:13:8: profiles.fe: kmin: kmin (300K) must be below kmax (200K); marking rises "
            "from 0 at kmin to pmax at kmax");
  EXPECT_HAS(load_error(std::string(kHead) + "[profiles.fe]\npreset = \"vpc\"\npmax = \"0%\"\n"),
             "x.toml:13:8: profiles.fe: pmax: must be greater than 0%");
  EXPECT_HAS(load_error(std::string(kHead) + "[profiles.fe]\npreset = \"vpc\"\nkmax = 0\n"),
             "x.toml:13:8: profiles.fe: kmax: must be greater than 0 bytes");
  EXPECT_HAS(load_error(std::string(kHead) + "[profiles.fe]\npreset = \"vpc\"\npmax = \"150%\"\n"),
             "x.toml:13:8: profiles.fe: pmax");
  // Marking thresholds on a lossless or droptail profile.
  EXPECT_HAS(load_error(std::string(kHead) + "[profiles.rail]\npreset = \"hpn\"\nkmin = \"5K\"\n"),
             "x.toml:13:8: profiles.rail: kmin: only for congestion = \"ecn\" (this profile is "
             "\"lossless\")");
  EXPECT_HAS(
      load_error(std::string(kHead) + "[profiles.fe]\npreset = \"vpc\"\ncongestion = \"droptail\"\n"
                                      "pmax = \"2%\"\n"),
      "x.toml:14:8: profiles.fe: pmax: only for congestion = \"ecn\"");
}

TEST(ScenarioErrors, CongestionXonMustBeBelowXoff) {
  // Against the preset's xoff (200K)...
  EXPECT_EQ(load_error(std::string(kHead) + "[profiles.rail]\npreset = \"hpn\"\nxon = \"300K\"\n"),
            "x.toml:13:7: profiles.rail: xon: xon (300K) must be below xoff (200K); XON is where "
            "a paused port resumes, XOFF where it pauses");
  // ...and against one the profile writes.
  EXPECT_HAS(load_error(std::string(kHead) +
                        "[profiles.rail]\nrate = \"100gbit\"\ncongestion = \"lossless\"\n"
                        "xoff = \"64K\"\nxon = \"64K\"\n"),
             "x.toml:15:7: profiles.rail: xon: xon (64K) must be below xoff (64K)");
  EXPECT_HAS(load_error(std::string(kHead) +
                        "[profiles.rail]\nrate = \"100gbit\"\ncongestion = \"lossless\"\n"
                        "xon = \"64K\"\n"),
             "x.toml:14:7: profiles.rail: xon: needs xoff too");
  EXPECT_HAS(
      load_error(std::string(kHead) + "[profiles.rail]\npreset = \"hpn\"\nbuffer = \"100K\"\n"),
      "x.toml:13:10: profiles.rail: buffer: buffer (100K) must hold at least xoff (200K)");
  EXPECT_HAS(load_error(std::string(kHead) + "[profiles.rail]\npreset = \"hpn\"\nheadroom = 0\n"),
             "x.toml:13:12: profiles.rail: headroom: must be greater than 0 bytes");
}

TEST(ScenarioErrors, CongestionThresholdsOnlyForLossless) {
  auto m = load_error(std::string(kHead) +
                      "[profiles.fe]\npreset = \"vpc\"\nxoff = \"100K\"\nheadroom = \"8K\"\n");
  EXPECT_HAS(m,
             "x.toml:13:8: profiles.fe: xoff: only for congestion = \"lossless\" (this "
             "profile is \"ecn\")");
  EXPECT_HAS(m, "x.toml:14:12: profiles.fe: headroom: only for congestion = \"lossless\"");
  // A lossless preset written back to droptail loses its thresholds too.
  EXPECT_HAS(load_error(std::string(kHead) +
                        "[profiles.rail]\npreset = \"hpn\"\ncongestion = \"droptail\"\n"
                        "xon = \"10K\"\n"),
             "x.toml:14:7: profiles.rail: xon: only for congestion = \"lossless\"");
  EXPECT_HAS(load_error(std::string(kHead) + "[profiles.rail]\npreset = \"hpn\"\nxof = \"1K\"\n"),
             "x.toml:13:1: unknown key \"xof\" in [profiles.rail]; did you mean \"xoff\"?");
}

TEST(ScenarioErrors, CongestionTable) {
  EXPECT_EQ(load_error(std::string(kHead) + "[congestion]\nwatchdog_action = \"dorp\"\n"),
            "x.toml:12:19: congestion: watchdog_action: \"dorp\" is not valid; did you mean "
            "\"drop\"?");
  EXPECT_EQ(load_error(std::string(kHead) + "[congestion]\npoll = \"10us\"\n"),
            "x.toml:12:8: congestion: poll: must be 100us..100ms");
  EXPECT_EQ(load_error(std::string(kHead) + "[congestion]\npoll = \"5ms\"\nidle_poll = \"2ms\"\n"),
            "x.toml:13:13: congestion: idle_poll: idle_poll (2ms) must be at least poll (5ms): "
            "the agent polls faster while a queue builds");
  EXPECT_EQ(load_error(std::string(kHead) + "[congestion]\npol = \"1ms\"\n"),
            "x.toml:12:1: unknown key \"pol\" in [congestion]; did you mean \"poll\"?");
  EXPECT_HAS(load_error(std::string(kHead) + "congestion = \"lossless\"\n"),
             "x.toml:11:1: unknown key \"congestion\" in [[region]]");
}

}  // namespace
}  // namespace tb::scenario
