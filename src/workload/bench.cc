#include "workload/bench.h"

#include <time.h>

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/clock.h"
#include "metrics/busbw.h"
#include "workload/pattern.h"

namespace tb::workload {

using collective::Call;
using collective::Coll;

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
                   {"check", s.check},
                   {"in_place", s.in_place}};
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
    s.in_place = j.value("in_place", true);
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

namespace {

nlohmann::json iters_json(const std::vector<std::pair<int64_t, int64_t>>& v) {
  nlohmann::json it = nlohmann::json::array();
  for (auto [a, b] : v) it.push_back({a, b});
  return it;
}

std::vector<std::pair<int64_t, int64_t>> iters_from_json(const nlohmann::json& j, const char* key) {
  std::vector<std::pair<int64_t, int64_t>> v;
  if (j.contains(key))
    for (const auto& p : j[key]) v.emplace_back(p[0].get<int64_t>(), p[1].get<int64_t>());
  return v;
}

}  // namespace

nlohmann::json to_json(const RankRow& r) {
  nlohmann::json j{{"bytes", r.bytes},
                   {"count", r.count},
                   {"time_us", r.time_us},
                   {"wrong", r.wrong},
                   {"iter_ns", iters_json(r.iter_ns)}};
  if (r.in_place) {
    j["ip_time_us"] = r.ip_time_us;
    j["ip_wrong"] = r.ip_wrong;
    j["ip_iter_ns"] = iters_json(r.ip_iter_ns);
  }
  return j;
}

RankRow rank_row_from_json(const nlohmann::json& j) {
  RankRow r;
  r.bytes = j.value("bytes", uint64_t{0});
  r.count = j.value("count", uint64_t{0});
  r.time_us = j.value("time_us", 0.0);
  r.wrong = j.value("wrong", uint64_t{0});
  r.iter_ns = iters_from_json(j, "iter_ns");
  r.in_place = j.contains("ip_time_us");
  r.ip_time_us = j.value("ip_time_us", 0.0);
  r.ip_wrong = j.value("ip_wrong", uint64_t{0});
  r.ip_iter_ns = iters_from_json(j, "ip_iter_ns");
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

// `check` correctness runs of `call` (fresh data each, seeds from `salt`); mismatches added to
// *wrong. The output is poisoned before the input is written: in place the input lies inside it.
Status check_runs(Impl& impl, const BenchSpec& spec, const Call& call, uint64_t salt,
                  uint64_t* wrong) {
  const int n = impl.size(), r = impl.rank();
  for (int c = 0; c < spec.check; ++c) {
    const uint64_t seed = salt * 1000 + static_cast<uint64_t>(c) + 1;
    poison_output(call, n);
    fill_input(call, r, n, seed);
    TB_TRY(impl.run(call));
    *wrong += count_wrong(call, r, n, seed);
  }
  return {};
}

}  // namespace

Status run_steady(Impl& impl, const BenchSpec& spec, const std::string& stop_path,
                  int64_t start_iter, const std::function<void(int64_t, int64_t, int64_t)>& on_iter,
                  uint64_t* wrong) {
  const int n = impl.size();
  const auto algo = spec.algo.value_or(impl.default_algo(spec.coll));
  TB_TRY(impl.supports(spec.coll, algo));
  const uint64_t count = metrics::count_for(spec.coll, spec.max_bytes, n, spec.type);
  const size_t es = collective::type_size(spec.type);
  std::vector<std::byte> send(collective::send_elems(spec.coll, count, n) * es);
  std::vector<std::byte> recv(collective::recv_elems(spec.coll, count, n) * es);
  Call call{spec.coll, algo, spec.type, spec.op, spec.root, send.data(), recv.data(), count};
  *wrong = 0;
  TB_TRY(check_runs(impl, spec, call, 1, wrong));
  for (int w = 0; w < spec.warmup; ++w) TB_TRY(impl.run(call));
  OneElementBarrier barrier(impl);
  TB_TRY(barrier.run());
  constexpr int64_t kMaxIters = 10'000'000;
  for (int64_t i = start_iter; i < start_iter + kMaxIters; ++i) {
    if (const int64_t k = read_stop(stop_path); k >= 0 && i >= k) break;
    const int64_t s = monotonic_ns();
    TB_TRY(impl.run(call));
    on_iter(i, s, monotonic_ns());
  }
  TB_TRY(check_runs(impl, spec, call, 2, wrong));
  return barrier.run();
}

namespace {

// One rank's buffers for a sweep: allocated once for the largest size; each call's buffers sit
// at an offset that moves between iterations (nccl-tests' startColl shift).
class Buffers {
 public:
  Buffers(const BenchSpec& spec, const std::vector<SizePoint>& points, int n, int rank)
      : spec_(spec), n_(n), rank_(rank) {
    for (const auto& p : points) cap_ = std::max(cap_, span(p.count));
    send_.resize(cap_);
    recv_.resize(cap_);
  }

  // The call for `count` elements, in place or not, at iteration `iter`'s offset.
  Call at(const Call& base, bool in_place, int64_t iter) {
    const size_t sp = span(base.count);
    const size_t steps = std::max<size_t>(1, cap_ / std::max<size_t>(1, sp));
    const size_t shift = sp * (static_cast<size_t>(iter) % steps);
    const size_t mine = static_cast<size_t>(rank_) * base.count * collective::type_size(spec_.type);
    Call c = base;
    if (!in_place) {
      c.send = send_.data() + shift;
      c.recv = recv_.data() + shift;
    } else {
      std::byte* b = recv_.data() + shift;  // one buffer
      c.send = spec_.coll == Coll::kAllGather ? b + mine : b;
      c.recv = spec_.coll == Coll::kReduceScatter ? b + mine : b;
    }
    return c;
  }

 private:
  // Bytes a call occupies: its larger buffer (the one buffer, in place).
  size_t span(uint64_t count) const {
    return std::max(collective::send_elems(spec_.coll, count, n_),
                    collective::recv_elems(spec_.coll, count, n_)) *
           collective::type_size(spec_.type);
  }

  const BenchSpec& spec_;
  int n_, rank_;
  size_t cap_ = 0;
  std::vector<std::byte> send_, recv_;
};

// One placement of one size: checks, warm-up, barrier, the timed loop, checks again.
Status time_one(Impl& impl, const BenchSpec& spec, Buffers& bufs, const Call& base, bool in_place,
                OneElementBarrier& barrier, double* time_us, uint64_t* wrong,
                std::vector<std::pair<int64_t, int64_t>>* iter_ns) {
  const uint64_t salt = base.count * 4 + (in_place ? 2 : 0);
  TB_TRY(check_runs(impl, spec, bufs.at(base, in_place, 0), salt, wrong));
  for (int w = 0; w < spec.warmup; ++w) TB_TRY(impl.run(bufs.at(base, in_place, w)));
  TB_TRY(barrier.run());
  iter_ns->reserve(static_cast<size_t>(spec.iters));
  const int64_t t0 = monotonic_ns();
  for (int i = 0; i < spec.iters; ++i) {
    const Call c = bufs.at(base, in_place, i);
    const int64_t s = monotonic_ns();
    TB_TRY(impl.run(c));
    iter_ns->emplace_back(s, monotonic_ns());
  }
  *time_us = static_cast<double>(monotonic_ns() - t0) / 1e3 / spec.iters;
  // After timing, at the offset the next iteration would use (not the first check's).
  return check_runs(impl, spec, bufs.at(base, in_place, spec.iters), salt + 1, wrong);
}

}  // namespace

Status run_bench(Impl& impl, const BenchSpec& spec,
                 const std::function<void(const RankRow&)>& on_row) {
  const int n = impl.size();
  const auto algo = spec.algo.value_or(impl.default_algo(spec.coll));
  TB_TRY(impl.supports(spec.coll, algo));
  const auto points = sweep(spec, n);
  // A one-element AllReduce lines the ranks up before each timed loop.
  OneElementBarrier barrier(impl);
  Buffers bufs(spec, points, n, impl.rank());
  for (const auto& p : points) {
    const Call base{spec.coll, algo, spec.type, spec.op, spec.root, nullptr, nullptr, p.count};
    RankRow row{p.bytes, p.count, 0, 0, {}};
    TB_TRY(
        time_one(impl, spec, bufs, base, false, barrier, &row.time_us, &row.wrong, &row.iter_ns));
    if (spec.in_place) {
      row.in_place = true;
      TB_TRY(time_one(impl, spec, bufs, base, true, barrier, &row.ip_time_us, &row.ip_wrong,
                      &row.ip_iter_ns));
    }
    on_row(row);
  }
  // Nobody leaves while a peer is still finishing its last call (Gloo's connections reset
  // when a rank exits with the peer mid-read).
  return barrier.run();
}

}  // namespace tb::workload
