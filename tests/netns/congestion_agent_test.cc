// Phase P4 of docs/design-congestion.md (issue 32): the congestion agent as a process,
// `tb-probe congestion --config FILE --stats FILE`, started from a hand-written config (the
// plan's CongestionAgent JSON) on the P0 topology:
//
//   s1:e0 198.18.1.0/31 -> sw:p1 198.18.1.1/31 -+
//                                                +- sw (forwards) -> sw:out 198.18.3.0/31
//   s2:e0 198.18.2.0/31 -> sw:p2 198.18.2.1/31 -+                     -> r:e0 198.18.3.1/31
//
// s1:e0 and s2:e0 (the upstreams the agent pauses) and sw:out (the lossless port it polls) carry
// a TBF 1: at 100 Mbit/s; sw:out's limit and thresholds are §2's for two feeders, as in
// congestion_levers_test.cc but for the onset from the agent's 10 ms idle poll. Namespaces are this
// test's own (tb-t<pid>-<tag>, removed by exact name in TearDown even when a check failed),
// addresses in 198.18.0.0/15, IPv6 off in them; the agent is this test's child, ended by its pid in
// TearDown whatever happened. Every loop is bounded in time and count.
//
// What is asserted: an incast keeps 0 drops at the switch (less the late-agent allowance of
// §3.5, printed, when the agent reports polls later than its budget: a loaded host, not the
// agent); after SIGKILL a restarted agent resumes the pause it finds; SIGTERM resumes all.
// P8: a storm held on sw:out through the control document (congestion/control.h, SIGHUP) is
// found by the watchdog within `watchdog` plus one poll (and the agent's reported lateness),
// mitigated (its rate back, a 1-byte limit: arrivals dropped, the senders resume), held and found
// again, and released when the document lifts it; with watchdog_action = "forward" the mitigated
// port keeps its limit, forwards and drops nothing.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/pkt_sched.h>
#include <net/if.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "congestion/control.h"
#include "congestion/pause.h"
#include "congestion/stats.h"
#include "congestion/wake.h"
#include "congestion_traffic.h"
#include "core/safe_file.h"
#include "netlink/netns.h"
#include "netlink/qdisc_stats.h"
#include "netlink/socket.h"
#include "netlink/tc_message.h"
#include "netns_fixture.h"
#include "plan/daemon.h"

namespace tb::testing::congestion_agent {
namespace {

using namespace congestion_traffic;

constexpr uint32_t kTbfRoot = 0x10000;
constexpr uint64_t kRate = 12'500'000;  // 100 Mbit/s
constexpr uint32_t kFrame = 1514;
constexpr uint32_t kBurst = 12'500;
constexpr uint32_t kNicLimit = 16u << 20;
constexpr uint64_t kRP = kRate / 1000, kRA = kRate / 10000;
constexpr uint64_t kXon = kRP + kRA;                                        // 13,750
constexpr uint64_t kXoff = kXon + std::max<uint64_t>(2 * kFrame, 2 * kRP);  // 38,750
constexpr uint64_t kHeadroom = kRP + kRP + kRA + kFrame;
// limit = xoff + sum of headroom + (n - 1) R idle_poll (§2's onset from idle): the agent polls
// every 10 ms while nothing builds, so an incast starting between two polls has 10 ms of excess.
constexpr int64_t kIdlePollMs = 10;
constexpr uint64_t kSwitchLimit = kXoff + 2 * kHeadroom + kRP * kIdlePollMs;  // 219,278

void sleep_ms(int64_t ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

// A counter of /proc/net/<file> ("snmp": Tcp, "netstat": TcpExt) as namespace `netns_fd` sees
// it; -1 when absent.
struct Node {
  std::string name;
  UniqueFd fd;
  netlink::NlSocket nl;
  int ifindex = 0;
};

// A TBF's figures from one dump.
struct Tbf {
  bool found = false;
  uint64_t rate = 0, bytes = 0;
  uint32_t drops = 0, backlog = 0;
  uint32_t limit = 0;
};

constexpr int64_t kWatchdogMs = 200, kRestoreMs = 200;

class CongestionAgentTest : public NetnsTest {
 protected:
  void SetUp() override {
    NetnsTest::SetUp();
    if (IsSkipped()) return;
    dir_ = std::filesystem::temp_directory_path() / ("tb-cong-agent-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    build();
  }

  void TearDown() override {
    stop_agent(SIGKILL);
    for (Node* n : {&s1_, &s2_, &sw_, &r_}) {
      n->nl = netlink::NlSocket();
      n->fd.reset();
    }
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
    NetnsTest::TearDown();
  }

  void build() {
    s1_.name = ns("cs1");
    s2_.name = ns("cs2");
    sw_.name = ns("csw");
    r_.name = ns("cr");
    const std::string mk = marker("cong");
    std::vector<plan::Op> ops;
    for (Node* n : {&s1_, &s2_, &sw_, &r_}) {
      ops.push_back(plan::CreateNetns{n->name, n->name, mk + "node=" + n->name});
      if (std::filesystem::exists("/proc/sys/net/ipv6")) {
        ops.push_back(plan::SetSysctl{n->name, "net/ipv6/conf/all/disable_ipv6", "1"});
        ops.push_back(plan::SetSysctl{n->name, "net/ipv6/conf/default/disable_ipv6", "1"});
      }
    }
    ops.push_back(plan::SetSysctl{sw_.name, "net/ipv4/ip_forward", "1"});
    for (Node* n : {&s1_, &s2_})
      ops.push_back(plan::SetSysctl{n->name, "net/ipv4/tcp_no_metrics_save", "1"});
    ASSERT_EQ(apply(ops), "");
    ASSERT_EQ(apply(incast_links(s1_.name, s2_.name, sw_.name, r_.name, mk)), "");
    auto open = [](Node& n, const char* ifname) {
      auto fd = netlink::open_named_netns(n.name);
      ASSERT_TRUE(fd) << fd.error().message;
      n.fd = std::move(*fd);
      auto nl = netlink::NlSocket::open_in(n.fd.get());
      ASSERT_TRUE(nl) << nl.error().message;
      n.nl = std::move(*nl);
      auto in = netlink::ScopedNetns::enter(n.fd.get());
      ASSERT_TRUE(in) << in.error().message;
      n.ifindex = static_cast<int>(if_nametoindex(ifname));
      ASSERT_GT(n.ifindex, 0) << ifname << " in " << n.name;
    };
    ASSERT_NO_FATAL_FAILURE(open(s1_, "e0"));
    ASSERT_NO_FATAL_FAILURE(open(s2_, "e0"));
    ASSERT_NO_FATAL_FAILURE(open(sw_, "out"));
    ASSERT_NO_FATAL_FAILURE(open(r_, "e0"));
    for (Node* n : {&s1_, &s2_})
      ASSERT_TRUE(n->nl.call(tbf(n->ifindex, kRate, kBurst, kNicLimit), "sender tbf"));
    ASSERT_TRUE(sw_.nl.call(tbf(sw_.ifindex, kRate, kBurst, static_cast<uint32_t>(kSwitchLimit)),
                            "switch tbf"));

    // The config the plan would write (plan::CongestionAgent's JSON).
    plan::CongestionAgent c;
    c.netns = sw_.name;
    c.poll_ns = 1 * kMs;
    c.idle_poll_ns = kIdlePollMs * kMs;
    c.late_ns = 1 * kMs;
    c.watchdog_ns = kWatchdogMs * kMs;
    c.restore_ns = kRestoreMs * kMs;
    c.action = "drop";
    plan::CongestionPort p{"sw:out", sw_.name, "out", kTbfRoot, TC_H_ROOT, "lossless",
                           kXoff,    kXon,     0,     0,        0,         {0, 1}};
    p.rate = kRate;
    p.burst = kBurst;
    p.limit = static_cast<uint32_t>(kSwitchLimit);
    p.mtu = 1500;
    c.ports.push_back(p);
    // 65535 x 512 bit times at 100 Mbit/s.
    const int64_t quantum = 65535LL * 512 * 1'000'000'000 / static_cast<int64_t>(kRate * 8);
    int k = 1;
    for (Node* n : {&s1_, &s2_}) {
      c.upstreams.push_back({"s" + std::to_string(k) + ":e0", n->name, "e0", kTbfRoot, TC_H_ROOT,
                             kRate, kBurst, kNicLimit, 1500, quantum, "p" + std::to_string(k), -1});
      ++k;
    }
    config_ = (dir_ / "congestion.json").string();
    stats_ = (dir_ / "congestion.stats.json").string();
    control_ = (dir_ / congestion::kControlFile).string();
    events_ = (dir_ / "events.jsonl").string();
    std::ofstream(config_) << plan::to_json(c).dump(1) << "\n";
  }

  static netlink::NlMsg tbf(int ifindex, uint64_t rate, uint32_t burst, uint32_t limit) {
    return netlink::new_tc({ifindex, TC_H_ROOT, kTbfRoot}, netlink::TbfOptions{rate, burst, limit},
                           netlink::TcWrite::kReplace);
  }

  Tbf read(Node& n) {
    std::vector<netlink::QdiscStats> all;
    auto r = netlink::dump_qdisc_stats(n.nl, all);
    EXPECT_TRUE(r) << r.error().message;
    for (const auto& q : all)
      if (q.ifindex == n.ifindex && q.handle == kTbfRoot)
        return {true, q.tbf_rate, q.bytes, q.drops, q.backlog, q.tbf_limit};
    return {};
  }

  // Whether `n`'s interface carries a clsact (the wake's byte counter hangs on it).
  bool has_clsact(Node& n) {
    std::vector<netlink::QdiscStats> all;
    auto r = netlink::dump_qdisc_stats(n.nl, all);
    EXPECT_TRUE(r) << r.error().message;
    for (const auto& q : all)
      if (q.ifindex == n.ifindex && q.handle == TC_H_MAKE(TC_H_CLSACT, 0)) return true;
    return false;
  }

  // The agent as this test's child (tb-probe next to the tests: TB_PROBE).
  void start_agent() {
    ASSERT_EQ(agent_, -1);
    std::filesystem::remove(stats_);
    const std::string config = config_, stats = stats_;
    agent_ = fork();
    ASSERT_GE(agent_, 0);
    if (agent_ == 0) {
      const std::string events = events_;
      execl(TB_PROBE, TB_PROBE, "congestion", "--config", config.c_str(), "--stats", stats.c_str(),
            "--events", events.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    // Up once its first stats file is there (within 2 s).
    for (int i = 0; i < 200 && !std::filesystem::exists(stats_); ++i) sleep_ms(10);
    ASSERT_TRUE(std::filesystem::exists(stats_)) << "the agent wrote no stats within 2 s";
  }
  // Signals the agent and reaps it (bounded: 3 s, then SIGKILL); its exit status or -1.
  int stop_agent(int sig) {
    if (agent_ < 0) return -1;
    kill(agent_, sig);
    int status = 0;
    pid_t got = 0;
    for (int i = 0; i < 300 && (got = waitpid(agent_, &status, WNOHANG)) == 0; ++i) sleep_ms(10);
    if (got == 0) {
      kill(agent_, SIGKILL);
      waitpid(agent_, &status, 0);
    }
    agent_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  congestion::AgentStats stats() {
    auto s = congestion::read_stats(stats_);
    EXPECT_TRUE(s) << s.error().message;
    return s.value_or(congestion::AgentStats{});
  }

  // Writes the control document holding `storms` as `generation`, tells the agent (SIGHUP) and
  // waits (2 s at most) for its answer; its control_applied_ns, 0 when none came.
  int64_t control(uint64_t generation, const std::vector<std::string>& storms) {
    congestion::ControlDoc d;
    d.generation = generation;
    d.storms = storms;
    auto w = write_file(control_, congestion::to_json(d).dump() + "\n");
    EXPECT_TRUE(w) << w.error().message;
    kill(agent_, SIGHUP);
    for (int i = 0; i < 400; ++i) {
      auto s = congestion::read_stats(stats_);
      if (s && s->generation == generation && s->control_applied_ns > 0) {
        EXPECT_EQ(s->control_error, "");
        return s->control_applied_ns;
      }
      sleep_ms(5);
    }
    ADD_FAILURE() << "no answer for control generation " << generation << " within 2 s";
    return 0;
  }
  // The events.jsonl lines named `name`.
  std::vector<nlohmann::json> events(const std::string& name) {
    std::vector<nlohmann::json> out;
    std::ifstream in(events_);
    for (std::string line; std::getline(in, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (!j.is_discarded() && j.value("event", "") == name) out.push_back(j);
    }
    return out;
  }
  // Waits (bounded by `max_ms`) for the `n`th event named `name`.
  bool await_event(const std::string& name, size_t n, int64_t max_ms) {
    for (int64_t i = 0; i < max_ms / 2; ++i) {
      if (events(name).size() >= n) return true;
      sleep_ms(2);
    }
    return false;
  }

  Node s1_, s2_, sw_, r_;
  std::filesystem::path dir_;
  std::string config_, stats_, control_, events_;
  pid_t agent_ = -1;
};

// §3.5's late-agent allowance: (n - 1) R (lateness - L) plus one frame per feeder, in packets
// of one frame; 0 when no poll was late.
uint64_t late_allowance(const congestion::AgentStats& s) {
  if (s.late_polls == 0) return 0;
  const double over = std::max(0.0, s.late_ms_max - 1.0) / 1e3;
  return static_cast<uint64_t>(static_cast<double>(kRate) * over / kFrame) + 2;
}

TEST_F(CongestionAgentTest, IncastThroughTheAgentHasNoSwitchDrops) {
  ASSERT_NO_FATAL_FAILURE(start_agent());
  // Idle first: the agent's cost with nothing to do (printed, not asserted).
  sleep_ms(1500);
  const congestion::AgentStats idle = stats();
  std::printf("[agent] idle: cpu %.3f s over %.2f s (%.1f%% of a core), %llu polls, %llu late\n",
              idle.cpu_s, idle.uptime_s, idle.uptime_s > 0 ? 100.0 * idle.cpu_s / idle.uptime_s : 0,
              static_cast<unsigned long long>(idle.polls),
              static_cast<unsigned long long>(idle.late_polls));
  // The idle wake (congestion/wake.h): where this process can make the byte counters, so can
  // the agent, and then it dumps only every kStatsEveryNs while idle (about 8 in 1.5 s; its idle
  // period, 10 ms, would make 150); where it cannot, it says why and polls.
  std::printf("[agent] wake: %s, %llu checks, %llu polls\n", idle.wake.c_str(),
              static_cast<unsigned long long>(idle.wake_checks),
              static_cast<unsigned long long>(idle.polls));
  const bool bpf_here = congestion::ByteCounters::create(1).has_value();
  if (bpf_here) {
    EXPECT_EQ(idle.wake.rfind("cls_bpf byte counters on ", 0), 0u) << idle.wake;
    EXPECT_TRUE(has_clsact(sw_)) << "no clsact on the switch port under the wake";
    EXPECT_GT(idle.wake_checks, 100u);
    EXPECT_LE(static_cast<double>(idle.polls), idle.uptime_s / 0.2 * 2 + 5);
  } else {
    EXPECT_EQ(idle.wake.rfind("none: ", 0), 0u) << idle.wake;
  }
  Traffic t;
  auto c = t.connect({s1_.fd.get(), s2_.fd.get()}, 3, r_.fd.get(), 5301);
  ASSERT_TRUE(c) << c.error().message;
  const Tbf sw0 = read(sw_);
  const TcpCounters a0 = tcp_counters(s1_.fd.get()), b0 = tcp_counters(s2_.fd.get());
  const int64_t t0 = now_ns();
  const uint64_t rx0 = t.received();
  t.start(3000);
  sleep_ms(3000);
  const uint64_t rx = t.received() - rx0;
  const double secs = static_cast<double>(now_ns() - t0) / 1e9;
  t.stop();
  sleep_ms(500);  // what the senders held drains under the agent
  const Tbf sw1 = read(sw_);
  const TcpCounters a = tcp_counters(s1_.fd.get()) - a0, b = tcp_counters(s2_.fd.get()) - b0;
  const congestion::AgentStats s = stats();
  ASSERT_EQ(stop_agent(SIGTERM), 0);
  const uint64_t drops = sw1.drops - sw0.drops;
  const int64_t segs = a.out_segs + b.out_segs, retrans = a.retrans + b.retrans;
  uint64_t pauses = 0;
  for (const auto& [name, u] : s.upstreams) pauses += u.pauses;
  std::printf(
      "[agent] incast 2x3 flows, %.1f s: %.2f of the port at r, switch drops %llu (late "
      "allowance %llu), %lld of %lld segments retransmitted; agent: %s, %llu polls, %llu late "
      "(max %.2f ms), poll p99 %.3f ms, cpu %.3f s over %.1f s (%.1f%% of a core), %llu pauses, "
      "backlog max %llu, xoff events %llu\n",
      secs, static_cast<double>(rx) / secs / static_cast<double>(kRate),
      static_cast<unsigned long long>(drops), static_cast<unsigned long long>(late_allowance(s)),
      static_cast<long long>(retrans), static_cast<long long>(segs), s.sched.c_str(),
      static_cast<unsigned long long>(s.polls), static_cast<unsigned long long>(s.late_polls),
      s.late_ms_max, s.poll_ms_p99, s.cpu_s, s.uptime_s,
      s.uptime_s > 0 ? 100.0 * s.cpu_s / s.uptime_s : 0.0, static_cast<unsigned long long>(pauses),
      static_cast<unsigned long long>(s.ports.count("sw:out") ? s.ports.at("sw:out").backlog_max
                                                              : 0),
      static_cast<unsigned long long>(s.ports.count("sw:out") ? s.ports.at("sw:out").xoff_events
                                                              : 0));
  EXPECT_LE(drops, late_allowance(s)) << "switch egress drops under the agent";
  EXPECT_GT(pauses, 0u) << "the incast never paused a sender";
  if (bpf_here) {
    EXPECT_GT(s.wakes, 0u) << "the incast never woke the idle agent through its counters";
    EXPECT_FALSE(has_clsact(sw_)) << "the agent left its wake's clsact behind";
  }
  EXPECT_GT(static_cast<double>(rx) / secs, 0.8 * static_cast<double>(kRate));
  EXPECT_EQ(s.errors, 0u) << s.last_error;
  for (Node* n : {&s1_, &s2_}) EXPECT_EQ(read(*n).rate, kRate) << n->name << " left paused";
}

TEST_F(CongestionAgentTest, AfterSigkillARestartedAgentResumesWhatItFindsPaused) {
  ASSERT_NO_FATAL_FAILURE(start_agent());
  Traffic t;
  auto c = t.connect({s1_.fd.get(), s2_.fd.get()}, 3, r_.fd.get(), 5302);
  ASSERT_TRUE(c) << c.error().message;
  t.start(2500);
  sleep_ms(700);
  stop_agent(SIGKILL);
  // Whatever the killed agent left, s1 is paused now as it could have been.
  ASSERT_TRUE(s1_.nl.call(tbf(s1_.ifindex, 1, kFrame, kNicLimit), "pause s1"));
  sleep_ms(50);
  const Tbf held = read(s1_);
  EXPECT_EQ(held.rate, 1u);
  ASSERT_NO_FATAL_FAILURE(start_agent());
  sleep_ms(300);
  const Tbf after = read(s1_);
  t.stop();
  sleep_ms(300);
  const congestion::AgentStats s = stats();
  ASSERT_EQ(stop_agent(SIGTERM), 0);
  std::printf(
      "[agent] restart: s1 at %llu B/s after 300 ms, %llu B sent meanwhile; leftovers %llu\n",
      static_cast<unsigned long long>(after.rate),
      static_cast<unsigned long long>(after.bytes - held.bytes),
      static_cast<unsigned long long>(s.upstreams.count("s1:e0") ? s.upstreams.at("s1:e0").leftovers
                                                                 : 0));
  EXPECT_GT(after.bytes - held.bytes, 100'000u) << "s1 did not resume (restore + kick)";
  for (Node* n : {&s1_, &s2_}) EXPECT_EQ(read(*n).rate, kRate) << n->name << " left paused";
  ASSERT_TRUE(s.upstreams.count("s1:e0"));
  EXPECT_GE(s.upstreams.at("s1:e0").leftovers, 1u);
}

TEST_F(CongestionAgentTest, SigtermResumesEverythingItPaused) {
  ASSERT_NO_FATAL_FAILURE(start_agent());
  Traffic t;
  auto c = t.connect({s1_.fd.get(), s2_.fd.get()}, 3, r_.fd.get(), 5303);
  ASSERT_TRUE(c) << c.error().message;
  t.start(3000);
  // SIGTERM while a sender is paused: the switch queue is above XON then; bounded at 2 s.
  bool paused = false;
  const int64_t end = now_ns() + 2000 * kMs;
  sleep_ms(300);
  while (!paused && now_ns() < end) {
    paused = read(s1_).rate == 1 || read(s2_).rate == 1;
    if (!paused) sleep_ms(1);
  }
  const int rc = stop_agent(SIGTERM);
  const Tbf a = read(s1_), b = read(s2_);
  sleep_ms(200);
  const Tbf a2 = read(s1_), b2 = read(s2_);
  t.stop();
  const congestion::AgentStats s = stats();
  std::printf("[agent] SIGTERM with a sender paused: %s; rates after %llu / %llu B/s\n",
              paused ? "yes" : "not seen in 2 s", static_cast<unsigned long long>(a.rate),
              static_cast<unsigned long long>(b.rate));
  EXPECT_EQ(rc, 0);
  EXPECT_TRUE(paused) << "no pause seen during the incast";
  EXPECT_EQ(a.rate, kRate);
  EXPECT_EQ(b.rate, kRate);
  EXPECT_GT(a2.bytes + b2.bytes, a.bytes + b.bytes) << "the senders did not resume";
  EXPECT_TRUE(s.stopped);
  for (const auto& [name, u] : s.upstreams) EXPECT_FALSE(u.paused_now) << name;
}

TEST_F(CongestionAgentTest, AStormHeldOnTheSwitchPortIsFoundByTheWatchdogMitigatedAndReleased) {
  ASSERT_NO_FATAL_FAILURE(start_agent());
  Traffic t;
  auto c = t.connect({s1_.fd.get(), s2_.fd.get()}, 3, r_.fd.get(), 5304);
  ASSERT_TRUE(c) << c.error().message;
  t.start(5000);
  sleep_ms(300);
  // The storm: sw:out held paused as if r's NIC kept sending PFC pauses.
  const int64_t applied = control(1, {"sw:out"});
  ASSERT_GT(applied, 0);
  sleep_ms(100);
  const Tbf held = read(sw_), held_s1 = read(s1_);
  sleep_ms(50);
  const Tbf held2 = read(sw_);
  EXPECT_EQ(held.rate, congestion::kPauseRate) << "the storm did not hold sw:out";
  EXPECT_LE(held2.bytes - held.bytes, 0u) << "sw:out sent while held (past its leak)";
  // Found within the watchdog plus a poll (and the agent's lateness, printed).
  ASSERT_TRUE(await_event("pfcwd_detect", 1, 1000)) << "no pfcwd_detect within 1 s of the hold";
  const nlohmann::json d1 = events("pfcwd_detect")[0];
  sleep_ms(40);
  const Tbf mitigating = read(sw_), s1_mid = read(s1_);
  ASSERT_TRUE(await_event("pfcwd_restore", 1, 1000));
  const nlohmann::json r1 = events("pfcwd_restore")[0];
  sleep_ms(20);
  const Tbf held_again = read(sw_);
  // Still storming: found again a watchdog later.
  // (The flows are in RTO backoff after the drops: their next retransmit starts the stall.)
  ASSERT_TRUE(await_event("pfcwd_detect", 2, 2500)) << "the persisting storm was not found again";
  const nlohmann::json d2 = events("pfcwd_detect")[1];
  // Lifted: released; new flows (the old ones are deep in RTO backoff) get the port.
  ASSERT_GT(control(2, {}), 0);
  t.stop();
  const Tbf after = read(sw_);
  Traffic t2;
  auto c2 = t2.connect({s1_.fd.get(), s2_.fd.get()}, 1, r_.fd.get(), 5305);
  ASSERT_TRUE(c2) << c2.error().message;
  t2.start(1000);
  sleep_ms(100);
  const uint64_t rx0 = t2.received();
  sleep_ms(400);
  const uint64_t rx = t2.received() - rx0;
  t2.stop();
  sleep_ms(300);
  const congestion::AgentStats s = stats();
  ASSERT_EQ(stop_agent(SIGTERM), 0);
  const double detect_ms = (d1.value("t_mono_ns", int64_t{0}) - applied) / 1e6;
  const double paused1 = d1.value("paused_ms", 0.0), paused2 = d2.value("paused_ms", 0.0);
  const double again_ms =
      (d2.value("t_mono_ns", int64_t{0}) - r1.value("t_mono_ns", int64_t{0})) / 1e6;
  std::printf(
      "[storm] held %llu B queued (s1 at %llu B/s); detect %.1f ms after the agent's answer "
      "(paused_ms %.1f), "
      "mitigation: sw:out at %llu B/s limit %u, s1 at %llu B/s sent %llu B since held, restore "
      "after %.1f ms "
      "with %llu dropped; held again at %llu B/s, found again %.1f ms later (paused_ms %.1f); "
      "lifted: %.2f of the port at r over 400 ms, sw:out at %llu B/s limit %u; agent: %llu late "
      "polls (max %.2f ms), trips %llu, dropped %llu\n",
      static_cast<unsigned long long>(held.backlog), static_cast<unsigned long long>(held_s1.rate),
      detect_ms, paused1, static_cast<unsigned long long>(mitigating.rate), mitigating.limit,
      static_cast<unsigned long long>(s1_mid.rate),
      static_cast<unsigned long long>(s1_mid.bytes - held_s1.bytes),
      (r1.value("t_mono_ns", int64_t{0}) - d1.value("t_mono_ns", int64_t{0})) / 1e6,
      static_cast<unsigned long long>(r1.value("dropped", uint64_t{0})),
      static_cast<unsigned long long>(held_again.rate), again_ms, paused2,
      static_cast<double>(rx) / 0.4 / static_cast<double>(kRate),
      static_cast<unsigned long long>(after.rate), after.limit,
      static_cast<unsigned long long>(s.late_polls), s.late_ms_max,
      static_cast<unsigned long long>(s.ports.count("sw:out") ? s.ports.at("sw:out").watchdog.trips
                                                              : 0),
      static_cast<unsigned long long>(
          s.ports.count("sw:out") ? s.ports.at("sw:out").watchdog.dropped : 0));
  // Detection: watchdog <= paused_ms <= watchdog + one poll + the agent's worst lateness.
  const double slack = 1.0 + s.late_ms_max + 0.5;
  EXPECT_GE(paused1, kWatchdogMs);
  EXPECT_LE(paused1, kWatchdogMs + slack);
  EXPECT_GE(detect_ms, kWatchdogMs - 1.0);
  EXPECT_LE(detect_ms, kWatchdogMs + slack + 2.0);
  // Again: at least the watchdog since the hold (the stall starts with the first retransmit).
  EXPECT_GE(paused2, kWatchdogMs);
  EXPECT_GT(held.backlog, 0u) << "nothing queued behind the storm";
  // Above XOFF behind the storm, sw:out pauses its feeders: the storm spreads. (The flows' bytes
  // in flight alone may stay below XOFF, when the hold caught the queue low: then it need not.)
  if (held.backlog > kXoff) {
    EXPECT_EQ(held_s1.rate, congestion::kPauseRate) << "the storm did not spread to its feeders";
  }
  // Mitigation (drop): its rate back with a 1-byte limit; the feeders were resumed and send.
  EXPECT_EQ(mitigating.rate, kRate);
  EXPECT_EQ(mitigating.limit, 1u);
  // The storm stopped spreading: sw:out drained below XON and its feeders resumed, sending what
  // they held (the flows then wait out their RTOs: what reaches sw:out is dropped).
  EXPECT_EQ(s1_mid.rate, kRate) << "s1 stayed paused while the watchdog mitigated";
  EXPECT_GT(s1_mid.bytes, held_s1.bytes) << "s1 sent nothing once resumed";
  EXPECT_GT(r1.value("dropped", uint64_t{0}), 0u);
  EXPECT_EQ(held_again.rate, congestion::kPauseRate) << "not held again after the restore";
  // Released: rate and limit back, traffic through.
  EXPECT_EQ(after.rate, kRate);
  EXPECT_EQ(after.limit, static_cast<uint32_t>(kSwitchLimit));
  EXPECT_GT(static_cast<double>(rx), 0.5 * 0.4 * static_cast<double>(kRate))
      << "no traffic through sw:out after the storm was lifted";
  ASSERT_TRUE(s.ports.count("sw:out"));
  EXPECT_GE(s.ports.at("sw:out").watchdog.trips, 2u);
  EXPECT_FALSE(s.ports.at("sw:out").storm);
  EXPECT_EQ(s.errors, 0u) << s.last_error;
}

// watchdog_action = "forward": while the watchdog ignores the pause the port keeps its limit and
// forwards; nothing is dropped and the receiver gets its traffic again.
TEST_F(CongestionAgentTest, WithTheForwardActionAMitigatedStormForwardsAndDropsNothing) {
  {
    std::ifstream in(config_);
    auto j = nlohmann::json::parse(in);
    j["action"] = "forward";
    std::ofstream(config_) << j.dump(1) << "\n";
  }
  ASSERT_NO_FATAL_FAILURE(start_agent());
  Traffic t;
  auto c = t.connect({s1_.fd.get(), s2_.fd.get()}, 3, r_.fd.get(), 5306);
  ASSERT_TRUE(c) << c.error().message;
  t.start(3000);
  sleep_ms(300);
  const Tbf sw0 = read(sw_);
  ASSERT_GT(control(1, {"sw:out"}), 0);
  ASSERT_TRUE(await_event("pfcwd_detect", 1, 1000)) << "no pfcwd_detect within 1 s of the hold";
  sleep_ms(20);
  const Tbf mitigating = read(sw_);
  const uint64_t rx0 = t.received();
  sleep_ms(150);
  const uint64_t rx = t.received() - rx0;
  ASSERT_TRUE(await_event("pfcwd_restore", 1, 1000));
  const nlohmann::json r1 = events("pfcwd_restore")[0];
  ASSERT_GT(control(2, {}), 0);
  t.stop();
  const Tbf sw1 = read(sw_);
  const congestion::AgentStats s = stats();
  ASSERT_EQ(stop_agent(SIGTERM), 0);
  std::printf(
      "[storm] forward: mitigating sw:out at %llu B/s limit %u; r got %.2f of the port over "
      "150 ms of it; restore dropped %llu; switch drops over the test %u (late allowance %llu)\n",
      static_cast<unsigned long long>(mitigating.rate), mitigating.limit,
      static_cast<double>(rx) / 0.15 / static_cast<double>(kRate),
      static_cast<unsigned long long>(r1.value("dropped", uint64_t{0})), sw1.drops - sw0.drops,
      static_cast<unsigned long long>(late_allowance(s)));
  EXPECT_EQ(mitigating.rate, kRate);
  EXPECT_EQ(mitigating.limit, static_cast<uint32_t>(kSwitchLimit));
  EXPECT_GT(static_cast<double>(rx), 0.5 * 0.15 * static_cast<double>(kRate))
      << "little traffic through the port while the watchdog ignored its pause";
  EXPECT_LE(r1.value("dropped", uint64_t{0}), late_allowance(s));
  EXPECT_EQ(s.errors, 0u) << s.last_error;
}

}  // namespace
}  // namespace tb::testing::congestion_agent
