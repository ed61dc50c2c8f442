#include "lab/status.h"

#include <unistd.h>

#include "lab/link_change.h"

namespace tb::lab {

Result<LabStatus> read_status(const std::string& lab) {
  auto st = load_state(lab);
  if (!st) return bad_input(st.error().message);
  // Links `link set` (or a fault) changed show the figures in force now.
  const auto overrides = load_link_overrides(lab);
  std::map<size_t, plan::EmulatedFigures> scenario;
  for (size_t i = 0; i < st->topo.links.size(); ++i) {
    auto& l = st->topo.links[i];
    if (auto it = overrides.find(link_key(l)); it != overrides.end()) {
      const auto& f = it->second;
      if (f.rate != l.emulated.rate || f.delay != l.emulated.delay ||
          f.jitter != l.emulated.jitter || f.loss_pct != l.emulated.loss_pct)
        scenario[i] = l.emulated;
      auto notes = l.emulated.notes;
      l.emulated = f;
      l.emulated.notes = notes;
    }
  }
  LabStatus s{std::move(*st), std::nullopt, std::move(scenario), {}};
  s.congestion = congestion::read_counters(lab_dir(lab));
  if (::geteuid() == 0) s.live = read_live_interfaces(s.state.topo);
  return s;
}

std::vector<LabSummary> summarize_labs() {
  std::vector<LabSummary> out;
  for (const auto& l : list_labs()) {
    auto st = load_state(l);
    if (!st) continue;
    out.push_back({st->lab, st->phase, st->scenario, st->topo.nodes.size(), st->topo.links.size()});
  }
  return out;
}

}  // namespace tb::lab
