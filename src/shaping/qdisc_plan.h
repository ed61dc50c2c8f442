// QdiscPlan: the tc objects one backend builds for one LinkShape on one interface's egress, as
// data: root first, every parent before its children. Applying it (apply/netlink_kernel_shape.cc)
// sends one replace request per node; an empty plan means "the interface's default qdisc".
//
// Handles name layouts. Each layout (tree shape) has its own root handle, below. Replacing a
// tree with one of the same layout reuses every handle, so each object changes its parameters in
// place; a different layout has a different root handle, so the kernel builds the new root and
// grafts it over the old one, which goes with all its children in the same step (sch_api.c
// tc_modify_qdisc: a new handle at TC_H_ROOT with NLM_F_REPLACE -> create_n_graft). No tree is
// ever deleted and re-added, and no stale child outlives a layout change.
//
// A backend may leave parts of the shape to a userspace stage (a kernel without netem): `residual`
// says which, with the values the stage must apply.
//
// Plain values; thread-safe to copy and read.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/units.h"
#include "netlink/tc_message.h"

namespace tb::shaping {

// "major:0" handles (TC_H_MAKE(major << 16, 0)); children are major << 4 of their root.
inline constexpr uint32_t tc_handle(uint32_t major, uint32_t minor = 0) {
  return (major << 16) | minor;
}
inline constexpr uint32_t kRootParent = 0xFFFFFFFFu;  // TC_H_ROOT (linux/pkt_sched.h)

// Layout "tbf": one tbf at the root (its bfifo child is the kernel's own).
inline constexpr uint32_t kTbfRoot = tc_handle(1);
// Layout "netem+tbf": netem at the root holding the delay line, a tbf child 20: at 2:1.
inline constexpr uint32_t kNetemTbfRoot = tc_handle(2);
inline constexpr uint32_t kNetemTbfClass = tc_handle(2, 1);
inline constexpr uint32_t kNetemTbfChild = tc_handle(0x20);
// Layout "netem": netem alone (no rate limit).
inline constexpr uint32_t kNetemRoot = tc_handle(3);
// The same two netem layouts where jitter may reorder (LinkShape::reorder): netem without a rate
// of its own. Their own handles, because netem_change keeps a rate the request does not mention:
// switching modes grafts a new tree instead of changing one in place.
inline constexpr uint32_t kNetemReorderTbfRoot = tc_handle(5);
inline constexpr uint32_t kNetemReorderTbfClass = tc_handle(5, 1);
inline constexpr uint32_t kNetemReorderTbfChild = tc_handle(0x50);
inline constexpr uint32_t kNetemReorderRoot = tc_handle(6);
// Layout "htb": htb root 4:, one class 4:1 (the default class), a bfifo leaf 40:.
inline constexpr uint32_t kHtbRoot = tc_handle(4);
inline constexpr uint32_t kHtbClass = tc_handle(4, 1);
inline constexpr uint32_t kHtbLeaf = tc_handle(0x40);
// Layouts with QoS classes (backend_qos.cc). "htb-qos" (tbf and htb backends): htb 7: at the
// root, the link's rate in class 7:1, QoS class i in 7:(i+1)0 with a bfifo leaf 7(i+1):.
// "netem+htb-qos": netem 8: (its reorder twin 9:) holding the delay line, htb 80: (90:) at 8:1
// (9:1), classes and leaves as above under it (80:10, 81:, ...). Filters hang on the htb.
inline constexpr uint32_t kQosHtbRoot = tc_handle(7);
inline constexpr uint32_t kNetemQosRoot = tc_handle(8);
inline constexpr uint32_t kNetemQosClass = tc_handle(8, 1);
inline constexpr uint32_t kNetemQosHtb = tc_handle(0x80);
inline constexpr uint32_t kNetemReorderQosRoot = tc_handle(9);
inline constexpr uint32_t kNetemReorderQosClass = tc_handle(9, 1);
inline constexpr uint32_t kNetemReorderQosHtb = tc_handle(0x90);
// An ecn port's RED child (Congestion::red, kernels with sch_red) in place of its TBF's bfifo:
// 11: at 1:1 under layout "tbf", 21: at 20:1 under "netem+tbf", 51: at 50:1 under its reorder
// twin (backend.h add_red_child).
inline constexpr uint32_t kTbfClass = tc_handle(1, 1);
inline constexpr uint32_t kTbfRed = tc_handle(0x11);
inline constexpr uint32_t kNetemTbfRed = tc_handle(0x21);
inline constexpr uint32_t kNetemReorderTbfRed = tc_handle(0x51);
// Under layout "htb" the RED takes the bfifo leaf's place: 41: at 4:1.
inline constexpr uint32_t kHtbRed = tc_handle(0x41);
// At most this many classes fit the leaf handle scheme (7(i+1):, 8(i+1):).
inline constexpr size_t kMaxQosClasses = 8;

struct TcNode {
  uint32_t parent = kRootParent;
  uint32_t handle = 0;
  netlink::TcOptions options;
  // Sent with NLM_F_EXCL; "File exists" means it is already there (netlink::TcWrite).
  bool create_only = false;
  std::string label;  // what it is for, shown in text ("gold"); "" = nothing to say

  std::string_view kind() const { return netlink::tc_kind(options); }
  bool is_class() const { return netlink::is_class(options); }
};

// What the qdiscs did not emulate and a userspace stage must.
struct Residual {
  Duration delay;
  Duration jitter;
  double loss_pct = 0;

  bool empty() const { return delay.ns == 0 && jitter.ns == 0 && loss_pct == 0; }
  friend bool operator==(const Residual&, const Residual&) = default;
};

struct QdiscPlan {
  std::string backend;
  std::vector<TcNode> nodes;  // root first; empty = leave (or put back) the default qdisc
  // Classifiers, applied after the nodes (create-only: "File exists" = already there).
  struct Filter {
    netlink::U32DscpFilter f;
    std::string label;  // the class it feeds ("gold")
  };
  std::vector<Filter> filters;
  Residual residual;
  std::vector<std::string> notes;  // what a reader should know about how it is emulated
};

// One line per node, tc style: "qdisc tbf 1: root rate 10Mbit burst 3028b limit 71428b", then
// "residual delay 5ms jitter 1ms loss 0.1%" when there is one.
std::string to_text(const QdiscPlan& p);
std::string to_text(const TcNode& n);
std::string to_text(const QdiscPlan::Filter& f);

}  // namespace tb::shaping
