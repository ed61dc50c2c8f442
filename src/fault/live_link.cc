#include "fault/live_link.h"

#include "apply/netlink_kernel.h"
#include "fault/link_ops.h"
#include "lab/state.h"
#include "lab/up.h"

namespace tb::fault {

Result<LinkChangeReport> change_live_link(const LinkChangeOptions& o) {
  auto st = lab::load_state(o.lab);
  if (!st) return bad_input(st.error().message);
  auto idx = lab::find_link(st->topo, o.a, o.b);
  if (!idx) return std::unexpected(idx.error());
  if (o.action == LinkAction::kSet && o.change.empty())
    return bad_input("link set needs at least one of --rate, --delay, --jitter, --loss");
  TB_TRY(lab::require_root("link"));
  auto lock = lab::LabLock::acquire(o.lab);
  if (!lock) return std::unexpected(lock.error());
  LinkChangeReport r{lab::link_key(st->topo.links[*idx]), std::nullopt};
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
