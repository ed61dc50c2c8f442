// scenario::load: parse the TOML, then read each section into the model, collecting every
// problem with its place. The sections live in load_network.cc (profiles, regions, WAN links)
// and load_activity.cc (workloads, faults); the shared helpers in reader.{h,cc}.
#include "scenario/loader.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <fmt/format.h>
#include <toml.hpp>

#include "core/ipv4.h"
#include "scenario/bounds.h"
#include "scenario/names.h"
#include "scenario/reader.h"

namespace tb::scenario {
namespace {

using detail::Diags;
using detail::LoadState;
using detail::Table;

// toml11's message for a syntax error is "[error] toml::<func>: <what>" followed by a snippet
//   " --> file" / "   |" / " 2 | name = " / "   |        ^--- expected value, but got nothing"
// Returns "<what>; <note under the caret>" and the column the caret points at on `line`.
std::string summarize_syntax_error(const std::string& what, int line, int& col) {
  std::istringstream in(what);
  std::string first, l, summary;
  std::getline(in, first);
  if (first.starts_with("[error] ")) first.erase(0, 8);
  if (first.starts_with("toml::")) {
    auto colon = first.find(": ");
    if (colon != std::string::npos) first.erase(0, colon + 2);
  }
  while (!first.empty() && (first.back() == '.' || first.back() == ' ')) first.pop_back();
  summary = first;
  const std::string marker = " " + std::to_string(line) + " | ";
  bool at_line = false;
  while (std::getline(in, l)) {
    if (at_line) {
      auto bar = l.find("| ");
      auto caret = l.find_first_of("^~", bar == std::string::npos ? 0 : bar);
      if (bar != std::string::npos && caret != std::string::npos) {
        col = static_cast<int>(caret - (bar + 2)) + 1;
        auto note = l.find_first_not_of("^~- ", caret);
        if (note != std::string::npos) summary += "; " + l.substr(note);
      }
      break;
    }
    auto pos = l.find(marker);
    at_line = pos != std::string::npos && l.find_first_not_of(' ') == pos + 1;
  }
  return summary;
}

constexpr size_t kMaxSnippetChars = 400;

// Whether the integer written as `token` (TOML syntax: sign, 0x/0o/0b, '_') fits in 64 bits.
// toml11 reads it with operator>>, which clamps a decimal that does not fit to INT64_MAX/MIN.
bool fits_int64(std::string_view token) {
  std::string digits;
  for (char c : token)
    if (c != '_' && c != '+') digits += c;
  int base = 10;
  std::string_view d = digits;
  if (d.size() > 2 && d[0] == '0' && (d[1] == 'x' || d[1] == 'o' || d[1] == 'b')) {
    base = d[1] == 'x' ? 16 : d[1] == 'o' ? 8 : 2;
    d.remove_prefix(2);
  }
  int64_t n = 0;
  return std::from_chars(d.data(), d.data() + d.size(), n, base).ec !=
         std::errc::result_out_of_range;
}

// Reports every integer anywhere in `v` whose written form does not fit in 64 bits. `key` is
// the dotted path of `v` ("lab.servers"). Recursion is bounded by exceeds_bounds.
void check_integers(const toml::value& v, const std::string& key, Diags& d) {
  if (v.is_integer()) {
    // Once per integer in the file: place_of, not toml11's location() (reader.h).
    const auto p = detail::place_of(v);
    const std::string_view token = p ? p->token : std::string_view();
    if (!token.empty() && !fits_int64(token))
      d.add(detail::loc_of(v), key + ": " + detail::quote(token) +
                                   " does not fit in a 64-bit integer (-9223372036854775808 to "
                                   "9223372036854775807)");
  } else if (v.is_array()) {
    for (const auto& e : v.as_array()) check_integers(e, key, d);
  } else if (v.is_table()) {
    for (const auto& [k, e] : v.as_table()) check_integers(e, key.empty() ? k : key + "." + k, d);
  }
}

Result<toml::value> parse_toml(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  try {
    return toml::parse(in, name);
  } catch (const toml::syntax_error& e) {
    const int line = static_cast<int>(e.location().line());
    int col = static_cast<int>(e.location().column());
    const std::string summary = summarize_syntax_error(e.what(), line, col);
    std::string snippet = e.what();
    auto nl = snippet.find('\n');
    snippet = nl == std::string::npos ? "" : snippet.substr(nl);
    // The snippet quotes the whole offending line: leave it out when the line is long.
    if (snippet.size() > kMaxSnippetChars) snippet.clear();
    return bad_input(name + ":" + std::to_string(line) + ":" + std::to_string(col) +
                     ": malformed TOML: " + summary + snippet);
  } catch (const toml::exception& e) {
    return bad_input(name + ":" + std::to_string(e.location().line()) + ":" +
                     std::to_string(e.location().column()) + ": malformed TOML: " + e.what());
  } catch (const std::exception& e) {
    return bad_input(name + ": malformed TOML: " + e.what());
  }
}

void read_lab(Table& top, LoadState& st) {
  const toml::value* v = top.find("lab");
  if (!v) {
    st.d.add(Loc{1, 1}, "lab: missing; every scenario starts with a [lab] table giving its name");
    return;
  }
  if (!v->is_table()) {
    top.error("lab", "must be a table, written [lab] (got " + detail::type_name(*v) + ")");
    return;
  }
  Table t(*v, "lab", "[lab]", {"name", "description", "address_space"}, st.d);
  if (auto name = t.str("name", true)) {
    if (detail::check_name(t, "name", *name, kMaxLabNameLen, false, "lab name",
                           "since namespace names are tb-<lab>-<node>"))
      st.s.lab = *name;
  }
  if (auto d = t.str("description")) st.s.description = *d;
  if (auto a = t.str("address_space")) {
    auto p = parse_prefix(*a);
    if (!p) {
      t.error("address_space", detail::cite(p.error().message, *a));
    } else if (a->find('/') == std::string::npos) {  // parse_prefix reads it as a /32
      t.error("address_space", detail::quote(*a) +
                                   " has no prefix length; write ADDRESS/LEN with LEN at most "
                                   "24, e.g. \"198.18.0.0/15\"");
    } else if (p->len > 24) {
      t.error("address_space", "prefix length must be at most 24 (got /" + std::to_string(p->len) +
                                   "); a lab needs at least a /24");
    } else if (p->network() != *p) {
      t.error("address_space", detail::quote(*a) + " has host bits set; did you mean " +
                                   detail::quote(p->network().to_string()) + "?");
    } else {
      st.s.address_space = *p;
    }
  }
  t.finish();
}

void read_scale(Table& top, LoadState& st) {
  const toml::value* v = top.find("scale");
  if (!v) return;
  if (!v->is_table()) {
    top.error("scale", "must be a table, written [scale] (got " + detail::type_name(*v) + ")");
    return;
  }
  Table t(*v, "scale", "[scale]", {"bandwidth", "delay", "compute"}, st.d);
  st.s.scale.loc = t.loc();
  if (auto b = t.number("bandwidth", false, 0, 1e12, true)) st.s.scale.bandwidth = *b;
  if (auto d = t.number("delay", false, 0, 1e6, true)) st.s.scale.delay = *d;
  if (auto c = t.number("compute", false, 0, 1e6, true)) st.s.scale.compute = *c;
  t.finish();
}

void read_expect(Table& top, LoadState& st) {
  const toml::value* v = top.find("expect");
  if (!v) return;
  if (!v->is_table()) {
    top.error("expect", "must be a table, written [expect] (got " + detail::type_name(*v) + ")");
    return;
  }
  Table t(*v, "expect", "[expect]",
          {"max_stall_ms", "min_busbw_fraction", "max_detection_ms", "max_recovery_ms",
           "checkpoint_on_time", "max_gold_p99_ms"},
          st.d);
  Expect& e = st.s.expect;
  e.loc = t.loc();
  constexpr double kBig = 1e12;
  e.max_stall_ms = t.number("max_stall_ms", false, 0, kBig);
  e.min_busbw_fraction = t.number("min_busbw_fraction", false, 0, 1);
  e.max_detection_ms = t.number("max_detection_ms", false, 0, kBig);
  e.max_recovery_ms = t.number("max_recovery_ms", false, 0, kBig);
  e.checkpoint_on_time = t.boolean("checkpoint_on_time");
  e.max_gold_p99_ms = t.number("max_gold_p99_ms", false, 0, kBig, true);
  // The gold probe crosses the WAN a checkpoint replicates over: without one it has no path.
  if (t.has("max_gold_p99_ms") &&
      std::none_of(st.s.workloads.begin(), st.s.workloads.end(),
                   [](const Workload& w) { return w.kind == "checkpoint"; }))
    t.error("max_gold_p99_ms",
            "needs a [[workload]] of kind = \"checkpoint\": run's gold probe crosses the WAN "
            "between its from and to regions, and this scenario has none");
  t.finish();
}

void read_failover(Table& top, LoadState& st) {
  const toml::value* v = top.find("failover");
  if (!v) return;
  if (!v->is_table()) {
    top.error("failover",
              "must be a table, written [failover] (got " + detail::type_name(*v) + ")");
    return;
  }
  Table t(*v, "failover", "[failover]",
          {"mode", "probe_interval", "misses", "bfd_interval", "bfd_multiplier", "host_routes"},
          st.d);
  Failover& f = st.s.failover;
  f.loc = t.loc();
  if (auto m = t.str("mode"); m && t.one_of("mode", *m, {"link-state", "none", "agent", "bfd"}))
    f.mode = *m;
  if (auto d = t.duration("probe_interval")) {
    if (d->ns >= 1'000'000 && d->ns <= 10'000'000'000)
      f.probe_interval = *d;
    else
      t.error("probe_interval", "must be 1ms..10s");
  }
  if (auto m = t.integer("misses", false, 1, 100)) f.misses = static_cast<int>(*m);
  if (auto d = t.duration("bfd_interval")) {
    // FRR bfdd accepts 10..60000 ms (doc/user/bfd.rst)
    if (d->ns >= 10'000'000 && d->ns <= 60'000'000'000 && d->ns % 1'000'000 == 0)
      f.bfd_interval = *d;
    else
      t.error("bfd_interval", "must be whole milliseconds, 10ms..60s (FRR's range)");
  }
  if (auto m = t.integer("bfd_multiplier", false, 2, 255)) f.bfd_multiplier = static_cast<int>(*m);
  if (auto h = t.str("host_routes"); h && t.one_of("host_routes", *h, {"withdraw", "static"}))
    f.host_routes = *h;
  if (f.mode != "agent" && (t.has("probe_interval") || t.has("misses")))
    t.error(t.has("misses") ? "misses" : "probe_interval", "only for mode = \"agent\"");
  if (f.mode != "bfd" && (t.has("bfd_interval") || t.has("bfd_multiplier")))
    t.error(t.has("bfd_interval") ? "bfd_interval" : "bfd_multiplier", "only for mode = \"bfd\"");
  t.finish();
}

// [congestion]: the congestion agent's timing and PFC watchdog (model.h Congestion).
void read_congestion(Table& top, LoadState& st) {
  const toml::value* v = top.find("congestion");
  if (!v) return;
  if (!v->is_table()) {
    top.error("congestion",
              "must be a table, written [congestion] (got " + detail::type_name(*v) + ")");
    return;
  }
  Table t(*v, "congestion", "[congestion]",
          {"poll", "idle_poll", "late_budget", "watchdog", "watchdog_restore", "watchdog_action"},
          st.d);
  Congestion& c = st.s.congestion;
  c.loc = t.loc();
  // Each in its range: a poll under 100 us costs more CPU than a dump takes (P0: ~10-30 us per
  // switch namespace); above 100 ms a lossless queue overflows long before the agent looks.
  struct Range {
    const char* key;
    Duration* out;
    int64_t lo, hi;
    const char* valid;
  };
  for (const Range& r :
       {Range{"poll", &c.poll, 100'000, 100'000'000, "100us..100ms"},
        Range{"idle_poll", &c.idle_poll, 100'000, 1'000'000'000, "100us..1s"},
        Range{"late_budget", &c.late_budget, 0, 100'000'000, "0..100ms"},
        Range{"watchdog", &c.watchdog, 1'000'000, 60'000'000'000, "1ms..60s"},
        Range{"watchdog_restore", &c.watchdog_restore, 1'000'000, 60'000'000'000, "1ms..60s"}}) {
    auto d = t.duration(r.key);
    if (!d) continue;
    if (d->ns >= r.lo && d->ns <= r.hi)
      *r.out = *d;
    else
      t.error(r.key, std::string("must be ") + r.valid);
  }
  if (c.idle_poll < c.poll)
    t.error(t.has("idle_poll") ? "idle_poll" : "poll",
            "idle_poll (" + format_duration(c.idle_poll) + ") must be at least poll (" +
                format_duration(c.poll) + "): the agent polls faster while a queue builds");
  if (auto a = t.str("watchdog_action"); a && t.one_of("watchdog_action", *a, {"drop", "forward"}))
    c.watchdog_action = *a;
  t.finish();
}

// [qos]: enabled, default, and one table per class (gold, silver, bronze) with share, ceiling,
// priority and dscp; what is not written keeps its default (model.h Qos).
void read_qos(Table& top, LoadState& st) {
  const toml::value* v = top.find("qos");
  if (!v) return;
  if (!v->is_table()) {
    top.error("qos", "must be a table, written [qos] (got " + detail::type_name(*v) + ")");
    return;
  }
  Qos& q = st.s.qos;
  std::vector<std::string> names;
  for (const auto& c : q.classes) names.push_back(c.name);
  std::vector<std::string> keys = {"enabled", "default"};
  keys.insert(keys.end(), names.begin(), names.end());
  Table t(*v, "qos", "[qos]", keys, st.d);
  q.loc = t.loc();
  if (auto e = t.boolean("enabled")) q.enabled = *e;
  if (auto d = t.str("default"); d && t.one_of("default", *d, names)) q.default_class = *d;
  double total = 0;
  for (auto& c : q.classes) {
    const toml::value* cv = t.find(c.name);
    if (cv && !cv->is_table()) {
      t.error(c.name,
              "must be a table, written [qos." + c.name + "] (got " + detail::type_name(*cv) + ")");
      continue;
    }
    if (cv) {
      Table ct(*cv, "qos." + c.name, "[qos." + c.name + "]",
               {"share", "ceiling", "priority", "dscp"}, st.d);
      c.loc = ct.loc();
      if (auto p = ct.percent("share")) {
        if (*p > 0)
          c.share = *p / 100;
        else
          ct.error("share", "must be above 0% (a class with no guaranteed rate starves)");
      }
      if (auto p = ct.percent("ceiling")) c.ceiling = *p / 100;
      if (c.ceiling < c.share)
        ct.error(ct.has("ceiling") ? "ceiling" : "share",
                 "the ceiling (" + fmt::format("{:g}%", c.ceiling * 100) +
                     ") must be at least the share (" + fmt::format("{:g}%", c.share * 100) + ")");
      if (auto p = ct.integer("priority", false, 0, 7, "HTB has 8 priorities, 0 first"))
        c.priority = static_cast<int>(*p);
      if (const toml::value* d = ct.find("dscp")) {
        std::vector<int> values;
        const bool array = d->is_array();
        if (!array && !d->is_integer()) {
          ct.error("dscp", "must be a DSCP value 0..63 or an array of them (got " +
                               detail::type_name(*d) + ")");
        } else {
          std::vector<const toml::value*> items;
          if (array)
            for (const auto& e : d->as_array()) items.push_back(&e);
          else
            items.push_back(d);
          for (const toml::value* e : items) {
            if (!e->is_integer() || e->as_integer() < 0 || e->as_integer() > 63)
              ct.error_at(detail::loc_of(*e), "dscp",
                          "each value must be an integer 0..63 (a DSCP: EF is 46, CS6 48, AF21 "
                          "18, CS1 8)");
            else
              values.push_back(static_cast<int>(e->as_integer()));
          }
          if (array && d->as_array().empty()) ct.error("dscp", "must list at least one value");
          if (!values.empty()) c.dscp = values;
        }
      }
      ct.finish();
    }
    total += c.share;
  }
  // A DSCP value in two classes: the later class's table names it.
  std::map<int, std::string> owner;
  for (const auto& c : q.classes)
    for (int d : c.dscp) {
      auto [it, fresh] = owner.try_emplace(d, c.name);
      if (!fresh)
        st.d.add(c.loc.line ? c.loc : q.loc, "qos." + c.name + ": dscp: " + std::to_string(d) +
                                                 " is already in class \"" + it->second +
                                                 "\"; a DSCP value selects one class");
    }
  if (total > 1 + 1e-9)
    st.d.add(q.loc, "qos: the classes' shares add up to " + fmt::format("{:g}%", total * 100) +
                        "; at most 100% of a link's rate can be guaranteed");
  t.finish();
}

// At most kMaxNamespaces in the lab; reported once, at the region that goes over.
void check_namespaces(LoadState& st) {
  using detail::kMaxNamespaces;
  using detail::region_namespaces;
  int64_t total = 0;
  const Region* over = nullptr;
  for (const auto& r : st.s.regions) {
    total += region_namespaces(r);
    if (!over && total > kMaxNamespaces) over = &r;
  }
  if (!over) return;
  st.d.add(over->loc, "region " + detail::quote(over->name) + ": the lab would have " +
                          std::to_string(total) +
                          " network namespaces (one per GPU, server, ToR, spine, VPC switch and "
                          "transit router; " +
                          std::to_string(region_namespaces(*over)) + " in this region); at most " +
                          std::to_string(kMaxNamespaces) + " in one lab");
}

}  // namespace

Result<Scenario> load_text(const std::string& text, const std::string& name) {
  if (auto over = detail::exceeds_bounds(text, name)) return bad_input(*over);
  auto root = parse_toml(text, name);
  if (!root) return std::unexpected(root.error());

  Diags d(name);
  check_integers(*root, "", d);
  if (!d.empty()) return bad_input(d.text());  // the rest would see clamped values

  Scenario s;
  s.file = name;
  LoadState st{s, d, {}, {}, {}};
  Table top(*root, "", "the top level",
            {"lab", "scale", "profiles", "region", "wan", "workload", "fault", "expect", "failover",
             "qos", "congestion", "host", "vxlan"},
            d);
  read_lab(top, st);
  read_scale(top, st);
  detail::read_profiles(top, st);
  detail::read_regions(top, st);
  check_namespaces(st);
  detail::read_wans(top, st);
  detail::read_hosts(top, st);
  detail::read_vxlan(top, st);
  detail::resolve_profiles(st);
  detail::read_workloads(top, st);
  detail::read_faults(top, st);
  read_expect(top, st);
  read_failover(top, st);
  read_qos(top, st);
  read_congestion(top, st);
  top.finish();

  if (!d.empty()) return bad_input(d.text());
  return s;
}

Result<Scenario> load(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return bad_input(path + ": cannot read scenario file: it is a directory");
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    const int e = errno;
    return bad_input(path +
                     ": cannot read scenario file: " + (e ? std::strerror(e) : "cannot open it"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return bad_input(path + ": cannot read scenario file: read failed");
  return load_text(text.str(), path);
}

}  // namespace tb::scenario
