// The userspace delay stage against the real kernel (root; skips otherwise): tb-delayd delays
// one direction of a veth pair by 10 ms, changes to 20 ms on SIGHUP without a restart, fails
// closed when killed, counts what it held; it meets issue #13's accuracy targets at 100 µs,
// 250 µs, 1 ms and 10 ms (calibrated timing, stage/calibration.h); nft numgen loss drops about
// what it should; rules are found and removed by owner marker. Namespaces are tb-t<pid>-<tag>,
// addresses 198.18.0.0/31, every wait is bounded, and the daemon is killed by pid whatever happens.
#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <thread>

#include "congestion_traffic.h"
#include "core/unique_fd.h"
#include "netns_fixture.h"
#include "plan/plan.h"
#include "plan/shaping.h"
#include "stage/calibration.h"
#include "stage/mark_table.h"
#include "stage/netfilter_rules.h"
#include "stage/queue_spec.h"
#include "stage/stats.h"
#include "verify/host.h"
#include "verify/result.h"

namespace tb::testing {
namespace {

using namespace std::chrono_literals;
constexpr uint16_t kQueue = 17;

// tb-delayd started in a namespace; SIGKILLed and reaped in the destructor if still running.
class Delayd {
 public:
  Delayd(const std::string& netns, const std::vector<std::string>& args, const std::string& log) {
    std::vector<std::string> all{TB_DELAYD};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    std::string ns_path = netlink::netns_path(netns);
    pid_ = fork();
    if (pid_ == 0) {
      int ns = open(ns_path.c_str(), O_RDONLY);
      int out = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (ns < 0 || out < 0 || setns(ns, CLONE_NEWNET) != 0) _exit(126);
      dup2(out, 1);
      dup2(out, 2);
      execv(argv[0], argv.data());
      _exit(127);
    }
  }
  ~Delayd() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  void signal(int sig) const {
    if (pid_ > 0) kill(pid_, sig);
  }
  // Exit status after at most `limit`, or -1 (still running).
  pid_t pid() const { return pid_; }
  int wait_exit(std::chrono::milliseconds limit) {
    auto end = std::chrono::steady_clock::now() + limit;
    while (pid_ > 0 && std::chrono::steady_clock::now() < end) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(10ms);
    }
    return -1;
  }

 private:
  pid_t pid_ = -1;
};

struct PingResult {
  int sent = 0, received = 0;
  std::vector<double> rtts_ms;  // one per reply, in order
  std::vector<int> seqs;        // icmp_seq of each reply, in the order the replies came
  // NaN without replies, so that no bound on them can pass when nothing came back.
  double min_ms() const {
    return rtts_ms.empty() ? std::nan("") : *std::min_element(rtts_ms.begin(), rtts_ms.end());
  }
  double median_ms() const { return quantile_ms(0.5); }
  double quantile_ms(double q) const {
    if (rtts_ms.empty()) return std::nan("");
    auto v = rtts_ms;
    const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
    std::nth_element(v.begin(), v.begin() + static_cast<long>(i), v.end());
    return v[i];
  }
  // The standard deviation a normal distribution with this interquartile range has: robust to
  // the few replies a loaded host delays by a whole scheduler slice.
  double sigma_ms() const { return (quantile_ms(0.75) - quantile_ms(0.25)) / 1.349; }
  // Replies that came after one with a higher sequence number.
  int out_of_order() const {
    int n = 0, top = -1;
    for (int s : seqs) {
      if (s < top) ++n;
      top = std::max(top, s);
    }
    return n;
  }
};

// `extra`: more ping options, e.g. "-l 100" (root: send 100 at once without waiting for replies;
// ping otherwise keeps at most about one request outstanding whatever -i says).
PingResult ping_many(const std::string& netns, int count, const char* interval,
                     const std::string& extra = "") {
  // -c without -w: with a deadline ping would send until `count` replies came back.
  std::string out =
      capture("timeout 60 ip netns exec " + netns + " ping -n -c " + std::to_string(count) +
              " -i " + interval + " " + extra + " -W 1 198.18.0.1 2>&1");
  PingResult r;
  std::smatch m;
  if (std::regex_search(out, m, std::regex(R"((\d+) packets transmitted, (\d+) received)"))) {
    r.sent = std::stoi(m[1]);
    r.received = std::stoi(m[2]);
  }
  const std::regex rtt(R"(icmp_seq=(\d+) ttl=\d+ time=([\d.]+) ms)");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), rtt); it != std::sregex_iterator();
       ++it) {
    r.seqs.push_back(std::stoi((*it)[1]));
    r.rtts_ms.push_back(std::stod((*it)[2]));
  }
  return r;
}

// ICMP echo round trips from netns `from` to `to`, stop-and-wait: `count` probes, each sent
// `gap` after the previous reply (or its 1 s timeout). The send time is CLOCK_REALTIME just
// before sendto, the receive time the kernel's stamp on the reply (SO_TIMESTAMPNS), and the echo
// is the kernel's: no process's wake-up is in the figure, unlike ping's printout (whose
// resolution is also 10 µs at 1 ms and 100 µs at 10 ms) or a UDP echo's. Runs in a thread of
// its own, moved into `from` and SCHED_FIFO where allowed, so a CPU hog cannot slip between
// the clock and the send. Answered probes only, in µs.
std::vector<double> icmp_rtts_us(const std::string& from, const std::string& to, int count,
                                 std::chrono::microseconds gap) {
  std::vector<double> out;
  std::thread t([&] {
    auto target = netlink::open_named_netns(from);
    if (!target || setns(target->get(), CLONE_NEWNET) != 0) return;  // this thread only
    sched_param sp{};
    sp.sched_priority = 10;
    pthread_setschedparam(pthread_self(), SCHED_FIFO, &sp);  // best effort
    UniqueFd fd(socket(AF_INET, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_ICMP));
    int one = 1;
    if (!fd || setsockopt(fd.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0) return;
    sockaddr_in dst{};
    dst.sin_family = AF_INET;
    inet_pton(AF_INET, to.c_str(), &dst.sin_addr);
    const uint16_t ident = static_cast<uint16_t>(getpid());
    for (int seq = 0; seq < count; ++seq) {
      unsigned char pkt[64] = {8,
                               0,
                               0,
                               0,
                               static_cast<unsigned char>(ident >> 8),
                               static_cast<unsigned char>(ident),
                               static_cast<unsigned char>(seq >> 8),
                               static_cast<unsigned char>(seq)};
      uint32_t sum = 0;
      for (size_t i = 0; i < sizeof pkt; i += 2) sum += (pkt[i] << 8) | pkt[i + 1];
      while (sum >> 16) sum = (sum & 0xffff) + (sum >> 16);
      pkt[2] = static_cast<unsigned char>(~sum >> 8);
      pkt[3] = static_cast<unsigned char>(~sum);
      timespec t0{};
      clock_gettime(CLOCK_REALTIME, &t0);
      if (sendto(fd.get(), pkt, sizeof pkt, 0, reinterpret_cast<sockaddr*>(&dst), sizeof dst) < 0)
        continue;
      auto end = std::chrono::steady_clock::now() + 1s;
      for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            end - std::chrono::steady_clock::now());
        pollfd p{fd.get(), POLLIN, 0};
        if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count()) + 1) <= 0) break;
        unsigned char buf[512];
        alignas(cmsghdr) char control[256];
        iovec iov{buf, sizeof buf};
        msghdr m{};
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        m.msg_control = control;
        m.msg_controllen = sizeof control;
        ssize_t n = recvmsg(fd.get(), &m, 0);
        if (n < 28) continue;
        size_t ihl = (buf[0] & 15) * 4;  // a raw socket sees the IP header
        if (static_cast<size_t>(n) < ihl + 8 || buf[ihl] != 0 ||
            ((buf[ihl + 4] << 8) | buf[ihl + 5]) != ident ||
            ((buf[ihl + 6] << 8) | buf[ihl + 7]) != (seq & 0xffff))
          continue;  // not our echo reply
        for (cmsghdr* c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
          if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
            timespec rx{};
            std::memcpy(&rx, CMSG_DATA(c), sizeof rx);
            out.push_back(static_cast<double>((rx.tv_sec - t0.tv_sec) * 1'000'000'000LL +
                                              (rx.tv_nsec - t0.tv_nsec)) /
                          1e3);
          }
        break;
      }
      std::this_thread::sleep_for(gap);
    }
  });
  t.join();
  return out;
}

double median(std::vector<double> v) {
  if (v.empty()) return std::nan("");
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

// What a timing bound says on a host that may stall (as verify judges a class,
// verify/result.h): a reading that misses is taken again once, and again while the host stalled
// during the newest, up to verify::kMaxReadings; the newest is judged — a miss on a fine host
// fails, a miss while it stalled is not judged (the reading says more about the host than about
// the stage: at load ~8 on the 2-core CI host these bounds were missed by readings whose packets
// waited in softirq work behind ordinary processes, after the stage had released them on time).
// The host's state over a reading, with verify's thresholds: the round trip over loopback in the
// sending namespace (the same softirq path without the stage, SCHED_FIFO like the probes) read a
// median >= 0.3 ms or an IQR >= 0.15 ms just before or after; the promptness watch (a SCHED_FIFO
// thread waking every 1 ms) found the host stalled >= 2% of the time; or the stage released its
// packets >= 20 us late on average over the reading.
enum class Timing { kMet, kMissed, kNotJudged };

struct TimingOutcome {
  Timing timing = Timing::kMet;
  std::string said;  // every reading: what it read and what the host did
};

// The round trip over loopback in `netns`: "" when it looks like a quiet host, else why not.
std::string loopback_stall(const std::string& netns) {
  std::vector<double> v = icmp_rtts_us(netns, "127.0.0.1", 40, 500us);
  if (v.size() < 20) return "loopback echo lost (" + std::to_string(v.size()) + " of 40)";
  std::sort(v.begin(), v.end());
  const double p25 = v[v.size() / 4], p50 = v[v.size() / 2], p75 = v[v.size() * 3 / 4];
  if (p50 < verify::kBaseStallMedianUs && p75 - p25 < verify::kBaseStallIqrUs) return "";
  std::ostringstream o;
  o << "loopback round trip median " << p50 << " us, IQR " << p75 - p25 << " us";
  return o.str();
}

// The stage's packets released so far and their lateness summed, in µs (its stats file).
struct StageCounts {
  double released = 0, late_sum_us = 0;
};

// `read` takes one reading and returns whether its bounds held, describing it in `*what`;
// `stage` (optional) reads the stage's counts before and after it.
TimingOutcome judge_timing(const std::string& netns,
                           const std::function<bool(std::string* what)>& read,
                           const std::function<StageCounts()>& stage = {}) {
  TimingOutcome out;
  for (int n = 1; n <= verify::kMaxReadings; ++n) {
    std::string stall = loopback_stall(netns);
    const StageCounts before = stage ? stage() : StageCounts{};
    verify::PromptnessWatch watch;
    std::string what;
    const bool met = read(&what);
    const verify::Promptness p = watch.stop();
    auto add = [&stall](const std::string& t) { stall += (stall.empty() ? "" : "; ") + t; };
    if (p.stalled_share >= verify::kPromptStallShare) add("promptness: " + p.text());
    if (std::string after = loopback_stall(netns); !after.empty()) add(after + " (after)");
    if (stage) {
      const StageCounts after = stage();
      const double released = after.released - before.released;
      const double late = released > 0 ? (after.late_sum_us - before.late_sum_us) / released : 0;
      if (late >= verify::kStageLateUs)
        add("the stage released " + std::to_string(late) + " us late on average");
    }
    out.said += "reading " + std::to_string(n) + ": " + what + (met ? " (met)" : " (missed)") +
                "; host: " + (stall.empty() ? "fine" : "stalled: " + stall) + "\n";
    if (met) {
      out.timing = Timing::kMet;
      return out;
    }
    out.timing = stall.empty() ? Timing::kMissed : Timing::kNotJudged;
    if (n >= 2 && stall.empty()) return out;
  }
  return out;
}

class DelayStageTest : public NetnsTest {
 protected:
  void SetUp() override {
    NetnsTest::SetUp();
    if (IsSkipped()) return;
    a_ = ns("da");
    b_ = ns("db");
    mk_ = marker("delay");
    ASSERT_EQ(apply(veth_pair(a_, b_, mk_)), "") << "setup";
    dir_ = "/tmp/tb-t" + std::to_string(getpid()) + "-delay";
    std::filesystem::create_directories(dir_);
    stats_ = dir_ + "/stats.json";
    config_ = dir_ + "/queues.conf";
  }
  void TearDown() override {
    delayd_.reset();
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
    NetnsTest::TearDown();
  }

  void write_config(const std::string& text) {
    std::ofstream(config_ + ".new") << text;
    std::filesystem::rename(config_ + ".new", config_);
  }
  void start(const std::vector<std::string>& extra = {}) {
    std::filesystem::remove(stats_);
    std::vector<std::string> args{
        "--config", config_, "--stats", stats_, "--stats-interval-ms", "50", "--duration-s", "120"};
    args.insert(args.end(), extra.begin(), extra.end());
    delayd_ = std::make_unique<Delayd>(b_, args, dir_ + "/delayd.log");
    ASSERT_FALSE(wait_stats([](const nlohmann::json&) { return true; }).is_null()) << log();
  }
  // Polls the stats file (at most 5 s) until `ok` holds; returns the document, or null.
  nlohmann::json wait_stats(const std::function<bool(const nlohmann::json&)>& ok) {
    for (int i = 0; i < 250; ++i) {
      std::ifstream f(stats_);
      auto j = nlohmann::json::parse(f, nullptr, false);
      if (!j.is_discarded() && ok(j)) return j;
      std::this_thread::sleep_for(20ms);
    }
    return nullptr;
  }
  std::string log() const { return capture("cat " + dir_ + "/delayd.log"); }
  // Queue 0's counts from the stats file now (written every 50 ms).
  StageCounts stage_counts() const {
    std::ifstream f(stats_);
    auto j = nlohmann::json::parse(f, nullptr, false);
    if (j.is_discarded() || !j.contains("queues") || j["queues"].empty()) return {};
    const auto& q = j["queues"][0];
    const double released =
        q["packets"].get<double>() - q["held"].get<double>() - q["drops_full"].get<double>();
    return {released, q["late_mean_us"].get<double>() * released};
  }
  std::function<StageCounts()> stage_counter() const {
    return [this] { return stage_counts(); };
  }
  // Says what a timing bound not judged read, and marks the test skipped at its end (after
  // every other check) unless something failed.
  void note_not_judged(const TimingOutcome& t) {
    EXPECT_NE(t.timing, Timing::kMissed) << t.said;
    if (t.timing == Timing::kNotJudged) not_judged_ += t.said;
    if (t.timing != Timing::kMet) std::cout << t.said;
  }
  void skip_if_not_judged() {
    if (!not_judged_.empty() && !HasFailure())
      GTEST_SKIP() << "timing not judged: the host stalled in every reading that missed\n"
                   << not_judged_;
  }
  std::string not_judged_;

  std::string a_, b_, mk_, dir_, stats_, config_;
  std::unique_ptr<Delayd> delayd_;
};

TEST_F(DelayStageTest, DelaysReconfiguresAndCounts) {
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", kQueue}, mk_ + "link=a-b"));
  write_config("# a->b\n" + std::to_string(kQueue) + ":delay_us=10000\n");
  // As a lab runs its stages (lab/daemons.cc): at SCHED_OTHER a CPU hog on every core made this
  // stage 2.4 ms late on average (late_mean_us) and pings 2-3.6 ms slow.
  start({"--realtime", "10"});
  PingResult p;
  int sent = 0;  // every echo request, over every reading
  auto pings = [&](double bound_ms) {
    return [&, bound_ms](std::string* what) {
      p = ping_many(a_, 50, "0.01");
      sent += p.sent;
      *what = fmt::format("{} of 50 replies, median {:.3f} ms (bound {:.1f}), min {:.3f} ms",
                          p.received, p.median_ms(), bound_ms, p.min_ms());
      return p.median_ms() <= bound_ms;
    };
  };
  note_not_judged(judge_timing(a_, pings(11.5), stage_counter()));
  EXPECT_EQ(p.received, 50) << log();
  // No reply may come back before the delay: the stage never releases early (a property, not a
  // timing) — less the release cost it takes out of every delay (stage/calibration.h), and less
  // ping's print step, which truncates: 0.01 ms from 1 to 10 ms, 0.1 ms from 10 to 100 ms
  // (iputils ping; 9.99 was printed for a 10 ms hold that ended 10 us early by design). The typical
  // reply comes within 1.5 ms after it: the stage's timer accuracy is 0.15-0.25 ms and a veth hop a
  // few us (research/limits.md 2, 4a). Judged on the median: a loaded 2-core CI host delays a few
  // pings by whole scheduler slices (a mean of 12.5 ms was seen for 10 ms), which says nothing
  // about the stage; its own lateness is checked below. The median is judged by judge_timing
  // (a reading missed while the host stalled is taken again), the minimum always.
  EXPECT_GE(p.min_ms(), 10.0 - stage::kReleaseCostNs / 1e6 - 0.01);

  // A config that does not parse is refused whole and reported; the stage keeps running.
  write_config(std::to_string(kQueue) + ":delay_us=banana\n");
  delayd_->signal(SIGHUP);
  auto refused = wait_stats([](const nlohmann::json& j) { return j["reload_error"] != ""; });
  ASSERT_FALSE(refused.is_null()) << log();
  EXPECT_NE(refused["reload_error"].get<std::string>().find("banana"), std::string::npos);
  EXPECT_EQ(refused["reloads"], 0);
  EXPECT_DOUBLE_EQ(refused["queues"][0]["delay_us"].get<double>(), 10000.0);

  // 20 ms in place: same process, new config, SIGHUP.
  write_config(std::to_string(kQueue) + ":delay_us=20000:maxlen=4096\n");
  delayd_->signal(SIGHUP);
  auto j = wait_stats([](const nlohmann::json& j) { return j["reloads"] == 1; });
  ASSERT_FALSE(j.is_null()) << log();
  EXPECT_EQ(j["reload_error"], "");
  const int sent_before_20ms = sent;
  note_not_judged(judge_timing(a_, pings(21.5), stage_counter()));
  EXPECT_EQ(p.received, 50);
  EXPECT_GE(p.min_ms(), 20.0 - stage::kReleaseCostNs / 1e6 - 0.1);  // as above

  // Counters: every echo request (84 bytes as IP: 56 data + 8 ICMP + 20 IP) passed the queue.
  // (A file written within the last delay can still show the final packets held.)
  j = wait_stats([&](const nlohmann::json& j) {
    return j["queues"][0]["packets"] >= sent && j["queues"][0]["held"] == 0;
  });
  ASSERT_FALSE(j.is_null()) << log();
  const auto& q = j["queues"][0];
  EXPECT_EQ(q["num"], kQueue);
  EXPECT_DOUBLE_EQ(q["delay_us"].get<double>(), 20000.0);
  EXPECT_EQ(q["maxlen"], 4096);
  uint64_t packets = q["packets"];
  EXPECT_EQ(packets, static_cast<uint64_t>(sent));
  EXPECT_GT(sent - sent_before_20ms, 0);
  EXPECT_EQ(q["bytes"], packets * 84);
  EXPECT_EQ(q["held"], 0);
  EXPECT_GE(q["held_max"], 1);
  // The stage's own lateness (its timestamps, not ping's): its timer accuracy is 0.15-0.25 ms
  // (research/limits.md 2); 2 ms is a scheduler slice on a loaded machine with room. Not judged
  // where a reading above was not judged: a stalled host delays the stage too.
  if (not_judged_.empty()) {
    EXPECT_LT(q["late_mean_us"].get<double>(), 2000.0);
  }
  EXPECT_EQ(q["drops_full"], 0);
  EXPECT_EQ(q["kernel_dropped"], 0);  // the queue is listed in /proc while bound
  EXPECT_GT(j["cpu_us_per_packet"].get<double>(), 0.0);

  // A second stage on the same queue is refused and says why.
  Delayd second(b_, {"--queue", std::to_string(kQueue) + ":delay_us=1"}, dir_ + "/second.log");
  EXPECT_EQ(second.wait_exit(5s), 1);
  EXPECT_NE(capture("cat " + dir_ + "/second.log").find("bind NFQUEUE 17"), std::string::npos);

  // SIGTERM: a clean exit.
  delayd_->signal(SIGTERM);
  EXPECT_EQ(delayd_->wait_exit(5s), 0) << log();
  skip_if_not_judged();
}

// Issue #13's targets, one-way error of the median: 100 µs..1 ms within 10% + 20 µs, >= 1 ms
// within 1% + 50 µs (1 ms takes the tighter, 60 µs). The stage delays a->b only, so the
// one-way delay is the round trip less the unshaped round trip (the base, measured the same way
// before the rule goes in and after it comes out, pooled). Runs as a lab's stages do
// (--realtime 10). Must hold with a CPU hog on every core (scripts/flake-check --hog).
// Measured here (2 vCPU VM, a busy-loop hog on each core, 4 runs): -4.5..+10 µs at 0.1-1 ms,
// +13..+19 µs at 10 ms. The stage before calibration (tb-delayd --uncalibrated,
// bench-delay-stage --compare, other builds loading the host): +88, +90, +105 and +150 µs.
TEST_F(DelayStageTest, MeetsTheAccuracyTargetsFrom100usTo10ms) {
  constexpr int kProbes = 300;
  constexpr auto kGap = 1000us;
  const std::string link = mk_ + "link=a-b";
  std::vector<double> base = icmp_rtts_us(a_, "198.18.0.1", kProbes, kGap);
  ASSERT_GE(base.size(), size_t{kProbes} * 9 / 10) << "unshaped echo lost";
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", kQueue}, link));
  struct Row {
    int64_t delay_us;
    double tolerance_us;
    double median_us = 0, min_us = 0;
    TimingOutcome timing;  // judged against the base before; the verdict below, the pooled base
  };
  std::vector<Row> rows{{100, 0.10 * 100 + 20},
                        {250, 0.10 * 250 + 20},
                        {1000, 0.01 * 1000 + 50},
                        {10000, 0.01 * 10000 + 50}};
  // The release cost the stage takes out changes as its probes re-measure it (every 200 ms); the
  // largest estimate in force while the readings ran bounds how early a packet may come back.
  // Its stats file (every 50 ms) is read every 10 ms, so no estimate is missed.
  std::atomic<bool> readings_done{false};
  std::atomic<double> release_max_us{0};
  std::thread release_watch([&] {
    for (int n = 0; n < 6000 && !readings_done.load(); ++n) {  // 60 s at most
      std::ifstream f(stats_);
      auto j = nlohmann::json::parse(f, nullptr, false);
      if (!j.is_discarded() && j.contains("release") && j["release"].contains("us"))
        release_max_us = std::max(release_max_us.load(), j["release"]["us"].get<double>());
      std::this_thread::sleep_for(10ms);
    }
  });
  struct Join {
    std::atomic<bool>& done;
    std::thread& t;
    ~Join() {
      done = true;
      if (t.joinable()) t.join();
    }
  } join_release_watch{readings_done, release_watch};
  for (size_t i = 0; i < rows.size(); ++i) {
    write_config(std::to_string(kQueue) + ":delay_us=" + std::to_string(rows[i].delay_us) + "\n");
    if (i == 0) {
      start({"--realtime", "10"});
    } else {
      delayd_->signal(SIGHUP);
      ASSERT_FALSE(wait_stats([&](const nlohmann::json& j) { return j["reloads"] == i; }).is_null())
          << log();
    }
    Row& r = rows[i];
    const double base_before_us = median(base);
    r.timing = judge_timing(
        a_,
        [&](std::string* what) {
          auto rtts = icmp_rtts_us(a_, "198.18.0.1", kProbes, kGap);
          EXPECT_GE(rtts.size(), size_t{kProbes} * 9 / 10) << log();
          if (rtts.empty()) return true;  // failed above; nothing to take again
          r.median_us = median(rtts);
          r.min_us = *std::min_element(rtts.begin(), rtts.end());
          const double error = r.median_us - base_before_us - static_cast<double>(r.delay_us);
          *what = fmt::format(
              "delay {} us: median RTT {:.1f} us, one-way error {:+.1f} us (bound "
              "+-{:.0f}, base before {:.1f} us)",
              r.delay_us, r.median_us, error, r.tolerance_us, base_before_us);
          return std::abs(error) <= r.tolerance_us;
        },
        stage_counter());
    if (r.timing.timing != Timing::kMet) std::cout << r.timing.said;
  }
  // Every packet carried the kernel's stamp, and the stage says what it takes out.
  auto j = wait_stats([](const nlohmann::json& j) { return j["queues"][0]["held"] == 0; });
  readings_done = true;
  release_watch.join();
  ASSERT_FALSE(j.is_null()) << log();
  EXPECT_EQ(j["calibrated"], true);
  EXPECT_EQ(j["queues"][0]["stamped"], j["queues"][0]["packets"]);
  EXPECT_GT(j["queues"][0]["overhead_us"].get<double>(), 0.0);
  // The release cost is the stage's own, from its loopback probes (stage/calibration.h), and
  // plausible: at least 1 µs (one system call through nfnetlink, nf_reinject and a loopback
  // transmit cannot take less) and at most 200 µs (10x the 15-21 µs measured on the reference
  // VM, calibration.h; the stage runs SCHED_FIFO, so a CPU hog does not preempt it).
  EXPECT_EQ(j["release"]["source"], "probe") << j["release"].dump() << log();
  EXPECT_GE(j["release"]["probes"].get<int>(), stage::kStartProbes);
  const double release_us = j["release"]["us"].get<double>();
  const double release_p90_us = j["release"]["p90_us"].get<double>();
  EXPECT_GE(release_us, 1.0);
  EXPECT_LE(release_us, 200.0);
  EXPECT_DOUBLE_EQ(j["queues"][0]["release_us"].get<double>(), release_us);
  std::printf(
      "release cost measured by the stage: median %.1f us, p90 %.1f us (%d probes); the largest "
      "estimate in force during the readings %.1f us\n",
      release_us, release_p90_us, j["release"]["probes"].get<int>(), release_max_us.load());
  delayd_.reset();
  ASSERT_TRUE(stage::remove_queue_rule(b_, {"e0", kQueue}, link));
  auto after = icmp_rtts_us(a_, "198.18.0.1", kProbes, kGap);
  base.insert(base.end(), after.begin(), after.end());
  const double base_us = median(base);
  for (const auto& r : rows) {
    const double d = static_cast<double>(r.delay_us);
    const double error = r.median_us - base_us - d;
    std::printf(
        "delay %6lld us: median RTT %8.1f us, base %5.1f us, one-way error %+6.1f us "
        "(bound +-%.0f), min RTT %8.1f us\n",
        static_cast<long long>(r.delay_us), r.median_us, base_us, error, r.tolerance_us, r.min_us);
    // The newest reading is judged: a miss while the host stalled is not judged (judge_timing).
    if (std::abs(error) > r.tolerance_us && r.timing.timing == Timing::kNotJudged)
      not_judged_ += r.timing.said;
    else
      EXPECT_LE(std::abs(error), r.tolerance_us) << "delay " << r.delay_us << " us\n"
                                                 << r.timing.said;
    // Never earlier than the design allows: the release cost is taken out of the delay, the
    // rest of the round trip only adds. The release taken out varies with the probes: bounded by
    // the largest estimate in force during the readings (a p90 at the end was once 0.3 us short
    // at load 8: min RTT 237.6 us at 250 us, p90 12.0 us), and by the final p90.
    EXPECT_GE(r.min_us, d - std::max({release_p90_us, release_us, release_max_us.load()}))
        << "delay " << r.delay_us << " us";
  }
  skip_if_not_judged();
}

// Jitter (docs/scenario.md): a normal spread around the delay that never reorders. Pings 10 ms
// apart on a 10 ms +- 1 ms direction see the delay and the jitter as written; 100 pings sent at
// once come back in the order they were sent, each waiting for the one before it, so their
// delay is the running maximum of the draws: the median rises (+1.5 to +2.2 ms seen), the
// spread narrows. Judged on the median and the interquartile sigma: a loaded host delays a few
// replies by a scheduler slice.
TEST_F(DelayStageTest, JitterSpreadsTheDelayAndNeverReorders) {
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", kQueue}, mk_ + "link=a-b"));
  write_config(std::to_string(kQueue) + ":delay_us=10000:jitter_us=1000\n");
  // As a lab runs its stages (lab/daemons.cc): at SCHED_OTHER the other builds on a 2-core host
  // made the stage late by whole scheduler slices, and the sparse pings read a median of
  // 10.5-11.2 ms and a sigma of 1.5-2.1 ms for 10 ms +- 1 ms (4 of 4 runs failed).
  start({"--realtime", "10"});
  PingResult sparse, dense;
  // The calibrated stage has no bias to speak of (MeetsTheAccuracyTargetsFrom100usTo10ms: within
  // 20 us at 10 ms); the median of 200 normal draws of sigma 1 ms has a standard error of
  // 1.25 / sqrt(200) = 0.09 ms, so 10 ms + the ~0.05 ms unshaped round trip +- 0.4 ms (4 SE).
  // The rise is judged; the narrowing only shown: ping's burst is 100 sends from one process,
  // and a loaded host that preempts it mid-burst spreads the sends (sigma 0.15-0.67 ms seen,
  // once 2.6 ms with other builds running). Timing judged by judge_timing; order and counts on
  // every reading.
  note_not_judged(judge_timing(
      a_,
      [&](std::string* what) {
        sparse = ping_many(a_, 200, "0.01");
        dense = ping_many(a_, 100, "0.01", "-l 100");
        EXPECT_EQ(sparse.received, 200) << log();
        EXPECT_EQ(dense.received, 100) << log();
        EXPECT_EQ(sparse.out_of_order(), 0);
        EXPECT_EQ(dense.out_of_order(), 0);
        *what = fmt::format(
            "sparse: median {:.3f} ms (10.05 +- 0.4), sigma {:.3f} ms (0.75..2.0); dense: median "
            "{:.3f} ms (above sparse), sigma {:.3f} ms",
            sparse.median_ms(), sparse.sigma_ms(), dense.median_ms(), dense.sigma_ms());
        return std::abs(sparse.median_ms() - 10.05) <= 0.4 && sparse.sigma_ms() >= 0.75 &&
               sparse.sigma_ms() <= 2.0 &&  // 1.16-1.42 seen with other builds running
               dense.median_ms() > sparse.median_ms();
      },
      stage_counter()));
  std::cout << "sparse: median " << sparse.median_ms() << " ms, sigma " << sparse.sigma_ms()
            << " ms; dense: median " << dense.median_ms() << " ms, sigma " << dense.sigma_ms()
            << " ms, " << dense.out_of_order() << " out of order\n";
  skip_if_not_judged();
}

TEST_F(DelayStageTest, KilledStageFailsClosedUntilRestarted) {
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", kQueue}, mk_ + "link=a-b"));
  write_config(std::to_string(kQueue) + ":delay_us=1000\n");
  start();
  EXPECT_EQ(ping_many(a_, 5, "0.05").received, 5) << log();
  delayd_->signal(SIGKILL);
  EXPECT_EQ(delayd_->wait_exit(5s), 128 + SIGKILL);
  // No listener and no --queue-bypass: the kernel drops every packet.
  PingResult dead = ping_many(a_, 5, "0.2");
  EXPECT_EQ(dead.sent, 5);
  EXPECT_EQ(dead.received, 0);
  start({"--sched-fifo", "5"});  // the restart also tries the real-time option
  EXPECT_EQ(sched_getscheduler(delayd_->pid()), SCHED_FIFO);
  EXPECT_EQ(ping_many(a_, 5, "0.05").received, 5) << log();
}

// The release probe's rule (stage/netfilter_rules.h) is the stage's own: it queues only the
// stage's marked loopback probes, is there while the stage runs, goes when it stops, and a
// stage after a killed one replaces the leftover instead of adding a second. With
// --no-release-probe nothing is installed and the constant is used, saying so.
TEST_F(DelayStageTest, ReleaseProbeRuleIsTheStagesOwn) {
  const std::string list = "ip netns exec " + b_ + " iptables -w 5 -t mangle -S POSTROUTING";
  auto probe_rules = [&] {
    std::string out = capture(list);
    int n = 0;
    for (size_t at = out.find("tb-delayd release probe"); at != std::string::npos;
         at = out.find("tb-delayd release probe", at + 1))
      ++n;
    return n;
  };
  write_config(std::to_string(kQueue) + ":delay_us=1000\n");
  start();
  auto j = wait_stats([](const nlohmann::json& j) { return j["release"]["source"] == "probe"; });
  ASSERT_FALSE(j.is_null()) << log();
  EXPECT_EQ(probe_rules(), 1) << capture(list);
  // Unmarked loopback traffic is not queued: 20 pings (40 packets on lo) in ~0.2 s move the
  // probe queue's packet ids (/proc/net/netfilter/nfnetlink_queue id_sequence) by the probes
  // alone, one per 200 ms.
  auto id_sequence = [&] {
    auto q = stage::parse_proc_nfqueue(
        capture("ip netns exec " + b_ + " cat /proc/net/netfilter/nfnetlink_queue"));
    return q.contains(stage::kProbeQueue) ? q.at(stage::kProbeQueue).id_sequence : 0u;
  };
  const uint32_t ids = id_sequence();
  EXPECT_GT(ids, 0u);
  EXPECT_NE(capture("ip netns exec " + b_ + " ping -n -c 20 -i 0.01 -W 1 127.0.0.1 2>&1")
                .find("20 received"),
            std::string::npos);
  EXPECT_LT(id_sequence() - ids, 10u);
  delayd_->signal(SIGKILL);
  EXPECT_EQ(delayd_->wait_exit(5s), 128 + SIGKILL);
  EXPECT_EQ(probe_rules(), 1);  // left behind, matching nothing but a dead stage's probes
  start();
  EXPECT_EQ(probe_rules(), 1) << capture(list);
  // It keeps probing while it runs (one every kProbeIntervalNs).
  const int first = wait_stats([](const nlohmann::json&) { return true; })["release"]["probes"];
  EXPECT_FALSE(wait_stats([&](const nlohmann::json& j) {
                 return j["release"]["probes"].get<int>() > first;
               }).is_null())
      << log();
  delayd_->signal(SIGTERM);
  EXPECT_EQ(delayd_->wait_exit(5s), 0) << log();
  EXPECT_EQ(probe_rules(), 0) << capture(list);
  start({"--no-release-probe"});
  j = wait_stats([](const nlohmann::json&) { return true; });
  EXPECT_EQ(j["release"]["source"], "constant");
  EXPECT_NE(j["release"]["note"].get<std::string>().find("--no-release-probe"), std::string::npos);
  EXPECT_DOUBLE_EQ(j["release"]["us"].get<double>(), stage::kReleaseCostNs / 1e3);
  EXPECT_EQ(probe_rules(), 0);
}

TEST_F(DelayStageTest, LossRuleDropsAboutTheRate) {
  const std::string link = mk_ + "link=a-b";
  ASSERT_TRUE(stage::add_loss_rule(b_, {"e0", stage::loss_ppm(20)}, link));
  PingResult p = ping_many(a_, 500, "0.002");
  ASSERT_EQ(p.sent, 500);
  // Binomial n=500, p=0.2: mean 100 lost, sigma 8.9; accept +-5 sigma.
  int lost = p.sent - p.received;
  EXPECT_GE(lost, 55);
  EXPECT_LE(lost, 145);
}

TEST_F(DelayStageTest, RulesAreListedAndRemovedByMarker) {
  const std::string link = mk_ + "link=a-b";
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", kQueue}, link));
  ASSERT_TRUE(stage::add_loss_rule(b_, {"e0", 150}, link));
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", kQueue + 1}, "someone else"));
  auto rules = stage::list_marked_rules(b_, mk_);
  ASSERT_TRUE(rules) << rules.error().message;
  ASSERT_EQ(rules->size(), 2u);
  EXPECT_EQ((*rules)[0].kind, stage::MarkedRule::Kind::kQueue);
  EXPECT_EQ((*rules)[0].queue, kQueue);
  EXPECT_EQ((*rules)[1].kind, stage::MarkedRule::Kind::kLoss);
  EXPECT_EQ((*rules)[1].ppm, 150u);
  EXPECT_EQ((*rules)[1].ifname, "e0");
  ASSERT_TRUE(stage::remove_marked_rules(b_, mk_));
  EXPECT_TRUE(stage::list_marked_rules(b_, mk_)->empty());
  EXPECT_EQ(stage::list_marked_rules(b_, "someone else")->size(), 1u);  // not ours: kept
  EXPECT_NE(run_quiet({"ip", "netns", "exec", b_, "nft", "list", "table", "inet", "tb_loss"}), 0);
  EXPECT_TRUE(stage::remove_marked_rules(b_, mk_));  // idempotent
  EXPECT_TRUE(stage::remove_queue_rule(b_, {"e0", kQueue}, link));
  // Failures carry the tool's own words.
  auto bad = stage::add_queue_rule(b_, {"nosuchif-but-long-name", kQueue}, link);
  EXPECT_FALSE(bad);
  auto gone = stage::add_loss_rule(b_, {"nosuchif", 100}, link);
  ASSERT_FALSE(gone);
  EXPECT_NE(gone.error().message.find("nft exit 1"), std::string::npos) << gone.error().message;
  EXPECT_NE(gone.error().message.find("in netns " + b_), std::string::npos);
}

// `up`'s way: every rule of a namespace in one transaction per tool, namespaces in parallel,
// the release probe's rule with them; a stage told so uses that rule and leaves it when it
// stops. One namespace's failure is named (the other's rules are in, and go by marker).
TEST_F(DelayStageTest, NamespacesRulesGoInOneTransactionEachAndTheStageUsesTheProbeRule) {
  const std::string link = mk_ + "link=a-b";
  std::vector<stage::NetnsRules> all{
      {b_, {{{"e0", kQueue}, link + " queue"}}, {{{"e0", 150}, link + " loss"}}, true},
      {a_, {{{"e0", kQueue, true}, link + " queue"}}, {{{"e0", 200, true}, link + " loss"}}}};
  ASSERT_TRUE(stage::add_rules(all, 2));
  for (const auto& ns : {a_, b_}) {
    auto rules = stage::list_marked_rules(ns, mk_);
    ASSERT_TRUE(rules) << rules.error().message;
    EXPECT_EQ(rules->size(), 2u) << ns;
  }
  const std::string list = "ip netns exec " + b_ + " iptables -w 5 -t mangle -S POSTROUTING";
  EXPECT_NE(capture(list).find("tb-delayd release probe"), std::string::npos) << capture(list);
  write_config(std::to_string(kQueue) + ":delay_us=1000\n");
  start({"--probe-rule-installed"});
  auto j = wait_stats([](const nlohmann::json& j) { return j["release"]["source"] == "probe"; });
  ASSERT_FALSE(j.is_null()) << log();
  delayd_->signal(SIGTERM);
  EXPECT_EQ(delayd_->wait_exit(5s), 0) << log();
  EXPECT_NE(capture(list).find("tb-delayd release probe"), std::string::npos) << "not the stage's";
  for (const auto& ns : {a_, b_}) ASSERT_TRUE(stage::remove_marked_rules(ns, mk_));
  // A loss rule on an interface that is not there: that namespace's nft refuses, by name.
  std::vector<stage::NetnsRules> bad{{a_, {}, {{{"e0", 10}, link + " loss"}}},
                                     {b_, {}, {{{"nosuchif", 10}, link + " loss"}}}};
  auto r = stage::add_rules(bad, 2);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("in netns " + b_), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("nft exit 1"), std::string::npos) << r.error().message;
  EXPECT_EQ(stage::list_marked_rules(a_, mk_)->size(), 1u);
  ASSERT_TRUE(stage::remove_marked_rules(a_, mk_));
  EXPECT_TRUE(stage::list_marked_rules(b_, mk_)->empty());
}

// TCP small queues behind a delay held on the sender's egress (the receiving port is a bridge
// port, plan/shaping.h): the skb keeps its socket through the hold (no orphan before IP input),
// so a local TCP sender is throttled once the hold exceeds about 1 ms of its pacing rate. The
// lab's ops for such a link (plan::add_shaping, tbf backend: the qdisc, the stage rule, the
// stage, and the per-namespace TSQ sysctls) are applied to a sender and a bridge, at 1 Gbit/s
// and 10 x the vpc preset's 250 us (2.5 ms), and a cubic flow must reach its ideal goodput.
// Before the TSQ sysctls it reached 674-920 of 956 Mbit/s on the reference host.
// One TCP transfer of `bytes` (a known pattern) from namespace `from` to 198.18.0.1:5311 in
// `to`, bounded at 20 s; the bytes the receiver got intact, -1 if a socket could not be made.
int64_t tcp_transfer(const std::string& from, const std::string& to, size_t bytes) {
  auto fa = netlink::open_named_netns(from), fb = netlink::open_named_netns(to);
  if (!fa || !fb) return -1;
  UniqueFd listener;
  {
    auto in = netlink::ScopedNetns::enter(fb->get());
    if (!in) return -1;
    listener.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  }
  const int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in at{};
  at.sin_family = AF_INET;
  at.sin_port = htons(5311);
  inet_pton(AF_INET, "198.18.0.1", &at.sin_addr);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) != 0 ||
      ::listen(listener.get(), 1) != 0)
    return -1;
  std::atomic<int64_t> intact{0};
  std::thread receiver([&] {
    pollfd p{listener.get(), POLLIN, 0};
    if (::poll(&p, 1, 5000) <= 0) return;
    UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    std::vector<uint8_t> buf(1 << 16);
    uint64_t got = 0;
    bool ok = true;
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < end) {
      pollfd q{c.get(), POLLIN, 0};
      if (::poll(&q, 1, 1000) <= 0) continue;
      const ssize_t n = ::read(c.get(), buf.data(), buf.size());
      if (n <= 0) break;
      for (ssize_t i = 0; i < n; ++i) ok = ok && buf[i] == static_cast<uint8_t>((got + i) * 131);
      got += static_cast<uint64_t>(n);
    }
    intact = ok ? static_cast<int64_t>(got) : -2;
  });
  UniqueFd s;
  {
    auto in = netlink::ScopedNetns::enter(fa->get());
    if (in) s.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  }
  if (s && ::connect(s.get(), reinterpret_cast<sockaddr*>(&at), sizeof at) == 0) {
    std::vector<uint8_t> data(bytes);
    for (size_t i = 0; i < bytes; ++i) data[i] = static_cast<uint8_t>(i * 131);
    size_t sent = 0;
    const auto end = std::chrono::steady_clock::now() + 20s;
    while (sent < bytes && std::chrono::steady_clock::now() < end) {
      pollfd q{s.get(), POLLOUT, 0};
      if (::poll(&q, 1, 1000) <= 0) continue;
      const ssize_t n = ::send(s.get(), data.data() + sent, bytes - sent, MSG_DONTWAIT);
      if (n > 0) sent += static_cast<size_t>(n);
    }
  }
  s.reset();  // EOF to the receiver
  receiver.join();
  return intact;
}

// ECN marking in the stage (docs/design-congestion.md section 4): a queue bound with mark=SLOT
// copies whole packets without NFQA_CFG_F_GSO, and with the slot's probability at 1 marks every
// ECT packet CE, rewriting TOS and the IPv4 header checksum in its verdict. The receiver gets the
// data intact with no checksum error (the kernel finished the L4 checksum before the copy), the
// sender sees the CE echoed (TcpExt TCPDeliveredCE), Not-ECT packets (ICMP) pass unmarked, and
// at probability 0 nothing is marked.
TEST_F(DelayStageTest, MarksEctPacketsCeWithValidChecksums) {
  namespace ct = congestion_traffic;
  for (const auto& n : {a_, b_})
    ASSERT_TRUE(kernel_->submit(plan::SetSysctl{n, "net/ipv4/tcp_ecn", "1"}));
  ASSERT_TRUE(kernel_->sync());
  const std::string table_path = dir_ + "/marks";
  auto table = stage::MarkTable::open(table_path);
  ASSERT_TRUE(table) << table.error().message;
  table->set_probability(3, stage::kMarkAlways);
  ASSERT_TRUE(stage::add_queue_rule(b_, {"e0", kQueue}, mk_ + "link=a-b"));
  write_config(std::to_string(kQueue) + ":delay_us=200:mark=3\n");
  start({"--mark-table", table_path, "--realtime", "10"});
  auto fa = netlink::open_named_netns(a_), fb = netlink::open_named_netns(b_);
  ASSERT_TRUE(fa && fb);
  const int64_t csum0 = ct::proc_counter(fb->get(), "snmp", "Tcp", "InCsumErrors");
  const int64_t ce0 = ct::proc_counter(fa->get(), "netstat", "TcpExt", "TCPDeliveredCE");
  ASSERT_GE(csum0, 0);
  ASSERT_GE(ce0, 0) << "no TcpExt TCPDeliveredCE on this kernel";
  constexpr size_t kBytes = 8u << 20;
  EXPECT_EQ(tcp_transfer(a_, b_, kBytes), static_cast<int64_t>(kBytes)) << log();
  const int64_t csum = ct::proc_counter(fb->get(), "snmp", "Tcp", "InCsumErrors") - csum0;
  const int64_t ce = ct::proc_counter(fa->get(), "netstat", "TcpExt", "TCPDeliveredCE") - ce0;
  const PingResult ping = ping_many(a_, 5, "0.05");  // ICMP: Not-ECT
  EXPECT_EQ(ping.received, 5);
  auto j = wait_stats([&](const nlohmann::json& j) {
    return !j["queues"].empty() && j["queues"][0].value("not_ect", 0) >= 5 &&
           j["queues"][0]["held"] == 0;
  });
  ASSERT_FALSE(j.is_null()) << log();
  const auto& q = j["queues"][0];
  std::cout << fmt::format(
      "[ecn] {} MB a->b through the marking queue at p = 1: {} ECT packets, {} marked CE, {} "
      "Not-ECT; receiver TcpInCsumErrors +{}; sender TCPDeliveredCE +{}\n",
      kBytes >> 20, q["ect"].get<uint64_t>(), q["ce_marked"].get<uint64_t>(),
      q["not_ect"].get<uint64_t>(), csum, ce);
  EXPECT_EQ(q["mark"], 3);
  EXPECT_GT(q["ect"].get<uint64_t>(), kBytes / 65536);  // segments, not GSO super-packets
  EXPECT_EQ(q["ce_marked"], q["ect"]);                  // p = 1 marks every ECT packet
  EXPECT_GE(q["not_ect"].get<uint64_t>(), 5u);          // the echo requests, unmarked
  EXPECT_EQ(csum, 0) << "CE rewrite broke a checksum";
  EXPECT_GT(ce, 0) << "the receiver echoed no CE";
  EXPECT_FALSE(j.contains("mark_table_error")) << j.dump();
  // The table counts what the stage counted (the agent reports it as the port's CE marks).
  const auto counts = table->counts(3);
  EXPECT_EQ(counts.ce, q["ce_marked"].get<uint64_t>());
  EXPECT_EQ(counts.ect, q["ect"].get<uint64_t>());

  // Probability 0: the next transfer goes through unmarked.
  table->set_probability(3, 0);
  const uint64_t marked = counts.ce;
  EXPECT_EQ(tcp_transfer(a_, b_, 1u << 20), 1 << 20) << log();
  EXPECT_EQ(table->counts(3).ce, marked);
  EXPECT_GT(table->counts(3).ect, counts.ect);
  EXPECT_EQ(ct::proc_counter(fb->get(), "snmp", "Tcp", "InCsumErrors") - csum0, 0);
  delayd_->signal(SIGTERM);
  EXPECT_EQ(delayd_->wait_exit(5s), 0) << log();
}

class EgressHoldTest : public NetnsTest {};

// iperf3's receiver goodput in Mbit/s for a `seconds` TCP run from `from` to `to` (NaN if none).
double iperf_mbit(const std::string& from, const std::string& server_ns, const std::string& to,
                  const std::string& cc, int seconds) {
  pid_t server = fork();
  if (server == 0) {
    if (FILE* null = std::fopen("/dev/null", "w")) {
      dup2(fileno(null), 1);
      dup2(fileno(null), 2);
    }
    execlp("timeout", "timeout", "30", "ip", "netns", "exec", server_ns.c_str(), "iperf3", "-s",
           "-1", "-B", to.c_str(), "-p", "5302", static_cast<char*>(nullptr));
    _exit(127);
  }
  std::string out;
  for (int attempt = 0; attempt < 20; ++attempt) {  // until the server listens
    std::this_thread::sleep_for(200ms);
    out = capture("timeout 20 ip netns exec " + from + " iperf3 -c " + to + " -p 5302 -J -O 1 -t " +
                  std::to_string(seconds) + " -C " + cc + " 2>&1");
    if (out.find("sum_received") != std::string::npos) break;
  }
  kill(server, SIGTERM);
  waitpid(server, nullptr, 0);
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded() || !j.contains("end")) return std::nan("");
  return j["end"]["sum_received"]["bits_per_second"].get<double>() / 1e6;
}

TEST_F(EgressHoldTest, ALocalTcpSenderBehindAnEgressHoldReachesTheRate) {
  if (run_quiet({"iperf3", "--version"}) != 0) GTEST_SKIP() << "iperf3 not installed";
  const std::string a = ns("tsqs"), b = ns("tsqv");
  const std::string lab = "t" + std::to_string(getpid()) + "tsq";
  const std::string mk = plan::owner_marker(lab) + " ";
  plan::Plan p;
  p.lab = lab;
  p.topo.nodes = {plan::Node{"s0", a, plan::NodeKind::kServer, "dc", 0, -1, {}},
                  plan::Node{"vpc", b, plan::NodeKind::kVpc, "dc", -1, -1, {}}};
  plan::Link l;
  l.a = {"s0", "fe", std::nullopt, false};
  l.b = {"vpc", "p0", std::nullopt, true};
  l.profile = "vpc";
  l.emulated.rate = Rate{1e9};
  l.emulated.delay = Duration{2'500'000};
  p.topo.links.push_back(l);
  ASSERT_TRUE(plan::add_shaping(p, "tbf"));

  for (const auto& op : std::vector<plan::Op>{
           plan::CreateNetns{a, "s0", mk + "node=s0"}, plan::CreateNetns{b, "vpc", mk + "node=vpc"},
           plan::CreateBridge{b, "br", mk + "bridge", 1500},
           plan::CreateVeth{{a, "fe", mk + "s0-vpc", ""}, {b, "p0", mk + "vpc-s0", "br"}, 1500},
           plan::AddAddr{a, "fe", *parse_prefix("198.18.0.2/24")},
           plan::AddAddr{b, "br", *parse_prefix("198.18.0.1/24")}})
    ASSERT_TRUE(kernel_->submit(op)) << plan::to_text(op);
  std::vector<std::unique_ptr<Delayd>> stages;
  const std::string dir = "/tmp/tb-t" + std::to_string(getpid()) + "-tsq";
  std::filesystem::create_directories(dir);
  for (const auto& op : p.ops) {
    if (const auto* d = std::get_if<plan::StartDaemon>(&op)) {
      const auto* st = std::get_if<plan::Stage>(&d->daemon);
      ASSERT_NE(st, nullptr);
      std::vector<std::string> args{"--duration-s", "60"};
      for (const auto& q : st->queues)
        args.insert(args.end(), {"--queue", stage::to_arg({q.queue, q.delay, q.jitter, q.maxlen})});
      stages.push_back(std::make_unique<Delayd>(st->netns, args, dir + "/delayd.log"));
      continue;
    }
    ASSERT_TRUE(kernel_->submit(op)) << plan::to_text(op);
  }
  ASSERT_TRUE(kernel_->sync());
  ASSERT_EQ(stages.size(), 1u);
  ASSERT_EQ(stages[0]->wait_exit(300ms), -1) << capture("cat " + dir + "/delayd.log");
  // The bridge forwards once its port has left the learning state; the hold is 2.5 ms each way
  // only on a->b (b->a is a plain ingress, undelayed here).
  for (int i = 0; i < 50 && !ping(a, "198.18.0.1"); ++i) std::this_thread::sleep_for(100ms);

  // 1448 bytes of TCP payload per 1514-byte frame counted by tbf (docs/scenario.md).
  const double ideal = 1000.0 * 1448 / 1514;
  std::vector<double> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(iperf_mbit(a, b, "198.18.0.1", "cubic", 4));
  std::sort(runs.begin(), runs.end());
  std::cout << "cubic behind a 2.5 ms egress hold: " << runs[0] << " " << runs[1] << " " << runs[2]
            << " Mbit/s, ideal " << ideal << "\n";
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  // The best of 3: a loaded host can take CPU from any one run (274 and 765 of 3 runs at load
  // 13-17, the third 955), but TSQ throttles every run, so without the sysctls not even the best
  // one comes near the rate. Seen with two other builds running: 950-956 with the sysctls,
  // 875-915 without (97% = 928).
  EXPECT_GE(runs[2], 0.97 * ideal)
      << "runs " << runs[0] << " " << runs[1] << " " << runs[2] << " Mbit/s, ideal " << ideal;
  EXPECT_LE(runs[2], 1.02 * ideal);
}

}  // namespace
}  // namespace tb::testing
