#include "report/verify.h"

#include <algorithm>
#include <cmath>

#include "core/realtime.h"
#include "probe/rtt.h"
#include "report/format.h"
#include "report/status.h"
#include "verify/measure.h"

namespace tb::report {
using verify::Check;
using verify::ClassResult;
using verify::ClassVerdict;
using verify::MeasureRequest;
using verify::Settings;
using verify::Verdict;
using verify::VerifyReport;

namespace {

std::string rate_text(double bps) {
  if (bps >= 1e9) return fmt::format("{:.2f}Gbit", bps / 1e9);
  if (bps >= 1e6) return fmt::format("{:.2f}Mbit", bps / 1e6);
  return fmt::format("{:.1f}kbit", bps / 1e3);
}

std::string bytes_text(double b) {
  if (b >= 1 << 30) return fmt::format("{:.2f} GiB", b / (1 << 30));
  if (b >= 1 << 20) return fmt::format("{:.1f} MiB", b / (1 << 20));
  return fmt::format("{:.0f} KiB", b / 1024);
}

const char* unit_of(const Check& c) {
  if (c.name == "rate") return "bit/s";
  if (c.name == "loss") return "probes";
  if (c.name == "tcp-loss") return "% of data segments";
  return "ms";
}

// Configured, expected, achieved, error and accepted range as the table shows them.
struct Cells {
  std::string configured, expected, achieved, error, range;
};
Cells cells(const Check& c) {
  Cells x;
  const bool have = c.achieved.has_value();
  const double a = have ? *c.achieved : 0;
  if (c.name == "rate") {
    x.configured = c.configured > 0 ? rate_text(c.configured) : "unlimited";
    x.expected = c.configured > 0 ? rate_text(c.expected) : "-";
    x.achieved = have ? rate_text(a) : "-";
    if (have && c.expected > 0) x.error = fmt::format("{:+.1f}%", (a / c.expected - 1) * 100);
    if (c.configured > 0) x.range = rate_text(c.low) + ".." + rate_text(c.high);
  } else if (c.name == "tcp-loss") {
    x.configured = fmt::format("{:g}%", c.configured);
    x.expected = c.expected > 0 ? fmt::format("{:g}%", c.expected) : "-";
    x.achieved = have ? fmt::format("{:.3f}%", a) : "-";
    x.range = fmt::format("{:.3f}..{:.3f}%", c.low, c.high);
  } else if (c.name == "loss") {
    x.configured = fmt::format("{:g}%", c.configured);
    x.expected = fmt::format("{:.1f} lost", c.expected);
    x.achieved = have ? fmt::format("{:.0f} lost", a) : "-";
    x.range = fmt::format("{:.0f}..{:.0f}", c.low, c.high);
  } else {
    x.configured = fmt::format("{:.3f}ms", c.configured);
    x.expected = fmt::format("{:.3f}ms", c.expected);
    x.achieved = have ? fmt::format("{:.3f}ms", a) : "-";
    if (have && c.name == "delay") x.error = fmt::format("{:+.3f}ms", a - c.expected);
    if (have && c.name == "jitter" && c.expected > 0)
      x.error = fmt::format("{:+.0f}%", (a / c.expected - 1) * 100);
    if (c.configured > 0) x.range = fmt::format("{:.3f}..{:.3f}ms", std::max(0.0, c.low), c.high);
  }
  if (c.verdict == Verdict::kNotChecked) x.range = "-";
  if (x.error.empty()) x.error = "-";
  return x;
}

nlohmann::json figures_json(const plan::EmulatedFigures& f) {
  return {{"rate_bps", f.rate.bps},
          {"delay_ms", f.delay.ms()},
          {"jitter_ms", f.jitter.ms()},
          {"loss_pct", f.loss_pct},
          {"mtu", f.mtu}};
}

std::string measured_line(const ClassResult& c) {
  const auto& q = c.request;
  const auto& m = c.outcome.m;
  std::string s = "      measured: ";
  if (m.rtt)
    s += "rtt " + std::to_string(m.rtt->received) + "/" + std::to_string(m.rtt->sent) +
         " answered (" + std::to_string(q.probes) + " x 32 B every " +
         std::to_string(q.interval_us) + " us, " + fmt::format("{:.2f} s", m.rtt->seconds) +
         (m.rtt->warmup_sent > 0 ? fmt::format(", after {} warm-up probe(s){}", m.rtt->warmup_sent,
                                               m.rtt->warmup_answered ? "" : ", none answered")
                                 : "") +
         "), mean " + fmt::format("{:.3f} ms", m.rtt->summary.mean / 1000) + ", p99 " +
         fmt::format("{:.3f} ms", m.rtt->summary.p99 / 1000) + "; ";
  if (m.base)
    s += "base over lo (" + std::to_string(m.base->received) + " probes): median " +
         fmt::format("{:.3f} ms", m.base->summary.p50 / 1000) + ", IQR " +
         fmt::format("{:.3f} ms", (m.base->summary.p75 - m.base->summary.p25) / 1000) + "; ";
  if (m.goodput)
    s += "goodput " + bytes_text(static_cast<double>(m.goodput->receiver.measured_bytes)) + " in " +
         fmt::format("{:.2f} s", static_cast<double>(m.goodput->receiver.measured_ns) / 1e9) +
         " at the receiver after " + std::to_string(q.warmup_ms) + " ms warm-up (sent for " +
         fmt::format("{:.1f} s", q.goodput_seconds) + "), buffer " +
         bytes_text(static_cast<double>(q.buffer)) + ", MSS " + std::to_string(m.goodput->mss) +
         ", " + std::to_string(m.goodput->retransmits) + " retransmits";
  if (m.loss_goodput)
    s += "; paced loss transfer at " + format_rate(Rate{static_cast<double>(m.loss_pace_bps)}) +
         ": " + std::to_string(m.loss_goodput->retransmits) + " of " +
         std::to_string(m.loss_goodput->data_segs_out) + " data segments retransmitted";
  return s + "\n";
}

nlohmann::json rtt_json(const probe::RttResult& r, const MeasureRequest& q, const char* over) {
  return {{"over", over},
          {"probes", q.probes},
          {"interval_us", q.interval_us},
          {"payload_bytes", 32},
          {"wire_bytes", verify::kProbeWireBytes},
          {"wait_ms", q.wait_ms},
          {"sent", r.sent},
          {"received", r.received},
          {"duplicates", r.duplicates},
          {"seconds", r.seconds},
          {"warmup_sent", r.warmup_sent},
          {"warmup_answered", r.warmup_answered},
          {"rtt_us", probe::to_json(r.summary)}};
}

std::string warmup_text() {
  return fmt::format(
      "untimed warm-up probes (one every {} ms until one is answered, at most {} ms: neighbours "
      "resolved before timing)",
      probe::kWarmupIntervalMs, verify::kRttWarmupMs);
}

std::string method_text(const Settings& s) {
  return "how:  rtt     " + std::to_string(s.probes) +
         " UDP probes (32 B payload, 74 B on the wire) every " + std::to_string(s.interval_us) +
         " us (longer on slow links: probes use <= 15% of the rate) from A, bound to its port on "
         "the link (SO_BINDTODEVICE), to tb-probe serve in B, after " +
         warmup_text() +
         "\n"
         "      base    the same probes over lo inside A's namespace (the probe's own software "
         "path)\n"
         "      delay   one-way = (median RTT - median base) / 2: each direction is shaped alike\n"
         "      jitter  one-way stdev = sqrt((var RTT - (IQR/1.349 of base)^2) / 2)\n"
         "      loss    unanswered probes vs the 99% binomial interval of p_rtt = 1-(1-p)^2; "
         "with loss, also a second TCP transfer paced at half the rate (no queue: every "
         "retransmission is the link's loss): its retransmitted share of data segments "
         "(tcpi_total_retrans / tcpi_data_segs_out) vs p, widened for the loss rule dropping "
         "whole GSO super-packets\n"
         "      goodput one TCP stream A -> B for " +
         fmt::format("{:.1f}", s.goodput_seconds) + " s, the first " + std::to_string(s.warmup_ms) +
         " ms excluded, counted by the receiver; SO_SNDBUF/SO_RCVBUF = 2 x BDP (>= 256 KiB); "
         "ideal = rate x (MTU-52)/(MTU+14) (payload MTU - 20 IP - 20 TCP - 12 timestamps, frame "
         "MTU + 14 Ethernet)\n"
         "      sched   probes (and the lab's delay stages) run SCHED_FIFO " +
         std::to_string(kRealtimePriority) +
         " where the host allows it, so a busy host's waits are not read as the link's; a "
         "refusal is in each probe's log and the stages' stats\n"
         "tolerances: delay 100us..1ms: 10% + 20us, >= 1ms: 1% + 50us | rate 10Mbit..2Gbit: 5% "
         "of ideal goodput | jitter >= 0.5ms: 10% of the configured stdev (normal) | loss: 99% "
         "binomial interval\n"
         "figures: those in force on the link (`link set` changes them); the scenario's are "
         "shown beside when they differ\n"
         "again: a class with a failed check is measured once more and judged on that (a host "
         "hiccup in one probe train moves a median; a fault of the emulation fails twice), and "
         "again while the host stalled during the reading (its base over lo's median >= " +
         fmt::format("{:.2f} ms or its IQR >= {:.2f} ms", verify::kBaseStallMedianUs / 1000,
                     verify::kBaseStallIqrUs / 1000) +
         ", the delay stages >= " + fmt::format("{:.0f}", verify::kStageLateUs) +
         " us late on average, or a SCHED_FIFO thread waking every " +
         std::to_string(verify::kWatchPeriodUs) + " us stalled (>= 1 ms late) for >= " +
         fmt::format("{:.0f}", verify::kPromptStallShare * 100) + "% of the reading), up to " +
         std::to_string(verify::kMaxReadings) +
         " readings; the last is judged, the earlier shown beside. A class still out of "
         "tolerance with the host stalled is NOT JUDGED (exit 2: verify again when the host is "
         "quieter); out of tolerance with the host fine, FAIL. Without real-time priority (a "
         "rootless lab without RLIMIT_RTPRIO: stages or verify's threads at SCHED_OTHER), a "
         "class whose only misses are delay or jitter checks of a delay under " +
         fmt::format("{:.0f}", verify::kSubMsDelayMs) +
         " ms is treated as one on a stalled host, its reason said\n";
}

// The line under a class or path left NOT JUDGED after `readings` readings, the last stalled
// (`timed_out`: its failed steps ran out of time, rather than a check out of tolerance).
std::string not_judged_line(size_t readings, const std::string& stall, const char* what,
                            bool timed_out) {
  // verify::without_realtime's reason: no stall, a rootless lab's scheduling.
  if (!timed_out && stall.starts_with("no real-time priority"))
    return fmt::format(
        "      => NOT JUDGED: out of tolerance in {} reading{}, the last with {}; the miss may "
        "be the scheduling's, not the {}'s: verify as root or with RLIMIT_RTPRIO\n",
        readings, readings == 1 ? "" : "s", stall, what);
  return fmt::format(
      "      => NOT JUDGED: {} in {} reading{}, the last while the host stalled ({}); the miss "
      "may be the host's, not the {}'s: verify again when the host is quieter\n",
      timed_out ? "a step ran out of time" : "out of tolerance", readings, readings == 1 ? "" : "s",
      stall, what);
}

std::string paths_text(const VerifyReport& r) {
  std::string s = "verify --paths lab " + r.lab + "  scenario " + r.scenario +
                  (r.under_load ? "  UNDER LOAD" : "") + "\n";
  s += "shaping backend (as status reports it): " + r.shaping + "\n";
  s += "how:  rtt     " + std::to_string(r.settings.probes) + " UDP probes (32 B) every " +
       std::to_string(r.settings.interval_us) +
       " us from the first node to the second's address (plan::reach, as the hosts files name "
       "it), sent by the namespace's routes, after " +
       warmup_text() +
       "; base: the same probes over lo in the first node's "
       "namespace\n"
       "      path    the links the kernel's routes take now, out and back (RTM_GETROUTE in each "
       "namespace, bridges crossed by the next L3 hop), with the delays in force on each\n"
       "      judged  median RTT - (out + back delays + median base) within the sum of every "
       "hop's tolerance (100us..1ms: 10% + 20us, >= 1ms: 1% + 50us, below 100us: 20us)\n"
       "      again   as a class: a failed path is measured once more, and again while the host "
       "stalled, up to " +
       std::to_string(verify::kMaxReadings) +
       " readings; the last is judged, the earlier shown beside; still out of tolerance with the "
       "host stalled, NOT JUDGED (exit 2)\n";
  if (r.under_load) {
    s += "load: bulk TCP flows (tb-probe goodput, autotuned buffers) on links no probed path "
         "uses:\n";
    for (const auto& l : r.load) s += "      " + l + "\n";
    for (const auto& e : r.load_errors) s += "      ERROR: " + e + "\n";
  }
  if (r.host)
    s += "host over the measurement: " + r.host->text() +
         (r.host->host_bound ? "  => HOST-BOUND: errors are the host's (CPU, stage lateness), "
                               "not the emulation's"
                             : "") +
         "\n";
  s += "\n  " + cell("PATH CLASS", 30) + cell("FROM -> TO", 34) + cell("HOPS", 6) +
       cell("CONFIGURED", 12) + cell("EXPECTED", 11) + cell("MEASURED", 11) + cell("ERROR", 10) +
       cell("TOLERANCE", 11) + "RESULT\n";
  int bad = 0;
  for (const auto& p : r.paths) {
    const auto& c = p.check;
    std::string verdict = p.failed() ? "FAIL" : p.not_judged() ? "NOT JUDGED" : "pass";
    if (!c.reason.empty()) verdict += ": " + c.reason;
    if (p.failed() && r.host && r.host->host_bound) verdict += " (cause: the host)";
    if (!p.errors.empty()) verdict += ": " + p.errors.front();
    for (const auto& e : p.outcome.errors) verdict += "; " + e;
    bad += p.failed();
    s += "  " + cell(p.pair.cls, 30) + cell(p.pair.from + " -> " + p.pair.to, 34) +
         cell(std::to_string(p.out.hops.size()) + "+" + std::to_string(p.back.hops.size()), 6) +
         cell(fmt::format("{:.3f}ms", c.configured_ms), 12) +
         cell(fmt::format("{:.3f}ms", c.expected_ms), 11) +
         cell(c.achieved_ms ? fmt::format("{:.3f}ms", *c.achieved_ms) : "-", 11) +
         cell(c.achieved_ms ? fmt::format("{:+.3f}ms", *c.achieved_ms - c.expected_ms) : "-", 10) +
         cell(fmt::format("{:.3f}ms", c.tolerance_ms), 11) + verdict + "\n";
  }
  s += "\n";
  for (const auto& p : r.paths) {
    s += p.pair.cls + ": " + p.pair.from + " -> " + p.pair.to + " " + p.pair.addr.to_string() +
         " (" + p.pair.label + "), replies to " + p.target.a_addr.to_string() + "\n";
    s += "      out:  " + p.out.text() + "\n";
    s += "      back: " + p.back.text() + "\n";
    for (const auto& n : p.out.notes) s += "      note: " + n + "\n";
    for (const auto& n : p.back.notes) s += "      note: " + n + "\n";
    if (!p.check.detail.empty()) s += "      " + p.check.detail + "\n";
    const size_t readings = p.earlier.size() + 1;
    for (size_t i = 0; i < p.earlier.size(); ++i) {
      const auto& f = p.earlier[i].check;
      s += fmt::format(
          "      measured {} times: reading {}'s median RTT {} ({}); {}; the row above is reading "
          "{}\n",
          readings, i + 1, f.achieved_ms ? fmt::format("{:.3f} ms", *f.achieved_ms) : "-",
          f.achieved_ms ? fmt::format("{:+.3f} ms, {}", *f.achieved_ms - f.expected_ms, f.reason)
                        : f.reason,
          p.earlier[i].stall.empty() ? "the host was fine"
                                     : "the host stalled: " + p.earlier[i].stall,
          readings);
    }
    if (p.not_judged()) s += not_judged_line(readings, p.stall, "path", !p.outcome.errors.empty());
  }
  int not_judged = 0;
  for (const auto& p : r.paths) not_judged += p.not_judged();
  const auto v = r.verdict();
  s += "\n" +
       std::string(v == ClassVerdict::kPass   ? "PASS"
                   : v == ClassVerdict::kFail ? "FAIL"
                                              : "NOT JUDGED") +
       ": " + std::to_string(bad) + " of " + std::to_string(r.paths.size()) +
       " path classes out of tolerance" + (r.under_load ? " under load" : "") +
       (not_judged ? ", " + std::to_string(not_judged) + " not judged (the host stalled)" : "") +
       (r.interrupted ? "; interrupted" : "") + "\n";
  return s;
}

nlohmann::json path_json(const verify::Path& p) {
  nlohmann::json hops = nlohmann::json::array();
  for (const auto& h : p.hops)
    hops.push_back({{"from", h.from},
                    {"from_if", h.from_if},
                    {"to", h.to},
                    {"to_if", h.to_if},
                    {"delay_ms", h.delay.ms()},
                    {"jitter_ms", h.jitter.ms()},
                    {"tolerance_ms", h.tolerance.ms()}});
  return {{"hops", hops},
          {"delay_ms", p.delay().ms()},
          {"tolerance_ms", p.tolerance().ms()},
          {"notes", p.notes}};
}

nlohmann::json paths_json(const VerifyReport& r) {
  nlohmann::json paths = nlohmann::json::array();
  int bad = 0, not_judged = 0;
  for (const auto& p : r.paths) {
    const auto& c = p.check;
    bad += p.failed();
    not_judged += p.not_judged();
    nlohmann::json m = {{"errors", p.outcome.errors}};
    nlohmann::json earlier = nlohmann::json::array();
    for (const auto& e : p.earlier)
      earlier.push_back(
          {{"measured_rtt_ms",
            e.check.achieved_ms ? nlohmann::json(*e.check.achieved_ms) : nlohmann::json(nullptr)},
           {"expected_rtt_ms", e.check.expected_ms},
           {"reason", e.check.reason},
           {"stall", e.stall}});
    if (p.outcome.m.rtt) m["rtt"] = rtt_json(*p.outcome.m.rtt, p.request, "path");
    if (p.outcome.m.base)
      m["base"] = rtt_json(*p.outcome.m.base, p.request, "lo in FROM's namespace");
    paths.push_back(
        {{"class", p.pair.cls},
         {"from", p.pair.from},
         {"to", p.pair.to},
         {"addr", p.pair.addr.to_string()},
         {"label", p.pair.label},
         {"reply_to", p.target.a_addr.to_string()},
         {"out", path_json(p.out)},
         {"back", path_json(p.back)},
         {"errors", p.errors},
         {"measurement", m},
         {"configured_rtt_ms", c.configured_ms},
         {"base_ms", c.base_ms},
         {"expected_rtt_ms", c.expected_ms},
         {"measured_rtt_ms", c.achieved_ms ? nlohmann::json(*c.achieved_ms) : nullptr},
         {"error_ms", c.achieved_ms ? nlohmann::json(*c.achieved_ms - c.expected_ms) : nullptr},
         {"tolerance_ms", c.tolerance_ms},
         {"verdict", to_string(c.verdict)},
         {"reason", c.reason},
         {"detail", c.detail},
         {"first_measured_rtt_ms", !p.earlier.empty() && p.earlier.front().check.achieved_ms
                                       ? nlohmann::json(*p.earlier.front().check.achieved_ms)
                                       : nullptr},
         {"earlier", earlier},
         {"host", p.host ? to_json(*p.host) : nlohmann::json(nullptr)},
         {"stall", p.stall},
         {"cause", !p.failed() && !p.not_judged()                     ? ""
                   : p.not_judged() || (r.host && r.host->host_bound) ? "host"
                                                                      : "emulation"},
         {"result", to_string(p.verdict())}});
  }
  nlohmann::json j = {
      {"lab", r.lab},
      {"scenario", r.scenario},
      {"mode", "paths"},
      {"shaping_backend", r.shaping},
      {"backends", r.backends},
      {"quick", r.quick},
      {"under_load", r.under_load},
      {"tolerance",
       "|median RTT - (out + back delays in force + median base)| <= sum of every hop's "
       "tolerance (100us..1ms: 10% + 20us; >= 1ms: 1% + 50us; below 100us: 20us)"},
      {"paths", paths},
      {"summary",
       {{"paths", r.paths.size()},
        {"paths_failed", bad},
        {"paths_not_judged", not_judged},
        {"interrupted", r.interrupted}}},
      {"result", to_string(r.verdict())}};
  if (r.under_load) j["load"] = {{"flows", r.load}, {"errors", r.load_errors}};
  if (r.host) j["host"] = verify::to_json(*r.host);
  return j;
}

}  // namespace

std::string verify_text(const VerifyReport& r) {
  if (r.paths_mode) return paths_text(r);
  std::string s = "verify lab " + r.lab + "  scenario " + r.scenario + "\n";
  s += "shaping backend (as status reports it): " + r.shaping + "\n";
  if (r.backends.is_object() && r.backends.contains("stages"))
    s += "delay stages: " +
         std::to_string(r.backends["stages"].size() - r.backends.value("stages_down", 0)) + "/" +
         std::to_string(r.backends["stages"].size()) + " running\n";
  s += method_text(r.settings);
  int passed = 0, failed = 0, skipped = 0, n = 0;
  for (const auto& c : r.classes) {
    const auto& l = c.link;
    s += "\n[" + std::to_string(++n) + "/" + std::to_string(r.classes.size()) + "] " +
         c.cls.name() + "  (" + std::to_string(c.cls.members) + " link" +
         (c.cls.members == 1 ? "" : "s") + (r.single_link ? ", the one asked for" : "") + ")  " +
         l.a.node + ":" + l.a.ifname + " " + c.target.a_addr.to_string() + " -> " + l.b.node + ":" +
         l.b.ifname + " " + c.target.addr.to_string() + "  MTU " + std::to_string(l.emulated.mtu) +
         "\n";
    if (!c.cls.host.empty()) s += "      measured " + c.cls.where() + "\n";
    if (!c.target.why.empty()) s += "      target: " + c.target.why + "\n";
    if (c.scenario)
      s += "      in force (link set): " + figures_text(l.emulated) +
           "; the scenario's: " + figures_text(*c.scenario) + "\n";
    s += measured_line(c);
    for (const auto& e : c.outcome.errors) s += "      ERROR: " + e + "\n";
    for (const auto& note : c.outcome.notes) s += "      note: " + note + "\n";
    s += "  " + cell("CHECK", 9) + cell("CONFIGURED", 11) + cell("EXPECTED", 11) +
         cell("ACHIEVED", 11) + cell("ERROR", 9) + cell("ACCEPTED", 22) + "RESULT\n";
    for (const auto& k : c.checks) {
      const auto x = cells(k);
      std::string verdict = k.verdict == Verdict::kPass   ? "pass"
                            : k.verdict == Verdict::kFail ? "FAIL"
                                                          : "not checked";
      if (!k.reason.empty()) verdict += ": " + k.reason;
      s += "  " + cell(k.name, 9) + cell(x.configured, 11) + cell(x.expected, 11) +
           cell(x.achieved, 11) + cell(x.error, 9) + cell(x.range, 22) + verdict + "\n";
      passed += k.verdict == Verdict::kPass;
      failed += k.verdict == Verdict::kFail;
      skipped += k.verdict == Verdict::kNotChecked;
    }
    for (const auto& k : c.checks)
      if (!k.detail.empty()) s += "      " + k.name + ": " + k.detail + "\n";
    if (c.host)
      s += "      host over the reading: " + c.host->text() +
           (c.stall.empty() ? "" : "  => STALLED: " + c.stall) + "\n";
    const size_t readings = c.earlier.size() + 1;
    for (size_t i = 0; i < c.earlier.size(); ++i) {
      const auto& e = c.earlier[i];
      std::string what;
      for (const auto& k : e.checks)
        if (k.verdict == Verdict::kFail)
          what += (what.empty() ? "" : ", ") + k.name + " read " + cells(k).achieved + " (" +
                  k.reason + ")";
      for (const auto& err : e.outcome.errors) what += (what.empty() ? "" : ", ") + err;
      s += fmt::format("      measured {} times: reading {}'s {}; {}; the table is reading {}\n",
                       readings, i + 1, what.empty() ? "checks passed" : what,
                       e.stall.empty() ? "the host was fine" : "the host stalled: " + e.stall,
                       readings);
    }
    if (c.not_judged()) s += not_judged_line(readings, c.stall, "link", !c.outcome.errors.empty());
  }
  int bad = 0, not_judged = 0;
  for (const auto& c : r.classes) {
    bad += c.failed();
    not_judged += c.not_judged();
  }
  const auto v = r.verdict();
  s += "\n" +
       std::string(v == ClassVerdict::kPass   ? "PASS"
                   : v == ClassVerdict::kFail ? "FAIL"
                                              : "NOT JUDGED") +
       ": " + std::to_string(bad) + " of " + std::to_string(r.classes.size()) + " link class" +
       (r.classes.size() == 1 ? "" : "es") + " out of tolerance" +
       (not_judged ? ", " + std::to_string(not_judged) + " not judged (the host stalled)" : "") +
       "; checks " + std::to_string(passed) + " passed, " + std::to_string(failed) + " failed, " +
       std::to_string(skipped) + " not checked" + (r.interrupted ? "; interrupted" : "") + "\n";
  if (!r.hosts.empty()) {
    std::string hosts;
    for (const auto& h : r.hosts) hosts += (hosts.empty() ? "" : ", ") + h;
    s += "hosts: " + hosts + " (host " + r.lab_host + " coordinated; each class says where)\n";
  }
  return s;
}

nlohmann::json verify_json(const VerifyReport& r) {
  if (r.paths_mode) return paths_json(r);
  nlohmann::json classes = nlohmann::json::array();
  int passed = 0, failed = 0, skipped = 0, bad = 0, not_judged = 0;
  for (const auto& c : r.classes) {
    const auto& l = c.link;
    const auto& q = c.request;
    auto end = [](const plan::LinkEnd& e) {
      nlohmann::json j = {{"node", e.node}, {"ifname", e.ifname}};
      if (e.addr) j["addr"] = e.addr->to_string();
      return j;
    };
    auto check_json = [](const verify::Check& k) {
      return nlohmann::json{{"check", k.name},
                            {"verdict", to_string(k.verdict)},
                            {"unit", unit_of(k)},
                            {"configured", k.configured},
                            {"expected", k.expected},
                            {"achieved", k.achieved ? nlohmann::json(*k.achieved) : nullptr},
                            {"low", k.low},
                            {"high", k.high},
                            {"reason", k.reason},
                            {"detail", k.detail}};
    };
    nlohmann::json checks = nlohmann::json::array(), first = nlohmann::json::array();
    nlohmann::json earlier = nlohmann::json::array();
    for (const auto& e : c.earlier) {
      nlohmann::json ks = nlohmann::json::array();
      for (const auto& k : e.checks) ks.push_back(check_json(k));
      if (first.empty()) first = ks;
      nlohmann::json one = {{"checks", ks},
                            {"errors", e.outcome.errors},
                            {"result", to_string(verify::judge(e))},
                            {"stall", e.stall},
                            {"host", e.host ? verify::to_json(*e.host) : nlohmann::json()}};
      if (e.outcome.m.base) one["base"] = rtt_json(*e.outcome.m.base, q, "lo in A's namespace");
      earlier.push_back(one);
    }
    for (const auto& k : c.checks) {
      checks.push_back(check_json(k));
      passed += k.verdict == Verdict::kPass;
      failed += k.verdict == Verdict::kFail;
      skipped += k.verdict == Verdict::kNotChecked;
    }
    nlohmann::json m = {
        {"buffer_bytes", q.buffer}, {"errors", c.outcome.errors}, {"notes", c.outcome.notes}};
    if (c.outcome.m.rtt) m["rtt"] = rtt_json(*c.outcome.m.rtt, q, "link");
    if (c.outcome.m.base) m["base"] = rtt_json(*c.outcome.m.base, q, "lo in A's namespace");
    if (const auto& g = c.outcome.m.goodput) {
      probe::GoodputOptions o{c.target.addr.to_string(),
                              q.port,
                              c.target.a_dev,
                              q.goodput_seconds,
                              q.warmup_ms,
                              q.buffer,
                              q.drain_ms};
      m["goodput"] = probe::to_json(o, *g);
      if (const auto& lg = c.outcome.m.loss_goodput) {
        o.warmup_ms = 0;
        o.pace_bps = c.outcome.m.loss_pace_bps;
        m["loss_transfer"] = probe::to_json(o, *lg);
      }
    }
    bad += c.failed();
    not_judged += c.not_judged();
    classes.push_back({{"class", c.cls.name()},
                       {"tier", to_string(c.cls.tier)},
                       {"profile", c.cls.profile},
                       {"members", c.cls.members},
                       {"measured_on", c.cls.host},
                       {"served_on", c.cls.serve_host},
                       {"link", {{"a", end(l.a)}, {"b", end(l.b)}}},
                       {"target",
                        {{"from", c.target.a_addr.to_string()},
                         {"from_dev", c.target.a_dev},
                         {"addr", c.target.addr.to_string()},
                         {"server_dev", c.target.server_dev},
                         {"why", c.target.why}}},
                       {"configured", figures_json(l.emulated)},
                       {"in_force_differs", c.scenario.has_value()},
                       {"scenario", c.scenario ? figures_json(*c.scenario) : nlohmann::json()},
                       {"measurement", m},
                       {"checks", checks},
                       {"first_measurement_checks", first},
                       {"readings", c.earlier.size() + 1},
                       {"earlier_readings", earlier},
                       {"host", c.host ? verify::to_json(*c.host) : nlohmann::json()},
                       {"stall", c.stall},
                       {"result", to_string(c.verdict())}});
  }
  return {
      {"lab", r.lab},
      {"scenario", r.scenario},
      {"shaping_backend", r.shaping},
      {"backends", r.backends},
      {"quick", r.quick},
      {"tolerances",
       {{"delay",
         "configured 100 us..1 ms: |one-way - configured| <= 10% + 20 us; >= 1 ms: 1% + 50 us"},
        {"rate", "configured 10 Mbit/s..2 Gbit/s: goodput within 5% of rate x (MTU-52)/(MTU+14)"},
        {"jitter", "configured >= 0.5 ms: one-way stdev within 10% (normal per-packet sample)"},
        {"loss", "lost probes inside the 99% binomial interval of 1-(1-p)^2"},
        {"tcp-loss",
         "retransmitted share of data segments inside the 99% binomial interval of p over "
         "clusters of GSO segments, + 10%"}}},
      {"figures", "in force on each link (the scenario's, or the last `link set`)"},
      {"classes", classes},
      {"lab_host", r.lab_host},
      {"hosts", r.hosts},
      {"summary",
       {{"classes", r.classes.size()},
        {"classes_failed", bad},
        {"classes_not_judged", not_judged},
        {"checks_passed", passed},
        {"checks_failed", failed},
        {"checks_not_checked", skipped},
        {"interrupted", r.interrupted}}},
      {"stall_rule",
       fmt::format("a reading is stalled when the base over lo read a median >= {:.2f} ms or an "
                   "IQR >= {:.2f} ms, the delay stages released packets >= {:.0f} us late on "
                   "average, or a SCHED_FIFO thread waking every {} us was >= 1 ms late for >= "
                   "{:.0f}% of the reading; a class out of tolerance in a stalled reading is "
                   "measured again (up to {} readings) and, still stalled, not judged",
                   verify::kBaseStallMedianUs / 1000, verify::kBaseStallIqrUs / 1000,
                   verify::kStageLateUs, verify::kWatchPeriodUs, verify::kPromptStallShare * 100,
                   verify::kMaxReadings)},
      {"result", to_string(r.verdict())}};
}

}  // namespace tb::report
