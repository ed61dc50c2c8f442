#include "fault/by_hand.h"

#include "apply/netlink_kernel.h"
#include "core/events.h"
#include "fault/timeline.h"

namespace tb::fault {

Result<ByHandReport> inject_by_hand(lab::LabState& st, const Resolved& fault,
                                    const std::atomic<bool>& stop, const OnStep& on_step) {
  apply::NetlinkKernel kernel;
  Injector injector(st, kernel);
  const std::vector<Resolved> faults{fault};
  const auto steps = schedule(faults);
  const int64_t t0 = monotonic_ns();
  ByHandReport rep;
  // A fault without --for stays once the verb returns (until a link-up, or `link reset`).
  auto status = run_timeline(
      injector, faults, steps, t0, stop,
      [&](const Step& s, const Status& r) {
        on_step(s, r, static_cast<double>(monotonic_ns() - t0) / 1e9);
        rep.all_applied = rep.all_applied && r.has_value();
      },
      AtEnd::kKeepLasting);
  if (!status) return std::unexpected(status.error());
  return rep;
}

}  // namespace tb::fault
