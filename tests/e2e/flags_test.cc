// Bad command lines, verb by verb (issue #12): a wrong type, a number out of range (negative,
// zero where one is needed, too large for an int, NaN and infinity), an unknown name, an unknown
// flag, a missing value, a malformed unit. Each must end in exit 2 with a message that names
// the flag and what would be valid, and build nothing: the labs named here do not exist, so no
// case needs one, and a flag's error must come before any lab or scenario is looked at.
// No root needed: every case stops while the command line is checked.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

struct Case {
  std::string args;    // after `testbedctl`
  std::string expect;  // a substring of the message
};

// Runs every case; each must exit 2, say `expect`, and leave no trace of `lab`.
void expect_bad_input(const std::string& lab, const std::vector<Case>& cases) {
  for (const auto& c : cases) {
    SCOPED_TRACE("testbedctl " + c.args);
    const CmdResult r = testbedctl(c.args);
    EXPECT_EQ(r.rc, 2) << r.out;
    EXPECT_NE(r.out.find(c.expect), std::string::npos)
        << "want: " << c.expect << "\ngot: " << r.out;
    // Per case, the namespaces named for the lab (a directory read); the owner-marker scan of
    // every namespace on the host once, after the cases (a shared host holds thousands: per
    // case it cost minutes a test here), where a namespace any case made is still there.
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/run/netns", ec))
      EXPECT_FALSE(e.path().filename().string().starts_with("tb-" + lab + "-"))
          << "a namespace of lab " << lab << " was made: " << e.path();
    EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + lab))
        << "lab " << lab << " has state";
  }
  EXPECT_TRUE(marked_netns(lab).empty()) << "a namespace of lab " << lab << " was made";
}

class Flags : public ::testing::Test {
 protected:
  // A lab that does not exist; the guard takes it down should a regression build it.
  LabGuard guard_{unique_lab("nf")};
  const std::string lab_ = guard_.lab();
  const std::string mini_ = scenario("mini.toml");
};

TEST_F(Flags, AppUnknownVerbOrFlag) {
  expect_bad_input(lab_,
                   {
                       {"--bogus", "\"--bogus\" is not a verb; use one of validate, plan, graph"},
                       {"frobnicate", "\"frobnicate\" is not a verb; use one of validate"},
                       {"", "A subcommand is required"},
                   });
}

TEST_F(Flags, ValidatePlanGraph) {
  expect_bad_input(lab_,
                   {
                       {"validate", "SCENARIO is required"},
                       {"validate " + mini_ + " --bogus", "validate takes no flags"},
                       {"plan " + mini_ + " --format yaml", "--format: yaml not in {text,json}"},
                       {"plan " + mini_ + " --format", "--format"},
                       {"plan " + mini_ + " --shaping foo",
                        "--shaping: \"foo\" is not a shaping backend; use auto, none or one "
                        "of netem, tbf, htb"},
                       // The flag's error comes before the file is read.
                       {"plan /nonexistent/x.toml --shaping foo", "--shaping: \"foo\""},
                       {"plan " + mini_ + " --bogus", "plan takes --format, --shaping"},
                       {"graph " + mini_ + " --format svg", "--format: svg not in {dot,mermaid}"},
                       {"graph", "TARGET is required"},
                   });
}

TEST_F(Flags, UpDownCleanStatusExec) {
  const std::string up = "up " + mini_ + " --name " + lab_;
  expect_bad_input(
      lab_, {
                {up + " --shaping foo", "--shaping: \"foo\" is not a shaping backend"},
                {"up /nonexistent/x.toml --name " + lab_ + " --shaping foo", "--shaping: \"foo\""},
                {up + " --rdma maybe", "--rdma: \"maybe\" is not auto or none"},
                {"up " + mini_ + " --name Bad_Name",
                 "--name: \"Bad_Name\" is not a lab name: 1-32 lowercase letters or digits"},
                {"up " + mini_ + " --name alabnamelongerthanthirtytwocharsx",
                 "--name: \"alabnamelongerthanthirtytwocharsx\" is not a lab name"},
                {"up " + mini_ + " --name", "--name"},
                {up + " --bogus", "up takes --name, --shaping, --rdma"},
                {"up", "SCENARIO is required"},
                {"down", "TARGET is required"},
                {"down " + lab_ + " --bogus", "down takes --host"},
                {"clean " + lab_ + " --bogus", "clean takes --all"},
                {"status " + lab_ + " --bogus", "status takes --json"},
                {"exec " + lab_, "NODE is required"},
                {"exec " + lab_ + " dc/s0/g0", "CMD is required"},
                {"supervise", "LAB is required"},
                {"doctor --bogus", "doctor takes --json"},
            });
}

// A LAB argument becomes part of paths under /run and of namespace names: anything but a lab
// name is refused while parsing, before any path is made from it.
TEST_F(Flags, LabArgumentsAreLabNames) {
  const std::string not_lab = "is not a lab name: 1-32 lowercase letters or digits";
  const std::string neither = "is neither a scenario file nor a lab name";
  expect_bad_input(lab_, {
                             {"down ../" + lab_, neither},
                             {"down /nonexistent/x.toml", neither},
                             {"graph /nonexistent/x.toml", neither},
                             {"clean ../" + lab_, not_lab},
                             {"status Bad_Name", not_lab},
                             {"exec a/b dc/s0/g0 true", not_lab},
                             {"verify " + lab_ + "/..", not_lab},
                             {"link ../x down a b", not_lab},
                             {"bench alabnamelongerthanthirtytwocharsx", not_lab},
                             {"fault . link-down dc/s0/g0", not_lab},
                             {"supervise ''", not_lab},
                         });
}

TEST_F(Flags, Link) {
  const std::string set = "link " + lab_ + " set dc/s0/g0 dc/tor0";
  expect_bad_input(
      lab_,
      {
          {set + " --rate 10Zbit", "--rate: \"10Zbit\" is not a rate; use a number with bit"},
          {set + " --rate -5mbit", "--rate: \"-5mbit\" is not a rate (must not be negative)"},
          {set + " --rate 5bit", "--rate: rate 5bit is below 8 bit/s"},
          {set + " --rate 10gbps", "--rate: \"10gbps\" is not a rate (\"bps\" is ambiguous"},
          {set + " --delay -5ms", "--delay: \"-5ms\" is not a duration (must not be negative)"},
          {set + " --delay 5parsecs",
           "--delay: \"5parsecs\" is not a duration; use a number with ns"},
          {set + " --delay 1e300s", "--delay: \"1e300s\" is not a duration (too large)"},
          {set + " --jitter nan", "--jitter: \"nan\" is not a duration"},
          {set + " --loss 150%", "--loss: \"150%\" is not a percentage (more than 100)"},
          {set + " --loss -1%", "--loss: \"-1%\" is not a percentage (must not be negative)"},
          {set + " --loss", "--loss"},
          {set, "link set needs at least one of --rate, --delay, --jitter, --loss"},
          {"link " + lab_ + " down dc/s0/g0 dc/tor0 --rate 1gbit",
           "link down takes no --rate, --delay, --jitter or --loss (only link set does)"},
          {"link " + lab_ + " frob dc/s0/g0 dc/tor0", "ACTION: frob not in {set,reset,down,up}"},
          {"link " + lab_ + " set dc/s0/g0", "B is required"},
          {set + " --bogus 1", "link takes --rate, --delay, --jitter, --loss"},
      });
}

TEST_F(Flags, Verify) {
  expect_bad_input(lab_, {
                             {"verify", "LAB is required"},
                             {"verify " + lab_ + " --link dc/s0/g0", "--link"},
                             {"verify " + lab_ + " --bogus",
                              "verify takes --link, --json, --quick, --paths, --under-load"},
                             {"verify " + lab_ + " --paths --link dc/s0/g0 dc/tor0",
                              "--paths measures whole paths"},
                             {"verify " + lab_ + " --under-load", "--under-load goes with --paths"},
                         });
}

TEST_F(Flags, Bench) {
  const std::string b = "bench " + lab_ + " allreduce";
  expect_bad_input(
      lab_,
      {
          {b + " -n abc", "--iters: \"abc\" is not a whole number; use 1..100000"},
          {b + " -n 1.5", "--iters: \"1.5\" is not a whole number; use 1..100000"},
          {b + " -n 0", "--iters: \"0\" is out of range; use 1..100000"},
          {b + " -n -3", "--iters: \"-3\" is out of range; use 1..100000"},
          {b + " --iters 99999999999999999999",
           "--iters: \"99999999999999999999\" is out of range"},
          {b + " -n", "--iters"},
          {b + " -w -1", "--warmup_iters: \"-1\" is out of range; use 0..100000"},
          {b + " -c 1001", "--check: \"1001\" is out of range; use 0..1000"},
          {b + " -r -1", "--root: \"-1\" is out of range; use 0 or more"},
          {b + " -f nan", "--stepfactor: \"nan\" is not a number; use 1..1024"},
          {b + " -f inf", "--stepfactor: \"inf\" is out of range; use 1..1024"},
          {b + " -f 0.5", "--stepfactor: \"0.5\" is out of range; use 1..1024"},
          {b + " -f 1 -b 8K -e 16K", "-f/--stepfactor: must be > 1 and at most 1024 (got 1)"},
          {b + " -b 10Q", "--minbytes: \"10Q\" is not a size; use a number of bytes"},
          {b + " -b -8K", "--minbytes: \"-8K\" is not a size (must not be negative)"},
          {b + " -e 1e30G", "--maxbytes: \"1e30G\" is not a size (too large)"},
          {b + " -b 0", "-b/--minbytes and -e/--maxbytes: need 0 < min <= max"},
          {b + " -b 64M -e 8K", "-b/--minbytes and -e/--maxbytes: need 0 < min <= max"},
          {b + " -d float128", "-d/--datatype: 'float128' is not float, int32, double or int64"},
          {b + " -o xor", "-o/--op: 'xor' is not sum, min or max"},
          {b + " -o prod", "--op prod: products of many ranks cannot be checked exactly"},
          {b + " --algo bogus", "--algo: 'bogus' is not ring, tree, hd or hier"},
          {b + " --impl cuda", "--impl: 'cuda' is not native or gloo"},
          {b + " --transport ib", "--transport: 'ib' is not tcp or rdma"},
          {b + " --intra-server nvlink", "--intra-server: 'nvlink' is not net or shm"},
          {b + " --intra-server shm --impl gloo", "--intra-server shm: Gloo's tcp transport"},
          {b + " --transport rdma --qps 0", "--qps: \"0\" is out of range; use 1..16"},
          {b + " --transport rdma --qps 17", "--qps: \"17\" is out of range; use 1..16"},
          {b + " --transport rdma --ib-timeout 0",
           "--ib-timeout: \"0\" is out of range; use 1..31"},
          {b + " --transport rdma --ib-timeout 32",
           "--ib-timeout: \"32\" is out of range; use 1..31"},
          {b + " --transport rdma --ib-retry-cnt 8",
           "--ib-retry-cnt: \"8\" is out of range; use 0..7"},
          {b + " --qps 2", "--qps, --ib-timeout and --ib-retry-cnt tune --transport rdma"},
          {b + " --channels 0", "--channels: \"0\" is out of range; use 1..64"},
          {b + " --channels 65", "--channels: \"65\" is out of range; use 1..64"},
          {b + " --channels 2 --impl gloo", "use --channels 1 with --impl gloo"},
          {b + " --transport rdma --impl gloo", "--transport rdma: Gloo's ibverbs transport"},
          {b + " --timeout 0", "--timeout: \"0\" is out of range; use 0.1..86400"},
          {b + " --timeout -1", "--timeout: \"-1\" is out of range; use 0.1..86400"},
          {b + " --timeout nan", "--timeout: \"nan\" is not a number; use 0.1..86400"},
          {b + " --timeout 1e300", "--timeout: \"1e300\" is out of range; use 0.1..86400"},
          {b + " --timeout 30s", "--timeout: \"30s\" is not a number; use 0.1..86400"},
          {b + " --json /nonexistent/dir/b.json", "--json: /nonexistent/dir is not a directory"},
          {"bench " + lab_ + " nosuchcollective",
           "unknown collective 'nosuchcollective'; use allreduce"},
          {"bench " + lab_, "COLLECTIVE is required"},
          {b + " --bogus", "bench takes -b/--minbytes, -e/--maxbytes"},
      });
}

TEST_F(Flags, Fault) {
  const std::string f = "fault " + lab_ + " ";
  const std::string ends = " dc/s0/g0 dc/tor0";
  expect_bad_input(
      lab_,
      {
          {f + "frobnicate" + ends, "unknown fault 'frobnicate'; use link-down, link-up, flap"},
          {f + "flap" + ends + " --period 500ms --count 0",
           "--count: \"0\" is out of range; use 1..1000000"},
          {f + "flap" + ends + " --period 500ms --count abc",
           "--count: \"abc\" is not a whole number; use 1..1000000"},
          {f + "flap" + ends + " --count 3",
           "flap needs --period greater than 0, e.g. --period 500ms"},
          {f + "flap" + ends + " --period 0 --count 3", "flap needs --period greater than 0"},
          {f + "flap" + ends + " --period 500ms", "flap needs --count 1..1000000"},
          {f + "flap" + ends + " --period -5ms --count 3",
           "--period: \"-5ms\" is not a duration (must not be negative)"},
          {f + "loss" + ends, "loss needs --loss 0..100%, e.g. --loss 5%"},
          {f + "loss" + ends + " --loss 150%",
           "--loss: \"150%\" is not a percentage (more than 100)"},
          {f + "latency" + ends, "latency needs --delay greater than 0, e.g. --delay 50ms"},
          {f + "latency" + ends + " --delay 10Zs",
           "--delay: \"10Zs\" is not a duration; use a number"},
          {f + "link-down" + ends + " --for 2parsecs", "--for: \"2parsecs\" is not a duration"},
          {f + "link-down" + ends + " --loss 5%", "--loss: only for loss (not link-down)"},
          {f + "link-down" + ends + " --count 3", "--count: only for flap (not link-down)"},
          {f + "loss" + ends + " --loss 5% --delay 5ms", "--delay: only for latency (not loss)"},
          {f + "link-down" + ends + " --period 1s", "--period: only for flap (not link-down)"},
          {f + "crash dc/tor0 --link ec",
           "--link: only for link faults, link-down, link-up, flap, loss, blackhole or latency "
           "(not crash)"},
          {f + "link-down dc/s0/g0", "fault link-down takes two link ends"},
          {f + "partition dc", "fault partition takes two regions: R1 R2"},
          {"fault " + lab_, "KIND is required"},
          {f + "link-down" + ends + " --bogus", "fault takes --for, --period, --count"},
      });
}

TEST_F(Flags, Run) {
  const std::string r = "run " + mini_ + " --name " + lab_;
  expect_bad_input(
      lab_, {
                {r + " --size 10Q", "--size: \"10Q\" is not a size; use a number of bytes"},
                {r + " --size 2", "--size: must be at least 4 bytes (got 2)"},
                {r + " --size -1M", "--size: \"-1M\" is not a size (must not be negative)"},
                {r + " --timeout 0", "--timeout: \"0\" is out of range; use 0.1..86400"},
                {r + " --timeout inf", "--timeout: \"inf\" is out of range; use 0.1..86400"},
                {r + " --settle 0", "--settle: \"0\" is out of range; use 0.1..86400"},
                {r + " --settle 5s", "--settle: \"5s\" is not a number; use 0.1..86400"},
                {r + " --shaping foo", "--shaping: \"foo\" is not a shaping backend"},
                {"run " + mini_ + " --name Bad_Name", "--name: \"Bad_Name\" is not a lab name"},
                {r + " --transport ib", "--transport: 'ib' is not tcp or rdma"},
                {r + " --intra-server pcie", "--intra-server: 'pcie' is not net or shm"},
                {r + " --transport rdma --qps 99", "--qps: \"99\" is out of range; use 1..16"},
                {r + " --qps 2", "--qps, --ib-timeout and --ib-retry-cnt tune --transport rdma"},
                // A lab that is not up: the flag's error still comes first.
                {"run " + lab_ + " --size 2", "--size: must be at least 4 bytes (got 2)"},
                {r + " --bogus", "run takes --name, --workload, --size, --timeout, --shaping"},
                {"run", "SCENARIO_OR_LAB is required"},
            });
}

}  // namespace
}  // namespace tb::e2e
