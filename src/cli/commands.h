// testbedctl verbs. Each returns the process exit code (0 ok, 1 failed, 2 bad input or
// environment) and prints its own output; main.cc only parses flags.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "lab/link_change.h"
#include "lab/up.h"
#include "workload/transport.h"

namespace tb::cli {

struct Common {
  bool json = false;
};

int cmd_validate(const std::string& scenario);
int cmd_plan(const std::string& scenario, const std::string& format, const std::string& shaping);
int cmd_graph(const std::string& target, const std::string& format);
int cmd_up(const std::string& scenario, const std::string& name, const std::string& shaping,
           const std::string& rdma = "auto");
int cmd_down(const std::string& target);
// What `up` prints once a lab is up (also `run` when it brings the lab up).
void print_up(const lab::UpReport& r);
int cmd_clean(const std::string& lab, bool all);
int cmd_status(const std::string& lab, bool json);
int cmd_exec(const std::string& lab, const std::string& node, const std::vector<std::string>& argv);
int cmd_doctor(bool json);
int cmd_link(const std::string& lab, const std::string& action, const std::string& a,
             const std::string& b, const lab::FigureChange& change);
// Measure each link class (or the --link A B one) against the scenario; exit 1 out of tolerance.
int cmd_verify(const std::string& lab, const std::vector<std::string>& link, bool json, bool quick);
struct BenchFlags {
  std::string coll;
  std::string min_bytes = "8K", max_bytes = "64M";
  double step_factor = 2;
  int iters = 20, warmup = 5, check = 1, root = 0;
  std::string algo, type = "float", op = "sum", ranks = "all", impl = "native", json_path;
  double timeout_s = 30;
  workload::TransportOptions transport;  // --transport, its tunables, --channels
};
// nccl-tests on a live lab: one tb-rank per GPU; exit 1 on a wrong value or a failed rank.
int cmd_bench(const std::string& lab, const BenchFlags& f);
struct FaultFlags {
  std::string kind;  // link-down link-up flap loss blackhole latency partition crash kill
  std::vector<std::string> args;  // A B | R1 R2 | NODE
  std::string for_text, period_text, delay_text, loss_text, link;
  int count = 0;
};
// Inject one fault by hand; blocks while it lasts, then reverts it.
int cmd_fault(const std::string& lab, const FaultFlags& f);
struct RunFlags {
  std::string name, workload, size = "1M", shaping = "auto";
  double timeout_s = 30;
  bool down = false, resilient = false;
  workload::TransportOptions transport;  // the workload's (its channels: the [[workload]]'s)
};
// A scenario end to end: workload + fault timeline + recovery analysis + [expect].
int cmd_run(const std::string& target, const RunFlags& f);
// Internal: the lab supervisor daemon `up` starts (runner/supervisor.h).
int cmd_supervise(const std::string& lab);

// Prints "testbedctl: <message>" to stderr and returns the error's exit code.
int report(const Error& e);
// Exit code 2 with a clear message unless we run as root.
std::optional<int> require_root(const std::string& verb);

}  // namespace tb::cli
