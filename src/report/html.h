// HTML reports (`testbedctl report`, and `run`/`bench`/`train`/`verify --html` on their own):
// one self-contained file per result that opens offline in any browser. It is made from the
// result's JSON only (summary.json + events.jsonl of a run, bench.json of a bench, the JSON
// `verify --json` prints, train.json or train-all.json of `train`) and the lab's topology.json
// saved beside it, so a results directory copied to another machine gives the same report with
// the lab gone.
//
// The pictures: the topology as inline SVG drawn by Graphviz (libgvc; regions as clusters,
// tiers coloured, emulated rate and delay on each edge, faulted links red); charts drawn by
// Chart.js (Debian's libjs-chart.js, inlined) from configurations built here, never by drawing
// code of our own; and the method line of every text report beside its picture. The page's
// script records what it drew on <body> (data-charts-drawn, data-errors) and on each canvas
// (data-series), which the browser test reads.
//
// Pure functions apart from read_report_input / write_html_report (files) and dot_to_svg
// (libgvc, which is not thread-safe: one call at a time).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "plan/topology.h"

namespace tb::report {

enum class ReportKind { kRun, kBench, kVerify, kTrain };
const char* to_string(ReportKind k);

struct ReportInput {
  ReportKind kind = ReportKind::kRun;
  std::string source;  // the directory or file it was read from
  nlohmann::json doc;  // summary.json, bench.json, verify's JSON, or train's curves (an array)
  std::vector<nlohmann::json> events;  // a run's events.jsonl
  // A run's congestion.jsonl: the congestion agent's pause episodes in the run's window
  // (congestion/episodes.h; report/html_congestion.h draws them).
  std::vector<nlohmann::json> congestion_episodes;
  nlohmann::json workload_job;           // a run's workload/job.json (its message size), or null
  std::optional<plan::Topology> topo;    // topology.json beside the result, when there
  std::vector<nlohmann::json> compared;  // benches drawn beside doc (`report DIR DIR...`)
};

// PATH is a results directory (a run's: summary.json; a bench's: bench.json; train's:
// train-all.json, else train.json) or a JSON file `verify --json` or `train --json` wrote.
// What it is not is exit 2 saying what would be valid.
Result<ReportInput> read_report_input(const std::string& path);
// Several results on one page: benches (their busbw curves side by side; `compared`) or train
// results (every curve); one path is read_report_input. Other kinds, or a mix, are exit 2.
Result<ReportInput> read_report_inputs(const std::vector<std::string>& paths);

// One chart: an id for its canvas, a title, how it was measured, and the Chart.js
// configuration ({"type", "data", "options"}).
struct Chart {
  std::string id, title, method;
  nlohmann::json config;
};
std::vector<Chart> run_charts(const ReportInput& in);
std::vector<Chart> bench_charts(const ReportInput& in);
std::vector<Chart> verify_charts(const ReportInput& in);
// Scaling efficiency and samples/s over server count, one curve per train result, and the step
// time split into compute and exposed communication; host-bound rows marked.
std::vector<Chart> train_charts(const ReportInput& in);

// The topology as Graphviz dot in the report's style: regions as clusters, a colour per tier,
// each edge labelled with its emulated rate and delay; links named in `faulted` (targets as the
// fault timeline prints them: "link-down dc/s1/g1:rail <-> dc/tor0:s1g1") drawn red and bold.
std::string report_dot(const std::string& lab, const plan::Topology& t,
                       const std::vector<std::string>& faulted);
// dot → SVG through libgvc (layout "dot"); the SVG element alone, without the XML prolog.
Result<std::string> dot_to_svg(const std::string& dot);

// Where Chart.js is read from: $TESTBEDCTL_CHART_JS, else Debian libjs-chart.js's
// /usr/share/javascript/chart.js/chart.min.js.
std::string chart_js_path();

// The whole page. chart_js is the library's text, inlined.
Result<std::string> html_page(const ReportInput& in, std::string_view chart_js);

// Writes the page for `in` to OUT (SafeDir rules: the file is never followed) and returns OUT.
Result<std::string> write_html(const ReportInput& in, const std::string& out);

// Reads PATH, writes the page to OUT (default: report.html in the results directory, or
// FILE.html beside a verify JSON file) and returns OUT. With `topo`, topology.json is first
// written into the results directory (run and bench call it so with the lab's topology).
Result<std::string> write_html_report(const std::string& path, const std::string& out = "",
                                      const plan::Topology* topo = nullptr);
// Several results compared on one page (read_report_inputs); OUT defaults to compare.html in
// the first one's directory.
Result<std::string> write_html_report(const std::vector<std::string>& paths,
                                      const std::string& out);

}  // namespace tb::report
