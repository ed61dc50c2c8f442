// Socket set-up shared by tb-probe's modes: IPv4 addresses, binding to one interface
// (SO_BINDTODEVICE, so a probe takes exactly that link even where routes offer several),
// socket buffers, and polling with a deadline on the monotonic clock.
// Each function acts on the descriptor it is given; thread-safe.
#pragma once

#include <netinet/in.h>

#include <cstdint>
#include <span>
#include <string>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::probe {

int64_t now_ns();  // CLOCK_MONOTONIC

// CS6, network control (RFC 4594): what the failover agent's hellos carry, as FRR's BGP and BFD
// sessions do (IPTOS_PREC_INTERNETCONTROL), so a WAN link's QoS classes ([qos] gold) put them
// ahead of bulk traffic.
inline constexpr int kControlDscp = 48;

// Marks what `fd` sends with DSCP `dscp` (0..63): IP_TOS = dscp << 2, ECN bits left 0. A TCP
// socket's ACKs and a UDP socket's datagrams both carry it.
Status set_dscp(int fd, int dscp);

Result<sockaddr_in> ipv4_endpoint(const std::string& addr, uint16_t port);

// SOCK_CLOEXEC | SOCK_NONBLOCK socket of `type` (SOCK_DGRAM / SOCK_STREAM), bound to `dev`
// when it is not empty.
Result<UniqueFd> open_socket(int type, const std::string& dev);

// Sets SO_SNDBUF or SO_RCVBUF (`which`) to `bytes`. Tries the FORCE variant first: with
// CAP_NET_ADMIN it ignores net.core.wmem_max/rmem_max (net/core/sock.c sk_setsockopt);
// without, the plain option (capped by those maxima). Returns what the kernel then reports
// (the kernel doubles the value for its bookkeeping, see socket(7)).
Result<int> set_buffer(int fd, int which, uint64_t bytes);
int get_buffer(int fd, int which);

// Waits for `events` on fd until `deadline_ns`; 0 when the deadline passed, else revents.
// Restarts after EINTR.
int wait_fd(int fd, short events, int64_t deadline_ns);

// Writes all of `data` to a non-blocking socket before `deadline_ns` (MSG_NOSIGNAL); errors are
// "WHAT: <errno text>" or "WHAT: timed out".
Status send_all(int fd, std::span<const uint8_t> data, int64_t deadline_ns,
                const std::string& what);

// Non-blocking connect with a deadline; the error names the target and the device.
Status connect_by(int fd, const sockaddr_in& to, const std::string& what, int64_t deadline_ns);

}  // namespace tb::probe
