// Internals of the capability probe (capabilities.h is the public face): a probe's outcome, the
// forked-child harness every real probe runs in, the one place that executes external tools, and
// the probe functions the registry in capabilities.cc lists.
//
// Harness contract: in_child() forks; the child joins fresh namespaces (by default a new network
// namespace, anonymous: nothing is named, and the kernel frees every object in it when the child
// exits), runs the probe, writes its outcome to a pipe and _exits. The parent waits at most the
// timeout, then SIGKILLs the child's process group. Probes therefore never touch the caller's
// namespace. Call from one thread at a time (fork + pipe per call; no shared state).
#pragma once

#include <sched.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "apply/capabilities.h"

namespace tb::apply::probe {

using Outcome = ProbeOutcome;
inline Outcome yes(std::string detail) {
  return {true, std::move(detail)};
}
inline Outcome no(std::string detail) {
  return {false, std::move(detail)};
}

inline constexpr std::chrono::milliseconds kChildTimeout{5000};

// Runs `fn` in a forked child after unshare(`unshare_flags`) (0: stay in the caller's namespaces).
// An unshare refused for lack of privilege reads "needs root (...)".
Outcome in_child(const std::function<Outcome()>& fn, int unshare_flags = CLONE_NEWNET,
                 std::chrono::milliseconds timeout = kChildTimeout);

// External tools. Shelling out is reserved for what has no library interface (iptables' xtables
// targets, nft's expression compiler); run_tool is the only function that execs.
//
// Absolute path of an executable `name` in $PATH or the sbin/bin directories, or "" when absent.
std::string find_tool(const std::string& name);
struct ToolRun {
  enum class State { kExited, kTimedOut, kExecFailed };
  State state = State::kExecFailed;
  int exit_code = -1;
  std::string output;  // stdout and stderr, trimmed, at most a few hundred characters
};
// Runs `path` with `args` (no shell) in the current namespaces, LC_ALL=C, bounded by `timeout`.
ToolRun run_tool(const std::string& path, const std::vector<std::string>& args,
                 std::chrono::milliseconds timeout = std::chrono::milliseconds(4000));

// "<name>" for one probe's created veth pair inside the child ("tbp0" <-> "tbp1").
inline constexpr const char* kProbeVeth = "tbp0";
inline constexpr const char* kProbeVethPeer = "tbp1";

// The probes (capability_links.cc, capability_qdiscs.cc, capability_tools.cc).
Outcome probe_root();
Outcome probe_netns();
Outcome probe_netns_dir();
Outcome probe_veth();
Outcome probe_bridge();
Outcome probe_vxlan();
Outcome probe_macvlan();
Outcome probe_dummy();
Outcome probe_bonding();
Outcome probe_vrf();
Outcome probe_multipath();
Outcome probe_htb();
Outcome probe_tbf();
Outcome probe_netem();
Outcome probe_fq_codel();
Outcome probe_prio();
Outcome probe_ingress();
Outcome probe_clsact();
Outcome probe_nfqueue();
Outcome probe_nft_numgen();
Outcome probe_rdma_netlink();
Outcome probe_rdma_rxe();
Outcome probe_frr();
Outcome probe_kvm();
Outcome probe_qemu();

}  // namespace tb::apply::probe
