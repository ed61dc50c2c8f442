#include "plan/emulate.h"

#include <cmath>

namespace tb::plan {

RealFigures real_figures(const scenario::LinkProfile& p) {
  return RealFigures{p.rate, p.delay, p.jitter, p.loss_pct, p.mtu};
}

EmulatedFigures emulate(const scenario::LinkProfile& p, const scenario::Scale& s) {
  EmulatedFigures e;
  e.rate = Rate{p.rate.bps / s.bandwidth};
  e.delay = Duration{static_cast<int64_t>(std::llround(static_cast<double>(p.delay.ns) * s.delay))};
  e.jitter =
      Duration{static_cast<int64_t>(std::llround(static_cast<double>(p.jitter.ns) * s.delay))};
  e.loss_pct = p.loss_pct;
  e.mtu = p.mtu;
  e.reorder = p.reorder;
  if (e.delay.ns > 0 && e.delay < kMinEmulatedDelay) {
    e.notes.push_back("delay " + format_duration(e.delay) + " is below " +
                      format_duration(kMinEmulatedDelay) +
                      ", the smallest delay the kernel path can emulate; not emulated (veth adds "
                      "a few us per hop)");
    e.delay = Duration{0};
  }
  if (e.jitter.ns > 0 && e.jitter < kMinEmulatedDelay) {
    e.notes.push_back("jitter " + format_duration(e.jitter) + " is below " +
                      format_duration(kMinEmulatedDelay) + "; not emulated");
    e.jitter = Duration{0};
  }
  // Congestion thresholds (issue 32) scale as a buffer's drain time does: real bytes / bandwidth
  // x delay scale; plan/congestion.cc floors them by the agent's reaction afterwards.
  e.congestion.model = p.congestion.model;
  auto scaled = [&](uint64_t real) -> uint64_t {
    return real == 0 ? 0
                     : static_cast<uint64_t>(
                           std::llround(static_cast<double>(real) / s.bandwidth * s.delay));
  };
  if (p.congestion.model == "ecn") {
    e.congestion.kmin = scaled(p.congestion.kmin);
    e.congestion.kmax = scaled(p.congestion.kmax);
    e.congestion.pmax = p.congestion.pmax_pct / 100.0;
  }
  if (p.congestion.model == "lossless") {
    e.congestion.xoff = scaled(p.congestion.xoff);
    e.congestion.xon = scaled(p.congestion.xon);
    e.congestion.headroom = scaled(p.congestion.headroom);
    e.congestion.buffer = scaled(p.congestion.buffer);
  }
  if (e.rate > kHostVethRate)
    e.notes.push_back("rate " + format_rate(e.rate) +
                      " exceeds what a veth carries on the "
                      "reference host (~" +
                      format_rate(kHostVethRate) + " measured); the link runs at host speed");
  return e;
}

}  // namespace tb::plan
