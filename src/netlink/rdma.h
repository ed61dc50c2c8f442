// RDMA netlink (NETLINK_RDMA, the `rdma` tool's bus): Soft-RoCE links and the device list, as
// iproute2's rdma/link.c (link_add_netdev, link_del) and rdma/dev.c send them.
//
// A new link's netdev is looked up in the namespace the socket was opened in, so the socket is
// opened inside the namespace that owns the netdev (NlSocket::open_in(fd, NETLINK_RDMA)). In the
// kernel's default "shared" RDMA netns mode device names are global; in every mode a port's
// netdev is reported only to a socket in the netdev's own namespace.
//
// Builders are pure (bytes unit-tested); list_rdma_devices / query_rdma_port do one request each.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "netlink/message.h"
#include "netlink/socket.h"

namespace tb::netlink {

// RDMA_NLDEV_CMD_NEWLINK: `rdma link add NAME type TYPE netdev NETDEV`.
NlMsg rdma_newlink(std::string_view name, std::string_view type, std::string_view netdev);
// RDMA_NLDEV_CMD_DELLINK: `rdma link delete NAME` (by device index).
NlMsg rdma_dellink(uint32_t dev_index);
// RDMA_NLDEV_CMD_GET as a dump: every device.
NlMsg rdma_dev_dump();
// RDMA_NLDEV_CMD_PORT_GET for one port of one device.
NlMsg rdma_port_get(uint32_t dev_index, uint32_t port);

struct RdmaDevRecord {
  uint32_t index = 0;
  std::string name;
};
struct RdmaPortRecord {
  uint32_t dev_index = 0;
  uint32_t port = 0;
  int ndev_index = 0;  // 0 when the netdev is in another namespace (or none)
  std::string ndev_name;
};

std::optional<RdmaDevRecord> parse_rdma_dev(const nlmsghdr* nlh);
std::optional<RdmaPortRecord> parse_rdma_port(const nlmsghdr* nlh);

Result<std::vector<RdmaDevRecord>> list_rdma_devices(NlSocket& sock, const std::string& where);
Result<RdmaPortRecord> query_rdma_port(NlSocket& sock, uint32_t dev_index, uint32_t port,
                                       const std::string& where);

}  // namespace tb::netlink
