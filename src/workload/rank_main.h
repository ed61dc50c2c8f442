// What a tb-rank process does: read the job, join the communicator (native TCP mesh or Gloo)
// through the FileStore, run the sweep, and append one JSON line per finished size to
// <results>/rank<R>.jsonl (the orchestrator's progress feed), then {"done": true}, or
// {"error": "..."} and exit 1 on the first failure. Logs go to stderr (the rank's log file).
#pragma once

#include <string>

namespace tb::workload {

int rank_main(const std::string& job_path, int rank);

std::string rank_rows_path(const std::string& results_dir, int rank);

}  // namespace tb::workload
