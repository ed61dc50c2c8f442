// One RC send between two RDMA devices, for the doctor's rxe probe (capability_rdma.cc): the
// smallest real RoCE transfer. Both devices are opened by this process (in the kernel's shared
// RDMA netns mode every namespace sees every device), each QP is connected by hand to the other's
// RoCE v2 GID, and a 64-byte SEND goes from a to b within a deadline. Short retry settings so a
// kernel whose rxe sends nothing fails in well under a second per try.
#pragma once

#include <chrono>
#include <string>

#include "core/error.h"
#include "core/ipv4.h"

namespace tb::capability::probe {

// Bytes received on b (and checked) on success; the error names the verbs step or the work
// completion status.
Result<int> rc_send_between(const std::string& dev_a, Ipv4 addr_a, const std::string& dev_b,
                            Ipv4 addr_b,
                            std::chrono::milliseconds deadline = std::chrono::milliseconds(8000));

}  // namespace tb::capability::probe
