#include "report/train.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "report/congestion.h"
#include "report/format.h"

namespace tb::report {
namespace {

std::string bytes_text(const std::map<std::string, uint64_t>& bytes) {
  std::string out;
  for (const auto& [tier, b] : bytes)
    out += (out.empty() ? "" : " ") +
           fmt::format("{}:{:.1f}M", tier.empty() ? "-" : tier, static_cast<double>(b) / (1 << 20));
  return out.empty() ? "-" : out;
}

std::string host_text(const experiment::TrainRow& row) {
  if (row.host.host_bound) return "HOST-BOUND";
  return row.host.cpu_busy < 0 ? "?" : fmt::format("ok {:.0f}%", row.host.cpu_busy * 100);
}

}  // namespace

std::string train_header(const experiment::TrainResult& r) {
  const auto& s = r.spec;
  std::string out = fmt::format("train {}: {} over {}, between servers the {} tier, shaping {}\n",
                                r.label.empty() ? r.lab : r.label, r.scenario, r.transport, r.tier,
                                r.shaping.empty() ? "none" : r.shaping);
  out += fmt::format(
      "model: {} parameters, {} B per gradient element, {} layers, activations {} B per "
      "micro-batch, {} micro-batch(es) of {} samples per step; tp {} x pp {} x dp (the rest); "
      "DDP buckets of {} B\n",
      s.params, s.grad_bytes, s.layers, s.activation_bytes, s.micro_batches, s.samples, s.tp, s.pp,
      s.bucket_bytes);
  out += fmt::format(
      "compute: {:.3f} ms per micro-batch per GPU (real) x [scale] compute {:g} = {:.3f} ms "
      "emulated, 1/3 forward 2/3 backward, spent in sleep (the CPU stays free for the emulated "
      "links)\n",
      static_cast<double>(r.compute_real_ns) / 1e6, r.compute_scale,
      static_cast<double>(s.compute_ns) / 1e6);
  out += fmt::format(
      "method: {} warm-up step(s), then {} timed; per step the slowest rank's time, median over "
      "steps; exposed = step - compute; bytes = every rank's sends in one step (ring AllReduce "
      "2(n-1)/n); efficiency = samples/s at N / (N x samples/s at 1 server)\n",
      s.warmup, s.steps);
  return out;
}

std::string train_columns() {
  return cell("servers", 7) + cell("ranks", 5) + cell("tp/pp/dp", 8) + cell("step ms", 9) +
         cell("compute", 8) + cell("exposed", 8) + cell("tp ms", 7) + cell("pp ms", 7) +
         cell("dp wait", 8) + cell("samples/s", 10) + cell("effic.", 7) + cell("#wrong", 6) +
         cell("host", 10) + "bytes/step by tier\n";
}

std::string train_row(const experiment::TrainRow& row, int base_servers) {
  std::string eff = "-";
  if (row.ok() && base_servers > 0)
    eff = fmt::format("{:.1f}%{}", row.efficiency * 100, base_servers == 1 ? "" : "*");
  return cell(std::to_string(row.servers), 7) + cell(std::to_string(row.ranks), 5) +
         cell(fmt::format("{}/{}/{}", row.tp, row.pp, row.dp), 8) +
         cell(fmt::format("{:.2f}", row.step_ms), 9) +
         cell(fmt::format("{:.2f}", row.compute_ms), 8) +
         cell(fmt::format("{:.2f}", row.exposed_ms), 8) +
         cell(fmt::format("{:.2f}", row.tp_ms), 7) + cell(fmt::format("{:.2f}", row.pp_ms), 7) +
         cell(fmt::format("{:.2f}", row.dp_wait_ms), 8) +
         cell(fmt::format("{:.1f}", row.samples_per_s), 10) + cell(eff, 7) +
         cell(std::to_string(row.wrong), 6) + cell(host_text(row), 10) + bytes_text(row.bytes) +
         "\n";
}

// A ToR's ECMP line is printed when it sent at least this much up (the JSON has every group).
constexpr uint64_t kEcmpShownBytes = 1 << 20;

std::string ecmp_text(const experiment::TrainRow& row) {
  std::string out;
  for (const auto& g : row.ecmp) {
    if (g.total < kEcmpShownBytes) continue;  // control traffic, ACKs: no flows to hash
    std::string shares;
    for (size_t i = 0; i < g.links.size(); ++i)
      shares += fmt::format("{}{} {:.0f}%", shares.empty() ? "" : ", ",
                            g.links[i].substr(g.links[i].rfind(':') + 1),
                            100.0 * static_cast<double>(g.bytes[i]) / static_cast<double>(g.total));
    out += fmt::format(
        "{} server(s): ECMP {} -> spines, {:.1f} MB: {} ({} of {} links carrying >= {:.0f}%, "
        "busiest {:.2f}x an even share)\n",
        row.servers, g.node, static_cast<double>(g.total) / 1e6, shares, g.carrying, g.links.size(),
        experiment::kEcmpCarrying * 100, g.max_share * static_cast<double>(g.links.size()));
  }
  return out;
}

std::string train_footer(const experiment::TrainResult& r) {
  std::string out;
  if (r.base_servers > 1)
    out += fmt::format(
        "* efficiency relative to {} servers (no 1-server row): samples/s at N / (N/{} x samples/s "
        "at {})\n",
        r.base_servers, r.base_servers, r.base_servers);
  for (const auto& row : r.rows) {
    if (row.host.host_bound)
      out += fmt::format("{} server(s): HOST-BOUND, not the network's figure: {}\n", row.servers,
                         row.host.text());
    out += ecmp_text(row);
    if (const auto pfc = congestion_window_line(row.congestion); !pfc.empty())
      out += fmt::format("{} server(s): {}\n", row.servers, pfc);
    if (!row.link_error.empty())
      out += fmt::format("{} server(s): links not read ({}): no ECMP shares, no link check\n",
                         row.servers, row.link_error);
    for (const auto& e : row.errors) out += fmt::format("{} server(s): {}\n", row.servers, e);
    if (row.wrong > 0)
      out += fmt::format("{} server(s): {} reduced values were wrong\n", row.servers, row.wrong);
    out += fmt::format("{} server(s): results in {}\n", row.servers, row.results_dir);
  }
  for (const auto& e : r.errors) out += e + "\n";
  return out;
}

std::string train_compare(const std::vector<experiment::TrainResult>& labs) {
  std::set<int> counts;
  for (const auto& l : labs)
    for (const auto& row : l.rows) counts.insert(row.servers);
  std::string out = cell("servers", 7);
  for (const auto& l : labs)
    out += cell((l.label.empty() ? l.lab : l.label) + " samples/s", 24) + cell("effic.", 7) +
           cell("step ms", 8) + cell("exposed", 8);
  out += "\n";
  for (int n : counts) {
    out += cell(std::to_string(n), 7);
    for (const auto& l : labs) {
      const experiment::TrainRow* row = nullptr;
      for (const auto& x : l.rows)
        if (x.servers == n) row = &x;
      if (!row || !row->ok()) {
        out += cell("-", 24) + cell("-", 7) + cell("-", 8) + cell("-", 8);
        continue;
      }
      out +=
          cell(fmt::format("{:.1f}{}", row->samples_per_s, row->host.host_bound ? " (host)" : ""),
               24) +
          cell(fmt::format("{:.1f}%", row->efficiency * 100), 7) +
          cell(fmt::format("{:.2f}", row->step_ms), 8) +
          cell(fmt::format("{:.2f}", row->exposed_ms), 8);
    }
    out += "\n";
  }
  return out;
}

nlohmann::json train_json(const experiment::TrainResult& r) {
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& row : r.rows) {
    nlohmann::json links = nlohmann::json::array(), ecmp = nlohmann::json::array();
    for (const auto& l : row.links)
      if (l.ab + l.ba > 0 || l.tier == plan::to_string(plan::Tier::kAggregation))
        links.push_back({{"a", l.a},
                         {"b", l.b},
                         {"tier", l.tier},
                         {"emulated_bps", l.emulated_bps},
                         {"bytes_ab", l.ab},
                         {"bytes_ba", l.ba}});
    for (const auto& g : row.ecmp) {
      nlohmann::json shares = nlohmann::json::array();
      for (size_t i = 0; i < g.links.size(); ++i)
        shares.push_back(
            {{"link", g.links[i]},
             {"bytes", g.bytes[i]},
             {"share",
              g.total ? static_cast<double>(g.bytes[i]) / static_cast<double>(g.total) : 0.0}});
      ecmp.push_back({{"node", g.node},
                      {"bytes", g.total},
                      {"links", shares},
                      {"carrying", g.carrying},
                      {"max_share", g.max_share}});
    }
    rows.push_back({{"servers", row.servers},
                    {"ranks", row.ranks},
                    {"tp", row.tp},
                    {"pp", row.pp},
                    {"dp", row.dp},
                    {"run_id", row.run_id},
                    {"results_dir", row.results_dir},
                    {"steps", row.steps},
                    {"step_ms", row.step_ms},
                    {"compute_ms", row.compute_ms},
                    {"exposed_ms", row.exposed_ms},
                    {"tp_ms", row.tp_ms},
                    {"pp_ms", row.pp_ms},
                    {"dp_wait_ms", row.dp_wait_ms},
                    {"bytes_per_step", row.bytes},
                    {"samples_per_s", row.samples_per_s},
                    {"efficiency", row.ok() ? nlohmann::json(row.efficiency) : nlohmann::json()},
                    {"wrong", row.wrong},
                    {"host", verify::to_json(row.host)},
                    {"host_bound", row.host.host_bound},
                    {"links", links},
                    {"links_error", row.link_error},
                    {"ecmp", ecmp},
                    {"errors", row.errors}});
    if (row.congestion.source != congestion::Source::kNoAgent) {
      rows.back()["congestion"] = congestion::to_json(row.congestion, /*window=*/true);
      rows.back()["congestion"]["measured"] =
          "the agent's stats file read when every rank had joined and after the ranks exited "
          "(the host guard's window); counts are the difference";
    }
  }
  return {{"label", r.label},
          {"lab", r.lab},
          {"scenario", r.scenario},
          {"shaping", r.shaping},
          {"transport", r.transport},
          {"tier", r.tier},
          {"model", workload::to_json(r.spec)},
          {"compute_real_ns", r.compute_real_ns},
          {"compute_scale", r.compute_scale},
          {"efficiency_base_servers", r.base_servers},
          {"method",
           "per step the slowest rank's step time, median over the timed steps; exposed = step - "
           "compute (compute spent in sleep); bytes = every rank's sends in one step; efficiency "
           "= samples/s at N / (N / base x samples/s at base servers); links: bytes each way from "
           "the a end's interface counters over the guard's window (read every 0.5 s); ecmp: per "
           "ToR with 2+ spine uplinks, the share of the bytes it sent up over each"},
          {"rows", rows},
          {"errors", r.errors},
          {"ok", r.ok()}};
}

}  // namespace tb::report
