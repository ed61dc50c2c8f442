#include "netlink/dump.h"

// Links, qdiscs and addresses are read through libnl-route's caches (rtnl_link, rtnl_qdisc,
// rtnl_addr) on a libnl socket in the namespace (NlSocket::libnl_socket), and parsed by libnl;
// route lookups go out through the NlSocket (RTM_F_FIB_MATCH, which libnl's rtnl_route_lookup
// does not set) and their answer is parsed by libnl's rtnl_route_parse. Our part is copying
// libnl's objects into the plain records of dump.h.
#include <arpa/inet.h>
#include <linux/if_arp.h>
#include <linux/rtnetlink.h>
#include <netlink/msg.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <netlink/route/qdisc.h>
#include <netlink/route/route.h>
#include <netlink/route/tc.h>

#include <cstring>

#include "netlink/message.h"

namespace tb::netlink {
namespace {

struct CacheFree {
  void operator()(nl_cache* c) const { nl_cache_free(c); }
};
using CachePtr = std::unique_ptr<nl_cache, CacheFree>;

struct ObjectPut {
  void operator()(nl_object* o) const { nl_object_put(o); }
};
using ObjectPtr = std::unique_ptr<nl_object, ObjectPut>;

// libnl's error as ours: its text, and the errno it stands for where one is meant.
Error libnl_error(const std::string& what, int err) {
  err = err < 0 ? -err : err;
  int e = EIO;
  if (err == NLE_DUMP_INTR) e = EAGAIN;
  if (err == NLE_OBJ_NOTFOUND || err == NLE_NODEV) e = ENODEV;
  if (err == NLE_PERM) e = EPERM;
  if (err == NLE_NOMEM) e = ENOMEM;
  if (err == NLE_AGAIN) e = ETIMEDOUT;  // SO_RCVTIMEO passed (NlSocket::kTimeout)
  return Error{what + ": " + nl_geterror(err), e, kExitFailed};
}

LinkRecord link_record(rtnl_link* l) {
  LinkRecord r;
  r.ifindex = rtnl_link_get_ifindex(l);
  if (const char* s = rtnl_link_get_name(l)) r.name = s;
  if (const char* s = rtnl_link_get_ifalias(l)) r.alias = s;
  if (const char* s = rtnl_link_get_type(l)) r.kind = s;  // IFLA_INFO_KIND
  if (r.kind.empty() && rtnl_link_get_arptype(l) == ARPHRD_LOOPBACK) r.kind = "loopback";
  r.flags = rtnl_link_get_flags(l);
  r.mtu = static_cast<int>(rtnl_link_get_mtu(l));
  r.master = rtnl_link_get_master(l);
  // IFLA_STATS64 where the kernel sends it (libnl prefers it over the 32-bit IFLA_STATS).
  r.rx_bytes = rtnl_link_get_stat(l, RTNL_LINK_RX_BYTES);
  r.tx_bytes = rtnl_link_get_stat(l, RTNL_LINK_TX_BYTES);
  r.rx_dropped = rtnl_link_get_stat(l, RTNL_LINK_RX_DROPPED);
  r.tx_dropped = rtnl_link_get_stat(l, RTNL_LINK_TX_DROPPED);
  return r;
}

QdiscRecord qdisc_record(rtnl_qdisc* q) {
  rtnl_tc* tc = TC_CAST(q);
  QdiscRecord r;
  r.ifindex = rtnl_tc_get_ifindex(tc);
  r.handle = rtnl_tc_get_handle(tc);
  r.parent = rtnl_tc_get_parent(tc);
  if (const char* s = rtnl_tc_get_kind(tc)) r.kind = s;
  // TCA_STATS2: basic (bytes, packets) and queue (drops, overlimits, qlen, backlog in bytes).
  r.bytes = rtnl_tc_get_stat(tc, RTNL_TC_BYTES);
  r.packets = rtnl_tc_get_stat(tc, RTNL_TC_PACKETS);
  r.drops = static_cast<uint32_t>(rtnl_tc_get_stat(tc, RTNL_TC_DROPS));
  r.overlimits = static_cast<uint32_t>(rtnl_tc_get_stat(tc, RTNL_TC_OVERLIMITS));
  r.qlen = static_cast<uint32_t>(rtnl_tc_get_stat(tc, RTNL_TC_QLEN));
  r.backlog = static_cast<uint32_t>(rtnl_tc_get_stat(tc, RTNL_TC_BACKLOG));
  return r;
}

std::optional<AddrRecord> addr_record(rtnl_addr* a) {
  if (rtnl_addr_get_family(a) != AF_INET) return std::nullopt;
  // IFA_LOCAL, or IFA_ADDRESS when there is no IFA_LOCAL (libnl takes it as the local one).
  nl_addr* local = rtnl_addr_get_local(a);
  if (!local || nl_addr_get_len(local) != sizeof(uint32_t)) return std::nullopt;
  uint32_t v;
  std::memcpy(&v, nl_addr_get_binary_addr(local), sizeof(v));
  return AddrRecord{rtnl_addr_get_ifindex(a),
                    Prefix{Ipv4{ntohl(v)}, static_cast<uint8_t>(rtnl_addr_get_prefixlen(a))}};
}

// One message parsed by libnl's parser for its type (the ops libnl-route registers).
ObjectPtr parse_with_libnl(const nlmsghdr* nlh) {
  nl_msg* msg = nlmsg_convert(const_cast<nlmsghdr*>(nlh));  // copies the message
  if (!msg) return nullptr;
  nlmsg_set_proto(msg, NETLINK_ROUTE);
  nl_object* out = nullptr;
  nl_msg_parse(
      msg,
      [](nl_object* o, void* arg) {
        auto** slot = static_cast<nl_object**>(arg);
        if (*slot == nullptr) {
          nl_object_get(o);
          *slot = o;
        }
      },
      &out);
  nlmsg_free(msg);
  return ObjectPtr(out);
}

// Fills a libnl cache, retrying a dump the kernel marked as interrupted (the table changed
// while it was read), and copies each object with `record`.
template <class T, class Record>
Result<std::vector<T>> dump_all(NlSocket& sock, const std::string& what,
                                int (*alloc)(nl_sock*, nl_cache**), Record record) {
  auto sk = sock.libnl_socket();
  if (!sk) return std::unexpected(with_context(sk.error(), what));
  for (int attempt = 0;; ++attempt) {
    nl_cache* raw = nullptr;
    const int err = alloc(*sk, &raw);
    CachePtr cache(raw);
    if (err < 0) {
      if (-err == NLE_DUMP_INTR && attempt < 3) continue;
      return std::unexpected(libnl_error(what, err));
    }
    std::vector<T> out;
    for (nl_object* o = nl_cache_get_first(cache.get()); o; o = nl_cache_get_next(o))
      if (std::optional<T> rec = record(o)) out.push_back(std::move(*rec));
    return out;
  }
}

int alloc_links(nl_sock* sk, nl_cache** c) {
  return rtnl_link_alloc_cache(sk, AF_UNSPEC, c);
}
int alloc_qdiscs(nl_sock* sk, nl_cache** c) {
  return rtnl_qdisc_alloc_cache(sk, c);
}
int alloc_addrs(nl_sock* sk, nl_cache** c) {
  return rtnl_addr_alloc_cache(sk, c);
}

}  // namespace

std::optional<QdiscRecord> parse_qdisc(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWQDISC || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(tcmsg)))
    return std::nullopt;
  ObjectPtr o = parse_with_libnl(nlh);
  if (!o) return std::nullopt;
  return qdisc_record(reinterpret_cast<rtnl_qdisc*>(o.get()));
}

Result<std::vector<QdiscRecord>> list_qdiscs(NlSocket& sock, const std::string& where) {
  return dump_all<QdiscRecord>(sock, "dump qdiscs in " + where, alloc_qdiscs, [](nl_object* o) {
    return std::optional(qdisc_record(reinterpret_cast<rtnl_qdisc*>(o)));
  });
}

std::optional<RouteMatch> parse_route_match(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWROUTE || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(rtmsg)))
    return std::nullopt;
  const auto* rtm = static_cast<const rtmsg*>(NLMSG_DATA(nlh));
  if (rtm->rtm_family != AF_INET) return std::nullopt;
  rtnl_route* raw = nullptr;
  if (rtnl_route_parse(const_cast<nlmsghdr*>(nlh), &raw) < 0 || !raw) return std::nullopt;
  ObjectPtr route(reinterpret_cast<nl_object*>(raw));
  RouteMatch m;
  m.dst_len = rtm->rtm_dst_len;
  // libnl turns a single path (RTA_OIF, RTA_GATEWAY) into one next hop and RTA_MULTIPATH into
  // one per rtnexthop; the kernel sends a one-hop entry as a single path (fib_dump_info).
  const int n = rtnl_route_get_nnexthops(raw);
  m.nexthops = n > 1 ? n : 1;
  for (int i = 0; i < n; ++i) {
    rtnl_nexthop* nh = rtnl_route_nexthop_n(raw, i);
    RouteMatch::Hop hop{rtnl_route_nh_get_ifindex(nh), std::nullopt};
    if (nl_addr* gw = rtnl_route_nh_get_gateway(nh);
        gw && nl_addr_get_family(gw) == AF_INET && nl_addr_get_len(gw) == sizeof(uint32_t)) {
      uint32_t v;
      std::memcpy(&v, nl_addr_get_binary_addr(gw), sizeof(v));
      hop.via = Ipv4{ntohl(v)};
    }
    m.hops.push_back(hop);
  }
  if (n == 1) m.oif = m.hops[0].ifindex;
  if (nl_addr* src = rtnl_route_get_pref_src(raw);
      src && nl_addr_get_len(src) == sizeof(uint32_t)) {
    uint32_t v;
    std::memcpy(&v, nl_addr_get_binary_addr(src), sizeof(v));
    m.prefsrc = Ipv4{ntohl(v)};
  }
  if (uint32_t mtu = 0; rtnl_route_get_metric(raw, RTAX_MTU, &mtu) == 0)
    m.mtu = static_cast<int>(mtu);
  return m;
}

Result<RouteMatch> lookup_route(NlSocket& sock, Ipv4 dst, const std::string& where) {
  std::optional<RouteMatch> m;
  const std::string what = "route get " + dst.to_string() + " in " + where;
  TB_TRY(sock.call(get_route(dst), what, [&](const nlmsghdr* nlh) { m = parse_route_match(nlh); }));
  if (!m) return fail(what + ": no answer");
  return *m;
}

std::optional<LinkRecord> parse_link(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWLINK || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(ifinfomsg)))
    return std::nullopt;
  ObjectPtr o = parse_with_libnl(nlh);
  if (!o) return std::nullopt;
  return link_record(reinterpret_cast<rtnl_link*>(o.get()));
}

std::optional<AddrRecord> parse_ipv4_addr(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != RTM_NEWADDR || nlh->nlmsg_len < NLMSG_LENGTH(sizeof(ifaddrmsg)))
    return std::nullopt;
  ObjectPtr o = parse_with_libnl(nlh);
  if (!o) return std::nullopt;
  return addr_record(reinterpret_cast<rtnl_addr*>(o.get()));
}

Result<std::vector<LinkRecord>> list_links(NlSocket& sock, const std::string& where) {
  return dump_all<LinkRecord>(sock, "list links in " + where, alloc_links, [](nl_object* o) {
    return std::optional(link_record(reinterpret_cast<rtnl_link*>(o)));
  });
}

Result<std::vector<AddrRecord>> list_ipv4_addrs(NlSocket& sock, const std::string& where) {
  return dump_all<AddrRecord>(sock, "list addresses in " + where, alloc_addrs, [](nl_object* o) {
    return addr_record(reinterpret_cast<rtnl_addr*>(o));
  });
}

Result<LinkRecord> query_link(NlSocket& sock, int ifindex, const std::string& where) {
  const std::string what = "get link " + std::to_string(ifindex) + " in " + where;
  auto sk = sock.libnl_socket();
  if (!sk) return std::unexpected(with_context(sk.error(), what));
  rtnl_link* raw = nullptr;
  if (int err = rtnl_link_get_kernel(*sk, ifindex, nullptr, &raw); err < 0)
    return std::unexpected(libnl_error(what, err));
  if (!raw) return fail(what + ": no answer");
  ObjectPtr link(reinterpret_cast<nl_object*>(raw));
  return link_record(raw);
}

}  // namespace tb::netlink
