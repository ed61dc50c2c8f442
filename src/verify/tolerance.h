// The comparison half of `testbedctl verify`: what a link should measure given the figures in
// force on it (the scenario's, or what `link set` made them), how far off a measurement may be,
// and the verdict. Pure, so every rule is unit-tested without root. Targets from issue 13:
//
//   delay   configured 100 us .. 1 ms: one-way error within 10% + 20 us; >= 1 ms: 1% + 50 us.
//           One-way = (median RTT over the link - median RTT of the same probes over lo) / 2,
//           since each direction of a link is shaped alike (shaping/link_shape.h). Medians of
//           many probes: a scheduler hiccup moves neither. Below 100 us: not checked (the
//           targets start there; a veth hop alone costs a few us).
//   rate    configured 10 Mbit/s .. 2 Gbit/s: TCP goodput within 5% of the ideal goodput,
//           rate x (MTU - 52) / (MTU + 14): a segment carries MTU - 20 IP - 20 TCP - 12
//           timestamp option bytes of payload and costs MTU + 14 Ethernet header bytes in the
//           qdisc's accounting (1448/1514 = 0.956 at MTU 1500; research/limits.md 3).
//   jitter  configured >= 0.5 ms: one-way standard deviation within 10%. One-way =
//           sqrt((var RTT - sigma_base^2) / 2), sigma_base = IQR / 1.349 of the base:
//           independent jitter on both directions adds variances. The configured jitter is the
//           standard deviation of a normal sample added to each packet's delay (stage/
//           delay_line.h; netem's default distribution is also normal-ish with -u tables).
//   loss    lost probes inside the 99% binomial acceptance interval for the round-trip loss
//           p_rtt = 1 - (1 - p)^2 (a probe and its echo are each lost with p); and, where the
//           link has loss, the TCP transfer's retransmitted share of data segments
//           (tcpi_total_retrans / tcpi_data_segs_out) against p (check_tcp_loss).
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

inline constexpr Duration kMinCheckedDelay{100'000};   // 100 us
inline constexpr Duration kMsDelay{1'000'000};         // from 1 ms on the tighter target
inline constexpr double kSubMsRelTolerance = 0.10;     // below 1 ms: 10% ...
inline constexpr Duration kSubMsAbsTolerance{20'000};  // ... + 20 us
inline constexpr double kMsRelTolerance = 0.01;        // 1 ms and more: 1% ...
inline constexpr Duration kMsAbsTolerance{50'000};     // ... + 50 us
inline constexpr Rate kMinCheckedRate{10e6};           // 10 Mbit/s
inline constexpr Rate kMaxCheckedRate{2e9};            // 2 Gbit/s
inline constexpr double kRateRelTolerance = 0.05;      // 5% of the ideal goodput
inline constexpr Duration kMinCheckedJitter{500'000};  // 0.5 ms
inline constexpr double kJitterRelTolerance = 0.10;    // 10%
// Probes a link with checked jitter gets at least: the one-way sigma estimated from n round
// trips has a relative standard error of about 1 / sqrt(2n), 2.5% here, so 10% is 4 of them.
inline constexpr int kJitterProbes = 800;
inline constexpr double kLossConfidence = 0.99;  // two-sided binomial interval
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
  // On a lossy link: a transfer paced at half the link's rate (no queue, so no congestion
  // drops: every retransmission is a loss the link made), for check_tcp_loss.
  std::optional<probe::GoodputResult> loss_goodput;
  uint64_t loss_pace_bps = 0;
};

// Fraction of the shaped rate TCP can carry as payload: (mtu - 52) / (mtu + 14).
double tcp_payload_ratio(int mtu);
// 1 - (1 - p)^2 for p in [0, 1].
double round_trip_loss(double p);
// The one-way tolerance of a hop configured for `d` (issue 13's targets): below 1 ms
// 10% + 20 us, from 1 ms on 1% + 50 us. Also used for hops below 100 us, where the 20 us is
// the whole of it (a path's tolerance sums its hops').
Duration delay_tolerance(Duration d);
// "10% + 20 us" or "1% + 50 us": the rule delay_tolerance applies to `d`.
std::string delay_tolerance_rule(Duration d);

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
// A paced TCP transfer's retransmissions against the configured loss (issue 22): the share of
// data segments retransmitted, retrans / data_segs_out (tcpi_total_retrans, tcpi_data_segs_out).
// The loss rule drops whole GSO super-packets (up to ~45 segments at once), so losses come in
// clusters of c segments, c = the ~1 ms of data tcp_tso_autosize puts in one super-packet at
// the transfer's pacing rate (at least 2, at most 45); the expected share is still p, the spread
// is that of a binomial over segments / c clusters. Accepted: c x the 99% binomial interval of
// p over segments / c, plus 10% of the expected for what TCP retransmits besides (a lost
// retransmission, a tail-loss probe). The transfer is paced at half the link's rate so that no
// queue fills: an unpaced one on a shaped link of short RTT retransmitted ~40% of its segments
// with no loss configured (tail drops). Not checked without loss, or when the transfer sent too
// few segments to expect 5 lost clusters. A loss rule at the TCP sender's own egress
// (POSTROUTING, where the far end is a bridge port) fails it: the drop comes back to TCP as a
// local error (EPERM), which it sends again without counting a retransmission, unlike a loss in
// the network (or netem's, which reports success).
Check check_tcp_loss(double configured_pct, Rate rate,
                     const std::optional<probe::GoodputResult>& g);

// All of them, in the order rate, delay, jitter, loss, tcp-loss, against the figures in force.
std::vector<Check> evaluate(const plan::EmulatedFigures& f, const Measurement& m);

}  // namespace tb::verify
