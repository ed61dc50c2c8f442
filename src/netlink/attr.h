// Reading a message's attributes with libmnl (internal to netlink/): mnl_attr_for_each and
// mnl_attr_for_each_nested, spelled out, since their void* assignment is not C++. Each attribute
// that mnl_attr_ok accepts is passed to `each`, in order.
#pragma once

#include <libmnl/libmnl.h>

#include <cstddef>

namespace tb::netlink {

// The attributes from `first` up to `end`.
template <typename F>
void for_each_attr(const nlattr* first, const void* end, F&& each) {
  for (const nlattr* a = first; mnl_attr_ok(
           a, static_cast<int>(static_cast<const char*>(end) - reinterpret_cast<const char*>(a)));
       a = static_cast<const nlattr*>(mnl_attr_next(a)))
    each(a);
}

// The attributes of `nlh` after its family header of `header_len` bytes (ifinfomsg, rtmsg, ...).
template <typename F>
void for_each_attr(const nlmsghdr* nlh, size_t header_len, F&& each) {
  for_each_attr(static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(nlh, header_len)),
                mnl_nlmsg_get_payload_tail(nlh), each);
}

// The attributes nested in `a` (TCA_STATS2, TCA_OPTIONS, ...).
template <typename F>
void for_each_nested(const nlattr* a, F&& each) {
  for_each_attr(static_cast<const nlattr*>(mnl_attr_get_payload(a)),
                static_cast<const char*>(mnl_attr_get_payload(a)) + mnl_attr_get_payload_len(a),
                each);
}

}  // namespace tb::netlink
