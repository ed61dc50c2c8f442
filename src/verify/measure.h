// The measuring half of `testbedctl verify`: runs tb-probe inside a lab's namespaces for one
// link and collects what it printed. Per link, in this order:
//   1. raise net.ipv4.tcp_rmem/tcp_wmem max in A's and B's namespaces to the transfer's buffer
//      where they are lower (restored when the measurement ends);
//   2. `tb-probe serve` in B, bound to the interface holding the target address, and a
//      second one on lo in A for the base RTT;
//   3. `tb-probe rtt` over lo in A (base), then over the link (bound to A's port);
//   4. `tb-probe goodput` A -> B with SO_SNDBUF/SO_RCVBUF = the buffer.
// Every probe is started with spawn_in_netns (runner/supervisor.h) carrying the lab's owner
// marker, so `down` stops any that survive a crash; every wait has a deadline; each child is
// killed and reaped by pid before measure_link returns.
// Not thread-safe: forks; call from one thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ipv4.h"
#include "core/unique_fd.h"
#include "core/units.h"
#include "plan/topology.h"
#include "verify/classes.h"
#include "verify/tolerance.h"

namespace tb::verify {

inline constexpr uint16_t kProbePort = 47000;             // B's server; A's base server is +1
inline constexpr int kProbeWireBytes = 32 + 8 + 20 + 14;  // payload + UDP + IPv4 + Ethernet

// How hard to look. Defaults: 1000 probes, 5 s transfer; --quick: 200 probes, 2 s.
struct Settings {
  int probes = 1000;
  int interval_us = 1000;
  double goodput_seconds = 5;
  int warmup_ms = 1000;
};
Settings settings(bool quick);

struct MeasureRequest {
  ProbeTarget target;
  std::string tb_probe;  // absolute path
  std::string owner;     // TESTBEDCTL_OWNER of every probe: the lab's owner marker
  std::string work_dir;  // probe logs
  uint16_t port = kProbePort;
  int probes = 0, interval_us = 0, wait_ms = 0;
  // The base over lo: its probe count (0: `probes`), at the same interval. A link with checked
  // jitter needs kJitterProbes over the link for its sigma, but the base's median and IQR, which
  // only correct the link's, are as good from the settings' count (200 quick, 1000 full).
  int base_probes = 0;
  double goodput_seconds = 0;
  int warmup_ms = 0, drain_ms = 0;
  uint64_t buffer = 0;
  int serve_seconds = 0;  // the servers' own bound
  // A path (verify --paths): the base and the RTT only, no transfer and no buffer raise;
  // target.a_dev empty sends by the namespace's routes, target.server_dev empty listens on all.
  bool rtt_only = false;
  // A lossy link: a second transfer paced at this rate (bit/s; 0 = none) for the TCP loss check.
  uint64_t loss_pace_bps = 0;
  // A link between hosts: B's server runs on the host holding B's end (serve_end below, started
  // there on request); this host raises no buffer in B's namespace and starts no server there.
  bool remote_server = false;
};

// Pure: the request for one link. The probe interval is stretched so probes use at most 15%
// of a slow link; waits and drains grow with the configured delay and the buffer.
MeasureRequest plan_request(const plan::Link& l, const ProbeTarget& t, const Settings& s);
// Pure: the request for a path whose out and back delays and jitters sum to the figures given;
// with jitter the probes are 4 x rtt_jitter apart (ordered jitter would raise the median).
MeasureRequest plan_path_request(const ProbeTarget& t, const Settings& s, Duration rtt,
                                 Duration rtt_jitter);

// The warm-up of the RTT probes over a link (tb-probe rtt --warmup-ms): untimed probes every
// 100 ms until one is answered, at most this long (a lost ARP exchange is asked again after 1 s).
inline constexpr int kRttWarmupMs = 2500;

struct MeasureOutcome {
  Measurement m;
  std::vector<std::string> errors;  // a step that failed: the class fails
  // How many of `errors` are steps that ran out of time (tb-probe's kExitTimedOut, or killed at
  // its deadline): on a host that stalled over the reading they are the host's (result.h).
  int timeouts = 0;
  std::vector<std::string> notes;  // e.g. sysctls raised for the run
};

MeasureOutcome measure_link(const MeasureRequest& r, const std::atomic<bool>& stop);

// tb-probe next to the running executable, else $TESTBEDCTL_PROBE, else on PATH.
Result<std::string> find_tb_probe();

// A started tb-probe. Move-only; the destructor sends SIGTERM, waits up to 1 s, then SIGKILL,
// and reaps: no probe outlives its owner.
class ProbeChild {
 public:
  static Result<ProbeChild> start(const std::string& netns, const std::vector<std::string>& argv,
                                  const std::string& owner, const std::string& log_path);
  ProbeChild(ProbeChild&& o) noexcept;
  ProbeChild& operator=(ProbeChild&&) = delete;
  ProbeChild(const ProbeChild&) = delete;
  ~ProbeChild();

  // Until the log holds a line containing `text` (a server's "ready").
  Status wait_for_line(const std::string& text, int timeout_ms, const std::atomic<bool>& stop);
  // Until it exits; killed when `timeout_ms` pass or `stop` is set. Returns the exit status.
  Result<int> wait(int timeout_ms, const std::atomic<bool>& stop);
  std::string log() const;
  int pid() const { return pid_; }

 private:
  ProbeChild(int pid, std::string log) : pid_(pid), log_path_(std::move(log)) {}
  bool reap(bool block);
  int pid_ = -1;
  int status_ = 0;
  std::string log_path_;
};

// Raises the max (third field) of net.ipv4.tcp_rmem and tcp_wmem in a namespace to `bytes`
// where it is lower, and puts the old values back in its destructor. Move-only.
class TcpBufferRaise {
 public:
  static Result<TcpBufferRaise> apply(const std::string& netns, uint64_t bytes);
  TcpBufferRaise(TcpBufferRaise&&) noexcept = default;
  TcpBufferRaise& operator=(TcpBufferRaise&&) = delete;
  ~TcpBufferRaise();
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  TcpBufferRaise(UniqueFd ns, std::string name) : ns_(std::move(ns)), name_(std::move(name)) {}
  UniqueFd ns_;
  std::string name_;
  std::vector<std::pair<std::string, std::string>> saved_;  // key, old value
  std::vector<std::string> notes_;
};

// Background traffic for `verify --under-load`: one bulk TCP transfer per flow (tb-probe
// goodput, no buffer given: the kernel's autotuning) to a sink in the destination namespace,
// for up to `seconds`. Stops every child (servers and senders) when destroyed.
struct LoadFlow {
  std::string what;  // "dc/s0/g1 -> dc/s1/g1 (rail)"
  std::string from_netns;
  std::vector<std::string> from_devs;  // the first hop's interfaces (every ECMP next hop)
  std::string to_netns;
  Ipv4 addr;
};
// The `tb-probe serve` at B's end that measure_link would start (bound to r.target.server_dev,
// B's TCP buffers raised to r.buffer), up to `seconds`: what the host holding B's end of a link
// between hosts runs for the other host's clients (r.remote_server there). Destroying it stops
// the server (by pid) and restores the sysctls. Move-only.
class ServeEnd {
 public:
  static Result<ServeEnd> start(const MeasureRequest& r, int seconds,
                                const std::atomic<bool>& stop);
  ServeEnd(ServeEnd&&) noexcept = default;
  ~ServeEnd() = default;
  const std::vector<std::string>& notes() const { return notes_; }

 private:
  ServeEnd() = default;
  std::vector<TcpBufferRaise> raised_;
  std::optional<ProbeChild> server_;
  std::vector<std::string> notes_;
};

class Load {
 public:
  static Result<Load> start(const std::vector<LoadFlow>& flows, const std::string& tb_probe,
                            const std::string& owner, const std::string& work_dir, double seconds,
                            uint16_t port, const std::atomic<bool>& stop);
  Load(Load&&) noexcept = default;
  ~Load() = default;
  // What each flow has carried so far: its first hop's tx bytes since start, as a rate.
  std::vector<std::string> carried() const;

 private:
  Load() = default;
  std::vector<ProbeChild> servers_;
  std::vector<ProbeChild> senders_;
  std::vector<LoadFlow> flows_;
  std::vector<uint64_t> tx0_;
  int64_t t0_ns_ = 0;
};

}  // namespace tb::verify
