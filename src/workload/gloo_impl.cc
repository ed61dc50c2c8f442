// The Gloo Impl: rendezvous and the full mesh, what it supports, and turning Gloo's
// exceptions into Errors. The calls themselves are in gloo_impl_ops.cc.
#include "workload/gloo_impl.h"

#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/attr.h>
#include <gloo/transport/tcp/device.h>
#include <sys/socket.h>

#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/ipv4.h"
#include "workload/gloo_impl_ops.h"

namespace tb::workload {
namespace {

using collective::Algo;
using collective::Call;
using collective::Coll;

std::string str(std::string_view s) {
  return std::string(s);
}
std::string who(const GlooOptions& o) {
  return "gloo rank " + std::to_string(o.rank) + " of " + std::to_string(o.size) + " at " +
         o.address;
}

// Gloo's stores wait on get() with their own 30 s default; this one waits with ours first.
class TimedStore : public gloo::rendezvous::Store {
 public:
  TimedStore(gloo::rendezvous::Store& inner, std::chrono::milliseconds timeout)
      : inner_(inner), timeout_(timeout) {}
  void set(const std::string& key, const std::vector<char>& data) override {
    inner_.set(key, data);
  }
  std::vector<char> get(const std::string& key) override {
    inner_.wait({key}, timeout_);
    return inner_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { inner_.wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    inner_.wait(keys, timeout);
  }

 private:
  gloo::rendezvous::Store& inner_;
  std::chrono::milliseconds timeout_;
};

// The Gloo class (legacy, bound buffers) or function (gloo::, the options API) that runs.
std::string label(Coll coll, Algo algo) {
  switch (coll) {
    case Coll::kAllReduce:
      return algo == Algo::kHalvingDoubling ? "gloo AllreduceHalvingDoubling"
                                            : "gloo::allreduce RING";
    case Coll::kAllGather:
      return "gloo::allgather";
    case Coll::kReduceScatter:
      return "gloo ReduceScatterHalvingDoubling";
    case Coll::kBroadcast:
      return "gloo::broadcast";
    case Coll::kReduce:
      return "gloo::reduce";
    case Coll::kAllToAll:
      return "gloo::alltoall";
    case Coll::kSendRecv:
      return "gloo unbound send/recv";
  }
  return "gloo";
}

}  // namespace

Algo gloo_default_algo(Coll coll) {
  switch (coll) {
    case Coll::kReduceScatter:
      return Algo::kHalvingDoubling;
    case Coll::kBroadcast:  // a binomial tree
      return Algo::kTree;
    default:  // allreduce, allgather, reduce (ring reduce-scatter + gather), alltoall, sendrecv
      return Algo::kRing;
  }
}

Status gloo_supports(Coll coll, Algo algo) {
  if (coll == Coll::kAllReduce) {
    if (algo == Algo::kRing || algo == Algo::kHalvingDoubling) return {};
    return bad_input("gloo has no " + str(collective::name(algo)) + " allreduce; it has ring, hd");
  }
  const Algo has = gloo_default_algo(coll);
  if (algo == has) return {};
  return bad_input("gloo has no " + str(collective::name(algo)) + " " +
                   str(collective::name(coll)) + "; it has " + str(collective::name(has)) + " (" +
                   label(coll, has) + ")");
}

namespace {

class GlooImpl final : public Impl {
 public:
  GlooImpl(GlooOptions o, std::shared_ptr<gloo::Context> ctx)
      : o_(std::move(o)),
        ctx_(std::move(ctx)),
        ops_(std::make_unique<gloo_detail::GlooOps>(ctx_,
                                                    std::chrono::milliseconds(o_.timeout_ms))) {}
  ~GlooImpl() override { ops_->drop_cache(); }  // before the context, swallowing throws

  int rank() const override { return o_.rank; }
  int size() const override { return o_.size; }

  Status supports(Coll coll, Algo algo) const override { return gloo_supports(coll, algo); }
  Algo default_algo(Coll coll) const override { return gloo_default_algo(coll); }

  std::string algo_label(const Call& call) const override { return label(call.coll, call.algo); }

  std::string describe() const override {
    return "gloo 5b14351 tcp, one connection per peer, device bound to " + o_.address;
  }

  Status run(const Call& call) override {
    if (failed_) return std::unexpected(*failed_);
    TB_TRY(check(call));
    if (call.count == 0) return {};
    // In place (collective/types.h's layouts): Gloo's algorithms may overwrite input they have
    // not sent yet, so they get a copy of the input.
    Call c = call;
    const size_t sb =
        collective::send_elems(call.coll, call.count, o_.size) * collective::type_size(call.type);
    const size_t rb =
        collective::recv_elems(call.coll, call.count, o_.size) * collective::type_size(call.type);
    const auto* s = static_cast<const std::byte*>(call.send);
    const auto* r = static_cast<const std::byte*>(call.recv);
    if (s < r + rb && r < s + sb) {
      staged_.assign(s, s + sb);
      c.send = staged_.data();
    }
    try {
      ops_->run(c);
      return {};
    } catch (const std::exception& e) {
      failed_ =
          Error{str(collective::name(call.coll)) + " via " + label(call.coll, call.algo) + " (" +
                str(collective::name(call.type)) + ", " + str(collective::name(call.op)) + ", " +
                std::to_string(call.count) + " elements) on rank " + std::to_string(o_.rank) +
                " of " + std::to_string(o_.size) + " at " + o_.address + ": " + e.what()};
      return std::unexpected(*failed_);
    }
  }

 private:
  Status check(const Call& call) const {
    TB_TRY(supports(call.coll, call.algo));
    if (collective::rooted(call.coll) && (call.root < 0 || call.root >= o_.size))
      return bad_input("gloo " + str(collective::name(call.coll)) + ": root " +
                       std::to_string(call.root) + " is not a rank of " + std::to_string(o_.size));
    if (call.count > 0 && (call.recv == nullptr || call.send == nullptr))
      return bad_input("gloo " + str(collective::name(call.coll)) + ": null buffer");
    const bool legacy = call.coll == Coll::kReduceScatter ||
                        (call.coll == Coll::kAllReduce && call.algo == Algo::kHalvingDoubling);
    if (legacy && !gloo_detail::fits_legacy(call, o_.size))
      return bad_input(label(call.coll, call.algo) +
                       " counts bytes in an int: " + std::to_string(call.count) + " elements of " +
                       str(collective::name(call.type)) + " is too many");
    return {};
  }

  GlooOptions o_;
  std::shared_ptr<gloo::Context> ctx_;
  std::unique_ptr<gloo_detail::GlooOps> ops_;
  std::optional<Error> failed_;
  std::vector<std::byte> staged_;  // the input of an in-place call
};

}  // namespace

Result<std::unique_ptr<Impl>> make_gloo_impl(const GlooOptions& o) {
  const std::string me = who(o);
  if (o.size < 1 || o.rank < 0 || o.rank >= o.size)
    return bad_input(me + ": rank " + std::to_string(o.rank) + " is not in a group of " +
                     std::to_string(o.size));
  if (o.timeout_ms <= 0)
    return bad_input(me + ": timeout " + std::to_string(o.timeout_ms) + " ms is not positive");
  if (o.store_dir.empty()) return bad_input(me + ": no rendezvous store directory");
  if (auto a = parse_ipv4(o.address); !a)
    return bad_input(me + ": bind address: " + a.error().message);
  const std::chrono::milliseconds timeout(o.timeout_ms);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = o.address;
    attr.ai_family = AF_INET;
    auto dev = gloo::transport::tcp::CreateDevice(attr);
    auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
    ctx->setTimeout(timeout);  // before connecting: the pairs take it from the context
    gloo::rendezvous::FileStore files(o.store_dir);
    gloo::rendezvous::PrefixStore prefixed(o.prefix, files);
    TimedStore store(prefixed, timeout);
    ctx->connectFullMesh(store, dev);
    return std::make_unique<GlooImpl>(o, std::move(ctx));
  } catch (const std::exception& e) {
    return fail(me + ": connect full mesh through file store " + o.store_dir + " prefix '" +
                o.prefix + "': " + e.what());
  }
}

}  // namespace tb::workload
