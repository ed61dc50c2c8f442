// What `run` prints once the scenario has finished: the RECOVERY table (per fault: detection,
// reroute, outage, stall and throughput during the fault, in ms on CLOCK_MONOTONIC), the
// measurement note, the [expect] verdicts, the errors and where the results are. The results
// are experiment/experiment.h's (their JSON twin is the run's summary.json). Pure; thread-safe.
#pragma once

#include <string>

#include "experiment/experiment.h"

namespace tb::report {

std::string run_text(const experiment::RunResult& r);

}  // namespace tb::report
