#include "workload/bench_report.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "metrics/busbw.h"

namespace tb::workload {
namespace {

std::string fmt(const char* f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

}  // namespace

BenchRow combine_rows(collective::Coll coll, int n, const std::vector<RankRow>& per_rank) {
  BenchRow row;
  if (per_rank.empty()) return row;
  row.bytes = per_rank.front().bytes;
  row.count = per_rank.front().count;
  double sum = 0;
  for (const auto& r : per_rank) {
    sum += r.time_us;
    row.wrong += r.wrong;
    row.rank_time_us.push_back(r.time_us);
  }
  row.time_us = sum / static_cast<double>(per_rank.size());
  const auto bw = metrics::bandwidth(coll, row.bytes, row.time_us, n);
  row.algbw_gbps = bw.algbw_gbps;
  row.busbw_gbps = bw.busbw_gbps;
  const size_t iters = per_rank.front().iter_ns.size();
  for (size_t i = 0; i < iters; ++i) {
    int64_t s = INT64_MAX, e = 0;
    for (const auto& r : per_rank) {
      if (i >= r.iter_ns.size()) continue;
      s = std::min(s, r.iter_ns[i].first);
      e = std::max(e, r.iter_ns[i].second);
    }
    row.iter_ns.emplace_back(s, e);
  }
  return row;
}

uint64_t BenchResult::wrong() const {
  uint64_t w = 0;
  for (const auto& r : rows) w += r.wrong;
  return w;
}

double BenchResult::avg_busbw() const {
  if (rows.empty()) return 0;
  double s = 0;
  for (const auto& r : rows) s += r.busbw_gbps;
  return s / static_cast<double>(rows.size());
}

std::string transport_note(const BenchResult& r) {
  std::string s = r.transport;
  if (r.transport == "rdma") {
    s +=
        fmt(": %d of %d rail pair(s) over RDMA verbs SEND/RECV (%d QP(s)/peer, ib_timeout %d, "
            "retry %d), the rest over TCP",
            r.rdma_pairs, r.rail_pairs, r.qps, r.ib_timeout, r.ib_retry_cnt);
    // Known once the ranks have connected (the footer and the JSON), not in the header.
    std::string devs;
    bool known = false;
    for (size_t i = 0; i < r.rdma_devices.size(); ++i) {
      devs += (devs.empty() ? "" : " ") + std::to_string(i) + "=" +
              (r.rdma_devices[i].empty() ? "-" : r.rdma_devices[i]);
      known = known || !r.rdma_devices[i].empty();
    }
    if (known) s += "; RDMA devices by rank: " + devs;
  }
  s += "; lab rdma: " + (r.lab_rdma.empty() ? std::string("none") : r.lab_rdma);
  if (!r.lab_rdma_why.empty()) s += " (" + r.lab_rdma_why + ")";
  return s;
}

std::string measured_note(const BenchResult& r) {
  return "time = wall time of " + std::to_string(r.spec.iters) +
         " back-to-back calls per rank on CLOCK_MONOTONIC after " + std::to_string(r.spec.warmup) +
         " warm-up calls and a barrier, divided by the calls, averaged over ranks; #wrong from " +
         std::to_string(r.spec.check) +
         " separate untimed check run(s) per size; impl: " + r.describe +
         "; transport: " + transport_note(r) +
         "; link shaping: " + (r.shaping.empty() ? "none" : r.shaping);
}

std::string table_header(const BenchResult& r) {
  std::string s;
  s += "# testbedctl bench: " + std::string(collective::name(r.spec.coll)) + " on lab " + r.lab +
       ", " + std::to_string(r.nodes.size()) + " ranks, algorithm " + r.algo_label + "\n";
  s += "#  impl " + r.impl + " (" + r.describe + ")\n";
  s += "#  transport " + transport_note(r) + "\n";
  for (const auto& f : r.rdma_fallback) s += "#  tcp fallback: " + f + "\n";
  s += "#  results " + r.results_dir + "\n";
  for (size_t i = 0; i < r.nodes.size(); ++i)
    s += fmt("#  Rank %3zu on %s\n", i, r.nodes[i].c_str());
  s += "#\n";
  s += fmt("# %10s  %12s  %8s  %6s  %6s  %10s  %8s  %8s  %7s  %10s\n", "size", "count", "type",
           "redop", "root", "time", "algbw", "busbw", "#wrong", "busbw");
  s += fmt("# %10s  %12s  %8s  %6s  %6s  %10s  %8s  %8s  %7s  %10s\n", "(B)", "(elements)", "", "",
           "", "(us)", "(GB/s)", "(GB/s)", "", "(Gbit/s)");
  return s;
}

std::string table_row(const BenchResult& r, const BenchRow& row) {
  const bool reduces = collective::reduces(r.spec.coll);
  const bool rooted = collective::rooted(r.spec.coll);
  return fmt("  %10llu  %12llu  %8s  %6s  %6d  %10.1f  %8.4f  %8.4f  %7llu  %10.4f\n",
             static_cast<unsigned long long>(row.bytes), static_cast<unsigned long long>(row.count),
             std::string(collective::name(r.spec.type)).c_str(),
             reduces ? std::string(collective::name(r.spec.op)).c_str() : "none",
             rooted ? r.spec.root : -1, row.time_us, row.algbw_gbps, row.busbw_gbps,
             static_cast<unsigned long long>(row.wrong), row.busbw_gbps * 8);
}

std::string table_footer(const BenchResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += "# FAILED " + e + "\n";
  s += fmt("# Out of bounds values : %llu %s\n", static_cast<unsigned long long>(r.wrong()),
           r.ok() ? "OK" : "FAILED");
  s += fmt("# Avg bus bandwidth    : %.4f GB/s (%.4f Gbit/s)\n", r.avg_busbw(), r.avg_busbw() * 8);
  s += "# Measured: " + measured_note(r) + "\n";
  return s;
}

nlohmann::json to_json(const BenchResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json it = nlohmann::json::array();
    for (auto [a, b] : row.iter_ns) it.push_back({{"start_ns", a}, {"end_ns", b}});
    rows.push_back(
        {{"size_bytes", row.bytes},
         {"count", row.count},
         {"type", collective::name(r.spec.type)},
         {"redop", collective::reduces(r.spec.coll) ? collective::name(r.spec.op) : "none"},
         {"root", collective::rooted(r.spec.coll) ? r.spec.root : -1},
         {"time_us", row.time_us},
         {"algbw_gbps", row.algbw_gbps},
         {"busbw_gbps", row.busbw_gbps},
         {"busbw_gbit", row.busbw_gbps * 8},
         {"wrong", row.wrong},
         {"rank_time_us", row.rank_time_us},
         {"iterations", it}});
  }
  return {{"lab", r.lab},
          {"run_id", r.run_id},
          {"results_dir", r.results_dir},
          {"collective", collective::name(r.spec.coll)},
          {"algo", r.algo_label},
          {"impl", r.impl},
          {"describe", r.describe},
          {"shaping", r.shaping},
          {"transport",
           {{"kind", r.transport},
            {"qps", r.qps},
            {"ib_timeout", r.ib_timeout},
            {"ib_retry_cnt", r.ib_retry_cnt},
            {"rdma_pairs", r.rdma_pairs},
            {"rail_pairs", r.rail_pairs},
            {"rdma_devices", r.rdma_devices},
            {"rdma_fallback", r.rdma_fallback}}},
          {"lab_rdma", {{"status", r.lab_rdma}, {"why", r.lab_rdma_why}}},
          {"nranks", r.nodes.size()},
          {"ranks", r.nodes},
          {"spec", to_json(r.spec)},
          {"rows", rows},
          {"wrong", r.wrong()},
          {"avg_busbw_gbps", r.avg_busbw()},
          {"complete", r.complete},
          {"errors", r.errors},
          {"ok", r.ok()},
          {"clock", "CLOCK_MONOTONIC ns (shared by every namespace; events.jsonl uses it too)"},
          {"measured", measured_note(r)}};
}

}  // namespace tb::workload
