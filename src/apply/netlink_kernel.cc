#include "apply/netlink_kernel.h"
#include "apply/netlink_kernel_util.h"

#include <fcntl.h>
#include <linux/if.h>
#include <linux/pkt_sched.h>
#include <poll.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <variant>

#include <spdlog/spdlog.h>

#include "apply/marker.h"
#include "netlink/dump.h"
#include "netlink/message.h"
#include "netlink/netns.h"
#include "netlink/route_monitor.h"

namespace tb::apply {
namespace {

namespace nl = tb::netlink;
using detail::in_ns;
using detail::ok_if;

// The kernel keeps at most IFALIASZ - 1 bytes of alias (include/uapi/linux/if.h).
Status check_alias(const std::string& alias, const std::string& what) {
  if (alias.size() >= IFALIASZ)
    return bad_input(what + ": alias is " + std::to_string(alias.size()) +
                     " bytes, the kernel keeps at most " + std::to_string(IFALIASZ - 1));
  return {};
}

}  // namespace

NetlinkKernel::NetlinkKernel() {
  // Two descriptors per namespace held; a 1000-namespace lab passes the usual soft limit 1024.
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
}

NetlinkKernel::~NetlinkKernel() = default;

Status NetlinkKernel::submit(const plan::Op& op) {
  submitted_ = true;
  lo_alias_.clear();  // a lab changing: what a scan read may no longer hold
  auto r = std::visit([this](const auto& o) { return submit_op(o); }, op);
  if (!r) note_failure();
  return r;
}

Status NetlinkKernel::sync() {
  settle();
  if (auto e = std::exchange(deferred_, std::nullopt)) {
    note_failure();
    return std::unexpected(std::move(e->error));
  }
  if (!pending_rules_.empty()) return install_stage_rules();
  return {};
}

Status NetlinkKernel::undo(const plan::Op& op) {
  settle();  // acks of earlier submits must not be taken for the undo's own
  return std::visit([this](const auto& o) { return undo_op(o); }, op);
}

void NetlinkKernel::settle() {
  // Only submit() pipelines requests (undo and the queries wait for their own acks): with none
  // since the last settle there is nothing to read, and a large lab's down, which settles before
  // each of its ~2,300 undos, skips walking its 1,164 handles each time (6% of its CPU).
  if (!std::exchange(submitted_, false)) return;
  for (auto& [name, ns] : ns_) {
    if (ns->sock.outstanding() == 0) continue;
    if (auto e = ns->sock.collect(); e && (!deferred_ || e->seq < deferred_->seq))
      deferred_ = std::move(e);
  }
}

void NetlinkKernel::note_failure() {
  for (auto& [name, ns] : ns_) ns->stale = true;
}

// ---- namespace handles and ifindexes -------------------------------------------------------

Result<std::unique_ptr<NetlinkKernel::Ns>> NetlinkKernel::open_ns(const std::string& name) {
  auto ns = std::make_unique<Ns>();
  ns->name = name;
  auto fd = nl::open_named_netns(name);
  if (!fd) return std::unexpected(fd.error());
  ns->fd = std::move(*fd);
  auto sock = nl::NlSocket::open_in(ns->fd.get());
  if (!sock) return std::unexpected(with_context(sock.error(), "netns " + name));
  ns->sock = std::move(*sock);
  return ns;
}

Result<NetlinkKernel::Ns*> NetlinkKernel::handle(const std::string& name) {
  if (auto it = ns_.find(name); it != ns_.end()) return it->second.get();
  auto ns = open_ns(name);
  if (!ns) return std::unexpected(ns.error());
  Ns* raw = ns->get();
  ns_.emplace(name, std::move(*ns));
  return raw;
}

Result<NetlinkKernel::Ns*> NetlinkKernel::handle_if_exists(const std::string& name) {
  if (auto it = ns_.find(name); it != ns_.end()) return it->second.get();
  auto h = handle(name);
  if (!h && h.error().sys_errno == ENOENT) return nullptr;
  return h;
}

Status NetlinkKernel::refresh(Ns& ns) {
  auto links = nl::list_links(ns.sock, "netns " + ns.name);
  if (!links) return std::unexpected(links.error());
  ns.ifindex.clear();
  ns.next_ifindex = nl::kLoopbackIfindex + 1;
  for (const auto& l : *links) {
    ns.ifindex[l.name] = l.ifindex;
    ns.next_ifindex = std::max(ns.next_ifindex, l.ifindex + 1);
  }
  ns.stale = false;
  return {};
}

Result<int> NetlinkKernel::ifindex_of(Ns& ns, const std::string& ifname) {
  if (ns.stale) TB_TRY(refresh(ns));
  auto it = ns.ifindex.find(ifname);
  if (it == ns.ifindex.end()) return fail("no interface " + ifname + in_ns(ns.name), ENODEV);
  return it->second;
}

Result<int> NetlinkKernel::allocate(Ns& ns, const std::string& ifname) {
  if (ns.stale) TB_TRY(refresh(ns));
  int idx = ns.next_ifindex++;
  ns.ifindex[ifname] = idx;
  return idx;
}

// ---- submit -------------------------------------------------------------------------------

Status NetlinkKernel::submit_op(const plan::CreateNetns& op) {
  TB_TRY(check_alias(op.marker, "create netns " + op.netns));
  auto ns = std::make_unique<Ns>();
  ns->name = op.netns;
  auto fd = nl::create_named_netns(op.netns, [&]() -> Status {
    auto sock = nl::NlSocket::open();  // inside the new namespace: bound to it for good
    if (!sock) return std::unexpected(sock.error());
    ns->sock = std::move(*sock);
    // The owner marker goes on before the namespace gets its name (netns.h).
    return ns->sock.call(
        nl::set_link({.ifindex = nl::kLoopbackIfindex, .up = true, .alias = op.marker}),
        "set lo up with owner marker" + in_ns(op.netns));
  });
  if (!fd) return std::unexpected(fd.error());
  ns->fd = std::move(*fd);
  ns->ifindex["lo"] = nl::kLoopbackIfindex;
  ns->stale = false;
  ns_[op.netns] = std::move(ns);
  return {};
}

Status NetlinkKernel::submit_op(const plan::CreateVeth& op) {
  const std::string what = "create veth " + op.a.ifname + " <-> " + op.b.ifname + in_ns(op.a.netns);
  TB_TRY(check_alias(op.a.alias, what));
  TB_TRY(check_alias(op.b.alias, what));
  auto a = handle(op.a.netns);
  if (!a) return std::unexpected(with_context(a.error(), what));
  auto b = handle(op.b.netns);
  if (!b) return std::unexpected(with_context(b.error(), what));
  Ns& na = **a;
  Ns& nb = **b;
  int master_a = 0, master_b = 0;
  if (!op.a.master.empty()) {
    auto m = ifindex_of(na, op.a.master);
    if (!m) return std::unexpected(with_context(m.error(), what));
    master_a = *m;
  }
  if (!op.b.master.empty()) {
    auto m = ifindex_of(nb, op.b.master);
    if (!m) return std::unexpected(with_context(m.error(), what));
    master_b = *m;
  }
  auto ia = allocate(na, op.a.ifname);
  if (!ia) return std::unexpected(with_context(ia.error(), what));
  auto ib = allocate(nb, op.b.ifname);
  if (!ib) return std::unexpected(with_context(ib.error(), what));
  // Both ends are created directly in their namespaces, `a` up and enslaved. The kernel ignores
  // IFLA_IFALIAS on create, and the peer can be neither created up nor enslaved on create
  // (drivers/net/veth.c veth_newlink), so one follow-up request per end sets the rest.
  TB_TRY(na.sock.send(nl::new_veth({op.a.ifname, *ia, na.fd.get()}, {op.b.ifname, *ib, nb.fd.get()},
                                   op.mtu, master_a),
                      what));
  if (!op.a.alias.empty())
    TB_TRY(na.sock.send(nl::set_link({.ifindex = *ia, .alias = op.a.alias}),
                        "set alias of veth " + op.a.ifname + in_ns(op.a.netns)));
  nl::LinkChange c{.ifindex = *ib, .up = true};
  if (!op.b.alias.empty()) c.alias = op.b.alias;
  if (master_b) c.master = master_b;
  return nb.sock.send(nl::set_link(c), "set up veth " + op.b.ifname + in_ns(op.b.netns));
}

Status NetlinkKernel::submit_op(const plan::CreateVxlan& op) {
  const std::string what = "create vxlan " + op.ifname + " (vni " + std::to_string(op.vni) +
                           ", remote " + op.remote.to_string() + ")" + in_ns(op.netns);
  TB_TRY(check_alias(op.alias, what));
  auto h = handle(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  Ns& ns = **h;
  int master = 0;
  if (!op.master.empty()) {
    auto m = ifindex_of(ns, op.master);
    if (!m) return std::unexpected(with_context(m.error(), what));
    master = *m;
  }
  if (!own_) {
    auto sock = nl::NlSocket::open();  // this process's namespace: the host's underlay
    if (!sock) return std::unexpected(with_context(sock.error(), what));
    own_ = std::move(*sock);
  }
  auto idx = allocate(ns, op.ifname);
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  // Synchronous: the follow-up below goes over the node's socket, which must find it made.
  TB_TRY(own_->call(nl::new_vxlan({op.ifname, *idx, ns.fd.get(), op.vni, op.local, op.remote,
                                   static_cast<uint16_t>(op.port), op.mtu}),
                    what));
  nl::LinkChange c{.ifindex = *idx, .up = true};
  if (!op.alias.empty()) c.alias = op.alias;
  if (master) c.master = master;
  return ns.sock.send(nl::set_link(c), "set up vxlan " + op.ifname + in_ns(op.netns));
}

Status NetlinkKernel::submit_op(const plan::CreateBridge& op) {
  const std::string what = "create bridge " + op.ifname + in_ns(op.netns);
  TB_TRY(check_alias(op.alias, what));
  auto h = handle(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  Ns& ns = **h;
  auto idx = allocate(ns, op.ifname);
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  TB_TRY(ns.sock.send(nl::new_bridge(op.ifname, *idx, op.mtu), what));
  if (op.alias.empty()) return {};
  return ns.sock.send(nl::set_link({.ifindex = *idx, .alias = op.alias}),
                      "set alias of bridge " + op.ifname + in_ns(op.netns));
}

Status NetlinkKernel::submit_op(const plan::AddAddr& op) {
  const std::string what =
      "add address " + op.addr.to_string() + " to " + op.ifname + in_ns(op.netns);
  auto h = handle(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  auto idx = ifindex_of(**h, op.ifname);
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  return (*h)->sock.send(nl::new_addr(*idx, op.addr, op.noprefixroute), what);
}

Status NetlinkKernel::submit_op(const plan::AddRoute& op) {
  const std::string what = "add route " + op.dst.to_string() + in_ns(op.netns);
  if (op.nexthops.empty()) return bad_input(what + ": no nexthop");
  auto h = handle(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  nl::RouteSpec spec{op.dst, {}, op.src, static_cast<uint32_t>(op.metric), op.congctl};
  for (const auto& nh : op.nexthops) {
    auto idx = ifindex_of(**h, nh.ifname);
    if (!idx) return std::unexpected(with_context(idx.error(), what));
    // A gateway is always "onlink": on /32-unnumbered links no subnet covers it.
    spec.nexthops.push_back({*idx, nh.via, nh.via.has_value(), nh.weight});
  }
  return (*h)->sock.send(nl::new_route(spec), what);
}

Status NetlinkKernel::submit_op(const plan::SetSysctl& op) {
  const std::string what = "set sysctl " + op.key + "=" + op.value + in_ns(op.netns);
  auto h = handle(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  if (auto r = nl::write_sysctl((*h)->fd.get(), op.key, op.value); !r)
    return std::unexpected(with_context(r.error(), what));
  return {};
}

Status NetlinkKernel::submit_op(const plan::WriteHosts& op) {
  if (!nl::valid_netns_name(op.netns))
    return bad_input("write hosts file for netns " + op.netns + ": not a valid namespace name");
  return write_hosts_file(etc_netns_dir(), op.netns, op.content, &hosts_files_);
}

// ---- undo ---------------------------------------------------------------------------------

Result<std::optional<bool>> NetlinkKernel::carries_marker(const std::string& netns,
                                                          const std::string& marker) {
  auto h = handle_if_exists(netns);
  if (!h) return std::unexpected(h.error());
  if (!*h) return std::optional<bool>{};
  auto lo = nl::query_link((*h)->sock, nl::kLoopbackIfindex, "netns " + netns);
  return std::optional<bool>{lo && has_marker(lo->alias, marker)};
}

void NetlinkKernel::prepare_undo(const std::vector<plan::Op>& ops) {
  pending_rules_.clear();  // never installed: nothing of theirs to undo
  // What owned_netns() read of a loopback since the last submit() answers without asking again
  // (down scans its lab's namespaces first, then undoes their journal); the rest are asked now.
  std::vector<std::string> ask;
  std::unordered_set<std::string> seen;
  for (const auto& op : ops)
    if (const auto* n = std::get_if<plan::CreateNetns>(&op))
      if (!lo_alias_.contains(n->netns) && seen.insert(n->netns).second) ask.push_back(n->netns);
  auto aliases = loopback_aliases(ask);
  for (size_t i = 0; i < ask.size(); ++i)
    if (aliases[i]) lo_alias_[ask[i]] = std::move(*aliases[i]);
  for (const auto& op : ops)
    if (const auto* n = std::get_if<plan::CreateNetns>(&op))
      if (auto it = lo_alias_.find(n->netns); it != lo_alias_.end())
        marked_[n->netns] = has_marker(it->second, n->marker);
}

Status NetlinkKernel::undo_op(const plan::CreateNetns& op) {
  // Only a namespace whose loopback carries op.marker is ours to delete: a create that failed
  // with "File exists" is journaled too, and the namespace that was there first is not ours.
  // An entry that is not a namespace at all (a file left by a create killed before its bind
  // mount) holds nothing and goes.
  bool ours = false;
  if (auto it = marked_.find(op.netns); it != marked_.end()) {
    ours = it->second;
  } else if (auto m = carries_marker(op.netns, op.marker); !m) {
    if (!nl::is_half_made_netns(op.netns))
      return std::unexpected(with_context(m.error(), "delete netns " + op.netns));
    ours = true;
  } else if (!*m) {
    return {};  // already gone
  } else {
    ours = **m;
  }
  if (!ours) {
    spdlog::warn("left namespace {} alone: its loopback does not carry the owner marker \"{}\"",
                 op.netns, op.marker);
    return {};
  }
  marked_.erase(op.netns);
  lo_alias_.erase(op.netns);
  ns_.erase(op.netns);  // close our descriptor and socket first, or they keep it alive
  return nl::delete_named_netns(op.netns);
}

Status NetlinkKernel::undo_op(const plan::CreateVeth& op) {
  const std::string what = "delete veth " + op.a.ifname + in_ns(op.a.netns);
  auto h = handle_if_exists(op.a.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  if (!*h) return {};
  // By name: deleting one end deletes the pair.
  auto r = ok_if((*h)->sock.call(nl::del_link(0, op.a.ifname), what), ENODEV);
  (*h)->ifindex.erase(op.a.ifname);
  if (auto it = ns_.find(op.b.netns); it != ns_.end()) it->second->ifindex.erase(op.b.ifname);
  return r;
}

Status NetlinkKernel::del_link_in(const std::string& netns, const std::string& ifname,
                                  const std::string& kind) {
  const std::string what = "delete " + kind + " " + ifname + in_ns(netns);
  auto h = handle_if_exists(netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  if (!*h) return {};
  auto r = ok_if((*h)->sock.call(nl::del_link(0, ifname), what), ENODEV);
  (*h)->ifindex.erase(ifname);
  return r;
}

Status NetlinkKernel::undo_op(const plan::CreateVxlan& op) {
  return del_link_in(op.netns, op.ifname, "vxlan");
}

Status NetlinkKernel::undo_op(const plan::CreateBridge& op) {
  return del_link_in(op.netns, op.ifname, "bridge");
}

Status NetlinkKernel::undo_op(const plan::AddAddr& op) {
  const std::string what =
      "delete address " + op.addr.to_string() + " from " + op.ifname + in_ns(op.netns);
  auto h = handle_if_exists(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  if (!*h) return {};
  auto idx = ifindex_of(**h, op.ifname);
  if (!idx && idx.error().sys_errno == ENODEV) return {};  // its interface is gone already
  if (!idx) return std::unexpected(with_context(idx.error(), what));
  return ok_if((*h)->sock.call(nl::del_addr(*idx, op.addr), what), EADDRNOTAVAIL, ENODEV);
}

Status NetlinkKernel::undo_op(const plan::AddRoute& op) {
  const std::string what = "delete route " + op.dst.to_string() + in_ns(op.netns);
  auto h = handle_if_exists(op.netns);
  if (!h) return std::unexpected(with_context(h.error(), what));
  if (!*h) return {};
  return ok_if((*h)->sock.call(nl::del_route(op.dst, static_cast<uint32_t>(op.metric)), what),
               ESRCH, ENODEV);
}

Status NetlinkKernel::undo_op(const plan::SetSysctl&) {
  return {};
}

Status NetlinkKernel::undo_op(const plan::WriteHosts& op) {
  if (!nl::valid_netns_name(op.netns)) return {};
  return remove_hosts_file_if_ours(etc_netns_dir(), op.netns, first_line(op.content));
}

// ---- queries ------------------------------------------------------------------------------

std::vector<std::optional<std::string>> NetlinkKernel::loopback_aliases(
    const std::vector<std::string>& names) {
  // Each ask opens a socket inside the namespace (a setns on the asking thread and back) and
  // reads its loopback: ~0.15 ms, 0.2 s for a 1024-GPU lab's 1,164 namespaces, which `down`
  // asks before it starts — so 64 or more are shared by a few threads (each its own sockets;
  // ns_ is only read here). A namespace that cannot be opened or asked answers nothing.
  std::vector<std::optional<std::string>> out(names.size());
  auto ask = [&](size_t i) {
    std::unique_ptr<Ns> temp;
    Ns* ns = nullptr;
    if (auto it = ns_.find(names[i]); it != ns_.end()) {
      ns = it->second.get();
    } else if (auto o = open_ns(names[i])) {
      temp = std::move(*o);
      ns = temp.get();
    } else {
      return;
    }
    if (auto lo = nl::query_link(ns->sock, nl::kLoopbackIfindex, "netns " + names[i]))
      out[i] = std::move(lo->alias);
  };
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < names.size();) ask(i);
  };
  {
    const unsigned threads =
        names.size() < 64 ? 1u : std::clamp(std::thread::hardware_concurrency(), 2u, 4u);
    std::vector<std::jthread> helpers;
    for (unsigned t = 1; t < threads; ++t) helpers.emplace_back(work);
    work();
  }  // joined
  return out;
}

Result<std::vector<std::string>> NetlinkKernel::owned_netns(const std::string& marker,
                                                            const std::string& name_prefix) {
  if (marker.empty()) return bad_input("find owned namespaces: empty owner marker");
  auto names = nl::list_named_netns();
  if (!names) return std::unexpected(names.error());
  std::vector<std::string> candidates;
  for (const auto& name : *names)
    if (name.starts_with(name_prefix)) candidates.push_back(name);
  auto aliases = loopback_aliases(candidates);
  std::vector<std::string> out;
  for (size_t i = 0; i < candidates.size(); ++i) {
    if (!aliases[i]) continue;
    if (has_marker(*aliases[i], marker)) out.push_back(candidates[i]);
    lo_alias_[candidates[i]] = std::move(*aliases[i]);
  }
  return out;
}

Result<int64_t> NetlinkKernel::set_links_up(const std::vector<IfaceRef>& ends, int wait_ms,
                                            int64_t* first_up_ns) {
  TB_TRY(sync());
  // Subscribed before the first end goes up: the notification that counts may come at once. One
  // monitor per namespace; an end up already is not waited for.
  std::vector<nl::RouteMonitor> monitors;
  struct Waiting {
    size_t monitor;
    int ifindex;
  };
  std::vector<Waiting> waiting;
  for (const auto& e : ends) {
    const std::string what = "set " + e.ifname + " up in netns " + e.netns;
    auto h = handle(e.netns);
    if (!h) return std::unexpected(with_context(h.error(), what));
    auto idx = ifindex_of(**h, e.ifname);
    if (!idx) return std::unexpected(with_context(idx.error(), what));
    auto now = nl::query_link((*h)->sock, *idx, "netns " + e.netns);
    if (!now) return std::unexpected(with_context(now.error(), what));
    if (now->flags & IFF_UP) continue;
    auto m = std::find_if(monitors.begin(), monitors.end(),
                          [&](const auto& x) { return x.netns() == e.netns; });
    if (m == monitors.end()) {
      auto opened = nl::RouteMonitor::open(e.netns);
      if (!opened) return std::unexpected(with_context(opened.error(), what));
      monitors.push_back(std::move(*opened));
      m = monitors.end() - 1;
    }
    waiting.push_back({static_cast<size_t>(m - monitors.begin()), *idx});
  }
  for (const auto& e : ends) {
    TB_TRY(set_link_up(e.netns, e.ifname, true));
    if (first_up_ns && *first_up_ns == 0) *first_up_ns = monotonic_ns();
  }
  const int64_t start = monotonic_ns(), limit = start + int64_t{wait_ms} * 1'000'000;
  std::vector<char> buf(65536);
  while (!waiting.empty()) {
    const int64_t left = limit - monotonic_ns();
    if (left <= 0) return -1;
    std::vector<pollfd> fds;
    for (const auto& m : monitors) fds.push_back({m.fd(), POLLIN, 0});
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>((left + 999'999) / 1'000'000));
    if (n < 0 && errno != EINTR) return sys_fail("wait for links to come up");
    for (size_t i = 0; i < monitors.size(); ++i) {
      if (!(fds[i].revents & POLLIN)) continue;
      for (;;) {
        const ssize_t got = ::recv(monitors[i].fd(), buf.data(), buf.size(), MSG_DONTWAIT);
        if (got <= 0) break;
        for (const auto& c : nl::parse_route_changes(buf.data(), static_cast<size_t>(got), 0))
          if (c.is_link && c.carrier)
            std::erase_if(waiting,
                          [&](const Waiting& w) { return w.monitor == i && w.ifindex == c.oif; });
      }
    }
  }
  return (monotonic_ns() - start) / 1000;
}

Result<std::vector<IfaceInfo>> NetlinkKernel::interfaces(const std::string& netns) {
  std::unique_ptr<Ns> temp;
  Ns* ns = nullptr;
  if (auto it = ns_.find(netns); it != ns_.end()) {
    ns = it->second.get();
  } else {
    auto o = open_ns(netns);
    if (!o) return std::unexpected(o.error());
    temp = std::move(*o);
    ns = temp.get();
  }
  auto links = nl::list_links(ns->sock, "netns " + netns);
  if (!links) return std::unexpected(links.error());
  auto addrs = nl::list_ipv4_addrs(ns->sock, "netns " + netns);
  if (!addrs) return std::unexpected(addrs.error());
  auto qdiscs = nl::list_qdiscs(ns->sock, "netns " + netns);
  if (!qdiscs) return std::unexpected(qdiscs.error());
  std::sort(links->begin(), links->end(),
            [](const auto& x, const auto& y) { return x.ifindex < y.ifindex; });
  std::vector<IfaceInfo> out;
  out.reserve(links->size());
  for (const auto& l : *links) {
    IfaceInfo i;
    i.ifname = l.name;
    i.alias = l.alias;
    i.kind = l.kind;
    i.admin_up = (l.flags & IFF_UP) != 0;
    i.oper_up = (l.flags & IFF_LOWER_UP) != 0;
    i.running = (l.flags & IFF_RUNNING) != 0;
    i.mtu = l.mtu;
    i.rx_bytes = l.rx_bytes;
    i.tx_bytes = l.tx_bytes;
    i.rx_dropped = l.rx_dropped;
    i.tx_dropped = l.tx_dropped;
    // The root qdisc alone: a parent counts its children's drops and backlog as its own.
    for (const auto& q : *qdiscs)
      if (q.ifindex == l.ifindex && q.parent == TC_H_ROOT) {
        i.qdisc_drops += q.drops;
        i.qdisc_backlog += q.backlog;
      }
    for (const auto& a : *addrs)
      if (a.ifindex == l.ifindex) i.addrs.push_back(a.addr);
    out.push_back(std::move(i));
  }
  return out;
}

}  // namespace tb::apply
