// testbedctl: parse flags, call a verb (commands.h). Nothing else lives here.
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>

#include "cli/commands.h"

namespace {

// bench's and run's transport flags. --transport is checked here against its name table (exit
// 2); the ranges where the job is made.
void add_transport_flags(CLI::App* app, tb::workload::TransportOptions& t) {
  app->add_option_function<std::string>(
         "--transport",
         [&t](const std::string& text) {
           auto kind = tb::workload::parse_transport_flag(text);
           if (!kind) throw CLI::ValidationError(kind.error().message);
           t.kind = *kind;
         },
         "tcp, or rdma (rail pairs over RDMA verbs on the lab's rxe devices)")
      ->default_str(tb::workload::to_string(t.kind));
  app->add_option("--qps", t.qps, "--transport rdma: queue pairs per peer (1..16)")
      ->capture_default_str();
  app->add_option("--ib-timeout", t.ib_timeout,
                  "--transport rdma: ACK timeout exponent, 4.096 us * 2^T (1..31)")
      ->capture_default_str();
  app->add_option("--ib-retry-cnt", t.ib_retry_cnt,
                  "--transport rdma: retries before a peer counts as gone (0..7)")
      ->capture_default_str();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"testbedctl — emulated AI-training clusters from network namespaces"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "testbedctl 0.1.0");
  bool verbose = false;
  app.add_flag("-v,--verbose", verbose, "log every kernel operation");

  std::string scenario, target, lab, node, format = "text", name, shaping = "auto";
  bool json = false, all = false;
  std::vector<std::string> command;

  auto* validate = app.add_subcommand("validate", "check a scenario file; exit 2 on bad input");
  validate->add_option("SCENARIO", scenario)->required();
  auto* plan =
      app.add_subcommand("plan", "dry run: print the kernel objects `up` would make (no root)");
  plan->add_option("SCENARIO", scenario)->required();
  plan->add_option("--format", format, "text | json")->check(CLI::IsMember({"text", "json"}));
  plan->add_option("--shaping", shaping, "auto | none | netem | tbf | htb (default auto)");
  auto* graph = app.add_subcommand("graph", "draw a scenario's or a live lab's topology");
  graph->add_option("TARGET", target, "scenario file or lab name")->required();
  graph->add_option("--format", format, "dot | mermaid")
      ->check(CLI::IsMember({"dot", "mermaid"}))
      ->default_val("dot");
  auto* up = app.add_subcommand("up", "build the lab a scenario describes (root)");
  up->add_option("SCENARIO", scenario)->required();
  up->add_option("--name", name, "lab name instead of the scenario's [lab] name");
  up->add_option("--shaping", shaping,
                 "auto (probe this kernel) | none | netem | tbf | htb (default auto)");
  std::string rdma = "auto";
  up->add_option("--rdma", rdma,
                 "auto (Soft-RoCE on every GPU rail NIC when a probe transfer between two "
                 "namespaces works) | none (default auto)")
      ->check(CLI::IsMember({"auto", "none"}));
  auto* down = app.add_subcommand("down", "remove everything a lab made; idempotent (root)");
  down->add_option("TARGET", target, "lab name or scenario file")->required();
  auto* clean =
      app.add_subcommand("clean", "remove leftovers by owner marker when state is lost (root)");
  clean->add_option("LAB", lab);
  clean->add_flag("--all", all, "every lab's leftovers");
  auto* status =
      app.add_subcommand("status", "servers, GPUs, interfaces, addresses, links, backends");
  status->add_option("LAB", lab);
  status->add_flag("--json", json);
  auto* exec = app.add_subcommand("exec", "run a command inside a node's namespace (root)");
  exec->add_option("LAB", lab)->required();
  exec->add_option("NODE", node, "e.g. hz/s0/g3 or hz-s0-g3")->required();
  exec->add_option("CMD", command, "command and arguments, after --")->required();
  auto* link =
      app.add_subcommand("link", "change a live link in place: set, reset, down, up (root)");
  std::string action, end_a, end_b, rate_s, delay_s, jitter_s, loss_s;
  link->add_option("LAB", lab)->required();
  link->add_option("ACTION", action, "set | reset | down | up")
      ->required()
      ->check(CLI::IsMember({"set", "reset", "down", "up"}));
  link->add_option("A", end_a, "node, or node:interface")->required();
  link->add_option("B", end_b, "node, or node:interface")->required();
  link->add_option("--rate", rate_s, "emulated rate, e.g. 200mbit (0 = unlimited)");
  link->add_option("--delay", delay_s, "one-way delay, e.g. 30ms");
  link->add_option("--jitter", jitter_s, "delay standard deviation, e.g. 1ms");
  link->add_option("--loss", loss_s, "random loss, e.g. 0.5%");
  auto* supervise = app.add_subcommand("supervise", "");  // internal: started by up
  supervise->add_option("LAB", lab)->required();
  supervise->group("");
  auto* doctor = app.add_subcommand("doctor", "probe what this kernel offers and what falls back");
  doctor->add_flag("--json", json);
  std::vector<std::string> link_ends;
  bool quick = false;
  auto* verify = app.add_subcommand(
      "verify", "measure each link class against the scenario; exit 1 out of tolerance (root)");
  verify->add_option("LAB", lab)->required();
  verify->add_option("--link", link_ends, "only the link between A and B: NODE[:IF] NODE[:IF]")
      ->expected(2);
  verify->add_flag("--json", json);
  verify->add_flag("--quick", quick, "200 probes and a 2 s transfer per class, not 1000 and 5 s");
  tb::cli::BenchFlags bf;
  auto* bench = app.add_subcommand(
      "bench", "nccl-tests-style collective benchmark between the lab's GPUs (root)");
  bench->add_option("LAB", lab)->required();
  bench
      ->add_option("COLLECTIVE", bf.coll,
                   "allreduce|allgather|reducescatter|broadcast|reduce|alltoall|sendrecv")
      ->required();
  bench->add_option("-b,--minbytes", bf.min_bytes, "smallest size (K/M/G = 1024^n)")
      ->capture_default_str();
  bench->add_option("-e,--maxbytes", bf.max_bytes, "largest size")->capture_default_str();
  bench->add_option("-f,--stepfactor", bf.step_factor, "multiply the size by this each step")
      ->capture_default_str();
  bench->add_option("-n,--iters", bf.iters, "timed iterations per size")->capture_default_str();
  bench->add_option("-w,--warmup_iters", bf.warmup, "untimed warm-up iterations per size")
      ->capture_default_str();
  bench->add_option("-c,--check", bf.check, "separate untimed correctness runs per size")
      ->capture_default_str();
  bench->add_option("--algo", bf.algo, "ring|tree|hd|hier (default: the implementation's)");
  bench->add_option("--ranks", bf.ranks, "GPUs: all, a region, a server or a GPU; ','-joined")
      ->capture_default_str();
  bench->add_option("--channels", bf.transport.channels, "TCP connections per peer (native)")
      ->capture_default_str();
  bench->add_option("--impl", bf.impl, "native|gloo")->capture_default_str();
  add_transport_flags(bench, bf.transport);
  bench->add_option("-d,--datatype", bf.type, "float|int32|double|int64")->capture_default_str();
  bench->add_option("-o,--op", bf.op, "sum|min|max")->capture_default_str();
  bench->add_option("-r,--root", bf.root, "root rank (broadcast, reduce)")->capture_default_str();
  bench->add_option("--timeout", bf.timeout_s, "seconds without progress before a rank fails")
      ->capture_default_str();
  bench->add_option("--json", bf.json_path, "also write the JSON twin here");
  tb::cli::FaultFlags ff;
  auto* fault = app.add_subcommand(
      "fault", "inject a fault into a live lab; blocks while it lasts, then reverts it (root)");
  fault->add_option("LAB", lab)->required();
  fault
      ->add_option("KIND", ff.kind,
                   "link-down|link-up|flap|loss|blackhole|latency A B; partition R1 R2; "
                   "crash|kill NODE")
      ->required();
  fault->add_option("ARGS", ff.args, "link ends, regions or a node");
  fault->add_option("--for", ff.for_text, "how long before it is reverted (0: it stays)");
  fault->add_option("--period", ff.period_text, "flap: one down+up cycle, e.g. 500ms");
  fault->add_option("--count", ff.count, "flap: cycles");
  fault->add_option("--loss", ff.loss_text, "loss: e.g. 5%");
  fault->add_option("--delay", ff.delay_text, "latency: added one-way delay, e.g. 50ms");
  fault->add_option("--link", ff.link, "the WAN link's name when several join two routers");
  tb::cli::RunFlags rf;
  std::string run_target;
  auto* run = app.add_subcommand(
      "run", "a scenario end to end: workload, fault timeline, recovery, [expect] (root)");
  run->add_option("SCENARIO_OR_LAB", run_target)->required();
  run->add_option("--name", rf.name, "lab name when bringing a scenario up");
  run->add_option("--workload", rf.workload, "a [[workload]] name, or none (default: the first)");
  run->add_option("--size", rf.size, "the steady workload's message size")->capture_default_str();
  run->add_option("--timeout", rf.timeout_s, "ranks' idle timeout, seconds")->capture_default_str();
  run->add_option("--shaping", rf.shaping, "when it brings the lab up")->capture_default_str();
  add_transport_flags(run, rf.transport);
  run->add_flag("--down", rf.down, "take the lab down afterwards");
  run->add_flag("--resilient", rf.resilient,
                "restart the workload's ranks after a failure instead of ending it");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : tb::kExitBadInput;
  }
  // Logs go to stderr, so `--json` and `plan --format json` stay parseable with -v.
  spdlog::set_default_logger(spdlog::stderr_color_mt("testbedctl"));
  spdlog::set_level(verbose ? spdlog::level::debug : spdlog::level::warn);
  spdlog::set_pattern("%^%l%$: %v");

  using namespace tb::cli;
  if (*validate) return cmd_validate(scenario);
  if (*plan) return cmd_plan(scenario, format, shaping);
  if (*graph) return cmd_graph(target, format);
  if (*up) return cmd_up(scenario, name, shaping, rdma);
  if (*down) return cmd_down(target);
  if (*clean) return cmd_clean(lab, all);
  if (*status) return cmd_status(lab, json);
  if (*exec) return cmd_exec(lab, node, command);
  if (*doctor) return cmd_doctor(json);
  if (*verify) return cmd_verify(lab, link_ends, json, quick);
  if (*bench) return cmd_bench(lab, bf);
  if (*fault) return cmd_fault(lab, ff);
  if (*run) return cmd_run(run_target, rf);
  if (*supervise) return cmd_supervise(lab);
  if (*link) {
    tb::lab::FigureChange c;
    auto bad = [](const tb::Error& e, const char* flag) {
      std::fprintf(stderr, "testbedctl: link --%s: %s\n", flag, e.message.c_str());
      return tb::kExitBadInput;
    };
    if (!rate_s.empty()) {
      auto r = tb::parse_rate(rate_s);
      if (!r) return bad(r.error(), "rate");
      c.rate = *r;
    }
    if (!delay_s.empty()) {
      auto d = tb::parse_duration(delay_s);
      if (!d) return bad(d.error(), "delay");
      c.delay = *d;
    }
    if (!jitter_s.empty()) {
      auto d = tb::parse_duration(jitter_s);
      if (!d) return bad(d.error(), "jitter");
      c.jitter = *d;
    }
    if (!loss_s.empty()) {
      auto l = tb::parse_percent(loss_s);
      if (!l) return bad(l.error(), "loss");
      c.loss_pct = *l;
    }
    return cmd_link(lab, action, end_a, end_b, c);
  }
  return tb::kExitBadInput;
}
