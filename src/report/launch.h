// What `launch` prints: a rank's output line with its "[rank N node]" prefix, the header (what
// runs where, over which tier and interface, where the logs go) and the footer (each rank's
// exit, why the job ended early). The job and its result are launch/command.h's; the verb hands
// rank_line to launch::run_command as its line callback. Pure formatting; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "launch/command.h"

namespace tb::report {

std::string launch_prefix(const launch::CommandJob& job, int rank);
std::string launch_header(const launch::CommandJob& job);
std::string launch_footer(const launch::CommandJob& job, const launch::CommandResult& res);

}  // namespace tb::report
