// train: the training-step workload on live labs and the scaling efficiency it gives
// (experiment/train_sweep.h). The model comes from the lab's scenario (its kind = "training"
// workloads, or --workload NAME; the defaults of docs/scenario.md when it has none),
// each flag overrides one field; without --workload every training workload of the scenario
// runs. With several curves (labs or workloads) they are printed side by side too (the VPC vs
// HPN experiment: scenarios/vpc-vs-hpn.toml).
// Output: per lab the assumptions, one row per server count, the guard's verdicts; the lab's
// JSON as train.json in its last row's results directory, and every lab's in --json FILE.
// Exit 0 when every row ran every step with #wrong = 0; 1 on a failed rank or a wrong value;
// 2 for bad input (unknown lab, flags, a sweep count the lab cannot give, not root).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/stop_signals.h"
#include "cli/transport_flags.h"
#include "core/process.h"
#include "core/safe_file.h"
#include "core/units.h"
#include "experiment/train_sweep.h"
#include "lab/state.h"
#include "launch/bench_run.h"
#include "report/html.h"
#include "report/train.h"
#include "scenario/loader.h"

namespace tb::cli {
namespace {

struct TrainFlags {
  std::string workload, ranks, tier, servers, activation_bytes, bucket_bytes, compute, json_path;
  int64_t params = -1;
  int grad_bytes = -1, layers = -1, micro_batches = -1, samples = -1, tp = -1, pp = -1, steps = -1,
      warmup = -1;
  double compute_scale = -1;
  double timeout_s = 30;
  workload::TransportOptions transport;
  bool channels_set = false;
};

Result<std::vector<int>> parse_servers(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    auto n = parse_whole(part, {1, 100000});
    if (!n) return bad_input("--servers: " + n.error().message + " (e.g. 1,2,4)");
    if (!out.empty() && *n <= out.back())
      return bad_input("--servers: must increase (got " + part + " after " +
                       std::to_string(out.back()) + ")");
    out.push_back(static_cast<int>(*n));
  }
  if (out.empty()) return bad_input("--servers: give server counts, e.g. 1,2,4");
  return out;
}

// Applies the flags on top of a workload's options.
Status apply_flags(experiment::TrainOptions& o, const TrainFlags& f) {
  auto& p = o.spec;
  if (!f.ranks.empty()) o.ranks = f.ranks;
  if (!f.tier.empty()) o.frontend = f.tier == "frontend";
  if (!f.servers.empty()) {
    auto v = parse_servers(f.servers);
    if (!v) return std::unexpected(v.error());
    o.servers = *v;
  }
  if (f.params > 0) p.params = static_cast<uint64_t>(f.params);
  if (f.grad_bytes > 0) p.grad_bytes = f.grad_bytes;
  if (!f.activation_bytes.empty()) p.activation_bytes = *parse_size(f.activation_bytes);
  if (f.layers > 0) p.layers = f.layers;
  if (f.micro_batches > 0) p.micro_batches = f.micro_batches;
  if (f.samples > 0) p.samples = f.samples;
  if (f.tp > 0) p.tp = f.tp;
  if (f.pp > 0) p.pp = f.pp;
  if (!f.bucket_bytes.empty()) p.bucket_bytes = *parse_size(f.bucket_bytes);
  if (f.steps > 0) p.steps = f.steps;
  if (f.warmup >= 0) p.warmup = f.warmup;
  if (!f.compute.empty()) o.compute_real_ns = parse_duration(f.compute)->ns;
  if (f.compute_scale > 0) o.compute_scale = f.compute_scale;
  p.compute_ns = static_cast<int64_t>(static_cast<double>(o.compute_real_ns) * o.compute_scale);
  const int channels = o.transport.channels;
  o.transport = f.transport;
  if (!f.channels_set) o.transport.channels = channels;
  o.timeout_ms = static_cast<int>(f.timeout_s * 1000);
  return {};
}

struct Run {
  std::string label;  // "lab" or "lab/workload"
  lab::LabState st;
  experiment::TrainOptions o;
};

// One lab's runs: its scenario's kind = "training" workloads (every one, or --workload NAME;
// the defaults of docs/scenario.md when it has none), each with the flags on top.
Status runs_for(const lab::LabState& st, const TrainFlags& f, std::vector<Run>& out) {
  auto s = scenario::load(st.scenario);
  if (!s) return std::unexpected(with_context(s.error(), "lab " + st.lab + "'s scenario"));
  std::vector<const scenario::Workload*> ws;
  for (const auto& x : s->workloads)
    if (x.kind == "training" && (f.workload.empty() || x.name == f.workload)) ws.push_back(&x);
  if (!f.workload.empty() && ws.empty())
    return bad_input("--workload " + f.workload + ": no kind = \"training\" [[workload]] of " +
                     "that name in " + st.scenario);
  scenario::Workload defaults;
  defaults.kind = "training";
  defaults.warmup = 1;
  if (ws.empty()) ws.push_back(&defaults);
  for (const auto* w : ws) {
    Run r{ws.size() > 1 ? st.lab + "/" + w->name : st.lab, st, experiment::train_options(*s, *w)};
    TB_TRY(apply_flags(r.o, f));
    if (auto c = experiment::check_train(st, r.o); !c)
      return std::unexpected(with_context(c.error(), r.label));
    out.push_back(std::move(r));
  }
  return {};
}

int cmd_train(const std::vector<std::string>& labs, const TrainFlags& f) {
  if (!f.servers.empty())
    if (auto v = parse_servers(f.servers); !v) return report(v.error());
  std::vector<Run> runs;
  for (const auto& name : labs) {
    auto st = lab::load_state(name);
    if (!st) return report(Error{st.error().message, 0, kExitBadInput});
    if (st->phase != "up")
      return report(Error{"lab " + name + " is " + st->phase + ", not up", 0, kExitBadInput});
    if (auto r = runs_for(*st, f, runs); !r) return report(r.error());
  }
  if (auto rc = require_root("train")) return *rc;
  auto tb_rank = find_companion("tb-rank", "TESTBEDCTL_RANK");
  if (!tb_rank) return report(tb_rank.error());

  StopSignals signals;
  std::vector<experiment::TrainResult> results;
  nlohmann::json all = nlohmann::json::array();
  bool ok = true;
  for (auto& [label, st, o] : runs) {
    o.tb_rank = *tb_rank;
    bool header = false;
    auto res = experiment::run_train(
        st, o,
        [&](const experiment::TrainResult& r) {
          if (!header) {
            std::cout << report::train_header(r) << report::train_columns();
            header = true;
          }
          std::cout << report::train_row(r.rows.back(), r.base_servers) << std::flush;
        },
        signals.flag());
    if (!res) return report(res.error());
    res->label = label;
    // Efficiency may have moved once the whole sweep was in (a failed smallest row).
    std::cout << report::train_footer(*res) << std::flush;
    const auto j = report::train_json(*res);
    all.push_back(j);
    if (!res->rows.empty()) {
      const std::string path = res->rows.back().results_dir + "/train.json";
      if (auto w = write_file(path, j.dump(1) + "\n"); !w)
        std::fprintf(stderr, "train %s: %s\n", label.c_str(), w.error().message.c_str());
      else
        std::printf("train %s: JSON in %s\n", label.c_str(), path.c_str());
    }
    ok = ok && res->ok();
    results.push_back(std::move(*res));
    if (signals.flag().load()) break;
  }
  if (results.size() > 1)
    std::cout << "\nside by side (samples/s marked (host) were host-bound):\n"
              << report::train_compare(results);
  // The HTML report: every curve of this call, in the last one's results directory (with
  // train-all.json when there are several, so `report DIR` redraws them all).
  if (!results.empty() && !results.back().rows.empty()) {
    const std::string dir = results.back().rows.back().results_dir;
    Status all_ok = {};
    if (results.size() > 1) all_ok = write_file(dir + "/train-all.json", all.dump(1) + "\n");
    const auto& last = runs[results.size() - 1].st;
    auto html = all_ok ? report::write_html_report(dir, "", &last.topo)
                       : Result<std::string>(std::unexpected(all_ok.error()));
    if (html)
      std::printf("train: report in %s\n", html->c_str());
    else
      std::fprintf(stderr, "train: no HTML report: %s\n", html.error().message.c_str());
  }
  if (!f.json_path.empty()) {
    if (auto w = write_file(f.json_path, all.dump(1) + "\n"); !w)
      return report(Error{"--json: " + w.error().message, w.error().sys_errno, kExitBadInput});
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_train(CLI::App& app, int& rc) {
  auto labs = std::make_shared<std::vector<std::string>>();
  auto flags = std::make_shared<TrainFlags>();
  TrainFlags& f = *flags;
  auto* t = app.add_subcommand(
      "train",
      "training steps (data/tensor/pipeline parallel) on live labs: step time, exposed "
      "communication, samples/s and scaling efficiency over a sweep of server counts (root)");
  t->add_option("LAB", *labs, "one lab, or several to compare side by side")
      ->required()
      ->check(lab_name());
  t->add_option("--workload", f.workload,
                "one kind = \"training\" workload of the scenario (default: every one)");
  t->add_option("--ranks", f.ranks, "GPUs: all, a region, a server or a GPU; ','-joined");
  t->add_option("--tier", f.tier,
                "between servers: rail (auto) or frontend (the VPC); default: the scenario's")
      ->check(CLI::IsMember({"auto", "rail", "frontend"}));
  t->add_option("--servers", f.servers, "server counts of the sweep, e.g. 1,2,4")
      ->check(checked_by([](const std::string& s) { return parse_servers(s); }, "N,N,..."));
  t->add_option("--params", f.params, "model parameters")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000'000}));
  t->add_option("--grad-bytes", f.grad_bytes, "bytes per gradient element")
      ->check(whole_in(workload::kGradBytesRange));
  t->add_option("--activation-bytes", f.activation_bytes, "activations per micro-batch")
      ->check(size_text());
  t->add_option("--layers", f.layers, "layers of the model")
      ->check(whole_in(workload::kTrainLayersRange));
  t->add_option("--micro-batches", f.micro_batches, "micro-batches per step")
      ->check(whole_in(workload::kTrainMicroBatchesRange));
  t->add_option("--samples", f.samples, "samples per micro-batch")
      ->check(whole_in(workload::kTrainMicroBatchesRange));
  t->add_option("--tp", f.tp, "tensor-parallel ranks (inside a server)")
      ->check(whole_in(workload::kTrainParallelRange));
  t->add_option("--pp", f.pp, "pipeline stages")->check(whole_in(workload::kTrainParallelRange));
  t->add_option("--bucket", f.bucket_bytes, "DDP gradient bucket size")->check(size_text());
  t->add_option("--compute", f.compute, "real compute per micro-batch per GPU")
      ->check(duration_text());
  t->add_option("--compute-scale", f.compute_scale,
                "emulated compute = real x this (default: the scenario's [scale] compute)")
      ->check(real_in({1e-6, 1e6}));
  t->add_option("--steps", f.steps, "timed steps")->check(whole_in(workload::kTrainStepsRange));
  t->add_option("--warmup", f.warmup, "untimed steps first")
      ->check(whole_in(workload::kTrainWarmupRange));
  t->add_option_function<int>(
       "--channels",
       [&f](int c) {
         f.transport.channels = c;
         f.channels_set = true;
       },
       "TCP connections per peer")
      ->check(whole_in(collective::kChannelsRange));
  add_transport_flags(t, f.transport);
  t->add_option("--timeout", f.timeout_s,
                "seconds a collective may make no progress before a rank fails")
      ->capture_default_str()
      ->check(real_in(workload::kRankTimeoutSeconds));
  t->add_option("--json", f.json_path, "also write every lab's JSON here");
  t->callback([labs, flags, &rc] { rc = cmd_train(*labs, *flags); });
}

}  // namespace tb::cli
