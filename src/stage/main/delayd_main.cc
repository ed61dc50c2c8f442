// tb-delayd: the userspace delay stage (stage/stage.h) as a process: delayd_main (delayd_main.h)
// is its main, which tb_delayd.cc calls and a lab's supervisor runs in a fork of itself. Runs in
// the network namespace it is started in and serves the NFQUEUE queues given on its command line
// and in its config file, until SIGTERM/SIGINT (or --duration-s). SIGHUP re-reads the config file.
//
//   tb-delayd --queue 10:delay_us=25000:jitter_us=1000:maxlen=65536 --queue 11:delay_us=0
//             [--config FILE] [--stats FILE] [--stats-interval-ms 500] [--duration-s N]
//             [--fail-open] [--sched-fifo PRIO | --realtime PRIO] [--uncalibrated]
//             [--no-release-probe] [--probe-rule-installed] [--mark-table FILE]
//
// The caller installs `iptables ... -j NFQUEUE --queue-num N` WITHOUT --queue-bypass
// (stage/netfilter_rules.h): then a dead stage means a dead link (fail-closed), never an
// undelayed one. --sched-fifo trades CPU for accuracy on a busy machine: with other processes
// competing for the cores (2 vCPU, load 4), SCHED_FIFO cut mean timer lateness from 0.07-1.6 ms
// to 2-50 us and ping mdev from 0.3-0.95 to 0.05-0.09 ms at 0-25 ms, but raised CPU per packet
// from ~12 to 19-34 us: each packet now wakes the stage at once instead of in batches
// (scripts/bench-delay-stage). The loop sleeps in ppoll, and RT throttling still bounds it.
// --realtime PRIO is --sched-fifo where the host allows it: refused (no CAP_SYS_NICE, or a
// cgroup with no real-time budget, as in many containers), the stage runs SCHED_OTHER and says
// so on stderr and in its stats file ("scheduling"). A lab's stages run with --realtime
// (lab/daemons.cc; why: core/realtime.h).
// Timing is calibrated by default (stage/calibration.h): a packet's delay counts from the kernel's
// receive stamp, less the verdict's cost, and the stage wakes early and busy-waits the last
// tens of µs (at most 5% of a core). --uncalibrated restores the old timing (delay from the
// moment the stage reads the packet, sleep to the deadline) for comparison
// (scripts/bench-delay-stage --compare). The verdict's cost is measured by the stage itself
// with marked loopback probes through a queue and rule of its own (stage.h, calibration.h);
// --no-release-probe uses the reference VM's constant instead (no rule is installed).
// --probe-rule-installed: the probe's rule is there already and stays (a lab's stages: `up`
// installs it with the namespace's other rules), so the stage runs no iptables at all.
// --mark-table: the host's ECN mark table (stage/mark_table.h), which queues with `mark=SLOT`
// read: they copy whole packets and mark ECT ones CE with their slot's probability.
// Exit codes: 0 clean stop, 1 failure, 2 bad command line or config.
#include <sched.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/realtime.h"
#include "core/unique_fd.h"
#include "stage/main/delayd_main.h"
#include "stage/stage.h"

namespace {

int fail_with(const tb::Error& e) {
  std::fprintf(stderr, "tb-delayd: %s\n", e.message.c_str());
  return e.exit_code;
}

}  // namespace

int delayd_main(int argc, char** argv, int ready_fd) {
  CLI::App app{"tb-delayd: hold NFQUEUE'd packets for a per-queue delay (no netem needed)"};
  std::vector<std::string> queue_args;
  tb::stage::StageOptions options;
  int interval_ms = 500;
  int fifo_priority = 0;
  int realtime_priority = 0;
  double duration_s = 0;
  app.add_option("--queue", queue_args,
                 "NUM:delay_us=N[:jitter_us=N][:maxlen=N] (repeatable; one per link direction)");
  app.add_option("--config", options.config_path,
                 "file with more queue specs, one per line; re-read on SIGHUP");
  app.add_option("--stats", options.stats_path, "JSON stats file, rewritten atomically");
  app.add_option("--stats-interval-ms", interval_ms, "stats interval (default 500)")
      ->check(CLI::Range(10, 3'600'000));
  app.add_option("--duration-s", duration_s, "stop after this many seconds (default: never)")
      ->check(CLI::Range(0.0, 1e7));
  app.add_flag("--fail-open", options.fail_open,
               "pass packets undelayed when a queue is full, instead of dropping them");
  app.add_option("--sched-fifo", fifo_priority,
                 "run as SCHED_FIFO with this priority (1-99): tighter delays, more CPU")
      ->check(CLI::Range(1, 99));
  app.add_option("--realtime", realtime_priority,
                 "SCHED_FIFO with this priority (1-99) when the host allows it, else SCHED_OTHER "
                 "(stats file: \"scheduling\")")
      ->check(CLI::Range(1, 99))
      ->excludes("--sched-fifo");
  bool uncalibrated = false;
  app.add_flag("--uncalibrated", uncalibrated,
               "no calibration or busy-wait: delays count from when the stage reads a packet "
               "(for comparison)");
  bool no_release_probe = false;
  app.add_flag("--no-release-probe", no_release_probe,
               "take the release cost as the reference VM's constant instead of measuring it with "
               "loopback probes (NFQUEUE 65535 and an iptables rule on lo)");
  app.add_flag("--probe-rule-installed", options.probe_rule_installed,
               "the release probe's iptables rule is in place already (a lab's up installs it "
               "with the namespace's rules): neither add nor remove it");
  app.add_option("--mark-table", options.mark_table,
                 "the ECN mark table (/dev/shm file the congestion agent writes) that queues "
                 "with mark=SLOT read");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    return rc == 0 ? 0 : tb::kExitBadInput;
  }
  for (const auto& a : queue_args) {
    auto spec = tb::stage::parse_queue_spec(a);
    if (!spec) return fail_with(spec.error());
    options.queues.push_back(*spec);
  }
  if (options.queues.empty() && options.config_path.empty())
    return fail_with(
        tb::bad_input("no queues: give --queue NUM:delay_us=N or --config FILE").error());
  options.calibrate = !uncalibrated;
  options.release_probe = !no_release_probe;
  options.stats_interval = tb::Duration{static_cast<int64_t>(interval_ms) * 1'000'000};
  options.duration = tb::Duration{static_cast<int64_t>(duration_s * 1e9)};

  // Wake-ups at the deadline, not up to 50 us after it (the default timer slack).
  ::prctl(PR_SET_TIMERSLACK, 1UL);
  if (const int prio = fifo_priority > 0 ? fifo_priority : realtime_priority; prio > 0) {
    const tb::Scheduling sched = tb::try_realtime(prio);
    options.scheduling = sched.text;
    if (!sched.realtime && fifo_priority > 0) {
      errno = sched.sys_errno;
      auto e = tb::sys_fail("set SCHED_FIFO " + std::to_string(prio)).error();
      e.exit_code = tb::kExitBadInput;
      return fail_with(e);
    }
    if (!sched.realtime)
      std::fprintf(stderr, "tb-delayd: %s; delays will be late on a busy host\n",
                   sched.text.c_str());
  }
  sigset_t mask;
  sigemptyset(&mask);
  sigaddset(&mask, SIGTERM);
  sigaddset(&mask, SIGINT);
  sigaddset(&mask, SIGHUP);
  if (sigprocmask(SIG_BLOCK, &mask, nullptr) != 0)
    return fail_with(tb::sys_fail("block signals").error());
  tb::UniqueFd signals(::signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC));
  if (!signals) return fail_with(tb::sys_fail("signalfd").error());
  std::signal(SIGPIPE, SIG_IGN);

  auto stage = tb::stage::DelayStage::open(std::move(options));
  if (!stage) return fail_with(stage.error());
  // Under a lab's supervisor: say we serve (runner/supervisor.h, ChildSpec::notify_ready). SIGHUP
  // came blocked across the exec, so a reload sent before this line waits in the signalfd.
  if (const char* fd_text = ready_fd < 0 ? std::getenv("TESTBEDCTL_READY_FD") : nullptr) {
    ready_fd = std::atoi(fd_text);
    ::unsetenv("TESTBEDCTL_READY_FD");
  }
  if (ready_fd > STDERR_FILENO) {
    const char ready = 1;
    (void)!::write(ready_fd, &ready, 1);
    ::close(ready_fd);
  }
  if (auto s = stage->run(signals.get()); !s) return fail_with(s.error());
  return tb::kExitOk;
}
