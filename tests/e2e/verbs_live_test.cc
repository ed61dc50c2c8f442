// The lab verbs and flags on live labs that had no test: `down SCENARIO` (and a renamed lab),
// `up --shaping` for every backend, `up` refusing a lab's leftovers, `status` showing BROKEN and
// missing links, `t_unix_ms` in events.jsonl, and `verify --link` / `--json`. Each checks what
// the verb exists to do, read back from the kernel or the lab's files, so a verb that did
// nothing, or the wrong thing, fails. Every lab is taken down however the test ends (LabGuard).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <set>

#include "live_util.h"

namespace tb::e2e {
namespace {

using nlohmann::json;

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

TEST(LiveVerbs, DownTakesTheScenarioFileAndARenamedLabByItsName) {
  TB_REQUIRE_ROOT();
  ScratchDir dir;
  LabGuard g(unique_lab("dn")), renamed(unique_lab("dr"));
  const std::string file = scenario_named(dir, "mini.toml", g.lab());
  ASSERT_EQ(testbedctl("up " + file).rc, 0);  // the lab takes the file's [lab] name
  EXPECT_EQ(marked_netns(g.lab()).size(), 9u);
  CmdResult down = testbedctl("down " + file);
  EXPECT_EQ(down.rc, 0) << down.out;
  EXPECT_EQ(down.out, "lab " + g.lab() + " is down\n");
  EXPECT_TRUE(marked_netns(g.lab()).empty());
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + g.lab()));

  // Renamed with --name, the lab is addressed by that name: the file names its own lab, which
  // is not up, and the renamed one is left whole.
  ASSERT_EQ(testbedctl("up " + file + " --name " + renamed.lab()).rc, 0);
  down = testbedctl("down " + file);
  EXPECT_EQ(down.rc, 0) << down.out;
  EXPECT_EQ(down.out, "lab " + g.lab() + " was not up; nothing left of it\n");
  EXPECT_EQ(marked_netns(renamed.lab()).size(), 9u);
  EXPECT_EQ(status_json(renamed.lab()).value("phase", ""), "up");
  down = testbedctl("down " + renamed.lab());
  EXPECT_EQ(down.rc, 0) << down.out;
  EXPECT_TRUE(marked_netns(renamed.lab()).empty());

  // A file that does not load is bad input, and names its place.
  std::ofstream(dir.file("bad.toml")) << "[lab]\nname = 7\n";
  down = testbedctl("down " + dir.file("bad.toml"));
  EXPECT_EQ(down.rc, 2) << down.out;
  EXPECT_NE(down.out.find(dir.file("bad.toml") + ":2:"), std::string::npos) << down.out;
}

// Every qdisc kind on the lab's links, over all its namespaces.
std::set<std::string> qdisc_kinds(const std::string& lab) {
  std::set<std::string> kinds;
  for (const auto& n : marked_netns(lab)) {
    std::istringstream in(sh("tc -n " + n + " qdisc show").out);
    for (std::string word, kind; in >> word;)
      if (word == "qdisc" && in >> kind) kinds.insert(kind);
  }
  return kinds;
}

bool doctor_has(const std::string& check) {
  CmdResult r = testbedctl("doctor --json");
  auto j = json::parse(r.out.substr(std::min(r.out.find('{'), r.out.size())), nullptr, false);
  if (j.is_discarded()) return false;
  for (const auto& c : j["capabilities"])
    if (c["name"] == check) return c["available"].get<bool>();
  return false;
}

TEST(LiveVerbs, UpShapingBuildsWithTheBackendAskedForOrRefusesOneThisHostLacks) {
  TB_REQUIRE_ROOT();
  const std::string rail_ns_suffix = "dc-s0-g0";
  for (const std::string backend : {"none", "tbf", "htb", "netem"}) {
    SCOPED_TRACE(backend);
    LabGuard g(unique_lab("sh"));
    const bool have = backend == "none" || doctor_has(backend);
    CmdResult up =
        testbedctl("up " + scenario("mini.toml") + " --name " + g.lab() + " --shaping " + backend);
    if (!have) {
      // Refused before anything is built: exit 2 naming the backend and the doctor.
      EXPECT_EQ(up.rc, 2) << up.out;
      EXPECT_NE(up.out.find("--shaping " + backend), std::string::npos) << up.out;
      EXPECT_NE(up.out.find("doctor"), std::string::npos) << up.out;
      EXPECT_TRUE(marked_netns(g.lab()).empty());
      EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + g.lab()));
      continue;
    }
    ASSERT_EQ(up.rc, 0) << up.out;
    EXPECT_NE(up.out.find("shaping: " + backend + " (asked)"), std::string::npos) << up.out;
    const json st = status_json(g.lab());
    EXPECT_EQ(st["backends"]["shaping"].get<std::string>().rfind(backend, 0), 0u)
        << st["backends"].dump();
    const std::string rail_ns = ns(g.lab(), rail_ns_suffix);
    // htb holds the rate in its class, the others in the qdisc.
    const std::string rail =
        qdiscs(rail_ns, "rail") + sh("tc -n " + rail_ns + " class show dev rail").out;
    const auto kinds = qdisc_kinds(g.lab());
    if (backend == "none") {
      // No qdisc of ours anywhere, and no delay stage.
      for (const char* k : {"tbf", "htb", "netem"}) EXPECT_FALSE(kinds.contains(k)) << k;
      EXPECT_FALSE(st["backends"].contains("stages")) << st["backends"].dump();
    } else {
      EXPECT_NE(rail.find(backend), std::string::npos) << rail;
      EXPECT_NE(rail.find("rate 400Mbit"), std::string::npos) << rail;  // hpn's 400G / 1000
      // netem runs over a tbf child; otherwise only the backend asked for.
      for (const std::string k : {"tbf", "htb", "netem"}) {
        if (k == backend || (backend == "netem" && k == "tbf")) continue;
        EXPECT_FALSE(kinds.contains(k)) << k << " in a lab shaped by " << backend;
      }
    }
    EXPECT_TRUE(reaches(g.lab(), "dc/s0/g0", "dc-s1-g1.rail"));
  }
}

TEST(LiveVerbs, UpRefusesALabsLeftoversAndChangesNothing) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("lo"));
  // What a crash leaves: one namespace with the lab's marker, and no state.
  const std::string left = ns(g.lab(), "dc-tr");
  ASSERT_EQ(sh("ip netns add " + left).rc, 0);
  struct Del {
    std::string ns;
    ~Del() { sh("ip netns del " + ns + " 2>/dev/null"); }
  } del{left};
  ASSERT_EQ(
      sh("ip -n " + left + " link set lo alias 'testbedctl lab=" + g.lab() + " node=dc/tr'").rc, 0);
  ASSERT_EQ(marked_netns(g.lab()), std::vector<std::string>{left});

  CmdResult up = testbedctl("up " + scenario("mini.toml") + " --name " + g.lab());
  EXPECT_EQ(up.rc, 2) << up.out;
  EXPECT_NE(up.out.find("has 1 namespaces left over from an earlier run (e.g. " + left + ")"),
            std::string::npos)
      << up.out;
  EXPECT_NE(up.out.find("testbedctl clean " + g.lab()), std::string::npos) << up.out;
  EXPECT_EQ(marked_netns(g.lab()), std::vector<std::string>{left});
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + g.lab()));
  EXPECT_EQ(sh("ip -n " + left + " -o link show").out.find("rail"), std::string::npos);

  // As the message says: clean, then up works.
  CmdResult clean = testbedctl("clean " + g.lab());
  EXPECT_EQ(clean.rc, 0) << clean.out;
  EXPECT_TRUE(marked_netns(g.lab()).empty());
  EXPECT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
}

TEST(LiveVerbs, StatusSaysBrokenWhenADelayStageIsGivenUpOn) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("bk"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  if (status_json(g.lab())["backends"].value("stages_down", -1) < 0)
    GTEST_SKIP() << "kernel netem shapes this lab: no delay stage to break";
  ASSERT_TRUE(reaches(g.lab(), "dc/vpc", "dc-tr"));
  CmdResult text = testbedctl("status " + g.lab());
  EXPECT_EQ(text.out.find("BROKEN"), std::string::npos) << text.out;
  EXPECT_EQ(text.rc, 0) << text.out;
  // The supervisor gives a stage up after 8 deaths within a minute (runner/supervisor.h): kill
  // dc/tr's stage each time it is back, checking the pid is this lab's tb-delayd.
  const bool broken = kill_stage_until_broken(g.lab(), "stage dc/tr");
  ASSERT_TRUE(broken) << stage_of(g.lab(), "stage dc/tr").dump();
  text = testbedctl("status " + g.lab());
  EXPECT_EQ(text.rc, 1) << text.out;  // read, and a stage is down: scripts see it
  EXPECT_NE(text.out.find("BROKEN: links through a stopped stage drop every packet"),
            std::string::npos)
      << text.out;
  const json st = status_json(g.lab());
  EXPECT_EQ(st["backends"]["stages_down"], 1) << st["backends"].dump();
  const json s = stage_of(g.lab(), "stage dc/tr");
  EXPECT_FALSE(s["running"].get<bool>());
  EXPECT_EQ(lab_events(g.lab(), "broken").size(), 1u);
  // Fail-closed: the link through the stage drops everything; the other links still work.
  EXPECT_TRUE(unreachable(g.lab(), "dc/vpc", "dc-tr"));
  EXPECT_TRUE(reaches(g.lab(), "dc/s0/g0", "dc-s1-g1.rail"));
}

TEST(LiveVerbs, StatusShowsTheLinksOfANamespaceDeletedByHandAsMissing) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("ms"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  ASSERT_EQ(sh("ip netns del " + ns(g.lab(), "dc-s1-g1")).rc, 0);
  const json st = status_json(g.lab());
  ASSERT_FALSE(st.is_null());
  int missing = 0;
  for (const auto& l : st["links"]) {
    const bool gone = l["a"]["node"] == "dc/s1/g1" || l["b"]["node"] == "dc/s1/g1";
    EXPECT_EQ(l["state"], gone ? "missing" : "up") << l.dump();
    missing += gone;
  }
  EXPECT_EQ(missing, 2);  // its NVLink and its rail
  CmdResult text = testbedctl("status " + g.lab());
  EXPECT_EQ(text.rc, 0) << text.out;
  EXPECT_NE(text.out.find("missing"), std::string::npos) << text.out;
  // down still removes the rest.
  CmdResult down = testbedctl("down " + g.lab());
  EXPECT_EQ(down.rc, 0) << down.out;
  EXPECT_TRUE(marked_netns(g.lab()).empty());
}

TEST(LiveVerbs, EveryEventCarriesItsUnixTimeWithinTheTestsWindow) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("tu"));
  const int64_t before = unix_ms_now();
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  ASSERT_EQ(testbedctl("link " + g.lab() + " down dc/s0/g0 dc/tor0").rc, 0);
  ASSERT_EQ(testbedctl("link " + g.lab() + " up dc/s0/g0 dc/tor0").rc, 0);
  const auto events = lab_events(g.lab());
  const int64_t after = unix_ms_now();
  std::set<std::string> kinds;
  for (const auto& e : events) {
    ASSERT_TRUE(e.contains("t_unix_ms")) << e.dump();
    ASSERT_TRUE(e["t_unix_ms"].is_number_integer()) << e.dump();
    EXPECT_GE(e["t_unix_ms"].get<int64_t>(), before) << e.dump();
    EXPECT_LE(e["t_unix_ms"].get<int64_t>(), after) << e.dump();
    EXPECT_TRUE(e["t_mono_ns"].is_number_integer()) << e.dump();
    kinds.insert(e.value("event", ""));
  }
  // The supervisor's (a separate process) and the link verb's.
  for (const char* k : {"started", "link_down", "link_up"}) EXPECT_TRUE(kinds.contains(k)) << k;
}

TEST(LiveVerbs, VerifyOneLinkAndItsJsonSayTheSame) {
  TB_REQUIRE_ROOT();
  LabGuard g(unique_lab("vf"));
  ASSERT_EQ(testbedctl("up " + scenario("mini.toml") + " --name " + g.lab()).rc, 0);
  const std::string args = "verify " + g.lab() + " --quick --link dc/s0/g0 dc/tor0";
  // The progress lines go to stderr; stdout is the report alone.
  CmdResult jr = sh("(" + tbctl() + " " + args + " --json 2>/dev/null)");
  const json j = json::parse(jr.out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << jr.out;
  // Exit 0 pass, 1 fail, 2 not judged (the host stalled through every reading).
  EXPECT_EQ(jr.rc, j["result"] == "pass" ? 0 : j["result"] == "fail" ? 1 : 2) << jr.out;
  EXPECT_EQ(j["lab"], g.lab());
  ASSERT_EQ(j["classes"].size(), 1u) << "--link measures the one link";
  const json& c = j["classes"][0];
  EXPECT_EQ(c["link"]["a"]["node"], "dc/s0/g0");
  EXPECT_EQ(c["link"]["b"]["node"], "dc/tor0");
  EXPECT_EQ(c["configured"]["rate_bps"], 400e6);
  EXPECT_EQ(j["summary"]["classes"], 1);
  int measured = 0;
  for (const auto& k : c["checks"]) measured += !k["achieved"].is_null();
  EXPECT_GT(measured, 0) << c.dump(1);

  CmdResult text = sh("(" + tbctl() + " " + args + " 2>/dev/null)");
  EXPECT_EQ(text.out.find("[2/"), std::string::npos) << text.out;
  // What the text shows is in the JSON: the class, the addresses, each check by name.
  for (const std::string& want :
       {"[1/1] " + c["class"].get<std::string>() + "  (" + std::to_string(c["members"].get<int>()),
        std::string("the one asked for"), "dc/s0/g0:rail " + c["target"]["from"].get<std::string>(),
        "dc/tor0:s0g0 " + c["target"]["addr"].get<std::string>(),
        "shaping backend (as status reports it): " + j["shaping_backend"].get<std::string>()})
    EXPECT_NE(text.out.find(want), std::string::npos) << want << "\n" << text.out;
  for (const auto& k : c["checks"])
    EXPECT_NE(text.out.find("\n  " + k["check"].get<std::string>() + " "), std::string::npos)
        << k.dump();
  // Not a link of the lab: bad input.
  CmdResult bad = testbedctl("verify " + g.lab() + " --link dc/s0/g0 dc/s1/g1");
  EXPECT_EQ(bad.rc, 2) << bad.out;
}

}  // namespace
}  // namespace tb::e2e
