// bench: nccl-tests on a live lab. One tb-rank per selected GPU inside its namespace, the
// sweep -b..-e by -f, a row per size as soon as every rank has it, the footer, and the JSON
// twin (report/bench.h; written here to bench.json in the run's results directory, and --json
// FILE writes a copy).
// Exit 0 when every size ran on every rank with #wrong = 0; 1 on a wrong value or a failed
// rank; 2 for bad input (unknown lab, flags, selectors, not root, --transport rdma where no
// rail pair has RDMA).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/stop_signals.h"
#include "cli/transport_flags.h"
#include "congestion/counters.h"
#include "core/process.h"
#include "core/units.h"
#include "lab/state.h"
#include "launch/across_hosts.h"
#include "launch/bench_run.h"
#include "report/bench.h"
#include "report/congestion.h"
#include "report/html.h"

namespace tb::cli {
using tb::launch::BenchOptions;
using tb::launch::prepare_job;
using tb::launch::run_job;
namespace {

struct BenchFlags {
  std::string coll;
  std::string min_bytes = "8K", max_bytes = "64M";
  double step_factor = 2;
  int iters = 20, warmup = 5, check = 1, root = 0, in_place = 1;
  std::string algo, type = "float", op = "sum", ranks = "all", impl = "native", json_path;
  std::string tier = "auto";
  double timeout_s = 30;
  workload::TransportOptions transport;  // --transport, its tunables, --channels
  int rendezvous_port = multihost::kDefaultPort;
};

// nccl-tests on a live lab: one tb-rank per GPU; exit 1 on a wrong value or a failed rank.
int cmd_bench(const std::string& lab, const BenchFlags& f) {
  using namespace workload;
  BenchOptions o;
  auto coll = collective::parse_coll(f.coll);
  if (!coll)
    return report(Error{"unknown collective '" + f.coll +
                            "'; use allreduce, allgather, "
                            "reducescatter, broadcast, reduce, alltoall or sendrecv",
                        0, kExitBadInput});
  o.spec.coll = *coll;
  if (!f.algo.empty()) {
    auto a = collective::parse_algo(f.algo);
    if (!a)
      return report(
          Error{"--algo: '" + f.algo + "' is not ring, tree, hd or hier", 0, kExitBadInput});
    o.spec.algo = *a;
  }
  auto type = collective::parse_type(f.type);
  if (!type)
    return report(Error{"-d/--datatype: '" + f.type + "' is not float, int32, double or int64", 0,
                        kExitBadInput});
  o.spec.type = *type;
  auto op = collective::parse_op(f.op);
  if (!op) return report(Error{"-o/--op: '" + f.op + "' is not sum, min or max", 0, kExitBadInput});
  o.spec.op = *op;
  auto minb = parse_size(f.min_bytes);
  if (!minb) return report(Error{"-b/--minbytes: " + minb.error().message, 0, kExitBadInput});
  auto maxb = parse_size(f.max_bytes);
  if (!maxb) return report(Error{"-e/--maxbytes: " + maxb.error().message, 0, kExitBadInput});
  o.spec.min_bytes = *minb;
  o.spec.max_bytes = *maxb;
  o.spec.step_factor = f.step_factor;
  o.spec.iters = f.iters;
  o.spec.warmup = f.warmup;
  o.spec.check = f.check;
  o.spec.in_place = f.in_place != 0;
  o.spec.root = f.root;
  o.ranks = f.ranks;
  o.tier = f.tier;
  auto impl = parse_impl(f.impl);
  if (!impl)
    return report(Error{"--impl: '" + f.impl + "' is not " + impl_choices(), 0, kExitBadInput});
  o.impl = *impl;
  o.timeout_ms = static_cast<int>(f.timeout_s * 1000);
  o.transport = f.transport;
  o.rendezvous_port = f.rendezvous_port;
  // Every flag's own error before the lab is looked up.
  if (auto r = launch::check_options(o); !r) return report(r.error());
  if (!f.json_path.empty()) {
    const auto dir = std::filesystem::path(f.json_path).parent_path();
    if (!dir.empty() && !std::filesystem::is_directory(dir))
      return report(Error{"--json: " + dir.string() +
                              " is not a directory (the JSON twin goes to " + f.json_path + ")",
                          0, kExitBadInput});
  }

  auto st = lab::load_state(lab);
  if (!st) return report(Error{st.error().message, 0, kExitBadInput});
  if (st->phase != "up")
    return report(Error{"lab " + lab + " is " + st->phase + ", not up", 0, kExitBadInput});
  auto job = prepare_job(*st, o);
  if (!job) return report(job.error());
  if (auto rc = require_root("bench")) return *rc;
  auto tb_rank = find_companion("tb-rank", "TESTBEDCTL_RANK");
  if (!tb_rank) return report(tb_rank.error());
  o.tb_rank = *tb_rank;

  if (job->transport.kind == Transport::kRdma) {
    const auto pairs = count_rdma_pairs(*job);
    std::fprintf(stderr, "bench %s: --transport rdma: %d of %d rail pair(s) over RDMA\n",
                 lab.c_str(), pairs.rdma, pairs.rail);
    for (const auto& why : job->rdma_fallback)
      std::fprintf(stderr, "bench %s: TCP fallback: %s\n", lab.c_str(), why.c_str());
  }

  StopSignals signals;
  auto hosts = launch::job_hosts(*st, *job, launch::RdmaAcross::kBench);
  if (!hosts) return report(hosts.error());
  if (hosts->idle()) {
    std::fprintf(stderr,
                 "bench %s: host %s holds none of the selected ranks (%s); nothing to do here\n",
                 lab.c_str(), hosts->me.c_str(), hosts->summary().c_str());
    return kExitOk;
  }
  if (hosts->joins()) {
    std::fprintf(stderr, "bench %s: host %s runs %d of %zu ranks (%s); host %s coordinates\n",
                 lab.c_str(), hosts->me.c_str(), hosts->local_count(), job->ranks.size(),
                 hosts->summary().c_str(), hosts->coordinator.c_str());
    auto out = launch::serve_job(
        *job, *hosts, "bench", st->digest, o.rendezvous_port, o.tb_rank,
        [&](const std::string& line) {
          std::fprintf(stderr, "bench %s: %s\n", lab.c_str(), line.c_str());
        },
        signals.flag());
    if (!out) return report(out.error());
    for (const auto& e : out->errors)
      std::fprintf(stderr, "bench %s: %s\n", lab.c_str(), e.c_str());
    std::fprintf(stderr,
                 "bench %s: %s; rows, bench.json and every rank's log are on host %s in %s\n",
                 lab.c_str(), out->ok ? "done" : "FAILED", out->coordinator.c_str(),
                 out->results_dir.c_str());
    return out->ok ? kExitOk : kExitFailed;
  }
  if (hosts->coordinates())
    std::fprintf(stderr,
                 "bench %s: ranks on hosts %s; this host (%s) coordinates on %s:%d and waits for "
                 "the others to join\n",
                 lab.c_str(), hosts->summary().c_str(), hosts->me.c_str(),
                 hosts->coordinator_addr.to_string().c_str(), o.rendezvous_port);
  std::fprintf(stderr, "bench %s: starting %zu ranks (%s over %s); results in %s\n", lab.c_str(),
               job->ranks.size(), to_string(o.impl).c_str(), to_string(job->transport.kind).c_str(),
               job->results_dir.c_str());
  // The congestion agent's counters around the run (congestion/counters.h): bench.json's
  // "congestion", one footer line.
  const auto cg_before = congestion::read_counters(lab::lab_dir(lab));
  auto res = run_job(
      *job, *st, o,
      [](const BenchResult& r) { std::cout << report::bench_header(r) << std::flush; },
      [](const BenchResult& r, const BenchRow& row) {
        std::cout << report::bench_row(r, row) << std::flush;
      },
      signals.flag());
  if (!res) return report(res.error());
  const auto cg_window = congestion::delta(cg_before, congestion::read_counters(lab::lab_dir(lab)));
  auto res_json = report::bench_json(*res);
  if (cg_window.source != congestion::Source::kNoAgent) {
    res_json["congestion"] = congestion::to_json(cg_window, /*window=*/true);
    res_json["congestion"]["measured"] =
        "the agent's stats file read before the ranks started and after they exited; counts "
        "are the difference (this host's agent)";
  }
  if (auto w = write_file(res->results_dir + "/bench.json", res_json.dump(1) + "\n"); !w)
    std::fprintf(stderr, "bench %s: %s\n", lab.c_str(), w.error().message.c_str());
  if (res->describe.empty()) std::cout << report::bench_header(*res);
  std::cout << report::bench_footer(*res);
  if (const auto line = report::congestion_window_line(cg_window); !line.empty())
    std::cout << "# " << line << "\n";
  std::cout << std::flush;
  // The HTML twin (report/html.h), with the lab's topology saved beside for later reports.
  if (auto h = report::write_html_report(res->results_dir, "", &st->topo))
    std::fprintf(stderr, "bench %s: report: %s\n", lab.c_str(), h->c_str());
  else
    std::fprintf(stderr, "bench %s: no HTML report: %s\n", lab.c_str(), h.error().message.c_str());
  if (!f.json_path.empty()) {
    // The user's path: its directory as named, the file itself never a symlink (core/safe_file.h).
    if (auto w = write_file(f.json_path, res_json.dump(1) + "\n"); !w)
      return report(Error{"--json: " + w.error().message, w.error().sys_errno, kExitBadInput});
  }
  return res->ok() ? kExitOk : kExitFailed;
}

}  // namespace

void add_bench(CLI::App& app, int& rc) {
  auto lab = std::make_shared<std::string>();
  auto flags = std::make_shared<BenchFlags>();
  BenchFlags& bf = *flags;
  auto* bench = app.add_subcommand(
      "bench", "nccl-tests-style collective benchmark between the lab's GPUs (root)");
  bench->add_option("LAB", *lab)->required()->check(lab_name());
  bench
      ->add_option("COLLECTIVE", bf.coll,
                   "allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv")
      ->required();
  bench->add_option("-b,--minbytes", bf.min_bytes, "smallest size (K/M/G = 1024^n)")
      ->capture_default_str()
      ->check(size_text());
  bench->add_option("-e,--maxbytes", bf.max_bytes, "largest size")
      ->capture_default_str()
      ->check(size_text());
  bench->add_option("-f,--stepfactor", bf.step_factor, "multiply the size by this each step")
      ->capture_default_str()
      ->check(real_in(workload::kStepFactorRange));
  bench->add_option("-n,--iters", bf.iters, "timed iterations per size")
      ->capture_default_str()
      ->check(whole_in(workload::kItersRange));
  bench->add_option("-w,--warmup_iters", bf.warmup, "untimed warm-up iterations per size")
      ->capture_default_str()
      ->check(whole_in(workload::kWarmupRange));
  bench
      ->add_option("-c,--check", bf.check,
                   "untimed correctness runs per size and placement, before and after timing")
      ->capture_default_str()
      ->check(whole_in(workload::kCheckRange));
  bench
      ->add_option("--in-place", bf.in_place,
                   "1: time and check in place too (nccl-tests' in-place columns); 0: out of "
                   "place only")
      ->capture_default_str()
      ->check(whole_in({0, 1}));
  bench->add_option("--algo", bf.algo, "ring|tree|hd|hier (default: the implementation's)");
  bench->add_option("--ranks", bf.ranks, "GPUs: all, a region, a server or a GPU; ','-joined")
      ->capture_default_str();
  bench
      ->add_option("--tier", bf.tier,
                   "auto (NVLink in a server, rail across servers, WAN across regions) or "
                   "frontend (the VPC network instead of the rail: launch --tier frontend's path)")
      ->capture_default_str();
  bench->add_option("--channels", bf.transport.channels, "TCP connections per peer (native)")
      ->capture_default_str()
      ->check(whole_in(collective::kChannelsRange));
  bench
      ->add_option_function<std::string>(
          "--ports",
          [&bf](const std::string& text) {
            if (text != "route" && text != "spread")
              throw CLI::ValidationError("--ports: '" + text + "' is not route or spread");
            bf.transport.spread_ports = text == "spread";
          },
          "native tcp over a dual-ToR rail: route (the routing table's multipath hash picks "
          "each connection's NIC port) or spread (channel c bound to port c mod ports at "
          "both ends, as NCCL binds channels to ports)")
      ->default_str("route");
  bench->add_option("--impl", bf.impl, "native|gloo")->capture_default_str();
  add_transport_flags(bench, bf.transport);
  bench->add_option("-d,--datatype", bf.type, "float|int32|double|int64")->capture_default_str();
  bench->add_option("-o,--op", bf.op, "sum|min|max")->capture_default_str();
  bench->add_option("-r,--root", bf.root, "root rank (broadcast, reduce)")
      ->capture_default_str()
      ->check(whole_in({0, std::numeric_limits<int>::max()}));
  bench
      ->add_option(
          "--timeout", bf.timeout_s,
          "seconds the collective may make no progress (no rank moves a byte) before a rank fails")
      ->capture_default_str()
      ->check(real_in(workload::kRankTimeoutSeconds));
  bench->add_option("--json", bf.json_path, "also write the JSON twin here");
  bench
      ->add_option("--rendezvous-port", bf.rendezvous_port,
                   "a lab over several hosts: the TCP port the coordinating host listens on (its "
                   "underlay address), the same on every host")
      ->capture_default_str()
      ->check(whole_in({1, 65535}));
  bench->callback([lab, flags, &rc] { rc = cmd_bench(*lab, *flags); });
}

}  // namespace tb::cli
