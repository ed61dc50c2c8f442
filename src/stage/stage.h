// DelayStage: the userspace delay stage for kernels without sch_netem. One process serves several
// NFQUEUE queues (one per link direction) in the network namespace it runs in, holding each
// packet for its queue's delay (plus jitter, never reordering) and releasing due packets with
// one batch verdict per queue. A port of the prototype in research/limits.md 4.
//
// Fail-closed: the caller installs its NFQUEUE rules WITHOUT --queue-bypass (netfilter_rules.h
// does), so when this process is gone the kernel drops the link's packets instead of passing
// them undelayed; with `fail_open` a full queue passes packets undelayed instead of dropping.
// Closing: on SIGTERM/SIGINT (or when `duration` ends) every held packet is accepted at once, then
// the queues are unbound. SIGHUP re-reads `config_path` and applies it in place: queues are added,
// changed (later packets get the new delay) or removed (their packets accepted first); write the
// file atomically (rename over it) before signalling. A config that does not parse is refused
// whole (the queues stay as they were); one that partly fails to apply keeps what succeeded;
// either way the stats file's "reload_error" says why. Confirmed changes: the config's
// "# generation N" line (queue_spec.h) is published as the stats file's "generation", with
// "reload_error" the result of that read, and the stats file is rewritten at once after each
// reload, so a writer waits for its own N and reads whether it was taken (lab/daemons.h).
//
// Owns its netlink socket and the DelayLines. Single-threaded: run() is the only loop.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/units.h"
#include "stage/delay_line.h"
#include "stage/nfq_socket.h"
#include "stage/queue_spec.h"
#include "stage/stats.h"

namespace tb::stage {

struct StageOptions {
  std::vector<QueueSpec> queues;  // from the command line; always served
  std::string config_path;        // more queues, one per line; re-read on SIGHUP ("" = none)
  std::string stats_path;         // "" = no stats file
  Duration stats_interval{500'000'000};
  Duration duration{};  // 0 = until a signal
  bool fail_open = false;
  int rcvbuf_bytes = 64 << 20;  // as the prototype: bursts of 64 KB super-packets
  // How the process is scheduled, as the stats file reports it (set by tb-delayd's main).
  std::string scheduling = "SCHED_OTHER";
};

class DelayStage {
 public:
  // Opens the socket in the calling thread's namespace, reads the config file, binds every
  // queue (an error names the queue; EPERM: another process serves it) and writes the
  // first stats file, so its appearance tells a caller the stage is ready.
  static Result<DelayStage> open(StageOptions options);

  // Runs until SIGTERM/SIGINT arrives on `signal_fd` (a signalfd for SIGTERM, SIGINT and SIGHUP
  // that the caller owns and has blocked) or `duration` ends; then accepts every held packet,
  // unbinds and writes the last stats. Fails only when the socket breaks.
  Status run(int signal_fd);

 private:
  explicit DelayStage(StageOptions options, NfqSocket socket);

  // The queues of the command line and the config file; `generation` gets the config's
  // "# generation N" (0 without one), also when the queues do not parse.
  Result<std::vector<QueueSpec>> wanted_queues(uint64_t* generation = nullptr) const;
  // Brings the served queues to `wanted`; keeps going past a failed queue, returns the first
  // error.
  Status apply(const std::vector<QueueSpec>& wanted);
  void reload();
  void on_event(const NlEvent& event);
  void release_due();
  Status flush_verdicts();
  void write_stats();
  void close_all();

  StageOptions options_;
  NfqSocket socket_;
  std::map<uint16_t, DelayLine> lines_;
  NlBuffer verdicts_;  // pending verdict messages, sent in order
  ProcessStats process_;
  std::string stats_error_;  // last stats write failure, logged once
  int64_t start_ns_ = 0;
  uint64_t seed_ = 0;
};

}  // namespace tb::stage
