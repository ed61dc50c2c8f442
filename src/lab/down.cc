#include "lab/down.h"

#include <filesystem>
#include <optional>

#include "apply/netlink_kernel.h"
#include "lab/lab.h"
#include "lab/up.h"
#include "scenario/loader.h"

namespace tb::lab {
namespace {

// "LAB|SCENARIO": a path to an existing file names the scenario's lab.
Result<std::string> resolve_lab(const std::string& target) {
  if (std::filesystem::is_regular_file(target)) {
    auto s = scenario::load(target);
    if (!s) return std::unexpected(s.error());
    return s->lab;
  }
  return target;
}

}  // namespace

Result<DownReport> take_down(const DownOptions& o) {
  auto lab = resolve_lab(o.target);
  if (!lab) return std::unexpected(lab.error());
  TB_TRY(require_root("down"));
  DownReport r{*lab, load_state(*lab).has_value()};
  apply::NetlinkKernel kernel;
  TB_TRY(down(*lab, kernel));
  return r;
}

Result<CleanReport> clean_up(const CleanOptions& o) {
  if (o.lab.empty() == !o.all) return bad_input("clean needs either a lab name or --all");
  TB_TRY(require_root("clean"));
  apply::NetlinkKernel kernel;
  std::optional<LabLock> lock;
  if (!o.lab.empty()) {
    auto l = LabLock::acquire(o.lab);
    if (!l) return std::unexpected(l.error());
    lock.emplace(std::move(*l));
  }
  auto n = clean(o.all ? "" : o.lab, kernel);
  if (!n) return std::unexpected(n.error());
  return CleanReport{*n};
}

}  // namespace tb::lab
