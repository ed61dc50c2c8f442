#include "verify/tolerance.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace tb::verify {
namespace {

std::string not_measured(const char* what) {
  return std::string("no ") + what + " measurement (the probe failed; see the class's errors)";
}

// Mean and variance of the RTT the link adds on top of the probe's own software path. The
// base is taken robustly: its median, and its spread as IQR / 1.349 (the standard deviation of
// a normal sample), so that a scheduler hiccup during the base run is not subtracted from the
// link's figures.
struct Added {
  double mean_us, var_us2;
};
double robust_sigma(const probe::Summary& s) {
  return (s.p75 - s.p25) / 1.349;
}
std::optional<Added> added(const std::optional<probe::RttResult>& rtt,
                           const std::optional<probe::RttResult>& base) {
  if (!rtt || !base || rtt->summary.n == 0 || base->summary.n == 0) return std::nullopt;
  const auto& r = rtt->summary;
  const double b = robust_sigma(base->summary);
  return Added{r.mean - base->summary.p50, r.stdev * r.stdev - b * b};
}

}  // namespace

const char* to_string(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "pass";
    case Verdict::kFail:
      return "fail";
    case Verdict::kNotChecked:
      return "not checked";
  }
  return "?";
}

double tcp_payload_ratio(int mtu) {
  return static_cast<double>(mtu - kTcpIpHeaders - kTcpTimestampOption) /
         static_cast<double>(mtu + kEthernetHeader);
}

double round_trip_loss(double p) {
  return 1 - (1 - p) * (1 - p);
}

Duration delay_tolerance(Duration d) {
  const double ns = static_cast<double>(d.ns);
  if (d < kMsDelay)
    return Duration{static_cast<int64_t>(kSubMsRelTolerance * ns) + kSubMsAbsTolerance.ns};
  return Duration{static_cast<int64_t>(kMsRelTolerance * ns) + kMsAbsTolerance.ns};
}

std::string delay_tolerance_rule(Duration d) {
  return d < kMsDelay ? "10% + 20 us" : "1% + 50 us";
}

BinomialRange binomial_range(int n, double p, double confidence) {
  if (n <= 0 || p <= 0) return {0, 0};
  if (p >= 1) return {n, n};
  const double tail = (1 - confidence) / 2;
  const double lp = std::log(p), lq = std::log1p(-p);
  const double lgn = std::lgamma(n + 1.0);
  BinomialRange r{-1, n};
  double cdf = 0;
  for (int k = 0; k <= n; ++k) {
    cdf += std::exp(lgn - std::lgamma(k + 1.0) - std::lgamma(n - k + 1.0) + k * lp + (n - k) * lq);
    if (r.low < 0 && cdf > tail) r.low = k;  // P(X < low) <= tail
    if (cdf >= 1 - tail - 1e-12) {           // P(X > high) <= tail
      r.high = k;
      break;
    }
  }
  if (r.low < 0) r.low = 0;
  return r;
}

Check check_rate(Rate configured, int mtu, const std::optional<probe::GoodputResult>& g) {
  Check c{.name = "rate", .configured = configured.bps};
  const double ratio = tcp_payload_ratio(mtu);
  c.expected = configured.bps * ratio;
  c.low = c.expected * (1 - kRateRelTolerance);
  c.high = c.expected * (1 + kRateRelTolerance);
  c.detail = "ideal TCP goodput = rate x " + std::to_string(mtu - 52) + "/" +
             std::to_string(mtu + 14) + " (MTU " + std::to_string(mtu) +
             ": payload MTU-52, frame MTU+14)";
  if (g) {
    c.achieved = g->goodput_bps;
    if (g->mss > 0 && g->mss != mtu - kTcpIpHeaders - (g->timestamps ? kTcpTimestampOption : 0))
      c.detail += "; the connection's MSS was " + std::to_string(g->mss) +
                  ", not what the link's MTU implies";
  }
  if (configured.bps <= 0) {
    c.reason = "the link is not rate-limited";
  } else if (configured < kMinCheckedRate || configured > kMaxCheckedRate) {
    c.reason = format_rate(configured) +
               " is outside 10Mbit..2Gbit, the range one veth is "
               "shaped accurately at on this host (research/limits.md 3)";
  } else if (!g) {
    c.verdict = Verdict::kFail;
    c.reason = not_measured("goodput");
  } else {
    const bool ok = *c.achieved >= c.low && *c.achieved <= c.high;
    c.verdict = ok ? Verdict::kPass : Verdict::kFail;
    if (!ok)
      c.reason = fmt::format("goodput {:+.1f}% from the ideal, more than 5%",
                             (*c.achieved / c.expected - 1) * 100);
  }
  return c;
}

Check check_delay(Duration configured, const std::optional<probe::RttResult>& rtt,
                  const std::optional<probe::RttResult>& base) {
  Check c{.name = "delay", .configured = configured.ms(), .expected = configured.ms()};
  const double tol = delay_tolerance(configured).ms();
  c.low = c.expected - tol;
  c.high = c.expected + tol;
  const bool have = rtt && base && rtt->summary.n > 0 && base->summary.n > 0;
  if (have) {
    c.achieved = (rtt->summary.p50 - base->summary.p50) / 2 / 1000;
    c.detail = fmt::format("one-way = (median RTT {:.3f} ms - median base {:.3f} ms) / 2",
                           rtt->summary.p50 / 1000, base->summary.p50 / 1000);
  }
  if (configured < kMinCheckedDelay) {
    c.reason = format_duration(configured) +
               " is below 100us, where the targets start (a veth hop alone costs a few us)";
  } else if (!have) {
    c.verdict = Verdict::kFail;
    c.reason = not_measured("RTT");
  } else {
    const bool ok = *c.achieved >= c.low && *c.achieved <= c.high;
    c.verdict = ok ? Verdict::kPass : Verdict::kFail;
    if (!ok)
      c.reason = fmt::format("one-way delay off by {:+.3f} ms, more than {} = {:.3f} ms",
                             *c.achieved - c.expected, delay_tolerance_rule(configured), tol);
  }
  return c;
}

Check check_jitter(Duration configured, const std::optional<probe::RttResult>& rtt,
                   const std::optional<probe::RttResult>& base) {
  Check c{.name = "jitter", .configured = configured.ms(), .expected = configured.ms()};
  c.low = c.expected * (1 - kJitterRelTolerance);
  c.high = c.expected * (1 + kJitterRelTolerance);
  const auto a = added(rtt, base);
  if (a) {
    c.achieved = std::sqrt(std::max(0.0, a->var_us2) / 2) / 1000;
    c.detail = fmt::format(
        "one-way stdev = sqrt(((stdev RTT {:.3f} ms)^2 - (base IQR/1.349 {:.3f} ms)^2) / 2); "
        "the configured figure is the stdev of a normal sample per packet",
        rtt->summary.stdev / 1000, robust_sigma(base->summary) / 1000);
  }
  if (configured.ns == 0) {
    c.reason = "no jitter configured (10% of 0 is no tolerance); the measured figure is shown";
  } else if (configured < kMinCheckedJitter) {
    c.reason = format_duration(configured) +
               " is below 0.5ms; the probe's own scheduling "
               "noise (~0.01-0.2 ms, research/limits.md 4a) exceeds 10% of it";
  } else if (!a) {
    c.verdict = Verdict::kFail;
    c.reason = not_measured("RTT");
  } else {
    const bool ok = *c.achieved >= c.low && *c.achieved <= c.high;
    c.verdict = ok ? Verdict::kPass : Verdict::kFail;
    if (!ok)
      c.reason = fmt::format("jitter {:+.0f}% from the configured, more than 10%",
                             (*c.achieved / c.expected - 1) * 100);
  }
  return c;
}

Check check_loss(double configured_pct, const std::optional<probe::RttResult>& rtt) {
  Check c{.name = "loss", .configured = configured_pct};
  const double p_rtt = round_trip_loss(configured_pct / 100);
  if (!rtt || rtt->sent == 0) {
    c.verdict = Verdict::kFail;
    c.reason = not_measured("loss");
    return c;
  }
  const int n = rtt->sent, lost = rtt->sent - rtt->received;
  c.expected = n * p_rtt;
  c.achieved = lost;
  const auto range = binomial_range(n, p_rtt);
  c.low = range.low;
  c.high = range.high;
  const double one_way = 1 - std::sqrt(1 - static_cast<double>(lost) / n);
  c.detail = fmt::format(
      "{} of {} probes unanswered; p_rtt = 1-(1-p)^2 = {:.4f}%, one-way estimate {:.3f}%", lost, n,
      p_rtt * 100, one_way * 100);
  const bool ok = lost >= range.low && lost <= range.high;
  c.verdict = ok ? Verdict::kPass : Verdict::kFail;
  if (!ok)
    c.reason = std::to_string(lost) + " lost is outside the 99% binomial interval [" +
               std::to_string(range.low) + ", " + std::to_string(range.high) + "]";
  return c;
}

Check check_tcp_loss(double configured_pct, Rate pace,
                     const std::optional<probe::GoodputResult>& g) {
  Check c{.name = "tcp-loss", .configured = configured_pct};
  const double p = configured_pct / 100;
  if (g && g->data_segs_out > 0) {
    c.achieved = 100.0 * g->retransmits / static_cast<double>(g->data_segs_out);
    c.detail = fmt::format(
        "{} of {} data segments retransmitted (tcpi_total_retrans / tcpi_data_segs_out) in a "
        "transfer paced at {}; the loss rule drops whole GSO super-packets",
        g->retransmits, g->data_segs_out, format_rate(pace));
  }
  if (p <= 0) {
    c.reason = "the link has no loss";
    return c;
  }
  if (!g) {
    c.verdict = Verdict::kFail;
    c.reason = not_measured("paced loss transfer");
    return c;
  }
  if (g->data_segs_out == 0) {
    c.reason = "this tb-probe does not report data segments sent (tcpi_data_segs_out)";
    return c;
  }
  const int mss = g->mss > 0 ? g->mss : 1448;
  const double bps = pace.bps > 0 ? pace.bps : 20e9;
  const int cluster = std::clamp(static_cast<int>(std::lround(bps * 1e-3 / 8 / mss)), 2, 45);
  const auto n = static_cast<double>(g->data_segs_out);
  const int clusters = static_cast<int>(n / cluster);
  c.expected = configured_pct;
  if (clusters * p < 5) {
    c.reason = fmt::format(
        "{:.0f} segments in clusters of {} expect {:.1f} lost clusters, fewer "
        "than 5; a longer transfer would check it",
        n, cluster, clusters * p);
    return c;
  }
  const auto range = binomial_range(clusters, p);
  c.low = 100.0 * range.low * cluster / n;
  c.high = 100.0 * range.high * cluster / n + 0.10 * configured_pct;
  c.detail +=
      fmt::format("; clusters of {} segments (~1 ms of data at {}); accepted {:.3f}..{:.3f}%",
                  cluster, format_rate(Rate{bps}), c.low, c.high);
  const bool ok = *c.achieved >= c.low && *c.achieved <= c.high;
  c.verdict = ok ? Verdict::kPass : Verdict::kFail;
  if (!ok)
    c.reason = fmt::format("{:.3f}% of segments retransmitted is outside {:.3f}..{:.3f}%",
                           *c.achieved, c.low, c.high);
  return c;
}

std::vector<Check> evaluate(const plan::EmulatedFigures& f, const Measurement& m) {
  return {check_rate(f.rate, f.mtu, m.goodput), check_delay(f.delay, m.rtt, m.base),
          check_jitter(f.jitter, m.rtt, m.base), check_loss(f.loss_pct, m.rtt),
          check_tcp_loss(f.loss_pct, Rate{static_cast<double>(m.loss_pace_bps)}, m.loss_goodput)};
}

}  // namespace tb::verify
