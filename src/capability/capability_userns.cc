// The rows a lab without root depends on (docs/design-rootless.md): can this user make a user
// namespace (the keeper, core/userns.h), and may the lab's timing-critical processes run at
// SCHED_FIFO (core/realtime.h) — root by CAP_SYS_NICE, anyone else only by RLIMIT_RTPRIO, since
// a capability in a user namespace does not count for the scheduler.
#include <sys/resource.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "capability/capability_checks.h"
#include "core/paths.h"
#include "core/realtime.h"
#include "core/userns.h"

namespace tb::capability::probe {
namespace {

std::string limit_text(rlim_t v) {
  return v == RLIM_INFINITY ? std::string("unlimited") : std::to_string(v);
}

}  // namespace

Outcome check_userns() {
  auto c = userns::check_unprivileged_userns();
  if (!paths::rootless()) return {c.ok, c.detail + "; root's labs use none"};
  const char* keeper = std::getenv(paths::kKeeperEnv);
  const std::string joined = keeper && *keeper
                                 ? std::string("joined this user's keeper, pid ") + keeper
                                 : std::string("no keeper joined");
  return {c.ok && keeper && *keeper, joined + "; a nested " + c.detail};
}

Outcome check_rtprio() {
  rlimit rl{};
  ::getrlimit(RLIMIT_RTPRIO, &rl);
  const std::string lim =
      "RLIMIT_RTPRIO soft " + limit_text(rl.rlim_cur) + ", hard " + limit_text(rl.rlim_max);
  // A child tries what the stages, the supervisor and the congestion agent ask for (one above).
  return in_child(
      [lim]() -> Outcome {
        const Scheduling s = try_realtime(kRealtimePriority + 1);
        if (s.realtime)
          return yes(s.text + " granted (" + lim +
                     (::geteuid() == 0 && !paths::rootless() ? "; root: CAP_SYS_NICE)" : ")"));
        return no(s.text + "; " + lim + ": without root, SCHED_FIFO needs RLIMIT_RTPRIO >= " +
                  std::to_string(kRealtimePriority + 1) + " (limits.conf: `<user> - rtprio " +
                  std::to_string(kRealtimePriority + 1) + "`)");
      },
      0);
}

}  // namespace tb::capability::probe
