// What `bench` prints: the nccl-tests table (one row per size: size, count, type, redop, root,
// time, algbw, busbw, #wrong; plus busbw in Gbit/s to compare with link rates), its header and
// footer, and the JSON twin with every row and per-iteration timestamps (bench.json). The
// results are workload/bench_result.h's. The orchestrator streams rows while the ranks run
// (launch::run_job's on_start/on_row callbacks): it is handed these functions by the verb and
// never includes report/. Pure formatting; thread-safe.
#pragma once

#include <string>

#include <nlohmann/json_fwd.hpp>

#include "workload/bench_result.h"

namespace tb::report {

std::string bench_header(const workload::BenchResult& r);
std::string bench_row(const workload::BenchResult& r, const workload::BenchRow& row);
std::string bench_footer(const workload::BenchResult& r);
nlohmann::json bench_json(const workload::BenchResult& r);

// How the numbers were measured, for the header, the footer and the JSON.
std::string bench_measured_note(const workload::BenchResult& r);
// The transport and the lab's RDMA status in one line: "rdma: 4 of 4 rail pairs over RDMA verbs
// (2 QPs/peer, ib_timeout 14, retry 7), the rest TCP; lab rdma: rxe (...)".
std::string bench_transport_note(const workload::BenchResult& r);

}  // namespace tb::report
