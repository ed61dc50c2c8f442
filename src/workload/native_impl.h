// The native implementation: our algorithms (collective/) over a Comm (TCP in a lab,
// in-process in tests). Owns the Comm. Not thread-safe.
#pragma once

#include <memory>

#include "collective/comm.h"
#include "workload/impl.h"

namespace tb::workload {

std::unique_ptr<Impl> make_native_impl(std::unique_ptr<collective::Comm> comm,
                                       std::string description);

}  // namespace tb::workload
