// tb-rank's side of the training workload: one communicator per parallel group this rank is in
// (tensor parallel, data parallel, the pipeline neighbours), each a TcpComm (or RdmaComm for a
// job over RDMA) over the job's peers restricted to the group, with its own store keys; then
// run_training, one JSON line per step ({"train_step": ...}) through `put`.
#pragma once

#include <functional>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "workload/job.h"

namespace tb::workload {

// The tier this rank's bytes in a group travel on: its pair with the group's next member after
// it (the ring's successor, whom a ring AllReduce sends to; "nvl", "rail", "wan", "frontend"),
// or "" for a group of one.
std::string group_tier(const Job& job, int rank, const std::vector<int>& group);

// Runs job.training on `rank`. With job.steady (run's workload) the steps go on until the stop
// file says K (steps numbered from job.start_iter; K and later are not started), each also
// written as run's iteration line ({"iter", "s", "e"}), and the wrong values as {"wrong": n}.
Status run_training_job(const Job& job, int rank,
                        const std::function<void(const nlohmann::json&)>& put);

}  // namespace tb::workload
