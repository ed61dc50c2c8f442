// MessageBuilder: a bounds-checked libmnl writer for one request (internal to netlink/).
//
// Owns a zeroed buffer of kCapacity bytes; every put is checked against it (an overflow is a bug:
// our requests are a few hundred bytes) and finish() hands back exactly nlmsg_len bytes.
// Not thread-safe; use one per message.
#pragma once

#include <libmnl/libmnl.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "netlink/message.h"

namespace tb::netlink {

class MessageBuilder {
 public:
  static constexpr size_t kCapacity = 4096;

  MessageBuilder(uint16_t type, uint16_t flags) : buf_(kCapacity) {
    nlh_ = mnl_nlmsg_put_header(buf_.data());
    nlh_->nlmsg_type = type;
    nlh_->nlmsg_flags = flags;
  }
  MessageBuilder(const MessageBuilder&) = delete;
  MessageBuilder& operator=(const MessageBuilder&) = delete;

  // The family header (ifinfomsg, rtmsg, ...) or a raw struct inside a nest (rtnexthop).
  template <class T>
  T* put_extra() {
    TB_CHECK(nlh_->nlmsg_len + MNL_ALIGN(sizeof(T)) <= kCapacity);
    return static_cast<T*>(mnl_nlmsg_put_extra_header(nlh_, sizeof(T)));
  }
  void put_u32(uint16_t type, uint32_t v) {
    TB_CHECK(mnl_attr_put_u32_check(nlh_, kCapacity, type, v));
  }
  // NUL-terminated, as iproute2 sends names (lib/libnetlink.c addattr_l(..., strlen + 1)).
  void put_str(uint16_t type, std::string_view s) {
    std::string z(s);
    TB_CHECK(mnl_attr_put_check(nlh_, kCapacity, type, z.size() + 1, z.c_str()));
  }
  void put_bytes(uint16_t type, const void* data, size_t len) {
    TB_CHECK(mnl_attr_put_check(nlh_, kCapacity, type, len, data));
  }
  nlattr* nest_start(uint16_t type) {
    nlattr* n = mnl_attr_nest_start_check(nlh_, kCapacity, type);
    TB_CHECK(n != nullptr);
    return n;
  }
  void nest_end(nlattr* n) { mnl_attr_nest_end(nlh_, n); }
  // Current end of the message, for structs whose length covers what follows (rtnexthop).
  uint8_t* tail() { return static_cast<uint8_t*>(mnl_nlmsg_get_payload_tail(nlh_)); }

  NlMsg finish() {
    buf_.resize(nlh_->nlmsg_len);
    return NlMsg{std::move(buf_)};
  }

 private:
  std::vector<uint8_t> buf_;
  nlmsghdr* nlh_;
};

}  // namespace tb::netlink
