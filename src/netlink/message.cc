#include "netlink/message.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include <string>

#include "core/error.h"
#include "netlink/message_builder.h"

namespace tb::netlink {
namespace {

ifinfomsg* put_ifinfo(MessageBuilder& m, int ifindex, bool up) {
  auto* ifi = m.put_extra<ifinfomsg>();
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = ifindex;
  if (up) {
    ifi->ifi_flags = IFF_UP;
    ifi->ifi_change = IFF_UP;
  }
  return ifi;
}

// One TX and one RX queue, as a veth ends up using anyway. Left out, veth allocates one per
// possible CPU and then trims the real count to 1 (drivers/net/veth.c veth_init_queues), which
// costs a synchronize_net() per end plus sysfs queue objects it never uses.
void put_one_queue(MessageBuilder& m) {
  m.put_u32(IFLA_NUM_TX_QUEUES, 1);
  m.put_u32(IFLA_NUM_RX_QUEUES, 1);
}

}  // namespace

NlMsg new_veth(const VethEndSpec& a, const VethEndSpec& b, int mtu, int a_master) {
  MessageBuilder m(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, a.ifindex, /*up=*/true);
  m.put_str(IFLA_IFNAME, a.ifname);
  m.put_u32(IFLA_MTU, static_cast<uint32_t>(mtu));
  put_one_queue(m);
  if (a.netns_fd >= 0) m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(a.netns_fd));
  if (a_master > 0) m.put_u32(IFLA_MASTER, static_cast<uint32_t>(a_master));
  nlattr* linkinfo = m.nest_start(IFLA_LINKINFO);
  m.put_str(IFLA_INFO_KIND, "veth");
  nlattr* data = m.nest_start(IFLA_INFO_DATA);
  // VETH_INFO_PEER carries a whole ifinfomsg followed by IFLA_* attributes
  // (drivers/net/veth.c veth_newlink: rtnl_nla_parse_ifinfomsg(peer_tb, nla_peer, ...)).
  nlattr* peer = m.nest_start(VETH_INFO_PEER);
  // The peer cannot be created up: veth_newlink configures it before the pair is tied, and
  // veth_open fails with ENOTCONN while a veth has no peer (drivers/net/veth.c).
  put_ifinfo(m, b.ifindex, /*up=*/false);
  m.put_str(IFLA_IFNAME, b.ifname);
  m.put_u32(IFLA_MTU, static_cast<uint32_t>(mtu));
  put_one_queue(m);
  if (b.netns_fd >= 0) m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(b.netns_fd));
  m.nest_end(peer);
  m.nest_end(data);
  m.nest_end(linkinfo);
  return m.finish();
}

NlMsg new_vxlan(const VxlanSpec& v) {
  MessageBuilder m(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, v.ifindex, /*up=*/false);
  m.put_str(IFLA_IFNAME, v.ifname);
  m.put_u32(IFLA_MTU, static_cast<uint32_t>(v.mtu));
  if (v.netns_fd >= 0) m.put_u32(IFLA_NET_NS_FD, static_cast<uint32_t>(v.netns_fd));
  nlattr* linkinfo = m.nest_start(IFLA_LINKINFO);
  m.put_str(IFLA_INFO_KIND, "vxlan");
  nlattr* data = m.nest_start(IFLA_INFO_DATA);
  m.put_u32(IFLA_VXLAN_ID, v.vni);
  const uint32_t remote = htonl(v.remote.value), local = htonl(v.local.value);
  m.put_bytes(IFLA_VXLAN_GROUP, &remote, sizeof remote);  // a unicast group is the remote
  m.put_bytes(IFLA_VXLAN_LOCAL, &local, sizeof local);
  const uint16_t port = htons(v.port);
  m.put_bytes(IFLA_VXLAN_PORT, &port, sizeof port);
  m.nest_end(data);
  m.nest_end(linkinfo);
  return m.finish();
}

NlMsg new_bridge(std::string_view ifname, int ifindex, int mtu) {
  MessageBuilder m(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  put_ifinfo(m, ifindex, /*up=*/true);
  m.put_str(IFLA_IFNAME, ifname);
  m.put_u32(IFLA_MTU, static_cast<uint32_t>(mtu));
  nlattr* linkinfo = m.nest_start(IFLA_LINKINFO);
  m.put_str(IFLA_INFO_KIND, "bridge");
  m.nest_end(linkinfo);
  return m.finish();
}

NlMsg set_link(const LinkChange& change) {
  MessageBuilder m(RTM_NEWLINK, NLM_F_REQUEST);
  auto* ifi = put_ifinfo(m, change.ifindex, /*up=*/false);
  if (change.up) {
    ifi->ifi_flags = *change.up ? IFF_UP : 0;
    ifi->ifi_change = IFF_UP;
  }
  if (change.alias) {
    // Not NUL-terminated on purpose: the kernel takes the attribute length as the alias length
    // (net/core/rtnetlink.c do_setlink -> dev_set_alias(dev, nla_data(), nla_len())).
    TB_CHECK(change.alias->size() < IFALIASZ);
    m.put_bytes(IFLA_IFALIAS, change.alias->data(), change.alias->size());
  }
  if (change.master) m.put_u32(IFLA_MASTER, static_cast<uint32_t>(*change.master));
  if (change.mtu) m.put_u32(IFLA_MTU, static_cast<uint32_t>(*change.mtu));
  return m.finish();
}

NlMsg del_link(int ifindex, std::string_view ifname) {
  MessageBuilder m(RTM_DELLINK, NLM_F_REQUEST);
  put_ifinfo(m, ifindex, /*up=*/false);
  if (ifindex == 0) m.put_str(IFLA_IFNAME, ifname);
  return m.finish();
}

}  // namespace tb::netlink
