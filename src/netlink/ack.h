// Reading the kernel's acknowledgements: NLMSG_ERROR (and an erroring NLMSG_DONE) with the
// extended-ack text, turned into our Error sentence.
//
// Pure functions over received bytes; thread-safe.
#pragma once

#include <linux/netlink.h>

#include <cstdint>
#include <string>

#include "core/error.h"

namespace tb::netlink {

struct Ack {
  uint32_t seq = 0;    // the request's sequence number
  int error = 0;       // positive errno, 0 = success
  std::string detail;  // NLMSGERR_ATTR_MSG, or ""
};

// Parses an NLMSG_ERROR message (an ack) or the int that ends an NLMSG_DONE. `nlh` must be one
// of those types and have passed mnl_nlmsg_ok.
Ack parse_ack(const nlmsghdr* nlh);

// "<what>: <strerror> (kernel: <detail>)", the parenthesis only when the kernel said more.
Error ack_error(const std::string& what, const Ack& ack);

}  // namespace tb::netlink
