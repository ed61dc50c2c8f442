// DelayStage (stage.h): binding, the ppoll loop and its timing, reconfiguration and the clean
// close.
#include "stage/stage.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/clock.h"
#include "core/safe_file.h"
#include "stage/netfilter_rules.h"

namespace tb::stage {
namespace {

// Datagrams read per wake-up before the loop goes round again (signals, stats). Due packets do
// not wait for it: the drain releases them between datagrams.
constexpr int kDrainBound = 1024;
// Pending verdict bytes that trigger a send mid-drain (one verdict message is 32 bytes).
constexpr size_t kFlushBytes = 32 * 1024;
// Longest sleep with nothing to do, so --duration and a broken clock cannot stall us.
constexpr int64_t kMaxSleepNs = 1'000'000'000;
constexpr Duration kAckTimeout{2'000'000'000};
// Startup probe of the timer (probe_timer): this many sleeps of this length.
constexpr int kProbeSleeps = 16;
constexpr int64_t kProbeSleepNs = 200'000;
// A release probe is sent only when no held packet is due within this: the probe's send and its
// verdict each take about one release (~10-20 µs), which must not hold back a due packet.
constexpr int64_t kProbeHeadroomNs = 100'000;
// A probe not back within this is lost (its rule or queue gone, or the host stalled).
constexpr int64_t kProbeLostNs = 1'000'000'000;

int64_t clock_ns(clockid_t clock) {
  timespec t{};
  clock_gettime(clock, &t);
  return static_cast<int64_t>(t.tv_sec) * 1'000'000'000 + t.tv_nsec;
}
void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

void log(const std::string& line) {
  std::fprintf(stderr, "tb-delayd: %s\n", line.c_str());
}

std::string queue_name(uint16_t num) {
  return "NFQUEUE " + std::to_string(num);
}

}  // namespace

DelayStage::DelayStage(StageOptions options, NfqSocket socket)
    : options_(std::move(options)),
      socket_(std::move(socket)),
      timer_(options_.calibrate ? WakeTimerConfig{} : WakeTimerConfig{.max_advance_ns = 0}) {
  start_ns_ = monotonic_ns();
  last_empty_ns_ = start_ns_;
  seed_ = static_cast<uint64_t>(start_ns_) ^ (static_cast<uint64_t>(::getpid()) << 32);
  mark_rng_.seed(static_cast<uint32_t>(seed_ ^ (seed_ >> 32)));
  process_.pid = ::getpid();
  process_.scheduling = options_.scheduling;
}

Result<DelayStage> DelayStage::open(StageOptions options) {
  auto socket = NfqSocket::open(options.rcvbuf_bytes);
  if (!socket) return std::unexpected(socket.error());
  DelayStage stage(std::move(options), std::move(*socket));
  if (stage.options_.calibrate) {
    stage.stamp_socket_ = UniqueFd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    int one = 1;
    if (!stage.stamp_socket_ ||
        ::setsockopt(stage.stamp_socket_.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0)
      log(std::string("no kernel receive stamps (SO_TIMESTAMPNS: ") + std::strerror(errno) +
          "): packets count from when the stage reads them");
    stage.probe_timer();
    if (stage.options_.release_probe)
      stage.setup_probe();
    else
      stage.release_note_ = "release probe off (--no-release-probe)";
  }
  auto wanted = stage.wanted_queues(&stage.process_.generation);
  Status s = wanted ? stage.apply(*wanted) : Status(std::unexpected(wanted.error()));
  if (!s) {  // the stats say why, for the generation that was asked for; then we exit
    stage.process_.reload_error = s.error().message;
    stage.close_probe();  // its rule goes with the stage that made it
    stage.write_stats();
    return std::unexpected(s.error());
  }
  stage.write_stats();
  return stage;
}

Result<std::vector<QueueSpec>> DelayStage::wanted_queues(uint64_t* generation) const {
  std::vector<QueueSpec> wanted = options_.queues;
  if (options_.config_path.empty()) return wanted;
  std::ifstream in(options_.config_path);
  if (!in) return sys_fail("read config " + options_.config_path);
  std::stringstream text;
  text << in.rdbuf();
  if (generation) *generation = config_generation(text.str());
  auto file = parse_queue_config(text.str());
  if (!file) return std::unexpected(with_context(file.error(), options_.config_path));
  for (const auto& spec : *file) {
    if (std::ranges::any_of(wanted, [&](const QueueSpec& s) { return s.num == spec.num; }))
      return bad_input(options_.config_path + ": queue " + std::to_string(spec.num) +
                       " is also given with --queue");
    wanted.push_back(spec);
  }
  return wanted;
}

Status DelayStage::apply(const std::vector<QueueSpec>& wanted) {
  Status first;
  auto keep = [&](const Status& s) {
    if (!s && first) first = s;
  };
  auto other = [this](const NlEvent& e) { on_event(e); };
  // Queues no longer wanted: hand back what they hold, then unbind.
  for (auto it = lines_.begin(); it != lines_.end();) {
    uint16_t num = it->first;
    if (std::ranges::any_of(wanted, [&](const QueueSpec& s) { return s.num == num; })) {
      ++it;
      continue;
    }
    if (auto last = it->second.release_all())
      append_verdict_batch(verdicts_, num, *last, NF_ACCEPT);
    marking_.erase(num);  // its marked packets go unmarked with the rest
    keep(flush_verdicts());
    NlBuffer msg;
    uint32_t seq = socket_.next_seq();
    append_unbind(msg, num, seq);
    keep(socket_.request(msg, seq, "unbind " + queue_name(num), kAckTimeout, other));
    it = lines_.erase(it);
  }
  for (const auto& spec : wanted) {
    NlBuffer msg;
    uint32_t seq = socket_.next_seq();
    auto it = lines_.find(spec.num);
    if (it != lines_.end()) {
      bool maxlen_changed = it->second.spec().maxlen != spec.maxlen;
      if (spec.mark != it->second.spec().mark)
        keep(bad_input(queue_name(spec.num) + ": its mark slot is set when it is bound (" +
                       std::to_string(it->second.spec().mark) + "), not changed by a reload"));
      QueueSpec kept = spec;
      kept.mark = it->second.spec().mark;
      it->second.reconfigure(kept);
      if (!maxlen_changed) continue;
      append_set_maxlen(msg, spec.num, spec.maxlen, seq);
      keep(socket_.request(msg, seq, "set maxlen of " + queue_name(spec.num), kAckTimeout, other));
      continue;
    }
    if (spec.num == kProbeQueue && probe_bound_) {
      keep(bad_input(queue_name(spec.num) + " is the stage's release probe's (calibration.h)"));
      continue;
    }
    // In the map before the bind: packets may arrive before its ACK does.
    auto [line, added] = lines_.emplace(spec.num, DelayLine(spec, seed_++, options_.calibrate));
    line->second.set_release_ns(release_.release_ns());
    if (spec.mark >= 0) {
      marking_[spec.num] = MarkQueue{spec.mark, {}, {spec.mark, 0, 0, 0}};
      if (!mark_table())
        log("marking queue " + std::to_string(spec.num) + ": " + mark_table_error_);
    }
    append_bind(msg, spec.num, spec.maxlen, options_.fail_open, seq, spec.mark >= 0);
    auto bound = socket_.request(msg, seq, "bind " + queue_name(spec.num), kAckTimeout, other);
    // nfqnl_recv_config answers EPERM both to a queue bound by another socket and to a caller
    // without CAP_NET_ADMIN (net/netfilter/nfnetlink_queue.c).
    if (!bound && bound.error().sys_errno == EPERM)
      bound.error().message += " (another process serves this queue, or we lack CAP_NET_ADMIN)";
    if (!bound) lines_.erase(spec.num), marking_.erase(spec.num);
    keep(bound);
  }
  return first;
}

void DelayStage::reload() {
  auto wanted = wanted_queues(&process_.generation);
  Status s = wanted ? apply(*wanted) : Status(std::unexpected(wanted.error()));
  if (!s) {
    process_.reload_error = s.error().message;
    log("reload of generation " + std::to_string(process_.generation) +
        " failed (in part or whole): " + s.error().message);
  } else {
    process_.reload_error.clear();
    ++process_.reloads;
    std::string summary;
    for (const auto& [num, line] : lines_) summary += " " + to_arg(line.spec());
    log("reloaded generation " + std::to_string(process_.generation) + ":" + summary);
  }
  write_stats();  // the writer of the config waits for this generation's result
}

void DelayStage::on_event(const NlEvent& event) {
  if (event.kind != NlEvent::Kind::kPacket) return;
  const PacketNotice& p = event.packet;
  if (p.queue == kProbeQueue && probe_bound_) {
    on_probe_notice(p);
    return;
  }
  // The packet's age is the real clock less its kernel stamp, and its arrival the monotonic clock
  // less that age: the real clock read first, so time lost between the two reads (an interrupt,
  // a higher-priority thread, this VM's vCPU descheduled) makes the deadline late, never early.
  // Read the other way round, a gap made it early by as much: the likely cause of a 250 µs
  // reading whose minimum RTT was 49 µs short (DelayStageTest, in the suite, 2026-12-05).
  const int64_t now_real = clock_ns(CLOCK_REALTIME);
  const int64_t now = monotonic_ns();
  auto it = lines_.find(p.queue);
  const UnstampedWait unstamped{timer_.wake_latency(), now - last_empty_ns_};
  // Not ours (a queue being torn down) or no room: drop, as the kernel would with no listener.
  if (it == lines_.end() || !it->second.admit(p.id, p.len, now, p.stamp_ns, now_real, unstamped)) {
    append_verdict(verdicts_, p.queue, p.id, NF_DROP);
    return;
  }
  if (auto m = marking_.find(p.queue); m != marking_.end()) mark(m->second, p);
}

MarkTable* DelayStage::mark_table() {
  if (mark_table_) return &*mark_table_;
  if (options_.mark_table.empty()) {
    mark_table_error_ = "no mark table given (--mark-table): ECT packets pass unmarked";
    return nullptr;
  }
  const int64_t now = monotonic_ns();
  if (now < mark_table_retry_ns_) return nullptr;
  mark_table_retry_ns_ = now + 1'000'000'000;
  auto t = MarkTable::open(options_.mark_table);
  if (!t) {
    mark_table_error_ = t.error().message + ": ECT packets pass unmarked until it opens";
    return nullptr;
  }
  mark_table_error_.clear();
  mark_table_.emplace(std::move(*t));
  return &*mark_table_;
}

void DelayStage::mark(MarkQueue& mq, const PacketNotice& p) {
  const bool ect = is_ect(p.payload);
  bool marked = false;
  MarkTable* table = mark_table();
  if (ect && table) {
    const uint32_t prob = table->probability(mq.slot);
    if (prob != 0 && marks(prob, static_cast<uint32_t>(mark_rng_()))) {
      Marked m{p.id, std::vector<uint8_t>(p.payload.begin(), p.payload.end())};
      marked = set_ce(m.bytes);
      if (marked) mq.held.push_back(std::move(m));
    }
  }
  if (ect) {
    ++mq.counts.ect;
    mq.counts.ce += marked;
  } else {
    ++mq.counts.not_ect;
  }
  if (table) table->count(mq.slot, ect, marked);
}

void DelayStage::release_marked(uint16_t num, MarkQueue& mq, uint32_t first, uint32_t last) {
  // Ids of one queue rise by one per packet (wrapping at 2^32): compare by difference.
  auto upto = [](uint32_t a, uint32_t b) { return static_cast<int32_t>(a - b) <= 0; };
  uint32_t start = first;
  bool open = true;  // packets from `start` up to `last` still want a verdict
  while (!mq.held.empty() && upto(mq.held.front().id, last)) {
    Marked& m = mq.held.front();
    if (upto(start, m.id - 1) && m.id != start)
      append_verdict_batch(verdicts_, num, m.id - 1, NF_ACCEPT);
    append_verdict_payload(verdicts_, num, m.id, NF_ACCEPT, m.bytes);
    // Whole packets add up: one send stays well below the socket's send buffer (a netlink
    // message larger than it is refused whole), in order.
    if (verdicts_.size() > kFlushBytes)
      if (auto s = flush_verdicts(); !s) log("marked verdicts: " + s.error().message);
    open = m.id != last;
    start = m.id + 1;
    mq.held.pop_front();
  }
  if (open) append_verdict_batch(verdicts_, num, last, NF_ACCEPT);
}

void DelayStage::release_due() {
  int64_t now = monotonic_ns();
  for (auto& [num, line] : lines_) {
    auto m = marking_.find(num);
    if (m == marking_.end() || m->second.held.empty()) {
      if (auto last = line.release_due(now)) append_verdict_batch(verdicts_, num, *last, NF_ACCEPT);
      continue;
    }
    const auto first = line.front_id();
    if (auto last = line.release_due(now)) release_marked(num, m->second, *first, *last);
  }
}

std::optional<int64_t> DelayStage::next_deadline() const {
  std::optional<int64_t> first;
  for (const auto& [num, line] : lines_)
    if (auto d = line.next_deadline(); d && (!first || *d < *first)) first = d;
  return first;
}

Status DelayStage::release_and_flush() {
  release_due();
  return flush_verdicts();
}

void DelayStage::spin_until(int64_t deadline) {
  const int64_t start = monotonic_ns();
  // Never longer than the timer's largest advance, whatever the caller passed.
  deadline = std::min(deadline, start + WakeTimerConfig{}.max_advance_ns);
  int64_t now = start;
  while (now < deadline) {
    cpu_relax();
    now = monotonic_ns();
  }
  timer_.record_spin(now, now - start);
}

void DelayStage::probe_timer() {
  for (int i = 0; i < kProbeSleeps; ++i) {
    const int64_t want = monotonic_ns() + kProbeSleepNs;
    timespec t{0, kProbeSleepNs};
    ::ppoll(nullptr, 0, &t, nullptr);
    timer_.record_oversleep(monotonic_ns() - want);
  }
}

void DelayStage::setup_probe() {
  auto give_up = [this](const std::string& why) {
    release_note_ = why + "; release cost " + std::to_string(kReleaseCostNs / 1000) +
                    " us (calibration.h kReleaseCostNs)";
    log("no release probe: " + release_note_);
    close_probe();
  };
  probe_socket_.reset(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  const int one = 1;
  const uint32_t mark = kProbeMark;
  sockaddr_in self{};
  self.sin_family = AF_INET;
  self.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof self;
  if (!probe_socket_ ||
      ::setsockopt(probe_socket_.get(), SOL_SOCKET, SO_MARK, &mark, sizeof mark) != 0 ||
      ::setsockopt(probe_socket_.get(), SOL_SOCKET, SO_TIMESTAMPNS, &one, sizeof one) != 0 ||
      ::bind(probe_socket_.get(), reinterpret_cast<sockaddr*>(&self), sizeof self) != 0 ||
      ::getsockname(probe_socket_.get(), reinterpret_cast<sockaddr*>(&self), &len) != 0 ||
      ::connect(probe_socket_.get(), reinterpret_cast<sockaddr*>(&self), sizeof self) != 0)
    return give_up(std::string("loopback probe socket: ") + std::strerror(errno));
  NlBuffer msg;
  const uint32_t seq = socket_.next_seq();
  append_bind(msg, kProbeQueue, 64, false, seq);
  auto bound = socket_.request(msg, seq, "bind " + queue_name(kProbeQueue) + " (release probe)",
                               kAckTimeout, [this](const NlEvent& e) { on_event(e); });
  if (!bound) return give_up(bound.error().message);
  probe_bound_ = true;
  if (!options_.probe_rule_installed) {  // else it is there already, and stays when we stop
    if (auto r = add_probe_rule("", kProbeQueue, kProbeMark, kProbeMarker); !r)
      return give_up(r.error().message);
    probe_rule_ours_ = true;
  }
  probe_rule_ = true;
  // The first probes, one at a time, before any queue is served: the first packets already
  // get the measured cost.
  for (int i = 0; i < kStartProbes; ++i) {
    maybe_probe(monotonic_ns(), true);
    const int64_t until = monotonic_ns() + 100'000'000;
    while (probe_in_flight_ && monotonic_ns() < until) {
      pollfd fds[2] = {{socket_.fd(), POLLIN, 0}, {probe_socket_.get(), POLLIN, 0}};
      if (::poll(fds, 2, 10) <= 0) continue;
      if (fds[0].revents & POLLIN) {
        auto data = socket_.receive_nowait();
        if (!data) return give_up(data.error().message);
        std::vector<NlEvent> events;
        parse_events(*data, events);
        for (const auto& e : events) on_event(e);
      }
      if (fds[1].revents & POLLIN) read_probe();
    }
    if (probe_in_flight_) {
      release_.lose();
      probe_in_flight_ = false;
    }
  }
  if (!release_.measured()) return give_up("no release probe came back at start");
}

void DelayStage::maybe_probe(int64_t now, bool force) {
  if (!probe_rule_) return;
  if (probe_in_flight_) {
    if (now - probe_sent_ns_ < kProbeLostNs) return;
    release_.lose();
    probe_in_flight_ = false;
  }
  if (!force) {
    if (now < next_probe_ns_) return;
    if (auto due = next_deadline(); due && *due - now < kProbeHeadroomNs) return;
  }
  const uint64_t seq = ++probe_seq_;
  probe_in_flight_ = true;
  probe_sent_ns_ = now;
  probe_verdict_real_ = 0;
  next_probe_ns_ = now + kProbeIntervalNs;
  // Sending runs the packet through POSTROUTING into kProbeQueue before send returns.
  if (::send(probe_socket_.get(), &seq, sizeof seq, MSG_DONTWAIT) !=
      static_cast<ssize_t>(sizeof seq))
    probe_in_flight_ = false, release_.lose();
}

void DelayStage::on_probe_notice(const PacketNotice& p) {
  // Released packets first (their verdicts are due), so the probe's send is the probe's alone.
  if (auto s = flush_verdicts(); !s) log("verdicts: " + s.error().message);
  NlBuffer verdict;
  append_verdict(verdict, kProbeQueue, p.id, NF_ACCEPT);
  const int64_t sent = clock_ns(CLOCK_REALTIME);
  if (auto s = socket_.send(verdict); !s) {
    log("release probe verdict: " + s.error().message);
    return;
  }
  if (probe_in_flight_ && probe_verdict_real_ == 0) probe_verdict_real_ = sent;
}

void DelayStage::read_probe() {
  if (!probe_socket_) return;
  for (int i = 0; i < 64; ++i) {  // bounded: stale probes are read and dropped too
    uint64_t seq = 0;
    iovec iov{&seq, sizeof seq};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(timespec))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(probe_socket_.get(), &msg, MSG_DONTWAIT);
    if (n < 0) return;  // EAGAIN: nothing more
    int64_t stamp = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_TIMESTAMPNS) {
        timespec ts{};
        std::memcpy(&ts, CMSG_DATA(c), sizeof ts);
        stamp = static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
      }
    if (n != static_cast<ssize_t>(sizeof seq) || seq != probe_seq_ || !probe_in_flight_ ||
        probe_verdict_real_ == 0)
      continue;
    probe_in_flight_ = false;
    if (release_.add(probe_verdict_real_, stamp))
      for (auto& [num, line] : lines_) line.set_release_ns(release_.release_ns());
  }
}

void DelayStage::close_probe() {
  if (probe_rule_ours_) {
    if (auto s = remove_probe_rule("", kProbeQueue, kProbeMark, kProbeMarker); !s)
      log(s.error().message);
    probe_rule_ours_ = false;
  }
  probe_rule_ = false;
  if (probe_bound_) {
    NlBuffer msg;
    const uint32_t seq = socket_.next_seq();
    append_unbind(msg, kProbeQueue, seq);
    auto accept = [this](const NlEvent& e) {
      if (e.kind == NlEvent::Kind::kPacket)
        append_verdict(verdicts_, e.packet.queue, e.packet.id, NF_ACCEPT);
    };
    if (auto s =
            socket_.request(msg, seq, "unbind " + queue_name(kProbeQueue), kAckTimeout, accept);
        !s)
      log(s.error().message);
    (void)flush_verdicts();
    probe_bound_ = false;
  }
  probe_socket_.reset();
  probe_in_flight_ = false;
}

Status DelayStage::flush_verdicts() {
  Status s = socket_.send(verdicts_);
  verdicts_.clear();
  return s;
}

void DelayStage::write_stats() {
  if (options_.stats_path.empty()) return;
  process_.uptime_s = static_cast<double>(monotonic_ns() - start_ns_) / 1e9;
  process_cpu(process_);
  process_.calibrated = options_.calibrate;
  process_.timer = timer_stats(timer_);
  process_.release = release_stats(release_, release_note_);
  std::map<uint16_t, QueueMarks> marks;
  for (const auto& [num, mq] : marking_) marks[num] = mq.counts;
  auto j = stats_json(lines_, read_proc_nfqueue(), process_, marks);
  if (!marking_.empty() && !mark_table_error_.empty()) j["mark_table_error"] = mark_table_error_;
  auto text = j.dump(2) + "\n";
  // core/safe_file.h: a temporary file and rename, so a reader sees the old or the new file.
  auto s = write_file(options_.stats_path, text);
  std::string error = s ? "" : s.error().message;
  if (!error.empty() && error != stats_error_) log("stats: " + error);  // once per new cause
  stats_error_ = error;
}

void DelayStage::close_all() {
  for (auto& [num, line] : lines_)
    if (auto last = line.release_all()) append_verdict_batch(verdicts_, num, *last, NF_ACCEPT);
  for (auto& [num, mq] : marking_) mq.held.clear();  // accepted unmarked with the rest
  if (auto s = flush_verdicts(); !s) log("release held packets: " + s.error().message);
  for (const auto& [num, line] : lines_) {
    NlBuffer msg;
    uint32_t seq = socket_.next_seq();
    append_unbind(msg, num, seq);
    // Packets arriving now find no room to wait: they are dropped, as after the unbind.
    auto drop = [this](const NlEvent& e) {
      if (e.kind == NlEvent::Kind::kPacket)
        append_verdict(verdicts_, e.packet.queue, e.packet.id, NF_DROP);
    };
    if (auto s = socket_.request(msg, seq, "unbind " + queue_name(num), kAckTimeout, drop); !s)
      log(s.error().message);
    (void)flush_verdicts();
  }
  close_probe();
}

Status DelayStage::run(int signal_fd) {
  const int64_t end = options_.duration.ns > 0 ? start_ns_ + options_.duration.ns : INT64_MAX;
  const bool stats = !options_.stats_path.empty();
  const int64_t interval = std::max<int64_t>(options_.stats_interval.ns, 10'000'000);
  int64_t next_stats = monotonic_ns() + interval;
  std::vector<NlEvent> events;
  Status result;
  bool stop = false;
  while (!stop) {
    int64_t now = monotonic_ns();
    if (now >= end) break;
    int64_t wake = std::min(end, now + kMaxSleepNs);
    if (stats) wake = std::min(wake, next_stats);
    // The next probe (one that is overdue waits for headroom, which a release brings).
    if (probe_rule_ && next_probe_ns_ > now) wake = std::min(wake, next_probe_ns_);
    // Sleep until the timer's advance before the next deadline; spin the rest below.
    bool timed = false;
    if (auto due = next_deadline(); due && *due - timer_.advance_ns(now) < wake) {
      wake = *due - timer_.advance_ns(now);  // same value: advance_ns only changes with time
      timed = true;
    }
    int64_t wait = std::max<int64_t>(0, wake - now);
    timespec timeout{static_cast<time_t>(wait / 1'000'000'000), wait % 1'000'000'000};
    // The probe's socket: -1 (ignored by ppoll) when not probing.
    pollfd fds[3] = {{socket_.fd(), POLLIN, 0},
                     {signal_fd, POLLIN, 0},
                     {probe_socket_ ? probe_socket_.get() : -1, POLLIN, 0}};
    int ready = ::ppoll(fds, 3, &timeout, nullptr);
    if (ready == 0 && timed && wait > 0) timer_.record_oversleep(monotonic_ns() - wake);
    if (ready < 0 && errno != EINTR) {
      result = sys_fail("wait for packets (ppoll)");
      break;
    }
    if (ready > 0 && (fds[0].revents & (POLLIN | POLLERR))) {
      for (int k = 0; k < kDrainBound && !stop; ++k) {
        const int64_t before = monotonic_ns();
        auto data = socket_.receive_nowait();
        if (!data) {
          result = std::unexpected(data.error());
          stop = true;
        } else if (data->empty()) {
          last_empty_ns_ = before;
          break;
        } else {
          events.clear();
          parse_events(*data, events);
          for (const auto& e : events) on_event(e);
          // A due packet never waits for the rest of a burst to be read.
          if (auto due = next_deadline(); due && monotonic_ns() >= *due)
            result = release_and_flush();
          else if (verdicts_.size() > kFlushBytes)
            result = flush_verdicts();
          if (!result) stop = true;
        }
      }
    }
    if (ready > 0 && (fds[1].revents & POLLIN)) {
      signalfd_siginfo si{};
      while (::read(signal_fd, &si, sizeof si) == static_cast<ssize_t>(sizeof si)) {
        if (si.ssi_signo == SIGHUP)
          reload();
        else
          stop = true;
      }
    }
    // The next deadline is within the advance: wait for it here, awake.
    if (auto due = next_deadline(); due && !stop) {
      const int64_t t = monotonic_ns();
      if (*due > t && *due - t <= timer_.advance_ns(t)) spin_until(*due);
    }
    release_due();
    if (auto s = flush_verdicts(); !s && result) {
      result = s;
      stop = true;
    }
    if (ready > 0 && (fds[2].revents & POLLIN)) read_probe();
    if (!stop) maybe_probe(monotonic_ns());
    if (stats && monotonic_ns() >= next_stats) {
      write_stats();
      next_stats = std::max(next_stats + interval, monotonic_ns());
    }
  }
  close_all();
  write_stats();
  return result;
}

}  // namespace tb::stage
