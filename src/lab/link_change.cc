#include "lab/link_change.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "lab/state.h"
#include "scenario/names.h"

namespace tb::lab {
namespace {

struct End {
  std::string node, ifname;
};

End parse_end(const std::string& text) {
  const auto colon = text.find(':');
  return {scenario::canonical_node(text.substr(0, colon)),
          colon == std::string::npos ? "" : text.substr(colon + 1)};
}

bool matches(const plan::LinkEnd& e, const End& want) {
  return e.node == want.node && (want.ifname.empty() || e.ifname == want.ifname);
}

}  // namespace

std::string link_key(const plan::Link& l) {
  return l.a.node + ":" + l.a.ifname + " <-> " + l.b.node + ":" + l.b.ifname;
}

Result<size_t> find_link(const plan::Topology& t, const std::string& a, const std::string& b) {
  const End ea = parse_end(a), eb = parse_end(b);
  std::vector<size_t> found;
  for (size_t i = 0; i < t.links.size(); ++i) {
    const auto& l = t.links[i];
    if ((matches(l.a, ea) && matches(l.b, eb)) || (matches(l.a, eb) && matches(l.b, ea)))
      found.push_back(i);
  }
  if (found.size() == 1) return found[0];
  if (found.size() > 1) {
    std::string names;
    for (size_t i : found) names += (names.empty() ? "" : ", ") + link_key(t.links[i]);
    return bad_input("several links join " + a + " and " + b + " (" + names +
                     "); name one end as NODE:INTERFACE");
  }
  if (!t.node(ea.node) || !t.node(eb.node))
    return bad_input("no node \"" + (t.node(ea.node) ? b : a) +
                     "\" in this lab (see `testbedctl status`)");
  std::string of_a;
  for (const auto& l : t.links)
    if (l.a.node == ea.node || l.b.node == ea.node) of_a += "\n  " + link_key(l);
  return bad_input("no link joins " + a + " and " + b + "; the links of " + a + " are:" + of_a);
}

plan::EmulatedFigures apply_change(plan::EmulatedFigures f, const FigureChange& c) {
  if (c.rate) f.rate = *c.rate;
  if (c.delay) f.delay = *c.delay;
  if (c.jitter) f.jitter = *c.jitter;
  if (c.loss_pct) f.loss_pct = *c.loss_pct;
  return f;
}

std::map<std::string, plan::EmulatedFigures> load_link_overrides(const std::string& lab) {
  std::map<std::string, plan::EmulatedFigures> out;
  std::ifstream in(lab_dir(lab) + "/links.json");
  auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return out;
  for (const auto& [key, f] : j.items())
    out[key] = plan::EmulatedFigures{Rate{f.value("rate_bps", 0.0)},
                                     Duration{f.value("delay_ns", int64_t{0})},
                                     Duration{f.value("jitter_ns", int64_t{0})},
                                     f.value("loss_pct", 0.0),
                                     f.value("mtu", 1500),
                                     {},
                                     f.value("jitter_mode", "ordered") == "reorder"};
  return out;
}

Status save_link_overrides(const std::string& lab,
                           const std::map<std::string, plan::EmulatedFigures>& overrides) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, f] : overrides) {
    j[key] = {{"rate_bps", f.rate.bps},
              {"delay_ns", f.delay.ns},
              {"jitter_ns", f.jitter.ns},
              {"loss_pct", f.loss_pct},
              {"mtu", f.mtu}};
    if (f.reorder) j[key]["jitter_mode"] = "reorder";
  }
  auto dir = open_lab_dir(lab);
  if (!dir) return std::unexpected(dir.error());
  return dir->write("links.json", j.dump(1) + "\n");
}

}  // namespace tb::lab
