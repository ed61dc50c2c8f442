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

#include "capability/capabilities.h"

namespace tb::capability::probe {

using Outcome = CheckOutcome;
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
Outcome check_root();
Outcome check_userns();  // capability_userns.cc
Outcome check_rtprio();  // capability_userns.cc
Outcome check_netns();
Outcome check_netns_dir();
Outcome check_veth();
Outcome check_bridge();
Outcome check_vxlan();
Outcome check_macvlan();
Outcome check_dummy();
Outcome check_bonding();
Outcome check_vrf();
Outcome check_multipath();
Outcome check_htb();
Outcome check_tbf();
Outcome check_netem();
Outcome check_fq_codel();
Outcome check_prio();
Outcome check_red();
Outcome check_dctcp();
Outcome check_ingress();
Outcome check_clsact();
Outcome check_nfqueue();
Outcome check_nft_numgen();
Outcome check_rdma_netlink();
Outcome check_rdma_rxe();
Outcome check_frr();
Outcome check_kvm();
Outcome check_qemu();

}  // namespace tb::capability::probe
