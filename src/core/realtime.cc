#include "core/realtime.h"

#include <sched.h>

#include <cerrno>
#include <cstring>

namespace tb {

Scheduling try_realtime(int priority) {
  const std::string fifo = "SCHED_FIFO " + std::to_string(priority);
  sched_param param{};
  param.sched_priority = priority;
  if (::sched_setscheduler(0, SCHED_FIFO, &param) == 0) return {true, 0, fifo};
  const int err = errno;
  return {false, err, "SCHED_OTHER (" + fifo + " refused: " + std::strerror(err) + ")"};
}

}  // namespace tb
