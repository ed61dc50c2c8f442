#include "lab/watch.h"

#include <algorithm>
#include <deque>
#include <fstream>
#include <map>

#include "lab/daemons.h"
#include "lab/link_change.h"
#include "lab/status.h"
#include "runner/supervisor.h"

namespace tb::lab {
namespace {

using nlohmann::json;

std::string end_name(const plan::LinkEnd& e) {
  return e.node + ":" + e.ifname;
}

const apply::IfaceInfo* find_iface(const LiveInterfaces& live, const std::string& netns,
                                   const std::string& ifname) {
  const auto it = live.find(netns);
  if (it == live.end()) return nullptr;
  for (const auto& i : it->second)
    if (i.ifname == ifname) return &i;
  return nullptr;
}

// Per link: packets its delay-stage queues hold now and have dropped in all (full queue, or
// refused by the kernel), from the stages' stats files; -1 held when no stage serves it.
struct StageView {
  int held = -1;
  uint64_t drops = 0;
};

std::vector<StageView> stage_views(const LabState& st) {
  std::vector<StageView> out(st.topo.links.size());
  std::map<std::string, size_t> by_direction;  // "a:if -> b:if" → link
  for (size_t i = 0; i < st.topo.links.size(); ++i) {
    const auto& l = st.topo.links[i];
    by_direction[end_name(l.a) + " -> " + end_name(l.b)] = i;
    by_direction[end_name(l.b) + " -> " + end_name(l.a)] = i;
  }
  for (const auto& stage : st.stages) {
    std::ifstream in(stage_stats_path(st.lab, stage.netns));
    const auto stats = json::parse(in, nullptr, false);
    const json list = stats.is_object() ? stats.value("queues", json::array()) : json::array();
    std::map<int, const json*> queues;
    for (const auto& q : list)
      if (q.is_object()) queues[q.value("num", -1)] = &q;
    for (const auto& q : stage.queues) {
      const auto it = by_direction.find(q.link);
      if (it == by_direction.end()) continue;
      auto& v = out[it->second];
      if (v.held < 0) v.held = 0;
      if (const auto s = queues.find(q.queue); s != queues.end()) {
        v.held += s->second->value("held", 0);
        v.drops += s->second->value("drops_full", uint64_t{0});
        const int64_t kernel = s->second->value("kernel_dropped", int64_t{-1});
        if (kernel > 0) v.drops += static_cast<uint64_t>(kernel);
      }
    }
  }
  return out;
}

}  // namespace

void Watcher::fill_pauses(WatchFrame& f) {
  const auto cg = congestion::read_counters(lab_dir(st_.lab));
  f.congestion = cg.source;
  f.congestion_why = cg.why;
  if (!cg.has_counts()) return;
  // A restarted agent counts from zero: every baseline starts again.
  if (!cg_first_ || cg_first_->pid != cg.pid) {
    cg_first_ = cg;
    cg_prev_.reset();
    cg_window_ = {};
  }
  // The window: between the stats files read at this frame and the previous one (kept while
  // the agent wrote no newer one).
  if (cg_prev_ && cg.uptime_s > cg_prev_->uptime_s) cg_window_ = congestion::delta(*cg_prev_, cg);
  if (!cg_prev_ || cg.uptime_s > cg_prev_->uptime_s) cg_prev_ = cg;
  const bool window = cg_window_.has_counts() && cg_window_.uptime_s > 0;
  f.congestion_window_s = window ? cg_window_.uptime_s : 0;
  auto fill = [&](WatchPause& p, const std::string& end) {
    if (const auto u = cg.upstreams.find(end); u != cg.upstreams.end()) {
      p.pausable = true;
      p.paused_now = u->second.paused_now;
      if (const auto w = cg_window_.upstreams.find(end);
          window && w != cg_window_.upstreams.end()) {
        p.pauses = w->second.pauses_received;
        p.paused_frac = std::clamp(
            static_cast<double>(w->second.paused_ns) / (cg_window_.uptime_s * 1e9), 0.0, 1.0);
      }
    }
    if (const auto q = cg.ports.find(end); q != cg.ports.end()) {
      p.polled = true;
      p.lossless = q->second.lossless();
      const auto first = cg_first_->ports.find(end);
      // Lossless violations: the watchdog's own drops (a storm's mitigation) are meant.
      const uint64_t drops0 = first != cg_first_->ports.end() ? first->second.violations() : 0;
      const uint64_t drops = q->second.violations();
      p.drops = drops >= drops0 ? drops - drops0 : drops;
      p.ecn = q->second.model == "ecn";
      if (const auto w = cg_window_.ports.find(end); window && w != cg_window_.ports.end()) {
        p.xoff = w->second.xoff_events;
        p.pauses_sent = w->second.pauses_sent;
        p.ce_marks = w->second.ce_marks.value_or(0);
        p.ect = w->second.ect;
      }
    }
  };
  for (auto& w : f.links) {
    fill(w.pause_ab, w.a);
    fill(w.pause_ba, w.b);
  }
}

std::vector<json> last_events(const std::string& lab, size_t n) {
  std::ifstream in(lab_dir(lab) + "/events.jsonl", std::ios::binary);
  std::vector<json> out;
  if (!in) return out;
  // The tail: the last 64 KiB hold far more than n lines.
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(std::max<std::streamoff>(0, size - 65536));
  std::deque<json> keep;
  std::string line;
  if (size > 65536) std::getline(in, line);  // a partial first line
  while (std::getline(in, line)) {
    auto j = json::parse(line, nullptr, false);
    if (!j.is_object()) continue;
    keep.push_back(std::move(j));
    if (keep.size() > n) keep.pop_front();
  }
  out.assign(keep.begin(), keep.end());
  return out;
}

Result<Watcher> Watcher::open(const std::string& lab) {
  auto st = load_state(lab);
  if (!st) return std::unexpected(Error{st.error().message, 0, kExitBadInput});
  if (st->phase != "up") return bad_input("lab " + lab + " is " + st->phase + ", not up");
  return Watcher(std::move(*st));
}

Result<WatchFrame> Watcher::sample() {
  auto status = read_status(st_.lab);
  if (!status) return std::unexpected(status.error());
  if (!status->live) return bad_input("watch reads the lab's namespaces: run it as root");
  const auto now = std::chrono::steady_clock::now();
  st_ = status->state;  // the figures in force now (link set, faults)
  const auto& live = *status->live;
  const auto stages = stage_views(st_);
  const auto overrides = load_link_overrides(st_.lab);

  WatchFrame f;
  std::vector<Counters> cur(st_.topo.links.size());
  for (size_t i = 0; i < st_.topo.links.size(); ++i) {
    const auto& l = st_.topo.links[i];
    WatchLink w;
    w.link = i;
    w.a = end_name(l.a);
    w.b = end_name(l.b);
    w.tier = plan::to_string(l.tier);
    w.emulated_bps = l.emulated.rate.bps;
    const auto* na = st_.topo.node(l.a.node);
    const auto* nb = st_.topo.node(l.b.node);
    const auto* a = na ? find_iface(live, na->netns, l.a.ifname) : nullptr;
    const auto* b = nb ? find_iface(live, nb->netns, l.b.ifname) : nullptr;
    w.seen = a && b;
    auto& c = cur[i];
    if (a) {
      c.tx = a->tx_bytes;
      c.rx = a->rx_bytes;
      c.drops += a->rx_dropped + a->tx_dropped + a->qdisc_drops;
      w.backlog_bytes += a->qdisc_backlog;
      w.backlog_ab = a->qdisc_backlog;
    }
    if (b) {
      c.drops += b->rx_dropped + b->tx_dropped + b->qdisc_drops;
      w.backlog_bytes += b->qdisc_backlog;
      w.backlog_ba = b->qdisc_backlog;
    }
    w.up = a && b && a->oper_up && b->oper_up;
    w.changed = overrides.contains(link_key(l));
    w.stage_held = stages[i].held;
    c.stage_drops = stages[i].drops;
    f.links.push_back(w);
  }
  if (!started_ || first_.size() != cur.size()) {
    started_ = true;
    t0_ = prev_ = now;
    first_ = last_ = cur;
  }
  const double dt = std::chrono::duration<double>(now - prev_).count();
  f.t_s = std::chrono::duration<double>(now - t0_).count();
  f.interval_s = dt;
  // Counters that went back (an interface made again by a fault's repair) count from zero.
  auto delta = [](uint64_t now_v, uint64_t then_v) {
    return now_v >= then_v ? now_v - then_v : now_v;
  };
  for (size_t i = 0; i < f.links.size(); ++i) {
    auto& w = f.links[i];
    if (dt > 0) {
      w.ab_bps = static_cast<double>(delta(cur[i].tx, last_[i].tx)) * 8 / dt;
      w.ba_bps = static_cast<double>(delta(cur[i].rx, last_[i].rx)) * 8 / dt;
    }
    w.drops = delta(cur[i].drops, first_[i].drops);
    w.stage_drops = delta(cur[i].stage_drops, first_[i].stage_drops);
  }
  last_ = cur;
  prev_ = now;
  fill_pauses(f);
  std::stable_sort(f.links.begin(), f.links.end(), [](const WatchLink& x, const WatchLink& y) {
    const double bx = std::max(x.ab_bps, x.ba_bps), by = std::max(y.ab_bps, y.ba_bps);
    if (bx != by) return bx > by;
    return x.a + x.b < y.a + y.b;
  });

  std::ifstream sup_in(lab_dir(st_.lab) + "/supervisor.json");
  const auto sup = json::parse(sup_in, nullptr, false);
  for (const auto& c : runner::states_from_json(sup)) {
    if (!c.name.starts_with("stage ")) continue;
    ++f.stages;
    f.stages_running += c.running;
    f.stage_restarts += c.restarts;
  }
  f.events = last_events(st_.lab, 8);
  return f;
}

}  // namespace tb::lab
