// The training-step workload (`[[workload]] kind = "training"`, `testbedctl train`): each rank
// is one GPU running the steps of a model the scenario describes, with the real collectives of
// data, tensor and pipeline parallelism over the lab's links and the compute spent in sleep.
//
// The model (TrainingSpec): `params` parameters, `grad_bytes` bytes per gradient element,
// `activation_bytes` per micro-batch at a layer boundary, `layers` layers, `micro_batches` per
// step of `samples` samples each; tensor parallel `tp` ranks inside a server, `pp` pipeline
// stages, and data parallel over the rest (dp = ranks / (tp * pp)). Rank r is (Megatron's
// order, tp fastest): t = r % tp, d = (r / tp) % dp, s = r / (tp * dp).
//
// One step on one rank (step_schedule, GPipe with DDP buckets):
//   for each micro-batch: receive the activations from stage s-1 (pp > 1), the forward pass of
//     this stage's layers — per layer two compute halves, each followed by a tensor-parallel
//     AllReduce of activation_bytes (Megatron's two per layer; tp > 1) — and send to stage s+1;
//   for each micro-batch: receive the activation gradient from stage s+1, the backward pass the
//     same way (twice the forward's compute), send to stage s-1. In the last micro-batch's
//     backward the gradients of each layer are complete when it ends: every gradient bucket
//     (bucket_bytes, DDP's gradient buckets, filled in the order backward produces them) whose
//     last byte that layer produced starts its data-parallel AllReduce at once, on a second
//     thread, while the backward pass goes on (the overlap DDP gets);
//   wait for every bucket's AllReduce (the exposed data-parallel time).
// Compute is a time per micro-batch per rank (`compute_ns`, the scenario's figure already
// multiplied by [scale] compute), one third forward and two thirds backward, split evenly over
// the layers. It is spent in sleep (to a deadline, so the rank's own bookkeeping inside a
// compute segment does not lengthen it): a sleeping rank leaves the CPU to the emulated links
// (the delay stages, the kernel's TCP), which a busy-looping rank would take from them, and
// the links are what the figures measure. Step time - compute = the exposed communication.
//
// Gradients and tensor-parallel activations are float32 with small integers (exact sums) that
// depend on the rank and the step; every reduced element is checked after the step.
// Pure functions (layout, schedule, buckets, efficiency) are unit-tested; run_training takes the
// communicators, so tests run it over in-process comms and tb-rank over TCP or RDMA.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "collective/comm.h"
#include "core/error.h"
#include "core/units.h"

namespace tb::workload {

struct TrainingSpec {
  uint64_t params = 25'000'000;         // parameters of the whole model
  int grad_bytes = 2;                   // bytes per gradient element (bf16: 2)
  uint64_t activation_bytes = 1 << 20;  // per micro-batch at a layer boundary
  int layers = 8;                       // of the whole model; each stage holds layers / pp
  int micro_batches = 1;                // per step
  int samples = 8;                      // per micro-batch (samples/s)
  int tp = 1, pp = 1;                   // tensor-parallel ranks (in a server), pipeline stages
  uint64_t bucket_bytes = 25ull << 20;  // DDP's bucket_cap_mb default
  int64_t compute_ns = 100'000'000;     // per micro-batch per rank, forward + backward, scaled
  int steps = 10, warmup = 1;           // timed steps; untimed steps before them
};

inline constexpr IntRange kTrainLayersRange{1, 1024};
inline constexpr IntRange kTrainMicroBatchesRange{1, 1024};
inline constexpr IntRange kTrainStepsRange{1, 100000};
inline constexpr IntRange kTrainWarmupRange{0, 1000};
inline constexpr IntRange kGradBytesRange{1, 8};
inline constexpr IntRange kTrainParallelRange{1, 1024};

nlohmann::json to_json(const TrainingSpec& s);
Result<TrainingSpec> training_spec_from_json(const nlohmann::json& j);
// The spec's own figures (ranges, layers divisible by pp); the message names the field.
Status validate(const TrainingSpec& s);

// Where one rank sits in the parallel layout.
struct TrainPos {
  int tp = 1, pp = 1, dp = 1;  // group sizes
  int t = 0, s = 0, d = 0;     // this rank's index in each
  int rank(int t_, int d_, int s_) const { return (s_ * dp + d_) * tp + t_; }
};
// The layout of `rank` of `ranks`; `server_of` (by rank) must put each tensor-parallel group
// inside one server. Errors name what does not divide or which group spans servers.
Result<TrainPos> train_position(const TrainingSpec& s, int ranks, int rank,
                                const std::vector<int>& server_of);
// The global ranks of this rank's groups, in group order.
std::vector<int> tp_group(const TrainPos& p);
std::vector<int> dp_group(const TrainPos& p);

// Gradient bytes this rank holds: params / (tp * pp) * grad_bytes, rounded up to a float32.
uint64_t grad_bytes_per_rank(const TrainingSpec& s);

// DDP's buckets over a rank's gradients, in the order backward produces them.
struct Bucket {
  uint64_t offset = 0, bytes = 0;
  int ready_layer = 0;  // the backward layer (0 = the first one backward runs) that completes it
};
// `grad` bytes cut into buckets of at most `bucket` bytes (multiples of 4, float32 elements);
// the stage's `layers` produce grad / layers bytes each, in backward order.
std::vector<Bucket> buckets(uint64_t grad, uint64_t bucket, int layers);

// One step's actions on one rank, in order (the compute thread runs them; kBucket hands a
// bucket to the data-parallel thread and returns).
struct Action {
  enum Kind { kCompute, kTpAllReduce, kPpRecv, kPpSend, kBucket, kWaitBuckets };
  Kind kind = kCompute;
  int64_t ns = 0;      // kCompute
  uint64_t bytes = 0;  // kTpAllReduce, kPpRecv, kPpSend
  int peer = 0;        // kPpRecv/kPpSend: -1 = stage s-1, +1 = stage s+1
  int bucket = 0;      // kBucket
};
std::vector<Action> step_schedule(const TrainingSpec& s, const TrainPos& p);

// Bytes one rank sends for an AllReduce of `bytes` over `n` ranks by ring (2 (n-1)/n bytes).
uint64_t ring_allreduce_sent(uint64_t bytes, int n);

// One timed step on one rank.
struct StepRow {
  int64_t step = 0;
  int64_t start_ns = 0, end_ns = 0;       // CLOCK_MONOTONIC
  int64_t compute_ns = 0;                 // time asked of the sleeps (the model's compute)
  int64_t tp_ns = 0, pp_ns = 0;           // time in tensor-parallel collectives, pipeline send/recv
  int64_t dp_wait_ns = 0;                 // waiting for the buckets after backward
  std::map<std::string, uint64_t> bytes;  // bytes this rank sent, by tier ("nvl", "rail", ...)
  uint64_t wrong = 0;                     // reduced elements that did not match
  int64_t step_ns() const { return end_ns - start_ns; }
  int64_t exposed_ns() const { return step_ns() - compute_ns; }
};
nlohmann::json to_json(const StepRow& r);
StepRow step_row_from_json(const nlohmann::json& j);

// This rank's communicators: null where the group has one rank (no calls are made). The tier
// names label the bytes.
struct TrainComms {
  collective::Comm* tp = nullptr;
  collective::Comm* dp = nullptr;
  collective::Comm* pp_prev = nullptr;  // with stage s-1: rank 0 = stage s-1, 1 = this rank
  collective::Comm* pp_next = nullptr;  // with stage s+1: rank 0 = this rank, 1 = stage s+1
  std::string tp_tier = "nvl", dp_tier = "rail", pp_tier = "rail";
};

// Runs `warmup` then `steps` steps; on_step after each timed one. Stops at the first error.
// `stop` (may be null) is asked before each timed step with its number (0, 1, ...): true ends
// the run there (run's stop file; every rank must answer the same for the same step).
Status run_training(const TrainingSpec& s, const TrainPos& p, const TrainComms& comms,
                    const std::function<void(const StepRow&)>& on_step,
                    const std::function<bool(int64_t)>& stop = {});

// Throughput and scaling efficiency (the report's arithmetic).
// Samples one step trains across the whole job: dp * micro_batches * samples.
uint64_t samples_per_step(const TrainingSpec& s, int dp);
// samples/s at a step time.
double samples_per_second(uint64_t samples, double step_s);
// Efficiency at `servers` servers: throughput / (servers * throughput at one server).
double scaling_efficiency(double throughput, int servers, double throughput_one_server);

}  // namespace tb::workload
