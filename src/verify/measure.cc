#include "verify/measure.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include <fmt/format.h>

#include "core/process.h"
#include "core/realtime.h"
#include "core/safe_file.h"
#include "lab/live.h"
#include "netlink/netns.h"
#include "plan/emulate.h"
#include "probe/goodput.h"
#include "runner/supervisor.h"

namespace tb::verify {
namespace fs = std::filesystem;
namespace {

constexpr int kReadyTimeoutMs = 3000;
constexpr int kStopGraceMs = 1000;
// Probes use at most 15% of a rate-limited link's rate. Each probe is alone on the link, so
// none waits behind another unless jitter brings two closer than one takes to send (74 B: 0.59
// ms at 1 Mbit/s): at the jitter rule's 4 sigma apart (plan_request), under 1% of them, by at
// most that. 5% (until 2026-12-05) made hz-bj's 1 Mbit/s VPN probes 11.84 ms apart: 9.5 s of
// its 800 jitter probes and 2.4 s of the base, a third of `verify --quick` on hz-bj.
constexpr double kMaxProbeShare = 0.15;

// Every probe runs SCHED_FIFO where the host allows it, so a busy host's scheduling waits are
// not read as the link's delay or as lost goodput (core/realtime.h).
const std::string kRealtime = std::to_string(kRealtimePriority);

void sleep_ms(int ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

int64_t mono_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// The last line of a probe's log that is a JSON object with a "mode".
std::optional<nlohmann::json> result_line(const std::string& log) {
  std::istringstream in(log);
  std::optional<nlohmann::json> last;
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains("mode")) last = std::move(j);
  }
  return last;
}

std::string tail(const std::string& log) {
  std::string s = log;
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > 300) s = "..." + s.substr(s.size() - 300);
  return s.empty() ? "(no output)" : s;
}

// Runs one client mode to completion and returns its JSON.
Result<nlohmann::json> run_client(const MeasureRequest& r, const std::string& what,
                                  const std::vector<std::string>& argv, int timeout_ms,
                                  const std::atomic<bool>& stop) {
  const std::string log = r.work_dir + "/" + what + ".log";
  auto child = ProbeChild::start(r.target.a_netns, argv, r.owner, log);
  if (!child) return std::unexpected(child.error());
  auto rc = child->wait(timeout_ms, stop);
  if (!rc) return std::unexpected(with_context(rc.error(), what));
  if (*rc != 0)
    return fail(what + " (tb-probe in " + r.target.a_netns + ") exited " + std::to_string(*rc) +
                    ": " + tail(child->log()),
                *rc == probe::kExitTimedOut ? ETIMEDOUT : 0);
  auto j = result_line(child->log());
  if (!j) return fail(what + ": tb-probe printed no result: " + tail(child->log()));
  return *j;
}

// Over a link (not lo) the timed probes follow warm-up ones until one is answered (at most
// kRttWarmupMs): the neighbours' addresses are resolved first, so no timed probe waits for ARP. A
// first contact whose ARP exchange a lossy link drops is asked again after 1 s, the probes
// queued behind it; once, in the lab VM, the VPC path to the transit router (2% loss per link,
// a first contact) read a median RTT 375 ms over its 40 ms in both readings — the likeliest
// cause, not confirmed.
std::vector<std::string> rtt_argv(const MeasureRequest& r, const std::string& to, uint16_t port,
                                  const std::string& dev, int probes) {
  std::vector<std::string> argv = {r.tb_probe,      "--realtime",
                                   kRealtime,       "rtt",
                                   "--to",          to,
                                   "--port",        std::to_string(port),
                                   "--count",       std::to_string(probes),
                                   "--interval-us", std::to_string(r.interval_us),
                                   "--wait-ms",     std::to_string(r.wait_ms)};
  if (!dev.empty()) argv.insert(argv.end(), {"--dev", dev});
  if (dev != "lo") argv.insert(argv.end(), {"--warmup-ms", std::to_string(kRttWarmupMs)});
  return argv;
}

int rtt_timeout_ms(const MeasureRequest& r, int probes) {
  return static_cast<int>(int64_t{probes} * r.interval_us / 1000) + r.wait_ms + kRttWarmupMs + 5000;
}

// The interfaces' tx byte counters, summed (0 for one that cannot be read).
uint64_t tx_bytes(const std::string& netns, const std::vector<std::string>& devs) {
  auto ifs = lab::interfaces_in(netns);
  if (!ifs) return 0;
  uint64_t sum = 0;
  for (const auto& i : *ifs)
    if (std::ranges::find(devs, i.ifname) != devs.end()) sum += i.tx_bytes;
  return sum;
}

// B's `tb-probe serve` for a link's measurement: bound to the interface holding the target
// address, its receive buffer the transfer's.
Result<ProbeChild> start_server_b(const MeasureRequest& r, int seconds, const std::string& log) {
  std::vector<std::string> serve = {
      r.tb_probe, "--realtime",           kRealtime,   "serve",
      "--port",   std::to_string(r.port), "--seconds", std::to_string(seconds)};
  if (!r.target.server_dev.empty()) serve.insert(serve.end(), {"--dev", r.target.server_dev});
  if (!r.rtt_only) serve.insert(serve.end(), {"--buffer", std::to_string(r.buffer)});
  return ProbeChild::start(r.target.b_netns, serve, r.owner, log);
}

}  // namespace

Result<ServeEnd> ServeEnd::start(const MeasureRequest& r, int seconds,
                                 const std::atomic<bool>& stop) {
  if (auto dir = SafeDir::open_root(r.work_dir); !dir) return std::unexpected(dir.error());
  ServeEnd s;
  if (!r.rtt_only) {
    auto g = TcpBufferRaise::apply(r.target.b_netns, r.buffer);
    if (!g) return std::unexpected(g.error());
    s.notes_ = g->notes();
    s.raised_.push_back(std::move(*g));
  }
  auto server = start_server_b(r, seconds, r.work_dir + "/serve-b.log");
  if (!server) return std::unexpected(server.error());
  if (auto ok = server->wait_for_line("\"ready\"", kReadyTimeoutMs, stop); !ok)
    return fail(ok.error().message + ": " + tail(server->log()));
  s.server_.emplace(std::move(*server));
  return s;
}

Settings settings(bool quick) {
  if (quick) return Settings{200, 1000, 2, 500};
  return Settings{};
}

MeasureRequest plan_request(const plan::Link& l, const ProbeTarget& t, const Settings& s) {
  const auto& f = l.emulated;
  MeasureRequest r;
  r.target = t;
  r.probes = s.probes;
  r.interval_us = s.interval_us;
  if (f.rate.bps > 0) {
    const double min_interval_s = kProbeWireBytes * 8 / (f.rate.bps * kMaxProbeShare);
    r.interval_us = std::max(r.interval_us, static_cast<int>(std::ceil(min_interval_s * 1e6)));
  }
  // Jitter never reorders (docs/scenario.md): a probe drawn short waits for the one before it
  // when they are closer than the draws differ, which narrows the spread (1 ms apart on a 1 ms
  // jitter: -12% seen). 4 sigma apart, a probe waits with probability P(N(0, sqrt 2) > 4) < 0.3%.
  // And enough of them that 10% is 4 standard errors of the estimate (1/sqrt(2n) = 2.5%).
  if (f.jitter >= kMinCheckedJitter) {
    r.interval_us = std::max(r.interval_us, static_cast<int>(4 * f.jitter.ns / 1000));
    r.base_probes = r.probes;
    r.probes = std::max(r.probes, kJitterProbes);
  }
  // Four round trips at the worst delay the link is configured for, and a second more.
  r.wait_ms = 1000 + static_cast<int>(std::ceil(8 * (f.delay.ms() + 4 * f.jitter.ms())));
  r.goodput_seconds = s.goodput_seconds;
  r.warmup_ms = s.warmup_ms;
  r.buffer = tcp_buffer_bytes(f.rate, f.delay);
  if (f.loss_pct > 0)
    r.loss_pace_bps = static_cast<uint64_t>((f.rate.bps > 0 ? f.rate.bps : 2e9) / 2);
  const double rate = f.rate.bps > 0 ? f.rate.bps : plan::kHostVethRate.bps;
  r.drain_ms = std::min(60'000, 3000 + static_cast<int>(2e3 * r.buffer * 8 / rate));
  const double rtt_s = (static_cast<double>(r.probes) * r.interval_us / 1e6 + r.wait_ms / 1e3);
  r.serve_seconds =
      static_cast<int>(std::ceil(2 * rtt_s + r.goodput_seconds + r.drain_ms / 1e3 + 15));
  if (r.loss_pace_bps > 0)  // the paced loss transfer after the goodput one
    r.serve_seconds += static_cast<int>(std::ceil(r.goodput_seconds + r.drain_ms / 1e3));
  return r;
}

MeasureRequest plan_path_request(const ProbeTarget& t, const Settings& s, Duration rtt,
                                 Duration rtt_jitter) {
  MeasureRequest r;
  r.target = t;
  r.rtt_only = true;
  r.probes = s.probes;
  r.interval_us = s.interval_us;
  // As plan_request: jitter never reorders, so probes closer than the draws differ wait for the
  // ones before them at every jittered hop and the median rises. In the lab VM (netem, a clock
  // that counts what netem counts: scripts/labvm --icount shift=0,sleep=off) the rail path's
  // 80 ms of four 20 ms +- 2 ms hops read +5.55 ms with probes 1 ms apart. 4 sigma of the round
  // trip apart, which is at least 4 sigma of any of its hops.
  if (rtt_jitter.ns > 0)
    r.interval_us = std::max(r.interval_us, static_cast<int>(4 * rtt_jitter.ns / 1000));
  r.wait_ms = 1000 + static_cast<int>(std::ceil(4 * (rtt.ms() + 4 * rtt_jitter.ms())));
  const double rtt_s = (static_cast<double>(r.probes) * r.interval_us / 1e6 + r.wait_ms / 1e3);
  r.serve_seconds = static_cast<int>(std::ceil(2 * rtt_s + 15));
  return r;
}

MeasureOutcome measure_link(const MeasureRequest& r, const std::atomic<bool>& stop) {
  MeasureOutcome out;
  auto step_failed = [&out](const Error& e) {
    out.errors.push_back(e.message);
    out.timeouts += e.sys_errno == ETIMEDOUT;
  };
  // Below the lab's directory, which no one else can write (core/safe_file.h).
  if (auto dir = SafeDir::open_root(r.work_dir); !dir) {
    out.errors.push_back(dir.error().message);
    return out;
  }
  std::vector<TcpBufferRaise> raised;
  for (const auto& ns : {r.target.a_netns, r.target.b_netns}) {
    if (r.rtt_only) break;
    if (r.remote_server && ns == r.target.b_netns) continue;  // the serving host's to raise
    auto g = TcpBufferRaise::apply(ns, r.buffer);
    if (!g) {
      out.errors.push_back(g.error().message);
      continue;
    }
    for (const auto& n : g->notes()) out.notes.push_back(n);
    raised.push_back(std::move(*g));
  }
  const std::string secs = std::to_string(r.serve_seconds);
  std::optional<Result<ProbeChild>> server;  // none: B's server runs on the host holding B
  if (!r.remote_server)
    server.emplace(start_server_b(r, r.serve_seconds, r.work_dir + "/serve-b.log"));
  auto base_server = ProbeChild::start(
      r.target.a_netns,
      {r.tb_probe, "--realtime", kRealtime, "serve", "--port", std::to_string(r.port + 1),
       "--seconds", secs, "--dev", "lo", "--addr", "127.0.0.1"},
      r.owner, r.work_dir + "/serve-a-lo.log");
  for (auto* s : {server ? &*server : nullptr, &base_server}) {
    if (!s) continue;
    if (!*s) {
      out.errors.push_back(s->error().message);
      return out;
    }
    if (auto ok = (*s)->wait_for_line("\"ready\"", kReadyTimeoutMs, stop); !ok) {
      out.errors.push_back(ok.error().message + ": " + tail((*s)->log()));
      return out;
    }
  }

  const int base_probes = r.base_probes > 0 ? r.base_probes : r.probes;
  auto base =
      run_client(r, "rtt over lo (base)", rtt_argv(r, "127.0.0.1", r.port + 1, "lo", base_probes),
                 rtt_timeout_ms(r, base_probes), stop);
  if (base) {
    if (auto v = probe::rtt_from_json(*base))
      out.m.base = *v;
    else
      out.errors.push_back(v.error().message);
  } else {
    step_failed(base.error());
  }
  if (stop) return out;
  auto rtt = run_client(r, "rtt over the link",
                        rtt_argv(r, r.target.addr.to_string(), r.port, r.target.a_dev, r.probes),
                        rtt_timeout_ms(r, r.probes), stop);
  if (rtt) {
    if (auto v = probe::rtt_from_json(*rtt))
      out.m.rtt = *v;
    else
      out.errors.push_back(v.error().message);
  } else {
    step_failed(rtt.error());
  }
  if (stop || r.rtt_only) return out;
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.3f", r.goodput_seconds);
  auto gp =
      run_client(r, "goodput",
                 {r.tb_probe, "--realtime", kRealtime, "goodput", "--to", r.target.addr.to_string(),
                  "--port", std::to_string(r.port), "--dev", r.target.a_dev, "--seconds", seconds,
                  "--warmup-ms", std::to_string(r.warmup_ms), "--buffer", std::to_string(r.buffer),
                  "--drain-ms", std::to_string(r.drain_ms)},
                 static_cast<int>(r.goodput_seconds * 1000) + r.drain_ms + 8000, stop);
  if (gp) {
    if (auto v = probe::goodput_from_json(*gp))
      out.m.goodput = *v;
    else
      out.errors.push_back(v.error().message);
  } else {
    step_failed(gp.error());
  }
  if (stop || r.loss_pace_bps == 0) return out;
  out.m.loss_pace_bps = r.loss_pace_bps;
  auto lossy =
      run_client(r, "paced loss transfer", {r.tb_probe,    "--realtime",
                                            kRealtime,     "goodput",
                                            "--to",        r.target.addr.to_string(),
                                            "--port",      std::to_string(r.port),
                                            "--dev",       r.target.a_dev,
                                            "--seconds",   seconds,
                                            "--warmup-ms", "0",
                                            "--buffer",    std::to_string(r.buffer),
                                            "--drain-ms",  std::to_string(r.drain_ms),
                                            "--pace-bps",  std::to_string(r.loss_pace_bps)},
                 static_cast<int>(r.goodput_seconds * 1000) + r.drain_ms + 8000, stop);
  if (lossy) {
    if (auto v = probe::goodput_from_json(*lossy))
      out.m.loss_goodput = *v;
    else
      out.errors.push_back(v.error().message);
  } else {
    step_failed(lossy.error());
  }
  return out;  // servers stopped, sysctls restored
}

Result<std::string> find_tb_probe() {
  return find_companion("tb-probe", "TESTBEDCTL_PROBE");
}

Result<ProbeChild> ProbeChild::start(const std::string& netns, const std::vector<std::string>& argv,
                                     const std::string& owner, const std::string& log_path) {
  std::error_code ec;
  fs::remove(log_path, ec);
  auto pid = runner::spawn_in_netns(netns, argv, owner, log_path);
  if (!pid) return std::unexpected(pid.error());
  return ProbeChild(*pid, log_path);
}

ProbeChild::ProbeChild(ProbeChild&& o) noexcept
    : pid_(std::exchange(o.pid_, -1)), status_(o.status_), log_path_(std::move(o.log_path_)) {}

bool ProbeChild::reap(bool block) {
  if (pid_ < 0) return true;
  int st = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &st, block ? 0 : WNOHANG);
  } while (r < 0 && errno == EINTR);
  if (r == pid_ || (r < 0 && errno == ECHILD)) {
    status_ = st;
    pid_ = -1;
    return true;
  }
  return false;
}

ProbeChild::~ProbeChild() {
  if (pid_ < 0) return;
  ::kill(pid_, SIGTERM);
  const int64_t deadline = mono_ms() + kStopGraceMs;
  while (!reap(false) && mono_ms() < deadline) sleep_ms(5);
  if (pid_ >= 0) {
    ::kill(pid_, SIGKILL);
    reap(true);
  }
}

Status ProbeChild::wait_for_line(const std::string& text, int timeout_ms,
                                 const std::atomic<bool>& stop) {
  const int64_t deadline = mono_ms() + timeout_ms;
  for (;;) {
    if (log().find(text) != std::string::npos) return {};
    if (reap(false)) return fail("tb-probe exited before it was ready");
    if (stop) return fail("interrupted");
    if (mono_ms() >= deadline)
      return fail("tb-probe was not ready within " + std::to_string(timeout_ms) + " ms");
    sleep_ms(5);
  }
}

Result<int> ProbeChild::wait(int timeout_ms, const std::atomic<bool>& stop) {
  const int64_t deadline = mono_ms() + timeout_ms;
  while (!reap(false)) {
    if (stop || mono_ms() >= deadline) {
      ::kill(pid_, SIGKILL);
      reap(true);
      if (stop) return fail("interrupted");
      return fail("tb-probe did not finish within " + std::to_string(timeout_ms) + " ms; killed",
                  ETIMEDOUT);
    }
    sleep_ms(5);
  }
  if (WIFSIGNALED(status_)) return 128 + WTERMSIG(status_);
  return WEXITSTATUS(status_);
}

std::string ProbeChild::log() const {
  std::ifstream in(log_path_);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

Result<TcpBufferRaise> TcpBufferRaise::apply(const std::string& netns, uint64_t bytes) {
  auto fd = netlink::open_named_netns(netns);
  if (!fd) return std::unexpected(fd.error());
  TcpBufferRaise g(std::move(*fd), netns);
  for (const char* key : {"net/ipv4/tcp_rmem", "net/ipv4/tcp_wmem"}) {
    auto old = netlink::read_sysctl(g.ns_.get(), key);
    if (!old) return std::unexpected(old.error());
    std::istringstream in(*old);
    uint64_t lo = 0, def = 0, max = 0;
    if (!(in >> lo >> def >> max))
      return fail(std::string(key) + " in " + netns + ": \"" + *old + "\" is not three numbers");
    if (max >= bytes) continue;
    const std::string raised =
        std::to_string(lo) + " " + std::to_string(def) + " " + std::to_string(bytes);
    if (auto w = netlink::write_sysctl(g.ns_.get(), key, raised); !w)
      return std::unexpected(w.error());
    g.saved_.emplace_back(key, *old);
    g.notes_.push_back(std::string(key).substr(9) + " max raised " + std::to_string(max) + " -> " +
                       std::to_string(bytes) + " in " + netns + " for the run");
  }
  return g;
}

TcpBufferRaise::~TcpBufferRaise() {
  if (!ns_) return;
  for (const auto& [key, old] : saved_)
    if (auto r = netlink::write_sysctl(ns_.get(), key, old); !r)
      std::fprintf(stderr, "testbedctl: restore %s in %s: %s\n", key.c_str(), name_.c_str(),
                   r.error().message.c_str());
}

Result<Load> Load::start(const std::vector<LoadFlow>& flows, const std::string& tb_probe,
                         const std::string& owner, const std::string& work_dir, double seconds,
                         uint16_t port, const std::atomic<bool>& stop) {
  if (auto dir = SafeDir::open_root(work_dir); !dir) return std::unexpected(dir.error());
  Load load;
  const std::string secs = std::to_string(static_cast<int>(std::ceil(seconds)) + 30);
  std::vector<std::string> sinks;  // one server per destination namespace
  for (const auto& f : flows) {
    if (std::ranges::find(sinks, f.to_netns) != sinks.end()) continue;
    sinks.push_back(f.to_netns);
    auto s = ProbeChild::start(
        f.to_netns, {tb_probe, "serve", "--port", std::to_string(port), "--seconds", secs}, owner,
        work_dir + "/load-serve-" + std::to_string(sinks.size()) + ".log");
    if (!s) return std::unexpected(s.error());
    if (auto ok = s->wait_for_line("\"ready\"", kReadyTimeoutMs, stop); !ok)
      return fail("load sink in " + f.to_netns + ": " + ok.error().message);
    load.servers_.push_back(std::move(*s));
  }
  char sec[32];
  std::snprintf(sec, sizeof sec, "%.3f", seconds);
  load.t0_ns_ = mono_ms() * 1'000'000;
  for (size_t i = 0; i < flows.size(); ++i) {
    const auto& f = flows[i];
    load.flows_.push_back(f);
    load.tx0_.push_back(tx_bytes(f.from_netns, f.from_devs));
    auto c = ProbeChild::start(
        f.from_netns,
        {tb_probe, "goodput", "--to", f.addr.to_string(), "--port", std::to_string(port),
         "--seconds", sec, "--warmup-ms", "0", "--drain-ms", "5000"},
        owner, work_dir + "/load-" + std::to_string(i) + ".log");
    if (!c) return std::unexpected(c.error());
    load.senders_.push_back(std::move(*c));
  }
  return load;
}

std::vector<std::string> Load::carried() const {
  std::vector<std::string> out;
  const double s = static_cast<double>(mono_ms() * 1'000'000 - t0_ns_) / 1e9;
  for (size_t i = 0; i < flows_.size(); ++i) {
    const auto& f = flows_[i];
    const uint64_t now = tx_bytes(f.from_netns, f.from_devs);
    const double bytes = now >= tx0_[i] ? static_cast<double>(now - tx0_[i]) : 0;
    std::string devs;
    for (const auto& d : f.from_devs) devs += (devs.empty() ? "" : "+") + d;
    out.push_back(fmt::format("{}: {:.1f} Mbit/s out of {}:{} over {:.1f} s", f.what,
                              s > 0 ? bytes * 8 / s / 1e6 : 0.0, f.from_netns, devs, s));
  }
  return out;
}

}  // namespace tb::verify
