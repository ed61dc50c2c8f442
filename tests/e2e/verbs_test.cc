// The verbs that build no lab, driven as a user would: validate, plan (text and JSON), graph (dot
// and Mermaid), doctor --json, and status with no lab up. Each checks what the verb exists to say,
// so a verb that printed nothing, or the wrong thing, fails.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

// A temporary directory removed when the test ends, however it ends.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tb-e2e-verbs-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

TEST(Verbs, ValidateSaysWhatTheScenarioBuildsAndEveryErrorLineHasItsPlace) {
  CmdResult ok = testbedctl("validate " + scenario("mini.toml"));
  EXPECT_EQ(ok.rc, 0) << ok.out;
  EXPECT_NE(ok.out.find("ok — lab mini, 4 GPUs, 9 nodes, 11 links"), std::string::npos) << ok.out;
  CmdResult hz = testbedctl("validate " + scenario("hz-bj.toml"));
  EXPECT_EQ(hz.rc, 0) << hz.out;
  EXPECT_NE(hz.out.find("lab hzbj, 20 GPUs"), std::string::npos) << hz.out;

  TempDir dir;
  const auto bad = (dir.path / "bad.toml").string();
  std::ofstream(bad) << "[lab]\nname = \"x\"\n[[region]]\nname = \"dc\"\nservers = 0\nbogus = 1\n";
  CmdResult r = testbedctl("validate " + bad);
  EXPECT_EQ(r.rc, 2) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  int n = 0;
  const std::regex placed("^" + bad + ":[0-9]+:[0-9]+: .+");
  while (std::getline(lines, line)) {
    ++n;
    EXPECT_TRUE(std::regex_match(line, placed)) << "not FILE:LINE:COL: " << line;
  }
  EXPECT_GE(n, 2) << r.out;  // servers = 0 and the unknown key, at least
  EXPECT_NE(r.out.find(bad + ":5:11: region \"dc\": servers: must be at least 1"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("unknown key \"bogus\""), std::string::npos) << r.out;
}

TEST(Verbs, PlanJsonListsTheDaemonsAndShapingUpWouldStart) {
  CmdResult r = testbedctl("plan " + scenario("hz-bj.toml") + " --format json --shaping tbf");
  ASSERT_EQ(r.rc, 0) << r.out;
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(j["lab"], "hzbj");
  EXPECT_EQ(j["shaping"]["backend"], "tbf");
  ASSERT_TRUE(j.contains("rdma")) << r.out;
  std::multiset<std::string> kinds;
  for (const auto& op : j["ops"]) {
    const std::string kind = op["op"];
    kinds.insert(kind == "daemon" ? "daemon " + op["daemon"]["kind"].get<std::string>() : kind);
  }
  // tbf leaves hz-bj's WAN and frontend delays to a delay stage per namespace that has them,
  // steered there by one rule per direction; dual ToRs with spines get the fabric agent.
  EXPECT_EQ(kinds.count("daemon stage"), 10u);
  EXPECT_EQ(kinds.count("stage-rule"), 20u);
  EXPECT_EQ(kinds.count("daemon fabric"), 1u);
  EXPECT_GT(kinds.count("shape"), 0u);
  // The text form says the same, one op per line.
  CmdResult text = testbedctl("plan " + scenario("hz-bj.toml") + " --shaping tbf");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("\ndelayd hz/tr netns tb-hzbj-hz-tr"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("\nrdma: "), std::string::npos);
  // --shaping none: no stage, no rule, no qdisc.
  CmdResult none = testbedctl("plan " + scenario("hz-bj.toml") + " --shaping none");
  ASSERT_EQ(none.rc, 0) << none.out;
  EXPECT_EQ(none.out.find("\ndelayd "), std::string::npos);
  EXPECT_EQ(none.out.find("\nshape  "), std::string::npos);
  CmdResult bad = testbedctl("plan " + scenario("hz-bj.toml") + " --shaping cake");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("--shaping: \"cake\" is not a shaping backend; use auto, none or one of"),
            std::string::npos)
      << bad.out;
}

TEST(Verbs, GraphDrawsEveryNodeAsDotAndAsMermaid) {
  CmdResult dot = testbedctl("graph " + scenario("mini.toml"));
  ASSERT_EQ(dot.rc, 0) << dot.out;
  EXPECT_EQ(dot.out.rfind("graph \"mini\" {", 0), 0u) << dot.out;
  CmdResult mm = testbedctl("graph " + scenario("mini.toml") + " --format mermaid");
  ASSERT_EQ(mm.rc, 0) << mm.out;
  EXPECT_NE(mm.out.find("graph TB"), std::string::npos) << mm.out;
  for (const char* node : {"dc/s0/g0", "dc/s1/g1", "dc/tor0", "dc/vpc", "dc/tr"}) {
    EXPECT_NE(dot.out.find(node), std::string::npos) << node << " missing from dot";
    EXPECT_NE(mm.out.find(node), std::string::npos) << node << " missing from mermaid";
  }
  CmdResult neither = testbedctl("graph nosuch");
  EXPECT_EQ(neither.rc, 2) << neither.out;
  EXPECT_NE(neither.out.find("neither a scenario file nor a lab that is up"), std::string::npos);
}

TEST(Verbs, DoctorJsonNamesEveryCheckAndWhatItChose) {
  TB_REQUIRE_ROOT();
  CmdResult r = testbedctl("doctor --json");
  auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')), nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << r.out;
  EXPECT_EQ(r.rc, j["usable"].get<bool>() ? 0 : 2) << r.out;
  std::set<std::string> names;
  bool rxe = false;
  for (const auto& c : j["capabilities"]) {
    names.insert(c["name"].get<std::string>());
    EXPECT_FALSE(c["method"].get<std::string>().empty()) << c.dump();
    EXPECT_FALSE(c["enables"].get<std::string>().empty()) << c.dump();
    if (c["name"] == "rdma_rxe") rxe = c["available"].get<bool>();
  }
  for (const char* n : {"root", "netns", "veth", "netem", "tbf", "htb", "nfqueue", "rdma_rxe"})
    EXPECT_TRUE(names.contains(n)) << n;
  // What it chose follows what it found.
  EXPECT_FALSE(j["chosen"]["shaping_backend"].get<std::string>().empty());
  EXPECT_EQ(j["chosen"]["transport"], rxe ? "rdma" : "tcp");
  EXPECT_FALSE(j["kernel"].get<std::string>().empty());
}

TEST(Verbs, StatusWithNoLabUpSaysSoInTextAndJson) {
  TempDir dir;
  const std::string env = "TESTBEDCTL_RUN_DIR=" + dir.path.string() + " ";
  CmdResult text = sh(env + tbctl() + " status");
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_EQ(text.out, "no labs are up\n");
  CmdResult json = sh(env + tbctl() + " status --json");
  EXPECT_EQ(json.rc, 0) << json.out;
  auto j = nlohmann::json::parse(json.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << json.out;
  EXPECT_EQ(j, nlohmann::json({{"labs", nlohmann::json::array()}}));
  CmdResult one = sh(env + tbctl() + " status nosuch");
  EXPECT_EQ(one.rc, 2) << one.out;
}

}  // namespace
}  // namespace tb::e2e
