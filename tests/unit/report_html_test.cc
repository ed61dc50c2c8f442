// HTML reports (report/html.h): the charts' configurations built from a run's, a bench's and
// verify's JSON, the topology's dot and SVG, the page, and bad input. The browser test
// (tests/e2e/report_test.cc) checks that Chromium draws them.
#include "report/html.h"

#include <gtest/gtest.h>

#include <fstream>

#include "plan/plan.h"
#include "scenario/loader.h"
#include "temp_dir.h"

namespace tb {
namespace {

using nlohmann::json;

plan::Topology mini_topology() {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/mini.toml");
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  return p->topo;
}

// A run of 10 iterations of 1 MiB, 0.1 s each, with one fault from 0.3 s to 0.6 s.
report::ReportInput a_run() {
  report::ReportInput in;
  in.kind = report::ReportKind::kRun;
  const int64_t t0 = 1'000'000'000;
  in.doc = {{"lab", "mini"},
            {"t0_ns", t0},
            {"t_end_ns", t0 + 1'000'000'000},
            {"probe_interval_us", 5000},
            {"measured", "CLOCK_MONOTONIC throughout"},
            {"probes", json::array({{{"from", "dc/s0/g0"}, {"to", "dc/s1/g0"}}})},
            {"expect", json::array()},
            {"recovery",
             {{"baseline_iter_ms", 100.0},
              {"faults", json::array({{{"fault", 0},
                                       {"target", "link-down dc/s1/g1:rail <-> dc/tor0:s1g1"},
                                       {"inject_ns", t0 + 300'000'000},
                                       {"revert_ns", t0 + 600'000'000},
                                       {"detection_ms", 8.5},
                                       {"reroute_ms", nullptr},
                                       {"outage_ms", 300.0},
                                       {"outage_end_ns", t0 + 600'000'000},
                                       {"stall_ms", 320.0}}})}}}};
  for (int i = 0; i < 10; ++i)
    in.events.push_back({{"event", "iteration"},
                         {"iter", i},
                         {"start_ns", t0 + i * 100'000'000},
                         {"t_mono_ns", t0 + (i + 1) * 100'000'000}});
  in.events.push_back({{"event", "probe_outage"},
                       {"from", "dc/s0/g0"},
                       {"to", "dc/s1/g0"},
                       {"t_mono_ns", t0 + 300'000'000},
                       {"end_ns", t0 + 600'000'000}});
  in.workload_job = {{"bench", {{"min_bytes", 1 << 20}, {"max_bytes", 1 << 20}}}};
  return in;
}

TEST(ReportHtml, RunChartsPlotEveryIterationShadeEachFaultAndMarkItsDetection) {
  const auto charts = report::run_charts(a_run());
  ASSERT_EQ(charts.size(), 2u);
  const auto& ds = charts[0].config["data"]["datasets"];
  ASSERT_EQ(ds.size(), 5u);  // iterations, one fault band, detected, rerouted, recovered
  ASSERT_EQ(ds[0]["data"].size(), 20u);  // each iteration a level from its start to its end
  // 1 MiB × 8 in 0.1 s = 0.0839 Gbit/s, from 0.0 to 0.1 s.
  EXPECT_NEAR(ds[0]["data"][0]["y"].get<double>(), 1048576 * 8 / 0.1 / 1e9, 1e-9);
  EXPECT_NEAR(ds[0]["data"][1]["y"].get<double>(), 1048576 * 8 / 0.1 / 1e9, 1e-9);
  EXPECT_NEAR(ds[0]["data"][0]["x"].get<double>(), 0.0, 1e-9);
  EXPECT_NEAR(ds[0]["data"][1]["x"].get<double>(), 0.1, 1e-9);
  EXPECT_NEAR(ds[1]["data"][0]["x"].get<double>(), 0.3, 1e-9);
  EXPECT_NEAR(ds[1]["data"][1]["x"].get<double>(), 0.6, 1e-9);
  EXPECT_EQ(ds[1]["fill"], "origin");
  ASSERT_EQ(ds[2]["data"].size(), 1u);  // detected 8.5 ms after injection
  EXPECT_NEAR(ds[2]["data"][0]["x"].get<double>(), 0.3085, 1e-9);
  EXPECT_TRUE(ds[3]["data"].empty());   // no reroute
  ASSERT_EQ(ds[4]["data"].size(), 1u);  // probes through again at 0.6 s
  EXPECT_NEAR(ds[4]["data"][0]["x"].get<double>(), 0.6, 1e-9);
  EXPECT_NE(charts[0].method.find("1M bytes"), std::string::npos) << charts[0].method;
  // The probe chart: the path drops to 0 for the outage's span.
  const auto& probe = charts[1].config["data"]["datasets"][0]["data"];
  bool down_at_04 = false;
  for (size_t i = 0; i + 1 < probe.size(); ++i)
    if (probe[i]["y"] == 0 && probe[i + 1]["y"] == 0 && probe[i]["x"].get<double>() <= 0.4 &&
        probe[i + 1]["x"].get<double>() >= 0.4)
      down_at_04 = true;
  EXPECT_TRUE(down_at_04) << probe.dump();
}

TEST(ReportHtml, ATrainingRunPlotsSamplesPerSecondAndACheckpointItsReplications) {
  auto in = a_run();
  // 8 ranks, tp 2, pp 1: 4 data-parallel groups × 2 micro-batches × 4 samples = 32 per step.
  in.workload_job = {{"ranks", json::array({0, 1, 2, 3, 4, 5, 6, 7})},
                     {"bench", {{"min_bytes", 1 << 20}, {"max_bytes", 1 << 20}}},
                     {"training", {{"tp", 2}, {"pp", 1}, {"micro_batches", 2}, {"samples", 4}}}};
  const int64_t t0 = in.doc["t0_ns"];
  in.doc["checkpoints"] = json::array(
      {{{"workload", "ckpt"},
        {"from", "hz"},
        {"to", "bj"},
        {"mode", "full"},
        {"qos", "bronze"},
        {"wan", "hz/tr <-> bj/tr"},
        {"wan_bps", 100e6},
        {"real_bytes", 1 << 30},
        {"emulated_bytes", 1 << 20},
        {"measured", "CLOCK_MONOTONIC in run"},
        {"replications", json::array({{{"rep", 0},
                                       {"full", true},
                                       {"payload_bytes", 5'000'000},
                                       {"seconds", 0.5},
                                       {"wan_utilisation", 0.8},
                                       {"ok", true},
                                       {"on_time", true},
                                       {"due_ns", t0 + 100'000'000},
                                       {"start_ns", t0 + 100'000'000},
                                       {"end_ns", t0 + 600'000'000},
                                       {"error", ""}},
                                      {{"rep", 1},
                                       {"full", false},
                                       {"payload_bytes", 0},
                                       {"seconds", 0.0},
                                       {"ok", false},
                                       {"on_time", false},
                                       {"due_ns", t0 + 900'000'000},
                                       {"start_ns", 0},
                                       {"end_ns", 0},
                                       {"error", "unfinished when the run ended"}}})}}});
  const auto charts = report::run_charts(in);
  ASSERT_EQ(charts.size(), 3u);
  const auto& it = charts[0].config["data"]["datasets"][0]["data"];
  EXPECT_NEAR(it[0]["y"].get<double>(), 32 / 0.1, 1e-6);  // 32 samples in 0.1 s
  EXPECT_EQ(charts[0].config["options"]["scales"]["y"]["title"]["text"], "samples/s (training)");
  EXPECT_NE(charts[0].method.find("32"), std::string::npos) << charts[0].method;
  EXPECT_EQ(charts[2].id, "run-checkpoint-0");
  const auto& ck = charts[2].config["data"]["datasets"];
  // 5 MB × 8 in 0.5 s = 80 Mbit/s from 0.1 s to 0.6 s; the unfinished one draws nothing.
  ASSERT_EQ(ck[0]["data"].size(), 4u);
  EXPECT_NEAR(ck[0]["data"][1]["y"].get<double>(), 80.0, 1e-9);
  EXPECT_NEAR(ck[0]["data"][1]["x"].get<double>(), 0.1, 1e-9);
  EXPECT_NEAR(ck[0]["data"][2]["x"].get<double>(), 0.6, 1e-9);
  EXPECT_NEAR(ck[1]["data"][0]["y"].get<double>(), 100.0, 1e-9);  // the WAN's 100 Mbit/s
  EXPECT_EQ(ck[2]["data"].size(), 2u);                            // both due marks
  in.doc["expect"] =
      json::array({{{"name", "max_stall_ms"},
                    {"limit", 500},
                    {"measured", 120.3},
                    {"ok", true},
                    {"text", "max_stall_ms = 500: measured 120.3"}},
                   {{"name", "checkpoint_on_time"},
                    {"limit", 0},
                    {"measured", nullptr},
                    {"ok", false},
                    {"text", "checkpoint_on_time = true: 1 of 2 replication(s) late"}}});
  auto page = report::html_page(in, "window.Chart = function () {};");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_NE(page->find("<td>max_stall_ms</td><td>500.0</td><td>120.3</td><td>ok</td>"),
            std::string::npos);
  EXPECT_NE(page->find("<td>checkpoint_on_time</td><td>0.0</td><td>-</td><td>FAILED</td>"),
            std::string::npos);
  EXPECT_NE(page->find("Checkpoint ckpt (hz → bj, full mode"), std::string::npos);
  EXPECT_NE(page->find("unfinished when the run ended"), std::string::npos);
  EXPECT_NE(page->find("<td>LATE</td>"), std::string::npos);
  // A run with only the checkpoint (no workload job, no iterations) draws no throughput chart.
  in.workload_job = nullptr;
  std::erase_if(in.events, [](const json& e) { return e["event"] == "iteration"; });
  const auto only = report::run_charts(in);
  ASSERT_EQ(only.size(), 2u);
  EXPECT_EQ(only[0].id, "run-probes");
}

json a_train_curve(const std::string& label, double sps1, bool host_bound_at_4) {
  json rows = json::array();
  for (int n : {1, 2, 4}) {
    const double sps = sps1 * n * (n == 1 ? 1.0 : 0.9);
    rows.push_back({{"servers", n},
                    {"ranks", 8 * n},
                    {"tp", 8},
                    {"pp", 1},
                    {"dp", n},
                    {"steps", 5},
                    {"step_ms", 100.0},
                    {"compute_ms", 80.0},
                    {"exposed_ms", 20.0},
                    {"samples_per_s", sps},
                    {"efficiency", n == 1 ? 1.0 : 0.9},
                    {"wrong", 0},
                    {"host", {{"text", n == 4 && host_bound_at_4 ? "CPUs 97% busy" : "quiet"}}},
                    {"host_bound", n == 4 && host_bound_at_4},
                    {"errors", json::array()}});
  }
  return {{"label", label},
          {"lab", "vh"},
          {"scenario", "scenarios/vpc-vs-hpn.toml"},
          {"shaping", "tbf+stage"},
          {"transport", "tcp"},
          {"tier", label == "vh/vpc" ? "frontend" : "rail"},
          {"model", {{"params", 1300000}}},
          {"compute_real_ns", 80'000'000},
          {"compute_scale", 1.0},
          {"efficiency_base_servers", 1},
          {"method", "per step the slowest rank's step time"},
          {"rows", rows},
          {"errors", json::array()},
          {"ok", true}};
}

TEST(ReportHtml, TrainChartsOneCurvePerResultWithHostBoundRowsMarked) {
  report::ReportInput in;
  in.kind = report::ReportKind::kTrain;
  in.doc = json::array({a_train_curve("vh/vpc", 10, false), a_train_curve("vh/hpn", 20, true)});
  const auto charts = report::train_charts(in);
  ASSERT_EQ(charts.size(), 3u);
  const auto& eff = charts[0].config["data"]["datasets"];
  ASSERT_EQ(eff.size(), 3u);  // two curves and the 100% line
  EXPECT_EQ(eff[0]["label"], "vh/vpc");
  EXPECT_NEAR(eff[1]["data"][2]["y"].get<double>(), 90.0, 1e-9);
  EXPECT_EQ(eff[1]["pointStyle"][2], "crossRot");  // hpn at 4 servers was host-bound
  EXPECT_EQ(eff[0]["pointStyle"][2], "circle");
  EXPECT_NE(charts[0].method.find("host-bound"), std::string::npos);
  // samples/s: each curve and its linear line from 1 server (hpn: 20, 40, 80).
  const auto& sps = charts[1].config["data"]["datasets"];
  ASSERT_EQ(sps.size(), 4u);
  EXPECT_NEAR(sps[3]["data"][2]["y"].get<double>(), 80.0, 1e-9);
  const auto& bars = charts[2].config["data"];
  EXPECT_EQ(bars["labels"].size(), 6u);
  EXPECT_EQ(bars["labels"][5], "vh/hpn, 4 servers (host-bound)");
  auto page = report::html_page(in, "window.Chart = function () {};");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_NE(page->find("HOST-BOUND: CPUs 97% busy"), std::string::npos);
  EXPECT_NE(page->find("testbedctl train — vh"), std::string::npos);
}

TEST(ReportHtml, TrainResultsAreReadFromTheirDirectoryOrTheirJsonFile) {
  testing_util::TempDir dir;
  std::ofstream(dir.path() + "/train.json") << a_train_curve("vh/hpn", 20, false).dump();
  auto one = report::read_report_input(dir.path());
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_EQ(one->kind, report::ReportKind::kTrain);
  EXPECT_EQ(one->doc.size(), 1u);
  // train-all.json (every curve of one `train` call) wins over the directory's own curve.
  std::ofstream(dir.path() + "/train-all.json")
      << json::array({a_train_curve("vh/vpc", 10, false), a_train_curve("vh/hpn", 20, false)})
             .dump();
  auto all = report::read_report_input(dir.path());
  ASSERT_TRUE(all) << all.error().message;
  EXPECT_EQ(all->doc.size(), 2u);
  auto file = report::read_report_input(dir.path() + "/train-all.json");
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_EQ(file->kind, report::ReportKind::kTrain);
}

TEST(ReportHtml, BenchChartDrawsTheBottleneckRateOfTheTierTheRanksCross) {
  report::ReportInput in;
  in.kind = report::ReportKind::kBench;
  in.topo = mini_topology();
  in.doc = {{"lab", "mini"},
            {"collective", "allreduce"},
            {"algo", "ring"},
            {"impl", "native"},
            {"nranks", 4},
            {"ranks", {"dc/s0/g0", "dc/s0/g1", "dc/s1/g0", "dc/s1/g1"}},
            {"rows", json::array({{{"size_bytes", 65536}, {"busbw_gbit", 0.2}, {"wrong", 0}},
                                  {{"size_bytes", 1048576}, {"busbw_gbit", 0.35}, {"wrong", 3}}})}};
  double rail = 0;
  for (const auto& l : in.topo->links)
    if (l.tier == plan::Tier::kScaleOut) rail = l.emulated.rate.bps;
  ASSERT_GT(rail, 0);
  const auto charts = report::bench_charts(in);
  ASSERT_EQ(charts.size(), 2u);
  const auto& ds = charts[0].config["data"]["datasets"];
  ASSERT_EQ(ds.size(), 2u);
  EXPECT_EQ(ds[0]["data"].size(), 2u);
  EXPECT_NEAR(ds[1]["data"][0]["y"].get<double>(), rail / 1e9, 1e-9);
  EXPECT_NE(charts[0].method.find("scale-out"), std::string::npos) << charts[0].method;
  EXPECT_EQ(charts[1].config["data"]["datasets"][0]["data"][1]["y"], 3);
  // Two GPUs of one server: the scale-up tier is the bottleneck.
  in.doc["ranks"] = {"dc/s0/g0", "dc/s0/g1"};
  EXPECT_NE(report::bench_charts(in)[0].method.find("scale-up"), std::string::npos);
  // Without topology.json there is no line, and the method says why.
  in.topo.reset();
  const auto bare = report::bench_charts(in);
  EXPECT_EQ(bare[0].config["data"]["datasets"].size(), 1u);
  EXPECT_NE(bare[0].method.find("no bottleneck line"), std::string::npos);
}

TEST(ReportHtml, SeveralBenchesAreDrawnSideBySideAndOtherKindsAreNotMixed) {
  testing_util::TempDir dir;
  auto bench = [&](const std::string& name, const std::string& algo, double bw) {
    const std::string d = dir.path() + "/" + name;
    std::filesystem::create_directories(d);
    std::ofstream(d + "/bench.json")
        << json({{"lab", "mini"},
                 {"collective", "allreduce"},
                 {"algo", algo},
                 {"impl", "native"},
                 {"nranks", 4},
                 {"ranks", {"dc/s0/g0", "dc/s0/g1", "dc/s1/g0", "dc/s1/g1"}},
                 {"measured", "CLOCK_MONOTONIC"},
                 {"rows",
                  json::array({{{"size_bytes", 65536}, {"busbw_gbit", bw}, {"wrong", 0}},
                               {{"size_bytes", 1048576}, {"busbw_gbit", bw}, {"wrong", 0}}})}})
               .dump();
    return d;
  };
  const auto ring = bench("ring", "ring", 0.3), tree = bench("tree", "tree", 0.2);
  auto in = report::read_report_inputs({ring, tree});
  ASSERT_TRUE(in) << in.error().message;
  ASSERT_EQ(in->compared.size(), 1u);
  const auto charts = report::bench_charts(*in);
  const auto& ds = charts[0].config["data"]["datasets"];
  ASSERT_EQ(ds.size(), 2u);  // no topology.json: no bottleneck line
  EXPECT_NE(ds[0]["label"].get<std::string>().find("ring"), std::string::npos);
  EXPECT_NE(ds[1]["label"].get<std::string>().find("tree"), std::string::npos);
  EXPECT_NEAR(ds[1]["data"][0]["y"].get<double>(), 0.2, 1e-9);
  EXPECT_EQ(charts[1].config["data"]["datasets"].size(), 2u);  // #wrong per bench
  ::setenv("TESTBEDCTL_CHART_JS", (dir.path() + "/chart.js").c_str(), 1);
  std::ofstream(dir.path() + "/chart.js") << "window.Chart = function () {};";
  auto out = report::write_html_report(std::vector<std::string>{ring, tree}, "");
  ::unsetenv("TESTBEDCTL_CHART_JS");
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, ring + "/compare.html");
  // A run beside a bench: exit 2 naming both.
  std::filesystem::create_directories(dir.path() + "/run");
  std::ofstream(dir.path() + "/run/summary.json") << a_run().doc.dump();
  auto mixed = report::read_report_inputs({ring, dir.path() + "/run"});
  ASSERT_FALSE(mixed);
  EXPECT_EQ(mixed.error().exit_code, 2);
  EXPECT_NE(mixed.error().message.find("one kind"), std::string::npos) << mixed.error().message;
  auto runs = report::read_report_inputs({dir.path() + "/run", ring});
  ASSERT_FALSE(runs);
  EXPECT_NE(runs.error().message.find("all benches"), std::string::npos) << runs.error().message;
}

TEST(ReportHtml, VerifyChartsOnePerCheckWithTheToleranceBand) {
  report::ReportInput in;
  in.kind = report::ReportKind::kVerify;
  auto check = [](const char* name, const char* unit, double conf, double got, double lo,
                  double hi) {
    return json{{"check", name}, {"unit", unit}, {"configured", conf}, {"achieved", got},
                {"low", lo},     {"high", hi},   {"verdict", "pass"}};
  };
  in.doc = {{"lab", "mini"},
            {"classes",
             json::array({{{"class", "scale-out/hpn"},
                           {"checks", json::array({check("rate", "bit/s", 4e8, 3.9e8, 3.6e8, 4.2e8),
                                                   check("delay", "ms", 0.01, 0.012, 0, 0.05)})}},
                          {{"class", "uplink/vpc"},
                           {"checks",
                            json::array({check("rate", "bit/s", 2.5e7, 2.4e7, 2.2e7, 2.6e7)})}}})},
            {"paths", json::array({{{"label", "s0 -> s1"},
                                    {"expected_rtt_ms", 1.0},
                                    {"measured_rtt_ms", 1.02},
                                    {"tolerance_ms", 0.1}}})}};
  const auto charts = report::verify_charts(in);
  ASSERT_EQ(charts.size(), 3u);  // rate, delay, paths
  EXPECT_EQ(charts[0].id, "verify-rate");
  const auto& rate = charts[0].config;
  EXPECT_EQ(rate["data"]["labels"].size(), 2u);
  EXPECT_EQ(rate["data"]["datasets"][0]["data"][0], json::array({360.0, 420.0}));  // Mbit/s
  EXPECT_EQ(rate["data"]["datasets"][2]["data"][1], 24.0);
  EXPECT_EQ(charts[1].config["data"]["labels"].size(), 1u);
  EXPECT_EQ(charts[2].id, "verify-paths");
  EXPECT_EQ(charts[2].config["data"]["datasets"][0]["data"][0], json::array({0.9, 1.1}));
}

TEST(ReportHtml, TopologyColoursTiersLabelsDelaysAndMarksTheFaultedLinkRed) {
  const auto topo = mini_topology();
  const std::string dot =
      report::report_dot("mini", topo, {"link-down dc/s1/g1:rail <-> dc/tor0:s1g1"});
  EXPECT_NE(dot.find("subgraph \"cluster_dc\""), std::string::npos);
  EXPECT_NE(dot.find("\"dc/s1/g1\" -- \"dc/tor0\" [label=\"scale-out"), std::string::npos) << dot;
  size_t red = 0;
  for (size_t at = 0;
       (at = dot.find("color=red, penwidth=3, style=dashed", at)) != std::string::npos; ++at)
    ++red;
  EXPECT_EQ(red, 1u) << dot;
  auto svg = report::dot_to_svg(dot);
  ASSERT_TRUE(svg) << svg.error().message;
  EXPECT_EQ(svg->rfind("<svg", 0), 0u);
  size_t nodes = 0, edges = 0;
  for (size_t at = 0; (at = svg->find("class=\"node\"", at)) != std::string::npos; ++at) ++nodes;
  for (size_t at = 0; (at = svg->find("class=\"edge\"", at)) != std::string::npos; ++at) ++edges;
  EXPECT_EQ(nodes, topo.nodes.size());
  EXPECT_EQ(edges, topo.links.size());
  EXPECT_FALSE(report::dot_to_svg("graph {").has_value());
}

TEST(ReportHtml, PageInlinesTheLibraryAndNothingInItsDataClosesTheScript) {
  auto in = a_run();
  in.doc["recovery"]["faults"][0]["target"] = "link-down </script><b>x";
  auto page = report::html_page(in, "/* chart library */ window.Chart = function () {};");
  ASSERT_TRUE(page) << page.error().message;
  EXPECT_NE(page->find("/* chart library */"), std::string::npos);
  EXPECT_NE(page->find("<canvas id=\"run-throughput\">"), std::string::npos);
  EXPECT_NE(page->find("<canvas id=\"run-probes\">"), std::string::npos);
  EXPECT_EQ(page->find("</script><b>"), std::string::npos);
  EXPECT_NE(page->find("CLOCK_MONOTONIC throughout"), std::string::npos);  // the method line
  EXPECT_NE(page->find("Recovery (ms)"), std::string::npos);
}

TEST(ReportHtml, BadInputNamesThePathAndWhatWouldBeValid) {
  testing_util::TempDir dir;
  auto missing = report::read_report_input(dir.path() + "/nope");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().exit_code, 2);
  EXPECT_NE(missing.error().message.find("does not exist"), std::string::npos);
  auto empty = report::read_report_input(dir.path());
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().exit_code, 2);
  EXPECT_NE(empty.error().message.find("summary.json"), std::string::npos);
  std::ofstream(dir.path() + "/x.json") << "{\"a\": 1}";
  auto other = report::read_report_input(dir.path() + "/x.json");
  ASSERT_FALSE(other);
  EXPECT_NE(other.error().message.find("verify --json"), std::string::npos);
  std::ofstream(dir.path() + "/bad.json") << "{";
  auto bad = report::read_report_input(dir.path() + "/bad.json");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("not valid JSON"), std::string::npos);
}

TEST(ReportHtml, AResultsDirectoryGivesItsReportWithTheTopologySavedBeside) {
  testing_util::TempDir dir;
  const auto run = a_run();
  std::ofstream(dir.path() + "/summary.json") << run.doc.dump();
  {
    std::ofstream ev(dir.path() + "/events.jsonl");
    for (const auto& e : run.events) ev << e.dump() << "\n";
  }
  const auto topo = mini_topology();
  ::setenv("TESTBEDCTL_CHART_JS", (dir.path() + "/chart.js").c_str(), 1);
  std::ofstream(dir.path() + "/chart.js") << "window.Chart = function () {};";
  auto out = report::write_html_report(dir.path(), "", &topo);
  ::unsetenv("TESTBEDCTL_CHART_JS");
  ASSERT_TRUE(out) << out.error().message;
  EXPECT_EQ(*out, dir.path() + "/report.html");
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/topology.json"));
  // Read back alone (as on another machine): the topology comes from topology.json.
  auto again = report::read_report_input(dir.path());
  ASSERT_TRUE(again) << again.error().message;
  ASSERT_TRUE(again->topo.has_value());
  EXPECT_EQ(again->topo->links.size(), topo.links.size());
  std::ifstream page(*out);
  std::string text((std::istreambuf_iterator<char>(page)), {});
  EXPECT_NE(text.find("id=tb-topology"), std::string::npos);
}

}  // namespace
}  // namespace tb
