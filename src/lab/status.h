// The `status` use case: what a lab is now. For one lab, its saved state with the link figures
// in force (the scenario's, or what `link set` or a fault last made them) and, when we run as
// root, every node's interfaces read from the kernel. Without a lab name, one line per lab
// that has state. Reads only; takes no lock. Not thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "congestion/counters.h"
#include "core/error.h"
#include "lab/live.h"
#include "lab/state.h"

namespace tb::lab {

struct LabStatus {
  LabState state;                      // links carry the figures in force now
  std::optional<LiveInterfaces> live;  // empty unless we run as root
  // The scenario's emulated figures of each link whose figures in force differ from them (a
  // `link set` or a fault changed it), by index into state.topo.links.
  std::map<size_t, plan::EmulatedFigures> scenario_figures;
  // The congestion agent's counters (congestion/counters.h): per link end, since it started.
  congestion::Counters congestion;
};

// Exit code 2 when the lab is not up.
Result<LabStatus> read_status(const std::string& lab);

struct LabSummary {
  std::string lab, phase, scenario;
  size_t nodes = 0, links = 0;
};

// Every lab with readable state, in list_labs() order.
std::vector<LabSummary> summarize_labs();

// Root's `status --all-users`: root's own labs (user "root"), then each user's with a live
// keeper (core/userns.h users_runtimes: /run/user/<uid>/testbedctl/keeper.pid), read inside that
// keeper with that user's ids (userns::as_user_in_keeper). A user whose keeper runs but could not
// be entered is listed with the reason and no labs. Exit code 2 unless root.
struct UserLabs {
  std::string user;
  unsigned uid = 0;
  std::vector<LabSummary> labs;
  std::string error;  // could not be read: why
};
Result<std::vector<UserLabs>> summarize_all_users();

}  // namespace tb::lab
