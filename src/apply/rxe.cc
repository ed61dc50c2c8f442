#include "apply/rxe.h"

#include <linux/netlink.h>

#include <fstream>
#include <functional>
#include <thread>

#include "netlink/netns.h"
#include "netlink/rdma.h"
#include "netlink/socket.h"

namespace tb::apply {
namespace {

constexpr size_t kMaxName = 63;  // IB_DEVICE_NAME_MAX - 1

std::string read_line(const std::string& path) {
  std::ifstream in(path);
  std::string s;
  if (in) std::getline(in, s);
  return s;
}

// The IPv4-mapped GID text of `addr` as sysfs prints it (eight 4-hex-digit groups).
std::string mapped_gid(Ipv4 addr) {
  char buf[64];
  const uint32_t v = addr.value;
  std::snprintf(buf, sizeof buf, "0000:0000:0000:0000:0000:ffff:%04x:%04x", (v >> 16) & 0xffff,
                v & 0xffff);
  return buf;
}

Result<netlink::NlSocket> rdma_socket_in(const std::string& netns) {
  auto fd = netlink::open_named_netns(netns);
  if (!fd) return std::unexpected(fd.error());
  return netlink::NlSocket::open_in(fd->get(), NETLINK_RDMA);
}

// The device called `name` as seen from a socket in the NIC's namespace, with its port's netdev.
Result<std::optional<netlink::RdmaPortRecord>> find_device(netlink::NlSocket& sock,
                                                           const std::string& name,
                                                           const std::string& where) {
  auto devs = netlink::list_rdma_devices(sock, where);
  if (!devs) return std::unexpected(devs.error());
  for (const auto& d : *devs) {
    if (d.name != name) continue;
    auto port = netlink::query_rdma_port(sock, d.index, 1, where);
    if (!port) return std::unexpected(port.error());
    return std::optional<netlink::RdmaPortRecord>(*port);
  }
  return std::optional<netlink::RdmaPortRecord>();
}

}  // namespace

std::vector<RailNic> rail_nics(const plan::Topology& topo) {
  std::vector<RailNic> out;
  for (const auto& l : topo.links) {
    if (l.tier != plan::Tier::kScaleOut) continue;
    for (const plan::LinkEnd* e : {&l.a, &l.b}) {
      const plan::Node* n = topo.node(e->node);
      if (!n || n->kind != plan::NodeKind::kGpu || !e->addr) continue;
      out.push_back(RailNic{n->name, n->netns, e->ifname, e->addr->addr});
    }
  }
  return out;
}

std::string rxe_name(const std::string& netns, const std::string& ifname) {
  std::string name = netns + "-" + ifname;
  if (name.size() <= kMaxName) return name;
  char h[17];
  std::snprintf(h, sizeof h, "%016zx", std::hash<std::string>{}(name));
  return "tbrxe-" + std::string(h);
}

int pick_rocev2_gid(const std::vector<GidEntry>& table, Ipv4 addr) {
  const std::string want = mapped_gid(addr);
  for (const auto& e : table)
    if (e.type == "RoCE v2" && e.gid == want) return e.index;
  return -1;
}

std::vector<GidEntry> read_gid_table(const std::string& sysfs_root, const std::string& dev, int n) {
  std::vector<GidEntry> out;
  const std::string port = sysfs_root + "/class/infiniband/" + dev + "/ports/1/";
  for (int i = 0; i < n; ++i) {
    GidEntry e{i, read_line(port + "gids/" + std::to_string(i)),
               read_line(port + "gid_attrs/types/" + std::to_string(i))};
    if (!e.gid.empty()) out.push_back(std::move(e));
  }
  return out;
}

std::optional<GidEntry> wait_rocev2_gid(const std::string& dev, Ipv4 addr,
                                        std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto table = read_gid_table("/sys", dev);
    const int i = pick_rocev2_gid(table, addr);
    for (const auto& e : table)  // entries are by index, with gaps where a GID is unset
      if (e.index == i) return e;
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

Result<std::vector<RxeDevice>> add_lab_rxe(const plan::Topology& topo,
                                           std::chrono::milliseconds gid_wait) {
  std::vector<RxeDevice> made;
  auto undo = [&](Error e) -> Result<std::vector<RxeDevice>> {
    if (auto r = remove_lab_rxe(made); !r)
      e.message += "; removing the others: " + r.error().message;
    return std::unexpected(e);
  };
  for (const RailNic& nic : rail_nics(topo)) {
    const std::string name = rxe_name(nic.netns, nic.ifname);
    const std::string where = "netns " + nic.netns;
    auto sock = rdma_socket_in(nic.netns);
    if (!sock) return undo(with_context(sock.error(), "rxe for " + nic.node));
    if (auto r =
            sock->call(netlink::rdma_newlink(name, "rxe", nic.ifname),
                       "rdma link add " + name + " type rxe netdev " + nic.ifname + " in " + where);
        !r)
      return undo(r.error());
    RxeDevice d{nic.node, nic.netns, nic.ifname, name, -1, ""};
    made.push_back(d);
    auto found = find_device(*sock, name, where);
    if (!found) return undo(found.error());
    if (!*found || (*found)->ndev_name != nic.ifname)
      return undo(fail("rxe device " + name + " in " + where + " is not on " + nic.ifname +
                       " after it was made (" +
                       (*found ? "its port reports netdev '" + (*found)->ndev_name + "' index " +
                                     std::to_string((*found)->ndev_index)
                               : std::string("not listed")) +
                       ")")
                      .error());
    // The GID table fills asynchronously (roce_gid_mgmt's work queue).
    auto gid = wait_rocev2_gid(name, nic.addr, std::chrono::steady_clock::now() + gid_wait);
    if (!gid)
      return undo(fail("rxe device " + name + ": no RoCE v2 GID for " + nic.addr.to_string() +
                       " appeared in /sys/class/infiniband/" + name + "/ports/1/gids within " +
                       std::to_string(gid_wait.count()) + " ms")
                      .error());
    made.back().gid_index = gid->index;
    made.back().gid = gid->gid;
  }
  return made;
}

Status remove_lab_rxe(const std::vector<RxeDevice>& devices) {
  std::string errors;
  for (const auto& d : devices) {
    auto sock = rdma_socket_in(d.netns);
    if (!sock) {
      if (sock.error().sys_errno == ENOENT) continue;  // the namespace went, and the device with it
      errors += (errors.empty() ? "" : "; ") + sock.error().message;
      continue;
    }
    const std::string where = "netns " + d.netns;
    auto devs = netlink::list_rdma_devices(*sock, where);
    if (!devs) {
      errors += (errors.empty() ? "" : "; ") + devs.error().message;
      continue;
    }
    for (const auto& rec : *devs) {
      if (rec.name != d.name) continue;
      // Ours only if it still sits on our interface in our namespace.
      auto port = netlink::query_rdma_port(*sock, rec.index, 1, where);
      if (!port || port->ndev_name != d.ifname) break;
      if (auto r = sock->call(netlink::rdma_dellink(rec.index), "rdma link delete " + d.name); !r)
        errors += (errors.empty() ? "" : "; ") + r.error().message;
    }
  }
  if (!errors.empty()) return fail(errors);
  return {};
}

}  // namespace tb::apply
