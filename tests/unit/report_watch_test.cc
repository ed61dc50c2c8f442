// What `watch` prints (report/watch.h): the table's columns, the DOWN and missing marks, the row
// limit, the events and the JSON twin.
#include "report/watch.h"

#include <gtest/gtest.h>

namespace tb {
namespace {

lab::WatchFrame a_frame() {
  lab::WatchFrame f;
  f.t_s = 3;
  f.interval_s = 1;
  f.stages = 4;
  f.stages_running = 4;
  lab::WatchLink busy;
  busy.a = "dc/s0/g0:rail";
  busy.b = "dc/tor0:s0g0";
  busy.tier = "scale-out";
  busy.emulated_bps = 400e6;
  busy.ab_bps = 396e6;
  busy.ba_bps = 2e6;
  busy.drops = 5;
  busy.stage_drops = 1;
  busy.backlog_bytes = 3000;
  busy.stage_held = 12;
  busy.seen = true;
  lab::WatchLink down = busy;
  down.a = "dc/s1/g1:rail";
  down.b = "dc/tor0:s1g1";
  down.ab_bps = down.ba_bps = 0;
  down.up = false;
  down.stage_held = -1;
  f.links = {busy, down};
  f.events.push_back({{"event", "fault_inject"},
                      {"target", "link-down dc/s1/g1:rail <-> dc/tor0:s1g1"},
                      {"t_unix_ms", 1796186699781}});
  return f;
}

TEST(ReportWatch, TableShowsRatesUseDropsQueuesAndMarksADownLink) {
  const std::string t = report::watch_text("mini", a_frame(), 0);
  EXPECT_NE(t.find("delay stages 4/4 running, 0 restarts"), std::string::npos) << t;
  const auto row = t.substr(t.find("dc/s0/g0:rail"));
  const auto line = row.substr(0, row.find('\n'));
  for (const char* want : {"scale-out", "396.0M", "2.0M", "400.0M", "99%", "6 ", "3000B", " 12"})
    EXPECT_NE(line.find(want), std::string::npos) << want << " in: " << line;
  EXPECT_NE(t.find("dc/s1/g1:rail <-> dc/tor0:s1g1 (DOWN)"), std::string::npos) << t;
  EXPECT_NE(t.find("fault_inject  target=link-down"), std::string::npos) << t;
  EXPECT_NE(t.find("IFLA_STATS64"), std::string::npos);  // how it was measured
  const std::string one = report::watch_text("mini", a_frame(), 1);
  EXPECT_EQ(one.find("(DOWN)"), std::string::npos) << one;
  EXPECT_NE(one.find("... 1 more link(s)"), std::string::npos) << one;
}

TEST(ReportWatch, JsonCarriesEveryLinkAndTheMethod) {
  const auto j = report::watch_json("mini", a_frame());
  ASSERT_EQ(j["links"].size(), 2u);
  EXPECT_EQ(j["links"][0]["ab_bps"], 396e6);
  EXPECT_EQ(j["links"][0]["stage_held"], 12);
  EXPECT_TRUE(j["links"][1]["stage_held"].is_null());
  EXPECT_FALSE(j["links"][1]["up"].get<bool>());
  EXPECT_EQ(j["events"].size(), 1u);
  EXPECT_NE(j["measured"].get<std::string>().find("IFLA_STATS64"), std::string::npos);
  EXPECT_EQ(report::short_rate(1.5e9), "1.50G");
  EXPECT_EQ(report::short_rate(999), "999");
}

}  // namespace
}  // namespace tb
