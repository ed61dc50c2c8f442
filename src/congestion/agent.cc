#include "congestion/agent.h"

#include <errno.h>
#include <linux/pkt_sched.h>
#include <net/if.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "congestion/control.h"
#include "congestion/episodes.h"
#include "congestion/kick.h"
#include "congestion/pause.h"
#include "congestion/stats.h"
#include "congestion/wake.h"
#include "core/events.h"
#include "core/safe_file.h"
#include "netlink/link_stats.h"
#include "netlink/netns.h"
#include "netlink/qdisc_stats.h"
#include "netlink/socket.h"
#include "netlink/tc_message.h"
#include "stage/mark_table.h"

namespace tb::congestion {
namespace {

constexpr int64_t kSec = 1'000'000'000;
constexpr int64_t kOwnershipEveryNs = 50'000'000;  // unpolled namespaces of paused upstreams
constexpr uint32_t kEthHeader = 14;
constexpr size_t kPollRing = 4096;

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * kSec + ts.tv_nsec;
}
int64_t cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * kSec + ts.tv_nsec;
}
// Sleeps to the absolute `t`; returns early when `stop` (or `reload`) is set by a signal.
void sleep_until(int64_t t, const std::atomic<bool>& stop, const std::atomic<bool>* reload) {
  timespec ts{static_cast<time_t>(t / kSec), static_cast<long>(t % kSec)};
  while (!stop && !(reload && *reload) &&
         clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

// One namespace the agent touches: a switch it polls and/or where upstream TBFs sit.
struct Ns {
  std::string name;
  UniqueFd fd;
  netlink::NlSocket nl;
  bool polled = false;
  bool dumped = false;  // its qdiscs were read this poll
  std::vector<netlink::QdiscStats> qdiscs;
  std::vector<netlink::LinkStats> links;
};

struct Port {
  int ns = 0, ifindex = 0;
  uint64_t drops0 = 0;
  bool drops_known = false;
  uint64_t drops = 0;
  // An ecn port marked by a RED child of its TBF: RED's marked count since the agent started.
  uint64_t red0 = 0, red_marked = 0;
  bool red_known = false;
  // Its own TBF, for storms: the figures a release restores (the plan's, then what its dump
  // showed when a hold began), and its kicker.
  netlink::TbfOptions restore;
  std::optional<Kicker> kicker;
};

struct Upstream {
  int ns = 0, ifindex = 0;
  int switch_ns = -1, feeds_ifindex = 0;  // where its rx is read
  netlink::TbfOptions restore, paused;
  std::optional<Kicker> kicker;
  std::map<int, uint64_t> by;
};

Result<int> ifindex_in(const Ns& ns, const std::string& ifname) {
  auto in = netlink::ScopedNetns::enter(ns.fd.get());
  if (!in) return std::unexpected(in.error());
  const unsigned i = if_nametoindex(ifname.c_str());
  if (i == 0) return sys_fail(ns.name + ": interface " + ifname);
  return static_cast<int>(i);
}

const netlink::QdiscStats* find_qdisc(const Ns& ns, int ifindex, uint32_t handle) {
  for (const auto& q : ns.qdiscs)
    if (q.ifindex == ifindex && q.handle == handle) return &q;
  return nullptr;
}
// The qdisc of `kind` at the first class (handle major:1) of qdisc `handle` on `ifindex`.
const netlink::QdiscStats* find_child(const Ns& ns, int ifindex, uint32_t handle,
                                      const char* kind) {
  for (const auto& q : ns.qdiscs)
    if (q.ifindex == ifindex && q.parent == (handle | 1u) && std::strcmp(q.kind, kind) == 0)
      return &q;
  return nullptr;
}

class Agent {
 public:
  Agent(const plan::CongestionAgent& c, const AgentOptions& o) : c_(c), o_(o) {}

  Status open() {
    rlimit r{};
    if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
      r.rlim_cur = r.rlim_max;  // two descriptors per upstream in large labs
      setrlimit(RLIMIT_NOFILE, &r);
    }
    PauseConfig pc;
    pc.poll_ns = c_.poll_ns;
    pc.idle_poll_ns = std::max(c_.idle_poll_ns, c_.poll_ns);
    for (const auto& p : c_.ports) {
      auto ns = ns_index(p.netns);
      if (!ns) return std::unexpected(ns.error());
      namespaces_[static_cast<size_t>(*ns)].polled = true;
      auto ifi = ifindex_in(namespaces_[static_cast<size_t>(*ns)], p.ifname);
      if (!ifi) return std::unexpected(ifi.error());
      ports_.push_back({*ns, *ifi});
      ports_.back().restore = {p.rate, p.burst, p.limit};
      for (int f : p.feeders)
        if (f < 0 || static_cast<size_t>(f) >= c_.upstreams.size())
          return fail("congestion port " + p.name + ": feeder " + std::to_string(f) +
                      " is not an upstream");
      pc.ports.push_back({p.model == "lossless", p.xoff, p.xon, p.feeders, -1, p.model == "ecn",
                          p.kmin, p.kmax, p.pmax});
    }
    for (size_t u = 0; u < c_.upstreams.size(); ++u)
      if (const int p = c_.upstreams[u].port; p >= 0 && static_cast<size_t>(p) < pc.ports.size())
        pc.ports[static_cast<size_t>(p)].upstream = static_cast<int>(u);
    pc.watchdog_ns = c_.watchdog_ns;
    pc.restore_ns = c_.restore_ns;
    pc.watchdog_drop = c_.action != "forward";
    for (const auto& u : c_.upstreams) {
      auto ns = ns_index(u.netns);
      if (!ns) return std::unexpected(ns.error());
      auto ifi = ifindex_in(namespaces_[static_cast<size_t>(*ns)], u.ifname);
      if (!ifi) return std::unexpected(ifi.error());
      Upstream x;
      x.ns = *ns;
      x.ifindex = *ifi;
      x.restore = {u.rate, u.burst, u.limit};
      x.paused = {kPauseRate, u.mtu + kEthHeader, u.limit};
      ups_.push_back(std::move(x));
      pc.upstreams.push_back({u.rate, u.quantum_ns});
    }
    // Where each upstream's traffic arrives: the switch port it feeds, in its ports' namespace.
    for (size_t p = 0; p < c_.ports.size(); ++p)
      for (int f : c_.ports[p].feeders) {
        Upstream& x = ups_[static_cast<size_t>(f)];
        if (x.switch_ns >= 0 || c_.upstreams[static_cast<size_t>(f)].feeds_ifname.empty()) continue;
        const Ns& sw = namespaces_[static_cast<size_t>(ports_[p].ns)];
        if (auto ifi = ifindex_in(sw, c_.upstreams[static_cast<size_t>(f)].feeds_ifname)) {
          x.switch_ns = ports_[p].ns;
          x.feeds_ifindex = *ifi;
        }
      }
    machine_.emplace(std::move(pc));
    if (!o_.episodes_path.empty()) {
      std::vector<std::string> ups, ports;
      for (const auto& u : c_.upstreams) ups.push_back(u.name);
      for (const auto& p : c_.ports) ports.push_back(p.name);
      episodes_.emplace(std::move(ups), std::move(ports));
      if (auto log = EpisodeLog::open(o_.episodes_path))
        log_.emplace(std::move(*log));
      else
        error(log.error().message);  // no timeline; the agent still runs
    }
    port_samples_.resize(ports_.size());
    up_samples_.resize(ups_.size());
    // ECN: the mark table the stages downstream of the ecn ports read; its counts so far (the
    // stats count from this agent's start).
    if (!c_.mark_table.empty()) {
      auto t = stage::MarkTable::open(c_.mark_table);
      if (!t) return std::unexpected(t.error());
      marks_.emplace(std::move(*t));
      marks0_.resize(ports_.size());
      for (size_t p = 0; p < ports_.size(); ++p) marks0_[p] = marks_->counts(c_.ports[p].mark_slot);
    }
    return {};
  }

  void run(const std::atomic<bool>& stop) {
    if (o_.realtime) sched_ = try_realtime(kAgentPriority).text;
    start_ = now_ns();
    cpu0_ = cpu_ns();
    // The storms in force (a restarted agent holds them again), then the leftovers of a killed
    // agent: every upstream namespace read once; the first step resumes (and kicks) each TBF
    // found at the pause rate, and holds the storms.
    if (o_.reload) *o_.reload = false;
    read_control();
    poll(start_, /*all_upstreams=*/true);
    answer_control();
    // The idle wake after the first stats file (which `up` waits for): a program and a filter per
    // port cost about 0.7 ms each (270 ms of a 256-GPU lab's up); until it is there the agent
    // polls every idle period, as without it.
    open_wake();
    int64_t next = start_ + machine_->interval_ns(start_);
    int64_t stats_at = start_;
    const int64_t late_budget = std::max<int64_t>(c_.late_ns, 1);
    while (!stop) {
      sleep_until(next, stop, o_.reload);
      if (stop) break;
      if (o_.reload && o_.reload->exchange(false)) {
        // A new control document: carried out by a poll now, answered at once; the schedule of
        // polls is kept.
        read_control();
        poll(now_ns(), false);
        answer_control();
        if (now_ns() < next) continue;
      }
      const int64_t woke = now_ns();
      if (waking_ && !wake_due(woke)) {
        // Idle, and nothing offered to any port since the last poll could matter: no dump.
        ++wake_checks_;
        next += machine_->interval_ns(woke);
        if (next <= now_ns()) next = now_ns() + machine_->interval_ns(woke);
        continue;
      }
      const int64_t late = woke - next;
      if (late > late_budget) ++late_polls_;
      late_max_ = std::max(late_max_, late);
      const bool ownership = woke - ownership_at_ >= kOwnershipEveryNs;
      if (ownership) ownership_at_ = woke;
      poll(woke, ownership);
      const int64_t done = now_ns();
      poll_ring_[polls_ % kPollRing] =
          static_cast<int32_t>(std::min<int64_t>(done - woke, INT32_MAX));
      ++polls_;
      if (done - stats_at >= kStatsEveryNs) {
        write_stats(done, false);
        if (episodes_) write_episodes(episodes_->take_closed(done));
        stats_at = done;
      }
      // Idle with the wake: read the counters every idle period, where the poll they stand for
      // would have been (the same reaction to a queue that starts to build; a wake-up costs
      // about 20 us of CPU in this VM, so a faster check would cost more than it saves).
      waking_ = wake_.has_value() && !machine_->fast(done);
      const int64_t step = machine_->interval_ns(done);
      next += step;
      if (next <= now_ns()) next = now_ns() + step;  // missed: no catch-up
    }
    const int64_t t = now_ns();
    carry_out(machine_->resume_all(t));
    if (episodes_) write_episodes(episodes_->take_all(now_ns()));
    carry_out_ports(machine_->port_commands());
    write_events();
    publish_marking(true);
    write_stats(now_ns(), true);
    close_wake();
  }

 private:
  // The idle wake (congestion/wake.h): the counters, then a clsact with the counting filter on
  // each polled port's egress (a killed agent's are replaced). Without it (said in the stats'
  // `wake`), the agent polls every idle period.
  void open_wake() {
    auto counters = ByteCounters::create(ports_.size());
    if (!counters) {
      wake_text_ = "none: " + counters.error().message;
      return;
    }
    for (size_t p = 0; p < ports_.size(); ++p) {
      Ns& ns = namespaces_[static_cast<size_t>(ports_[p].ns)];
      const int ifindex = ports_[p].ifindex;
      (void)ns.nl.call(netlink::del_clsact(ifindex), "remove an old clsact");  // none: fine
      Status r = ns.nl.call(netlink::new_clsact(ifindex), "add clsact on " + c_.ports[p].name);
      if (r) {
        netlink::BpfFilter f;
        f.prio = kWakeFilterPrio;
        f.handle = kWakeFilterHandle;
        f.fd = counters->program_fd(p);
        f.name = kWakeFilterName;
        r = ns.nl.call(netlink::new_bpf_filter(ifindex, f),
                       "add the wake's byte counter on " + c_.ports[p].name);
      }
      if (!r) {
        wake_text_ = "none: " + r.error().message;
        attached_ = p + 1;
        close_wake();
        return;
      }
    }
    attached_ = ports_.size();
    wake_.emplace(std::move(*counters));
    wake_base_.assign(ports_.size(), 0);
    wake_headroom_.assign(ports_.size(), 0);
    wake_text_ = "cls_bpf byte counters on " + std::to_string(ports_.size()) + " port(s)";
  }
  // Takes the counting filters off (with their clsact) again.
  void close_wake() {
    for (size_t p = 0; p < attached_; ++p) {
      Ns& ns = namespaces_[static_cast<size_t>(ports_[p].ns)];
      (void)ns.nl.call(netlink::del_clsact(ports_[p].ifindex), "remove the wake's clsact");
    }
    attached_ = 0;
    wake_.reset();
    waking_ = false;
  }
  // While idle under the wake: poll now when a port was offered half of its headroom since its
  // last sample (half: TBF counts a GSO packet's replicated headers in its backlog, skb->len
  // does not), and at least every kStatsEveryNs for the stats and the counters' drops.
  bool wake_due(int64_t now) {
    if (now - last_poll_ >= kStatsEveryNs) return true;
    for (size_t p = 0; p < ports_.size(); ++p) {
      const uint64_t offered = wake_->bytes(p) - wake_base_[p];
      if (offered >= wake_headroom_[p] / 2) {
        ++wakes_;
        return true;
      }
    }
    return false;
  }

  // The kicker of an interface in namespace `ns`, opened on first use; false (said) if it cannot.
  bool open_kicker(std::optional<Kicker>& kicker, int ns, int ifindex) {
    if (kicker) return true;
    auto k = Kicker::open(namespaces_[static_cast<size_t>(ns)].fd.get(), ifindex);
    if (!k) {
      error(k.error().message);
      return false;
    }
    kicker = std::move(*k);
    return true;
  }

  Result<int> ns_index(const std::string& name) {
    for (size_t i = 0; i < namespaces_.size(); ++i)
      if (namespaces_[i].name == name) return static_cast<int>(i);
    auto fd = netlink::open_named_netns(name);
    if (!fd) return std::unexpected(fd.error());
    auto nl = netlink::NlSocket::open_in(fd->get());
    if (!nl) return std::unexpected(nl.error());
    Ns ns;
    ns.name = name;
    ns.fd = std::move(*fd);
    ns.nl = std::move(*nl);
    namespaces_.push_back(std::move(ns));
    return static_cast<int>(namespaces_.size() - 1);
  }

  void error(const std::string& e) {
    ++errors_;
    if (last_error_ != e) std::fprintf(stderr, "tb-probe congestion: %s\n", e.c_str());
    last_error_ = e;
  }

  // One dump of `ns` (qdiscs, and rx counters when `links`); one retry of an interrupted dump.
  void read(Ns& ns, bool links) {
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto r = netlink::dump_qdisc_stats(ns.nl, ns.qdiscs);
      if (r) break;
      if (attempt == 1 || r.error().sys_errno != EAGAIN) {
        error(ns.name + ": " + r.error().message);
        ns.qdiscs.clear();
      }
    }
    ns.dumped = true;
    if (!links) return;
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto r = netlink::dump_link_stats(ns.nl, ns.links);
      if (r) break;
      if (attempt == 1 || r.error().sys_errno != EAGAIN) {
        error(ns.name + ": " + r.error().message);
        ns.links.clear();
      }
    }
  }

  void poll(int64_t now, bool all_upstreams) {
    // The counters just before the dumps: a queue then holds at most its sampled backlog plus
    // what its counter grows by from here (congestion/wake.h).
    if (wake_)
      for (size_t p = 0; p < ports_.size(); ++p) wake_base_[p] = wake_->bytes(p);
    last_poll_ = now;
    for (auto& ns : namespaces_) {
      ns.dumped = false;
      if (ns.polled) read(ns, true);
    }
    if (all_upstreams) {
      // Only the namespaces of upstreams paused now (at start: every one).
      for (size_t i = 0; i < ups_.size(); ++i) {
        Ns& ns = namespaces_[static_cast<size_t>(ups_[i].ns)];
        if (ns.dumped) continue;
        if (polls_ > 0 && !machine_->upstreams()[i].paused) continue;
        read(ns, false);
      }
    }
    for (size_t p = 0; p < ports_.size(); ++p) {
      const Ns& ns = namespaces_[static_cast<size_t>(ports_[p].ns)];
      const auto* q = find_qdisc(ns, ports_[p].ifindex, c_.ports[p].handle);
      port_samples_[p] =
          q ? PortSample{true, q->backlog, q->bytes, q->drops, q->tbf_rate} : PortSample{};
      if (q) {
        Port& x = ports_[p];
        if (!x.drops_known) x.drops0 = q->drops;
        x.drops_known = true;
        x.drops = q->drops >= x.drops0 ? q->drops - x.drops0 : q->drops;
      }
      if (c_.ports[p].red)
        if (const auto* r = find_child(ns, ports_[p].ifindex, c_.ports[p].handle, "red")) {
          Port& x = ports_[p];
          if (!x.red_known) x.red0 = r->red_marked;
          x.red_known = true;
          x.red_marked = r->red_marked >= x.red0 ? r->red_marked - x.red0 : r->red_marked;
        }
    }
    for (size_t i = 0; i < ups_.size(); ++i) {
      const Upstream& u = ups_[i];
      UpstreamSample s;
      const Ns& own = namespaces_[static_cast<size_t>(u.ns)];
      if (own.dumped)
        if (const auto* q = find_qdisc(own, u.ifindex, c_.upstreams[i].handle))
          s.tbf_rate = q->tbf_rate;
      if (u.switch_ns >= 0)
        for (const auto& l : namespaces_[static_cast<size_t>(u.switch_ns)].links)
          if (l.ifindex == u.feeds_ifindex) {
            s.rx_seen = true;
            s.rx_bytes = l.rx_bytes;
            break;
          }
      up_samples_[i] = s;
    }
    carry_out(machine_->step(now, port_samples_, up_samples_));
    carry_out_ports(machine_->port_commands());
    write_events();
    publish_marking(false);
    if (wake_)
      for (size_t p = 0; p < ports_.size(); ++p)
        wake_headroom_[p] = machine_->wake_headroom(static_cast<int>(p));
  }

  // Each ecn port's marking probability into its mark table slot (0 for all when `off`: an
  // agent that stops leaves nothing marking).
  void publish_marking(bool off) {
    if (!marks_) return;
    for (size_t p = 0; p < ports_.size(); ++p)
      if (c_.ports[p].mark_slot >= 0)
        marks_->set_probability(c_.ports[p].mark_slot, off ? 0 : machine_->ports()[p].marking_p);
  }

  // The control document: its storms set in the machine (the next poll holds or releases them);
  // a port it names that this agent does not poll, or polls as an upstream too, is refused in
  // control_error and the rest is taken.
  void read_control() {
    if (o_.control_path.empty()) return;
    auto doc = congestion::read_control(o_.control_path);
    if (!doc) {
      control_error_ = doc.error().message;
      error(control_error_);
      return;
    }
    generation_ = doc->generation;
    control_error_.clear();
    std::vector<char> want(ports_.size(), 0);
    for (const auto& name : doc->storms) {
      size_t p = 0;
      while (p < c_.ports.size() && c_.ports[p].name != name) ++p;
      std::string why;
      if (p == c_.ports.size()) {
        why = "not a port this agent polls";
      } else if (machine_->config().ports[p].upstream >= 0) {
        why = "a port that is also an upstream (a switch's uplink) cannot be stormed";
      } else if (c_.ports[p].model != "lossless") {
        why = "not a lossless port";
      }
      if (!why.empty()) {
        std::string valid;
        for (size_t q = 0; q < c_.ports.size(); ++q)
          if (machine_->config().ports[q].upstream < 0 && c_.ports[q].model == "lossless")
            valid += (valid.empty() ? "" : ", ") + c_.ports[q].name;
        control_error_ += (control_error_.empty() ? "" : "; ") + std::string("storm port ") + name +
                          ": " + why + " (valid: " + (valid.empty() ? "none" : valid) + ")";
        continue;
      }
      want[p] = 1;
    }
    for (size_t p = 0; p < ports_.size(); ++p)
      if (machine_->config().ports[p].upstream < 0)
        machine_->set_storm(static_cast<int>(p), want[p] != 0);
    if (!control_error_.empty()) error(control_error_);
  }

  // The answer to the control document just carried out: in the stats file now.
  void answer_control() {
    applied_ns_ = now_ns();
    write_stats(applied_ns_, false);
  }

  // A port's own TBF: hold (the pause rate, a one-frame burst, its limit), release (its figures
  // back, then a kick) or mitigate (its rate back, a 1-byte limit with the drop action, a kick).
  void carry_out_ports(const std::vector<PortCommand>& cs) {
    if (cs.empty()) return;
    for (const auto& c : cs) {
      Port& x = ports_[static_cast<size_t>(c.port)];
      const auto& cp = c_.ports[static_cast<size_t>(c.port)];
      Ns& ns = namespaces_[static_cast<size_t>(x.ns)];
      if (c.action == PortAction::kHold) port_in_force(x, cp.handle);
      if (x.restore.rate == 0 || x.restore.limit == 0) {
        error("storm port " + cp.name + ": its TBF's figures are unknown; cannot " +
              action_name(c.action) + " it");
        continue;
      }
      netlink::TbfOptions o = x.restore;
      if (c.action == PortAction::kHold) o = {kPauseRate, cp.mtu + kEthHeader, x.restore.limit};
      if (c.action == PortAction::kMitigate && c_.action != "forward") o.limit = 1;
      auto msg = netlink::new_tc({x.ifindex, cp.parent, cp.handle}, o, netlink::TcWrite::kReplace);
      if (auto r = ns.nl.send(std::move(msg), std::string(action_name(c.action)) + " " + cp.name);
          !r)
        error(r.error().message);
    }
    for (auto& ns : namespaces_)
      if (ns.nl.outstanding() > 0)
        if (auto r = ns.nl.drain(); !r) error(r.error().message);
    for (const auto& c : cs) {
      if (c.action == PortAction::kHold) continue;
      Port& x = ports_[static_cast<size_t>(c.port)];
      if (!open_kicker(x.kicker, x.ns, x.ifindex)) continue;
      // With the drop action the 1-byte limit drops the kick itself (ENOBUFS, one frame in
      // `dropped`); the qdisc still ran behind it (dev_queue_xmit runs it after any enqueue).
      const bool dropped_by_design = c.action == PortAction::kMitigate && c_.action != "forward";
      if (auto r = x.kicker->kick(); !r && !(dropped_by_design && r.error().sys_errno == ENOBUFS))
        error(r.error().message);
    }
  }

  // What a storm's release restores: the port's TBF as this poll's dump shows it when that is
  // not a pause (a `link set` made before the storm holds), else what was known.
  void port_in_force(Port& x, uint32_t handle) {
    const Ns& ns = namespaces_[static_cast<size_t>(x.ns)];
    const auto* q = find_qdisc(ns, x.ifindex, handle);
    if (!q || q->tbf_rate == 0 || q->tbf_rate == kPauseRate || q->tbf_burst == 0) return;
    const auto tick_bytes = static_cast<int64_t>(q->tbf_rate * 64 / 1'000'000'000) + 1;
    if (q->tbf_rate == x.restore.rate && q->tbf_limit == x.restore.limit &&
        std::abs(static_cast<int64_t>(q->tbf_burst) - static_cast<int64_t>(x.restore.burst)) <=
            tick_bytes)
      return;
    if (q->tbf_limit <= 1) return;  // a mitigation's limit, not the port's
    x.restore = {q->tbf_rate, q->tbf_burst, q->tbf_limit};
  }

  // The watchdog's events of the last step, into the lab's events.jsonl.
  void write_events() {
    for (const auto& e : machine_->watchdog_events()) {
      const auto& cp = c_.ports[static_cast<size_t>(e.port)];
      nlohmann::json j;
      if (e.detect) {
        j = {{"event", "pfcwd_detect"},
             {"port", cp.name},
             {"paused_ms", static_cast<double>(e.paused_ns) / 1e6},
             {"watchdog_ms", static_cast<double>(c_.watchdog_ns) / 1e6},
             {"action", c_.action},
             {"restore_ms", static_cast<double>(c_.restore_ns) / 1e6}};
      } else {
        j = {{"event", "pfcwd_restore"},
             {"port", cp.name},
             {"dropped", e.dropped},
             {"storm", machine_->ports()[static_cast<size_t>(e.port)].storm}};
      }
      std::fprintf(stderr, "tb-probe congestion: %s\n", j.dump().c_str());
      if (o_.events_path.empty()) continue;
      if (auto r = append_event(o_.events_path, j); !r) error(r.error().message);
    }
  }

  // Pauses and restores pipelined per namespace, their acks read, then the kicks.
  void carry_out(const std::vector<Command>& cs) {
    if (cs.empty()) return;
    if (episodes_) {
      const int64_t t = now_ns();
      for (const auto& c : cs)
        c.pause ? episodes_->paused(c.upstream, c.by, t) : episodes_->resumed(c.upstream, t);
    }
    for (const auto& c : cs) {
      Upstream& u = ups_[static_cast<size_t>(c.upstream)];
      const auto& cu = c_.upstreams[static_cast<size_t>(c.upstream)];
      Ns& ns = namespaces_[static_cast<size_t>(u.ns)];
      if (c.pause) in_force(u, cu.handle);
      auto msg = netlink::new_tc({u.ifindex, cu.parent, cu.handle}, c.pause ? u.paused : u.restore,
                                 netlink::TcWrite::kReplace);
      if (auto r = ns.nl.send(std::move(msg), (c.pause ? "pause " : "resume ") + cu.name); !r)
        error(r.error().message);
      if (c.pause && c.by >= 0) ++u.by[c.by];
    }
    for (auto& ns : namespaces_)
      if (ns.nl.outstanding() > 0)
        if (auto r = ns.nl.drain(); !r) error(r.error().message);
    for (const auto& c : cs) {
      if (c.pause) continue;
      Upstream& u = ups_[static_cast<size_t>(c.upstream)];
      if (!open_kicker(u.kicker, u.ns, u.ifindex)) continue;
      if (auto r = u.kicker->kick(); !r) error(r.error().message);
    }
  }

  // What a resume restores is what was in force when the pause began: the upstream's TBF as its
  // namespace's dump shows it this poll (read now when it was not), unless that is a pause. So a
  // `link set` or `link reset` of a lossless link holds: made while the link runs, the next
  // pause keeps it; made while it is paused, the dump shows another rate, the machine pauses it
  // again (ownership) and this takes the new figures. Left open: a change that lands between
  // this read and the pause's replace (microseconds) is overwritten by the pause.
  void in_force(Upstream& u, uint32_t handle) {
    Ns& ns = namespaces_[static_cast<size_t>(u.ns)];
    if (!ns.dumped) read(ns, false);
    const auto* q = find_qdisc(ns, u.ifindex, handle);
    if (!q || q->tbf_rate == 0 || q->tbf_rate == kPauseRate || q->tbf_burst == 0) return;
    // The dump's bucket comes back up to one 64 ns tick's worth short: the same figures within
    // that are the ones restored last time (taking them would shrink the bucket every cycle).
    const auto tick_bytes = static_cast<int64_t>(q->tbf_rate * 64 / 1'000'000'000) + 1;
    if (q->tbf_rate == u.restore.rate && q->tbf_limit == u.restore.limit &&
        std::abs(static_cast<int64_t>(q->tbf_burst) - static_cast<int64_t>(u.restore.burst)) <=
            tick_bytes)
      return;
    u.restore = {q->tbf_rate, q->tbf_burst, q->tbf_limit};
  }

  void write_episodes(const std::vector<Episode>& es) {
    if (log_ && !es.empty())
      if (auto r = log_->append(es); !r) error(r.error().message);
  }

  void write_stats(int64_t now, bool stopped) {
    if (o_.stats_path.empty()) return;
    AgentStats s;
    s.pid = static_cast<int>(getpid());
    s.uptime_s = static_cast<double>(now - start_) / 1e9;
    s.cpu_s = static_cast<double>(cpu_ns() - cpu0_) / 1e9;
    s.sched = sched_;
    s.polls = polls_;
    s.late_polls = late_polls_;
    s.late_ms_max = static_cast<double>(late_max_) / 1e6;
    const size_t n = std::min<size_t>(polls_, kPollRing);
    if (n > 0) {
      std::vector<int32_t> v(poll_ring_.begin(), poll_ring_.begin() + static_cast<long>(n));
      const size_t k = std::min(n - 1, n * 99 / 100);
      std::nth_element(v.begin(), v.begin() + static_cast<long>(k), v.end());
      s.poll_ms_p99 = static_cast<double>(v[k]) / 1e6;
    }
    s.wake = wake_text_;
    s.wake_checks = wake_checks_;
    s.wakes = wakes_;
    s.errors = errors_;
    s.last_error = last_error_;
    s.stopped = stopped;
    s.generation = generation_;
    s.control_error = control_error_;
    s.control_applied_ns = applied_ns_;
    for (size_t p = 0; p < ports_.size(); ++p) {
      const PortState& st = machine_->ports()[p];
      PortStats x{c_.ports[p].model, st.backlog, st.backlog_max, ports_[p].drops, st.xoff_events};
      x.storm = st.storm;
      x.watchdog = {st.trips, st.mitigating, machine_->dropped(static_cast<int>(p))};
      if (c_.ports[p].red) {
        x.ecn.marking_p = 0;  // RED's own curve decides; the agent publishes nothing
        x.ecn.ce_marks = ports_[p].red_marked;
        x.ecn.marked_by = "red";
      } else if (marks_ && c_.ports[p].mark_slot >= 0) {
        const stage::MarkCounts now_c = marks_->counts(c_.ports[p].mark_slot), &was = marks0_[p];
        auto since = [](uint64_t a, uint64_t b) { return a >= b ? a - b : a; };
        x.ecn = {static_cast<double>(st.marking_p) / 4294967296.0, since(now_c.ect, was.ect),
                 since(now_c.ce, was.ce), since(now_c.not_ect, was.not_ect)};
      }
      s.ports[c_.ports[p].name] = std::move(x);
    }
    for (size_t i = 0; i < ups_.size(); ++i) {
      const UpstreamState& st = machine_->upstreams()[i];
      UpstreamStats u{st.pauses,   machine_->paused_ns(static_cast<int>(i), now),
                      st.paused,   st.pause_expired,
                      st.repaused, st.leftovers,
                      {}};
      for (const auto& [port, count] : ups_[i].by)
        u.by[c_.ports[static_cast<size_t>(port)].name] = count;
      s.upstreams[c_.upstreams[i].name] = std::move(u);
    }
    if (auto r = write_file(o_.stats_path, to_json(s).dump(1) + "\n"); !r) error(r.error().message);
  }

  const plan::CongestionAgent& c_;
  AgentOptions o_;
  std::vector<Ns> namespaces_;
  std::vector<Port> ports_;
  std::vector<Upstream> ups_;
  std::optional<PauseMachine> machine_;
  std::optional<stage::MarkTable> marks_;
  std::vector<stage::MarkCounts> marks0_;
  std::optional<EpisodeTracker> episodes_;
  std::optional<EpisodeLog> log_;
  std::vector<PortSample> port_samples_;
  std::vector<UpstreamSample> up_samples_;
  std::string sched_ = "SCHED_OTHER";
  std::optional<ByteCounters> wake_;
  std::string wake_text_ = "none";
  size_t attached_ = 0;  // ports whose clsact close_wake removes
  bool waking_ = false;  // idle: reading the counters instead of polling
  int64_t last_poll_ = 0;
  std::vector<uint64_t> wake_base_, wake_headroom_;
  uint64_t wake_checks_ = 0, wakes_ = 0;
  int64_t start_ = 0, cpu0_ = 0, late_max_ = 0, ownership_at_ = 0;
  uint64_t polls_ = 0, late_polls_ = 0, errors_ = 0;
  std::string last_error_;
  uint64_t generation_ = 0;
  std::string control_error_;
  int64_t applied_ns_ = 0;
  std::vector<int32_t> poll_ring_ = std::vector<int32_t>(kPollRing);
};

}  // namespace

Status run_congestion_agent(const plan::CongestionAgent& config, const AgentOptions& options,
                            const std::atomic<bool>& stop) {
  Agent a(config, options);
  TB_TRY(a.open());
  a.run(stop);
  return {};
}

}  // namespace tb::congestion
