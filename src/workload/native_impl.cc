#include "workload/native_impl.h"

#include "collective/collective.h"

namespace tb::workload {
namespace {

class NativeImpl final : public Impl {
 public:
  NativeImpl(std::unique_ptr<collective::Comm> comm, std::string description)
      : comm_(std::move(comm)), description_(std::move(description)) {}

  int rank() const override { return comm_->rank(); }
  int size() const override { return comm_->size(); }
  Status supports(collective::Coll coll, collective::Algo algo) const override {
    collective::Call probe;
    probe.coll = coll;
    probe.algo = algo;
    return collective::check(*comm_, probe);
  }
  collective::Algo default_algo(collective::Coll coll) const override {
    return collective::native_algos(coll).front();
  }
  std::string algo_label(const collective::Call& call) const override {
    return collective::algo_label(call);
  }
  Status run(const collective::Call& call) override { return collective::run(*comm_, call); }
  std::string describe() const override { return description_; }

 private:
  std::unique_ptr<collective::Comm> comm_;
  std::string description_;
};

}  // namespace

std::unique_ptr<Impl> make_native_impl(std::unique_ptr<collective::Comm> comm,
                                       std::string description) {
  return std::make_unique<NativeImpl>(std::move(comm), std::move(description));
}

}  // namespace tb::workload
