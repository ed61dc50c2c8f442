// CheckSocket (capability_netlink.h): send one request, wait for its ack with a timeout, and
// carry the kernel's extended-ack text into the Error.
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cstring>

#include "capability/capability_netlink.h"

namespace tb::capability::probe {
namespace {

constexpr int kRecvTimeoutS = 2;
constexpr int kMaxReplies = 4096;  // bounds a dump's receive loop

int extack_attr(const nlattr* attr, void* data) {
  if (mnl_attr_get_type(attr) == NLMSGERR_ATTR_MSG &&
      mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0)
    *static_cast<std::string*>(data) = mnl_attr_get_str(attr);
  return MNL_CB_OK;
}

// "<what>: <strerror> (kernel: <extack>)" from an NLMSG_ERROR; the TLVs follow the nlmsgerr,
// after the echoed request unless NETLINK_CAP_ACK capped it (iproute2 lib/libnetlink.c).
Error ack_error(const std::string& what, const nlmsghdr* nlh, int err) {
  std::string extack;
  const auto* e = static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh));
  size_t hlen = sizeof(nlmsgerr);
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) hlen += mnl_nlmsg_get_payload_len(&e->msg);
  if ((nlh->nlmsg_flags & NLM_F_ACK_TLVS) && hlen <= mnl_nlmsg_get_payload_len(nlh))
    mnl_attr_parse(nlh, static_cast<unsigned>(hlen), extack_attr, &extack);
  std::string m = what + ": " + std::strerror(err);
  if (!extack.empty()) m += " (kernel: " + extack + ")";
  return Error{std::move(m), err, kExitFailed};
}

int rdma_dev_attr(const nlattr* attr, void* data) {
  auto* dev = static_cast<RdmaDev*>(data);
  if (mnl_attr_get_type(attr) == RDMA_NLDEV_ATTR_DEV_INDEX &&
      mnl_attr_validate(attr, MNL_TYPE_U32) >= 0)
    dev->index = mnl_attr_get_u32(attr);
  if (mnl_attr_get_type(attr) == RDMA_NLDEV_ATTR_DEV_NAME &&
      mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0)
    dev->name = mnl_attr_get_str(attr);
  return MNL_CB_OK;
}

std::string bus_name(int bus) {
  switch (bus) {
    case NETLINK_ROUTE:
      return "NETLINK_ROUTE";
    case NETLINK_NETFILTER:
      return "NETLINK_NETFILTER";
    case NETLINK_RDMA:
      return "NETLINK_RDMA";
  }
  return "netlink protocol " + std::to_string(bus);
}

}  // namespace

Result<CheckSocket> CheckSocket::open(int bus) {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, bus));
  if (!fd) return sys_fail("socket(" + bus_name(bus) + ")");
  int one = 1;
  // Extended acks are best effort: older kernels lack them and the errno still arrives.
  ::setsockopt(fd.get(), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
  ::setsockopt(fd.get(), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
  timeval tv{kRecvTimeoutS, 0};
  if (::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0)
    return sys_fail("set netlink receive timeout");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0)
    return sys_fail("bind netlink socket");
  return CheckSocket(std::move(fd));
}

Status CheckSocket::send(NlBytes& msg, const std::string& what) {
  auto* nlh = reinterpret_cast<nlmsghdr*>(msg.data());
  nlh->nlmsg_seq = ++seq_;
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t n = ::sendto(fd_.get(), msg.data(), msg.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
                       sizeof(kernel));
  if (n != static_cast<ssize_t>(msg.size())) return sys_fail(what + ": send");
  return {};
}

Status CheckSocket::request(NlBytes msg, const std::string& what) {
  TB_TRY(send(msg, what));
  std::vector<uint8_t> buf(MNL_SOCKET_BUFFER_SIZE * 4);
  for (int i = 0; i < kMaxReplies; ++i) {
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_fail(what + ": waiting for the kernel's ack");
    int len = static_cast<int>(n);
    for (auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, len);
         nlh = mnl_nlmsg_next(nlh, &len)) {
      if (nlh->nlmsg_seq != seq_ || nlh->nlmsg_type != NLMSG_ERROR) continue;
      if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr))
        return fail(what + ": truncated ack", EBADMSG);
      int err = -static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh))->error;
      if (err == 0) return {};
      return std::unexpected(ack_error(what, nlh, err));
    }
  }
  return fail(what + ": no ack after " + std::to_string(kMaxReplies) + " replies");
}

Result<std::vector<RdmaDev>> CheckSocket::rdma_devices() {
  const std::string what = "dump RDMA devices (RDMA_NLDEV_CMD_GET)";
  NlBytes msg = rdma_get_dump_msg();
  TB_TRY(send(msg, what));
  std::vector<RdmaDev> devs;
  std::vector<uint8_t> buf(MNL_SOCKET_BUFFER_SIZE * 4);
  for (int i = 0; i < kMaxReplies; ++i) {
    ssize_t n = ::recv(fd_.get(), buf.data(), buf.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_fail(what);
    int len = static_cast<int>(n);
    for (auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, len);
         nlh = mnl_nlmsg_next(nlh, &len)) {
      if (nlh->nlmsg_seq != seq_) continue;
      if (nlh->nlmsg_type == NLMSG_DONE) return devs;
      if (nlh->nlmsg_type == NLMSG_ERROR) {
        if (mnl_nlmsg_get_payload_len(nlh) < sizeof(nlmsgerr))
          return fail(what + ": truncated error", EBADMSG);
        int err = -static_cast<const nlmsgerr*>(mnl_nlmsg_get_payload(nlh))->error;
        if (err == 0) return devs;
        return std::unexpected(ack_error(what, nlh, err));
      }
      RdmaDev dev;
      mnl_attr_parse(nlh, 0, rdma_dev_attr, &dev);
      devs.push_back(std::move(dev));
    }
  }
  return fail(what + ": dump did not end after " + std::to_string(kMaxReplies) + " replies");
}

}  // namespace tb::capability::probe
