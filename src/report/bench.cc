#include "report/bench.h"

#include <nlohmann/json.hpp>

#include "report/format.h"

namespace tb::report {
using workload::BenchResult;
using workload::BenchRow;

std::string bench_transport_note(const BenchResult& r) {
  std::string s = r.transport;
  if (r.transport == "rdma") {
    s += fmt::format(
        ": {} of {} rail pair(s) over RDMA verbs SEND/RECV ({} QP(s)/peer, "
        "ib_timeout {}, retry {}), the rest over TCP",
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
    if (r.rnr_naks)
      s += fmt::format(
          "; receiver-not-ready NAKs during the run: {} (hw_counters send_rnr_err of those "
          "devices, after - before)",
          *r.rnr_naks);
  }
  if (r.intra_server == "shm")
    s += "; intra-server pairs over SHARED MEMORY (--intra-server shm): they bypass the emulated "
         "NVLink links, their shaping and faults";
  s += "; lab rdma: " + (r.lab_rdma.empty() ? std::string("none") : r.lab_rdma);
  if (!r.lab_rdma_why.empty()) s += " (" + r.lab_rdma_why + ")";
  if (!r.hosts.empty())
    s += "; ranks on hosts " + r.hosts +
         ": pairs across hosts over VXLAN tunnels on the underlay, rows gathered on the first";
  return s;
}

std::string bench_measured_note(const BenchResult& r) {
  return "time = wall time of " + std::to_string(r.spec.iters) +
         " back-to-back calls per rank on CLOCK_MONOTONIC after " + std::to_string(r.spec.warmup) +
         " warm-up calls and a barrier, divided by the calls, averaged over ranks, out of place" +
         (r.spec.in_place ? " and in place" : "") +
         ", buffers at an offset shifted each iteration; #wrong from " +
         std::to_string(r.spec.check) +
         " separate untimed check run(s) before and as many after the timed calls, per size and "
         "placement; impl: " +
         r.describe + "; transport: " + bench_transport_note(r) +
         "; link shaping: " + (r.shaping.empty() ? "none" : r.shaping);
}

std::string bench_header(const BenchResult& r) {
  std::string s;
  s += "# testbedctl bench: " + std::string(collective::name(r.spec.coll)) + " on lab " + r.lab +
       ", " + std::to_string(r.nodes.size()) + " ranks, algorithm " + r.algo_label + "\n";
  s += "#  impl " + r.impl + " (" + r.describe + ")\n";
  s += "#  transport " + bench_transport_note(r) + "\n";
  for (const auto& f : r.rdma_fallback) s += "#  tcp fallback: " + f + "\n";
  s += "#  results " + r.results_dir + "\n";
  for (size_t i = 0; i < r.nodes.size(); ++i)
    s += fmt::format("#  Rank {:3} on {}\n", i, r.nodes[i]);
  s += "#\n";
  // nccl-tests' columns: out-of-place then in-place time, algbw, busbw, #wrong; then the
  // out-of-place busbw in Gbit/s (link rates are given in bits).
  s += fmt::format("# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:^38}  {:^38}\n", "", "", "", "", "",
                   "out-of-place", "in-place");
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>10}  {:>8}  {:>8}  {:>6}  {:>10}  {:>8}  {:>8}  "
      "{:>6}  {:>10}\n",
      "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time", "algbw",
      "busbw", "#wrong", "busbw");
  s += fmt::format(
      "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>10}  {:>8}  {:>8}  {:>6}  {:>10}  {:>8}  {:>8}  "
      "{:>6}  {:>10}\n",
      "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)", "(GB/s)",
      "", "(Gbit/s)");
  return s;
}

// Floats are right-aligned explicitly: fmt 9 would put "inf" and "nan" on the left.
std::string bench_row(const BenchResult& r, const BenchRow& row) {
  const bool reduces = collective::reduces(r.spec.coll);
  const bool rooted = collective::rooted(r.spec.coll);
  const std::string in_place =
      row.in_place
          ? fmt::format("{:>10.1f}  {:>8.4f}  {:>8.4f}  {:6}", row.in_place->time_us,
                        row.in_place->algbw_gbps, row.in_place->busbw_gbps, row.in_place->wrong)
          : fmt::format("{:>10}  {:>8}  {:>8}  {:>6}", "-", "-", "-", "-");
  return fmt::format(
      "  {:10}  {:12}  {:>8}  {:>6}  {:6}  {:>10.1f}  {:>8.4f}  {:>8.4f}  {:6}  {}  {:>10.4f}\n",
      row.bytes, row.count, collective::name(r.spec.type),
      reduces ? collective::name(r.spec.op) : "none", rooted ? r.spec.root : -1, row.time_us,
      row.algbw_gbps, row.busbw_gbps, row.wrong, in_place, row.busbw_gbps * 8);
}

std::string bench_footer(const BenchResult& r) {
  std::string s;
  for (const auto& e : r.errors) s += "# FAILED " + e + "\n";
  s += fmt::format("# Out of bounds values : {} {}\n", r.wrong(), r.ok() ? "OK" : "FAILED");
  s += fmt::format("# Avg bus bandwidth    : {:.4f} GB/s ({:.4f} Gbit/s)\n", r.avg_busbw(),
                   r.avg_busbw() * 8);
  s += "# Measured: " + bench_measured_note(r) + "\n";
  return s;
}

nlohmann::json bench_json(const BenchResult& r) {
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
    if (row.in_place) {  // the same figures in place (nccl-tests' second set of columns)
      const auto& p = *row.in_place;
      nlohmann::json pit = nlohmann::json::array();
      for (auto [a, b] : p.iter_ns) pit.push_back({{"start_ns", a}, {"end_ns", b}});
      rows.back()["in_place"] = {{"time_us", p.time_us},       {"algbw_gbps", p.algbw_gbps},
                                 {"busbw_gbps", p.busbw_gbps}, {"busbw_gbit", p.busbw_gbps * 8},
                                 {"wrong", p.wrong},           {"rank_time_us", p.rank_time_us},
                                 {"iterations", pit}};
    }
  }
  return {{"lab", r.lab},
          {"run_id", r.run_id},
          {"results_dir", r.results_dir},
          {"collective", collective::name(r.spec.coll)},
          {"algo", r.algo_label},
          {"impl", r.impl},
          {"describe", r.describe},
          {"shaping", r.shaping},
          {"hosts", r.hosts},
          {"transport",
           {{"kind", r.transport},
            {"intra_server", r.intra_server},
            {"qps", r.qps},
            {"ib_timeout", r.ib_timeout},
            {"ib_retry_cnt", r.ib_retry_cnt},
            {"rdma_pairs", r.rdma_pairs},
            {"rail_pairs", r.rail_pairs},
            {"rdma_devices", r.rdma_devices},
            {"rdma_fallback", r.rdma_fallback},
            {"rnr_naks", r.rnr_naks ? nlohmann::json(*r.rnr_naks) : nlohmann::json(nullptr)}}},
          {"lab_rdma", {{"status", r.lab_rdma}, {"why", r.lab_rdma_why}}},
          {"nranks", r.nodes.size()},
          {"ranks", r.nodes},
          {"spec", workload::to_json(r.spec)},
          {"rows", rows},
          {"wrong", r.wrong()},
          {"avg_busbw_gbps", r.avg_busbw()},
          {"complete", r.complete},
          {"errors", r.errors},
          {"ok", r.ok()},
          {"clock", "CLOCK_MONOTONIC ns (shared by every namespace; events.jsonl uses it too)"},
          {"measured", bench_measured_note(r)}};
}

}  // namespace tb::report
