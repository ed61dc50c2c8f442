// The doctor's own small netlink kit: message builders for the objects a capability probe
// creates, and a socket that sends one request and waits for its acknowledgement.
//
// It is deliberately separate from src/netlink/ (the product's netlink room): probes need a few
// object kinds the product never creates (bond, vrf, prio, RDMA links) and must not depend on the
// product's code paths to judge the kernel. Builders make no system calls (STYLE rule 7), so their
// bytes are unit-tested. CheckSocket owns its descriptor; it stays bound to the namespace it was
// opened in. Not thread-safe; probes use one socket per forked child.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::capability::probe {

// One built request: exactly nlmsg_len bytes.
using NlBytes = std::vector<uint8_t>;

// Puts kind-specific attributes into a message under construction (inside IFLA_INFO_DATA for
// links; after TCA_KIND for qdiscs). `cap` is the buffer's capacity.
using FillFn = void (*)(nlmsghdr* nlh, size_t cap);

// RTM_NEWLINK, NLM_F_CREATE|NLM_F_EXCL|NLM_F_ACK: a link of `kind` called `name`, optionally on
// top of `link_ifindex` (IFLA_LINK, macvlan), with `data` filling IFLA_INFO_DATA when non-null.
NlBytes newlink_msg(std::string_view kind, std::string_view name, uint32_t link_ifindex = 0,
                    FillFn data = nullptr);
// IFLA_INFO_DATA fillers for kinds the kernel will not create without them.
void fill_veth_peer(nlmsghdr* nlh, size_t cap);  // VETH_INFO_PEER named "tbp1"
void fill_vxlan(nlmsghdr* nlh, size_t cap);      // IFLA_VXLAN_ID 42
void fill_vrf(nlmsghdr* nlh, size_t cap);        // IFLA_VRF_TABLE 1000
// RTM_NEWLINK on an existing link: set IFF_UP.
NlBytes link_up_msg(uint32_t ifindex);
// RTM_NEWADDR: IPv4 `addr`/`plen` (host byte order) on ifindex.
NlBytes newaddr_msg(uint32_t ifindex, uint32_t addr, uint8_t plen);
// RTM_NEWROUTE: dst/plen through two gateways on ifindex (RTA_MULTIPATH, equal weights).
NlBytes multipath_route_msg(uint32_t dst, uint8_t plen, uint32_t ifindex, uint32_t gw1,
                            uint32_t gw2);
// RTM_NEWQDISC, NLM_F_CREATE|NLM_F_EXCL: a qdisc of `kind` at `parent` with `handle`; `options`
// adds TCA_OPTIONS (and anything else the kind needs) when non-null.
NlBytes newqdisc_msg(uint32_t ifindex, uint32_t parent, uint32_t handle, std::string_view kind,
                     FillFn options = nullptr);
void fill_htb(nlmsghdr* nlh, size_t cap);       // TCA_HTB_INIT, default class 1:10
void fill_tbf(nlmsghdr* nlh, size_t cap);       // TCA_TBF_PARMS, 1 Mbit/s, 10 kB burst
void fill_netem(nlmsghdr* nlh, size_t cap);     // tc_netem_qopt, limit 1000, no delay
void fill_prio(nlmsghdr* nlh, size_t cap);      // tc_prio_qopt, 3 bands, default priomap
void fill_fq_codel(nlmsghdr* nlh, size_t cap);  // empty TCA_OPTIONS nest (all defaults)
// TCA_RED_PARMS (limit 100 KB, min 3 KB, max 9 KB, ECN) and a zero TCA_RED_STAB.
void fill_red(nlmsghdr* nlh, size_t cap);

// NETLINK_NETFILTER: bind a userspace listener to NFQUEUE `queue` (what libnetfilter_queue's
// nfq_create_queue sends), with NLM_F_ACK.
NlBytes nfqueue_bind_msg(uint16_t queue);

// RDMA netlink (NETLINK_RDMA): the device dump, as iproute2 rdma/dev.c sends it. The rxe probe
// makes and deletes its links with the product's builders (netlink/rdma.h): it needs a veth
// across two namespaces, which this kit does not build.
NlBytes rdma_get_dump_msg();

// One RDMA device as RDMA_NLDEV_CMD_GET reports it.
struct RdmaDev {
  uint32_t index = 0;
  std::string name;
};

class CheckSocket {
 public:
  // Opens and binds a netlink socket of `bus` (NETLINK_ROUTE, NETLINK_RDMA) in the current netns,
  // with extended acks and a receive timeout.
  static Result<CheckSocket> open(int bus);

  // Sends `msg` (which must ask for an ack) and waits for the ack. The Error reads
  // "<what>: <strerror> (kernel: <extack>)".
  Status request(NlBytes msg, const std::string& what);
  // Sends an RDMA_NLDEV_CMD_GET dump and collects the devices.
  Result<std::vector<RdmaDev>> rdma_devices();

 private:
  explicit CheckSocket(UniqueFd fd) : fd_(std::move(fd)) {}
  Status send(NlBytes& msg, const std::string& what);
  UniqueFd fd_;
  uint32_t seq_ = 1;
};

}  // namespace tb::capability::probe
