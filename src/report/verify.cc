#include "report/verify.h"

#include <algorithm>
#include <cmath>

#include "core/realtime.h"
#include "report/format.h"

namespace tb::report {
using verify::Check;
using verify::ClassResult;
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

std::string measured_line(const ClassResult& c) {
  const auto& q = c.request;
  const auto& m = c.outcome.m;
  std::string s = "      measured: ";
  if (m.rtt)
    s += "rtt " + std::to_string(m.rtt->received) + "/" + std::to_string(m.rtt->sent) +
         " answered (" + std::to_string(q.probes) + " x 32 B every " +
         std::to_string(q.interval_us) + " us, " + fmt::format("{:.2f} s", m.rtt->seconds) +
         "), mean " + fmt::format("{:.3f} ms", m.rtt->summary.mean / 1000) + ", p99 " +
         fmt::format("{:.3f} ms", m.rtt->summary.p99 / 1000) + "; ";
  if (m.base)
    s += "base over lo: median " + fmt::format("{:.3f} ms", m.base->summary.p50 / 1000) + ", IQR " +
         fmt::format("{:.3f} ms", (m.base->summary.p75 - m.base->summary.p25) / 1000) + "; ";
  if (m.goodput)
    s += "goodput " + bytes_text(static_cast<double>(m.goodput->receiver.measured_bytes)) + " in " +
         fmt::format("{:.2f} s", static_cast<double>(m.goodput->receiver.measured_ns) / 1e9) +
         " at the receiver after " + std::to_string(q.warmup_ms) + " ms warm-up (sent for " +
         fmt::format("{:.1f} s", q.goodput_seconds) + "), buffer " +
         bytes_text(static_cast<double>(q.buffer)) + ", MSS " + std::to_string(m.goodput->mss) +
         ", " + std::to_string(m.goodput->retransmits) + " retransmits";
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
          {"rtt_us", probe::to_json(r.summary)}};
}

std::string method_text(const Settings& s) {
  return "how:  rtt     " + std::to_string(s.probes) +
         " UDP probes (32 B payload, 74 B on the wire) every " + std::to_string(s.interval_us) +
         " us (longer on slow links: probes use <= 5% of the rate) from A, bound to its port on "
         "the link (SO_BINDTODEVICE), to tb-probe serve in B\n"
         "      base    the same probes over lo inside A's namespace (the probe's own software "
         "path)\n"
         "      delay   one-way = (mean RTT - median base) / 2: each direction is shaped alike\n"
         "      jitter  one-way stdev = sqrt((var RTT - (IQR/1.349 of base)^2) / 2)\n"
         "      loss    unanswered probes vs the 99% binomial interval of p_rtt = 1-(1-p)^2\n"
         "      goodput one TCP stream A -> B for " +
         fmt::format("{:.1f}", s.goodput_seconds) + " s, the first " + std::to_string(s.warmup_ms) +
         " ms excluded, counted by the receiver; SO_SNDBUF/SO_RCVBUF = 2 x BDP (>= 256 KiB); "
         "ideal = rate x (MTU-52)/(MTU+14) (payload MTU - 20 IP - 20 TCP - 12 timestamps, frame "
         "MTU + 14 Ethernet)\n"
         "      sched   probes (and the lab's delay stages) run SCHED_FIFO " +
         std::to_string(kRealtimePriority) +
         " where the host allows it, so a busy host's waits are not read as the link's; a "
         "refusal is in each probe's log and the stages' stats\n"
         "tolerances: delay >= 1ms: 3% + 0.2ms | rate 10Mbit..2Gbit: 5% of ideal goodput | "
         "jitter >= 0.5ms: 25% | loss: 99% binomial interval\n";
}

}  // namespace

std::string verify_text(const VerifyReport& r) {
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
    if (!c.target.why.empty()) s += "      target: " + c.target.why + "\n";
    s += measured_line(c);
    for (const auto& e : c.outcome.errors) s += "      ERROR: " + e + "\n";
    for (const auto& note : c.outcome.notes) s += "      note: " + note + "\n";
    s += "  " + cell("CHECK", 7) + cell("CONFIGURED", 11) + cell("EXPECTED", 11) +
         cell("ACHIEVED", 11) + cell("ERROR", 9) + cell("ACCEPTED", 22) + "RESULT\n";
    for (const auto& k : c.checks) {
      const auto x = cells(k);
      std::string verdict = k.verdict == Verdict::kPass   ? "pass"
                            : k.verdict == Verdict::kFail ? "FAIL"
                                                          : "not checked";
      if (!k.reason.empty()) verdict += ": " + k.reason;
      s += "  " + cell(k.name, 7) + cell(x.configured, 11) + cell(x.expected, 11) +
           cell(x.achieved, 11) + cell(x.error, 9) + cell(x.range, 22) + verdict + "\n";
      passed += k.verdict == Verdict::kPass;
      failed += k.verdict == Verdict::kFail;
      skipped += k.verdict == Verdict::kNotChecked;
    }
    for (const auto& k : c.checks)
      if (!k.detail.empty()) s += "      " + k.name + ": " + k.detail + "\n";
  }
  int bad = 0;
  for (const auto& c : r.classes) bad += c.failed();
  s += "\n" + std::string(r.passed() ? "PASS" : "FAIL") + ": " + std::to_string(bad) + " of " +
       std::to_string(r.classes.size()) + " link class" + (r.classes.size() == 1 ? "" : "es") +
       " out of tolerance; checks " + std::to_string(passed) + " passed, " +
       std::to_string(failed) + " failed, " + std::to_string(skipped) + " not checked" +
       (r.interrupted ? "; interrupted" : "") + "\n";
  return s;
}

nlohmann::json verify_json(const VerifyReport& r) {
  nlohmann::json classes = nlohmann::json::array();
  int passed = 0, failed = 0, skipped = 0, bad = 0;
  for (const auto& c : r.classes) {
    const auto& l = c.link;
    const auto& q = c.request;
    auto end = [](const plan::LinkEnd& e) {
      nlohmann::json j = {{"node", e.node}, {"ifname", e.ifname}};
      if (e.addr) j["addr"] = e.addr->to_string();
      return j;
    };
    nlohmann::json checks = nlohmann::json::array();
    for (const auto& k : c.checks) {
      checks.push_back({{"check", k.name},
                        {"verdict", to_string(k.verdict)},
                        {"unit", unit_of(k)},
                        {"configured", k.configured},
                        {"expected", k.expected},
                        {"achieved", k.achieved ? nlohmann::json(*k.achieved) : nullptr},
                        {"low", k.low},
                        {"high", k.high},
                        {"reason", k.reason},
                        {"detail", k.detail}});
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
    }
    bad += c.failed();
    classes.push_back({{"class", c.cls.name()},
                       {"tier", to_string(c.cls.tier)},
                       {"profile", c.cls.profile},
                       {"members", c.cls.members},
                       {"link", {{"a", end(l.a)}, {"b", end(l.b)}}},
                       {"target",
                        {{"from", c.target.a_addr.to_string()},
                         {"from_dev", c.target.a_dev},
                         {"addr", c.target.addr.to_string()},
                         {"server_dev", c.target.server_dev},
                         {"why", c.target.why}}},
                       {"configured",
                        {{"rate_bps", l.emulated.rate.bps},
                         {"delay_ms", l.emulated.delay.ms()},
                         {"jitter_ms", l.emulated.jitter.ms()},
                         {"loss_pct", l.emulated.loss_pct},
                         {"mtu", l.emulated.mtu}}},
                       {"measurement", m},
                       {"checks", checks},
                       {"result", c.failed() ? "fail" : "pass"}});
  }
  return {
      {"lab", r.lab},
      {"scenario", r.scenario},
      {"shaping_backend", r.shaping},
      {"backends", r.backends},
      {"quick", r.quick},
      {"tolerances",
       {{"delay", "configured >= 1 ms: |one-way - configured| <= 3% + 0.2 ms"},
        {"rate", "configured 10 Mbit/s..2 Gbit/s: goodput within 5% of rate x (MTU-52)/(MTU+14)"},
        {"jitter", "configured >= 0.5 ms: one-way stdev within 25%"},
        {"loss", "lost probes inside the 99% binomial interval of 1-(1-p)^2"}}},
      {"classes", classes},
      {"summary",
       {{"classes", r.classes.size()},
        {"classes_failed", bad},
        {"checks_passed", passed},
        {"checks_failed", failed},
        {"checks_not_checked", skipped},
        {"interrupted", r.interrupted}}},
      {"result", r.passed() ? "pass" : "fail"}};
}

}  // namespace tb::report
