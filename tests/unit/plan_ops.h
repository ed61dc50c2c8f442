// The ops of one kind in a compiled plan, in order: what a test of the planner looks for.
#pragma once

#include <variant>
#include <vector>

#include "plan/plan.h"

namespace tb::plan {

template <class T>
std::vector<T> ops_of(const Plan& p) {
  std::vector<T> out;
  for (const auto& op : p.ops)
    if (auto* o = std::get_if<T>(&op)) out.push_back(*o);
  return out;
}

}  // namespace tb::plan
