// The congestion agent's control document (docs/design-congestion.md §6), how a fault reaches
// the running agent: `<lab dir>/stages/congestion.control.json`,
//
//   {"generation": 3, "storms": [{"port": "dc/tor0:s4g0"}]}
//
// each storm a polled port the agent holds paused as if the NIC behind it kept sending PFC
// pauses (a `pfc-storm` fault). The writer (lab/congestion_control.h) writes the next generation
// atomically and sends the agent SIGHUP; the agent re-reads it (also when it starts, so a
// restarted agent holds the storms in force) and answers in its stats file (congestion/stats.h):
// `generation`, `control_error` ("" when it took the whole document), `control_applied_ns`.
//
// Plain values and pure functions (read_control reads a file); thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace tb::congestion {

inline constexpr const char* kControlFile = "congestion.control.json";  // beside the stats

struct ControlDoc {
  uint64_t generation = 0;
  std::vector<std::string> storms;  // port names ("node:ifname"), sorted, unique
  friend bool operator==(const ControlDoc&, const ControlDoc&) = default;
};

nlohmann::json to_json(const ControlDoc& d);
// Exit-2 errors name `where` (the file) and the field: "congestion.control.json: storms[1].port:
// must be a string naming a polled port, e.g. \"dc/tor0:s4g0\"".
Result<ControlDoc> control_from_json(const nlohmann::json& j, const std::string& where);
// The document at `path`; a missing file is generation 0 with no storms.
Result<ControlDoc> read_control(const std::string& path);
// `d` with `ports` held (on) or lifted (off), as the next generation.
ControlDoc with_storms(ControlDoc d, const std::vector<std::string>& ports, bool on);

}  // namespace tb::congestion
