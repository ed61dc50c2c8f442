// NlSocket: one owning netlink socket (NETLINK_ROUTE; NETLINK_RDMA for Soft-RoCE links, whose
// messages follow the same request/ack/dump rules; NETLINK_NETFILTER for nf_tables batches,
// transact()), with pipelined requests and their acks.
//
// A netlink socket stays bound to the network namespace it was opened in, whatever the thread
// does afterwards, so one NlSocket per namespace lets a single thread configure many
// namespaces without setns (open it inside with ScopedNetns, netlink/netns.h).
//
// Every request goes through here, which adds NLM_F_ACK and a sequence number (process-wide
// counter, so sequence order is submission order across sockets). send() does not wait:
// the kernel handles an rtnetlink request inside sendmsg(), so later requests, on any socket,
// already see its effect; only the ack is read later. At most kMaxOutstanding acks are left
// unread so the receive buffer (raised to kRcvBuf) never overflows. A failed ack becomes
// "<what>: <strerror> (kernel: <extended ack>)" with `what` given at send().
//
// Move-only; not thread-safe (one thread drives a socket). Every wait has a timeout (kTimeout).
#pragma once

#include <linux/netlink.h>

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "netlink/message.h"

struct nl_sock;  // libnl-3's socket (netlink/dump.cc reads dumps through libnl-route)

namespace tb::netlink {

// A failed acknowledgement and the sequence number of the request it answers.
struct AckError {
  uint32_t seq = 0;  // 0 for a transport failure (which outranks any request's failure)
  Error error;
};

class NlSocket {
 public:
  static constexpr size_t kMaxOutstanding = 256;
  static constexpr int kRcvBuf = 4 << 20;
  static constexpr std::chrono::seconds kTimeout{10};

  using ReplyFn = std::function<void(const nlmsghdr*)>;

  // A socket in the calling thread's current network namespace.
  static Result<NlSocket> open(int bus = NETLINK_ROUTE);
  // A socket in the namespace behind `netns_fd`: the thread enters it, opens, and comes back.
  static Result<NlSocket> open_in(int netns_fd, int bus = NETLINK_ROUTE);

  NlSocket() = default;
  NlSocket(NlSocket&&) = default;
  NlSocket& operator=(NlSocket&&) = default;

  bool valid() const { return fd_.valid(); }
  size_t outstanding() const { return pending_.size(); }

  // Pipelined request. A failure that comes back is reported by a later send() (once
  // kMaxOutstanding are in flight), collect(), drain(), call() or dump().
  Status send(NlMsg msg, std::string what);
  // Reads every outstanding ack; returns the earliest-sent failure among them (or an earlier
  // one seen by call()/dump()) and forgets it.
  std::optional<AckError> collect();
  Status drain();

  // Synchronous request: waits for its own ack; replies before it (a get) go to on_reply.
  // Acks of pipelined requests read meanwhile are booked; their failure waits for collect().
  Status call(NlMsg msg, const std::string& what, const ReplyFn& on_reply = {});
  // Dump request (NLM_F_DUMP): every message up to NLMSG_DONE goes to on_reply. An interrupted
  // dump (NLM_F_DUMP_INTR, the table changed meanwhile) fails with EAGAIN; the caller retries.
  Status dump(NlMsg msg, const std::string& what, const ReplyFn& on_reply);

  // One nfnetlink batch (NFNL_MSG_BATCH_BEGIN ... NFNL_MSG_BATCH_END, netlink/nft_message.h)
  // in one sendmsg, which the kernel applies as one transaction, all or nothing. Each message
  // gets a sequence number of ours, and each between begin and end NLM_F_ACK; `what[i]` names
  // the i-th message (begin included) in an error. Waits (kTimeout) for the ack of every one of
  // them; a failure is the first failing message's, or the commit's (acked on the begin
  // message). Only on a socket with nothing outstanding (the bus NETLINK_NETFILTER).
  Status transact(std::vector<uint8_t> batch, const std::vector<std::string>& what);

  // A libnl-3 NETLINK_ROUTE socket in this socket's network namespace, for the dumps that
  // libnl-route's caches parse (netlink/dump.h). Opened on first use inside that namespace
  // (SIOCGSKNS gives it; the thread enters and comes back) and kept while this socket lives. A
  // socket of its own, so libnl's sequence checks never meet this one's pipelined acks.
  Result<::nl_sock*> libnl_socket();

 private:
  struct LibnlFree {
    void operator()(::nl_sock* s) const;
  };
  struct Pending {
    uint32_t seq;
    std::string what;
  };

  explicit NlSocket(UniqueFd fd) : fd_(std::move(fd)) {}
  Result<uint32_t> transmit(NlMsg& msg, uint16_t extra_flags, const std::string& what);
  // Receives one datagram and passes each message in it to `each`.
  Status receive(const std::function<void(const nlmsghdr*)>& each);
  // Books an ack for a pipelined request; false if `nlh` answers none of them.
  bool on_pipelined(const nlmsghdr* nlh);
  void record(AckError e);

  UniqueFd fd_;
  std::deque<Pending> pending_;
  std::optional<AckError> first_error_;
  std::unique_ptr<::nl_sock, LibnlFree> libnl_;
};

}  // namespace tb::netlink
