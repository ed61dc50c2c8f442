// Tier presets: real-world link figures from published sources, by name.
//   nvlink, pcie, hpn, vpc, cen, express-connect, vpn
// Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "scenario/model.h"

namespace tb::scenario {

std::optional<LinkProfile> preset(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace tb::scenario
