#include "netlink/ack.h"

#include <libmnl/libmnl.h>

#include <cstring>

namespace tb::netlink {
namespace {

int ext_ack_attr(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
      mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) {
    *static_cast<std::string*>(data) = mnl_attr_get_str(attr);
  }
  return MNL_CB_OK;
}

}  // namespace

Ack parse_ack(const nlmsghdr* nlh) {
  Ack ack;
  ack.seq = nlh->nlmsg_seq;
  size_t payload = mnl_nlmsg_get_payload_len(nlh);
  size_t hlen = 0;
  if (nlh->nlmsg_type == NLMSG_ERROR) {
    if (payload < sizeof(nlmsgerr)) {
      ack.error = EBADMSG;
      return ack;
    }
    const auto* err = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
    ack.error = -err->error;
    ack.seq = err->msg.nlmsg_seq;
    // TLVs follow the nlmsgerr, after the echoed request unless NETLINK_CAP_ACK capped it
    // (iproute2 lib/libnetlink.c nl_dump_ext_ack).
    hlen = sizeof(nlmsgerr);
    if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) hlen += mnl_nlmsg_get_payload_len(&err->msg);
  } else {  // NLMSG_DONE: an int error, then TLVs (net/netlink/af_netlink.c netlink_dump_done)
    if (payload < sizeof(int)) return ack;
    int e = 0;
    std::memcpy(&e, mnl_nlmsg_get_payload(nlh), sizeof(e));
    ack.error = -e;
    hlen = sizeof(int);
  }
  if ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) && hlen <= payload)
    mnl_attr_parse(nlh, static_cast<unsigned>(hlen), ext_ack_attr, &ack.detail);
  return ack;
}

Error ack_error(const std::string& what, const Ack& ack) {
  std::string m = what + ": " + std::strerror(ack.error);
  if (!ack.detail.empty()) m += " (kernel: " + ack.detail + ")";
  return Error{std::move(m), ack.error, kExitFailed};
}

}  // namespace tb::netlink
