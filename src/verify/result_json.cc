#include "verify/result_json.h"

#include "probe/goodput.h"
#include "probe/rtt.h"

namespace tb::verify {
namespace {

// A link (its figures included) through the topology's own JSON, so every field goes as the
// lab's state keeps it.
nlohmann::json link_json(const plan::Link& l) {
  plan::Topology t;
  t.links.push_back(l);
  return plan::to_json(t)["links"][0];
}

plan::Link link_from(const nlohmann::json& j) {
  nlohmann::json t = {{"nodes", nlohmann::json::array()}, {"links", nlohmann::json::array({j})}};
  return plan::topology_from_json(t).links.at(0);
}

nlohmann::json request_json(const MeasureRequest& r) {
  return {{"target", target_to_json(r.target)},
          {"port", r.port},
          {"probes", r.probes},
          {"base_probes", r.base_probes},
          {"interval_us", r.interval_us},
          {"wait_ms", r.wait_ms},
          {"goodput_seconds", r.goodput_seconds},
          {"warmup_ms", r.warmup_ms},
          {"drain_ms", r.drain_ms},
          {"buffer", r.buffer},
          {"serve_seconds", r.serve_seconds},
          {"rtt_only", r.rtt_only},
          {"loss_pace_bps", r.loss_pace_bps},
          {"remote_server", r.remote_server}};
}

MeasureRequest request_from(const nlohmann::json& j) {
  MeasureRequest r;
  auto t = target_from_json(j.at("target"));
  if (!t) throw std::runtime_error(t.error().message);
  r.target = *t;
  r.port = j.at("port");
  r.probes = j.at("probes");
  r.base_probes = j.value("base_probes", 0);
  r.interval_us = j.at("interval_us");
  r.wait_ms = j.at("wait_ms");
  r.goodput_seconds = j.at("goodput_seconds");
  r.warmup_ms = j.at("warmup_ms");
  r.drain_ms = j.at("drain_ms");
  r.buffer = j.at("buffer");
  r.serve_seconds = j.at("serve_seconds");
  r.rtt_only = j.at("rtt_only");
  r.loss_pace_bps = j.at("loss_pace_bps");
  r.remote_server = j.at("remote_server");
  return r;
}

nlohmann::json rtt_json(const std::optional<probe::RttResult>& r) {
  if (!r) return nlohmann::json();
  probe::RttOptions o;  // what the result needs of its options: whether it warmed up
  if (r->warmup_sent > 0) o.warmup_ms = kRttWarmupMs;
  return probe::to_json(o, *r);
}
nlohmann::json goodput_json(const std::optional<probe::GoodputResult>& g) {
  return g ? probe::to_json(probe::GoodputOptions{}, *g) : nlohmann::json();
}

template <class T, class F>
std::optional<T> optional_from(const nlohmann::json& j, F read) {
  if (j.is_null()) return std::nullopt;
  auto v = read(j);
  if (!v) throw std::runtime_error(v.error().message);
  return *v;
}

nlohmann::json reading_json(const MeasureOutcome& o, const std::optional<HostLoad>& host) {
  return {{"errors", o.errors},
          {"timeouts", o.timeouts},
          {"notes", o.notes},
          {"rtt", rtt_json(o.m.rtt)},
          {"base", rtt_json(o.m.base)},
          {"goodput", goodput_json(o.m.goodput)},
          {"loss_goodput", goodput_json(o.m.loss_goodput)},
          {"loss_pace_bps", o.m.loss_pace_bps},
          {"host", host ? to_json(*host) : nlohmann::json()}};
}

// A reading, its checks and stall derived here against `figures`.
Reading reading_from(const nlohmann::json& j, const plan::EmulatedFigures& figures) {
  Reading r;
  r.outcome.errors = j.at("errors").get<std::vector<std::string>>();
  r.outcome.timeouts = j.value("timeouts", 0);
  r.outcome.notes = j.at("notes").get<std::vector<std::string>>();
  r.outcome.m.rtt = optional_from<probe::RttResult>(j.at("rtt"), probe::rtt_from_json);
  r.outcome.m.base = optional_from<probe::RttResult>(j.at("base"), probe::rtt_from_json);
  r.outcome.m.goodput =
      optional_from<probe::GoodputResult>(j.at("goodput"), probe::goodput_from_json);
  r.outcome.m.loss_goodput =
      optional_from<probe::GoodputResult>(j.at("loss_goodput"), probe::goodput_from_json);
  r.outcome.m.loss_pace_bps = j.at("loss_pace_bps");
  r.host = optional_from<HostLoad>(j.at("host"), host_load_from_json);
  r.checks = evaluate(figures, r.outcome.m);
  r.stall = reading_stall(r.checks, r.outcome.m, r.host);
  return r;
}

}  // namespace

nlohmann::json target_to_json(const ProbeTarget& t) {
  return {{"a_netns", t.a_netns}, {"a_dev", t.a_dev},           {"a_addr", t.a_addr.to_string()},
          {"b_netns", t.b_netns}, {"addr", t.addr.to_string()}, {"server_dev", t.server_dev},
          {"why", t.why}};
}

Result<ProbeTarget> target_from_json(const nlohmann::json& j) {
  try {
    ProbeTarget t;
    t.a_netns = j.at("a_netns");
    t.a_dev = j.at("a_dev");
    auto a = parse_ipv4(j.at("a_addr").get<std::string>());
    auto b = parse_ipv4(j.at("addr").get<std::string>());
    if (!a || !b) return fail("malformed probe target: an address is not IPv4");
    t.a_addr = *a;
    t.b_netns = j.at("b_netns");
    t.addr = *b;
    t.server_dev = j.at("server_dev");
    t.why = j.at("why");
    return t;
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("malformed probe target: ") + e.what());
  }
}

Result<HostLoad> host_load_from_json(const nlohmann::json& j) {
  try {
    HostLoad h;
    h.cpu_busy = j.at("cpu_busy");
    h.idle_group = j.value("idle_group", -1.0);
    h.stage_packets = j.at("stage_packets");
    h.stage_late_mean_us = j.at("stage_late_mean_us");
    h.stage_late_max_us = j.at("stage_late_max_us");
    h.scheduling = j.at("stage_scheduling").get<std::vector<std::string>>();
    h.host_bound = j.at("host_bound");
    h.links_checked = j.at("links_checked");
    if (const auto& p = j.at("promptness"); !p.is_null())
      h.promptness = Promptness{p.at("wakeups"),     p.at("seconds"),       p.at("late_mean_us"),
                                p.at("late_max_us"), p.at("stalled_share"), p.at("scheduling")};
    for (const auto& l : j.at("links_short"))
      h.links.push_back({l.at("link"), l.at("emulated_bps"), l.at("short_intervals"),
                         l.at("waiting_intervals"), l.at("delivered_share"),
                         l.at("backlog_max_bytes")});
    return h;
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("malformed host load: ") + e.what());
  }
}

nlohmann::json class_to_wire(const ClassResult& c) {
  nlohmann::json readings = nlohmann::json::array();
  for (const auto& e : c.earlier) readings.push_back(reading_json(e.outcome, e.host));
  readings.push_back(reading_json(c.outcome, c.host));
  nlohmann::json scenario;
  if (c.scenario) {
    plan::Link s = c.link;
    s.emulated = *c.scenario;
    scenario = link_json(s)["emulated"];
  }
  return {{"link", link_json(c.link)},
          {"scenario", scenario},
          {"request", request_json(c.request)},
          {"readings", readings}};
}

Result<ClassResult> class_from_wire(const nlohmann::json& j, const LinkClass& cls) {
  try {
    ClassResult c;
    c.cls = cls;
    c.link = link_from(j.at("link"));
    if (const auto& s = j.at("scenario"); !s.is_null()) {
      nlohmann::json l = j.at("link");
      l["emulated"] = s;
      c.scenario = link_from(l).emulated;
    }
    c.request = request_from(j.at("request"));
    c.target = c.request.target;
    const auto& rs = j.at("readings");
    if (!rs.is_array() || rs.empty()) return fail("malformed class result: no reading");
    for (const auto& r : rs) c.earlier.push_back(reading_from(r, c.link.emulated));
    Reading last = std::move(c.earlier.back());
    c.earlier.pop_back();
    c.outcome = std::move(last.outcome);
    c.checks = std::move(last.checks);
    c.host = std::move(last.host);
    c.stall = std::move(last.stall);
    return c;
  } catch (const std::exception& e) {  // nlohmann's, and a part's own reader's
    return fail(std::string("malformed class result: ") + e.what());
  }
}

}  // namespace tb::verify
