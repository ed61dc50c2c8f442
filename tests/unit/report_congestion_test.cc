// How reports show the congestion agent's counters (report/congestion.h, report/status.h,
// report/watch.h): status's CONGESTION COUNTERS table and links[].congestion on mini's lossless
// rails, "none: why" when the agent has no counts, nothing for a lab without one; watch's PFC
// section (both directions, pauses sent, lossless drops marked, 80 columns) and its JSON twin.
#include <gtest/gtest.h>

#include <sstream>

#include "plan/plan.h"
#include "report/congestion.h"
#include "report/status.h"
#include "report/watch.h"
#include "scenario/loader.h"

namespace tb::report_congestion_test {
namespace {

std::string end_of(const plan::LinkEnd& e) {
  return e.node + ":" + e.ifname;
}

struct Mini {
  lab::LabState st;
  size_t sender = 0, receiver = 0;  // links of dc/s0/g0 and dc/s1/g0 to the ToR
  std::string sender_gpu, sender_port, receiver_gpu, receiver_port;
};

Mini mini() {
  Mini m;
  auto sc = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/mini.toml");
  EXPECT_TRUE(sc) << sc.error().message;
  auto p = plan::compile(*sc);
  EXPECT_TRUE(p) << p.error().message;
  m.st.lab = p->lab;
  m.st.topo = p->topo;
  m.st.phase = "up";
  for (size_t i = 0; i < m.st.topo.links.size(); ++i) {
    const auto& l = m.st.topo.links[i];
    const bool gpu_a = l.b.node == "dc/tor0";
    const auto& gpu = gpu_a ? l.a : l.b;
    const auto& port = gpu_a ? l.b : l.a;
    if (gpu.node == "dc/s0/g0" && (l.a.node == "dc/tor0" || l.b.node == "dc/tor0")) {
      m.sender = i;
      m.sender_gpu = end_of(gpu);
      m.sender_port = end_of(port);
    }
    if (gpu.node == "dc/s1/g0" && (l.a.node == "dc/tor0" || l.b.node == "dc/tor0")) {
      m.receiver = i;
      m.receiver_gpu = end_of(gpu);
      m.receiver_port = end_of(port);
    }
  }
  EXPECT_FALSE(m.sender_gpu.empty());
  EXPECT_FALSE(m.receiver_gpu.empty());
  return m;
}

// The receiver's ToR port passed XOFF and paused the sender's NIC 40 times for 0.5 s of 2 s.
congestion::Counters incast(const Mini& m) {
  congestion::AgentStats s;
  s.pid = 77;
  s.uptime_s = 2;
  s.ports[m.receiver_port] = {"lossless", 0, 180'000, 0, 20};  // drops 0, 20 XOFF
  s.ports[m.sender_port] = {"lossless", 0, 0, 0, 0};
  congestion::UpstreamStats u;
  u.pauses = 40;
  u.paused_ns = 500'000'000;
  u.paused_now = true;
  u.by[m.receiver_port] = 40;
  s.upstreams[m.sender_gpu] = u;
  s.upstreams[m.receiver_gpu] = {};
  auto c = congestion::counters_from_stats(s);
  c.path = "/run/testbedctl/mini/stages/congestion.stats.json";
  return c;
}

TEST(ReportCongestion, StatusShowsPausesSentAndReceivedPerLinkEndAndSaysWhereFrom) {
  const Mini m = mini();
  const auto c = incast(m);
  const std::string t = report::status_text(m.st, nullptr, {}, &c);
  const auto at = t.find("CONGESTION COUNTERS (from the congestion agent's stats file");
  ASSERT_NE(at, std::string::npos) << t;
  EXPECT_NE(t.find("since it started 2.0 s ago", at), std::string::npos) << t;
  auto row = [&](const std::string& end) {
    const auto p = t.find("\n" + end + " ", at);
    if (p == std::string::npos) return std::string();
    return t.substr(p + 1, t.find('\n', p + 1) - p - 1);
  };
  const std::string port = row(m.receiver_port), gpu = row(m.sender_gpu);
  std::istringstream pf(port);
  std::string end, sent, xoff;
  pf >> end >> sent >> xoff;
  EXPECT_EQ(sent, "40") << port;
  EXPECT_EQ(xoff, "20") << port;
  EXPECT_NE(port.find("180KB"), std::string::npos) << port;  // the queue's maximum
  EXPECT_NE(gpu.find("0.50 s (25.0%), now"), std::string::npos) << gpu;
  EXPECT_NE(gpu.find(" 40 "), std::string::npos) << gpu;
  EXPECT_NE(t.find("other link end(s) the agent counts: no pause"), std::string::npos) << t;

  const auto j = report::status_json(m.st, nullptr, {}, &c);
  const auto& link = j["links"][m.sender];
  EXPECT_EQ(link["congestion"]["model"], "lossless");
  EXPECT_EQ(link["congestion"]["state"], "counted");
  EXPECT_EQ(link["congestion"]["source"], congestion::kCountersSource);
  const bool gpu_is_a = link["a"]["node"] == "dc/s0/g0";
  const auto& g = link["congestion"][gpu_is_a ? "a" : "b"];
  EXPECT_EQ(g["pauses_received"], 40);
  EXPECT_DOUBLE_EQ(g["paused_fraction"].get<double>(), 0.25);
  EXPECT_TRUE(g["paused_now"].get<bool>());
  const auto& rl = j["links"][m.receiver]["congestion"];
  const auto& p = rl[rl["a"].is_object() && rl["a"]["end"] == m.receiver_port ? "a" : "b"];
  EXPECT_EQ(p["end"], m.receiver_port);
  EXPECT_EQ(p["pauses_sent"], 40);
  EXPECT_EQ(p["lossless_violations"], 0);
  EXPECT_EQ(j["congestion"]["totals"]["pauses"], 40);
  EXPECT_FALSE(j["congestion"].contains("ports"));  // per link end, not twice
}

// An ecn port on mini's VPC (P7): a CE MARKS column ("N of M" ECT packets), its row, the
// sentence under the table, and links[].congestion's ce_marks for that end.
// The status text's row of link end `end` ("" when there is none).
std::string row_of(const std::string& t, const std::string& end) {
  const auto p = t.find("\n" + end + " ");
  if (p == std::string::npos) return "";
  return t.substr(p + 1, t.find('\n', p + 1) - p - 1);
}
// status JSON's links[].congestion of the link with end `end`, and that end's object; nulls
// when no link has it.
std::pair<const nlohmann::json*, const nlohmann::json*> congestion_end(const nlohmann::json& j,
                                                                       const std::string& end) {
  for (const auto& l : j["links"])
    for (const char* side : {"a", "b"})
      if (l["congestion"].contains(side) && l["congestion"][side].is_object() &&
          l["congestion"][side]["end"] == end)
        return {&l["congestion"], &l["congestion"][side]};
  return {nullptr, nullptr};
}

TEST(ReportCongestion, StatusShowsCeMarksOfAnEcnPort) {
  const Mini m = mini();
  auto s = congestion::AgentStats{};
  s.pid = 77;
  s.uptime_s = 2;
  congestion::PortStats vpc{"ecn", 0, 9'000, 0, 0};
  vpc.ecn = {0.0, 1200, 321, 4};
  s.ports["dc/vpc:s1"] = vpc;
  auto c = congestion::counters_from_stats(s);
  c.path = "/run/testbedctl/mini/stages/congestion.stats.json";
  const std::string t = report::status_text(m.st, nullptr, {}, &c);
  EXPECT_NE(t.find("CE MARKS"), std::string::npos) << t;
  const std::string row = row_of(t, "dc/vpc:s1");
  ASSERT_FALSE(row.empty()) << t;
  EXPECT_NE(row.find("321 of 1200"), std::string::npos) << row;
  EXPECT_NE(t.find("CE MARKS: ECT packets the delay stage just after an ecn port marked CE"),
            std::string::npos)
      << t;
  const auto j = report::status_json(m.st, nullptr, {}, &c);
  const auto [link, end] = congestion_end(j, "dc/vpc:s1");
  ASSERT_NE(end, nullptr) << j.dump();
  EXPECT_EQ((*link)["model"], "ecn");
  EXPECT_EQ((*end)["ce_marks"], 321);
  EXPECT_EQ((*end)["ect_packets"], 1200);
  EXPECT_EQ(j["congestion"]["totals"]["ce_marks"], 321);
  EXPECT_EQ(report::congestion_window_line(c).rfind("PFC/ECN (lossless and ecn links): ", 0), 0u);
}

// Where the kernel's RED marks (no ECT count: the stage does not see those packets), the cell is
// RED's count, the JSON says who marked, and the window line says RED.
TEST(ReportCongestion, RedMarksShowAsTheKernelsCount) {
  const Mini m = mini();
  auto s = congestion::AgentStats{};
  s.pid = 77;
  s.uptime_s = 2;
  congestion::PortStats vpc{"ecn", 0, 9'000, 0, 0};
  vpc.ecn = {0.0, 0, 2903, 0, "red"};
  s.ports["dc/vpc:s1"] = vpc;
  const auto back = congestion::stats_from_json(congestion::to_json(s));
  EXPECT_EQ(back.ports.at("dc/vpc:s1").ecn.marked_by, "red");
  auto c = congestion::counters_from_stats(back);
  c.path = "/run/testbedctl/mini/stages/congestion.stats.json";
  const std::string t = report::status_text(m.st, nullptr, {}, &c);
  const std::string row = row_of(t, "dc/vpc:s1");
  ASSERT_FALSE(row.empty()) << t;
  EXPECT_NE(row.find("2903 (RED)"), std::string::npos) << row;
  const auto j = report::status_json(m.st, nullptr, {}, &c);
  const auto end = congestion_end(j, "dc/vpc:s1").second;
  ASSERT_NE(end, nullptr) << j.dump();
  EXPECT_EQ((*end)["marked_by"], "red");
  EXPECT_NE(
      report::congestion_window_line(c).find("2903 CE marks at 1 ecn port(s) (the kernel's RED)"),
      std::string::npos)
      << report::congestion_window_line(c);
}

TEST(ReportCongestion, StatusSaysWhyThereAreNoCountsAndNothingWithoutAnAgent) {
  const Mini m = mini();
  congestion::Counters off;
  off.source = congestion::Source::kNotRunning;
  off.why = "the congestion agent has written no stats file (x): not running";
  std::string t = report::status_text(m.st, nullptr, {}, &off);
  EXPECT_NE(t.find("CONGESTION COUNTERS: none: the congestion agent has written no stats file"),
            std::string::npos)
      << t;
  auto j = report::status_json(m.st, nullptr, {}, &off);
  EXPECT_EQ(j["links"][m.sender]["congestion"]["state"], "not running");
  EXPECT_FALSE(j["links"][m.sender]["congestion"].contains("a"));  // no zeros that look measured
  EXPECT_EQ(j["congestion"]["state"], "not running");

  congestion::Counters none;  // kNoAgent
  t = report::status_text(m.st, nullptr, {}, &none);
  EXPECT_EQ(t.find("CONGESTION COUNTERS"), std::string::npos) << t;
  j = report::status_json(m.st, nullptr, {}, &none);
  EXPECT_EQ(j["links"][m.sender]["congestion"],
            nlohmann::json({{"model", m.st.topo.links[m.sender].emulated.congestion.model}}));
  EXPECT_FALSE(j.contains("congestion"));
}

lab::WatchFrame pfc_frame() {
  lab::WatchFrame f;
  f.interval_s = 1;
  f.congestion = congestion::Source::kCounted;
  f.congestion_window_s = 0.8;
  lab::WatchLink sender;
  sender.a = "dc/s0/g0:rail";
  sender.b = "dc/tor0:s0g0";
  sender.tier = "scale-out";
  sender.seen = true;
  sender.drops = 0;
  sender.pause_ab = {true, false, false, 120, 0.6, true, 0, 0, 0};
  sender.pause_ba = {false, true, true, 0, 0, false, 0, 0, 0};
  lab::WatchLink receiver = sender;
  receiver.a = "dc/s1/g0:rail";
  receiver.b = "dc/tor0:s1g0";
  receiver.drops = 3;
  receiver.pause_ab = {true, false, false, 0, 0, false, 0, 0, 0};
  receiver.pause_ba = {false, true, true, 0, 0, false, 60, 240, 3};
  lab::WatchLink idle = sender;
  idle.a = "dc/s2/g0:rail";
  idle.b = "dc/tor0:s2g0";
  idle.pause_ab = {true, false, false, 0, 0, false, 0, 0, 0};
  idle.pause_ba = {false, true, true, 0, 0, false, 0, 0, 0};
  f.links = {sender, receiver, idle};
  return f;
}

TEST(ReportWatch, PfcSectionShowsBothDirectionsPausesSentAndLosslessDropsIn80Columns) {
  const auto f = pfc_frame();
  const std::string t = report::watch_text("mini", f, 0);
  const auto at =
      t.find("PFC (lossless links): the congestion agent's counters over its last 0.8 s");
  ASSERT_NE(at, std::string::npos) << t;
  const std::string pfc = report::watch_pfc_text(f, 0);
  std::istringstream lines(pfc);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
  auto row = [&](const std::string& a) {
    const auto p = pfc.find(a + " <-> ");
    return p == std::string::npos ? std::string() : pfc.substr(p, pfc.find('\n', p) - p);
  };
  // s0 paused 60% of the window, 120 pauses / 0.8 s; the ToR's s0g0 queue sent none.
  const std::string s0 = row("dc/s0/g0:rail");
  EXPECT_NE(s0.find("60% 150/s"), std::string::npos) << s0;
  // s1's ToR port sent 240 pauses / 0.8 s and dropped 3: a lossless violation, marked.
  const std::string s1 = row("dc/s1/g0:rail");
  EXPECT_NE(s1.find(" 300 "), std::string::npos) << s1;
  EXPECT_NE(s1.find("3 VIOLATION"), std::string::npos) << s1;
  EXPECT_TRUE(row("dc/s2/g0:rail").empty()) << pfc;  // idle: counted in one line
  EXPECT_NE(pfc.find("1 other lossless link(s): no pause"), std::string::npos) << pfc;
  // The links table marks the drops that were a lossless queue's.
  const auto table_row = t.substr(t.find("dc/s1/g0:rail <-> dc/tor0:s1g0"));
  EXPECT_NE(table_row.substr(0, table_row.find('\n')).find("3! "), std::string::npos) << t;
  EXPECT_NE(t.find("PFC: from the congestion agent's stats file"), std::string::npos) << t;

  const auto j = report::watch_json("mini", f);
  EXPECT_EQ(j["congestion"]["state"], "counted");
  EXPECT_EQ(j["congestion"]["source"], congestion::kCountersSource);
  EXPECT_DOUBLE_EQ(j["links"][0]["pause"]["ab"]["paused_fraction"].get<double>(), 0.6);
  EXPECT_DOUBLE_EQ(j["links"][0]["pause"]["ab"]["pauses_received_per_s"].get<double>(), 150);
  EXPECT_EQ(j["links"][1]["pause"]["ba"]["pauses_sent"], 240);
  EXPECT_EQ(j["links"][1]["pause"]["ba"]["lossless_drops_since_watch_began"], 3);
  EXPECT_FALSE(j["links"][0]["pause"]["ba"].contains("paused_fraction"));  // not pausable
}

// An ecn port (the VPC's toward s4) apart from the PFC rows: its CE marks and ECT packets per
// second over the window, in the text and the JSON; an ecn-only link is not counted lossless.
TEST(ReportWatch, EcnPortsShowTheirCeMarksApartFromThePfcRows) {
  auto f = pfc_frame();
  lab::WatchLink fe;
  fe.a = "dc/s4:fe";
  fe.b = "dc/vpc:s4";
  fe.tier = "frontend";
  fe.seen = true;
  fe.pause_ba = {false, true, false, 0, 0, false, 0, 0, 0, true, 400, 500};
  lab::WatchLink quiet = fe;
  quiet.a = "dc/s3:fe";
  quiet.b = "dc/vpc:s3";
  quiet.pause_ba = {false, true, false, 0, 0, false, 0, 0, 0, true, 0, 0};
  f.links.push_back(fe);
  f.links.push_back(quiet);
  const std::string t = report::watch_pfc_text(f, 0);
  EXPECT_NE(t.find("1 other lossless link(s): no pause"), std::string::npos) << t;
  const auto at = t.find("ECN (ecn links)");
  ASSERT_NE(at, std::string::npos) << t;
  const std::string ecn = t.substr(at);
  EXPECT_NE(ecn.find("dc/vpc:s4 -> dc/s4:fe"), std::string::npos) << ecn;
  EXPECT_NE(ecn.find("500 CE/s of 625 ECT/s (80%)"), std::string::npos) << ecn;
  EXPECT_EQ(ecn.find("dc/vpc:s3"), std::string::npos) << "no ECT packet: no row";
  std::istringstream lines(t);
  for (std::string line; std::getline(lines, line);) EXPECT_LE(line.size(), 80u) << line;
  const auto j = report::watch_json("mini", f);
  EXPECT_EQ(j["links"][3]["pause"]["ba"]["ce_marks"], 400);
  EXPECT_EQ(j["links"][3]["pause"]["ba"]["ect_packets"], 500);
  EXPECT_FALSE(j["links"][0]["pause"]["ab"].contains("ce_marks"));
  // Only ecn ports: no PFC rows, one line for the ECN part.
  f.links = {quiet};
  EXPECT_EQ(report::watch_pfc_text(f, 0),
            "ECN (ecn links): CE marks by the stage after each ecn port, same window\n"
            "  no ECT packet through its 1 ecn port(s)\n");
}

TEST(ReportWatch, PfcSectionSaysWhyAndIsAbsentWithoutAnAgent) {
  auto f = pfc_frame();
  f.congestion = congestion::Source::kNotRunning;
  f.congestion_why = "the congestion agent has written no stats file (x): not running";
  EXPECT_EQ(report::watch_pfc_text(f, 0),
            "PFC (lossless links): no counts: the congestion agent has written no stats file (x): "
            "not running\n");
  f.congestion = congestion::Source::kNoAgent;
  for (auto& l : f.links) l.pause_ab = l.pause_ba = {};
  EXPECT_TRUE(report::watch_pfc_text(f, 0).empty());
  const std::string t = report::watch_text("mini", f, 0);
  EXPECT_EQ(t.find("PFC"), std::string::npos) << t;
}

}  // namespace
}  // namespace tb::report_congestion_test
