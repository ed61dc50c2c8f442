// `testbedctl train`'s output: the scaling table of one lab (or several side by side), every
// scaling assumption above it, the guard's verdict per row, and the JSON twin (train.json).
// Pure; thread-safe.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "experiment/train_sweep.h"

namespace tb::report {

// The model, parallelism, compute (real × scale = emulated) and how rows are measured.
std::string train_header(const experiment::TrainResult& r);
// One row: servers, ranks, dp, step, compute, exposed, tp, pp, dp wait, samples/s,
// efficiency, bytes per tier, wrong, host.
std::string train_columns();
std::string train_row(const experiment::TrainRow& row, int base_servers);
// Errors per row and the host-bound evidence.
std::string train_footer(const experiment::TrainResult& r);
// Several labs' curves side by side: one line per server count, samples/s and efficiency of
// each lab, plus each lab's step breakdown (compute / exposed) at that count.
std::string train_compare(const std::vector<experiment::TrainResult>& labs);

nlohmann::json train_json(const experiment::TrainResult& r);

}  // namespace tb::report
