// HTML reports in a real browser: reports of a real bench, verify, train and run on mini are opened
// by headless Chromium (Debian's chromium); each test fails on any script error, a chart that did
// not draw (no series, or an empty canvas), or a topology without its nodes and edges. One
// report is made again from a copy of the run's results directory with the lab gone.
// Screenshots are kept in the build directory's artifacts/ (browser.h).
#include <filesystem>
#include <fstream>
#include <regex>

#include "browser.h"

namespace tb::e2e {
namespace {

namespace fs = std::filesystem;

std::string find_file(const std::string& root, const std::string& name) {
  for (const auto& e : fs::recursive_directory_iterator(root))
    if (e.path().filename() == name) return e.path().string();
  return {};
}

class Report : public SharedMiniLab<Report> {
 protected:
  static void SetUpTestSuite() { up_shared("rp", "report"); }
  void SetUp() override {
    SharedMiniLab<Report>::SetUp();
    if (!have_chromium())
      GTEST_SKIP() << "no chromium (Debian: apt install chromium; scripts/setup --with tests)";
  }
  static CmdResult tb(const std::string& args) {
    return sh("TESTBEDCTL_RESULTS_DIR=" + results_ + " " + tbctl() + " " + args + " 2>&1");
  }
  // `run --down` of mini with `extra` appended to its scenario (written to results_/FILE).
  static CmdResult run_mini_with(const std::string& lab, const std::string& extra,
                                 const std::string& file) {
    std::ifstream in(scenario("mini.toml"));
    std::string text((std::istreambuf_iterator<char>(in)), {});
    const std::string path = results_ + "/" + file;
    std::ofstream(path) << text + extra;
    return tb("run " + path + " --name " + lab + " --down");
  }
};

TEST_F(Report, ABenchsReportDrawsItsCurveAndTheTopology) {
  auto r = tb("bench " + lab_ + " allreduce -b 64K -e 1M -n 3 -w 1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_NE(r.out.find("report: "), std::string::npos) << r.out;
  const std::string html = find_file(results_ + "/" + lab_, "report.html");
  ASSERT_FALSE(html.empty()) << r.out;
  EXPECT_TRUE(fs::exists(fs::path(html).parent_path() / "topology.json"));
  const auto p = open_in_chromium(html, "bench-report.png");
  expect_drawn(p, 2);  // busbw (with the bottleneck line), #wrong
  EXPECT_EQ(p.canvases[0].first, 2) << "busbw and the bottleneck rate";
  EXPECT_EQ(p.svg_nodes, 9);  // mini: 4 GPUs, 2 servers, a ToR, the VPC, the transit router
  EXPECT_EQ(p.svg_edges, 11);

  // A second bench with another algorithm; `report DIR DIR` draws both curves on one page.
  r = tb("bench " + lab_ + " allreduce -b 64K -e 1M -n 3 -w 1 --algo tree");
  ASSERT_EQ(r.rc, 0) << r.out;
  std::vector<std::string> dirs;
  for (const auto& e : fs::recursive_directory_iterator(results_ + "/" + lab_))
    if (e.path().filename() == "bench.json") dirs.push_back(e.path().parent_path().string());
  ASSERT_EQ(dirs.size(), 2u);
  const std::string compare = results_ + "/compare.html";
  auto c = sh(tbctl() + " report " + dirs[0] + " " + dirs[1] + " -o " + compare + " 2>&1");
  ASSERT_EQ(c.rc, 0) << c.out;
  const auto q = open_in_chromium(compare, "bench-compare.png");
  expect_drawn(q, 2);
  EXPECT_EQ(q.canvases[0].first, 3) << "two busbw curves and the bottleneck rate";
  EXPECT_EQ(q.canvases[1].first, 2) << "#wrong of each";
}

TEST_F(Report, VerifyHtmlDrawsEachCheckAgainstItsBand) {
  const std::string html = results_ + "/verify.html";
  auto r = tb("verify " + lab_ + " --quick --link dc/s0/g0 dc/tor0 --html " + html);
  // Exit 1 would be a check out of tolerance on a loaded host: the page is still made.
  ASSERT_TRUE(r.rc == 0 || r.rc == 1) << r.out;
  ASSERT_TRUE(fs::exists(html)) << r.out;
  const auto p = open_in_chromium(html, "verify-report.png");
  ASSERT_GE(p.canvases.size(), 2u);  // at least rate and delay
  expect_drawn(p, p.canvases.size());
  EXPECT_EQ(p.svg_nodes, 9);
}

TEST_F(Report, TrainsReportDrawsEfficiencySamplesAndTheStepBreakdown) {
  auto r = tb("train " + lab_ +
              " --servers 1,2 --params 1000000 --compute 5ms --steps 2 --warmup 0 --timeout 120");
  ASSERT_EQ(r.rc, 0) << r.out;
  const auto at = r.out.find("train: report in ");
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string html = r.out.substr(at + 17, r.out.find('\n', at) - at - 17);
  ASSERT_TRUE(fs::exists(html)) << html;
  EXPECT_TRUE(fs::exists(fs::path(html).parent_path() / "train.json"));
  const auto p = open_in_chromium(html, "train-report.png");
  expect_drawn(p, 3);  // efficiency, samples/s, step breakdown
  EXPECT_EQ(p.canvases[0].first, 2) << "the curve and the 100% line";
  EXPECT_EQ(p.svg_nodes, 9);
  EXPECT_NE(p.dom.find("<td>2</td>"), std::string::npos) << "a row for 2 servers";
  // `report DIR` makes it again from the directory.
  auto again = sh(tbctl() + " report " + fs::path(html).parent_path().string() + " -o " + results_ +
                  "/train-again.html 2>&1");
  ASSERT_EQ(again.rc, 0) << again.out;
  expect_drawn(open_in_chromium(results_ + "/train-again.html", "train-report-again.png"), 3);
}

TEST_F(Report, ARunsReportShowsTheFaultAndIsMadeAgainFromACopyWithTheLabGone) {
  const std::string lab = unique_lab("rr");
  LabGuard guard(lab);
  auto r = run_mini_with(lab, R"(
[[fault]]
at = "1s"
kind = "link-down"
a = "dc/s1/g1"
b = "dc/tor0"
for = "800ms"
)",
                         "run.toml");
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string html = find_file(results_ + "/" + lab, "report.html");
  ASSERT_FALSE(html.empty()) << r.out;
  EXPECT_NE(r.out.find("report: " + html), std::string::npos) << r.out;
  auto p = open_in_chromium(html, "run-report.png");
  expect_drawn(p, 2);  // throughput over time, probe outages
  EXPECT_EQ(p.svg_nodes, 9);
  EXPECT_EQ(p.red_edges, 1) << "the faulted link is drawn red";

  // The lab is down: a copy of the results directory gives the same report.
  ASSERT_TRUE(marked_netns(lab).empty());
  const std::string copy = results_ + "/copied";
  fs::copy(fs::path(html).parent_path(), copy, fs::copy_options::recursive);
  auto again = sh(tbctl() + " report " + copy + " -o " + copy + "/again.html 2>&1");
  ASSERT_EQ(again.rc, 0) << again.out;
  p = open_in_chromium(copy + "/again.html", "run-report-again.png");
  expect_drawn(p, 2);
  EXPECT_EQ(p.svg_edges, 11);
  EXPECT_EQ(p.red_edges, 1);
  // Bad input: exit 2 naming what would be valid.
  auto bad = sh(tbctl() + " report " + results_ + "/nothing-here 2>&1");
  EXPECT_EQ(bad.rc, 2) << bad.out;
  EXPECT_NE(bad.out.find("does not exist"), std::string::npos) << bad.out;
}

// A pfc-storm on mini's lossless rail (issue 32 P9): the ring's rail hop into dc/s1/g0 backs up
// at the stormed ToR port until the PFC watchdog lets it go; the run's report draws the
// congestion tree (that port, with its watchdog trip, and the queues its XOFF paused) and the
// pause timeline (the storm's window, the watchdog's detection, the episodes), and Chromium
// draws every chart.
TEST_F(Report, ARunsReportDrawsTheCongestionTreeAndTimelineOfAPfcStorm) {
  const std::string lab = unique_lab("rc");
  LabGuard guard(lab);
  auto r = run_mini_with(lab, R"(
[[fault]]
at = "1s"
kind = "pfc-storm"
node = "dc/s1/g0"
for = "1s"
)",
                         "storm.toml");
  ASSERT_EQ(r.rc, 0) << r.out;
  const std::string html = find_file(results_ + "/" + lab, "report.html");
  ASSERT_FALSE(html.empty()) << r.out;
  EXPECT_TRUE(fs::exists(fs::path(html).parent_path() / "congestion.jsonl")) << r.out;
  const auto p = open_in_chromium(html, "congestion-run-report.png");
  expect_drawn(p, p.canvases.size());
  EXPECT_NE(p.dom.find("<canvas id=\"run-congestion\""), std::string::npos);
  EXPECT_EQ(p.svg_nodes, 9);  // the topology's, apart from the tree's
  ASSERT_GE(p.tree_nodes, 1) << p.dom.substr(0, 6000);
  const auto tree = p.dom.find("id=\"tb-congestion-tree\"");
  const std::string t = p.dom.substr(tree, p.dom.find("</div>", tree) - tree);
  EXPECT_NE(t.find("dc/tor0:s1g0"), std::string::npos) << t;
  EXPECT_NE(t.find("PFC watchdog: "), std::string::npos) << t;  // one trip or more in 1 s
  EXPECT_NE(p.dom.find("fault 0: pfc-storm"), std::string::npos);
}

}  // namespace
}  // namespace tb::e2e
