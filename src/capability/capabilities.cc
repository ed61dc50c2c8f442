#include "capability/capabilities.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <optional>

#include "capability/capability_checks.h"
#include "capability/host_cache.h"
#include "core/extras.h"

namespace tb::capability {
namespace {

using namespace probe;

constexpr const char* kInNetns = " in an anonymous netns (forked child, bounded wait)";

// The registry. Enables/fallback texts describe testbedctl's design (ARCHITECTURE.md,
// research/limits.md): keep them true when a backend changes.
constexpr auto kRegistry = std::to_array<CheckSpec>({
    {"root", check_root, "creating namespaces, links, qdiscs and routes (up, down, clean, exec)",
     "none: only validate, plan and graph run without root", "geteuid() == 0", true},
    {"userns", check_userns,
     "labs without root: this user's keeper holds a user, mount and home network namespace every "
     "verb joins",
     "none: without root and without a user namespace only validate, plan and graph run",
     "unshare(CLONE_NEWUSER) in a forked child; kernel.unprivileged_userns_clone, "
     "user.max_user_namespaces, kernel.apparmor_restrict_unprivileged_userns"},
    {"rtprio", check_rtprio,
     "SCHED_FIFO for delay stages, the supervisor, the congestion agent and verify's probes",
     "SCHED_OTHER: delays and probes late by what the host's load adds; reports say so",
     "sched_setscheduler SCHED_FIFO 11 in a forked child; getrlimit(RLIMIT_RTPRIO)"},
    {"netns", check_netns, "one network namespace per emulated GPU, switch and router",
     "none: a lab cannot be built", "unshare(CLONE_NEWNET) in a forked child", true},
    {"netns_dir", check_netns_dir,
     "named namespaces under /run/netns that outlive testbedctl (up, exec, down)",
     "none: up cannot keep a lab",
     "/run/netns writable + nsfs bind mount onto a scratch file in a private mount namespace"},
    {"veth", check_veth, "links between namespaces: every emulated cable",
     "none: a lab cannot be built", "RTM_NEWLINK kind veth", true},
    {"bridge", check_bridge, "switches: NVLink domains, leaf and spine fabrics",
     "none: a lab cannot be built", "RTM_NEWLINK kind bridge", true},
    {"vxlan", check_vxlan, "labs spread over several hosts (cross-host links as VXLAN tunnels)",
     "single-host labs only", "RTM_NEWLINK kind vxlan, VNI 42"},
    {"macvlan", check_macvlan, "extra endpoints on one parent link without a bridge",
     "a veth pair per endpoint into a bridge", "RTM_NEWLINK kind macvlan on a veth"},
    {"dummy", check_dummy, "stable router-ID / BGP host-route addresses on a dummy interface",
     "the address goes on lo as a /32", "RTM_NEWLINK kind dummy"},
    {"bonding", check_bonding, "bonded dual-ToR uplinks (active-backup or LACP)",
     "dual-ToR over ECMP multipath routes or BGP host routes", "RTM_NEWLINK kind bond"},
    {"vrf", check_vrf, "several routing tables in one namespace (VPC tiers)",
     "one router namespace per routing table", "RTM_NEWLINK kind vrf, table 1000"},
    {"multipath", check_multipath, "ECMP across rails and dual ToRs",
     "single-path static routes; failover replaces the route",
     "RTM_NEWROUTE with RTA_MULTIPATH (two gateways) on a veth"},
    {"htb", check_htb, "link rate limits (HTB classes)", "TBF for rate; without either, unshaped",
     "RTM_NEWQDISC root htb on a veth"},
    {"tbf", check_tbf, "link rate limits with a bounded buffer (TBF)", "HTB for rate",
     "RTM_NEWQDISC root tbf on a veth"},
    {"netem", check_netem, "delay, jitter and loss in the kernel",
     "userspace NFQUEUE delay stage + HTB/TBF rate + nft numgen loss",
     "RTM_NEWQDISC root netem on a veth"},
    {"fq_codel", check_fq_codel, "AQM on emulated links",
     "tail-drop buffer sized by TBF latency/limit (no AQM)",
     "RTM_NEWQDISC root fq_codel on a veth"},
    {"red", check_red, "ECN marking on the VPC tier in the kernel (RED with ecn as a TBF's child)",
     "the delay stage after the switch port marks CE (stage/mark_table.h)",
     "RTM_NEWQDISC root red (ecn) on a veth"},
    {"dctcp", check_dctcp, "DCTCP (ECN-proportional window) for TCP on the VPC tier",
     "the host's default congestion control with classic ECN (tcp_ecn = 1); one that ignores "
     "CE (bbr) leaves the marks without effect",
     "setsockopt(TCP_CONGESTION, \"dctcp\") on a TCP socket"},
    {"prio", check_prio, "strict-priority bands (control traffic ahead of bulk)",
     "HTB class priorities", "RTM_NEWQDISC root prio on a veth"},
    {"ingress", check_ingress, "policing or redirecting received traffic (ingress hook)",
     "shape on each veth end's egress only", "RTM_NEWQDISC ingress on a veth"},
    {"clsact", check_clsact, "tc filters on both directions of a link (clsact)",
     "egress-only classification", "RTM_NEWQDISC clsact on a veth"},
    {"nfqueue", check_nfqueue, "userspace delay stage (delay and jitter without netem)",
     "no delay emulation without netem; links keep rate and loss",
     "exec iptables -A FORWARD -j NFQUEUE --queue-num 7, then bind queue 7 over "
     "NETLINK_NETFILTER"},
    {"nft_numgen", check_nft_numgen, "random loss with nft numgen (unbiased, 0.0001% steps)",
     "iptables -m statistic --mode random loss",
     "exec nft: forward-chain rule numgen random mod 100 < 5 drop"},
    {"rdma_netlink", check_rdma_netlink, "RDMA devices through RDMA netlink",
     "TCP transport; reports say so", "socket(NETLINK_RDMA) + RDMA_NLDEV_CMD_GET dump"},
    {"rdma_rxe", check_rdma_rxe, "RDMA transport over Soft-RoCE", "TCP transport; reports say so",
     "RDMA_NLDEV_CMD_NEWLINK type rxe on both ends of a veth between two namespaces, then one "
     "64-byte RC send across (verbs)"},
    {"frr", check_frr, "BGP+BFD failover", "static routes or the built-in probing agent",
     "zebra, bgpd, bfdd executable in /usr/lib/frr"},
    {"kvm", check_kvm, "hardware-accelerated lab VM (a kernel with netem and rxe)",
     "qemu without KVM (slow), or run on this kernel with the fallbacks above",
     "open /dev/kvm + KVM_GET_API_VERSION"},
    {"qemu", check_qemu, "booting the lab VM image (images/)",
     "run on this kernel with the fallbacks above", "qemu-system-x86_64 --version from PATH"},
});

// Probes that create kernel objects say where they did it.
bool in_netns(const CheckSpec& s) {
  std::string_view m = s.method;
  return m.starts_with("RTM_") || m.starts_with("RDMA_NLDEV") || m.starts_with("exec ") ||
         m.starts_with("setsockopt");
}

bool has(const std::vector<Capability>& caps, std::string_view name) {
  return std::ranges::any_of(caps,
                             [&](const Capability& c) { return c.name == name && c.available; });
}

}  // namespace

std::span<const CheckSpec> check_registry() {
  return kRegistry;
}

CheckOutcome check_rxe() {
  return probe::check_rdma_rxe();
}

std::vector<Capability> check_all() {
  std::vector<Capability> caps;
  caps.reserve(kRegistry.size());
  for (const CheckSpec& s : kRegistry) {
    CheckOutcome o = s.probe();
    std::string method(s.method);
    if (in_netns(s)) method += kInNetns;
    caps.push_back(Capability{std::string(s.name), o.available, std::move(o.detail),
                              std::string(s.enables), std::string(s.fallback), std::move(method),
                              s.essential});
  }
  return caps;
}

Backends choose_backends(const std::vector<Capability>& caps) {
  Backends b;
  bool rate = has(caps, "htb") || has(caps, "tbf");
  if (!has(caps, "netns"))  // nothing that lives in a namespace could be probed
    b.shaping = "unknown (namespaces could not be probed)";
  else if (has(caps, "netem"))
    b.shaping = "netem";
  else if (rate && has(caps, "nfqueue"))
    b.shaping = "htb/tbf + nfqueue delay stage";
  else if (rate)
    b.shaping = "htb/tbf (rate only; no delay emulation)";
  else
    b.shaping = "none (links run unshaped)";
  b.transport = has(caps, "rdma_rxe") ? "rdma" : "tcp";
  b.failover = has(caps, "frr") ? "bgp+bfd (frr)" : "static routes or the built-in probing agent";
  return b;
}

std::vector<std::string> missing_essentials(const std::vector<Capability>& caps) {
  std::vector<std::string> missing;
  for (const CheckSpec& s : kRegistry)
    if (s.essential && !has(caps, s.name)) missing.emplace_back(s.name);
  return missing;
}

std::string kernel_release() {
  utsname u{};
  if (::uname(&u) != 0) return "unknown";
  return u.release;
}

std::vector<ExtraFound> find_extras() {
  std::vector<ExtraFound> out;
  for (const Extra& e : extras())
    out.push_back({std::string(e.name), std::string(e.package), std::string(e.group),
                   std::string(e.needed_for), locate(e).value_or("")});
  return out;
}

DoctorReport make_report(std::string kernel, std::vector<Capability> caps) {
  DoctorReport r;
  r.extras = find_extras();
  r.kernel = std::move(kernel);
  r.chosen = choose_backends(caps);
  r.missing_essentials = missing_essentials(caps);
  r.capabilities = std::move(caps);
  return r;
}

nlohmann::json to_json(const DoctorReport& r) {
  nlohmann::json caps = nlohmann::json::array();
  for (const Capability& c : r.capabilities)
    caps.push_back({{"name", c.name},
                    {"available", c.available},
                    {"essential", c.essential},
                    {"detail", c.detail},
                    {"enables", c.enables},
                    {"fallback", c.fallback},
                    {"method", c.method}});
  nlohmann::json extras = nlohmann::json::array();
  for (const ExtraFound& e : r.extras)
    extras.push_back({{"name", e.name},
                      {"found", !e.path.empty()},
                      {"path", e.path},
                      {"package", e.package},
                      {"group", e.group},
                      {"needed_for", e.needed_for}});
  return {{"kernel", r.kernel},
          {"usable", r.usable()},
          {"missing_essentials", r.missing_essentials},
          {"chosen",
           {{"shaping_backend", r.chosen.shaping},
            {"transport", r.chosen.transport},
            {"failover", r.chosen.failover}}},
          {"capabilities", caps},
          {"extras", extras}};
}

plan::HostCaps host_for_plan(bool with_rxe, const std::string& cache_dir) {
  if (::geteuid() != 0) return plan::assumed_host();
  std::optional<plan::HostCaps> kept;
  if (!cache_dir.empty()) kept = read_host_cache(cache_dir, host_cache_key());
  if (kept && (kept->rxe_checked || !with_rxe)) return *kept;
  plan::HostCaps h;
  if (kept) {  // the shaping checks are kept; Soft-RoCE was not asked before
    h = *kept;
  } else {
    for (const CheckSpec& spec : kRegistry)
      if (bool* slot = shaping_field(h, spec.name)) *slot = spec.probe().available;
  }
  h.how = "probed";
  h.probed = true;
  if (with_rxe) {
    const CheckOutcome rxe = check_rxe();
    set_rxe(h, rxe.available, rxe.detail);
  }
  // The key after the probes: one that loaded a module (rdma_rxe, sch_netem) changed it.
  if (!cache_dir.empty()) write_host_cache(cache_dir, host_cache_key(), h);
  return h;
}

}  // namespace tb::capability
