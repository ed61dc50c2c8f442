// The comparison half of `testbedctl verify`: what a link should measure given its configured
// (emulated) figures, how far off a measurement may be, and the verdict. Pure, so every rule
// is unit-tested without root:
//
//   delay   configured >= 1 ms: mean one-way delay within 3% + 0.2 ms. One-way =
//           (mean RTT over the link - median RTT of the same probes over lo) / 2, since each
//           direction of a link is shaped alike (shaping/link_shape.h). The base is the
//           probe's own software path; its median keeps a scheduler hiccup out of it.
//   rate    configured 10 Mbit/s .. 2 Gbit/s: TCP goodput within 5% of the ideal goodput,
//           rate x (MTU - 52) / (MTU + 14): a segment carries MTU - 20 IP - 20 TCP - 12
//           timestamp option bytes of payload and costs MTU + 14 Ethernet header bytes in the
//           qdisc's accounting (1448/1514 = 0.956 at MTU 1500; research/limits.md 3).
//   jitter  configured >= 0.5 ms: one-way standard deviation within 25%. One-way =
//           sqrt((var RTT - sigma_base^2) / 2), sigma_base = IQR / 1.349 of the base:
//           independent jitter on both directions adds variances.
//   loss    lost probes inside the 99% binomial acceptance interval for the round-trip loss
//           p_rtt = 1 - (1 - p)^2 (a probe and its echo are each lost with p).
// Figures outside those ranges are "not checked" with the reason; a check whose measurement
// is missing fails.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "core/units.h"
#include "plan/topology.h"
#include "probe/goodput.h"
#include "probe/rtt.h"

namespace tb::verify {

inline constexpr Duration kMinCheckedDelay{1'000'000};  // 1 ms
inline constexpr double kDelayRelTolerance = 0.03;      // 3% ...
inline constexpr Duration kDelayAbsTolerance{200'000};  // ... + 0.2 ms
inline constexpr Rate kMinCheckedRate{10e6};            // 10 Mbit/s
inline constexpr Rate kMaxCheckedRate{2e9};             // 2 Gbit/s
inline constexpr double kRateRelTolerance = 0.05;       // 5% of the ideal goodput
inline constexpr Duration kMinCheckedJitter{500'000};   // 0.5 ms
inline constexpr double kJitterRelTolerance = 0.25;     // 25%
inline constexpr double kLossConfidence = 0.99;         // two-sided binomial interval
// Ethernet header (14) counted by the qdisc; IPv4 (20) + TCP (20) + timestamps option (12).
inline constexpr int kEthernetHeader = 14;
inline constexpr int kTcpIpHeaders = 40;
inline constexpr int kTcpTimestampOption = 12;

enum class Verdict { kPass, kFail, kNotChecked };
const char* to_string(Verdict v);  // "pass", "fail", "not checked"

// One figure of one link. Numbers are in the unit the check names: rate in bit/s, delay and
// jitter in ms, loss in probes (configured in percent, per direction).
struct Check {
  std::string name;  // "rate", "delay", "jitter", "loss"
  double configured = 0;
  double expected = 0;  // ideal goodput, one-way delay, jitter, expected lost probes
  std::optional<double> achieved;
  double low = 0, high = 0;  // accepted range of `achieved`
  Verdict verdict = Verdict::kNotChecked;
  std::string reason;  // why not checked, or why it failed; empty on a pass
  std::string detail;  // how the figure came about, in words
};

// What the measurement produced for one link (absent when that step failed).
struct Measurement {
  std::optional<probe::RttResult> rtt;   // over the link
  std::optional<probe::RttResult> base;  // the same probes over lo in A's namespace
  std::optional<probe::GoodputResult> goodput;
};

// Fraction of the shaped rate TCP can carry as payload: (mtu - 52) / (mtu + 14).
double tcp_payload_ratio(int mtu);
// 1 - (1 - p)^2 for p in [0, 1].
double round_trip_loss(double p);

struct BinomialRange {
  int low = 0, high = 0;
  friend bool operator==(const BinomialRange&, const BinomialRange&) = default;
};
// Smallest [low, high] with P(X < low) <= a/2 and P(X > high) <= a/2 for X ~ Bin(n, p),
// a = 1 - confidence.
BinomialRange binomial_range(int n, double p, double confidence = kLossConfidence);

Check check_rate(Rate configured, int mtu, const std::optional<probe::GoodputResult>& g);
Check check_delay(Duration configured, const std::optional<probe::RttResult>& rtt,
                  const std::optional<probe::RttResult>& base);
Check check_jitter(Duration configured, const std::optional<probe::RttResult>& rtt,
                   const std::optional<probe::RttResult>& base);
Check check_loss(double configured_pct, const std::optional<probe::RttResult>& rtt);

// All four, in the order rate, delay, jitter, loss, against the link's emulated figures.
std::vector<Check> evaluate(const plan::EmulatedFigures& f, const Measurement& m);

}  // namespace tb::verify
