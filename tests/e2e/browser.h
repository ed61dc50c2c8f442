// Headless Chromium (Debian's chromium) for the e2e tests that check pictures: open an HTML
// report and read back what its scripts drew (report/html.cc records it on <body> and on each
// canvas), and screenshot a page. Screenshots go to the build directory's artifacts/
// (TB_BINARY_DIR, wherever the test binary is run from).
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <utility>
#include <vector>

#include "e2e_util.h"

namespace tb::e2e {

inline bool have_chromium() {
  return sh("command -v chromium").rc == 0;
}

struct Page {
  int charts_drawn = -1, errors = -1;
  std::vector<std::pair<int, long>> canvases;       // data-series, data-painted of each canvas
  int svg_nodes = 0, svg_edges = 0, red_edges = 0;  // the topology's (div tb-topology)
  int tree_nodes = 0, tree_edges = 0;               // the congestion tree's (tb-congestion-tree)
  std::string dom;
};

inline int attr(const std::string& tag, const std::string& name) {
  std::smatch m;
  if (std::regex_search(tag, m, std::regex(name + "=\"(-?\\d+)\""))) return std::stoi(m[1]);
  return -1;
}

inline size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

// Opens `html` in headless Chromium: the DOM after its scripts ran, and a screenshot.
inline Page open_in_chromium(const std::string& html, const std::string& shot_name) {
  Page p;
  char t[] = "/tmp/tb-e2e-chromium-XXXXXX";
  const std::string profile = ::mkdtemp(t);
  const std::string base =
      "timeout 120 chromium --headless --no-sandbox --disable-gpu "
      "--no-first-run --user-data-dir=" +
      profile;
  // One browser for both: headless Chromium writes the screenshot and prints the DOM of one load
  // (each start costs 3-5 s here; two per page were ~45 s of the e2e tier's serial group).
  const std::filesystem::path shots = std::filesystem::path(TB_BINARY_DIR) / "artifacts";
  std::filesystem::create_directories(shots);
  auto dom =
      sh("(" + base + " --window-size=1200,2600 --screenshot=" + (shots / shot_name).string() +
         " --dump-dom file://" + html + " 2>/dev/null)");
  p.dom = dom.out;
  std::filesystem::remove_all(profile);
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
  // Each picture's div, from its id to the div's end (an SVG holds no </div>).
  auto div = [&](const std::string& id) -> std::string {
    const auto at = p.dom.find("id=\"" + id + "\"");
    if (at == std::string::npos) return "";
    return p.dom.substr(at, p.dom.find("</div>", at) - at);
  };
  const std::string topo = div("tb-topology"), tree = div("tb-congestion-tree");
  p.svg_nodes = static_cast<int>(count(topo, "class=\"node\""));
  p.svg_edges = static_cast<int>(count(topo, "class=\"edge\""));
  // Graphviz draws a red edge's path with stroke="red".
  p.red_edges = static_cast<int>(count(topo, "stroke=\"red\" stroke-width=\"3\""));
  p.tree_nodes = static_cast<int>(count(tree, "class=\"node\""));
  p.tree_edges = static_cast<int>(count(tree, "class=\"edge\""));
  return p;
}

// Every chart drew: as many as the page has canvases, each with series and painted pixels.
inline void expect_drawn(const Page& p, size_t charts) {
  EXPECT_EQ(p.errors, 0) << p.dom.substr(0, 4000);
  EXPECT_EQ(p.charts_drawn, static_cast<int>(charts));
  ASSERT_EQ(p.canvases.size(), charts);
  for (const auto& [series, painted] : p.canvases) {
    EXPECT_GT(series, 0);
    EXPECT_GT(painted, 1000) << "a canvas stayed (almost) empty";
  }
}

// `text` (a terminal's screen, as tmux capture-pane prints it) drawn as a dark terminal in
// artifacts/NAME (PNG) by headless Chromium, `cols` × `rows` characters; the HTML is kept beside
// it. Returns the PNG's path, or "" when Chromium made none.
inline std::string screenshot_terminal(const std::string& text, const std::string& name, int cols,
                                       int rows) {
  std::string esc;
  for (char c : text) {
    if (c == '<')
      esc += "&lt;";
    else if (c == '>')
      esc += "&gt;";
    else if (c == '&')
      esc += "&amp;";
    else
      esc += c;
  }
  const std::filesystem::path shots = std::filesystem::path(TB_BINARY_DIR) / "artifacts";
  std::filesystem::create_directories(shots);
  const std::string png = (shots / name).string();
  const std::string html = png + ".html";
  std::ofstream(html) << "<!DOCTYPE html><html><head><meta charset=utf-8><style>body{margin:0;"
                         "background:#1e1e1e}pre{margin:0;padding:8px;color:#e0e0e0;font:13px/"
                         "16px 'DejaVu Sans Mono',monospace}</style></head><body><pre>"
                      << esc << "</pre></body></html>";
  char t[] = "/tmp/tb-e2e-chromium-XXXXXX";
  const std::string profile = ::mkdtemp(t);
  std::filesystem::remove(png);
  sh("timeout 120 chromium --headless --no-sandbox --disable-gpu --no-first-run "
     "--hide-scrollbars --user-data-dir=" +
     profile + " --window-size=" + std::to_string(cols * 8 + 16) + "," +
     std::to_string(rows * 16 + 16) + " --screenshot=" + png + " file://" + html +
     " >/dev/null 2>&1");
  std::filesystem::remove_all(profile);
  return std::filesystem::exists(png) ? png : "";
}

}  // namespace tb::e2e
