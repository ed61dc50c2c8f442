#include "netlink/dump.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/gen_stats.h>
#include <linux/if_addr.h>
#include <linux/if_arp.h>
#include <linux/if_link.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>

#include <cstring>

#include "netlink/message.h"

namespace tb::netlink {
namespace {

std::string attr_str(const nlattr* a) {
  // Strings may or may not carry their NUL (IFLA_IFALIAS does not); take the payload bytes.
  const char* p = static_cast<const char*>(mnl_attr_get_payload(a));
  size_t n = mnl_attr_get_payload_len(a);
  return std::string(p, strnlen(p, n));
}

int linkinfo_cb(const nlattr* a, void* data) {
  if (mnl_attr_get_type(a) == IFLA_INFO_KIND) static_cast<LinkRecord*>(data)->kind = attr_str(a);
  return MNL_CB_OK;
}

int link_cb(const nlattr* a, void* data) {
  auto* r = static_cast<LinkRecord*>(data);
  switch (mnl_attr_get_type(a)) {
    case IFLA_IFNAME:
      r->name = attr_str(a);
      break;
    case IFLA_IFALIAS:
      r->alias = attr_str(a);
      break;
    case IFLA_MTU:
      if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0) r->mtu = static_cast<int>(mnl_attr_get_u32(a));
      break;
    case IFLA_MASTER:
      if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0)
        r->master = static_cast<int>(mnl_attr_get_u32(a));
      break;
    case IFLA_LINKINFO:
      mnl_attr_parse_nested(a, linkinfo_cb, r);
      break;
    case IFLA_STATS64:
      if (mnl_attr_get_payload_len(a) >= sizeof(rtnl_link_stats64)) {
        rtnl_link_stats64 st;
        std::memcpy(&st, mnl_attr_get_payload(a), sizeof(st));
        r->rx_bytes = st.rx_bytes;
        r->tx_bytes = st.tx_bytes;
        r->rx_dropped = st.rx_dropped;
        r->tx_dropped = st.tx_dropped;
      }
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

struct AddrAttrs {
  std::optional<uint32_t> local, address;
};

int addr_cb(const nlattr* a, void* data) {
  auto* r = static_cast<AddrAttrs*>(data);
  if (mnl_attr_get_payload_len(a) != sizeof(uint32_t)) return MNL_CB_OK;
  uint32_t v;
  std::memcpy(&v, mnl_attr_get_payload(a), sizeof(v));
  if (mnl_attr_get_type(a) == IFA_LOCAL) r->local = ntohl(v);
  if (mnl_attr_get_type(a) == IFA_ADDRESS) r->address = ntohl(v);
  return MNL_CB_OK;
}

// Retries a dump the kernel marked as interrupted (the table changed while it was read).
template <class T, class Parse>
Result<std::vector<T>> dump_all(NlSocket& sock, NlMsg (*build)(), const std::string& what,
                                Parse parse) {
  for (int attempt = 0;; ++attempt) {
    std::vector<T> out;
    auto r = sock.dump(build(), what, [&](const nlmsghdr* nlh) {
      if (auto rec = parse(nlh)) out.push_back(std::move(*rec));
    });
    if (r) return out;
    if (r.error().sys_errno != EAGAIN || attempt == 3) return std::unexpected(r.error());
  }
}

struct RouteAttrs {
  RouteMatch m;
  std::optional<Ipv4> gateway;  // single path
};

int route_cb(const nlattr* a, void* data) {
  auto* r = static_cast<RouteAttrs*>(data);
  switch (mnl_attr_get_type(a)) {
    case RTA_OIF:
      if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0) r->m.oif = static_cast<int>(mnl_attr_get_u32(a));
      break;
    case RTA_GATEWAY:
      if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0) r->gateway = Ipv4{ntohl(mnl_attr_get_u32(a))};
      break;
    case RTA_PREFSRC:
      if (mnl_attr_validate(a, MNL_TYPE_U32) >= 0) r->m.prefsrc = Ipv4{ntohl(mnl_attr_get_u32(a))};
      break;
    case RTA_MULTIPATH: {
      r->m.nexthops = 0;
      const auto* nh = static_cast<const rtnexthop*>(mnl_attr_get_payload(a));
      int left = static_cast<int>(mnl_attr_get_payload_len(a));
      while (RTNH_OK(nh, left)) {
        ++r->m.nexthops;
        RouteMatch::Hop hop{nh->rtnh_ifindex, std::nullopt};
        // The next hop's own attributes follow its header (include/uapi/linux/rtnetlink.h).
        const auto* at = reinterpret_cast<const nlattr*>(RTNH_DATA(nh));
        int alen = static_cast<int>(nh->rtnh_len) - static_cast<int>(RTNH_LENGTH(0));
        while (mnl_attr_ok(at, alen)) {
          if (mnl_attr_get_type(at) == RTA_GATEWAY && mnl_attr_validate(at, MNL_TYPE_U32) >= 0)
            hop.via = Ipv4{ntohl(mnl_attr_get_u32(at))};
          alen -= static_cast<int>(MNL_ALIGN(at->nla_len));
          at = mnl_attr_next(at);
        }
        r->m.hops.push_back(hop);
        left -= NLMSG_ALIGN(nh->rtnh_len);
        nh = RTNH_NEXT(nh);
      }
      break;
    }
    default:
      break;
  }
  return MNL_CB_OK;
}

int qdisc_stats2_cb(const nlattr* a, void* data) {
  auto* r = static_cast<QdiscRecord*>(data);
  switch (mnl_attr_get_type(a)) {
    case TCA_STATS_BASIC:
      if (mnl_attr_get_payload_len(a) >= sizeof(gnet_stats_basic)) {
        gnet_stats_basic b;
        std::memcpy(&b, mnl_attr_get_payload(a), sizeof(b));
        r->bytes = b.bytes;
        r->packets = b.packets;
      }
      break;
    case TCA_STATS_QUEUE:
      if (mnl_attr_get_payload_len(a) >= sizeof(gnet_stats_queue)) {
        gnet_stats_queue q;
        std::memcpy(&q, mnl_attr_get_payload(a), sizeof(q));
        r->drops = q.drops;
        r->overlimits = q.overlimits;
        r->qlen = q.qlen;
        r->backlog = q.backlog;
      }
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

int qdisc_cb(const nlattr* a, void* data) {
  auto* r = static_cast<QdiscRecord*>(data);
  switch (mnl_attr_get_type(a)) {
    case TCA_KIND:
      if (mnl_attr_validate(a, MNL_TYPE_NUL_STRING) >= 0) r->kind = mnl_attr_get_str(a);
      break;
    case TCA_STATS2:
      mnl_attr_parse_nested(a, qdisc_stats2_cb, r);
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

}  // namespace

std::optional<QdiscRecord> parse_qdisc(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWQDISC || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg)))
    return std::nullopt;
  const auto* t = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(nlh));
  QdiscRecord r;
  r.ifindex = t->tcm_ifindex;
  r.handle = t->tcm_handle;
  r.parent = t->tcm_parent;
  mnl_attr_parse(nlh, sizeof(tcmsg), qdisc_cb, &r);
  return r;
}

Result<std::vector<QdiscRecord>> list_qdiscs(NlSocket& sock, const std::string& where) {
  return dump_all<QdiscRecord>(sock, dump_qdiscs, "dump qdiscs in " + where, parse_qdisc);
}

std::optional<RouteMatch> parse_route_match(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWROUTE || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg)))
    return std::nullopt;
  const auto* rtm = static_cast<const rtmsg*>(mnl_nlmsg_get_payload(nlh));
  if (rtm->rtm_family != AF_INET) return std::nullopt;
  RouteAttrs r;
  r.m.dst_len = rtm->rtm_dst_len;
  mnl_attr_parse(nlh, sizeof(rtmsg), route_cb, &r);
  if (r.m.hops.empty() && r.m.oif != 0) r.m.hops.push_back({r.m.oif, r.gateway});
  return r.m;
}

Result<RouteMatch> lookup_route(NlSocket& sock, Ipv4 dst, const std::string& where) {
  std::optional<RouteMatch> m;
  const std::string what = "route get " + dst.to_string() + " in " + where;
  TB_TRY(sock.call(get_route(dst), what, [&](const nlmsghdr* nlh) { m = parse_route_match(nlh); }));
  if (!m) return fail(what + ": no answer");
  return *m;
}

std::optional<LinkRecord> parse_link(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWLINK || mnl_nlmsg_get_payload_len(nlh) < sizeof(ifinfomsg))
    return std::nullopt;
  const auto* ifi = static_cast<const ifinfomsg*>(mnl_nlmsg_get_payload(nlh));
  LinkRecord r;
  r.ifindex = ifi->ifi_index;
  r.flags = ifi->ifi_flags;
  mnl_attr_parse(nlh, sizeof(ifinfomsg), link_cb, &r);
  if (r.kind.empty() && ifi->ifi_type == ARPHRD_LOOPBACK) r.kind = "loopback";
  return r;
}

std::optional<AddrRecord> parse_ipv4_addr(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWADDR || mnl_nlmsg_get_payload_len(nlh) < sizeof(ifaddrmsg))
    return std::nullopt;
  const auto* ifa = static_cast<const ifaddrmsg*>(mnl_nlmsg_get_payload(nlh));
  if (ifa->ifa_family != AF_INET) return std::nullopt;
  AddrAttrs attrs;
  mnl_attr_parse(nlh, sizeof(ifaddrmsg), addr_cb, &attrs);
  auto a = attrs.local ? attrs.local : attrs.address;
  if (!a) return std::nullopt;
  return AddrRecord{static_cast<int>(ifa->ifa_index), Prefix{Ipv4{*a}, ifa->ifa_prefixlen}};
}

Result<std::vector<LinkRecord>> list_links(NlSocket& sock, const std::string& where) {
  return dump_all<LinkRecord>(sock, dump_links, "list links in " + where, parse_link);
}

Result<std::vector<AddrRecord>> list_ipv4_addrs(NlSocket& sock, const std::string& where) {
  return dump_all<AddrRecord>(sock, dump_ipv4_addrs, "list addresses in " + where, parse_ipv4_addr);
}

Result<LinkRecord> query_link(NlSocket& sock, int ifindex, const std::string& where) {
  std::optional<LinkRecord> rec;
  TB_TRY(sock.call(get_link(ifindex), "get link " + std::to_string(ifindex) + " in " + where,
                   [&](const nlmsghdr* nlh) { rec = parse_link(nlh); }));
  if (!rec) return fail("get link " + std::to_string(ifindex) + " in " + where + ": no answer");
  return *rec;
}

}  // namespace tb::netlink
