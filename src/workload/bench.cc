#include "workload/bench.h"

#include <time.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "metrics/busbw.h"
#include "workload/pattern.h"

namespace tb::workload {

using collective::Call;
using collective::Coll;

int64_t mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

nlohmann::json to_json(const BenchSpec& s) {
  nlohmann::json j{{"coll", collective::name(s.coll)},
                   {"type", collective::name(s.type)},
                   {"op", collective::name(s.op)},
                   {"root", s.root},
                   {"min_bytes", s.min_bytes},
                   {"max_bytes", s.max_bytes},
                   {"step_factor", s.step_factor},
                   {"iters", s.iters},
                   {"warmup", s.warmup},
                   {"check", s.check}};
  if (s.algo) j["algo"] = collective::name(*s.algo);
  return j;
}

Result<BenchSpec> bench_spec_from_json(const nlohmann::json& j) {
  BenchSpec s;
  try {
    auto coll = collective::parse_coll(j.at("coll").get<std::string>());
    auto type = collective::parse_type(j.at("type").get<std::string>());
    auto op = collective::parse_op(j.at("op").get<std::string>());
    if (!coll || !type || !op) return bad_input("bench spec: unknown collective, type or op");
    s.coll = *coll;
    s.type = *type;
    s.op = *op;
    if (j.contains("algo")) {
      auto a = collective::parse_algo(j.at("algo").get<std::string>());
      if (!a) return bad_input("bench spec: unknown algorithm");
      s.algo = *a;
    }
    s.root = j.at("root").get<int>();
    s.min_bytes = j.at("min_bytes").get<uint64_t>();
    s.max_bytes = j.at("max_bytes").get<uint64_t>();
    s.step_factor = j.at("step_factor").get<double>();
    s.iters = j.at("iters").get<int>();
    s.warmup = j.at("warmup").get<int>();
    s.check = j.at("check").get<int>();
  } catch (const nlohmann::json::exception& e) {
    return bad_input(std::string("bench spec: ") + e.what());
  }
  return s;
}

Status validate(const BenchSpec& s) {
  if (s.min_bytes == 0 || s.max_bytes < s.min_bytes)
    return bad_input("-b/--minbytes and -e/--maxbytes: need 0 < min <= max (got " +
                     std::to_string(s.min_bytes) + " and " + std::to_string(s.max_bytes) + ")");
  if (!kStepFactorRange.contains(s.step_factor) ||
      (s.min_bytes != s.max_bytes && !(s.step_factor > 1)))
    return bad_input("-f/--stepfactor: must be > 1 and at most " +
                     fmt::format("{:g}", kStepFactorRange.hi) + " (got " +
                     fmt::format("{:g}", s.step_factor) + ")");
  if (!kItersRange.contains(s.iters)) return bad_input("-n/--iters: must be " + kItersRange.text());
  if (!kWarmupRange.contains(s.warmup))
    return bad_input("-w/--warmup_iters: must be " + kWarmupRange.text());
  if (!kCheckRange.contains(s.check)) return bad_input("-c/--check: must be " + kCheckRange.text());
  if (s.op == collective::RedOp::kProd)
    return bad_input(
        "--op prod: products of many ranks cannot be checked exactly; use sum, "
        "min or max");
  return {};
}

std::vector<SizePoint> sweep(const BenchSpec& s, int n) {
  std::vector<SizePoint> out;
  double b = static_cast<double>(s.min_bytes);
  for (int guard = 0; guard < 4096; ++guard) {
    const uint64_t bytes = static_cast<uint64_t>(std::llround(b));
    if (bytes > s.max_bytes) break;
    const uint64_t count = metrics::count_for(s.coll, bytes, n, s.type);
    SizePoint p{metrics::size_bytes(s.coll, count, n, s.type), count};
    if (out.empty() || out.back().count != p.count) out.push_back(p);
    if (s.min_bytes == s.max_bytes) break;
    b *= s.step_factor;
  }
  return out;
}

nlohmann::json to_json(const RankRow& r) {
  nlohmann::json it = nlohmann::json::array();
  for (auto [a, b] : r.iter_ns) it.push_back({a, b});
  return {{"bytes", r.bytes},
          {"count", r.count},
          {"time_us", r.time_us},
          {"wrong", r.wrong},
          {"iter_ns", it}};
}

RankRow rank_row_from_json(const nlohmann::json& j) {
  RankRow r;
  r.bytes = j.value("bytes", uint64_t{0});
  r.count = j.value("count", uint64_t{0});
  r.time_us = j.value("time_us", 0.0);
  r.wrong = j.value("wrong", uint64_t{0});
  if (j.contains("iter_ns"))
    for (const auto& p : j["iter_ns"])
      r.iter_ns.emplace_back(p[0].get<int64_t>(), p[1].get<int64_t>());
  return r;
}

namespace {

// A one-element AllReduce: the ranks line up (none starts a timed loop, or leaves, before all
// arrived).
class OneElementBarrier {
 public:
  explicit OneElementBarrier(Impl& impl) : impl_(impl) {}
  Status run() {
    const Call c{Coll::kAllReduce,
                 impl_.default_algo(Coll::kAllReduce),
                 collective::DataType::kFloat32,
                 collective::RedOp::kSum,
                 0,
                 &in_,
                 &out_,
                 1};
    return impl_.run(c);
  }

 private:
  Impl& impl_;
  float in_ = 1, out_ = 0;
};

// K from the stop file, or -1 while there is none.
int64_t read_stop(const std::string& path) {
  std::ifstream in(path);
  int64_t k = -1;
  if (in) in >> k;
  return in ? k : -1;
}

}  // namespace

Status run_steady(Impl& impl, const BenchSpec& spec, const std::string& stop_path,
                  int64_t start_iter, const std::function<void(int64_t, int64_t, int64_t)>& on_iter,
                  uint64_t* wrong) {
  const int n = impl.size(), r = impl.rank();
  const auto algo = spec.algo.value_or(impl.default_algo(spec.coll));
  TB_TRY(impl.supports(spec.coll, algo));
  const uint64_t count = metrics::count_for(spec.coll, spec.max_bytes, n, spec.type);
  const size_t es = collective::type_size(spec.type);
  std::vector<std::byte> send(collective::send_elems(spec.coll, count, n) * es);
  std::vector<std::byte> recv(collective::recv_elems(spec.coll, count, n) * es);
  Call call{spec.coll, algo, spec.type, spec.op, spec.root, send.data(), recv.data(), count};
  *wrong = 0;
  auto check = [&](uint64_t salt) -> Status {
    for (int c = 0; c < spec.check; ++c) {
      const uint64_t seed = salt * 1000 + static_cast<uint64_t>(c) + 1;
      fill_input(call, r, n, seed);
      poison_output(call, n);
      TB_TRY(impl.run(call));
      *wrong += count_wrong(call, r, n, seed);
    }
    return {};
  };
  TB_TRY(check(1));
  for (int w = 0; w < spec.warmup; ++w) TB_TRY(impl.run(call));
  OneElementBarrier barrier(impl);
  TB_TRY(barrier.run());
  constexpr int64_t kMaxIters = 10'000'000;
  for (int64_t i = start_iter; i < start_iter + kMaxIters; ++i) {
    if (const int64_t k = read_stop(stop_path); k >= 0 && i >= k) break;
    const int64_t s = mono_ns();
    TB_TRY(impl.run(call));
    on_iter(i, s, mono_ns());
  }
  TB_TRY(check(2));
  return barrier.run();
}

Status run_bench(Impl& impl, const BenchSpec& spec,
                 const std::function<void(const RankRow&)>& on_row) {
  const int n = impl.size(), r = impl.rank();
  const auto algo = spec.algo.value_or(impl.default_algo(spec.coll));
  TB_TRY(impl.supports(spec.coll, algo));
  const auto points = sweep(spec, n);
  // A one-element AllReduce lines the ranks up before each timed loop.
  OneElementBarrier barrier(impl);
  const size_t es = collective::type_size(spec.type);
  for (const auto& p : points) {
    std::vector<std::byte> send(collective::send_elems(spec.coll, p.count, n) * es);
    std::vector<std::byte> recv(collective::recv_elems(spec.coll, p.count, n) * es);
    Call call{spec.coll, algo, spec.type, spec.op, spec.root, send.data(), recv.data(), p.count};
    RankRow row{p.bytes, p.count, 0, 0, {}};
    for (int c = 0; c < spec.check; ++c) {
      const uint64_t seed = p.bytes * 131 + static_cast<uint64_t>(c) + 1;
      fill_input(call, r, n, seed);
      poison_output(call, n);
      TB_TRY(impl.run(call));
      row.wrong += count_wrong(call, r, n, seed);
    }
    for (int w = 0; w < spec.warmup; ++w) TB_TRY(impl.run(call));
    TB_TRY(barrier.run());
    row.iter_ns.reserve(static_cast<size_t>(spec.iters));
    const int64_t t0 = mono_ns();
    for (int i = 0; i < spec.iters; ++i) {
      const int64_t s = mono_ns();
      TB_TRY(impl.run(call));
      row.iter_ns.emplace_back(s, mono_ns());
    }
    row.time_us = static_cast<double>(mono_ns() - t0) / 1e3 / spec.iters;
    on_row(row);
  }
  // Nobody leaves while a peer is still finishing its last call (Gloo's connections reset
  // when a rank exits with the peer mid-read).
  return barrier.run();
}

}  // namespace tb::workload
