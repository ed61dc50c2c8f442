// RecordingKernel: a fake Kernel for unit tests. Records every call, models which objects exist
// (deleting a namespace deletes what is inside it), and fails on request: at the n-th submit,
// either at once or, like a pipelining kernel, only at sync().
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "apply/kernel.h"

namespace tb::apply {

class RecordingKernel : public Kernel {
 public:
  int fail_at = -1;           // index of the submit that fails
  bool fail_at_sync = false;  // report that failure only at sync()
  std::vector<std::string> calls;

  Status submit(const plan::Op& op) override {
    calls.push_back("submit " + plan::to_text(op));
    const int index = submitted_++;
    if (index == fail_at) {
      Error e{"create " + plan::to_text(op) + ": File exists (injected)", EEXIST};
      if (!fail_at_sync) return std::unexpected(e);
      pending_error_ = e;
      return {};
    }
    for (const auto& key : keys(op)) live_.insert(key);
    return {};
  }
  Status sync() override {
    calls.push_back("sync");
    if (pending_error_) {
      auto e = *pending_error_;
      pending_error_.reset();
      return std::unexpected(e);
    }
    return {};
  }
  Status undo(const plan::Op& op) override {
    calls.push_back("undo " + plan::to_text(op));
    if (auto* n = std::get_if<plan::CreateNetns>(&op)) {
      std::erase_if(live_, [&](const std::string& k) {
        return k == "netns " + n->netns || k.starts_with(n->netns + ":");
      });
      return {};
    }
    for (const auto& key : keys(op)) live_.erase(key);
    return {};
  }
  Status set_link_up(const std::string& netns, const std::string& ifname, bool up) override {
    calls.push_back("link " + netns + ":" + ifname + (up ? " up" : " down"));
    return {};
  }
  Result<std::vector<std::string>> owned_netns(const std::string&,
                                               const std::string& = "") override {
    return {};
  }
  Result<std::vector<IfaceInfo>> interfaces(const std::string&) override { return {}; }

  const std::set<std::string>& live() const { return live_; }

 private:
  static std::vector<std::string> keys(const plan::Op& op) {
    if (auto* n = std::get_if<plan::CreateNetns>(&op)) return {"netns " + n->netns};
    if (auto* v = std::get_if<plan::CreateVeth>(&op))
      return {v->a.netns + ":" + v->a.ifname, v->b.netns + ":" + v->b.ifname};
    if (auto* h = std::get_if<plan::WriteHosts>(&op)) return {"hosts " + h->netns};
    return {plan::op_netns(op) + ":" + plan::to_text(op)};
  }

  int submitted_ = 0;
  std::optional<Error> pending_error_;
  std::set<std::string> live_;
};

}  // namespace tb::apply
