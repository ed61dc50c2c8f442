#include "congestion/pause.h"

#include <algorithm>

#include "core/error.h"
#include "stage/mark_table.h"

namespace tb::congestion {

const char* reason_name(Reason r) {
  switch (r) {
    case Reason::kXoff:
      return "xoff";
    case Reason::kXon:
      return "xon";
    case Reason::kExpired:
      return "expired";
    case Reason::kOwnership:
      return "ownership";
    case Reason::kLeftover:
      return "leftover";
  }
  return "?";
}

const char* action_name(PortAction a) {
  switch (a) {
    case PortAction::kHold:
      return "hold";
    case PortAction::kRelease:
      return "release";
    case PortAction::kMitigate:
      return "mitigate";
  }
  return "?";
}

PauseMachine::PauseMachine(PauseConfig config)
    : config_(std::move(config)),
      ports_(config_.ports.size()),
      ups_(config_.upstreams.size()),
      touched_(config_.upstreams.size(), 0) {}

bool PauseMachine::active(const UpstreamState& u, int64_t now, int64_t interval) const {
  if (!u.rx_known) return true;  // no rx counter: assume it feeds
  return now - u.active_at <= std::max(kActivityWindowNs, interval);
}

void PauseMachine::pause(int u, int by, int64_t now, Reason why) {
  UpstreamState& s = ups_[static_cast<size_t>(u)];
  auto it = std::lower_bound(s.paused_by.begin(), s.paused_by.end(), by);
  if (by >= 0 && (it == s.paused_by.end() || *it != by)) s.paused_by.insert(it, by);
  s.refreshed_at = now;
  if (s.paused) return;
  s.paused = true;
  s.paused_at = now;
  ++s.pauses;
  touched_[static_cast<size_t>(u)] = 1;
  out_.push_back({u, true, why, by});
}

void PauseMachine::resume(int u, int64_t now, Reason why) {
  UpstreamState& s = ups_[static_cast<size_t>(u)];
  s.paused_by.clear();
  if (!s.paused) return;
  s.paused = false;
  s.paused_ns += now - s.paused_at;
  s.active_at = now;  // resumed traffic counts as activity until the counters show it
  touched_[static_cast<size_t>(u)] = 1;
  out_.push_back({u, false, why});
}

void PauseMachine::set_storm(int p, bool on) {
  TB_CHECK(p >= 0 && static_cast<size_t>(p) < ports_.size());
  TB_CHECK(config_.ports[static_cast<size_t>(p)].upstream < 0);
  ports_[static_cast<size_t>(p)].storm = on;
}

uint64_t PauseMachine::dropped(int p) const {
  const PortState& st = ports_[static_cast<size_t>(p)];
  return st.dropped +
         (st.mitigating && st.drops_last >= st.drops_at ? st.drops_last - st.drops_at : 0);
}

void PauseMachine::hold(int p, int64_t now) {
  PortState& st = ports_[static_cast<size_t>(p)];
  st.held = true;
  st.held_at = now;
  st.stall_since = now;
  st.bytes_known = false;
  port_out_.push_back({p, PortAction::kHold});
}

// Storms and the watchdog, per port, before the queues are judged.
bool PauseMachine::storms(int64_t now, std::span<const PortSample> samples) {
  bool busy = false;
  for (size_t i = 0; i < ports_.size(); ++i) {
    PortState& st = ports_[i];
    const PortSample& x = samples[i];
    const int p = static_cast<int>(i);
    if (x.seen) st.drops_last = x.drops;
    if (st.mitigating) {
      busy = true;
      if (now < st.mitigate_until && st.storm) continue;
      // Mitigation over (or the storm lifted): pauses are honoured again.
      st.mitigating = false;
      const uint64_t d = st.drops_last >= st.drops_at ? st.drops_last - st.drops_at : 0;
      st.dropped += d;
      wd_out_.push_back({p, false, 0, d});
      if (st.storm) {
        hold(p, now);
      } else {
        port_out_.push_back({p, PortAction::kRelease});
      }
      continue;
    }
    if (st.storm && !st.held) {
      hold(p, now);
      busy = true;
      continue;
    }
    if (!st.storm && st.held) {
      st.held = false;
      port_out_.push_back({p, PortAction::kRelease});
      busy = true;
      continue;
    }
    if (!st.held) {
      // A killed agent's storm hold: found at the pause rate, not held, not an upstream.
      if (config_.ports[i].upstream < 0 && x.seen && x.tbf_rate == kPauseRate) {
        ++st.leftovers;
        port_out_.push_back({p, PortAction::kRelease});
      }
      continue;
    }
    busy = true;
    if (x.seen && x.tbf_rate != 0 && x.tbf_rate != kPauseRate) {
      // Someone set its TBF while held (`link set`): held again, its stall clock restarted.
      ++st.storm_repaused;
      hold(p, now);
      continue;
    }
    if (!x.seen || config_.watchdog_ns <= 0) continue;
    if (!st.bytes_known) {
      // The first sample after the hold: its bytes include the pause's leak (one frame).
      st.bytes_known = true;
      st.bytes_last = x.bytes;
    } else if (x.bytes != st.bytes_last) {
      st.bytes_last = x.bytes;
      st.stall_since = now;
    }
    if (x.backlog == 0) st.stall_since = now;  // nothing to send is no stall
    if (now - st.stall_since < config_.watchdog_ns) continue;
    // A storm: paused, holding bytes, nothing sent for watchdog_ns.
    ++st.trips;
    st.held = false;
    st.mitigating = true;
    st.mitigate_until = now + config_.restore_ns;
    st.drops_at = st.drops_last;
    wd_out_.push_back({p, true, now - st.held_at, 0});
    port_out_.push_back({p, PortAction::kMitigate});
  }
  return busy;
}

int64_t PauseMachine::paused_ns(int u, int64_t now) const {
  const UpstreamState& s = ups_[static_cast<size_t>(u)];
  return s.paused_ns + (s.paused ? now - s.paused_at : 0);
}

const std::vector<Command>& PauseMachine::step(int64_t now, std::span<const PortSample> ports,
                                               std::span<const UpstreamSample> upstreams) {
  TB_CHECK(ports.size() == ports_.size() && upstreams.size() == ups_.size());
  out_.clear();
  port_out_.clear();
  wd_out_.clear();
  std::fill(touched_.begin(), touched_.end(), 0);
  const int64_t interval = std::max<int64_t>(0, now - last_poll_);
  last_poll_ = now;

  // Activity: bytes received at the switch since the last sample against 1% of the rate.
  for (size_t i = 0; i < ups_.size(); ++i) {
    UpstreamState& s = ups_[i];
    const UpstreamSample& x = upstreams[i];
    if (!x.rx_seen) continue;
    if (s.rx_known && x.rx_bytes >= s.rx_last) {
      const double dt = static_cast<double>(now - s.rx_last_at) / 1e9;
      const double need = kActivityShare * static_cast<double>(config_.upstreams[i].rate) * dt;
      if (static_cast<double>(x.rx_bytes - s.rx_last) >= need && x.rx_bytes > s.rx_last)
        s.active_at = now;
    } else if (!s.rx_known) {
      s.active_at = now;  // the first sample: unknown history counts as active
    }
    s.rx_known = true;
    s.rx_last = x.rx_bytes;
    s.rx_last_at = now;
  }

  // Expiry (a late agent) and ownership, before the queues are looked at.
  for (size_t i = 0; i < ups_.size(); ++i) {
    UpstreamState& s = ups_[i];
    const int u = static_cast<int>(i);
    const int64_t q = config_.upstreams[i].quantum_ns;
    if (s.paused && q > 0 && now - s.refreshed_at > q) {
      ++s.pause_expired;
      resume(u, now, Reason::kExpired);
      continue;
    }
    const uint64_t rate = upstreams[i].tbf_rate;
    if (rate == 0) continue;
    if (s.paused && rate != kPauseRate) {
      ++s.repaused;
      touched_[i] = 1;
      out_.push_back({u, true, Reason::kOwnership});
    } else if (!s.paused && rate == kPauseRate) {
      ++s.leftovers;
      touched_[i] = 1;
      out_.push_back({u, false, Reason::kLeftover});
    }
  }

  // The queues: hysteresis, then pauses and resumes.
  bool hot = storms(now, ports);
  for (size_t p = 0; p < ports_.size(); ++p) {
    PortState& st = ports_[p];
    const PauseConfig::Port& c = config_.ports[p];
    if (ports[p].seen) st.backlog = ports[p].backlog;
    st.backlog_max = std::max(st.backlog_max, st.backlog);
    if (c.ecn) {
      // Marking follows the backlog each poll; a queue past a quarter of kmin keeps the fast poll.
      st.marking_p = stage::mark_probability(st.backlog, c.kmin, c.kmax, c.pmax);
      if (st.backlog * 4 > c.kmin) hot = true;
    }
    if (!c.lossless) continue;
    if (st.backlog * 4 > c.xoff) hot = true;
    if (!st.xoff && st.backlog > c.xoff) {
      st.xoff = true;
      ++st.xoff_events;
    } else if (st.xoff && st.backlog < c.xon) {
      st.xoff = false;
      for (int f : c.feeders) {
        UpstreamState& s = ups_[static_cast<size_t>(f)];
        auto it = std::lower_bound(s.paused_by.begin(), s.paused_by.end(), static_cast<int>(p));
        if (it != s.paused_by.end() && *it == static_cast<int>(p)) s.paused_by.erase(it);
      }
    }
    if (!st.xoff) continue;
    hot = true;
    for (int f : c.feeders) {
      UpstreamState& s = ups_[static_cast<size_t>(f)];
      if (touched_[static_cast<size_t>(f)] && !s.paused) continue;  // expired this poll
      if (s.paused || active(s, now, interval)) pause(f, static_cast<int>(p), now, Reason::kXoff);
    }
  }
  for (size_t i = 0; i < ups_.size(); ++i) {
    UpstreamState& s = ups_[i];
    if (!s.paused) continue;
    hot = true;
    if (s.paused_by.empty()) {
      resume(static_cast<int>(i), now, Reason::kXon);
    } else {
      s.refreshed_at = now;  // still wanted: the refresh real PFC would send
    }
  }
  if (hot) fast_until_ = now + kFastHoldNs;
  return out_;
}

const std::vector<Command>& PauseMachine::resume_all(int64_t now) {
  out_.clear();
  port_out_.clear();
  wd_out_.clear();
  for (size_t i = 0; i < ups_.size(); ++i) resume(static_cast<int>(i), now, Reason::kXon);
  for (size_t i = 0; i < ports_.size(); ++i) {
    PortState& p = ports_[i];
    p.xoff = false;
    if (p.mitigating) {
      const uint64_t d = p.drops_last >= p.drops_at ? p.drops_last - p.drops_at : 0;
      p.dropped += d;
      wd_out_.push_back({static_cast<int>(i), false, 0, d});
    }
    if (p.held || p.mitigating) port_out_.push_back({static_cast<int>(i), PortAction::kRelease});
    p.held = p.mitigating = false;
  }
  return out_;
}

uint64_t PauseMachine::wake_headroom(int port) const {
  const PortState& st = ports_[static_cast<size_t>(port)];
  const PauseConfig::Port& c = config_.ports[static_cast<size_t>(port)];
  uint64_t threshold = UINT64_MAX;
  if (c.lossless) threshold = c.xoff / 4;
  if (c.ecn) threshold = std::min(threshold, c.kmin / 4);
  if (threshold == UINT64_MAX) return UINT64_MAX;  // neither: nothing it does depends on it
  return st.backlog >= threshold ? 0 : threshold - st.backlog;
}

int64_t PauseMachine::interval_ns(int64_t now) const {
  return fast(now) ? config_.poll_ns : config_.idle_poll_ns;
}

}  // namespace tb::congestion
