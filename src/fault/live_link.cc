#include "fault/live_link.h"

#include "apply/netlink_kernel.h"
#include "fault/link_ops.h"
#include "lab/state.h"
#include "lab/up.h"
#include "shaping/backend.h"

namespace tb::fault {

namespace {

const char* action_name(LinkAction a) {
  switch (a) {
    case LinkAction::kSet:
      return "set";
    case LinkAction::kReset:
      return "reset";
    case LinkAction::kDown:
      return "down";
    case LinkAction::kUp:
      return "up";
  }
  return "?";
}

}  // namespace

Status check_change(const LinkChangeOptions& o) {
  if (o.action == LinkAction::kSet && o.change.empty())
    return bad_input("link set needs at least one of --rate, --delay, --jitter, --loss");
  if (o.action != LinkAction::kSet && !o.change.empty())
    return bad_input(std::string("link ") + action_name(o.action) +
                     " takes no --rate, --delay, --jitter or --loss (only link set does)");
  if (o.change.rate) {
    // The smallest rate the kernel takes is the shaping backends' rule (shaping::validate).
    shaping::LinkShape s;
    s.rate = *o.change.rate;
    if (auto v = shaping::validate(s); !v)
      return bad_input("--rate: " + v.error().message + "; 0 means unlimited");
  }
  return {};
}

Result<LinkChangeReport> change_live_link(const LinkChangeOptions& o) {
  TB_TRY(check_change(o));
  auto st = lab::load_state(o.lab);
  if (!st) return bad_input(st.error().message);
  auto idx = lab::find_link(st->topo, o.a, o.b);
  if (!idx) return std::unexpected(idx.error());
  const plan::Link& link = st->topo.links[*idx];
  TB_TRY(require_an_end_here(*st, link));
  TB_TRY(lab::require_root("link"));
  auto lock = lab::LabLock::acquire(o.lab);
  if (!lock) return std::unexpected(lock.error());
  LinkChangeReport r{lab::link_key(link), std::nullopt, "", ""};
  if (const auto e = ends_here(*st, link); !e.both()) {
    const plan::LinkEnd& mine = e.a ? link.a : link.b;
    r.here = "host " + st->host + "'s end " + mine.node + ":" + mine.ifname;
    r.elsewhere = e.elsewhere(link);
  }
  apply::NetlinkKernel kernel;
  if (o.action == LinkAction::kDown || o.action == LinkAction::kUp) {
    TB_TRY(set_link_state(*st, kernel, *idx, o.action == LinkAction::kUp));
  } else {
    auto next = change_link(*st, kernel, *idx, o.action == LinkAction::kReset, o.change);
    if (!next) return std::unexpected(next.error());
    r.figures = *next;
  }
  return r;
}

}  // namespace tb::fault
