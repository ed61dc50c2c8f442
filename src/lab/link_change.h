// Changing a live lab's links: which link "A B" names, its figures now (the scenario's, or what
// `link set` last made them, kept in <lab dir>/links.json), and a change merged into them.
// The values are emulated figures (what the lab does), not the scenario's real-world ones.
// Pure except load/save; not thread-safe.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "core/error.h"
#include "plan/topology.h"

namespace tb::lab {

// The index of the one link joining A and B (either order). Each of A and B is a node
// ("hz/tr", "hz-tr") or node:interface ("hz/tr:ec") to pick one of several parallel links.
// Exit-code-2 errors list what would be valid.
Result<size_t> find_link(const plan::Topology& t, const std::string& a, const std::string& b);

// "hz/tr:ec <-> bj/tr:ec"
std::string link_key(const plan::Link& l);

struct FigureChange {
  std::optional<Rate> rate;
  std::optional<Duration> delay;
  std::optional<Duration> jitter;
  std::optional<double> loss_pct;
  bool empty() const { return !rate && !delay && !jitter && !loss_pct; }
};

plan::EmulatedFigures apply_change(plan::EmulatedFigures f, const FigureChange& c);

// Link key -> current figures, for links `link set` changed.
std::map<std::string, plan::EmulatedFigures> load_link_overrides(const std::string& lab);
Status save_link_overrides(const std::string& lab,
                           const std::map<std::string, plan::EmulatedFigures>& overrides);

}  // namespace tb::lab
