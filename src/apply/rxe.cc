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

Result<RxeDevice> add_rxe(const plan::CreateRxe& op, std::chrono::milliseconds gid_wait) {
  const std::string& name = op.name;
  const std::string where = "netns " + op.netns;
  auto sock = rdma_socket_in(op.netns);
  if (!sock) return std::unexpected(with_context(sock.error(), "rxe for " + op.node));
  if (auto r =
          sock->call(netlink::rdma_newlink(name, "rxe", op.ifname),
                     "rdma link add " + name + " type rxe netdev " + op.ifname + " in " + where);
      !r)
    return std::unexpected(r.error());
  RxeDevice d{op.node, op.netns, op.ifname, name, -1, ""};
  auto fail_removing = [&](Error e) -> Result<RxeDevice> {
    if (auto r = remove_lab_rxe({d}); !r) e.message += "; removing it: " + r.error().message;
    return std::unexpected(e);
  };
  auto found = find_device(*sock, name, where);
  if (!found) return fail_removing(found.error());
  if (!*found || (*found)->ndev_name != op.ifname)
    return fail_removing(fail("rxe device " + name + " in " + where + " is not on " + op.ifname +
                              " after it was made (" +
                              (*found ? "its port reports netdev '" + (*found)->ndev_name +
                                            "' index " + std::to_string((*found)->ndev_index)
                                      : std::string("not listed")) +
                              ")")
                             .error());
  // The GID table fills asynchronously (roce_gid_mgmt's work queue).
  auto gid = wait_rocev2_gid(name, op.addr, std::chrono::steady_clock::now() + gid_wait);
  if (!gid)
    return fail_removing(fail("rxe device " + name + ": no RoCE v2 GID for " + op.addr.to_string() +
                              " appeared in /sys/class/infiniband/" + name +
                              "/ports/1/gids within " + std::to_string(gid_wait.count()) + " ms")
                             .error());
  d.gid_index = gid->index;
  d.gid = gid->gid;
  return d;
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
