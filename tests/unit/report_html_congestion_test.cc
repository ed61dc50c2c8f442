// The congestion pictures of an HTML report (report/html_congestion.h, issue 32 P9): the tree of
// which port paused which from a window's counters, and a run's pause timeline from its
// congestion.jsonl, pfc-storm faults and the PFC watchdog's events; the page and a results
// directory carrying them. tests/e2e/report_test.cc has Chromium draw them.
#include "report/html_congestion.h"

#include <gtest/gtest.h>

#include <fstream>

#include "temp_dir.h"

namespace tb {
namespace {

using nlohmann::json;

// A window as congestion::to_json(window = true) writes it: the receiver's ToR port paused two
// GPU NICs and the spine's port toward that ToR, which paused the other ToR's uplink in turn
// (hop by hop); the fourth GPU's ToR port was stormed and the watchdog tripped on it.
json a_window() {
  auto port = [](uint64_t xoff, uint64_t sent, uint64_t drops, uint64_t violations) {
    return json{{"model", "lossless"},
                {"pauses_sent", sent},
                {"xoff_events", xoff},
                {"drops", drops},
                {"backlog_bytes", 0},
                {"backlog_max_bytes_since_agent_start", 204800},
                {"lossless_violations", violations},
                {"storm", false},
                {"watchdog", {{"trips", 0}, {"mitigating", false}, {"dropped", 0}}}};
  };
  auto up = [](uint64_t n, int64_t ns, json by) {
    return json{{"pauses_received", n}, {"paused_ns", ns},    {"paused_fraction", ns / 4e9},
                {"paused_now", false},  {"pause_expired", 0}, {"by", std::move(by)}};
  };
  json ports = {{"dc/tor0:s4g0", port(40, 120, 0, 0)},
                {"dc/spine0:t0", port(5, 8, 0, 0)},
                {"dc/tor0:s3g0", port(0, 0, 7, 0)},
                {"dc/tor0:s9g0", port(0, 0, 0, 0)}};
  ports["dc/tor0:s3g0"]["storm"] = true;
  ports["dc/tor0:s3g0"]["watchdog"] = {{"trips", 1}, {"mitigating", false}, {"dropped", 7}};
  json ups = {{"dc/s0/g0:rail", up(50, 1'500'000'000, {{"dc/tor0:s4g0", 50}})},
              {"dc/s1/g0:rail", up(60, 1'700'000'000, {{"dc/tor0:s4g0", 60}})},
              {"dc/spine0:t0", up(10, 300'000'000, {{"dc/tor0:s4g0", 10}})},
              {"dc/tor1:sp0", up(8, 100'000'000, {{"dc/spine0:t0", 8}})},
              {"dc/s2/g0:rail", up(0, 0, json::object())}};
  return {{"source", "congestion agent stats file"},
          {"backend", "pauses = TBF replaced by 1 B/s"},
          {"state", "counted"},
          {"window_s", 4.0},
          {"ports", ports},
          {"upstreams", ups}};
}

TEST(ReportHtmlCongestion, TheTreeHasAnArrowPerPortAndQueueItPausedHopByHop) {
  const std::string dot = report::congestion_tree_dot(a_window());
  ASSERT_FALSE(dot.empty());
  EXPECT_NE(dot.find("\"dc/tor0:s4g0\" -> \"dc/s0/g0:rail\" [label=\"50 pauses\"]"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("\"dc/tor0:s4g0\" -> \"dc/s1/g0:rail\" [label=\"60 pauses\"]"),
            std::string::npos);
  // The spine's port: paused by the ToR's port, and pausing the other ToR's uplink in turn.
  EXPECT_NE(dot.find("\"dc/tor0:s4g0\" -> \"dc/spine0:t0\""), std::string::npos);
  EXPECT_NE(dot.find("\"dc/spine0:t0\" -> \"dc/tor1:sp0\" [label=\"8 pauses\"]"),
            std::string::npos);
  // One node each, the spine's port with both its port and its queue lines.
  const auto spine = dot.find("\n  \"dc/spine0:t0\" [label=");
  ASSERT_NE(spine, std::string::npos);
  const std::string spine_line = dot.substr(spine + 1, dot.find('\n', spine + 1) - spine - 1);
  EXPECT_NE(spine_line.find("5 XOFF, 8 pauses sent"), std::string::npos) << spine_line;
  EXPECT_NE(spine_line.find("paused 10 time(s), 0.300 s (8% of the window)"), std::string::npos)
      << spine_line;
  EXPECT_NE(spine_line.find("shape=box"), std::string::npos);
  EXPECT_EQ(dot.find("\n  \"dc/spine0:t0\" [label=", spine + 1), std::string::npos);
  // The stormed port is drawn, in red, though it paused nothing; an idle port and a queue
  // never paused are not drawn.
  const auto storm = dot.find("\"dc/tor0:s3g0\" [label=");
  ASSERT_NE(storm, std::string::npos);
  const std::string storm_line = dot.substr(storm, dot.find('\n', storm) - storm);
  EXPECT_NE(storm_line.find("a pfc-storm held it paused"), std::string::npos) << storm_line;
  EXPECT_NE(storm_line.find("PFC watchdog: 1 trip(s), 7 dropped by its mitigation"),
            std::string::npos);
  EXPECT_NE(storm_line.find("fillcolor"), std::string::npos);
  EXPECT_EQ(dot.find("dc/tor0:s9g0"), std::string::npos);
  EXPECT_EQ(dot.find("dc/s2/g0:rail"), std::string::npos);
  // The method names the source, the backend and the window.
  const std::string how = report::congestion_tree_method(a_window());
  EXPECT_NE(how.find("congestion agent stats file"), std::string::npos) << how;
  EXPECT_NE(how.find("TBF replaced by 1 B/s"), std::string::npos) << how;
  EXPECT_NE(how.find("4.0 s window"), std::string::npos) << how;
}

TEST(ReportHtmlCongestion, NothingPausedOrNoCountsDrawsNoTree) {
  json quiet = a_window();
  for (auto& [u, uj] : quiet["upstreams"].items()) uj["by"] = json::object();
  quiet["ports"]["dc/tor0:s3g0"]["storm"] = false;
  quiet["ports"]["dc/tor0:s3g0"]["watchdog"]["trips"] = 0;
  EXPECT_EQ(report::congestion_tree_dot(quiet), "");
  EXPECT_EQ(report::congestion_tree_dot(json()), "");
  EXPECT_EQ(report::congestion_tree_dot({{"state", "no agent"}}), "");
  // A lossless violation alone is drawn (red): it is what a lossless fabric must never show.
  quiet["ports"]["dc/tor0:s9g0"]["drops"] = 3;
  quiet["ports"]["dc/tor0:s9g0"]["lossless_violations"] = 3;
  const std::string dot = report::congestion_tree_dot(quiet);
  EXPECT_NE(dot.find("LOSSLESS VIOLATED: 3 drop(s)"), std::string::npos) << dot;
  // An ECN port that marked is drawn with its marks, though it pauses no one.
  quiet["ports"]["dc/vpc:s0"] = {{"model", "ecn"}, {"ce_marks", 42}, {"xoff_events", 0}};
  const std::string ecn = report::congestion_tree_dot(quiet);
  EXPECT_NE(ecn.find("switch port (ecn)"), std::string::npos) << ecn;
  EXPECT_NE(ecn.find("ECN: 42 packet(s) marked CE"), std::string::npos) << ecn;
}

// A run from t0 = 1 s lasting 4 s: two episodes of one GPU's NIC, one of another, a pfc-storm
// from 1 s to 2 s whose port the watchdog detected at 1.2 s and restored at 1.6 s.
report::ReportInput a_congested_run() {
  report::ReportInput in;
  in.kind = report::ReportKind::kRun;
  const int64_t t0 = 1'000'000'000, s = 1'000'000'000;
  in.doc = {{"lab", "cg"},
            {"t0_ns", t0},
            {"t_end_ns", t0 + 4 * s},
            {"recovery",
             {{"faults", json::array({{{"fault", 0},
                                       {"kind", "pfc-storm"},
                                       {"target", "pfc-storm dc/s3/g0"},
                                       {"inject_ns", t0 + s},
                                       {"revert_ns", t0 + 2 * s}}})}}},
            {"congestion", a_window()}};
  in.congestion_episodes = {{{"t0_ns", t0 + s / 2},
                             {"t1_ns", t0 + s},
                             {"upstream", "dc/s0/g0:rail"},
                             {"by", {"dc/tor0:s4g0"}},
                             {"cycles", 30}},
                            {{"t0_ns", t0 + 3 * s},
                             {"t1_ns", t0 + 3 * s + s / 4},
                             {"upstream", "dc/s0/g0:rail"},
                             {"by", {"dc/tor0:s4g0"}},
                             {"cycles", 20}},
                            {{"t0_ns", t0 + s / 2},
                             {"t1_ns", t0 + s},
                             {"upstream", "dc/s1/g0:rail"},
                             {"by", {"dc/tor0:s4g0"}},
                             {"cycles", 60}},
                            {{"t0_ns", 0}, {"t1_ns", 0}, {"upstream", "broken"}}};  // skipped
  in.events = {
      {{"event", "pfcwd_detect"}, {"port", "dc/tor0:s3g0"}, {"t_mono_ns", t0 + 1'200'000'000}},
      {{"event", "pfcwd_restore"}, {"port", "dc/tor0:s3g0"}, {"t_mono_ns", t0 + 1'600'000'000}},
      {{"event", "iteration"}, {"start_ns", t0}, {"t_mono_ns", t0 + s}}};
  return in;
}

TEST(ReportHtmlCongestion, ARunsTimelineHasARowPerPausedQueueTheStormAndTheWatchdog) {
  const auto chart = report::congestion_timeline_chart(a_congested_run());
  ASSERT_TRUE(chart.has_value());
  EXPECT_EQ(chart->id, "run-congestion");
  const auto& cfg = chart->config;
  EXPECT_EQ(cfg["type"], "bar");
  EXPECT_EQ(cfg["options"]["indexAxis"], "y");
  EXPECT_EQ(cfg["options"]["scales"]["x"]["max"], 4.0);
  // Rows in order of first appearance: the storm (from the recovery table), the two queues,
  // the watchdog's port.
  EXPECT_EQ(cfg["data"]["labels"], json::array({"fault 0: pfc-storm dc/s3/g0", "dc/s0/g0:rail",
                                                "dc/s1/g0:rail", "dc/tor0:s3g0"}));
  const auto& ds = cfg["data"]["datasets"];
  ASSERT_EQ(ds.size(), 4u);  // paused, storm, detected, restored
  ASSERT_EQ(ds[0]["data"].size(), 3u);
  EXPECT_EQ(ds[0]["data"][0]["y"], "dc/s0/g0:rail");
  EXPECT_EQ(ds[0]["data"][0]["x"], json::array({0.5, 1.0}));
  EXPECT_EQ(ds[0]["data"][1]["x"], json::array({3.0, 3.25}));
  EXPECT_EQ(ds[1]["data"][0]["x"], json::array({1.0, 2.0}));
  ASSERT_EQ(ds[2]["data"].size(), 1u);
  EXPECT_NEAR(ds[2]["data"][0]["x"].get<double>(), 1.2, 1e-9);
  EXPECT_EQ(ds[2]["data"][0]["y"], "dc/tor0:s3g0");
  EXPECT_NEAR(ds[3]["data"][0]["x"].get<double>(), 1.6, 1e-9);
  EXPECT_NE(chart->method.find("110 pauses in 3 episodes"), std::string::npos) << chart->method;
  EXPECT_NE(chart->method.find("tb-probe congestion"), std::string::npos);
  // A run without any of it has no such chart.
  auto plain = a_congested_run();
  plain.congestion_episodes.clear();
  plain.events.clear();
  plain.doc["recovery"]["faults"] = json::array();
  EXPECT_FALSE(report::congestion_timeline_chart(plain).has_value());
}

TEST(ReportHtmlCongestion, ARunsPageAndItsDirectoryCarryTheTreeAndTheTimeline) {
  testing_util::TempDir dir;
  const auto run = a_congested_run();
  std::ofstream(dir.path() + "/summary.json") << run.doc.dump();
  {
    std::ofstream ev(dir.path() + "/events.jsonl");
    for (const auto& e : run.events) ev << e.dump() << "\n";
    std::ofstream cg(dir.path() + "/congestion.jsonl");
    for (const auto& e : run.congestion_episodes) cg << e.dump() << "\n";
    cg << "not json\n";
  }
  auto in = report::read_report_input(dir.path());
  ASSERT_TRUE(in) << in.error().message;
  EXPECT_EQ(in->congestion_episodes.size(), 4u);  // the line that is not JSON left out
  auto page = report::html_page(*in, "window.Chart = function () {};");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_NE(page->find("<canvas id=\"run-congestion\">"), std::string::npos);
  EXPECT_NE(page->find("id=tb-congestion-tree"), std::string::npos);
  EXPECT_NE(page->find("<svg"), std::string::npos);
  // No counts: the tree is not drawn, and the page says why.
  in->doc["congestion"] = {{"state", "not running"}, {"why", "no stats file yet"}};
  page = report::html_page(*in, "window.Chart = function () {};");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_EQ(page->find("id=tb-congestion-tree"), std::string::npos);
  EXPECT_NE(page->find("not drawn: no counts (no stats file yet)"), std::string::npos);
}

}  // namespace
}  // namespace tb
