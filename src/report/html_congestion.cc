#include "report/html_congestion.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

namespace tb::report {
namespace {

using nlohmann::json;

// Graphviz's double-quoted ID: quotes escaped; a backslash is kept, so that the labels' "\n"
// break lines (link end names hold none: scenario/names.h).
std::string dot_id(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '\\';
    o += c;
  }
  return o + "\"";
}

std::string cg_kib(uint64_t b) {
  return fmt::format("{:.0f} KiB", static_cast<double>(b) / 1024);
}

uint64_t cg_u64(const json& j, const char* k) {
  const auto it = j.find(k);
  return it != j.end() && it->is_number() ? it->get<uint64_t>() : 0;
}

double cg_seconds_since(int64_t ns, int64_t t0) {
  return static_cast<double>(ns - t0) / 1e9;
}

}  // namespace

std::string congestion_tree_dot(const json& c) {
  if (!c.is_object()) return "";
  const json ports = c.value("ports", json::object());
  const json ups = c.value("upstreams", json::object());
  if (!ports.is_object() || !ups.is_object()) return "";
  // Edges: a port whose XOFF paused a queue, with the pauses it asked of it in the window.
  std::vector<std::tuple<std::string, std::string, uint64_t>> edges;
  std::set<std::string> drawn;
  for (const auto& [u, uj] : ups.items()) {
    const json by = uj.value("by", json::object());  // items() of a temporary would dangle
    for (const auto& [p, n] : by.items())
      if (n.is_number() && n.get<uint64_t>() > 0) {
        edges.emplace_back(p, u, n.get<uint64_t>());
        drawn.insert(p);
        drawn.insert(u);
      }
  }
  // Ports with something to say though they paused nothing: a storm, the watchdog, drops.
  for (const auto& [p, pj] : ports.items()) {
    const json wd = pj.value("watchdog", json::object());
    if (pj.value("storm", false) || cg_u64(wd, "trips") > 0 ||
        cg_u64(pj, "lossless_violations") > 0 || cg_u64(pj, "ce_marks") > 0)
      drawn.insert(p);
  }
  if (drawn.empty()) return "";
  std::string d =
      "digraph congestion {\n  rankdir=LR;\n  node [fontname=\"Helvetica\", fontsize=10];\n"
      "  edge [fontname=\"Helvetica\", fontsize=9, color=\"#6c757d\"];\n";
  for (const auto& n : drawn) {
    std::string label = n;
    std::string style = "shape=ellipse, color=\"#36a2eb\"";
    bool alarm = false;
    if (auto it = ports.find(n); it != ports.end()) {
      const json& pj = *it;
      style = "shape=box, color=\"#fd7e14\"";
      label += fmt::format("\\nswitch port ({}): {} XOFF, {} pauses sent",
                           pj.value("model", std::string("?")), cg_u64(pj, "xoff_events"),
                           cg_u64(pj, "pauses_sent"));
      label += "\\ndeepest backlog " + cg_kib(cg_u64(pj, "backlog_max_bytes_since_agent_start")) +
               " (since the agent started), " + std::to_string(cg_u64(pj, "drops")) + " drop(s)";
      if (const uint64_t m = cg_u64(pj, "ce_marks"); m > 0)
        label += fmt::format("\\nECN: {} packet(s) marked CE", m);
      if (const uint64_t v = cg_u64(pj, "lossless_violations"); v > 0) {
        label += fmt::format("\\nLOSSLESS VIOLATED: {} drop(s)", v);
        alarm = true;
      }
      const json wd = pj.value("watchdog", json::object());
      if (pj.value("storm", false)) {
        label += "\\na pfc-storm held it paused";
        alarm = true;
      }
      if (cg_u64(wd, "trips") > 0) {
        label += fmt::format("\\nPFC watchdog: {} trip(s), {} dropped by its mitigation",
                             cg_u64(wd, "trips"), cg_u64(wd, "dropped"));
        alarm = true;
      }
    }
    if (auto it = ups.find(n); it != ups.end()) {
      const json& uj = *it;
      label += fmt::format("\\npaused {} time(s), {:.3f} s ({:.0f}% of the window)",
                           cg_u64(uj, "pauses_received"),
                           static_cast<double>(uj.value("paused_ns", int64_t{0})) / 1e9,
                           100 * uj.value("paused_fraction", 0.0));
    }
    if (alarm) style += ", style=filled, fillcolor=\"#f8d7da\"";
    d += "  " + dot_id(n) + " [label=" + dot_id(label) + ", " + style + "];\n";
  }
  for (const auto& [p, u, n] : edges)
    d += "  " + dot_id(p) + " -> " + dot_id(u) +
         " [label=" + dot_id(std::to_string(n) + " pauses") + "];\n";
  return d + "}\n";
}

std::string congestion_tree_method(const json& c) {
  std::string window = c.contains("window_s")
                           ? fmt::format("over the {:.1f} s window", c.value("window_s", 0.0))
                           : fmt::format("over the agent's {:.1f} s", c.value("uptime_s", 0.0));
  return "drawn by Graphviz from the " + c.value("source", std::string("congestion agent")) + " (" +
         c.value("backend", std::string("?")) + "), " + window +
         ": an arrow from a switch port to each queue its XOFF paused (hop by hop: a port that "
         "was paused and paused others in turn sits in the middle), with the pauses it asked of "
         "that queue; boxes are polled switch ports, ellipses the queues they paused; red: a "
         "pfc-storm, a PFC watchdog trip or a lossless violation";
}

std::optional<Chart> congestion_timeline_chart(const ReportInput& in) {
  const int64_t t0 = in.doc.value("t0_ns", int64_t{0});
  const int64_t t_end = in.doc.value("t_end_ns", t0);
  const double end_s = cg_seconds_since(t_end, t0);
  std::vector<std::string> rows;  // in order of first appearance
  std::map<std::string, size_t> row_of;
  auto row = [&](const std::string& r) {
    if (!row_of.contains(r)) {
      row_of[r] = rows.size();
      rows.push_back(r);
    }
    return r;
  };
  json storms = json::array();
  for (const auto& f : in.doc.value("recovery", json::object()).value("faults", json::array())) {
    if (f.value("kind", std::string()) != "pfc-storm") continue;
    const int64_t a = f.value("inject_ns", int64_t{0}), b = f.value("revert_ns", t_end);
    if (a <= 0) continue;
    storms.push_back(
        {{"y", row("fault " + std::to_string(f.value("fault", 0)) + ": " +
                   f.value("target", std::string("pfc-storm")))},
         {"x", json::array({cg_seconds_since(a, t0), cg_seconds_since(b > a ? b : t_end, t0)})}});
  }
  json paused = json::array();
  uint64_t cycles = 0;
  for (const auto& e : in.congestion_episodes) {
    const int64_t a = e.value("t0_ns", int64_t{0}), b = e.value("t1_ns", int64_t{0});
    const std::string u = e.value("upstream", std::string());
    if (u.empty() || a <= 0 || b < a) continue;
    cycles += e.value("cycles", uint64_t{0});
    paused.push_back(
        {{"y", row(u)}, {"x", json::array({cg_seconds_since(a, t0), cg_seconds_since(b, t0)})}});
  }
  json detect = json::array(), restore = json::array();
  for (const auto& e : in.events) {
    const std::string ev = e.value("event", std::string());
    if (ev != "pfcwd_detect" && ev != "pfcwd_restore") continue;
    const std::string port = e.value("port", std::string());
    if (port.empty()) continue;
    (ev == "pfcwd_detect" ? detect : restore)
        .push_back({{"x", cg_seconds_since(e.value("t_mono_ns", t0), t0)}, {"y", row(port)}});
  }
  if (rows.empty()) return std::nullopt;
  json data = json::array();
  data.push_back({{"type", "bar"},
                  {"label", "paused (pause episodes)"},
                  {"data", paused},
                  {"backgroundColor", "rgba(54,162,235,0.7)"},
                  {"borderColor", "rgb(54,162,235)"},
                  {"borderWidth", 1},
                  {"minBarLength", 2},
                  {"grouped", false}});
  if (!storms.empty())
    data.push_back({{"type", "bar"},
                    {"label", "pfc-storm fault, injection to revert"},
                    {"data", storms},
                    {"backgroundColor", "rgba(220,53,69,0.35)"},
                    {"borderColor", "rgb(220,53,69)"},
                    {"borderWidth", 1},
                    {"grouped", false}});
  data.push_back({{"type", "scatter"},
                  {"label", "PFC watchdog detected a storm"},
                  {"data", detect},
                  {"pointRadius", 7},
                  {"pointStyle", "triangle"},
                  {"backgroundColor", "rgb(253,126,20)"},
                  {"borderColor", "rgb(253,126,20)"}});
  data.push_back({{"type", "scatter"},
                  {"label", "PFC watchdog restored the port"},
                  {"data", restore},
                  {"pointRadius", 7},
                  {"pointStyle", "rectRot"},
                  {"backgroundColor", "rgb(40,167,69)"},
                  {"borderColor", "rgb(40,167,69)"}});
  json cfg = {{"type", "bar"}, {"data", {{"labels", rows}, {"datasets", data}}}};
  cfg["options"] = {{"animation", false},
                    {"responsive", true},
                    {"maintainAspectRatio", false},
                    {"indexAxis", "y"},
                    {"plugins", {{"legend", {{"position", "bottom"}}}}},
                    {"scales",
                     {{"x",
                       {{"type", "linear"},
                        {"min", 0},
                        {"max", end_s},
                        {"title", {{"display", true}, {"text", "seconds since the run started"}}}}},
                      {"y",
                       {{"type", "category"},
                        {"labels", rows},
                        {"title", {{"display", true}, {"text", "paused queue / port"}}}}}}}};
  return Chart{"run-congestion",
               "Congestion over time: pauses per queue, pfc-storms and the PFC watchdog",
               fmt::format("each bar: one pause episode of a queue (the congestion agent's "
                           "pauses of it less than 10 ms apart merged, {} pauses in {} episodes; "
                           "congestion.jsonl, CLOCK_MONOTONIC), its first pause to its last "
                           "resume; red: a pfc-storm fault's window from the recovery table; "
                           "markers: the agent's PFC watchdog detecting a storm on a port and "
                           "restoring it (events.jsonl pfcwd_detect, pfcwd_restore); backend: "
                           "TBF pauses by the congestion agent (tb-probe congestion)",
                           cycles, paused.size()),
               cfg};
}

}  // namespace tb::report
