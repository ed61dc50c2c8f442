// The network half of a scenario: [profiles.*], [[region]] and [[wan]], and the check that
// every profile they name is declared or a preset.
#include <algorithm>
#include <map>
#include <utility>

#include "core/ipv4.h"
#include "scenario/names.h"
#include "scenario/presets.h"
#include "scenario/reader.h"

namespace tb::scenario::detail {
namespace {

std::string at_line(Loc at) {
  return "line " + std::to_string(at.line);
}

// A reference to a profile: recorded now, checked by resolve_profiles.
void profile_ref(Table& t, std::string_view key, bool required, LoadState& st, std::string* out) {
  auto name = t.str(key, required);
  if (!name) return;
  *out = *name;
  st.profile_refs.push_back({*name, t.loc(key), t.context() + ": " + std::string(key)});
}

// congestion and its thresholds (model.h CongestionSpec): a preset's defaults, then what the
// profile writes. PFC thresholds only for a lossless profile (xon below xoff), marking thresholds
// only for an ecn one (kmin below kmax, pmax above 0).
void read_congestion_keys(Table& t, CongestionSpec& c) {
  if (auto m = t.str("congestion")) {
    if (t.one_of("congestion", *m, {"droptail", "ecn", "lossless"})) {
      c.model = *m;
      c.written = true;
      c.loc = t.loc("congestion");
    }
  }
  const std::vector<std::string> thresholds = {"xoff", "xon", "headroom", "buffer"};
  const std::vector<std::string> marking = {"kmin", "kmax", "pmax"};
  if (c.model != "lossless")
    t.not_for(thresholds, "only for congestion = \"lossless\" (this profile is " + quote(c.model) +
                              "): thresholds set where PFC pauses and resumes");
  if (c.model != "ecn")
    t.not_for(marking, "only for congestion = \"ecn\" (this profile is " + quote(c.model) +
                           "): thresholds set where ECN marking starts and where it marks all");
  if (c.model == "ecn") {
    for (auto [key, out] : {std::pair{"kmin", &c.kmin}, std::pair{"kmax", &c.kmax}}) {
      auto bytes = t.size(key);
      if (!bytes) continue;
      if (*bytes == 0)
        t.error(key, "must be greater than 0 bytes; leave it out for the default");
      else
        *out = *bytes;
    }
    if (auto p = t.percent("pmax")) {
      if (*p <= 0)
        t.error("pmax",
                "must be greater than 0% (the marking probability at kmax); leave it "
                "out for the default");
      else
        c.pmax_pct = *p;
    }
    if (c.kmin > 0 && c.kmax > 0 && c.kmin >= c.kmax)
      t.error(t.has("kmin") ? "kmin" : "kmax",
              "kmin (" + format_size(c.kmin) + ") must be below kmax (" + format_size(c.kmax) +
                  "); marking rises from 0 at kmin to pmax at kmax");
    return;
  }
  if (c.model != "lossless") return;
  for (auto [key, out] : {std::pair{"xoff", &c.xoff}, std::pair{"xon", &c.xon},
                          std::pair{"headroom", &c.headroom}, std::pair{"buffer", &c.buffer}}) {
    auto bytes = t.size(key);
    if (!bytes) continue;
    if (*bytes == 0)
      t.error(key, "must be greater than 0 bytes; leave it out for the default");
    else
      *out = *bytes;
  }
  if (c.xon > 0 && c.xoff == 0)
    t.error("xon", "needs xoff too: XON is where a port paused above XOFF resumes");
  else if (c.xon > 0 && c.xon >= c.xoff)
    t.error(t.has("xon") ? "xon" : "xoff",
            "xon (" + format_size(c.xon) + ") must be below xoff (" + format_size(c.xoff) +
                "); XON is where a paused port resumes, XOFF where it pauses");
  if (c.buffer > 0 && c.buffer < c.xoff)
    t.error(t.has("buffer") ? "buffer" : "xoff",
            "buffer (" + format_size(c.buffer) + ") must hold at least xoff (" +
                format_size(c.xoff) + "): a port pauses its feeders before its buffer is full");
}

void read_profile(const std::string& name, const toml::value& v, LoadState& st) {
  const std::string ctx = "profiles." + name;
  if (auto problem = name_problem(name, 0, true, "profile name")) {
    st.d.add(loc_of(v), ctx + ": " + *problem);
  }
  LinkProfile p;
  p.name = name;
  if (!v.is_table()) {
    st.d.add(loc_of(v),
             ctx + ": must be a table, written [" + ctx + "] (got " + type_name(v) + ")");
    st.declared[name] = p;
    return;
  }
  Table t(v, ctx, "[" + ctx + "]",
          {"preset", "rate", "delay", "jitter", "jitter_mode", "loss", "mtu", "source",
           "congestion", "xoff", "xon", "headroom", "buffer", "kmin", "kmax", "pmax"},
          st.d);
  if (auto pr = t.str("preset")) {
    if (auto base = preset(*pr)) {
      p = *base;
      p.name = name;
    } else {
      t.error("preset",
              quote(*pr) + " is not a preset; " + suggest(*pr, preset_names(), "presets"));
      p.preset = *pr;
    }
  } else if (!t.has("rate") && !t.has("preset")) {
    t.missing("rate", preset(name) ? "a profile without a preset must give rate; to start from "
                                     "the built-in " +
                                         quote(name) + ", add preset = " + quote(name)
                                   : "a profile without a preset must give rate (or start from "
                                     "one, e.g. preset = \"hpn\")");
  }
  if (auto r = t.rate("rate")) {
    if (r->bps > 0)
      p.rate = *r;
    else
      t.error("rate", "must be greater than 0; a link profile needs a rate");
  }
  if (auto d = t.duration("delay")) p.delay = *d;
  if (auto j = t.duration("jitter")) p.jitter = *j;
  if (auto m = t.str("jitter_mode"); m && t.one_of("jitter_mode", *m, {"ordered", "reorder"}))
    p.reorder = *m == "reorder";
  if (auto l = t.percent("loss")) p.loss_pct = *l;
  if (auto m = t.integer("mtu", false, 576, 65535,
                         "the largest IPv4 packet is 65535 bytes (576 is the IPv4 minimum)"))
    p.mtu = static_cast<int>(*m);
  if (auto s = t.str("source")) p.source = *s;
  p.loc = t.loc();
  read_congestion_keys(t, p.congestion);
  if (!p.congestion.written) p.congestion.loc = p.loc;
  t.finish();
  st.declared[name] = p;
}

}  // namespace

void read_profiles(Table& top, LoadState& st) {
  const toml::value* v = top.find("profiles");
  if (!v) return;
  if (!v->is_table()) {
    top.error("profiles", "must be a table of named profiles, written [profiles.<name>] (got " +
                              type_name(*v) + ")");
    return;
  }
  for (const auto& [name, pv] : v->as_table()) read_profile(name, pv, st);
}

void read_regions(Table& top, LoadState& st) {
  auto items = table_array(top, "region");
  if (!top.has("region")) {
    st.d.add(Loc{1, 1}, "region: missing; a lab needs at least one [[region]] table");
    return;
  }
  std::map<std::string, Loc> seen;
  int index = 0;
  for (const toml::value* e : items) {
    ++index;
    Table t(*e, "region #" + std::to_string(index), "[[region]]",
            {"name", "description", "servers", "gpus_per_server", "rails", "scale_up", "rail",
             "dual_tor", "spines", "spine_link", "frontend", "ecmp_hash"},
            st.d);
    Region r;
    r.loc = t.loc();
    bool sure = true;
    bool add = false;
    if (auto name = t.str("name", true)) {
      t.set_context("region " + quote(*name));
      check_name(t, "name", *name, kMaxRegionNameLen, false, "region name",
                 "since node, namespace and interface names are built from it");
      r.name = *name;
      if (auto it = seen.find(*name); it != seen.end()) {
        t.error("name", "duplicate region " + quote(*name) + " (first at " + at_line(it->second) +
                            "); region names must be unique");
      } else {
        seen[*name] = t.loc("name");
        add = true;
      }
    }
    if (auto d = t.str("description")) r.description = *d;
    auto servers = t.integer("servers", true, 1, 1023,
                             "the region's VPC switch is a bridge with at most 1023 ports");
    auto gpus = t.integer("gpus_per_server", true, 1, 64,
                          "a server's NVSwitch is a bridge with at most 64 ports");
    sure = servers && gpus;
    if (servers) r.servers = static_cast<int>(*servers);
    if (gpus) r.gpus_per_server = static_cast<int>(*gpus);
    r.rails = r.gpus_per_server;
    if (t.has("rails")) {
      auto rails = t.integer("rails", false, 1, gpus ? *gpus : 64,
                             "a region has at most one rail per GPU of a server "
                             "(gpus_per_server)");
      if (rails)
        r.rails = static_cast<int>(*rails);
      else
        sure = false;
    }
    profile_ref(t, "scale_up", true, st, &r.scale_up);
    profile_ref(t, "rail", true, st, &r.rail);
    if (auto dt = t.boolean("dual_tor")) r.dual_tor = *dt;
    if (t.has("spines")) {
      if (auto sp = t.integer("spines", false, 0, 64, "the aggregation tier has 64 spines at most"))
        r.spines = static_cast<int>(*sp);
      else
        sure = false;
    }
    if (r.spines == 0 && r.rails != 1 && sure) {
      t.error("spines", "must be at least 1 when the region has more than one rail (rails = " +
                            std::to_string(r.rails) +
                            "); 0 spines leaves the rails unconnected, which is only allowed "
                            "with rails = 1");
    }
    if (t.has("spine_link"))
      profile_ref(t, "spine_link", false, st, &r.spine_link);
    else
      r.spine_link = r.rail;
    profile_ref(t, "frontend", true, st, &r.frontend);
    if (auto h = t.str("ecmp_hash"); h && t.one_of("ecmp_hash", *h, {"l3", "l4"})) r.ecmp_hash = *h;
    t.finish();
    if (!sure && !r.name.empty()) st.unsure_regions.insert(r.name);
    if (add) st.s.regions.push_back(std::move(r));
  }
}

void read_wans(Table& top, LoadState& st) {
  std::map<std::string, Loc> seen;
  // Primary link per region pair (names sorted), with where it was declared.
  std::map<std::pair<std::string, std::string>, std::pair<std::string, Loc>> primaries;
  int index = 0;
  for (const toml::value* e : table_array(top, "wan")) {
    ++index;
    Table t(*e, "wan #" + std::to_string(index), "[[wan]]", {"name", "between", "profile", "role"},
            st.d);
    Wan w;
    w.loc = t.loc();
    bool add = false;
    if (auto name = t.str("name", true)) {
      t.set_context("wan " + quote(*name));
      check_name(t, "name", *name, kMaxWanNameLen, true, "WAN link name",
                 "since it becomes the interface name on both transit routers");
      w.name = *name;
      if (auto it = seen.find(*name); it != seen.end()) {
        t.error("name", "duplicate WAN link " + quote(*name) + " (first at " + at_line(it->second) +
                            "); WAN link names must be unique");
      } else {
        seen[*name] = t.loc("name");
        add = true;
      }
    }
    bool ends_ok = false;
    if (const toml::value* b = t.find("between"); b && b->is_string()) {
      t.error("between",
              "must be an array of two region names, e.g. [\"hz\", \"bj\"] (got a "
              "string, " +
                  quote(b->as_string().str) + ")");
    } else if (auto between = t.strings("between", true, true)) {
      if (between->size() != 2) {
        t.error("between", "must name exactly two regions, e.g. [\"hz\", \"bj\"] (got " +
                               std::to_string(between->size()) + ")");
      } else {
        ends_ok = true;
        for (const auto& [region, at] : *between) {
          if (!st.s.region(region)) {
            t.error_at(at, "between", explain_missing_region(st.s, region));
            ends_ok = false;
          }
        }
        w.a = (*between)[0].first;
        w.b = (*between)[1].first;
        if (w.a == w.b) {
          t.error_at((*between)[1].second, "between",
                     "must name two different regions (got " + quote(w.a) + " twice)");
          ends_ok = false;
        }
      }
    }
    profile_ref(t, "profile", true, st, &w.profile);
    if (auto role = t.str("role"); role && t.one_of("role", *role, {"primary", "backup"}))
      w.role = *role == "backup" ? WanRole::kBackup : WanRole::kPrimary;
    if (ends_ok && w.role == WanRole::kPrimary) {
      auto key = std::minmax(w.a, w.b);
      auto pair = std::pair(key.first, key.second);
      if (auto it = primaries.find(pair); it != primaries.end()) {
        t.error("role", "a second primary link between " + quote(pair.first) + " and " +
                            quote(pair.second) + " (" + quote(it->second.first) + " at " +
                            at_line(it->second.second) +
                            " is primary too); at most one primary per region pair: make one "
                            "of them role = \"backup\"");
      } else {
        primaries[pair] = {w.name, w.loc};
      }
    }
    t.finish();
    if (add) st.s.wans.push_back(std::move(w));
  }
}

// [[host]]: the machines the lab is spread over, and what each holds. Every region must be
// placed on exactly one host once any host is declared; a server may be placed on another host
// than its region (it takes its GPUs along); a server or region on two hosts is an error.
void read_hosts(Table& top, LoadState& st) {
  std::map<std::string, Loc> seen_names;
  std::map<uint32_t, std::pair<std::string, Loc>> seen_underlay;
  std::map<std::string, std::pair<std::string, Loc>> region_host, server_host;
  int index = 0;
  for (const toml::value* e : table_array(top, "host")) {
    ++index;
    Table t(*e, "host #" + std::to_string(index), "[[host]]",
            {"name", "underlay", "regions", "servers"}, st.d);
    Host h;
    h.loc = t.loc();
    bool add = false;
    if (auto name = t.str("name", true)) {
      t.set_context("host " + quote(*name));
      if (check_name(t, "name", *name, kMaxHostNameLen, true, "host name",
                     "(a Slurm node name, as `up --host` is given it)")) {
        h.name = *name;
        if (auto it = seen_names.find(*name); it != seen_names.end()) {
          t.error("name", "duplicate host " + quote(*name) + " (first at " + at_line(it->second) +
                              "); host names must be unique");
        } else {
          seen_names[*name] = t.loc("name");
          add = true;
        }
      }
    }
    if (auto u = t.str("underlay", true)) {
      auto a = parse_ipv4(*u);
      if (!a) {
        t.error("underlay", quote(*u) +
                                " is not an IPv4 address; write the address this host has on "
                                "the network joining the hosts, e.g. \"10.0.0.1\"");
      } else if (a->value == 0 || (a->value >> 24) == 127 || (a->value >> 28) >= 14) {
        t.error("underlay", quote(*u) +
                                " cannot be a host's address (unspecified, loopback, multicast "
                                "or reserved); write a unicast address");
      } else if (st.s.address_space.contains(*a)) {
        t.error("underlay", quote(*u) + " is inside the lab's address_space " +
                                st.s.address_space.to_string() +
                                "; the underlay must be outside the lab's addresses");
      } else if (auto it = seen_underlay.find(a->value); it != seen_underlay.end()) {
        t.error("underlay", quote(*u) + " is already host " + quote(it->second.first) + "'s (at " +
                                at_line(it->second.second) +
                                "); each host has its own underlay address");
      } else {
        h.underlay = *a;
        seen_underlay[a->value] = {h.name, t.loc("underlay")};
      }
    }
    if (auto regions = t.strings("regions", false, true)) {
      for (const auto& [region, at] : *regions) {
        if (!st.s.region(region)) {
          t.error_at(at, "regions", explain_missing_region(st.s, region));
        } else if (auto it = region_host.find(region); it != region_host.end()) {
          t.error_at(at, "regions",
                     "region " + quote(region) + " is already on host " + quote(it->second.first) +
                         " (at " + at_line(it->second.second) +
                         "); a region is placed on one host (move single servers with servers)");
        } else {
          region_host[region] = {h.name, at};
          h.regions.push_back(region);
        }
      }
    }
    if (auto servers = t.strings("servers", false, true)) {
      for (const auto& [written, at] : *servers) {
        const std::string node = canonical_node(written);
        if (st.unsure_regions.contains(region_of(node))) continue;
        const NodeClass c = node_class(st.s, node);
        if (c == NodeClass::kNone) {
          t.error_at(at, "servers", explain_missing_node(st.s, node));
        } else if (c != NodeClass::kServer) {
          t.error_at(at, "servers",
                     quote(written) +
                         " is not a server; list servers (\"hz/s2\"), which take their GPUs "
                         "along; switches and routers stay with their region");
        } else if (auto it = server_host.find(node); it != server_host.end()) {
          t.error_at(at, "servers",
                     "server " + quote(node) + " is already on host " + quote(it->second.first) +
                         " (at " + at_line(it->second.second) + "); a server is on one host");
        } else {
          server_host[node] = {h.name, at};
          h.servers.push_back(node);
        }
      }
    }
    if (h.regions.empty() && h.servers.empty() && !t.has("regions") && !t.has("servers"))
      t.missing("regions",
                "a host holds at least one region (regions = [\"hz\"]) or server "
                "(servers = [\"hz/s2\"])");
    t.finish();
    if (add) st.s.hosts.push_back(std::move(h));
  }
  if (index == 0) return;
  for (const auto& r : st.s.regions)
    if (!region_host.contains(r.name))
      st.d.add(r.loc, "region " + quote(r.name) +
                          ": on no host; once [[host]] tables are declared, every region is "
                          "placed on one of them (regions = [\"" +
                          r.name + "\"])");
}

// [vxlan]: the UDP port and first VNI of the tunnels between hosts.
void read_vxlan(Table& top, LoadState& st) {
  const toml::value* v = top.find("vxlan");
  if (!v) return;
  if (!v->is_table()) {
    top.error("vxlan", "must be a table, written [vxlan] (got " + type_name(*v) + ")");
    return;
  }
  Table t(*v, "vxlan", "[vxlan]", {"port", "vni_base"}, st.d);
  st.s.vxlan.loc = t.loc();
  if (auto p = t.integer("port", false, 1, 65535, "a UDP port"))
    st.s.vxlan.port = static_cast<int>(*p);
  // VNIs are 24 bits; leave room for 4096 tunnels above the base.
  if (auto b = t.integer("vni_base", false, 1, (1 << 24) - 1 - 4096,
                         "a VNI is 24 bits and the base leaves room for 4096 tunnels"))
    st.s.vxlan.vni_base = static_cast<uint32_t>(*b);
  if (st.s.hosts.empty())
    st.d.add(t.loc(),
             "vxlan: only with [[host]] tables (tunnels join hosts); declare the hosts "
             "or remove [vxlan]");
  t.finish();
}

void resolve_profiles(LoadState& st) {
  for (const auto& [name, p] : st.declared) st.s.profiles[name] = p;
  std::vector<std::string> known;
  for (const auto& [name, p] : st.declared) known.push_back(name);
  for (const auto& n : preset_names())
    if (!st.declared.contains(n)) known.push_back(n);
  for (const auto& ref : st.profile_refs) {
    if (st.s.profiles.contains(ref.name)) continue;
    if (auto p = preset(ref.name)) {
      st.s.profiles[ref.name] = *p;
      continue;
    }
    std::string msg = "no profile or preset named " + quote(ref.name) + "; ";
    if (auto c = closest(ref.name, known))
      msg += "did you mean " + quote(*c) + "?";
    else
      msg += "declared profiles: " +
             (st.declared.empty() ? std::string("(none)") : [&] {
               std::vector<std::string> names;
               for (const auto& [n, p] : st.declared) names.push_back(n);
               return join(names);
             }()) +
             "; presets: " + join(preset_names());
    st.d.add(ref.at, ref.field + ": " + msg);
  }
}

std::string explain_missing_region(const Scenario& s, const std::string& name) {
  std::vector<std::string> names;
  for (const auto& r : s.regions) names.push_back(r.name);
  return "no region named " + quote(name) + "; " + suggest(name, names, "regions");
}

}  // namespace tb::scenario::detail
