// The congestion counters users see (congestion/counters.h): the stats file read back per link
// end (pauses sent from the upstreams' `by` maps), each reason there are none said, a window's
// delta (and an agent restarted inside it), the summary line; and the pause-episode timeline
// (congestion/episodes.h): the merge of pauses < 10 ms apart, closing, the log's rotation and
// the window read.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "congestion/counters.h"
#include "congestion/episodes.h"
#include "core/safe_file.h"

namespace tb::congestion::counters_test {
namespace {

constexpr int64_t kMs = 1'000'000;

AgentStats two_feeders(uint64_t scale) {
  AgentStats s;
  s.pid = 4242;
  s.uptime_s = 2.0 * static_cast<double>(scale);
  s.late_polls = scale;
  s.ports["dc/tor0:s4g0"] = {"lossless", 1000, 90'000 * scale, 50 * scale, 3 * scale};
  s.ports["dc/tor0:s0g0"] = {"lossless", 0, 0, 0, 0};
  UpstreamStats u0;
  u0.pauses = 40 * scale;
  u0.paused_ns = 500 * kMs * static_cast<int64_t>(scale);
  u0.paused_now = true;
  u0.by["dc/tor0:s4g0"] = 40 * scale;
  UpstreamStats u1 = u0;
  u1.pauses = 10 * scale;
  u1.paused_ns = 100 * kMs * static_cast<int64_t>(scale);
  u1.paused_now = false;
  u1.by = {{"dc/tor0:s4g0", 10 * scale}};
  s.upstreams["dc/s0/g0:rail"] = u0;
  s.upstreams["dc/s1/g0:rail"] = u1;
  return s;
}

class TempLab {
 public:
  TempLab() : dir_(std::move(*TempDir::make("congestion-counters-test"))) {
    std::filesystem::create_directories(dir_.path() + "/stages");
  }
  std::string path() const { return dir_.path(); }
  void write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_.path() + "/stages/" + name) << text;
  }

 private:
  TempDir dir_;
};

TEST(CongestionCounters, StatsFileRoundTripsIntoPerEndCountersWithPausesSentFromBy) {
  TempLab lab;
  lab.write(kConfigFile, "{}\n");
  lab.write(kStatsFile, to_json(two_feeders(1)).dump());
  const Counters c = read_counters(lab.path());
  ASSERT_EQ(c.source, Source::kCounted) << c.why;
  EXPECT_TRUE(c.why.empty()) << c.why;
  EXPECT_EQ(c.pid, 4242);
  EXPECT_DOUBLE_EQ(c.uptime_s, 2.0);
  EXPECT_LT(c.age_s, kStaleAfterS);
  // The congested port sent the pauses both upstreams received; the idle one none.
  EXPECT_EQ(c.ports.at("dc/tor0:s4g0").pauses_sent, 50u);
  EXPECT_EQ(c.ports.at("dc/tor0:s4g0").xoff_events, 3u);
  EXPECT_EQ(c.ports.at("dc/tor0:s4g0").drops, 50u);
  EXPECT_EQ(c.ports.at("dc/tor0:s4g0").backlog_max, 90'000u);
  EXPECT_FALSE(c.ports.at("dc/tor0:s4g0").ce_marks);  // a lossless port: no CE marks
  EXPECT_EQ(c.ports.at("dc/tor0:s0g0").pauses_sent, 0u);
  EXPECT_EQ(c.upstreams.at("dc/s0/g0:rail").pauses_received, 40u);
  EXPECT_EQ(c.upstreams.at("dc/s0/g0:rail").paused_ns, 500 * kMs);
  EXPECT_TRUE(c.upstreams.at("dc/s0/g0:rail").paused_now);
  const Totals t = totals(c);
  EXPECT_EQ(t.pauses, 50u);
  EXPECT_EQ(t.busiest, "dc/s0/g0:rail");
  EXPECT_EQ(t.lossless_drops, 50u);
  const auto j = to_json(c);
  EXPECT_EQ(j["source"], kCountersSource);
  EXPECT_EQ(j["state"], "counted");
  EXPECT_EQ(j["ports"]["dc/tor0:s4g0"]["pauses_sent"], 50);
  EXPECT_EQ(j["ports"]["dc/tor0:s4g0"]["lossless_violations"], 50);
  EXPECT_FALSE(j["ports"]["dc/tor0:s4g0"].contains("ce_marks"));
  EXPECT_DOUBLE_EQ(j["upstreams"]["dc/s0/g0:rail"]["paused_fraction"].get<double>(), 0.25);
  EXPECT_EQ(j["totals"]["pauses"], 50);
  const std::string line = summary_line(c);
  EXPECT_NE(line.find("50 pauses"), std::string::npos) << line;
  EXPECT_NE(line.find("LOSSLESS VIOLATED"), std::string::npos) << line;
  EXPECT_NE(line.find(kCountersSource), std::string::npos) << line;
}

TEST(CongestionCounters, NoAgentNoFileAndBadFileAreSaidNeverZeros) {
  TempLab none;
  Counters c = read_counters(none.path());
  EXPECT_EQ(c.source, Source::kNoAgent);
  EXPECT_FALSE(c.has_counts());
  EXPECT_NE(c.why.find("no lossless or ecn link"), std::string::npos) << c.why;
  EXPECT_FALSE(to_json(c).contains("ports"));
  EXPECT_EQ(summary_line(c).rfind("no counts: ", 0), 0u) << summary_line(c);

  TempLab starting;
  starting.write(kConfigFile, "{}\n");
  c = read_counters(starting.path());
  EXPECT_EQ(c.source, Source::kNotRunning);
  EXPECT_NE(c.why.find("not running"), std::string::npos) << c.why;

  TempLab broken;
  broken.write(kConfigFile, "{}\n");
  broken.write(kStatsFile, "{\"pid\": 1,");
  c = read_counters(broken.path());
  EXPECT_EQ(c.source, Source::kUnreadable);
  EXPECT_NE(c.why.find("not JSON"), std::string::npos) << c.why;

  // A file the agent stopped rewriting: its counts, said to be stale.
  TempLab stale;
  stale.write(kConfigFile, "{}\n");
  stale.write(kStatsFile, to_json(two_feeders(1)).dump());
  std::filesystem::last_write_time(
      stale.path() + "/stages/" + kStatsFile,
      std::filesystem::file_time_type::clock::now() - std::chrono::seconds(30));
  c = read_counters(stale.path());
  EXPECT_EQ(c.source, Source::kStale);
  EXPECT_TRUE(c.has_counts());
  EXPECT_NE(c.why.find("not running"), std::string::npos) << c.why;
  EXPECT_EQ(to_json(c)["state"], "stale");
}

TEST(CongestionCounters, DeltaIsTheWindowsAndAnAgentRestartInsideItIsSaid) {
  Counters before = counters_from_stats(two_feeders(1));
  Counters after = counters_from_stats(two_feeders(3));
  Counters d = delta(before, after);
  ASSERT_TRUE(d.has_counts());
  EXPECT_TRUE(d.why.empty()) << d.why;
  EXPECT_DOUBLE_EQ(d.uptime_s, 4.0);
  EXPECT_EQ(d.upstreams.at("dc/s0/g0:rail").pauses_received, 80u);
  EXPECT_EQ(d.upstreams.at("dc/s0/g0:rail").paused_ns, 1000 * kMs);
  EXPECT_EQ(d.upstreams.at("dc/s0/g0:rail").by.at("dc/tor0:s4g0"), 80u);
  EXPECT_EQ(d.ports.at("dc/tor0:s4g0").pauses_sent, 100u);
  EXPECT_EQ(d.ports.at("dc/tor0:s4g0").drops, 100u);
  EXPECT_EQ(d.late_polls, 2u);
  // bench/train/run's object: the window, its source and backend, the since-start figures named.
  const auto w = to_json(d, true);
  EXPECT_EQ(w["window_s"], 4.0);
  EXPECT_FALSE(w.contains("uptime_s"));
  EXPECT_EQ(w["source"], kCountersSource);
  EXPECT_EQ(w["backend"], kCountersBackend);
  EXPECT_TRUE(w.contains("late_ms_max_since_agent_start"));
  EXPECT_TRUE(w["ports"]["dc/tor0:s4g0"].contains("backlog_max_bytes_since_agent_start"));
  EXPECT_EQ(w["totals"]["pauses"], 100);

  after.pid = 99;  // restarted: after's own counts, said
  d = delta(before, after);
  EXPECT_EQ(d.upstreams.at("dc/s0/g0:rail").pauses_received, 120u);
  EXPECT_NE(d.why.find("restarted"), std::string::npos) << d.why;

  // No stats file before (a verb right after `up`): the agent started inside the window.
  Counters missing;
  missing.source = Source::kNotRunning;
  missing.why = "not running";
  after.pid = 4242;
  d = delta(missing, after);
  ASSERT_TRUE(d.has_counts());
  EXPECT_EQ(d.upstreams.at("dc/s0/g0:rail").pauses_received, 120u);
  EXPECT_NE(d.why.find("first stats during the window"), std::string::npos) << d.why;
  // An unreadable file before: no counts, said.
  Counters unreadable;
  unreadable.source = Source::kUnreadable;
  unreadable.why = "x: not JSON";
  d = delta(unreadable, after);
  EXPECT_FALSE(d.has_counts());
  EXPECT_NE(d.why.find("before: x: not JSON"), std::string::npos) << d.why;
  d = delta(before, missing);
  EXPECT_FALSE(d.has_counts());
  EXPECT_EQ(d.why, "not running");
}

// A pfc-storm's port: the watchdog's drops (its drop action) are in DROPS but are no lossless
// violation; trips, the storm and mitigation show per port, in the totals and the summary line,
// and a window counts its own trips and drops.
TEST(CongestionCounters, TheWatchdogsDropsAreNotLosslessViolations) {
  AgentStats s = two_feeders(1);
  PortStats& held = s.ports["dc/tor0:s4g0"];
  held.drops = 520;
  held.storm = true;
  held.watchdog = {2, true, 500};
  Counters c = counters_from_stats(s);
  const PortCounters& p = c.ports.at("dc/tor0:s4g0");
  EXPECT_TRUE(p.storm);
  EXPECT_TRUE(p.mitigating);
  EXPECT_EQ(p.watchdog_trips, 2u);
  EXPECT_EQ(p.violations(), 20u);  // 520 drops, 500 of them the watchdog's
  const Totals t = totals(c);
  EXPECT_EQ(t.lossless_drops, 20u);
  EXPECT_EQ(t.drops, 520u);
  EXPECT_EQ(t.watchdog_trips, 2u);
  EXPECT_EQ(t.watchdog_dropped, 500u);
  EXPECT_EQ(t.storms, 1);
  const auto j = to_json(c);
  EXPECT_EQ(j["ports"]["dc/tor0:s4g0"]["lossless_violations"], 20);
  EXPECT_EQ(j["ports"]["dc/tor0:s4g0"]["watchdog"]["dropped"], 500);
  EXPECT_EQ(j["ports"]["dc/tor0:s4g0"]["storm"], true);
  EXPECT_EQ(j["totals"]["watchdog_trips"], 2);
  const std::string line = summary_line(c);
  EXPECT_NE(line.find("2 PFC watchdog trip(s) (500 packet(s) dropped by its mitigation)"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("a pfc-storm holds 1 port(s) now"), std::string::npos) << line;
  EXPECT_NE(line.find("20 lossless drops (LOSSLESS VIOLATED)"), std::string::npos) << line;

  // Only the watchdog dropped: no violation.
  held.drops = 500;
  EXPECT_EQ(counters_from_stats(s).ports.at("dc/tor0:s4g0").violations(), 0u);
  EXPECT_EQ(summary_line(counters_from_stats(s)).find("VIOLATED"), std::string::npos);

  // A window: its own trips and drops.
  AgentStats later = s;
  later.uptime_s += 1;
  later.ports["dc/tor0:s4g0"].drops = 900;
  later.ports["dc/tor0:s4g0"].watchdog = {3, false, 880};
  const Counters d = delta(counters_from_stats(s), counters_from_stats(later));
  EXPECT_EQ(d.ports.at("dc/tor0:s4g0").watchdog_trips, 1u);
  EXPECT_EQ(d.ports.at("dc/tor0:s4g0").watchdog_dropped, 380u);
  EXPECT_EQ(d.ports.at("dc/tor0:s4g0").violations(), 20u);
}

// An ecn port (P7): its CE marks and ECT packets (what the marking stage after it counted in
// the mark table) per end, in the totals, the JSON, the summary line and a window's delta.
TEST(CongestionCounters, EcnPortsCountCeMarks) {
  AgentStats s = two_feeders(1);
  PortStats vpc{"ecn", 3000, 21'000, 0, 0};
  vpc.ecn = {1.0, 2000, 150, 12};
  s.ports["dc/vpc:s4"] = vpc;
  const Counters c = counters_from_stats(s);
  const PortCounters& p = c.ports.at("dc/vpc:s4");
  ASSERT_TRUE(p.ce_marks);
  EXPECT_EQ(*p.ce_marks, 150u);
  EXPECT_EQ(p.ect, 2000u);
  EXPECT_EQ(p.violations(), 0u);
  const Totals t = totals(c);
  EXPECT_EQ(t.ecn_ports, 1);
  EXPECT_EQ(t.ce_marks, 150u);
  const auto j = to_json(c);
  EXPECT_EQ(j["ports"]["dc/vpc:s4"]["ce_marks"], 150);
  EXPECT_EQ(j["ports"]["dc/vpc:s4"]["ect_packets"], 2000);
  EXPECT_EQ(j["totals"]["ce_marks"], 150);
  EXPECT_FALSE(j["ports"]["dc/vpc:s4"].contains("lossless_violations"));
  const std::string line = summary_line(c);
  EXPECT_NE(line.find("150 CE marks of 2000 ECT packets at 1 ecn port(s)"), std::string::npos)
      << line;
  AgentStats later = s;
  later.uptime_s += 1;
  later.ports["dc/vpc:s4"].ecn = {0.0, 2500, 190, 20};
  const Counters d = delta(c, counters_from_stats(later));
  EXPECT_EQ(*d.ports.at("dc/vpc:s4").ce_marks, 40u);
  EXPECT_EQ(d.ports.at("dc/vpc:s4").ect, 500u);
  EXPECT_EQ(to_json(d, true)["totals"]["ce_marks"], 40);
}

TEST(CongestionEpisodes, PausesLessThanTenMsApartAreOneEpisode) {
  EpisodeTracker t({"u0", "u1"}, {"p0", "p1"});
  t.paused(0, 0, 100 * kMs);
  t.resumed(0, 103 * kMs);
  t.paused(0, 1, 110 * kMs);  // 7 ms after the resume: the same episode
  t.paused(0, 0, 111 * kMs);  // already paused: only `by`, no cycle
  t.resumed(0, 115 * kMs);
  t.paused(1, -1, 112 * kMs);
  EXPECT_TRUE(t.take_closed(120 * kMs).empty());  // u0 resumed 5 ms ago, u1 paused
  auto closed = t.take_closed(125 * kMs);
  ASSERT_EQ(closed.size(), 1u);
  EXPECT_EQ(closed[0].upstream, "u0");
  EXPECT_EQ(closed[0].t0_ns, 100 * kMs);
  EXPECT_EQ(closed[0].t1_ns, 115 * kMs);
  EXPECT_EQ(closed[0].cycles, 2u);
  EXPECT_EQ(closed[0].by, (std::vector<std::string>{"p0", "p1"}));
  t.paused(0, 0, 140 * kMs);  // a new episode for u0
  t.resumed(1, 150 * kMs);
  const auto all = t.take_all(200 * kMs);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].upstream, "u1");
  EXPECT_EQ(all[1].upstream, "u0");
  EXPECT_EQ(all[1].t0_ns, 140 * kMs);
  EXPECT_EQ(all[1].t1_ns, 200 * kMs);  // still paused when the agent stopped
  EXPECT_EQ(all[1].cycles, 1u);
  EXPECT_TRUE(t.take_all(300 * kMs).empty());
  // A resume with no pause of ours (a killed agent's leftover) makes no episode.
  t.resumed(1, 400 * kMs);
  EXPECT_TRUE(t.take_all(500 * kMs).empty());
}

TEST(CongestionEpisodes, LogRotatesAtItsCapAndTheWindowReadsBothFiles) {
  auto made = TempDir::make("congestion-episodes-test");
  ASSERT_TRUE(made);
  const TempDir dir = std::move(*made);
  const std::string path = dir.path() + "/" + kEpisodesFile;
  auto log = EpisodeLog::open(path, 300);
  ASSERT_TRUE(log) << log.error().message;
  std::vector<Episode> es;
  for (int i = 0; i < 6; ++i)
    es.push_back({i * 100 * kMs, i * 100 * kMs + 20 * kMs, "dc/s0/g0:rail", {"dc/tor0:s4g0"}, 3});
  for (const auto& e : es) ASSERT_TRUE(log->append({e}));
  EXPECT_TRUE(std::filesystem::exists(path + ".1"));
  EXPECT_LE(std::filesystem::file_size(path), 300u);
  EXPECT_LE(std::filesystem::file_size(path + ".1"), 300u);
  // Whatever the rotation kept, in order; a window picks the episodes overlapping it.
  const auto kept = read_episodes(path, 0, INT64_MAX);
  ASSERT_GE(kept.size(), 3u);
  for (size_t i = 1; i < kept.size(); ++i) EXPECT_LT(kept[i - 1].t0_ns, kept[i].t0_ns);
  EXPECT_EQ(kept.back().t0_ns, 500 * kMs);
  EXPECT_EQ(kept.back().cycles, 3u);
  EXPECT_EQ(kept.back().by, (std::vector<std::string>{"dc/tor0:s4g0"}));
  const auto window = read_episodes(path, 410 * kMs, 505 * kMs);
  ASSERT_EQ(window.size(), 2u);  // [400, 420] and [500, 520]
  EXPECT_EQ(window[0].t0_ns, 400 * kMs);
}

}  // namespace
}  // namespace tb::congestion::counters_test
