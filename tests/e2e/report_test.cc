// HTML reports in a real browser: reports of a real bench, verify and run on mini are opened by
// headless Chromium (Debian's chromium); each test fails on any script error, a chart that did
// not draw (no series, or an empty canvas), or a topology without its nodes and edges. One
// report is made again from a copy of the run's results directory with the lab gone.
// Screenshots are kept in the build directory's artifacts/ (ctest runs there).
#include <filesystem>
#include <fstream>
#include <regex>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

namespace fs = std::filesystem;

struct Page {
  int charts_drawn = -1, errors = -1;
  std::vector<std::pair<int, long>> canvases;  // data-series, data-painted of each canvas
  int svg_nodes = 0, svg_edges = 0, red_edges = 0;
  std::string dom;
};

int attr(const std::string& tag, const std::string& name) {
  std::smatch m;
  if (std::regex_search(tag, m, std::regex(name + "=\"(-?\\d+)\""))) return std::stoi(m[1]);
  return -1;
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

// Opens `html` in headless Chromium: the DOM after its scripts ran, and a screenshot.
Page open_in_chromium(const std::string& html, const std::string& shot_name) {
  Page p;
  char t[] = "/tmp/tb-e2e-chromium-XXXXXX";
  const std::string profile = ::mkdtemp(t);
  const std::string base =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu "
      "--no-first-run --user-data-dir=" +
      profile;
  auto dom = sh(base + " --dump-dom file://" + html + " 2>/dev/null");
  p.dom = dom.out;
  const fs::path shots = fs::current_path() / "artifacts";
  fs::create_directories(shots);
  sh(base + " --window-size=1200,2600 --screenshot=" + (shots / shot_name).string() + " file://" +
     html + " >/dev/null 2>&1");
  fs::remove_all(profile);
  std::smatch m;
  if (std::regex_search(p.dom, m, std::regex("<body[^>]*>"))) {
    const std::string body = m[0];
    p.charts_drawn = attr(body, "data-charts-drawn");
    p.errors = attr(body, "data-errors");
  }
  const std::regex canvas("<canvas[^>]*>");
  for (auto it = std::sregex_iterator(p.dom.begin(), p.dom.end(), canvas);
       it != std::sregex_iterator(); ++it) {
    const std::string tag = (*it)[0];
    p.canvases.push_back({attr(tag, "data-series"), attr(tag, "data-painted")});
  }
  p.svg_nodes = static_cast<int>(count(p.dom, "class=\"node\""));
  p.svg_edges = static_cast<int>(count(p.dom, "class=\"edge\""));
  // Graphviz draws a red edge's path with stroke="red".
  p.red_edges = static_cast<int>(count(p.dom, "stroke=\"red\" stroke-width=\"3\""));
  return p;
}

// Every chart drew: as many as the page has canvases, each with series and painted pixels.
void expect_drawn(const Page& p, size_t charts) {
  EXPECT_EQ(p.errors, 0) << p.dom.substr(0, 4000);
  EXPECT_EQ(p.charts_drawn, static_cast<int>(charts));
  ASSERT_EQ(p.canvases.size(), charts);
  for (const auto& [series, painted] : p.canvases) {
    EXPECT_GT(series, 0);
    EXPECT_GT(painted, 1000) << "a canvas stayed (almost) empty";
  }
}

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
    if (sh("command -v chromium").rc != 0)
      GTEST_SKIP() << "no chromium (Debian: apt install chromium; scripts/setup installs it)";
  }
  static CmdResult tb(const std::string& args) {
    return sh("TESTBEDCTL_RESULTS_DIR=" + results_ + " " + tbctl() + " " + args + " 2>&1");
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

TEST_F(Report, ARunsReportShowsTheFaultAndIsMadeAgainFromACopyWithTheLabGone) {
  const std::string lab = unique_lab("rr");
  LabGuard guard(lab);
  std::ifstream in(scenario("mini.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text += R"(
[[fault]]
at = "1s"
kind = "link-down"
a = "dc/s1/g1"
b = "dc/tor0"
for = "800ms"
)";
  const std::string path = results_ + "/run.toml";
  std::ofstream(path) << text;
  auto r = tb("run " + path + " --name " + lab + " --down");
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

}  // namespace
}  // namespace tb::e2e
