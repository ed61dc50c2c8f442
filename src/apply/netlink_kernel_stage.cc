// NetlinkKernel's AddStageRule: the netfilter rules that steer a link direction into its delay
// stage queue and drop its loss share (in the bridge family when the op's interface is a bridge
// port, which the kernel is asked here). All of a namespace's are made at once when the applier
// syncs, namespaces in parallel: the NFQUEUE rules as one nf_tables netlink transaction, the
// loss rules by one nft inside the namespace (stage/netfilter_rules.h); they carry the op's
// marker and go with it on undo (and with their namespace on down).
#include <algorithm>
#include <thread>
#include <unordered_map>

#include "apply/netlink_kernel.h"
#include "netlink/dump.h"
#include "netlink/message.h"
#include "stage/netfilter_rules.h"

namespace tb::apply {
namespace {

// Whether interface `ifindex` of the socket's namespace is a port of a bridge.
Result<bool> bridge_port(netlink::NlSocket& sock, int ifindex, const std::string& where) {
  auto link = netlink::query_link(sock, ifindex, where);
  if (!link) return std::unexpected(link.error());
  if (link->master == 0) return false;
  auto master = netlink::query_link(sock, link->master, where);
  if (!master) return std::unexpected(master.error());
  return master->kind == "bridge";
}

// Each namespace's transaction (and nft, for loss) waits on its commit: a few at once.
int rule_parallelism() {
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 2u, 8u));
}

}  // namespace

Status NetlinkKernel::submit_op(const plan::AddStageRule& op) {
  // Installed at sync(), with the rest of its namespace's rules: one transaction per namespace
  // instead of one per rule (a lab has hundreds).
  pending_rules_.push_back(op);
  return {};
}

Status NetlinkKernel::install_stage_rules() {
  auto ops = std::move(pending_rules_);
  pending_rules_.clear();
  // Grouped by namespace, in the order the plan first names each.
  std::vector<stage::NetnsRules> groups;
  std::unordered_map<std::string, size_t> group_of;
  for (const auto& op : ops) {
    auto [it, fresh] = group_of.try_emplace(op.netns, groups.size());
    if (fresh) groups.push_back({op.netns, {}, {}});
    stage::NetnsRules& g = groups[it->second];
    if (op.queue) g.queue.push_back({{op.ifname, op.queue, op.egress}, op.marker + " queue"});
    // Queues here mean a stage here (plan/shaping.cc): its release probe's rule comes along.
    // add_probe_rules may have put it there already (the stage started early).
    g.release_probe = g.release_probe || (op.queue && !probes_added_.contains(op.netns));
    if (!op.loss_ppm) continue;
    // A loss rule on a bridge port goes in the bridge family (its frames never reach IP): the
    // planner puts the loss of a direction into a bridge port there (plan/shaping.h).
    bool bridge = false;
    if (!op.egress) {
      const std::string what = "drop a loss share on " + op.ifname + " in netns " + op.netns;
      auto h = handle(op.netns);
      if (!h) return std::unexpected(with_context(h.error(), what));
      auto idx = ifindex_of(**h, op.ifname);
      if (!idx) return std::unexpected(with_context(idx.error(), what));
      auto port = bridge_port((*h)->sock, *idx, "netns " + op.netns);
      if (!port) return std::unexpected(with_context(port.error(), what));
      bridge = *port;
    }
    g.loss.push_back({{op.ifname, op.loss_ppm, op.egress, bridge}, op.marker + " loss"});
  }
  if (auto r = stage::add_rules(groups, rule_parallelism()); !r)
    return std::unexpected(with_context(r.error(), "steer links into their delay stages"));
  return {};
}

Result<bool> NetlinkKernel::add_probe_rules(const std::vector<std::string>& netns) {
  std::vector<stage::NetnsRules> groups;
  for (const auto& n : netns) {
    if (probes_added_.contains(n)) continue;
    stage::NetnsRules g{n, {}, {}};
    g.release_probe = true;
    groups.push_back(std::move(g));
  }
  if (auto r = stage::add_rules(groups, rule_parallelism()); !r)
    return std::unexpected(with_context(r.error(), "add the delay stages' release-probe rules"));
  for (const auto& g : groups) probes_added_.insert(g.netns);
  return true;
}

Status NetlinkKernel::undo_op(const plan::AddStageRule& op) {
  std::erase_if(pending_rules_, [&](const plan::AddStageRule& p) {
    return p.netns == op.netns && p.marker == op.marker;
  });
  auto h = handle_if_exists(op.netns);
  if (!h) return std::unexpected(h.error());
  if (!*h) return {};  // the namespace, and its rules, are gone
  return stage::remove_marked_rules(op.netns, op.marker);
}

Status NetlinkKernel::set_link_up(const std::string& netns, const std::string& ifname, bool up) {
  const std::string what =
      std::string("set ") + ifname + (up ? " up" : " down") + " in netns " + netns;
  TB_TRY(sync());
  auto h = handle(netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  auto idx = ifindex_of(**h, ifname);
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  return (*h)->sock.call(netlink::set_link({.ifindex = *idx, .up = up}), what);
}

}  // namespace tb::apply
