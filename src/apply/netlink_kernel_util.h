// Small helpers shared by NetlinkKernel's files (netlink_kernel*.cc). Internal.
#pragma once

#include <string>

#include "core/error.h"

namespace tb::apply::detail {

inline std::string in_ns(const std::string& netns) {
  return " in netns " + netns;
}

// An error whose errno is one of `fine` becomes success: teardown treats "not found" as done
// (STYLE rule 5), and a create-only object already there is done too.
template <class... E>
Status ok_if(Status r, E... fine) {
  if (!r && ((r.error().sys_errno == fine) || ...)) return {};
  return r;
}

}  // namespace tb::apply::detail
