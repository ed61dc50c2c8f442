#include "apply/applier.h"

#include <spdlog/spdlog.h>

#include <unordered_set>

namespace tb::apply {
namespace {

constexpr size_t kFlushEvery = 256;  // journal lines per write(2)

}  // namespace

Status apply_plan(const plan::Plan& plan, Kernel& kernel, Journal& journal,
                  const ApplyOptions& opts) {
  auto rollback = [&](Error e) -> Status {
    auto flushed = journal.flush();
    spdlog::warn("rolling back {} ops: {}", journal.ops().size(), e.message);
    if (auto r = teardown(journal.ops(), kernel); !r)
      e.message += "; rollback left errors: " + r.error().message;
    else
      e.message += "; everything made so far was removed";
    if (!flushed) e.message += " (journal: " + flushed.error().message + ")";
    return std::unexpected(e);
  };
  const size_t total = plan.ops.size();
  for (size_t i = 0; i < total; ++i) {
    if (opts.interrupted && opts.interrupted->load())
      return rollback(Error{"interrupted by signal"});
    const plan::Op& op = plan.ops[i];
    journal.append(op);
    // Objects outside any namespace of ours must be on disk before they exist, so that a
    // kill -9 leaves a journal that names them; the rest go with their namespace.
    const bool outside = std::holds_alternative<plan::CreateNetns>(op) ||
                         std::holds_alternative<plan::WriteHosts>(op) ||
                         std::holds_alternative<plan::CreateRxe>(op) ||
                         std::holds_alternative<plan::StartDaemon>(op);
    if (outside || i % kFlushEvery == 0)
      if (auto r = journal.flush(); !r) return rollback(r.error());
    spdlog::debug("apply {}", plan::to_text(op));
    if (auto r = kernel.submit(op); !r) return rollback(r.error());
    if (opts.progress && (i % 64 == 0 || i + 1 == total)) opts.progress(i + 1, total);
  }
  if (auto r = journal.flush(); !r) return rollback(r.error());
  if (auto r = kernel.sync(); !r) return rollback(r.error());
  if (opts.interrupted && opts.interrupted->load()) return rollback(Error{"interrupted by signal"});
  return {};
}

bool goes_with_a_namespace(const plan::Op& op, const std::unordered_set<std::string>& created) {
  if (std::holds_alternative<plan::CreateNetns>(op) ||
      std::holds_alternative<plan::WriteHosts>(op) || std::holds_alternative<plan::CreateRxe>(op) ||
      std::holds_alternative<plan::StartDaemon>(op))
    return false;
  if (auto* v = std::get_if<plan::CreateVeth>(&op))
    return created.contains(v->a.netns) || created.contains(v->b.netns);
  return created.contains(plan::op_netns(op));
}

Status teardown(const std::vector<plan::Op>& ops, Kernel& kernel) {
  std::unordered_set<std::string> created;
  for (const auto& op : ops)
    if (auto* n = std::get_if<plan::CreateNetns>(&op)) created.insert(n->netns);
  kernel.prepare_undo(ops);
  std::string errors;
  size_t failed = 0;
  for (auto it = ops.rbegin(); it != ops.rend(); ++it) {
    if (goes_with_a_namespace(*it, created)) continue;
    spdlog::debug("undo {}", plan::to_text(*it));
    if (auto r = kernel.undo(*it); !r) {
      ++failed;
      if (failed <= 5) errors += (errors.empty() ? "" : "; ") + r.error().message;
    }
  }
  if (failed > 5) errors += "; and " + std::to_string(failed - 5) + " more";
  if (failed) return fail(errors);
  return {};
}

}  // namespace tb::apply
