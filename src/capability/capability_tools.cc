// Probes that need a userspace tool or a device node (capability_probes.h): NFQUEUE and nft
// numgen rules (through iptables/nft inside a throwaway netns), FRR, KVM and QEMU.
#include <fcntl.h>
#include <linux/kvm.h>
#include <linux/netlink.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "capability/capability_checks.h"
#include "capability/capability_netlink.h"
#include "core/extras.h"
#include "core/paths.h"
#include "core/unique_fd.h"

namespace tb::capability::probe {
namespace {

constexpr uint16_t kProbeQueue = 7;
constexpr int kKvmApiVersion = 12;  // KVM_API_VERSION, stable since Linux 2.6.22

Outcome not_installed(const std::string& tool) {
  const Extra* e = find_extra(tool);
  return no(tool + " not installed (binary not found in PATH or /usr/sbin, /sbin, /usr/bin)" +
            (e ? "; " + install_hint(*e) : std::string()));
}

// "<tool> refused (exit N): <its message>" or the timeout / exec failure.
Outcome tool_refused(const std::string& tool, const ToolRun& run) {
  switch (run.state) {
    case ToolRun::State::kTimedOut:
      return no(tool + " timed out and was killed");
    case ToolRun::State::kExecFailed:
      return no(run.output);
    case ToolRun::State::kExited:
      break;
  }
  return no(tool + " refused (exit " + std::to_string(run.exit_code) + "): " + run.output);
}

}  // namespace

Outcome check_nfqueue() {
  std::string iptables = find_tool("iptables");
  if (iptables.empty()) return not_installed("iptables");
  return in_child([&iptables]() -> Outcome {
    // The NFQUEUE target is an xtables extension; no library interface builds its rule.
    ToolRun version = run_tool(iptables, {"-V"});
    ToolRun add = run_tool(iptables, {"-w", "3", "-A", "FORWARD", "-j", "NFQUEUE", "--queue-num",
                                      std::to_string(kProbeQueue)});
    if (add.state != ToolRun::State::kExited || add.exit_code != 0)
      return tool_refused("iptables", add);
    // The delay stage is a listener on that queue (nfnetlink_queue): bind one.
    auto nl = CheckSocket::open(NETLINK_NETFILTER);
    if (!nl) return no("NFQUEUE rule added, but " + nl.error().message);
    if (auto r = nl->request(nfqueue_bind_msg(kProbeQueue), "bind NFQUEUE listener"); !r)
      return no("NFQUEUE rule added, but " + r.error().message);
    return yes(version.output +
               ": added -j NFQUEUE --queue-num 7 and bound a listener to queue 7 "
               "in a throwaway netns");
  });
}

Outcome check_nft_numgen() {
  std::string nft = find_tool("nft");
  if (nft.empty()) return not_installed("nft");
  return in_child([&nft]() -> Outcome {
    // nft's expression compiler lives in the nft tool (libnftables); we run the tool.
    const std::string ruleset =
        "add table inet tbprobe; "
        "add chain inet tbprobe probe_fwd { type filter hook forward priority 0; }; "
        "add rule inet tbprobe probe_fwd numgen random mod 100 < 5 counter drop";
    ToolRun run = run_tool(nft, {ruleset});
    if (run.state != ToolRun::State::kExited || run.exit_code != 0) return tool_refused("nft", run);
    return yes("added a `numgen random mod 100 < 5 drop` rule in a throwaway netns");
  });
}

Outcome check_frr() {
  // Debian's frr package installs its daemons in /usr/lib/frr (core/extras.h); zebra installs
  // the routes bgpd learns.
  if (paths::rootless())
    return no(
        "FRR's daemons switch to user and group frr, which this user's namespace does not "
        "map (one uid, setgroups denied): zebra exits \"privs_init: could not setgroups\"; "
        "run with sudo for [failover] mode = \"bfd\"");
  std::string present, missing;
  for (const char* d : {"zebra", "bgpd", "bfdd"}) {
    std::string& list = locate(*find_extra(d)) ? present : missing;
    list += (list.empty() ? "" : ", ") + std::string(d);
  }
  if (missing.empty()) return yes("FRR has zebra, bgpd and bfdd");
  return no("FRR lacks " + missing + (present.empty() ? "" : " (has " + present + ")") + "; " +
            install_hint(*find_extra("zebra")));
}

Outcome check_kvm() {
  UniqueFd fd(::open("/dev/kvm", O_RDWR | O_CLOEXEC));
  if (!fd) return no(std::string("open /dev/kvm: ") + std::strerror(errno));
  int v = ::ioctl(fd.get(), KVM_GET_API_VERSION, 0);
  if (v != kKvmApiVersion)
    return no("/dev/kvm answered KVM_GET_API_VERSION with " + std::to_string(v));
  return yes("/dev/kvm opened; KVM API version 12");
}

Outcome check_qemu() {
  std::string qemu = find_tool("qemu-system-x86_64");
  if (qemu.empty()) return not_installed("qemu-system-x86_64");
  ToolRun run = run_tool(qemu, {"--version"});
  if (run.state != ToolRun::State::kExited || run.exit_code != 0)
    return tool_refused("qemu-system-x86_64", run);
  return yes(run.output.substr(0, run.output.find(" Copyright")));
}

}  // namespace tb::capability::probe
