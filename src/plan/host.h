// What the planner needs to know about the host a lab is built on: which shaping mechanisms and
// whether Soft-RoCE work. capability/ finds it by real checks (host_for_plan); a dry run without
// root, the golden tests and other hosts' plans fill it in by hand. Plain data.
//
// What the user asked for (PlanOptions) is decided against it in plan::compile: the shaping
// backend (choose_shaping), the delay stages, the rxe devices.
// Thread-safe (plain values, pure functions).
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace tb::plan {

struct HostCaps {
  bool netem = false, tbf = false, htb = false;
  bool red = false;      // sch_red with ECN: ecn ports mark in the kernel (issue 32)
  bool dctcp = false;    // tcp_dctcp: an ecn region's TCP is DCTCP rather than cubic
  bool nfqueue = false;  // the userspace delay stage can run
  bool rxe = false;      // Soft-RoCE carries RC traffic between namespaces
  // How these were found: "probed", or "assumed (not root: nothing probed)".
  std::string how;
  // True when the shaping fields above come from real checks on this kernel (host_for_plan as
  // root): a backend asked for by name must then be one of them.
  bool probed = false;
  // rxe: the check's words ("doctor's rdma_rxe probe: ..."), kept in the lab's state.
  std::string rxe_detail;
  bool rxe_checked = false;  // false: not checked (--rdma none, or nothing probed)
};

// What a user assumes of a host they cannot probe (not root, a golden test): tbf and the delay
// stage work, netem and rxe do not — this machine's kernel (research/limits.md).
HostCaps assumed_host(std::string how = "assumed (not root: nothing probed)");

struct PlanOptions {
  std::string lab;               // lab name instead of the scenario's [lab] name; "" = keep
  std::string shaping = "auto";  // auto | none | netem | tbf | htb
  std::string rdma = "auto";     // auto (rxe devices where the host has Soft-RoCE) | none
  // The [[host]] whose part to plan (`up --host`); "" = every host's part (`plan`).
  std::string host;
};

// Checks the options' spelling (exit code 2 naming the flag and what is valid).
Status validate(const PlanOptions& o);
// Each option's value alone, as the CLI checks it while the command line is parsed: the message
// says what is wrong with the value and what is valid; the caller (validate(), CLI11) names the
// flag.
Status check_lab_name(std::string_view lab);     // --name: 1-32 of [a-z0-9], a letter first
Status check_shaping(std::string_view shaping);  // --shaping: auto, none or a backend kind
Status check_rdma(std::string_view rdma);        // --rdma: auto or none

struct ShapingChoice {
  std::string backend;  // registry kind, or "none"
  std::string how;      // "probed", "asked", "assumed (not root: nothing probed)"
};

// The backend `requested` means on `host`: "none" is taken as asked, and so is a named backend
// the host has (any named backend when the host was not probed); a named backend a probed host
// lacks is refused (exit code 2, naming the missing capability and the usable backends), so
// `up` builds nothing it would have to roll back. "auto" is the first backend of the registry's
// preference the host has.
Result<ShapingChoice> choose_shaping(const std::string& requested, const HostCaps& host);

}  // namespace tb::plan
