// A class's measurement as one host of a lab sends it to another (verify across hosts, issue
// 19): everything the coordinator needs to judge and report a class another host measured —
// the figures in force there, the target, the request and every reading's raw measurement and
// host load. The checks and the stall are not sent: the coordinator derives them with the same
// pure functions (evaluate, host_stall), so a class is judged alike wherever it was measured.
// Pure; thread-safe.
#pragma once

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "plan/topology.h"
#include "verify/host.h"
#include "verify/result.h"

namespace tb::verify {

nlohmann::json class_to_wire(const ClassResult& c);
// `cls` is the class as this host computed it (link_classes); the link and figures come from
// the message. A malformed message: an error naming what is missing.
Result<ClassResult> class_from_wire(const nlohmann::json& j, const LinkClass& cls);

nlohmann::json target_to_json(const ProbeTarget& t);
Result<ProbeTarget> target_from_json(const nlohmann::json& j);

// Reads what to_json(HostLoad) wrote.
Result<HostLoad> host_load_from_json(const nlohmann::json& j);

}  // namespace tb::verify
