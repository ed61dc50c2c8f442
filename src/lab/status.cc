#include "lab/status.h"

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/userns.h"
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

Result<std::vector<UserLabs>> summarize_all_users() {
  if (::geteuid() != 0 || paths::rootless())
    return bad_input(
        "status --all-users needs root: another user's labs are in that user's own namespaces");
  std::vector<UserLabs> out;
  out.push_back({"root", 0, summarize_labs(), ""});
  for (const auto& u : userns::users_runtimes()) {
    auto r = userns::as_user_in_keeper(u, [](int fd) {
      nlohmann::json j = nlohmann::json::array();
      for (const auto& l : summarize_labs())
        j.push_back({{"lab", l.lab},
                     {"phase", l.phase},
                     {"scenario", l.scenario},
                     {"nodes", l.nodes},
                     {"links", l.links}});
      const std::string text = j.dump();
      return ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? 0 : 1;
    });
    UserLabs ul{u.user, u.uid, {}, ""};
    if (!r) {
      ul.error = r.error().message;
    } else if (!r->ran) {
      continue;  // no live keeper: nothing of this user's runs
    } else {
      auto j = nlohmann::json::parse(r->text, nullptr, false);
      if (r->rc != 0 || !j.is_array()) {
        ul.error = "reading the labs inside its keeper failed (exit " + std::to_string(r->rc) + ")";
      } else {
        for (const auto& l : j)
          ul.labs.push_back({l.value("lab", ""), l.value("phase", ""), l.value("scenario", ""),
                             l.value("nodes", std::size_t{0}), l.value("links", std::size_t{0})});
      }
    }
    out.push_back(std::move(ul));
  }
  return out;
}

}  // namespace tb::lab
