// Traffic-control request builders: RTM_NEWQDISC / RTM_NEWTCLASS / RTM_DELQDISC for the qdiscs
// testbedctl shapes links with (tbf, netem, htb and its class, bfifo), and RTM_NEWTFILTER for the
// u32 filters that classify a WAN link's traffic into its QoS classes by DSCP. Like message.h, each
// returns the bytes of one request with seq 0 and no NLM_F_ACK (NlSocket::send adds both), and
// makes no system calls, so tests/unit/tc_message_test.cc checks them without root.
//
// Options are in kernel units (bytes per second, bytes, nanoseconds); the builders only encode.
// Where iproute2 sends a rate table (TCA_TBF_RTAB, TCA_HTB_RTAB/CTAB) we send none and set the
// rate's linklayer instead: kernels since 3.11 build the rate table themselves and read the
// legacy table only when linklayer is TC_LINKLAYER_UNAWARE (net/sched/sch_tbf.c tbf_change,
// net/sched/sch_htb.c htb_change_class: "Keeping backward compatible with rate_table based
// iproute2 tc"); the netns tier applies these messages to the kernel to prove it.
//
// Plain values and pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "netlink/message.h"

namespace tb::netlink {

// Token bucket (net/sched/sch_tbf.c). The kernel adds a bfifo child of `limit` bytes.
struct TbfOptions {
  uint64_t rate = 0;   // bytes per second, > 0
  uint32_t burst = 0;  // bucket size in bytes (TCA_TBF_BURST)
  uint32_t limit = 0;  // bytes the queue may hold (tc_tbf_qopt.limit), > 0
};

// Network emulator (net/sched/sch_netem.c): delay with jitter, random loss, optional rate.
struct NetemOptions {
  int64_t delay_ns = 0;
  int64_t jitter_ns = 0;              // with `jitter_table`, its standard deviation
  double loss_pct = 0;                // 0..100
  uint32_t limit = 0;                 // packets it may hold (tc_netem_qopt.limit)
  uint64_t rate = 0;                  // bytes per second; 0 = netem does not rate-limit
  std::vector<int16_t> jitter_table;  // TCA_NETEM_DELAY_DIST; empty = uniform in +-jitter
};

// HTB root qdisc (net/sched/sch_htb.c htb_init): unclassified traffic goes to class
// <handle major>:default_class.
struct HtbOptions {
  uint32_t default_class = 1;
};

// One HTB class (RTM_NEWTCLASS).
struct HtbClassOptions {
  uint64_t rate = 0;     // bytes per second, > 0
  uint64_t ceil = 0;     // bytes per second, >= rate
  uint32_t burst = 0;    // bytes sendable at once at `rate`
  uint32_t cburst = 0;   // bytes sendable at once at `ceil`
  uint32_t quantum = 0;  // bytes per round (0 = the kernel derives it from the rate)
  // 0 (served first) .. 7 (TC_HTB_NUMPRIO - 1): among classes that may send, HTB dequeues the
  // lowest prio first and lends spare rate to it first (sch_htb.c htb_dequeue_tree).
  uint32_t prio = 0;
};

// Byte-limited FIFO (net/sched/sch_fifo.c); its TCA_OPTIONS is a bare tc_fifo_qopt.
struct BfifoOptions {
  uint32_t limit = 0;  // bytes
};

// Random early detection with ECN marking (net/sched/sch_red.c), the child of an ecn port's TBF
// on kernels that have it (issue 32: the VPC marks CE in the kernel there, the delay stage
// elsewhere). red_options() fills the derived fields as iproute2 tc/q_red.c and tc/tc_red.c do.
struct RedOptions {
  uint32_t limit = 0;         // bytes it may hold (its own bfifo child)
  uint32_t qth_min = 0;       // bytes of average queue where marking starts
  uint32_t qth_max = 0;       // ... where the probability reaches max_p
  uint8_t wlog = 0;           // the average's weight, 2^-wlog per packet
  uint8_t plog = 0;           // log2(max_p / (qth_max - qth_min)), for kernels without max_p
  uint8_t scell_log = 0;      // idle damping: stab cells of 2^scell_log microseconds
  uint32_t max_p = 0;         // the probability at qth_max, scaled so 2^32 is 1
  bool nodrop = true;         // TC_RED_NODROP: Not-ECT packets pass (are not dropped early)
  std::vector<uint8_t> stab;  // 256 entries: how far an idle period decays the average
};
// RED for an ecn port: marks from `kmin` to `kmax` bytes of average queue up to `pmax` (0..1),
// holds `limit` bytes; `avpkt` a typical packet's bytes, `rate` the port's bytes per second.
RedOptions red_options(uint32_t kmin, uint32_t kmax, double pmax, uint32_t limit, uint32_t avpkt,
                       uint64_t rate);

using TcOptions =
    std::variant<TbfOptions, NetemOptions, HtbOptions, HtbClassOptions, BfifoOptions, RedOptions>;

// TCA_KIND for the options: "tbf", "netem", "htb" (qdisc and class), "bfifo", "red".
std::string_view tc_kind(const TcOptions& o);
// True for options that describe a class (RTM_NEWTCLASS) rather than a qdisc.
bool is_class(const TcOptions& o);

// Where a tc object sits: its interface, its parent (TC_H_ROOT or a class "major:minor") and its
// own handle ("major:0" for a qdisc, "major:minor" for a class).
struct TcPlace {
  int ifindex = 0;
  uint32_t parent = 0;
  uint32_t handle = 0;
};

// How a NEW request treats an object that is already there.
enum class TcWrite {
  // NLM_F_CREATE | NLM_F_REPLACE: create it, or change its parameters in place when an object
  // of the same kind has this handle; a different handle at the same parent is created and
  // grafted in place of the old one (net/sched/sch_api.c tc_modify_qdisc, tc_ctl_tclass).
  kReplace,
  // NLM_F_CREATE | NLM_F_REPLACE | NLM_F_EXCL: as kReplace, but fails with EEXIST where it would
  // change in place. For kinds without Qdisc_ops.change (htb: changing its root in place is
  // EINVAL "Change operation not supported"), so EEXIST there means "already as wanted".
  kCreateOnly,
};

// RTM_NEWQDISC or RTM_NEWTCLASS (by is_class(options)) with TCA_KIND and TCA_OPTIONS.
NlMsg new_tc(const TcPlace& at, const TcOptions& options, TcWrite write = TcWrite::kReplace);

// RTM_DELQDISC of the qdisc at `parent` (TC_H_ROOT for the root). handle 0 deletes whatever
// non-default qdisc is there; a default one (handle 0) is ENOENT (net/sched/sch_api.c
// tc_get_qdisc: "Cannot delete qdisc with handle of zero").
NlMsg del_qdisc(int ifindex, uint32_t parent, uint32_t handle = 0);

// A u32 filter (net/sched/cls_u32.c) that sends IPv4 packets whose DSCP (the top six bits of
// the TOS byte) is `dscp` to class `classid`: `tc filter add dev D parent P protocol ip prio N
// handle H u32 match ip dsfield (dscp << 2) 0xfc classid C`. One key on the header's first
// 32-bit word (mask 0x00fc0000), terminal, so the first match classifies.
struct U32DscpFilter {
  uint32_t parent = 0;   // the classful qdisc it hangs on ("7:")
  uint16_t prio = 1;     // filter priority (tcm_info's upper 16 bits)
  uint32_t handle = 0;   // u32 node handle, "800::N" = 0x80000000 | N (u32_handle below)
  uint8_t dscp = 0;      // 0..63
  uint32_t classid = 0;  // "7:10"
};

// "800::n": node n in u32's root hash table 800: (cls_u32.c gen_new_htid starts at 0x800).
inline constexpr uint32_t u32_handle(uint32_t node) {
  return 0x80000000u | (node & 0xFFFu);
}

// RTM_NEWTFILTER for `f` on `ifindex`, protocol ETH_P_IP. kCreateOnly (NLM_F_EXCL) answers
// EEXIST when a filter with that handle is there (a u32 node's selector cannot change in place:
// u32_change copies the old one).
NlMsg new_u32_dscp_filter(int ifindex, const U32DscpFilter& f,
                          TcWrite write = TcWrite::kCreateOnly);

// RTM_NEWQDISC clsact (net/sched/sch_ingress.c): the ingress and egress filter hooks of
// `ifindex`, beside whatever root qdisc shapes it (parent ffff:fff1, handle ffff:0, as
// `tc qdisc add dev D clsact` sends). NLM_F_EXCL: EEXIST when one is there.
NlMsg new_clsact(int ifindex);
// RTM_DELQDISC of `ifindex`'s clsact (and every filter on it); ENOENT/EINVAL when there is none.
NlMsg del_clsact(int ifindex);

// A BPF classifier (net/sched/cls_bpf.c) on a clsact hook, in direct-action mode (the program's
// return value is the verdict: TC_ACT_UNSPEC -1 lets the packet go on): `tc filter add dev D
// egress prio N handle H bpf da fd FD name NAME`, protocol all.
struct BpfFilter {
  bool egress = true;   // parent ffff:fff3 (TC_H_MIN_EGRESS), else ffff:fff2 (ingress)
  uint16_t prio = 1;    // filter priority (tcm_info's upper 16 bits)
  uint32_t handle = 1;  // cls_bpf handle
  int fd = -1;          // the loaded BPF_PROG_TYPE_SCHED_CLS program
  std::string name;     // TCA_BPF_NAME, as `tc filter show` prints it
};
NlMsg new_bpf_filter(int ifindex, const BpfFilter& f);

// "800::1", as tc prints u32 handles.
std::string format_u32_handle(uint32_t handle);

// "major:minor" as tc prints handles ("1:", "1:1", "root").
std::string format_handle(uint32_t handle);

// netem's loss probability: percent scaled so that UINT32_MAX is 100% (iproute2 tc/q_netem.c
// set_percent: rint(per * max_percent_value); net/sched/sch_netem.c compares it with a random
// u32).
uint32_t netem_probability(double pct);

// A normal distribution table for TCA_NETEM_DELAY_DIST with `size` entries: each entry is the
// standard normal quantile at (i + 0.5) / size, times NETEM_DIST_SCALE (8192), clamped to int16
// (as iproute2 tc/netem/normal.c makes normal.dist; sch_netem.c tabledist indexes it uniformly,
// so any size up to NETEM_DIST_MAX 16384 works).
std::vector<int16_t> normal_jitter_table(size_t size = 1024);

}  // namespace tb::netlink
