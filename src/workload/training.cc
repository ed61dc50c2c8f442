#include "workload/training.h"

#include <time.h>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "collective/collective.h"
#include "core/clock.h"
#include "workload/bench.h"

namespace tb::workload {

nlohmann::json to_json(const TrainingSpec& s) {
  return {{"params", s.params},
          {"grad_bytes", s.grad_bytes},
          {"activation_bytes", s.activation_bytes},
          {"layers", s.layers},
          {"micro_batches", s.micro_batches},
          {"samples", s.samples},
          {"tp", s.tp},
          {"pp", s.pp},
          {"bucket_bytes", s.bucket_bytes},
          {"compute_ns", s.compute_ns},
          {"steps", s.steps},
          {"warmup", s.warmup}};
}

Result<TrainingSpec> training_spec_from_json(const nlohmann::json& j) {
  TrainingSpec s;
  try {
    s.params = j.at("params").get<uint64_t>();
    s.grad_bytes = j.at("grad_bytes").get<int>();
    s.activation_bytes = j.at("activation_bytes").get<uint64_t>();
    s.layers = j.at("layers").get<int>();
    s.micro_batches = j.at("micro_batches").get<int>();
    s.samples = j.at("samples").get<int>();
    s.tp = j.at("tp").get<int>();
    s.pp = j.at("pp").get<int>();
    s.bucket_bytes = j.at("bucket_bytes").get<uint64_t>();
    s.compute_ns = j.at("compute_ns").get<int64_t>();
    s.steps = j.at("steps").get<int>();
    s.warmup = j.at("warmup").get<int>();
  } catch (const nlohmann::json::exception& e) {
    return bad_input(std::string("training: ") + e.what());
  }
  if (auto st = validate(s); !st) return std::unexpected(st.error());
  return s;
}

Status validate(const TrainingSpec& s) {
  auto range = [](const char* field, const IntRange& r, int64_t v) -> Status {
    if (r.contains(v)) return {};
    return bad_input(std::string("training: ") + field + " must be " + r.text() + ", not " +
                     std::to_string(v));
  };
  for (auto st :
       {range("layers", kTrainLayersRange, s.layers),
        range("micro_batches", kTrainMicroBatchesRange, s.micro_batches),
        range("samples", kTrainMicroBatchesRange, s.samples),
        range("grad_bytes", kGradBytesRange, s.grad_bytes), range("tp", kTrainParallelRange, s.tp),
        range("pp", kTrainParallelRange, s.pp), range("steps", kTrainStepsRange, s.steps),
        range("warmup", kTrainWarmupRange, s.warmup)})
    if (!st) return st;
  if (s.params == 0) return bad_input("training: params must be at least 1");
  if (s.activation_bytes < 4) return bad_input("training: activation_bytes must be at least 4");
  if (s.bucket_bytes < 4) return bad_input("training: bucket_bytes must be at least 4");
  if (s.compute_ns < 0) return bad_input("training: compute must not be negative");
  if (s.layers % s.pp != 0)
    return bad_input("training: layers (" + std::to_string(s.layers) +
                     ") must divide into pp = " + std::to_string(s.pp) + " stages");
  return {};
}

Result<TrainPos> train_position(const TrainingSpec& s, int ranks, int rank,
                                const std::vector<int>& server_of) {
  if (ranks % (s.tp * s.pp) != 0)
    return bad_input("training: " + std::to_string(ranks) + " ranks do not divide into tp = " +
                     std::to_string(s.tp) + " x pp = " + std::to_string(s.pp));
  if (rank < 0 || rank >= ranks || server_of.size() != static_cast<size_t>(ranks))
    return bad_input("training: rank " + std::to_string(rank) + " is not in 0.." +
                     std::to_string(ranks - 1));
  TrainPos p;
  p.tp = s.tp;
  p.pp = s.pp;
  p.dp = ranks / (s.tp * s.pp);
  p.t = rank % p.tp;
  p.d = (rank / p.tp) % p.dp;
  p.s = rank / (p.tp * p.dp);
  for (int base = 0; base < ranks; base += p.tp)
    for (int k = 1; k < p.tp; ++k)
      if (server_of[static_cast<size_t>(base + k)] != server_of[static_cast<size_t>(base)])
        return bad_input("training: tensor-parallel group of ranks " + std::to_string(base) + ".." +
                         std::to_string(base + p.tp - 1) +
                         " spans servers (tp must divide the GPUs per server)");
  return p;
}

std::vector<int> tp_group(const TrainPos& p) {
  std::vector<int> g;
  for (int t = 0; t < p.tp; ++t) g.push_back(p.rank(t, p.d, p.s));
  return g;
}

std::vector<int> dp_group(const TrainPos& p) {
  std::vector<int> g;
  for (int d = 0; d < p.dp; ++d) g.push_back(p.rank(p.t, d, p.s));
  return g;
}

uint64_t grad_bytes_per_rank(const TrainingSpec& s) {
  const uint64_t shard =
      (s.params + static_cast<uint64_t>(s.tp * s.pp) - 1) / static_cast<uint64_t>(s.tp * s.pp);
  return (shard * static_cast<uint64_t>(s.grad_bytes) + 3) / 4 * 4;
}

std::vector<Bucket> buckets(uint64_t grad, uint64_t bucket, int layers) {
  std::vector<Bucket> out;
  const uint64_t b = std::max<uint64_t>(4, bucket / 4 * 4);
  int layer = 0;
  for (uint64_t off = 0; off < grad; off += b) {
    Bucket k;
    k.offset = off;
    k.bytes = std::min(b, grad - off);
    const uint64_t end = off + k.bytes;
    // Layer i (backward order) has produced grad * (i + 1) / layers bytes when it ends.
    while (layer < layers - 1 &&
           grad * static_cast<uint64_t>(layer + 1) / static_cast<uint64_t>(layers) < end)
      ++layer;
    k.ready_layer = layer;
    out.push_back(k);
  }
  return out;
}

std::vector<Action> step_schedule(const TrainingSpec& s, const TrainPos& p) {
  std::vector<Action> out;
  const int layers = s.layers / s.pp;
  const int64_t fwd = s.compute_ns / 3 / layers;
  const int64_t bwd = (s.compute_ns - s.compute_ns / 3) / layers;
  auto layer = [&](int64_t ns) {
    if (p.tp > 1) {
      out.push_back({Action::kCompute, ns / 2});
      out.push_back({Action::kTpAllReduce, 0, s.activation_bytes});
      out.push_back({Action::kCompute, ns - ns / 2});
      out.push_back({Action::kTpAllReduce, 0, s.activation_bytes});
    } else {
      out.push_back({Action::kCompute, ns});
    }
  };
  const auto bk =
      p.dp > 1 ? buckets(grad_bytes_per_rank(s), s.bucket_bytes, layers) : std::vector<Bucket>{};
  for (int m = 0; m < s.micro_batches; ++m) {
    if (p.s > 0) out.push_back({Action::kPpRecv, 0, s.activation_bytes, -1});
    for (int l = 0; l < layers; ++l) layer(fwd);
    if (p.s < p.pp - 1) out.push_back({Action::kPpSend, 0, s.activation_bytes, +1});
  }
  for (int m = 0; m < s.micro_batches; ++m) {
    if (p.s < p.pp - 1) out.push_back({Action::kPpRecv, 0, s.activation_bytes, +1});
    for (int l = 0; l < layers; ++l) {
      layer(bwd);
      if (m == s.micro_batches - 1)
        for (size_t k = 0; k < bk.size(); ++k)
          if (bk[k].ready_layer == l)
            out.push_back({Action::kBucket, 0, 0, 0, static_cast<int>(k)});
    }
    if (p.s > 0) out.push_back({Action::kPpSend, 0, s.activation_bytes, -1});
  }
  if (!bk.empty()) out.push_back({Action::kWaitBuckets});
  return out;
}

uint64_t ring_allreduce_sent(uint64_t bytes, int n) {
  if (n <= 1) return 0;
  return bytes * 2 * static_cast<uint64_t>(n - 1) / static_cast<uint64_t>(n);
}

nlohmann::json to_json(const StepRow& r) {
  return {{"step", r.step},
          {"s", r.start_ns},
          {"e", r.end_ns},
          {"compute_ns", r.compute_ns},
          {"tp_ns", r.tp_ns},
          {"pp_ns", r.pp_ns},
          {"dp_wait_ns", r.dp_wait_ns},
          {"bytes", r.bytes},
          {"wrong", r.wrong}};
}

StepRow step_row_from_json(const nlohmann::json& j) {
  StepRow r;
  r.step = j.value("step", int64_t{0});
  r.start_ns = j.value("s", int64_t{0});
  r.end_ns = j.value("e", int64_t{0});
  r.compute_ns = j.value("compute_ns", int64_t{0});
  r.tp_ns = j.value("tp_ns", int64_t{0});
  r.pp_ns = j.value("pp_ns", int64_t{0});
  r.dp_wait_ns = j.value("dp_wait_ns", int64_t{0});
  if (j.contains("bytes")) r.bytes = j.at("bytes").get<std::map<std::string, uint64_t>>();
  r.wrong = j.value("wrong", uint64_t{0});
  return r;
}

namespace {

// The value element i of a buffer holds: small integers, so float32 sums are exact.
float fill_value(int who, int64_t tag, size_t i) {
  return static_cast<float>(who + 1 + static_cast<int>((static_cast<uint64_t>(tag) + i) % 8));
}

// A sum of fill_value over who = 0..n-1.
float sum_value(int n, int64_t tag, size_t i) {
  return static_cast<float>(n * (n + 1) / 2 +
                            n * static_cast<int>((static_cast<uint64_t>(tag) + i) % 8));
}

void fill(std::vector<float>& v, int who, int64_t tag) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = fill_value(who, tag, i);
}

uint64_t count_wrong_sum(const float* v, size_t n, int ranks, int64_t tag) {
  uint64_t wrong = 0;
  for (size_t i = 0; i < n; ++i) wrong += v[i] != sum_value(ranks, tag, i) ? 1 : 0;
  return wrong;
}

void sleep_until_ns(int64_t deadline) {
  timespec ts{};
  ts.tv_sec = deadline / 1'000'000'000;
  ts.tv_nsec = deadline % 1'000'000'000;
  while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

collective::Call allreduce_call(float* buf, size_t count) {
  collective::Call c;
  c.coll = collective::Coll::kAllReduce;
  c.algo = collective::Algo::kRing;
  c.type = collective::DataType::kFloat32;
  c.op = collective::RedOp::kSum;
  c.send = buf;
  c.recv = buf;
  c.count = count;
  return c;
}

// The data-parallel side: runs the buckets handed to it, in order, on its own thread.
class BucketRunner {
 public:
  BucketRunner(collective::Comm* comm, float* grad, const std::vector<Bucket>& bk)
      : comm_(comm), grad_(grad), bk_(bk) {
    if (comm_ != nullptr) thread_ = std::thread([this] { loop(); });
  }
  ~BucketRunner() {
    {
      std::lock_guard lock(mu_);
      quit_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void launch(int k) {
    {
      std::lock_guard lock(mu_);
      queue_.push_back(k);
      ++launched_;
    }
    cv_.notify_all();
  }
  // Waits for every launched bucket; the first error any of them had.
  Status wait_all() {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_ == launched_ || error_.has_value(); });
    if (error_) return std::unexpected(*error_);
    return {};
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return quit_ || !queue_.empty(); });
      if (quit_) return;
      const int k = queue_.front();
      queue_.pop_front();
      const bool failed = error_.has_value();
      lock.unlock();
      const auto& b = bk_[static_cast<size_t>(k)];
      // After a failure the comm fails every call at once; the bucket only counts as done.
      Status st = failed
                      ? Status{}
                      : collective::run(*comm_, allreduce_call(grad_ + b.offset / 4, b.bytes / 4));
      lock.lock();
      if (!st && !error_) error_ = st.error();
      ++done_;
      cv_.notify_all();
    }
  }

  collective::Comm* comm_;
  float* grad_;
  const std::vector<Bucket>& bk_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<int> queue_;
  int launched_ = 0, done_ = 0;
  bool quit_ = false;
  std::optional<Error> error_;
  std::thread thread_;
};

}  // namespace

Status run_training(const TrainingSpec& s, const TrainPos& p, const TrainComms& comms,
                    const std::function<void(const StepRow&)>& on_step,
                    const std::function<bool(int64_t)>& stop) {
  if (auto st = validate(s); !st) return st;
  const auto schedule = step_schedule(s, p);
  const uint64_t grad = grad_bytes_per_rank(s);
  const auto bk = p.dp > 1 ? buckets(grad, s.bucket_bytes, s.layers / s.pp) : std::vector<Bucket>{};
  std::vector<float> grads(p.dp > 1 ? grad / 4 : 0);
  std::vector<float> act(static_cast<size_t>(s.activation_bytes / 4));
  std::vector<float> pp_buf(act.size());
  BucketRunner runner(p.dp > 1 ? comms.dp : nullptr, grads.data(), bk);
  if (p.tp > 1 && comms.tp == nullptr) return bad_input("training: no tensor-parallel comm");
  if (p.dp > 1 && comms.dp == nullptr) return bad_input("training: no data-parallel comm");
  if (p.s > 0 && comms.pp_prev == nullptr) return bad_input("training: no comm to stage s-1");
  if (p.s < p.pp - 1 && comms.pp_next == nullptr)
    return bad_input("training: no comm to stage s+1");

  for (int64_t i = 0; i < s.warmup + s.steps; ++i) {
    const int64_t step = i - s.warmup;  // negative: warm-up
    if (step >= 0 && stop && stop(step)) break;
    StepRow row;
    row.step = step;
    // The gradients a real backward writes on the GPU: written before the step's timer.
    if (!grads.empty()) fill(grads, p.d, i);
    int tp_calls = 0;
    int pp_sent[2] = {0, 0}, pp_recv[2] = {0, 0};  // [0]: stage s-1, [1]: stage s+1
    row.start_ns = monotonic_ns();
    for (const auto& a : schedule) {
      switch (a.kind) {
        case Action::kCompute:
          sleep_until_ns(monotonic_ns() + a.ns);
          row.compute_ns += a.ns;
          break;
        case Action::kTpAllReduce: {
          const int64_t t0 = monotonic_ns();
          const int64_t tag = i * 4096 + tp_calls++;
          fill(act, p.t, tag);
          if (auto st = collective::run(*comms.tp, allreduce_call(act.data(), act.size())); !st)
            return st;
          row.wrong += count_wrong_sum(act.data(), act.size(), p.tp, tag);
          row.bytes[comms.tp_tier] += ring_allreduce_sent(act.size() * 4, p.tp);
          row.tp_ns += monotonic_ns() - t0;
          break;
        }
        case Action::kPpSend:
        case Action::kPpRecv: {
          const int64_t t0 = monotonic_ns();
          const int side = a.peer > 0 ? 1 : 0;
          collective::Comm* c = side == 1 ? comms.pp_next : comms.pp_prev;
          const int other = side == 1 ? 1 : 0;  // the peer's rank in the pair comm
          const size_t len = pp_buf.size() * 4;
          if (a.kind == Action::kPpSend) {
            // Tag: the message's number on this pair and direction in this step.
            fill(pp_buf, 0, i * 4096 + pp_sent[side]++);
            if (auto st = c->exchange({collective::Xfer::send(other, pp_buf.data(), len)}); !st)
              return st;
            row.bytes[comms.pp_tier] += len;
          } else {
            if (auto st = c->exchange({collective::Xfer::recv(other, pp_buf.data(), len)}); !st)
              return st;
            row.wrong +=
                count_wrong_sum(pp_buf.data(), pp_buf.size(), 1, i * 4096 + pp_recv[side]++);
          }
          row.pp_ns += monotonic_ns() - t0;
          break;
        }
        case Action::kBucket:
          runner.launch(a.bucket);
          row.bytes[comms.dp_tier] +=
              ring_allreduce_sent(bk[static_cast<size_t>(a.bucket)].bytes, p.dp);
          break;
        case Action::kWaitBuckets: {
          const int64_t t0 = monotonic_ns();
          if (auto st = runner.wait_all(); !st) return st;
          row.dp_wait_ns += monotonic_ns() - t0;
          break;
        }
      }
    }
    row.end_ns = monotonic_ns();
    if (!grads.empty()) row.wrong += count_wrong_sum(grads.data(), grads.size(), p.dp, i);
    if (step >= 0) on_step(row);
  }
  return {};
}

uint64_t samples_per_step(const TrainingSpec& s, int dp) {
  return static_cast<uint64_t>(dp) * static_cast<uint64_t>(s.micro_batches) *
         static_cast<uint64_t>(s.samples);
}

double samples_per_second(uint64_t samples, double step_s) {
  return step_s > 0 ? static_cast<double>(samples) / step_s : 0;
}

double scaling_efficiency(double throughput, int servers, double throughput_one_server) {
  if (servers <= 0 || throughput_one_server <= 0) return 0;
  return throughput / (servers * throughput_one_server);
}

}  // namespace tb::workload
