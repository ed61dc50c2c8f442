#include "workload/pattern.h"

#include <cstring>
#include <vector>

namespace tb::workload {
namespace {

using collective::Coll;
using collective::DataType;
using collective::RedOp;

uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// The pattern's own streams, apart from the ranks' (tags 0..n).
constexpr uint64_t kStreamC = (uint64_t{1} << 40) + 1;     // sum: c(i)
constexpr uint64_t kStreamBase = (uint64_t{1} << 40) + 2;  // min/max: base(i)
constexpr uint64_t kStreamPick = (uint64_t{1} << 40) + 3;  // min/max: the rank holding base(i)

// Integer in [lo, hi] from a hash.
int64_t in_range(uint64_t h, int64_t lo, int64_t hi) {
  return lo + static_cast<int64_t>(h % static_cast<uint64_t>(hi - lo + 1));
}

class Pattern {
 public:
  enum class Mode { kMove, kSum, kMin, kMax, kProd };

  Pattern(const collective::Call& k, int size, uint64_t seed) : n_(size), seed_(seed) {
    if (!collective::reduces(k.coll)) {
      mode_ = Mode::kMove;
    } else {
      switch (k.op) {
        case RedOp::kSum:
          mode_ = Mode::kSum;
          break;
        case RedOp::kMin:
          mode_ = Mode::kMin;
          break;
        case RedOp::kMax:
          mode_ = Mode::kMax;
          break;
        case RedOp::kProd:
          mode_ = Mode::kProd;
          break;
      }
    }
    for (int r = 0; r <= size; ++r) rank_keys_.push_back(key(static_cast<uint64_t>(r)));
    c_key_ = key(kStreamC);
    base_key_ = key(kStreamBase);
    pick_key_ = key(kStreamPick);
  }

  // Input element i of rank r.
  int64_t value(int r, uint64_t i) const {
    const uint64_t h = hash(rank_keys_[static_cast<size_t>(r)], i);
    switch (mode_) {
      case Mode::kMove:
        return in_range(h, -3000, 3000);
      case Mode::kSum:
        return in_range(hash(c_key_, i), -1000, 1000) + g(r, i) - g(r + 1, i);
      case Mode::kMin:
      case Mode::kMax: {
        const int64_t base = in_range(hash(base_key_, i), -1000, 1000);
        if (r == pick(i)) return base;
        const int64_t off = 1 + in_range(h, 0, 999);
        return mode_ == Mode::kMin ? base + off : base - off;
      }
      case Mode::kProd:
        return (h & 1) ? -1 : 1;
    }
    return 0;
  }

  // The reduction of element i over every rank.
  int64_t reduced(uint64_t i) const {
    switch (mode_) {
      case Mode::kMove:
        return 0;  // not a reduction
      case Mode::kSum:
        return n_ * in_range(hash(c_key_, i), -1000, 1000) + g(0, i) - g(n_, i);
      case Mode::kMin:
      case Mode::kMax:
        return in_range(hash(base_key_, i), -1000, 1000);
      case Mode::kProd: {
        int64_t p = 1;
        for (int r = 0; r < n_; ++r) p *= value(r, i);
        return p;
      }
    }
    return 0;
  }

 private:
  uint64_t key(uint64_t tag) const {
    return splitmix64(splitmix64(seed_) ^ (tag * 0xD1B54A32D192ED03ull));
  }
  static uint64_t hash(uint64_t key, uint64_t i) { return splitmix64(key + i); }
  int64_t g(int r, uint64_t i) const {
    return in_range(hash(rank_keys_[static_cast<size_t>(r)], i) >> 1, -1000, 1000);
  }
  int pick(uint64_t i) const {
    return static_cast<int>(hash(pick_key_, i) % static_cast<uint64_t>(n_));
  }

  int n_;
  uint64_t seed_;
  Mode mode_ = Mode::kMove;
  std::vector<uint64_t> rank_keys_;  // ranks 0..n (sum's telescope reads g(n, i))
  uint64_t c_key_ = 0, base_key_ = 0, pick_key_ = 0;
};

// What element i of rank r's receive buffer must hold.
int64_t want_at(const Pattern& p, const collective::Call& k, int r, int n, uint64_t i) {
  const uint64_t c = k.count;
  switch (k.coll) {
    case Coll::kAllReduce:
    case Coll::kReduce:
      return p.reduced(i);
    case Coll::kReduceScatter:
      return p.reduced(static_cast<uint64_t>(r) * c + i);
    case Coll::kBroadcast:
      return p.value(k.root, i);
    case Coll::kAllGather:
      return p.value(static_cast<int>(i / c), i % c);
    case Coll::kAllToAll:
      return p.value(static_cast<int>(i / c), static_cast<uint64_t>(r) * c + i % c);
    case Coll::kSendRecv:
      return p.value((r - 1 + n) % n, i);
  }
  return 0;
}

template <class T>
void fill_typed(T* out, size_t n, const Pattern& p, int rank) {
  for (size_t i = 0; i < n; ++i) out[i] = static_cast<T>(p.value(rank, i));
}

template <class T>
uint64_t wrong_typed(const collective::Call& k, int r, int n, uint64_t seed) {
  if (k.coll == Coll::kReduce && r != k.root) return 0;
  const Pattern p(k, n, seed);
  const T* out = static_cast<const T*>(k.recv);
  const size_t rn = collective::recv_elems(k.coll, k.count, n);
  uint64_t wrong = 0;
  for (size_t i = 0; i < rn; ++i) wrong += out[i] != static_cast<T>(want_at(p, k, r, n, i));
  return wrong;
}

template <class T>
void expected_typed(const collective::Call& k, int r, int n, uint64_t seed) {
  if (k.coll == Coll::kReduce && r != k.root) return;
  const Pattern p(k, n, seed);
  T* out = static_cast<T*>(k.recv);
  const size_t rn = collective::recv_elems(k.coll, k.count, n);
  for (size_t i = 0; i < rn; ++i) out[i] = static_cast<T>(want_at(p, k, r, n, i));
}

}  // namespace

void fill_input(const collective::Call& k, int rank, int size, uint64_t seed) {
  const size_t n = collective::send_elems(k.coll, k.count, size);
  const Pattern p(k, size, seed);
  void* out = const_cast<void*>(k.send);
  switch (k.type) {
    case DataType::kFloat32:
      return fill_typed(static_cast<float*>(out), n, p, rank);
    case DataType::kInt32:
      return fill_typed(static_cast<int32_t*>(out), n, p, rank);
    case DataType::kFloat64:
      return fill_typed(static_cast<double*>(out), n, p, rank);
    case DataType::kInt64:
      return fill_typed(static_cast<int64_t*>(out), n, p, rank);
  }
}

uint64_t count_wrong(const collective::Call& k, int rank, int size, uint64_t seed) {
  switch (k.type) {
    case DataType::kFloat32:
      return wrong_typed<float>(k, rank, size, seed);
    case DataType::kInt32:
      return wrong_typed<int32_t>(k, rank, size, seed);
    case DataType::kFloat64:
      return wrong_typed<double>(k, rank, size, seed);
    case DataType::kInt64:
      return wrong_typed<int64_t>(k, rank, size, seed);
  }
  return 0;
}

void fill_expected(const collective::Call& k, int rank, int size, uint64_t seed) {
  switch (k.type) {
    case DataType::kFloat32:
      return expected_typed<float>(k, rank, size, seed);
    case DataType::kInt32:
      return expected_typed<int32_t>(k, rank, size, seed);
    case DataType::kFloat64:
      return expected_typed<double>(k, rank, size, seed);
    case DataType::kInt64:
      return expected_typed<int64_t>(k, rank, size, seed);
  }
}

void poison_output(const collective::Call& k, int size) {
  const size_t bytes =
      collective::recv_elems(k.coll, k.count, size) * collective::type_size(k.type);
  std::memset(k.recv, 0x7f, bytes);  // 0x7f7f7f7f: a huge float / int, never an expected value
}

}  // namespace tb::workload
