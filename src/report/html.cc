#include "report/html.h"

#include <dlfcn.h>
#include <graphviz/gvc.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <sstream>
#include <type_traits>
#include "core/extras.h"

#include "core/safe_file.h"
#include "core/units.h"
#include "report/html_congestion.h"

namespace tb::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

Result<std::string> read_text(const std::string& path) {
  std::ifstream in(path);
  if (!in) return sys_fail("read " + path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<json> read_json(const std::string& path) {
  auto text = read_text(path);
  if (!text) return std::unexpected(text.error());
  auto j = json::parse(*text, nullptr, false);
  if (j.is_discarded()) return bad_input(path + ": not valid JSON");
  return j;
}

// The lines of a JSON-lines file that parse (none when it cannot be read).
std::vector<json> read_jsonl(const std::string& path) {
  std::vector<json> out;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    auto j = json::parse(line, nullptr, false);
    if (!j.is_discarded()) out.push_back(std::move(j));
  }
  return out;
}

std::string esc(std::string_view s) {
  std::string out;
  for (char c : s) switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  return out;
}

// Text for inside <script>: nothing in it may close the element.
std::string script_safe(std::string s) {
  for (size_t at = 0; (at = s.find("</", at)) != std::string::npos; at += 3)
    s.replace(at, 2, "<\\/");
  return s;
}

std::string num(double v, int decimals = 2) {
  if (!std::isfinite(v)) return "-";
  char b[64];
  std::snprintf(b, sizeof b, "%.*f", decimals, v);
  return b;
}

double dbl(const json& j, const char* key, double fallback = NAN) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : fallback;
}

std::string str(const json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// The colours of the charts and of the topology's tiers.
constexpr const char* kBlue = "rgb(54,162,235)";
constexpr const char* kRed = "rgb(220,53,69)";
constexpr const char* kGreen = "rgb(40,167,69)";
constexpr const char* kOrange = "rgb(253,126,20)";
constexpr const char* kGrey = "rgb(108,117,125)";
constexpr const char* kPurple = "rgb(111,66,193)";
constexpr const char* kFaultFill = "rgba(220,53,69,0.15)";
constexpr const char* kBandFill = "rgba(40,167,69,0.25)";

json axis(const std::string& title, const char* type = "linear") {
  return {{"type", type}, {"title", {{"display", true}, {"text", title}}}};
}

json base_options(const std::string& x_title, const std::string& y_title,
                  const char* x_type = "linear") {
  return {{"animation", false},
          {"responsive", true},
          {"maintainAspectRatio", false},
          {"plugins", {{"legend", {{"position", "bottom"}}}}},
          {"scales", {{"x", axis(x_title, x_type)}, {"y", axis(y_title)}}}};
}

// A fault's window on a time axis: a filled band from injection to revert at height `top`.
json fault_band(const json& f, int64_t t0, double top) {
  const double a = static_cast<double>(f.value("inject_ns", int64_t{0}) - t0) / 1e9;
  const double b = static_cast<double>(f.value("revert_ns", int64_t{0}) - t0) / 1e9;
  return {{"type", "line"},
          {"label", "fault " + std::to_string(f.value("fault", 0)) + ": " + str(f, "target")},
          {"data", json::array({{{"x", a}, {"y", top}}, {{"x", b}, {"y", top}}})},
          {"fill", "origin"},
          {"backgroundColor", kFaultFill},
          {"borderColor", kFaultFill},
          {"pointRadius", 0},
          {"borderWidth", 0}};
}

// Detection and reroute of each fault, as points at the top of the chart.
json fault_marks(const json& faults, int64_t t0, double top, const char* key, const char* label,
                 const char* colour, const char* shape) {
  json pts = json::array();
  for (const auto& f : faults) {
    const double ms = dbl(f, key);
    if (std::isnan(ms)) continue;
    const double at = static_cast<double>(f.value("inject_ns", int64_t{0}) - t0) / 1e9 + ms / 1e3;
    pts.push_back({{"x", at}, {"y", top}});
  }
  return {{"type", "scatter"},    {"label", label},      {"data", pts},
          {"pointRadius", 6},     {"pointStyle", shape}, {"backgroundColor", colour},
          {"borderColor", colour}};
}

std::vector<std::string> fault_targets(const ReportInput& in) {
  std::vector<std::string> out;
  if (in.kind != ReportKind::kRun) return out;
  for (const auto& f : in.doc.value("recovery", json::object()).value("faults", json::array()))
    out.push_back(str(f, "target"));
  return out;
}

// "link-down dc/s1/g1:rail <-> dc/tor0:s1g1" → {"dc/s1/g1:rail", "dc/tor0:s1g1"}; a node
// fault ("kill dc/s0/g1") → {"dc/s0/g1"}.
std::vector<std::string> target_ends(const std::string& target) {
  std::string rest = target.substr(std::min(target.size(), target.find(' ') + 1));
  std::vector<std::string> ends;
  const auto arrow = rest.find(" <-> ");
  if (arrow == std::string::npos) {
    ends.push_back(rest);
  } else {
    ends.push_back(rest.substr(0, arrow));
    ends.push_back(rest.substr(arrow + 5));
  }
  return ends;
}

const char* tier_colour(plan::Tier t) {
  switch (t) {
    case plan::Tier::kScaleUp:
      return "forestgreen";
    case plan::Tier::kScaleOut:
      return "royalblue";
    case plan::Tier::kAggregation:
      return "purple";
    case plan::Tier::kFrontend:
      return "dimgray";
    case plan::Tier::kUplink:
      return "goldenrod";
    case plan::Tier::kWan:
      return "darkorange";
  }
  return "black";
}

// The bench's bottleneck: the tier its ranks' traffic crosses (one server: scale-up; one
// region: scale-out; else the WAN) and the lowest emulated rate on a link of that tier that
// touches a rank (the WAN: any WAN link).
struct Bottleneck {
  double bps = 0;
  std::string how;
};
std::optional<Bottleneck> bench_bottleneck(const ReportInput& in) {
  if (!in.topo) return std::nullopt;
  std::set<std::string> ranks, servers, regions;
  for (const auto& r : in.doc.value("ranks", json::array())) {
    const auto name = r.get<std::string>();
    ranks.insert(name);
    if (const auto* n = in.topo->node(name)) {
      servers.insert(n->region + "/" + std::to_string(n->server));
      regions.insert(n->region);
    }
  }
  if (ranks.empty()) return std::nullopt;
  const plan::Tier tier = regions.size() > 1   ? plan::Tier::kWan
                          : servers.size() > 1 ? plan::Tier::kScaleOut
                                               : plan::Tier::kScaleUp;
  double best = 0;
  for (const auto& l : in.topo->links) {
    if (l.tier != tier) continue;
    if (tier != plan::Tier::kWan && !ranks.count(l.a.node) && !ranks.count(l.b.node)) continue;
    if (l.emulated.rate.bps > 0 && (best == 0 || l.emulated.rate.bps < best))
      best = l.emulated.rate.bps;
  }
  if (best == 0) return std::nullopt;
  return Bottleneck{best, std::string("the lowest emulated rate of a ") + plan::to_string(tier) +
                              " link the ranks use (" + format_rate(Rate{best}) +
                              ", from topology.json)"};
}

std::string method_of(const ReportInput& in) {
  switch (in.kind) {
    case ReportKind::kRun:
    case ReportKind::kBench:
      return str(in.doc, "measured");
    case ReportKind::kVerify: {
      std::string m = in.doc.contains("paths") ? "verify --paths: whole paths end to end"
                                               : "verify: each link class on its own";
      if (in.doc.value("quick", false)) m += " (--quick)";
      if (in.doc.contains("backends"))
        m += "; shaping: " + str(in.doc["backends"], "shaping") +
             "; rdma: " + str(in.doc["backends"], "rdma");
      return m;
    }
    case ReportKind::kTrain: {
      const json& c = in.doc.empty() ? json::object() : in.doc.front();
      std::string m = str(c, "method");
      m += "; shaping: " + str(c, "shaping") + "; transport: " + str(c, "transport");
      return m;
    }
  }
  return {};
}

std::string table(const std::vector<std::string>& head,
                  const std::vector<std::vector<std::string>>& rows) {
  std::string s = "<table><tr>";
  for (const auto& h : head) s += "<th>" + esc(h) + "</th>";
  s += "</tr>";
  for (const auto& r : rows) {
    s += "<tr>";
    for (const auto& c : r) s += "<td>" + esc(c) + "</td>";
    s += "</tr>";
  }
  return s + "</table>";
}

std::string ms_or_dash(const json& j, const char* key) {
  const double v = dbl(j, key);
  return std::isnan(v) ? "-" : num(v, 1);
}

std::string run_tables(const ReportInput& in) {
  const auto& rec = in.doc.value("recovery", json::object());
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : rec.value("faults", json::array()))
    rows.push_back({std::to_string(f.value("fault", 0)), str(f, "target"),
                    ms_or_dash(f, "detection_ms"), ms_or_dash(f, "reroute_ms"),
                    ms_or_dash(f, "outage_ms"), ms_or_dash(f, "stall_ms"), str(f, "detected_by")});
  std::string s =
      "<h2>Recovery (ms)</h2>" +
      table({"#", "fault", "detect", "reroute", "outage", "stall", "detected by"}, rows);
  s += "<p class=method>baseline iteration " + ms_or_dash(rec, "baseline_iter_ms") + " ms</p>";
  for (const auto& c : in.doc.value("checkpoints", json::array())) {
    std::vector<std::vector<std::string>> reps;
    for (const auto& r : c.value("replications", json::array())) {
      const double sec = dbl(r, "seconds", 0);
      const auto bytes = r.value("payload_bytes", uint64_t{0});
      const std::string err = str(r, "error");
      reps.push_back({std::to_string(r.value("rep", 0)), r.value("full", false) ? "full" : "incr",
                      std::to_string(bytes), num(sec, 3),
                      num(sec > 0 ? static_cast<double>(bytes) * 8 / sec / 1e6 : 0, 1),
                      num(dbl(r, "wan_utilisation", 0) * 100, 1) + "%",
                      r.value("on_time", false) ? "yes" : "LATE",
                      r.value("ok", false) ? "match" : (err.empty() ? "MISMATCH" : err)});
    }
    s += "<h2>Checkpoint " + esc(str(c, "workload")) + " (" + esc(str(c, "from")) + " → " +
         esc(str(c, "to")) + ", " + esc(str(c, "mode")) + " mode, " +
         esc(format_size(c.value("real_bytes", uint64_t{0}))) +
         " real = " + esc(format_size(c.value("emulated_bytes", uint64_t{0}))) + " emulated, qos " +
         esc(str(c, "qos")) + ")</h2>";
    s += table({"rep", "kind", "bytes", "seconds", "Mbit/s", "WAN", "on time", "checksums"}, reps);
    if (!str(c, "warning").empty())
      s += "<p class=method>warning: " + esc(str(c, "warning")) + "</p>";
    s += "<p class=method>" + esc(str(c, "measured")) + "</p>";
  }
  std::vector<std::vector<std::string>> ex;
  // summary.json's verdicts (experiment::Verdict): name, limit, measured (null when nothing
  // was measured), ok, and the sentence the text report prints.
  for (const auto& e : in.doc.value("expect", json::array())) {
    const double measured = dbl(e, "measured");
    ex.push_back({str(e, "name"), num(dbl(e, "limit", 0), 1),
                  std::isnan(measured) ? "-" : num(measured, 1),
                  e.value("ok", false) ? "ok" : "FAILED", str(e, "text")});
  }
  s += "<h2>[expect]</h2>";
  s += ex.empty() ? "<p>no [expect] in the scenario</p>"
                  : table({"key", "limit", "measured", "verdict", "detail"}, ex);
  return s;
}

std::string verify_tables(const ReportInput& in) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& c : in.doc.value("classes", json::array()))
    for (const auto& k : c.value("checks", json::array())) {
      const bool bits = str(k, "unit") == "bit/s";
      const double f = bits ? 1e-6 : 1;
      rows.push_back({str(c, "class"), str(k, "check"), num(dbl(k, "configured") * f, 3),
                      num(dbl(k, "achieved") * f, 3),
                      num(dbl(k, "low") * f, 3) + " .. " + num(dbl(k, "high") * f, 3),
                      bits ? "Mbit/s" : str(k, "unit"), str(k, "verdict")});
    }
  for (const auto& p : in.doc.value("paths", json::array()))
    rows.push_back({str(p, "label").empty() ? str(p, "class") : str(p, "label"), "rtt",
                    num(dbl(p, "expected_rtt_ms"), 3), num(dbl(p, "measured_rtt_ms"), 3),
                    "± " + num(dbl(p, "tolerance_ms"), 3), "ms",
                    str(p, "result").empty() ? str(p, "verdict") : str(p, "result")});
  return "<h2>Checks</h2>" +
         table({"class / path", "check", "configured", "achieved", "tolerance", "unit", "verdict"},
               rows);
}

}  // namespace

const char* to_string(ReportKind k) {
  switch (k) {
    case ReportKind::kRun:
      return "run";
    case ReportKind::kBench:
      return "bench";
    case ReportKind::kVerify:
      return "verify";
    case ReportKind::kTrain:
      return "train";
  }
  return "?";
}

Result<ReportInput> read_report_input(const std::string& path) {
  ReportInput in;
  in.source = path;
  std::error_code ec;
  std::string dir;
  if (fs::is_directory(path, ec)) {
    dir = path;
    const bool all = fs::exists(path + "/train-all.json", ec);
    if (all || fs::exists(path + "/train.json", ec)) {
      in.kind = ReportKind::kTrain;
      auto doc = read_json(path + (all ? "/train-all.json" : "/train.json"));
      if (!doc) return std::unexpected(doc.error());
      in.doc = doc->is_array() ? std::move(*doc) : json::array({std::move(*doc)});
    } else if (fs::exists(path + "/summary.json", ec)) {
      in.kind = ReportKind::kRun;
      auto doc = read_json(path + "/summary.json");
      if (!doc) return std::unexpected(doc.error());
      in.doc = std::move(*doc);
      in.events = read_jsonl(path + "/events.jsonl");
      if (auto wj = read_json(path + "/workload/job.json"); wj) in.workload_job = std::move(*wj);
      in.congestion_episodes = read_jsonl(path + "/congestion.jsonl");
      std::erase_if(in.congestion_episodes, [](const json& j) { return !j.is_object(); });
    } else if (fs::exists(path + "/bench.json", ec)) {
      in.kind = ReportKind::kBench;
      auto doc = read_json(path + "/bench.json");
      if (!doc) return std::unexpected(doc.error());
      in.doc = std::move(*doc);
    } else {
      return bad_input("report: " + path +
                       " holds no summary.json (a run's results), bench.json (a bench's) or "
                       "train.json (train's); give a results directory, or a JSON file from "
                       "verify --json or train --json");
    }
  } else if (fs::is_regular_file(path, ec)) {
    auto doc = read_json(path);
    if (!doc) return std::unexpected(doc.error());
    const auto is_train = [](const json& j) {
      return j.is_object() && j.contains("rows") && j.contains("efficiency_base_servers");
    };
    const bool train = is_train(*doc) || (doc->is_array() && !doc->empty() &&
                                          std::all_of(doc->begin(), doc->end(), is_train));
    if (train) {
      in.kind = ReportKind::kTrain;
      in.doc = doc->is_array() ? std::move(*doc) : json::array({std::move(*doc)});
    } else if (!doc->is_object() || (!doc->contains("classes") && !doc->contains("paths"))) {
      return bad_input("report: " + path +
                       " is not what verify --json or train --json prints (no \"classes\", "
                       "\"paths\" or training \"rows\"); give a run's, bench's or train's "
                       "results directory, or that JSON");
    } else {
      in.kind = ReportKind::kVerify;
      in.doc = std::move(*doc);
    }
    dir = fs::path(path).parent_path().string();
    if (dir.empty()) dir = ".";
  } else {
    return bad_input("report: " + path +
                     " does not exist (give a results directory of run or bench, or a JSON file "
                     "from verify --json)");
  }
  if (fs::exists(dir + "/topology.json", ec)) {
    auto t = read_json(dir + "/topology.json");
    if (!t) return std::unexpected(t.error());
    try {
      in.topo = plan::topology_from_json(*t);
    } catch (const std::exception& e) {
      return bad_input(dir + "/topology.json: " + e.what());
    }
  }
  return in;
}

std::vector<Chart> run_charts(const ReportInput& in) {
  std::vector<Chart> charts;
  const int64_t t0 = in.doc.value("t0_ns", int64_t{0});
  const int64_t t_end = in.doc.value("t_end_ns", t0);
  const double end_s = static_cast<double>(t_end - t0) / 1e9;
  const auto faults = in.doc.value("recovery", json::object()).value("faults", json::array());

  // Throughput per iteration: the message size over the iteration's own time; for training,
  // the samples of one step over the step's time.
  double bytes = 0, samples = 0;
  if (in.workload_job.is_object() && in.workload_job.contains("training")) {
    const auto& t = in.workload_job["training"];
    const int ranks = static_cast<int>(in.workload_job.value("ranks", json::array()).size());
    const int per = std::max(1, t.value("tp", 1) * t.value("pp", 1));
    samples =
        static_cast<double>(ranks / per) * t.value("micro_batches", 1) * t.value("samples", 1);
  } else if (in.workload_job.is_object() && in.workload_job.contains("bench")) {
    const auto& b = in.workload_job["bench"];
    if (b.value("min_bytes", 0.0) == b.value("max_bytes", -1.0)) bytes = b.value("min_bytes", 0.0);
  }
  json pts = json::array();
  double top = 0;
  for (const auto& e : in.events) {
    if (str(e, "event") != "iteration") continue;
    const int64_t end = e.value("t_mono_ns", int64_t{0}), start = e.value("start_ns", end);
    if (end <= start) continue;
    const double secs = static_cast<double>(end - start) / 1e9;
    const double y = samples > 0 ? samples / secs : bytes > 0 ? bytes * 8 / secs / 1e9 : 1 / secs;
    top = std::max(top, y);
    // A level from the iteration's start to its end: a stall reads as a long low step.
    pts.push_back({{"x", static_cast<double>(start - t0) / 1e9}, {"y", y}});
    pts.push_back({{"x", static_cast<double>(end - t0) / 1e9}, {"y", y}});
  }
  top = top > 0 ? top * 1.1 : 1;
  const std::string y_title = samples > 0 ? "samples/s (training)"
                              : bytes > 0 ? "algbw (Gbit/s)"
                                          : "iterations/s";
  json data = json::array();
  data.push_back({{"type", "line"},
                  {"label", "workload, per iteration"},
                  {"data", pts},
                  {"borderColor", kBlue},
                  {"backgroundColor", kBlue},
                  {"pointRadius", 0},
                  {"borderWidth", 1.5}});
  for (const auto& f : faults) data.push_back(fault_band(f, t0, top));
  data.push_back(fault_marks(faults, t0, top, "detection_ms", "detected", kOrange, "triangle"));
  data.push_back(fault_marks(faults, t0, top, "reroute_ms", "rerouted", kGreen, "rectRot"));
  json back = json::array();
  for (const auto& f : faults)
    if (const int64_t at = f.value("outage_end_ns", int64_t{0});
        at > 0 && dbl(f, "outage_ms", 0) > 0)
      back.push_back({{"x", static_cast<double>(at - t0) / 1e9}, {"y", top}});
  data.push_back({{"type", "scatter"},
                  {"label", "recovered (probes through again)"},
                  {"data", back},
                  {"pointRadius", 6},
                  {"pointStyle", "star"},
                  {"backgroundColor", kPurple},
                  {"borderColor", kPurple}});
  json cfg = {{"type", "line"}, {"data", {{"datasets", data}}}};
  cfg["options"] = base_options("seconds since the run started", y_title);
  cfg["options"]["scales"]["x"]["min"] = 0;
  cfg["options"]["scales"]["x"]["max"] = end_s;
  cfg["options"]["scales"]["y"]["min"] = 0;
  cfg["options"]["scales"]["y"]["max"] = top;
  // A run with only checkpoints (no workload/job.json, no iterations) has no such chart.
  if (in.workload_job.is_object() || !pts.empty())
    charts.push_back(
        {"run-throughput", "Workload throughput over time, faults shaded",
         (samples > 0 ? "each level: one training step's samples (" + num(samples, 0) +
                            " = data-parallel groups × micro-batches × samples per micro-batch) / "
                            "that step's time (its first rank's start to its last rank's end, "
                            "CLOCK_MONOTONIC), drawn from its start to its end"
          : bytes > 0
              ? "each level: " + format_size(static_cast<uint64_t>(bytes)) +
                    " bytes × 8 / that iteration's time (its first rank's start to its last "
                    "rank's end, CLOCK_MONOTONIC), drawn from its start to its end"
              : std::string("each level: 1 / that iteration's time, drawn from its start to "
                            "its end")) +
             "; shaded: each fault from injection to revert; markers: detection and reroute "
             "after injection, from the recovery table, and recovery: the end of the longest "
             "probe outage on the fault's path",
         cfg});

  // Probe reachability per probed path on the same time axis.
  json paths = json::array();
  int k = 0;
  const char* colours[] = {kBlue, kOrange, kGreen, kGrey, kRed};
  for (const auto& p : in.doc.value("probes", json::array())) {
    const std::string from = str(p, "from"), to = str(p, "to");
    json d = json::array({{{"x", 0.0}, {"y", 1}}});
    for (const auto& e : in.events) {
      if (str(e, "event") != "probe_outage" || str(e, "from") != from || str(e, "to") != to)
        continue;
      const double a = static_cast<double>(e.value("t_mono_ns", int64_t{0}) - t0) / 1e9;
      const double b = static_cast<double>(e.value("end_ns", int64_t{0}) - t0) / 1e9;
      d.push_back({{"x", a}, {"y", 1}});
      d.push_back({{"x", a}, {"y", 0}});
      d.push_back({{"x", b}, {"y", 0}});
      d.push_back({{"x", b}, {"y", 1}});
    }
    d.push_back({{"x", end_s}, {"y", 1}});
    const char* c = colours[k++ % 5];
    paths.push_back({{"type", "line"},
                     {"label", from + " → " + to},
                     {"data", d},
                     {"borderColor", c},
                     {"backgroundColor", c},
                     {"pointRadius", 0},
                     {"borderWidth", 2}});
  }
  if (!paths.empty()) {
    for (const auto& f : faults) paths.push_back(fault_band(f, t0, 1.05));
    json pc = {{"type", "line"}, {"data", {{"datasets", paths}}}};
    pc["options"] = base_options("seconds since the run started", "probe path up (1) / out (0)");
    pc["options"]["scales"]["x"]["min"] = 0;
    pc["options"]["scales"]["x"]["max"] = end_s;
    pc["options"]["scales"]["y"]["min"] = 0;
    pc["options"]["scales"]["y"]["max"] = 1.05;
    charts.push_back({"run-probes", "Probed paths: outages (probe loss) over time",
                      "UDP probes every " + std::to_string(in.doc.value("probe_interval_us", 0)) +
                          " µs on each faulted path; out = the span of the path's probe_outage "
                          "event (events.jsonl)",
                      pc});
  }

  // Each checkpoint's replications on the same time axis: a level at its goodput from its
  // first sender's start to its last sender's end, the WAN link's emulated rate as a line and
  // each replication's due time as a mark.
  int ck = 0;
  for (const auto& c : in.doc.value("checkpoints", json::array())) {
    json levels = json::array(), due = json::array();
    double ctop = dbl(c, "wan_bps", 0) / 1e6;
    for (const auto& r : c.value("replications", json::array())) {
      const int64_t a = r.value("start_ns", int64_t{0}), b = r.value("end_ns", int64_t{0});
      const double sec = dbl(r, "seconds", 0);
      if (const int64_t at = r.value("due_ns", int64_t{0}); at > 0)
        due.push_back({{"x", static_cast<double>(at - t0) / 1e9}, {"y", 0}});
      if (a <= 0 || b <= a || sec <= 0) continue;
      const double mbit =
          static_cast<double>(r.value("payload_bytes", uint64_t{0})) * 8 / sec / 1e6;
      ctop = std::max(ctop, mbit);
      levels.push_back({{"x", static_cast<double>(a - t0) / 1e9}, {"y", 0}});
      levels.push_back({{"x", static_cast<double>(a - t0) / 1e9}, {"y", mbit}});
      levels.push_back({{"x", static_cast<double>(b - t0) / 1e9}, {"y", mbit}});
      levels.push_back({{"x", static_cast<double>(b - t0) / 1e9}, {"y", 0}});
    }
    ctop = ctop > 0 ? ctop * 1.1 : 1;
    json d = json::array();
    d.push_back({{"type", "line"},
                 {"label", "replication goodput (payload)"},
                 {"data", levels},
                 {"borderColor", kBlue},
                 {"backgroundColor", "rgba(54,162,235,0.2)"},
                 {"fill", "origin"},
                 {"pointRadius", 0},
                 {"borderWidth", 1.5}});
    std::string how =
        "each block: one replication from its first sender's start to its last sender's end, "
        "at its payload × 8 / its duration; triangles: when each was due (the cadence)";
    if (const double w = dbl(c, "wan_bps", 0); w > 0) {
      d.push_back(
          {{"type", "line"},
           {"label", "WAN link's emulated rate (" + str(c, "wan") + ")"},
           {"data", json::array({{{"x", 0.0}, {"y", w / 1e6}}, {{"x", end_s}, {"y", w / 1e6}}})},
           {"borderColor", kRed},
           {"borderDash", {6, 4}},
           {"pointRadius", 0}});
      how += "; dashed: the primary WAN link's emulated rate";
    }
    d.push_back({{"type", "scatter"},
                 {"label", "due"},
                 {"data", due},
                 {"pointRadius", 6},
                 {"pointStyle", "triangle"},
                 {"backgroundColor", kOrange},
                 {"borderColor", kOrange}});
    for (const auto& f : faults) d.push_back(fault_band(f, t0, ctop));
    json cc = {{"type", "line"}, {"data", {{"datasets", d}}}};
    cc["options"] = base_options("seconds since the run started", "Mbit/s");
    cc["options"]["scales"]["x"]["min"] = 0;
    cc["options"]["scales"]["x"]["max"] = end_s;
    cc["options"]["scales"]["y"]["min"] = 0;
    cc["options"]["scales"]["y"]["suggestedMax"] = ctop;
    charts.push_back({"run-checkpoint-" + std::to_string(ck++),
                      "Checkpoint " + str(c, "workload") + ": " + str(c, "from") + " → " +
                          str(c, "to") + " (" + str(c, "mode") + ", qos " + str(c, "qos") + ")",
                      how + "; " + str(c, "measured"), cc});
  }
  if (auto cg = congestion_timeline_chart(in)) charts.push_back(std::move(*cg));
  return charts;
}

std::vector<Chart> bench_charts(const ReportInput& in) {
  std::vector<Chart> charts;
  // One curve per bench: this one, then each compared with it (`report DIR DIR...`).
  std::vector<const json*> docs{&in.doc};
  for (const auto& d : in.compared) docs.push_back(&d);
  const char* colours[] = {kBlue, kOrange, kGreen, kPurple, kGrey};
  json data = json::array(), wrong_sets = json::array();
  double lo = 0, hi = 0;
  int k = 0;
  for (const json* doc : docs) {
    json bw = json::array(), wrong = json::array();
    for (const auto& r : doc->value("rows", json::array())) {
      const double size = dbl(r, "size_bytes", 0);
      if (size <= 0) continue;
      lo = lo == 0 ? size : std::min(lo, size);
      hi = std::max(hi, size);
      bw.push_back({{"x", size}, {"y", dbl(r, "busbw_gbit", 0)}});
      wrong.push_back({{"x", size}, {"y", r.value("wrong", 0)}});
    }
    std::string label = str(*doc, "collective") + " " + str(*doc, "algo") + " (" +
                        str(*doc, "impl") + ", " + std::to_string(doc->value("nranks", 0)) +
                        " ranks";
    if (docs.size() > 1 && !str(*doc, "transport").empty()) label += ", " + str(*doc, "transport");
    if (docs.size() > 1) label += ", " + str(*doc, "lab");
    label += ")";
    const char* c = colours[k++ % 5];
    data.push_back({{"type", "line"},
                    {"label", label},
                    {"data", bw},
                    {"borderColor", c},
                    {"backgroundColor", c},
                    {"pointRadius", 3}});
    wrong_sets.push_back({{"label", "#wrong elements: " + label},
                          {"data", wrong},
                          {"backgroundColor", docs.size() > 1 ? c : kRed}});
  }
  std::string how = str(in.doc, "measured") + "; busbw as nccl-tests defines it";
  if (docs.size() > 1)
    how +=
        "; " + std::to_string(docs.size()) + " benches side by side, each from its own bench.json";
  if (const auto b = bench_bottleneck(in); b && lo > 0) {
    data.push_back({{"type", "line"},
                    {"label", "bottleneck link's emulated rate"},
                    {"data", json::array({{{"x", lo}, {"y", b->bps / 1e9}},
                                          {{"x", hi}, {"y", b->bps / 1e9}}})},
                    {"borderColor", kRed},
                    {"borderDash", {6, 4}},
                    {"pointRadius", 0}});
    how += "; the dashed line is " + b->how;
    if (docs.size() > 1) how += " (of the first bench's ranks)";
  } else {
    how += "; no bottleneck line: topology.json is not in the results directory";
  }
  json cfg = {{"type", "line"}, {"data", {{"datasets", data}}}};
  cfg["options"] = base_options("message size (bytes)", "busbw (Gbit/s)", "logarithmic");
  cfg["options"]["scales"]["y"]["min"] = 0;
  charts.push_back({"bench-busbw", "Bus bandwidth over message size", how, cfg});

  json wc = {{"type", "bar"}, {"data", {{"datasets", wrong_sets}}}};
  wc["options"] = base_options("message size (bytes)", "#wrong", "logarithmic");
  wc["options"]["scales"]["y"]["min"] = 0;
  wc["options"]["scales"]["y"]["suggestedMax"] = 1;
  uint64_t wrong_total = 0;
  for (const json* doc : docs)
    for (const auto& r : doc->value("rows", json::array()))
      wrong_total += r.value("wrong", uint64_t{0});
  charts.push_back(
      {"bench-wrong", "#wrong per size",
       "elements that differ from the expected pattern after the collective "
       "(checked before and after the timed loop, as nccl-tests does)" +
           std::string(wrong_total == 0 ? "; 0 at every size, so no bar is drawn" : ""),
       wc});
  return charts;
}

std::vector<Chart> verify_charts(const ReportInput& in) {
  std::vector<Chart> charts;
  // One chart per check kind: configured, achieved and the tolerance band per link class.
  struct Series {
    std::string unit;
    json labels = json::array(), band = json::array(), configured = json::array(),
         achieved = json::array();
  };
  std::map<std::string, Series> by_check;
  std::vector<std::string> order;
  for (const auto& c : in.doc.value("classes", json::array()))
    for (const auto& k : c.value("checks", json::array())) {
      const std::string check = str(k, "check");
      const double conf = dbl(k, "configured"), got = dbl(k, "achieved");
      if (std::isnan(conf) || std::isnan(got)) continue;
      if (!by_check.count(check)) order.push_back(check);
      auto& s = by_check[check];
      const double scale = str(k, "unit") == "bit/s" ? 1e-6 : 1;
      s.unit = str(k, "unit") == "bit/s" ? "Mbit/s" : str(k, "unit");
      const int i = static_cast<int>(s.labels.size());
      s.labels.push_back(str(c, "class"));
      s.band.push_back(
          {{"x", i},
           {"y", json::array({dbl(k, "low", conf) * scale, dbl(k, "high", conf) * scale})}});
      s.configured.push_back({{"x", i}, {"y", conf * scale}});
      s.achieved.push_back({{"x", i}, {"y", got * scale}});
    }
  Series paths;
  paths.unit = "ms";
  for (const auto& p : in.doc.value("paths", json::array())) {
    const double want = dbl(p, "expected_rtt_ms"), got = dbl(p, "measured_rtt_ms");
    const double tol = dbl(p, "tolerance_ms", 0);
    if (std::isnan(want) || std::isnan(got)) continue;
    const int i = static_cast<int>(paths.labels.size());
    paths.labels.push_back(str(p, "label").empty() ? str(p, "class") : str(p, "label"));
    paths.band.push_back({{"x", i}, {"y", json::array({want - tol, want + tol})}});
    paths.configured.push_back({{"x", i}, {"y", want}});
    paths.achieved.push_back({{"x", i}, {"y", got}});
  }
  auto chart = [](const Series& s, const std::string& what) {
    json labels = s.labels;
    json data = json::array();
    // Bars carry only the band; configured and achieved are points over it.
    json band_y = json::array(), conf_y = json::array(), got_y = json::array();
    for (const auto& b : s.band) band_y.push_back(b["y"]);
    for (const auto& b : s.configured) conf_y.push_back(b["y"]);
    for (const auto& b : s.achieved) got_y.push_back(b["y"]);
    data.push_back({{"type", "bar"},
                    {"label", "tolerance band"},
                    {"data", band_y},
                    {"backgroundColor", kBandFill}});
    data.push_back({{"type", "line"},
                    {"label", "configured"},
                    {"data", conf_y},
                    {"showLine", false},
                    {"pointStyle", "line"},
                    {"pointRadius", 14},
                    {"borderWidth", 3},
                    {"borderColor", kGrey}});
    data.push_back({{"type", "line"},
                    {"label", "achieved"},
                    {"data", got_y},
                    {"showLine", false},
                    {"pointRadius", 6},
                    {"backgroundColor", kBlue},
                    {"borderColor", kBlue}});
    json cfg = {{"type", "bar"}, {"data", {{"labels", labels}, {"datasets", data}}}};
    cfg["options"] = base_options(what, s.unit, "category");
    return cfg;
  };
  for (const auto& check : order)
    charts.push_back({"verify-" + check, "Link classes: " + check + " configured vs achieved",
                      "each class's achieved " + check +
                          " as verify measured it (the table's detail says how), against the "
                          "figure in force and its tolerance band",
                      chart(by_check[check], "link class")});
  if (!paths.labels.empty())
    charts.push_back({"verify-paths", "Paths: round trip expected vs measured",
                      "median RTT of a probe train over each path less the base over loopback; "
                      "expected = the sum of the hops' delays both ways, band = ± the summed "
                      "tolerance",
                      chart(paths, "path")});
  return charts;
}

std::vector<Chart> train_charts(const ReportInput& in) {
  std::vector<Chart> charts;
  const char* colours[] = {kBlue, kOrange, kGreen, kGrey, kRed};
  json eff = json::array(), sps = json::array();
  json labels = json::array(), compute = json::array(), exposed = json::array();
  int k = 0, max_servers = 1;
  bool any_host = false;
  for (const auto& c : in.doc) {
    const char* col = colours[k++ % 5];
    const std::string name = str(c, "label").empty() ? str(c, "lab") : str(c, "label");
    json e = json::array(), p = json::array(), styles = json::array(), ideal = json::array();
    double base_sps = 0;
    const int base = c.value("efficiency_base_servers", 0);
    for (const auto& r : c.value("rows", json::array())) {
      const int n = r.value("servers", 0);
      max_servers = std::max(max_servers, n);
      const bool host = r.value("host_bound", false);
      any_host = any_host || host;
      styles.push_back(host ? "crossRot" : "circle");
      if (n == base) base_sps = dbl(r, "samples_per_s", 0);
      if (const double v = dbl(r, "efficiency"); !std::isnan(v))
        e.push_back({{"x", n}, {"y", v * 100}});
      p.push_back({{"x", n}, {"y", dbl(r, "samples_per_s", 0)}});
      labels.push_back(name + ", " + std::to_string(n) + " server" + (n == 1 ? "" : "s") +
                       (host ? " (host-bound)" : ""));
      compute.push_back(dbl(r, "compute_ms", 0));
      exposed.push_back(dbl(r, "exposed_ms", 0));
    }
    const json line = {{"type", "line"},         {"label", name},    {"borderColor", col},
                       {"backgroundColor", col}, {"pointRadius", 6}, {"pointStyle", styles},
                       {"borderWidth", 2}};
    json el = line, pl = line;
    el["data"] = e;
    pl["data"] = p;
    eff.push_back(el);
    sps.push_back(pl);
    if (base > 0 && base_sps > 0) {
      for (const auto& r : c.value("rows", json::array()))
        ideal.push_back(
            {{"x", r.value("servers", 0)}, {"y", base_sps * r.value("servers", 0) / base}});
      sps.push_back({{"type", "line"},
                     {"label", name + ": linear from " + std::to_string(base) + " server" +
                                   (base == 1 ? "" : "s")},
                     {"data", ideal},
                     {"borderColor", col},
                     {"borderDash", {6, 4}},
                     {"pointRadius", 0},
                     {"borderWidth", 1}});
    }
  }
  eff.push_back({{"type", "line"},
                 {"label", "linear scaling (100%)"},
                 {"data", json::array({{{"x", 1}, {"y", 100}}, {{"x", max_servers}, {"y", 100}}})},
                 {"borderColor", kGrey},
                 {"borderDash", {6, 4}},
                 {"pointRadius", 0}});
  const std::string host_note =
      any_host ? "; a cross marks a host-bound row (the host's CPU, not the emulated network, "
                 "limited it: see the table)"
               : "; no row was host-bound";
  json ec = {{"type", "line"}, {"data", {{"datasets", eff}}}};
  ec["options"] = base_options("servers", "scaling efficiency (%)");
  ec["options"]["scales"]["x"]["ticks"] = {{"stepSize", 1}, {"precision", 0}};
  ec["options"]["scales"]["y"]["min"] = 0;
  ec["options"]["scales"]["y"]["suggestedMax"] = 110;
  charts.push_back({"train-efficiency", "Scaling efficiency over server count",
                    "efficiency = samples/s at N servers ÷ (N ÷ base × samples/s at the base "
                    "count), per curve" +
                        host_note,
                    ec});
  json sc = {{"type", "line"}, {"data", {{"datasets", sps}}}};
  sc["options"] = base_options("servers", "samples/s");
  sc["options"]["scales"]["x"]["ticks"] = {{"stepSize", 1}, {"precision", 0}};
  sc["options"]["scales"]["y"]["min"] = 0;
  charts.push_back({"train-samples", "Training throughput over server count",
                    "samples/s = data-parallel groups × micro-batches × samples per micro-batch "
                    "÷ the median step time; dashed: linear scaling from each curve's base row" +
                        host_note,
                    sc});
  json bars = json::array();
  bars.push_back({{"label", "compute (slept)"}, {"data", compute}, {"backgroundColor", kGreen}});
  bars.push_back(
      {{"label", "exposed communication"}, {"data", exposed}, {"backgroundColor", kRed}});
  json bc = {{"type", "bar"}, {"data", {{"labels", labels}, {"datasets", bars}}}};
  bc["options"] = base_options("curve and server count", "ms per step", "category");
  bc["options"]["scales"]["x"]["stacked"] = true;
  bc["options"]["scales"]["y"]["stacked"] = true;
  charts.push_back({"train-breakdown", "Step time: compute and exposed communication",
                    "medians over the timed steps of the slowest rank's step; exposed = step − "
                    "compute (communication not hidden behind compute)",
                    bc});
  return charts;
}

namespace {

std::string train_tables(const ReportInput& in) {
  std::string s;
  for (const auto& c : in.doc) {
    std::vector<std::vector<std::string>> rows;
    for (const auto& r : c.value("rows", json::array())) {
      std::string guard = r.value("host_bound", false) ? "HOST-BOUND" : "network";
      const auto& h = r.value("host", json::object());
      if (h.is_object())
        for (const char* key : {"evidence", "text"})
          if (!str(h, key).empty()) guard += ": " + str(h, key);
      std::string errs;
      for (const auto& e : r.value("errors", json::array()))
        errs += (errs.empty() ? "" : "; ") + (e.is_string() ? e.get<std::string>() : e.dump());
      const double e = dbl(r, "efficiency");
      rows.push_back({std::to_string(r.value("servers", 0)), std::to_string(r.value("ranks", 0)),
                      std::to_string(r.value("tp", 1)) + "/" + std::to_string(r.value("pp", 1)) +
                          "/" + std::to_string(r.value("dp", 1)),
                      std::to_string(r.value("steps", 0)), num(dbl(r, "step_ms", 0), 1),
                      num(dbl(r, "compute_ms", 0), 1), num(dbl(r, "exposed_ms", 0), 1),
                      num(dbl(r, "samples_per_s", 0), 1),
                      std::isnan(e) ? "-" : num(e * 100, 1) + "%",
                      std::to_string(r.value("wrong", 0)), guard, errs});
    }
    const auto& m = c.value("model", json::object());
    s += "<h2>" + esc(str(c, "label").empty() ? str(c, "lab") : str(c, "label")) +
         " (between "
         "servers over the " +
         esc(str(c, "tier")) + ")</h2>";
    s += "<p class=method>model: " + esc(m.dump()) + "; compute per micro-batch " +
         num(c.value("compute_real_ns", 0.0) / 1e6, 1) + " ms × [scale] compute " +
         num(dbl(c, "compute_scale", 1), 3) + ", spent in sleep; scenario " +
         esc(str(c, "scenario")) + "</p>";
    s += table({"servers", "ranks", "tp/pp/dp", "steps", "step ms", "compute ms", "exposed ms",
                "samples/s", "efficiency", "#wrong", "guard", "errors"},
               rows);
  }
  return s;
}

}  // namespace

std::string report_dot(const std::string& lab, const plan::Topology& t,
                       const std::vector<std::string>& faulted) {
  std::set<std::string> bad_ends, bad_nodes;
  for (const auto& f : faulted) {
    const auto ends = target_ends(f);
    if (ends.size() == 1)
      bad_nodes.insert(ends[0]);
    else
      bad_ends.insert(ends[0] + "|" + ends[1]);
  }
  auto q = [](const std::string& s) { return "\"" + s + "\""; };
  std::string s = "graph " + q(lab) +
                  " {\n  rankdir=TB; bgcolor=\"transparent\"; node [fontsize=10, "
                  "fontname=\"Helvetica\"]; edge [fontsize=8, fontname=\"Helvetica\"];\n";
  std::map<std::string, std::vector<const plan::Node*>> by_region;
  for (const auto& n : t.nodes) by_region[n.region].push_back(&n);
  for (const auto& [region, nodes] : by_region) {
    s += "  subgraph " + q("cluster_" + region) + " {\n    label=" + q("region " + region) +
         "; style=rounded; color=gray;\n";
    for (const auto* n : nodes) {
      const char* shape = n->kind == plan::NodeKind::kGpu      ? "box"
                          : n->kind == plan::NodeKind::kServer ? "box3d"
                                                               : "ellipse";
      s += "    " + q(n->name) + " [shape=" + shape +
           (bad_nodes.count(n->name) ? ", color=red, penwidth=3" : "") + "];\n";
    }
    s += "  }\n";
  }
  for (const auto& l : t.links) {
    const std::string a = l.a.node + ":" + l.a.ifname, b = l.b.node + ":" + l.b.ifname;
    const bool bad = bad_ends.count(a + "|" + b) || bad_ends.count(b + "|" + a);
    std::string label = std::string(plan::to_string(l.tier)) + "\\n" + format_rate(l.emulated.rate);
    if (l.emulated.delay.ns > 0) label += " " + format_duration(l.emulated.delay);
    s += "  " + q(l.a.node) + " -- " + q(l.b.node) + " [label=" + q(label) + ", color=" +
         (bad ? std::string("red, penwidth=3, style=dashed, fontcolor=red") : tier_colour(l.tier)) +
         "];\n";
  }
  return s + "}\n";
}

namespace {

// Graphviz's messages, kept for the error instead of going to stderr.
std::string gv_messages;
int keep_gv_message(char* m) {
  gv_messages += m;
  return 0;
}

// libgvc, loaded when a report draws a topology and not linked: testbedctl runs where Graphviz
// is not installed (the lab VM, a lean host) and only the topology picture needs it.
struct Gvc {
  decltype(&::gvContext) context = nullptr;
  decltype(&::gvFreeContext) free_context = nullptr;
  decltype(&::gvLayout) layout = nullptr;
  decltype(&::gvFreeLayout) free_layout = nullptr;
  decltype(&::gvRenderData) render_data = nullptr;
  decltype(&::gvFreeRenderData) free_render_data = nullptr;
  decltype(&::agmemread) memread = nullptr;
  decltype(&::agclose) close = nullptr;
  decltype(&::agseterrf) seterrf = nullptr;
};

Result<const Gvc*> load_gvc() {
  static Gvc gvc;
  static std::string error;
  static bool tried = false;
  if (!tried) {
    tried = true;
    void* h = ::dlopen("libgvc.so.6", RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
      error = missing_extra("an HTML report's topology", *find_extra("libgvc.so.6"),
                            std::string("graphviz: ") + ::dlerror())
                  .error()
                  .message;
    } else {
      auto sym = [&](auto& fn, const char* name) {
        fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(h, name));
        if (!fn && error.empty()) error = std::string("graphviz: libgvc has no ") + name;
      };
      sym(gvc.context, "gvContext");
      sym(gvc.free_context, "gvFreeContext");
      sym(gvc.layout, "gvLayout");
      sym(gvc.free_layout, "gvFreeLayout");
      sym(gvc.render_data, "gvRenderData");
      sym(gvc.free_render_data, "gvFreeRenderData");
      sym(gvc.memread, "agmemread");
      sym(gvc.close, "agclose");
      sym(gvc.seterrf, "agseterrf");
    }
  }
  if (!error.empty()) return bad_input(error);
  return &gvc;
}

}  // namespace

Result<std::string> dot_to_svg(const std::string& dot) {
  auto lib = load_gvc();
  if (!lib) return std::unexpected(lib.error());
  const Gvc& gv = **lib;
  gv_messages.clear();
  gv.seterrf(keep_gv_message);
  GVC_t* gvc = gv.context();
  if (!gvc) return bad_input("graphviz: no context (libgvc)");
  Agraph_t* g = gv.memread(dot.c_str());
  if (!g) {
    gv.free_context(gvc);
    return bad_input("graphviz: the topology's dot did not parse: " + gv_messages);
  }
  std::string svg;
  int rc = gv.layout(gvc, g, "dot");
  if (rc == 0) {
    char* buf = nullptr;
    unsigned int len = 0;
    rc = gv.render_data(gvc, g, "svg", &buf, &len);
    if (rc == 0 && buf) svg.assign(buf, len);
    if (buf) gv.free_render_data(buf);
    gv.free_layout(gvc, g);
  }
  gv.close(g);
  gv.free_context(gvc);
  if (rc != 0 || svg.empty())
    return bad_input(
        "graphviz: layout or SVG rendering failed (is Debian's graphviz installed with its "
        "plugins configured? `dot -c` registers them)");
  if (const auto at = svg.find("<svg"); at != std::string::npos) svg.erase(0, at);
  return svg;
}

std::string chart_js_path() {
  const Extra& e = *find_extra("chart.min.js");
  const char* env = std::getenv(std::string(e.env).c_str());
  return env && *env ? std::string(env) : std::string(e.where);
}

Result<std::string> html_page(const ReportInput& in, std::string_view chart_js) {
  std::vector<Chart> charts = in.kind == ReportKind::kRun     ? run_charts(in)
                              : in.kind == ReportKind::kBench ? bench_charts(in)
                              : in.kind == ReportKind::kTrain ? train_charts(in)
                                                              : verify_charts(in);
  std::string lab;
  if (in.kind != ReportKind::kTrain) {
    lab = str(in.doc, "lab");
  } else {
    for (const auto& c : in.doc)
      if (lab.find(str(c, "lab")) == std::string::npos)
        lab += (lab.empty() ? "" : ", ") + str(c, "lab");
  }
  std::string title = std::string("testbedctl ") + to_string(in.kind) + " — " + lab;
  std::string h =
      "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8><title>" + esc(title) +
      "</title>\n<style>body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;max-width:"
      "1100px}h1{font-size:1.4em}h2{font-size:1.1em;margin-top:1.5em}.method{color:#555;"
      "font-size:.85em;overflow-wrap:anywhere}.chart{position:relative;height:340px}table{border-"
      "collapse:collapse;"
      "font-size:.85em}td,th{border:1px solid #ccc;padding:2px 6px;text-align:left}"
      "#tb-errors{color:#b00;white-space:pre}.topo{overflow-x:auto}.topo svg{height:auto}</style>\n"
      "</head><body>\n<h1>" +
      esc(title) + "</h1>\n<p class=method>from " + esc(in.source) + "</p>\n";
  h += "<p class=method>how it was measured: " + esc(method_of(in)) + "</p>\n";
  if (in.topo) {
    auto svg = dot_to_svg(report_dot(lab, *in.topo, fault_targets(in)));
    if (!svg) return std::unexpected(svg.error());
    h += "<h2>Topology</h2>\n<p class=method>drawn by Graphviz from the lab's topology.json; "
         "colour per tier, each edge with its emulated rate and delay";
    if (in.kind == ReportKind::kRun) h += "; faulted links red and dashed";
    h += "</p>\n<div class=topo id=tb-topology>" + *svg + "</div>\n";
  } else {
    h += "<h2>Topology</h2><p class=method>not drawn: no topology.json beside the results "
         "(verify --html and the reports run and bench write include it)</p>\n";
  }
  // The congestion tree of the window a run or a bench measured (their JSON's "congestion").
  if (in.kind == ReportKind::kRun || in.kind == ReportKind::kBench) {
    const json cg = in.doc.value("congestion", json());
    if (const std::string dot = congestion_tree_dot(cg); !dot.empty()) {
      auto svg = dot_to_svg(dot);
      if (!svg) return std::unexpected(svg.error());
      h += "<h2>Congestion tree: which port paused which</h2>\n<p class=method>" +
           esc(congestion_tree_method(cg)) + "</p>\n<div class=topo id=tb-congestion-tree>" + *svg +
           "</div>\n";
    } else if (cg.is_object()) {
      h += "<h2>Congestion tree: which port paused which</h2>\n<p class=method>not drawn: " +
           esc(cg.value("state", std::string()) == "counted"
                   ? std::string("no port paused another in the window, none was stormed and "
                                 "the PFC watchdog did not trip")
                   : "no counts (" + cg.value("why", cg.value("state", std::string("?"))) + ")") +
           "</p>\n";
    }
  }
  json specs = json::array();
  for (const auto& c : charts) {
    h += "<h2>" + esc(c.title) + "</h2>\n<p class=method>" + esc(c.method) +
         "</p>\n<div class=chart><canvas id=\"" + esc(c.id) + "\"></canvas></div>\n";
    specs.push_back({{"id", c.id}, {"config", c.config}});
  }
  if (in.kind == ReportKind::kRun) h += run_tables(in);
  if (in.kind == ReportKind::kVerify) h += verify_tables(in);
  if (in.kind == ReportKind::kTrain) h += train_tables(in);
  h += "<pre id=tb-errors></pre>\n";
  h += "<script>\n" + script_safe(std::string(chart_js)) + "\n</script>\n";
  h +=
      "<script type=\"application/json\" id=tb-charts>" + script_safe(specs.dump()) + "</script>\n";
  h += R"(<script>
(function () {
  var errors = [];
  function fail(m) { errors.push(m); document.body.dataset.errors = errors.length;
    document.getElementById('tb-errors').textContent = errors.join('\n'); }
  window.addEventListener('error', function (e) { fail(String(e.message)); });
  var drawn = 0;
  try {
    var specs = JSON.parse(document.getElementById('tb-charts').textContent);
    specs.forEach(function (s) {
      try {
        var c = document.getElementById(s.id);
        var chart = new Chart(c.getContext('2d'), s.config);
        c.dataset.series = chart.data.datasets.length;
        var img = c.getContext('2d').getImageData(0, 0, c.width, c.height).data, painted = 0;
        for (var i = 3; i < img.length; i += 4) if (img[i] !== 0) painted++;
        c.dataset.painted = painted;
        drawn++;
      } catch (e) { fail(s.id + ': ' + e.message); }
    });
  } catch (e) { fail('charts: ' + e.message); }
  document.body.dataset.chartsDrawn = drawn;
  document.body.dataset.errors = errors.length;
})();
</script>
</body></html>
)";
  return h;
}

Result<ReportInput> read_report_inputs(const std::vector<std::string>& paths) {
  if (paths.empty()) return bad_input("report: give a results directory or a JSON file");
  auto first = read_report_input(paths.front());
  if (!first || paths.size() == 1) return first;
  if (first->kind != ReportKind::kBench && first->kind != ReportKind::kTrain)
    return bad_input("report: " + paths.front() + " is a " + to_string(first->kind) +
                     " result; several results go on one page only when they are all benches "
                     "(busbw curves side by side) or all train results");
  for (size_t i = 1; i < paths.size(); ++i) {
    auto more = read_report_input(paths[i]);
    if (!more) return std::unexpected(more.error());
    if (more->kind != first->kind)
      return bad_input("report: " + paths[i] + " is a " + to_string(more->kind) + " result and " +
                       paths.front() + " a " + to_string(first->kind) +
                       " one; compare results of one kind (all benches or all train results)");
    if (first->kind == ReportKind::kBench) {
      first->compared.push_back(std::move(more->doc));
    } else {
      for (auto& c : more->doc) first->doc.push_back(std::move(c));
    }
  }
  first->source = "";
  for (const auto& p : paths) first->source += (first->source.empty() ? "" : ", ") + p;
  return first;
}

Result<std::string> write_html(const ReportInput& in, const std::string& out) {
  auto js = read_text(chart_js_path());
  if (!js)
    return missing_extra("an HTML report", *find_extra("chart.min.js"),
                         "no " + chart_js_path() + " ($TESTBEDCTL_CHART_JS overrides the path)");
  auto page = html_page(in, *js);
  if (!page) return std::unexpected(page.error());
  TB_TRY(write_file(out, *page));
  return out;
}

Result<std::string> write_html_report(const std::string& path, const std::string& out,
                                      const plan::Topology* topo) {
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  if (topo && is_dir)
    TB_TRY(write_file(path + "/topology.json", plan::to_json(*topo).dump(1) + "\n"));
  auto in = read_report_input(path);
  if (!in) return std::unexpected(in.error());
  if (topo && !in->topo) in->topo = *topo;
  std::string target = out;
  if (target.empty())
    target =
        is_dir ? path + "/report.html" : (fs::path(path).replace_extension("").string() + ".html");
  return write_html(*in, target);
}

Result<std::string> write_html_report(const std::vector<std::string>& paths,
                                      const std::string& out) {
  if (paths.size() == 1) return write_html_report(paths.front(), out);
  auto in = read_report_inputs(paths);
  if (!in) return std::unexpected(in.error());
  std::error_code ec;
  std::string target = out;
  if (target.empty()) {
    const fs::path p = paths.front();
    target = (fs::is_directory(p, ec) ? p : p.parent_path()).string();
    target = (target.empty() ? std::string(".") : target) + "/compare.html";
  }
  return write_html(*in, target);
}

}  // namespace tb::report
