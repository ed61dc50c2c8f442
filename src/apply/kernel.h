// Kernel: the applier's view of the machine. NetlinkKernel (netlink_kernel.h) is the real one;
// tests hand the applier a recording fake (tests/unit/recording_kernel.h) that can be told to fail.
//
// Ops are submitted in plan order. An implementation may pipeline (send now, read the kernel's
// acknowledgement later): a failure can then surface at a later submit() or at sync(), and
// its Error names the op that failed. undo() is synchronous and treats "not found" as success.
// Not thread-safe: one applier drives one Kernel from one thread.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/events.h"
#include "core/ipv4.h"
#include "plan/op.h"

namespace tb::apply {

// One interface as the kernel reports it (for `status`).
struct IfaceInfo {
  std::string ifname;
  std::string alias;
  std::string kind;  // "veth", "bridge", "loopback", ...
  bool admin_up = false;
  bool oper_up = false;  // carrier / IFF_LOWER_UP
  bool running = false;  // IFF_RUNNING: operationally up (RFC 2863), as linkwatch last saw it
  int mtu = 0;
  std::vector<Prefix> addrs;
  uint64_t rx_bytes = 0, tx_bytes = 0;
  uint64_t rx_dropped = 0, tx_dropped = 0;  // the device's own drops
  // The root qdisc's counters (they include its children's): packets dropped (a full
  // TBF/HTB/netem queue, a netem loss) and bytes held now.
  uint64_t qdisc_drops = 0, qdisc_backlog = 0;
};

// One interface in a named namespace.
struct IfaceRef {
  std::string netns, ifname;
};

class Kernel {
 public:
  virtual ~Kernel() = default;

  virtual Status submit(const plan::Op& op) = 0;
  virtual Status sync() = 0;
  virtual Status undo(const plan::Op& op) = 0;
  // Called before undoing `ops` as a batch, while the machine is still quiet: an
  // implementation may check ownership of everything up front (once namespaces start going,
  // the kernel's asynchronous clean-up makes every netlink request wait).
  virtual void prepare_undo(const std::vector<plan::Op>& ops) { (void)ops; }

  // Installs the delay stages' release-probe rules (stage/netfilter_rules.h) in each of
  // `netns` now, ahead of sync, whose stage rules then leave them out: `up` starts the stages
  // once their namespaces exist, while the rest of the lab is built (lab/daemons.h LabKernel),
  // and a stage's first probes need the rule. False: this kernel does not (the stages start at
  // sync, with the rules); the default.
  virtual Result<bool> add_probe_rules(const std::vector<std::string>& netns) {
    (void)netns;
    return false;
  }

  // Administrative state of one interface (a link fault or `link down|up`), synchronous.
  virtual Status set_link_up(const std::string& netns, const std::string& ifname, bool up) = 0;
  // Brings `ends` (a link's ends here) up in order, then waits at most `wait_ms` until each has
  // told its namespace it is up with carrier. A veth end brought up before its peer gets its
  // carrier when the peer opens, but starts its transmit queues only when the kernel's
  // linkwatch work reaches it, and drops what it sends until then; that work's notification is
  // the first to show the end up with carrier (the carrier itself is set at once, unannounced,
  // so polling the state cannot tell). An end that was up before the call is not waited for.
  // `first_up_ns`, when given and 0, gets the CLOCK_MONOTONIC time the first end was up.
  // Returns the microseconds waited after the last end was up, or -1 when one had not reported
  // by the limit. This default brings them up and waits for nothing.
  virtual Result<int64_t> set_links_up(const std::vector<IfaceRef>& ends, int wait_ms,
                                       int64_t* first_up_ns) {
    (void)wait_ms;
    for (const auto& e : ends) {
      TB_TRY(set_link_up(e.netns, e.ifname, true));
      if (first_up_ns && *first_up_ns == 0) *first_up_ns = monotonic_ns();
    }
    return 0;
  }

  // Named namespaces (under /run/netns) whose loopback alias starts with `marker`. Only names
  // starting with `name_prefix` are looked at (a lab's are all scenario::netns_name, tb-<lab>-:
  // a host holding thousands of others' namespaces costs a directory read, not a netlink query
  // in each); what is selected is still chosen by the marker.
  virtual Result<std::vector<std::string>> owned_netns(const std::string& marker,
                                                       const std::string& name_prefix = "") = 0;
  // Interfaces, their state and IPv4 addresses inside a named namespace.
  virtual Result<std::vector<IfaceInfo>> interfaces(const std::string& netns) = 0;
};

}  // namespace tb::apply
