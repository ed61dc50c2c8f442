// Traffic-control builders (declared in netlink/tc_message.h).
#include "netlink/tc_message.h"

#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if_ether.h>
#include <linux/pkt_cls.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <sys/socket.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/error.h"
#include "core/overload.h"
#include "netlink/message_builder.h"

namespace tb::netlink {
namespace {

// A psched tick is 64 ns: include/net/pkt_sched.h PSCHED_SHIFT 6, PSCHED_TICKS2NS(x) = x << 6.
// Fields named "buffer" or "latency" in tc structs are in ticks (iproute2 tc/tc_core.c
// tc_calc_xmittime reads the same factor from /proc/net/psched).
constexpr int kPschedShift = 6;
constexpr uint64_t kU32Max = std::numeric_limits<uint32_t>::max();

uint32_t ns_to_ticks(int64_t ns) {
  if (ns <= 0) return 0;
  return static_cast<uint32_t>(
      std::min<uint64_t>(static_cast<uint64_t>(ns) >> kPschedShift, kU32Max));
}

// Time to send `bytes` at `rate` bytes per second, in ticks (tc_calc_xmittime).
uint32_t xmit_ticks(uint64_t rate, uint32_t bytes) {
  if (rate == 0) return 0;
  const long double ns = static_cast<long double>(bytes) * 1e9L / static_cast<long double>(rate);
  return ns_to_ticks(static_cast<int64_t>(std::min<long double>(ns, 9.2e18L)));
}

// A rate that does not fit the 32-bit field is sent as ~0U there and in full in a *_RATE64
// attribute (iproute2 tc/q_tbf.c, q_htb.c, q_netem.c: "rate64 >= (1ULL << 32)").
bool needs_rate64(uint64_t rate) {
  return rate > kU32Max;
}

tc_ratespec ratespec(uint64_t rate) {
  tc_ratespec r{};
  r.rate = static_cast<uint32_t>(std::min(rate, kU32Max));
  r.linklayer = TC_LINKLAYER_ETHERNET;  // not UNAWARE: no legacy rate table is read
  return r;
}

void put_u64(MessageBuilder& m, uint16_t type, uint64_t v) {
  m.put_bytes(type, &v, sizeof(v));
}

void put_tbf(MessageBuilder& m, const TbfOptions& o) {
  TB_CHECK(o.rate > 0 && o.burst > 0 && o.limit > 0);
  tc_tbf_qopt q{};
  q.rate = ratespec(o.rate);
  q.limit = o.limit;
  q.buffer = xmit_ticks(o.rate, o.burst);
  nlattr* opts = m.nest_start(TCA_OPTIONS);
  m.put_bytes(TCA_TBF_PARMS, &q, sizeof(q));
  // With TCA_TBF_BURST the kernel takes the bucket size in bytes and derives the buffer time
  // from it (sch_tbf.c tbf_change); iproute2 sends both as well.
  m.put_u32(TCA_TBF_BURST, o.burst);
  if (needs_rate64(o.rate)) put_u64(m, TCA_TBF_RATE64, o.rate);
  m.nest_end(opts);
}

void put_netem(MessageBuilder& m, const NetemOptions& o) {
  TB_CHECK(o.delay_ns >= 0 && o.jitter_ns >= 0 && o.limit > 0);
  TB_CHECK(o.jitter_table.size() <= NETEM_DIST_MAX);
  // netem's TCA_OPTIONS is a tc_netem_qopt followed by TCA_NETEM_* attributes, without
  // NLA_F_NESTED (sch_netem.c netem_change -> parse_attr(..., sizeof(*qopt)); q_netem.c).
  nlattr* opts = m.nest_start(TCA_OPTIONS);
  opts->nla_type = TCA_OPTIONS;
  auto* q = m.put_extra<tc_netem_qopt>();
  // The 32-bit tick fields are what kernels before 4.15 read; LATENCY64/JITTER64 (ns) override
  // them (netem_change: "if (tb[TCA_NETEM_LATENCY64]) q->latency = ...").
  q->latency = ns_to_ticks(o.delay_ns);
  q->jitter = ns_to_ticks(o.jitter_ns);
  q->limit = o.limit;
  q->loss = netem_probability(o.loss_pct);
  put_u64(m, TCA_NETEM_LATENCY64, static_cast<uint64_t>(o.delay_ns));
  put_u64(m, TCA_NETEM_JITTER64, static_cast<uint64_t>(o.jitter_ns));
  if (o.rate > 0) {
    if (needs_rate64(o.rate)) put_u64(m, TCA_NETEM_RATE64, o.rate);
    tc_netem_rate r{};
    r.rate = static_cast<uint32_t>(std::min(o.rate, kU32Max));
    m.put_bytes(TCA_NETEM_RATE, &r, sizeof(r));
  }
  if (!o.jitter_table.empty())
    m.put_bytes(TCA_NETEM_DELAY_DIST, o.jitter_table.data(),
                o.jitter_table.size() * sizeof(int16_t));
  m.nest_end(opts);
}

void put_htb(MessageBuilder& m, const HtbOptions& o) {
  tc_htb_glob g{};
  g.version = TC_HTB_PROTOVER;  // htb_init rejects any other (sch_htb.c: HTB_VER >> 16)
  g.rate2quantum = 10;          // iproute2 tc/q_htb.c default r2q
  g.defcls = o.default_class;
  nlattr* opts = m.nest_start(TCA_OPTIONS);
  m.put_bytes(TCA_HTB_INIT, &g, sizeof(g));
  m.nest_end(opts);
}

void put_htb_class(MessageBuilder& m, const HtbClassOptions& o) {
  TB_CHECK(o.rate > 0 && o.ceil >= o.rate);
  tc_htb_opt h{};
  h.rate = ratespec(o.rate);
  h.ceil = ratespec(o.ceil);
  // HTB has no byte-sized burst attribute: buffer/cbuffer are the time to send the burst at
  // the rate, in ticks (sch_htb.c htb_change_class: cl->buffer = PSCHED_TICKS2NS(hopt->buffer)).
  h.buffer = xmit_ticks(o.rate, o.burst);
  h.cbuffer = xmit_ticks(o.ceil, o.cburst);
  h.quantum = o.quantum;
  TB_CHECK(o.prio < TC_HTB_NUMPRIO);
  h.prio = o.prio;
  nlattr* opts = m.nest_start(TCA_OPTIONS);
  if (needs_rate64(o.rate)) put_u64(m, TCA_HTB_RATE64, o.rate);
  if (needs_rate64(o.ceil)) put_u64(m, TCA_HTB_CEIL64, o.ceil);
  m.put_bytes(TCA_HTB_PARMS, &h, sizeof(h));
  m.nest_end(opts);
}

void put_red(MessageBuilder& m, const RedOptions& o) {
  TB_CHECK(o.limit > 0 && o.qth_min <= o.qth_max && o.stab.size() == 256);
  tc_red_qopt q{};
  q.limit = o.limit;
  q.qth_min = o.qth_min;
  q.qth_max = o.qth_max;
  q.Wlog = o.wlog;
  q.Plog = o.plog;
  q.Scell_log = o.scell_log;
  // The flags go in the parms' historic field or, with nodrop, all of them in TCA_RED_FLAGS (a
  // bitfield32: value, selector) and none in the parms: the kernel refuses both at once
  // (sch_red.c red_get_flags), and iproute2 sends them so.
  q.flags = o.nodrop ? 0 : TC_RED_ECN;
  nlattr* opts = m.nest_start(TCA_OPTIONS);
  m.put_bytes(TCA_RED_PARMS, &q, sizeof(q));
  m.put_bytes(TCA_RED_STAB, o.stab.data(), o.stab.size());
  m.put_u32(TCA_RED_MAX_P, o.max_p);
  if (o.nodrop) {
    nla_bitfield32 f{TC_RED_ECN | TC_RED_NODROP, TC_RED_ECN | TC_RED_NODROP};
    m.put_bytes(TCA_RED_FLAGS, &f, sizeof(f));
  }
  m.nest_end(opts);
}

void put_bfifo(MessageBuilder& m, const BfifoOptions& o) {
  TB_CHECK(o.limit > 0);
  tc_fifo_qopt f{o.limit};
  m.put_bytes(TCA_OPTIONS, &f, sizeof(f));  // bare struct (sch_fifo.c fifo_init)
}

tcmsg* put_tcmsg(MessageBuilder& m, const TcPlace& at) {
  auto* t = m.put_extra<tcmsg>();
  t->tcm_family = AF_UNSPEC;
  t->tcm_ifindex = at.ifindex;
  t->tcm_parent = at.parent;
  t->tcm_handle = at.handle;
  return t;
}

}  // namespace

std::string_view tc_kind(const TcOptions& o) {
  return std::visit(Overload{
                        [](const TbfOptions&) { return std::string_view("tbf"); },
                        [](const NetemOptions&) { return std::string_view("netem"); },
                        [](const HtbOptions&) { return std::string_view("htb"); },
                        [](const HtbClassOptions&) { return std::string_view("htb"); },
                        [](const BfifoOptions&) { return std::string_view("bfifo"); },
                        [](const RedOptions&) { return std::string_view("red"); },
                    },
                    o);
}

bool is_class(const TcOptions& o) {
  return std::holds_alternative<HtbClassOptions>(o);
}

NlMsg new_tc(const TcPlace& at, const TcOptions& options, TcWrite write) {
  uint16_t flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_REPLACE;
  if (write == TcWrite::kCreateOnly) flags |= NLM_F_EXCL;
  MessageBuilder m(is_class(options) ? RTM_NEWTCLASS : RTM_NEWQDISC, flags);
  put_tcmsg(m, at);
  m.put_str(TCA_KIND, tc_kind(options));
  std::visit(Overload{
                 [&](const TbfOptions& o) { put_tbf(m, o); },
                 [&](const NetemOptions& o) { put_netem(m, o); },
                 [&](const HtbOptions& o) { put_htb(m, o); },
                 [&](const HtbClassOptions& o) { put_htb_class(m, o); },
                 [&](const BfifoOptions& o) { put_bfifo(m, o); },
                 [&](const RedOptions& o) { put_red(m, o); },
             },
             options);
  return m.finish();
}

NlMsg del_qdisc(int ifindex, uint32_t parent, uint32_t handle) {
  MessageBuilder m(RTM_DELQDISC, NLM_F_REQUEST);
  put_tcmsg(m, {ifindex, parent, handle});
  return m.finish();
}

NlMsg new_u32_dscp_filter(int ifindex, const U32DscpFilter& f, TcWrite write) {
  TB_CHECK(f.dscp < 64 && f.prio > 0 && f.classid != 0);
  uint16_t flags = NLM_F_REQUEST | NLM_F_CREATE;
  if (write == TcWrite::kCreateOnly) flags |= NLM_F_EXCL;
  MessageBuilder m(RTM_NEWTFILTER, flags);
  tcmsg* t = put_tcmsg(m, {ifindex, f.parent, f.handle});
  t->tcm_info = TC_H_MAKE(static_cast<uint32_t>(f.prio) << 16, htons(ETH_P_IP));
  m.put_str(TCA_KIND, "u32");
  // The selector and its one key, as iproute2 tc/f_u32.c packs "match ip dsfield V M": the TOS
  // byte is byte 1 of the IPv4 header, so the key is the header's first word, masked.
  tc_u32_sel sel{};
  sel.flags = TC_U32_TERMINAL;
  sel.nkeys = 1;
  tc_u32_key key{};
  key.mask = htonl(0x00fc0000u);
  key.val = htonl(static_cast<uint32_t>(f.dscp) << 18);
  key.off = 0;
  uint8_t s[sizeof(tc_u32_sel) + sizeof(tc_u32_key)];
  std::memcpy(s, &sel, sizeof(sel));
  std::memcpy(s + sizeof(sel), &key, sizeof(key));
  nlattr* opts = m.nest_start(TCA_OPTIONS);
  m.put_u32(TCA_U32_CLASSID, f.classid);
  m.put_bytes(TCA_U32_SEL, s, sizeof(s));
  m.nest_end(opts);
  return m.finish();
}

RedOptions red_options(uint32_t kmin, uint32_t kmax, double pmax, uint32_t limit, uint32_t avpkt,
                       uint64_t rate) {
  TB_CHECK(avpkt > 0 && rate > 0 && kmin <= kmax && limit > 0);
  RedOptions r;
  r.limit = limit;
  r.qth_min = kmin;
  r.qth_max = kmax;
  // Wlog from the burst q_red.c defaults to, (2 min + max) / (3 avpkt) packets
  // (tc_red.c tc_red_eval_ewma: the smallest weight whose average reaches min within a burst).
  const uint32_t burst =
      std::max<uint32_t>((2 * kmin + kmax + 3 * avpkt - 1) / (3 * avpkt), 1 + kmin / avpkt);
  const double a = static_cast<double>(burst) + 1 - static_cast<double>(kmin) / avpkt;
  double w = 0.5;
  r.wlog = 1;
  for (; r.wlog < 31; ++r.wlog, w /= 2)
    if (a <= (1 - std::pow(1 - w, burst)) / w) break;
  // Plog (tc_red_eval_P): max_p / (max - min) as a power of two, for kernels that ignore max_p.
  const double p = std::clamp(pmax, 0.0, 1.0);
  if (kmax > kmin) {
    double prob = p / (kmax - kmin);
    uint8_t i = 0;
    for (; i < 32 && prob <= 1.0; ++i) prob *= 2;
    r.plog = i < 32 ? i : 31;
  }
  r.max_p = p >= 1.0 ? 0xffffffffu : static_cast<uint32_t>(p * 4294967296.0);
  // Idle damping (tc_red_eval_idle_damping), in microseconds as the kernel indexes the table
  // (red_calc_qavg_from_idle_time: us_idle >> Scell_log): each entry is how many halvings of
  // the average an idle time of (i << Scell_log) us is worth.
  const double xmit_us = 1e6 * avpkt / static_cast<double>(rate);
  const double lw = -std::log(1.0 - 1.0 / static_cast<double>(1u << r.wlog)) / xmit_us;
  const double maxtime = 31 / lw;
  uint8_t clog = 0;
  while (clog < 31 && maxtime / static_cast<double>(1ull << clog) >= 512) ++clog;
  r.scell_log = clog;
  r.stab.assign(256, 0);
  for (int i = 1; i < 255; ++i)
    r.stab[static_cast<size_t>(i)] = static_cast<uint8_t>(
        std::min(31.0, static_cast<double>(static_cast<uint64_t>(i) << clog) * lw));
  r.stab[255] = 31;
  return r;
}

NlMsg new_clsact(int ifindex) {
  MessageBuilder m(RTM_NEWQDISC, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  put_tcmsg(m, {ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0)});
  m.put_str(TCA_KIND, "clsact");
  return m.finish();
}

NlMsg del_clsact(int ifindex) {
  MessageBuilder m(RTM_DELQDISC, NLM_F_REQUEST);
  put_tcmsg(m, {ifindex, TC_H_CLSACT, TC_H_MAKE(TC_H_CLSACT, 0)});
  return m.finish();
}

NlMsg new_bpf_filter(int ifindex, const BpfFilter& f) {
  TB_CHECK(f.prio > 0 && f.fd >= 0);
  MessageBuilder m(RTM_NEWTFILTER, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_EXCL);
  tcmsg* t = put_tcmsg(
      m,
      {ifindex, TC_H_MAKE(TC_H_CLSACT, f.egress ? TC_H_MIN_EGRESS : TC_H_MIN_INGRESS), f.handle});
  t->tcm_info = TC_H_MAKE(static_cast<uint32_t>(f.prio) << 16, htons(ETH_P_ALL));
  m.put_str(TCA_KIND, "bpf");
  nlattr* opts = m.nest_start(TCA_OPTIONS);
  m.put_u32(TCA_BPF_FD, static_cast<uint32_t>(f.fd));
  m.put_str(TCA_BPF_NAME, f.name);
  m.put_u32(TCA_BPF_FLAGS, TCA_BPF_FLAG_ACT_DIRECT);
  m.nest_end(opts);
  return m.finish();
}

std::string format_u32_handle(uint32_t handle) {
  char buf[32];
  const uint32_t hash = (handle >> 12) & 0xFF;
  if (hash)
    std::snprintf(buf, sizeof(buf), "%x:%x:%x", handle >> 20, hash, handle & 0xFFF);
  else
    std::snprintf(buf, sizeof(buf), "%x::%x", handle >> 20, handle & 0xFFF);
  return buf;
}

std::string format_handle(uint32_t handle) {
  if (handle == TC_H_ROOT) return "root";
  char buf[24];
  if (TC_H_MIN(handle) == 0)
    std::snprintf(buf, sizeof(buf), "%x:", TC_H_MAJ(handle) >> 16);
  else
    std::snprintf(buf, sizeof(buf), "%x:%x", TC_H_MAJ(handle) >> 16, TC_H_MIN(handle));
  return buf;
}

uint32_t netem_probability(double pct) {
  const double p = std::clamp(pct, 0.0, 100.0) / 100.0;
  return static_cast<uint32_t>(std::llround(p * static_cast<double>(kU32Max)));
}

std::vector<int16_t> normal_jitter_table(size_t size) {
  TB_CHECK(size > 0 && size <= NETEM_DIST_MAX);
  // Standard normal CDF, inverted by bisection: deterministic and plenty fast for 16 k entries.
  auto cdf = [](double x) { return 0.5 * std::erfc(-x / std::sqrt(2.0)); };
  std::vector<int16_t> out(size);
  for (size_t i = 0; i < size; ++i) {
    const double p = (static_cast<double>(i) + 0.5) / static_cast<double>(size);
    double lo = -10, hi = 10;
    for (int k = 0; k < 80; ++k) {
      const double mid = (lo + hi) / 2;
      (cdf(mid) < p ? lo : hi) = mid;
    }
    const double v = std::round((lo + hi) / 2 * NETEM_DIST_SCALE);
    out[i] = static_cast<int16_t>(std::clamp(v, -32767.0, 32767.0));
  }
  return out;
}

}  // namespace tb::netlink
