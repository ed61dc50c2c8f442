#include "capability/capability_netlink.h"

#include <libmnl/libmnl.h>
#include <linux/if.h>
#include <linux/if_link.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_queue.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <netinet/in.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>

namespace tb::capability::probe {
namespace {

constexpr size_t kCap = 1024;  // every probe request is well under this
constexpr uint16_t kCreate = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;

// A zeroed buffer with a header; attributes go in through libmnl's checked puts.
struct Draft {
  std::vector<uint8_t> buf = std::vector<uint8_t>(kCap);
  nlmsghdr* nlh = mnl_nlmsg_put_header(buf.data());

  Draft(uint16_t type, uint16_t flags) {
    nlh->nlmsg_type = type;
    nlh->nlmsg_flags = flags;
  }
  template <class T>
  T* extra() {
    return static_cast<T*>(mnl_nlmsg_put_extra_header(nlh, sizeof(T)));
  }
  NlBytes finish() {
    buf.resize(nlh->nlmsg_len);
    return std::move(buf);
  }
};

void put_str(nlmsghdr* nlh, uint16_t type, std::string_view s) {
  std::string z(s);  // NUL-terminated, as iproute2 sends names
  TB_CHECK(mnl_attr_put_check(nlh, kCap, type, z.size() + 1, z.c_str()));
}
void put_u32(nlmsghdr* nlh, uint16_t type, uint32_t v) {
  TB_CHECK(mnl_attr_put_u32_check(nlh, kCap, type, v));
}
nlattr* nest(nlmsghdr* nlh, uint16_t type) {
  nlattr* n = mnl_attr_nest_start_check(nlh, kCap, type);
  TB_CHECK(n != nullptr);
  return n;
}

// RDMA netlink has no family header; the client and op are packed into nlmsg_type
// (<rdma/rdma_netlink.h> RDMA_NL_GET_TYPE).
constexpr uint16_t rdma_type(uint16_t op) {
  return RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op);
}

}  // namespace

NlBytes newlink_msg(std::string_view kind, std::string_view name, uint32_t link_ifindex,
                    FillFn data) {
  Draft d(RTM_NEWLINK, kCreate);
  d.extra<ifinfomsg>()->ifi_family = AF_UNSPEC;
  put_str(d.nlh, IFLA_IFNAME, name);
  if (link_ifindex) put_u32(d.nlh, IFLA_LINK, link_ifindex);
  nlattr* info = nest(d.nlh, IFLA_LINKINFO);
  put_str(d.nlh, IFLA_INFO_KIND, kind);
  if (data) {
    nlattr* n = nest(d.nlh, IFLA_INFO_DATA);
    data(d.nlh, kCap);
    mnl_attr_nest_end(d.nlh, n);
  }
  mnl_attr_nest_end(d.nlh, info);
  return d.finish();
}

void fill_veth_peer(nlmsghdr* nlh, size_t cap) {
  // VETH_INFO_PEER carries an ifinfomsg followed by the peer's attributes (drivers/net/veth.c).
  nlattr* peer = mnl_attr_nest_start_check(nlh, cap, VETH_INFO_PEER);
  TB_CHECK(peer != nullptr);
  TB_CHECK(nlh->nlmsg_len + MNL_ALIGN(sizeof(ifinfomsg)) <= cap);
  auto* ifi = static_cast<ifinfomsg*>(mnl_nlmsg_get_payload_tail(nlh));
  std::memset(ifi, 0, sizeof(*ifi));
  nlh->nlmsg_len += MNL_ALIGN(sizeof(ifinfomsg));
  put_str(nlh, IFLA_IFNAME, "tbp1");
  mnl_attr_nest_end(nlh, peer);
}

void fill_vxlan(nlmsghdr* nlh, size_t) {
  put_u32(nlh, IFLA_VXLAN_ID, 42);
}
void fill_vrf(nlmsghdr* nlh, size_t) {
  put_u32(nlh, IFLA_VRF_TABLE, 1000);
}

NlBytes link_up_msg(uint32_t ifindex) {
  Draft d(RTM_NEWLINK, NLM_F_REQUEST | NLM_F_ACK);
  auto* ifi = d.extra<ifinfomsg>();
  ifi->ifi_family = AF_UNSPEC;
  ifi->ifi_index = static_cast<int>(ifindex);
  ifi->ifi_flags = IFF_UP;
  ifi->ifi_change = IFF_UP;
  return d.finish();
}

NlBytes newaddr_msg(uint32_t ifindex, uint32_t addr, uint8_t plen) {
  Draft d(RTM_NEWADDR, kCreate);
  auto* ifa = d.extra<ifaddrmsg>();
  ifa->ifa_family = AF_INET;
  ifa->ifa_prefixlen = plen;
  ifa->ifa_index = ifindex;
  uint32_t be = htonl(addr);
  mnl_attr_put(d.nlh, IFA_LOCAL, sizeof(be), &be);
  mnl_attr_put(d.nlh, IFA_ADDRESS, sizeof(be), &be);
  return d.finish();
}

NlBytes multipath_route_msg(uint32_t dst, uint8_t plen, uint32_t ifindex, uint32_t gw1,
                            uint32_t gw2) {
  Draft d(RTM_NEWROUTE, kCreate);
  auto* rtm = d.extra<rtmsg>();
  rtm->rtm_family = AF_INET;
  rtm->rtm_dst_len = plen;
  rtm->rtm_table = RT_TABLE_MAIN;
  rtm->rtm_protocol = RTPROT_STATIC;
  rtm->rtm_scope = RT_SCOPE_UNIVERSE;
  rtm->rtm_type = RTN_UNICAST;
  uint32_t be = htonl(dst);
  mnl_attr_put(d.nlh, RTA_DST, sizeof(be), &be);
  // RTA_MULTIPATH: rtnexthop structs, each followed by its own attributes and covering them in
  // rtnh_len (iproute2 ip/iproute.c add_nexthops).
  nlattr* mp = nest(d.nlh, RTA_MULTIPATH);
  for (uint32_t gw : {gw1, gw2}) {
    auto* nh = static_cast<rtnexthop*>(mnl_nlmsg_get_payload_tail(d.nlh));
    std::memset(nh, 0, sizeof(*nh));
    d.nlh->nlmsg_len += MNL_ALIGN(sizeof(rtnexthop));
    nh->rtnh_ifindex = static_cast<int>(ifindex);
    uint32_t gbe = htonl(gw);
    mnl_attr_put(d.nlh, RTA_GATEWAY, sizeof(gbe), &gbe);
    nh->rtnh_len =
        static_cast<unsigned short>(reinterpret_cast<uint8_t*>(mnl_nlmsg_get_payload_tail(d.nlh)) -
                                    reinterpret_cast<uint8_t*>(nh));
  }
  mnl_attr_nest_end(d.nlh, mp);
  return d.finish();
}

NlBytes newqdisc_msg(uint32_t ifindex, uint32_t parent, uint32_t handle, std::string_view kind,
                     FillFn options) {
  Draft d(RTM_NEWQDISC, kCreate);
  auto* tcm = d.extra<tcmsg>();
  tcm->tcm_family = AF_UNSPEC;
  tcm->tcm_ifindex = static_cast<int>(ifindex);
  tcm->tcm_parent = parent;
  tcm->tcm_handle = handle;
  put_str(d.nlh, TCA_KIND, kind);
  if (options) options(d.nlh, kCap);
  return d.finish();
}

void fill_htb(nlmsghdr* nlh, size_t cap) {
  tc_htb_glob g{};
  g.version = 3;  // HTB_VER >> 16 (net/sched/sch_htb.c htb_init rejects anything else)
  g.rate2quantum = 10;
  g.defcls = 0x10;
  nlattr* o = mnl_attr_nest_start_check(nlh, cap, TCA_OPTIONS);
  TB_CHECK(o != nullptr);
  TB_CHECK(mnl_attr_put_check(nlh, cap, TCA_HTB_INIT, sizeof(g), &g));
  mnl_attr_nest_end(nlh, o);
}

void fill_tbf(nlmsghdr* nlh, size_t cap) {
  tc_tbf_qopt q{};
  // An Ethernet link layer lets the kernel skip the legacy rate table (sch_tbf.c tbf_change).
  q.rate.linklayer = TC_LINKLAYER_ETHERNET;
  q.rate.rate = 125000;  // bytes/s = 1 Mbit/s
  q.limit = 10000;
  // Burst 10 kB at 1 Mbit/s = 80 ms, in psched ticks of 64 ns (PSCHED_SHIFT 6).
  q.buffer = 80'000'000u >> 6;
  nlattr* o = mnl_attr_nest_start_check(nlh, cap, TCA_OPTIONS);
  TB_CHECK(o != nullptr);
  TB_CHECK(mnl_attr_put_check(nlh, cap, TCA_TBF_PARMS, sizeof(q), &q));
  mnl_attr_nest_end(nlh, o);
}

void fill_netem(nlmsghdr* nlh, size_t cap) {
  // netem's TCA_OPTIONS is the struct itself, not a nest (net/sched/sch_netem.c netem_change).
  tc_netem_qopt q{};
  q.limit = 1000;
  TB_CHECK(mnl_attr_put_check(nlh, cap, TCA_OPTIONS, sizeof(q), &q));
}

void fill_prio(nlmsghdr* nlh, size_t cap) {
  // TCA_OPTIONS is the struct itself; the priomap is iproute2's default (tc/q_prio.c).
  tc_prio_qopt q{};
  q.bands = 3;
  const uint8_t map[TC_PRIO_MAX + 1] = {1, 2, 2, 2, 1, 2, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
  std::memcpy(q.priomap, map, sizeof(map));
  TB_CHECK(mnl_attr_put_check(nlh, cap, TCA_OPTIONS, sizeof(q), &q));
}

void fill_red(nlmsghdr* nlh, size_t cap) {
  // As `tc qdisc add ... red limit 100000 min 3000 max 9000 avpkt 1000 ecn` would, less the
  // probability table (a zero stab: every idle period reads as none). The kernel checks Wlog,
  // Scell_log and min <= max (red_check_params).
  tc_red_qopt q{};
  q.limit = 100'000;
  q.qth_min = 3'000;
  q.qth_max = 9'000;
  q.Wlog = 9;
  q.Plog = 23;
  q.Scell_log = 10;
  q.flags = TC_RED_ECN;
  const uint8_t stab[256] = {};
  nlattr* o = mnl_attr_nest_start_check(nlh, cap, TCA_OPTIONS);
  TB_CHECK(o != nullptr);
  TB_CHECK(mnl_attr_put_check(nlh, cap, TCA_RED_PARMS, sizeof(q), &q));
  TB_CHECK(mnl_attr_put_check(nlh, cap, TCA_RED_STAB, sizeof(stab), stab));
  mnl_attr_nest_end(nlh, o);
}

void fill_fq_codel(nlmsghdr* nlh, size_t cap) {
  nlattr* o = mnl_attr_nest_start_check(nlh, cap, TCA_OPTIONS);
  TB_CHECK(o != nullptr);
  mnl_attr_nest_end(nlh, o);
}

NlBytes nfqueue_bind_msg(uint16_t queue) {
  Draft d((NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK);
  auto* g = d.extra<nfgenmsg>();
  g->nfgen_family = AF_UNSPEC;
  g->version = NFNETLINK_V0;
  g->res_id = htons(queue);
  nfqnl_msg_config_cmd cmd{};
  cmd.command = NFQNL_CFG_CMD_BIND;
  cmd.pf = htons(AF_INET);
  TB_CHECK(mnl_attr_put_check(d.nlh, kCap, NFQA_CFG_CMD, sizeof(cmd), &cmd));
  return d.finish();
}

NlBytes rdma_get_dump_msg() {
  Draft d(rdma_type(RDMA_NLDEV_CMD_GET), NLM_F_REQUEST | NLM_F_DUMP);
  return d.finish();
}

}  // namespace tb::capability::probe
