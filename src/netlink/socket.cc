#include "netlink/socket.h"

#include <libmnl/libmnl.h>
#include <linux/sockios.h>
#include <netlink/netlink.h>
// libnl's netlink/socket.h by its full path: "netlink/socket.h" is this room's own header.
#include <libnl3/netlink/socket.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <atomic>
#include <vector>

#include "netlink/ack.h"
#include "netlink/netns.h"

namespace tb::netlink {
namespace {

std::atomic<uint32_t> g_seq{1};

uint32_t next_seq() {
  uint32_t s = g_seq.fetch_add(1, std::memory_order_relaxed);
  return s == 0 ? g_seq.fetch_add(1, std::memory_order_relaxed) : s;
}

// Big enough for any datagram the kernel sends us: a dump skb is at most 32 KiB
// (net/netlink/af_netlink.c netlink_dump: max_recvmsg_len capped at 32768).
constexpr size_t kRecvBuf = 64 * 1024;

}  // namespace

Result<NlSocket> NlSocket::open(int bus) {
  UniqueFd fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, bus));
  if (!fd)
    return sys_fail(bus == NETLINK_RDMA ? "open RDMA netlink socket (NETLINK_RDMA)"
                                        : "open netlink socket");
  int one = 1;
  // Extended ack text, and acks without a copy of the request (include/uapi/linux/netlink.h).
  if (setsockopt(fd.get(), SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one)) < 0)
    return sys_fail("set NETLINK_EXT_ACK");
  if (setsockopt(fd.get(), SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one)) < 0)
    return sys_fail("set NETLINK_CAP_ACK");
  int rcv = kRcvBuf;
  // SO_RCVBUFFORCE passes net.core.rmem_max when we have CAP_NET_ADMIN.
  if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) < 0 &&
      setsockopt(fd.get(), SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv)) < 0)
    return sys_fail("set netlink SO_RCVBUF");
  timeval tv{};
  tv.tv_sec = kTimeout.count();
  if (setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
    return sys_fail("set netlink SO_RCVTIMEO");
  sockaddr_nl sa{};
  sa.nl_family = AF_NETLINK;
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) < 0)
    return sys_fail("bind netlink socket");
  return NlSocket(std::move(fd));
}

Result<NlSocket> NlSocket::open_in(int netns_fd, int bus) {
  auto sw = ScopedNetns::enter(netns_fd);
  if (!sw) return std::unexpected(sw.error());
  return open(bus);
}

Result<uint32_t> NlSocket::transmit(NlMsg& msg, uint16_t extra_flags, const std::string& what) {
  TB_CHECK(fd_.valid());
  nlmsghdr* h = msg.header();
  TB_CHECK(h->nlmsg_len == msg.bytes.size());
  h->nlmsg_flags |= extra_flags;
  h->nlmsg_seq = next_seq();
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t n;
  do {
    n = ::sendto(fd_.get(), msg.bytes.data(), msg.bytes.size(), 0,
                 reinterpret_cast<sockaddr*>(&kernel), sizeof(kernel));
  } while (n < 0 && errno == EINTR);
  if (n < 0) return sys_fail(what + ": send netlink request");
  return h->nlmsg_seq;
}

Status NlSocket::receive(const std::function<void(const nlmsghdr*)>& each) {
  thread_local std::vector<uint8_t> buf(kRecvBuf);
  ssize_t n;
  iovec iov{buf.data(), buf.size()};
  msghdr mh{};
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  do {
    n = ::recvmsg(fd_.get(), &mh, 0);
  } while (n < 0 && errno == EINTR);
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return fail("no netlink answer within " + std::to_string(kTimeout.count()) + " s", ETIMEDOUT);
  if (n < 0) return sys_fail("receive netlink answer");
  if (mh.msg_flags & MSG_TRUNC) return fail("netlink answer truncated", EMSGSIZE);
  int len = static_cast<int>(n);
  for (auto* nlh = reinterpret_cast<const nlmsghdr*>(buf.data()); mnl_nlmsg_ok(nlh, len);
       nlh = mnl_nlmsg_next(nlh, &len)) {
    each(nlh);
  }
  return {};
}

void NlSocket::record(AckError e) {
  if (!first_error_ || e.seq < first_error_->seq) first_error_ = std::move(e);
}

bool NlSocket::on_pipelined(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != NLMSG_ERROR) return false;
  Ack ack = parse_ack(nlh);
  // Acks come back in request order, so the match is almost always the front.
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->seq != ack.seq) continue;
    if (ack.error != 0) record(AckError{ack.seq, ack_error(it->what, ack)});
    pending_.erase(it);
    return true;
  }
  return false;
}

Status NlSocket::send(NlMsg msg, std::string what) {
  auto seq = transmit(msg, NLM_F_ACK, what);
  if (!seq) return std::unexpected(seq.error());
  pending_.push_back(Pending{*seq, std::move(what)});
  if (pending_.size() >= kMaxOutstanding) return drain();
  return {};
}

std::optional<AckError> NlSocket::collect() {
  while (!pending_.empty()) {
    auto r = receive([this](const nlmsghdr* nlh) { on_pipelined(nlh); });
    if (!r) {
      // The socket lost track of its acks; every pending request is in doubt.
      Error e =
          with_context(r.error(), "wait for acks of " + std::to_string(pending_.size()) +
                                      " netlink requests (first: " + pending_.front().what + ")");
      pending_.clear();
      record(AckError{0, std::move(e)});
    }
  }
  return std::exchange(first_error_, std::nullopt);
}

Status NlSocket::drain() {
  if (auto e = collect()) return std::unexpected(std::move(e->error));
  return {};
}

Status NlSocket::call(NlMsg msg, const std::string& what, const ReplyFn& on_reply) {
  auto seq = transmit(msg, NLM_F_ACK, what);
  if (!seq) return std::unexpected(seq.error());
  std::optional<Ack> mine;
  while (!mine) {
    TB_TRY(receive([&](const nlmsghdr* nlh) {
      if (nlh->nlmsg_seq != *seq) {
        on_pipelined(nlh);
      } else if (nlh->nlmsg_type == NLMSG_ERROR) {
        mine = parse_ack(nlh);
      } else if (on_reply) {
        on_reply(nlh);
      }
    }));
  }
  if (mine->error != 0) return std::unexpected(ack_error(what, *mine));
  return {};
}

Status NlSocket::dump(NlMsg msg, const std::string& what, const ReplyFn& on_reply) {
  auto seq = transmit(msg, 0, what);
  if (!seq) return std::unexpected(seq.error());
  bool done = false, interrupted = false;
  std::optional<Ack> failed;
  while (!done) {
    TB_TRY(receive([&](const nlmsghdr* nlh) {
      if (nlh->nlmsg_seq != *seq) {
        on_pipelined(nlh);
        return;
      }
      if (done) return;
      if (nlh->nlmsg_flags & NLM_F_DUMP_INTR) interrupted = true;
      if (nlh->nlmsg_type == NLMSG_DONE || nlh->nlmsg_type == NLMSG_ERROR) {
        done = true;
        Ack ack = parse_ack(nlh);
        if (ack.error != 0) failed = ack;
      } else {
        on_reply(nlh);
      }
    }));
  }
  if (failed) return std::unexpected(ack_error(what, *failed));
  if (interrupted) return fail(what + ": dump interrupted by a concurrent change", EAGAIN);
  return {};
}

Status NlSocket::transact(std::vector<uint8_t> batch, const std::vector<std::string>& what) {
  TB_CHECK(fd_.valid() && pending_.empty() && !first_error_);
  // Number the messages and ask for an ack of each one between begin and end. Not of begin and
  // end themselves: kernels before 6.10 never ack those (nfnetlink_rcv_batch; "netfilter:
  // nfnetlink: Handle ACK flags for batch messages"), later ones only when asked.
  std::vector<uint32_t> seqs;
  int len = static_cast<int>(batch.size());
  for (auto* nlh = reinterpret_cast<nlmsghdr*>(batch.data()); mnl_nlmsg_ok(nlh, len);
       nlh = mnl_nlmsg_next(nlh, &len)) {
    nlh->nlmsg_seq = next_seq();
    if (!seqs.empty() && seqs.size() + 1 < what.size()) nlh->nlmsg_flags |= NLM_F_ACK;
    seqs.push_back(nlh->nlmsg_seq);
  }
  TB_CHECK(len == 0 && seqs.size() >= 2 && seqs.size() == what.size());
  // netlink_sendmsg refuses a message longer than the send buffer (EMSGSIZE); a batch is one.
  if (batch.size() > 128 * 1024) {
    int snd = static_cast<int>(batch.size()) + 4096;
    if (setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUFFORCE, &snd, sizeof(snd)) < 0 &&
        setsockopt(fd_.get(), SOL_SOCKET, SO_SNDBUF, &snd, sizeof(snd)) < 0)
      return sys_fail("set netlink SO_SNDBUF for a " + std::to_string(batch.size()) +
                      "-byte batch");
  }
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  ssize_t n;
  do {
    n = ::sendto(fd_.get(), batch.data(), batch.size(), 0, reinterpret_cast<sockaddr*>(&kernel),
                 sizeof(kernel));
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return sys_fail(what.front() + " (" + std::to_string(batch.size()) +
                    " bytes): send netlink batch");
  // The kernel has run the whole batch inside sendmsg; its acks are queued in order.
  size_t acked = 0;
  std::optional<std::pair<size_t, Ack>> failed;  // the earliest failing message
  bool commit_failed = false;
  while (acked + 2 < seqs.size() && !commit_failed) {
    auto r = receive([&](const nlmsghdr* nlh) {
      if (nlh->nlmsg_type != NLMSG_ERROR) return;
      Ack ack = parse_ack(nlh);
      auto it = std::find(seqs.begin(), seqs.end(), ack.seq);
      if (it == seqs.end()) return;
      const auto i = static_cast<size_t>(it - seqs.begin());
      if (i == 0 || i + 1 == seqs.size()) {
        if (ack.error != 0) commit_failed = true;  // the batch as a whole, inner acks or not
      } else {
        ++acked;
      }
      if (ack.error != 0 && (!failed || i < failed->first)) failed.emplace(i, std::move(ack));
    });
    if (!r)
      return std::unexpected(
          with_context(r.error(), "wait for the acks of " + std::to_string(seqs.size() - 2) +
                                      " nf_tables messages (" + std::to_string(acked) + " came)"));
  }
  if (failed) return std::unexpected(ack_error(what[failed->first], failed->second));
  return {};
}

void NlSocket::LibnlFree::operator()(::nl_sock* s) const {
  nl_socket_free(s);  // closes its descriptor
}

Result<::nl_sock*> NlSocket::libnl_socket() {
  if (libnl_) return libnl_.get();
  TB_CHECK(fd_.valid());
  // The namespace this socket was opened in (net/socket.c sock_ioctl SIOCGSKNS, Linux 4.9).
  UniqueFd ns(::ioctl(fd_.get(), SIOCGSKNS));
  if (!ns) return sys_fail("find the namespace of a netlink socket (SIOCGSKNS)");
  std::unique_ptr<::nl_sock, LibnlFree> sk(nl_socket_alloc());
  if (!sk) return fail("allocate a libnl socket", ENOMEM);
  {
    auto in = ScopedNetns::enter(ns.get());
    if (!in) return std::unexpected(in.error());
    if (int err = nl_connect(sk.get(), NETLINK_ROUTE); err < 0)
      return fail(std::string("open libnl socket: ") + nl_geterror(err), EIO);
  }
  // Dump datagrams are up to 32 KiB: peek at each to size the buffer; never wait forever.
  nl_socket_enable_msg_peek(sk.get());
  timeval tv{};
  tv.tv_sec = kTimeout.count();
  if (setsockopt(nl_socket_get_fd(sk.get()), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0)
    return sys_fail("set libnl socket SO_RCVTIMEO");
  libnl_ = std::move(sk);
  return libnl_.get();
}

}  // namespace tb::netlink
