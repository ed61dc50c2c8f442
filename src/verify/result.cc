#include "verify/result.h"

#include <fmt/format.h>

#include <cmath>

namespace tb::verify {
namespace {

bool missed(const std::vector<Check>& checks) {
  for (const auto& c : checks)
    if (c.verdict == Verdict::kFail) return true;
  return false;
}

}  // namespace

bool timed_out_while_stalled(const MeasureOutcome& o, const std::string& stall) {
  return !o.errors.empty() && o.timeouts == static_cast<int>(o.errors.size()) && !stall.empty();
}

namespace {

// One reading's verdict and whether to read again, for a class (its checks) and a path (its
// check) alike: `miss` is whether a check was out of tolerance.
ClassVerdict verdict_of(const MeasureOutcome& o, bool miss, const std::string& stall) {
  if (!o.errors.empty())
    return timed_out_while_stalled(o, stall) ? ClassVerdict::kNotJudged : ClassVerdict::kFail;
  if (!miss) return ClassVerdict::kPass;
  return stall.empty() ? ClassVerdict::kFail : ClassVerdict::kNotJudged;
}

bool again(int readings, const MeasureOutcome& o, bool miss, const std::string& stall) {
  if (readings >= kMaxReadings) return false;
  if (!o.errors.empty()) return timed_out_while_stalled(o, stall);
  if (!miss) return false;
  return readings == 1 || !stall.empty();
}

}  // namespace

const char* to_string(ClassVerdict v) {
  switch (v) {
    case ClassVerdict::kPass:
      return "pass";
    case ClassVerdict::kFail:
      return "fail";
    case ClassVerdict::kNotJudged:
      return "not judged";
  }
  return "?";
}

std::string host_stall(const Measurement& m, const std::optional<HostLoad>& host) {
  std::string s;
  auto add = [&s](const std::string& t) { s += (s.empty() ? "" : "; ") + t; };
  if (m.base && m.base->summary.n > 0) {
    const auto& b = m.base->summary;
    const double iqr = b.p75 - b.p25;
    if (b.p50 >= kBaseStallMedianUs || iqr >= kBaseStallIqrUs)
      add(fmt::format(
          "the base over lo read median {:.3f} ms, IQR {:.3f} ms (the probes' own path; a "
          "stall from a median of {:.2f} ms or an IQR of {:.2f} ms)",
          b.p50 / 1000, iqr / 1000, kBaseStallMedianUs / 1000, kBaseStallIqrUs / 1000));
  }
  if (host && host->promptness && host->promptness->stalled_share >= kPromptStallShare)
    add(fmt::format("the host stalled {:.1f}% of the reading ({}; a stall from {:.0f}%)",
                    host->promptness->stalled_share * 100, host->promptness->text(),
                    kPromptStallShare * 100));
  if (host && host->stage_late_mean_us >= kStageLateUs)
    add(
        fmt::format("the delay stages released {} packets {:.1f} us late on average (a stall "
                    "from {:.0f} us)",
                    host->stage_packets, host->stage_late_mean_us, kStageLateUs));
  return s;
}

std::string without_realtime(const std::vector<Check>& checks,
                             const std::optional<HostLoad>& host) {
  if (!host || !missed(checks)) return "";
  bool sub_ms = false;
  for (const auto& c : checks) {
    if (c.name == "delay") sub_ms = c.configured < kSubMsDelayMs;
    if (c.verdict == Verdict::kFail && c.name != "delay" && c.name != "jitter") return "";
  }
  if (!sub_ms) return "";
  std::string who;
  for (const auto& t : host->scheduling)
    if (t.starts_with("SCHED_OTHER")) {
      who = "the delay stages ran " + t;
      break;
    }
  if (who.empty() && host->promptness && host->promptness->scheduling.starts_with("SCHED_OTHER"))
    who = "verify's threads ran " + host->promptness->scheduling;
  if (who.empty()) return "";
  return "no real-time priority for a sub-millisecond delay: " + who +
         " (a user needs RLIMIT_RTPRIO, a limits.conf rtprio line; doctor's rtprio row)";
}

std::string outlier_stall(const std::vector<Check>& checks, const Measurement& m,
                          const std::optional<HostLoad>& host) {
  if (!host || !host->promptness || !m.rtt || m.rtt->summary.n == 0 || !missed(checks)) return "";
  double jitter_ms = 0;
  for (const auto& c : checks) {
    if (c.verdict == Verdict::kFail && c.name != "jitter") return "";
    if (c.name == "jitter") jitter_ms = c.configured;
  }
  if (jitter_ms <= 0) return "";
  // Round trips cross the link's jitter twice: their standard deviation is sqrt(2) times it.
  const double rtt_sd_ms = std::sqrt(2.0) * jitter_ms;
  const auto& s = m.rtt->summary;
  const double outlier_ms = (s.max - s.p50) / 1000;
  const double stall_ms = host->promptness->late_max_us / 1000;
  if (outlier_ms <= kOutlierSigmas * rtt_sd_ms || stall_ms < outlier_ms / 2) return "";
  return fmt::format(
      "the host stalled {:.1f} ms (verify's promptness watcher, its worst wake-up), and the "
      "probes' worst round trip lay {:.1f} ms past their median, beyond {:.0f} standard "
      "deviations of the configured jitter ({:.2f} ms over a round trip): a few probes held by "
      "the host move a standard deviation",
      stall_ms, outlier_ms, kOutlierSigmas, rtt_sd_ms);
}

std::string reading_stall(const std::vector<Check>& checks, const Measurement& m,
                          const std::optional<HostLoad>& host) {
  if (auto s = host_stall(m, host); !s.empty()) return s;
  if (auto s = without_realtime(checks, host); !s.empty()) return s;
  return outlier_stall(checks, m, host);
}

ClassVerdict judge(const Reading& r) {
  return verdict_of(r.outcome, missed(r.checks), r.stall);
}

bool measure_again(const std::vector<Reading>& readings) {
  if (readings.empty()) return true;
  const Reading& last = readings.back();
  return again(static_cast<int>(readings.size()), last.outcome, missed(last.checks), last.stall);
}

ClassVerdict ClassResult::verdict() const {
  return judge(Reading{outcome, checks, host, stall});
}

void measure_class(ClassResult& c, const std::function<Reading()>& measure,
                   const std::function<bool()>& stop,
                   const std::function<void(int n, const std::string& why)>& on_again) {
  std::vector<Reading> readings;
  for (int n = 1; n <= kMaxReadings; ++n) {
    if (n > 1) {
      if (!measure_again(readings) || stop()) break;
      const auto& last = readings.back();
      on_again(n, last.stall.empty() ? "a check out of tolerance"
                                     : "a check out of tolerance while the host stalled");
    }
    readings.push_back(measure());
  }
  if (readings.empty()) return;
  Reading last = std::move(readings.back());
  readings.pop_back();
  c.outcome = std::move(last.outcome);
  c.checks = std::move(last.checks);
  c.host = std::move(last.host);
  c.stall = std::move(last.stall);
  c.earlier = std::move(readings);
}

ClassVerdict PathResult::verdict() const {
  if (!errors.empty()) return ClassVerdict::kFail;
  return verdict_of(outcome, check.verdict == Verdict::kFail, stall);
}

bool measure_again(const PathCheck& check, const MeasureOutcome& outcome, int readings,
                   const std::string& stall) {
  return again(readings, outcome, check.verdict == Verdict::kFail, stall);
}

ClassVerdict VerifyReport::verdict() const {
  if (interrupted || !load_errors.empty()) return ClassVerdict::kFail;
  if (paths_mode) {
    if (paths.empty()) return ClassVerdict::kFail;
    bool not_judged = false;
    for (const auto& p : paths) {
      if (p.failed()) return ClassVerdict::kFail;
      not_judged = not_judged || p.not_judged();
    }
    return not_judged ? ClassVerdict::kNotJudged : ClassVerdict::kPass;
  }
  if (classes.empty()) return ClassVerdict::kFail;
  bool not_judged = false;
  for (const auto& c : classes) {
    const auto v = c.verdict();
    if (v == ClassVerdict::kFail) return ClassVerdict::kFail;
    not_judged = not_judged || v == ClassVerdict::kNotJudged;
  }
  return not_judged ? ClassVerdict::kNotJudged : ClassVerdict::kPass;
}

bool VerifyReport::passed() const {
  return verdict() == ClassVerdict::kPass;
}

}  // namespace tb::verify
