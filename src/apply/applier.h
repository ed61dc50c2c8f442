// The applier: applies a plan through a Kernel with a write-ahead journal, and rolls back in
// reverse on any failure or interruption; teardown undoes a journal in reverse and keeps going.
// Thread-safety: one call at a time per Kernel; `interrupted` may be set from a signal handler.
#pragma once

#include <atomic>
#include <functional>
#include <string>
#include <unordered_set>
#include <vector>

#include "apply/journal.h"
#include "apply/kernel.h"
#include "plan/plan.h"

namespace tb::apply {

struct ApplyOptions {
  const std::atomic<bool>* interrupted = nullptr;           // checked between ops
  std::function<void(size_t done, size_t total)> progress;  // optional
};

// Applies every op. On failure the journal's ops are undone in reverse (rollback) and the
// error returned says what failed and whether the rollback was clean.
Status apply_plan(const plan::Plan& plan, Kernel& kernel, Journal& journal,
                  const ApplyOptions& opts = {});

// Undoes `ops` in reverse. Ops inside a namespace that the same list creates are skipped (the
// namespace takes them with it: goes_with_a_namespace). Keeps going past errors and returns
// them all.
Status teardown(const std::vector<plan::Op>& ops, Kernel& kernel);
// Whether teardown skips `op` given the namespaces its list creates: an op inside one of them (a
// veth by either end). Namespaces and hosts files are outside; so are rxe devices (RDMA device
// names are global, and a device goes before its netdev) and daemons (a process outlives its
// namespace).
bool goes_with_a_namespace(const plan::Op& op, const std::unordered_set<std::string>& created);

}  // namespace tb::apply
