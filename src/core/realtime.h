// Real-time scheduling for the processes whose timing is the measurement: a lab's delay stages
// (tb-delayd, which release each packet at its deadline) and verify's probes (tb-probe, whose
// send and receive times are the RTT and goodput it reports). At SCHED_OTHER a CPU hog on every
// core made a 30 ms stage read +1.5 ms with double the jitter, and links idle short of their
// goodput while a sender waited for a CPU; at SCHED_FIFO they run as soon as they wake.
// Where the host refuses (no CAP_SYS_NICE, a cgroup without a real-time budget, as in many
// containers) they run as before and say so. RT throttling (kernel.sched_rt_runtime_us, 95% by
// default) still leaves the rest of the machine a share; every caller blocks between packets.
#pragma once

#include <string>

namespace tb {

// Low: above every ordinary process, below the kernel's own real-time threads (watchdog,
// migration at 99) and below anything an operator set higher.
inline constexpr int kRealtimePriority = 10;

struct Scheduling {
  bool realtime = false;
  int sys_errno = 0;  // why SCHED_FIFO was refused (0 when it was not)
  std::string text;   // "SCHED_FIFO 10", or "SCHED_OTHER (SCHED_FIFO 10 refused: <why>)"
};

// Makes the calling process SCHED_FIFO at `priority` (1-99) when the host allows it.
Scheduling try_realtime(int priority);

}  // namespace tb
