#include "probe/goodput.h"

// The kernel's tcp_info (glibc's netinet/tcp.h stops before tcpi_data_segs_out).
#include <linux/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <nlohmann/json.hpp>
#include <vector>

#include "probe/socket.h"

namespace tb::probe {
namespace {

constexpr size_t kChunk = 256 * 1024;
constexpr int kConnectTimeoutMs = 3000;

}  // namespace

Status validate(const GoodputOptions& o) {
  if (o.port == 0) return bad_input("goodput needs --port");
  if (!(o.seconds >= 0.1 && o.seconds <= 300))
    return bad_input("--seconds " + std::to_string(o.seconds) + ": must be 0.1..300");
  if (o.warmup_ms < 0 || o.warmup_ms >= o.seconds * 1000)
    return bad_input("--warmup-ms " + std::to_string(o.warmup_ms) +
                     ": must be at least 0 and shorter than --seconds");
  if (o.buffer > (uint64_t{1} << 30)) return bad_input("--buffer: at most 1 GiB");
  if (o.drain_ms < 100 || o.drain_ms > 120'000)
    return bad_input("--drain-ms " + std::to_string(o.drain_ms) + ": must be 100..120000");
  return {};
}

namespace {

// Sends for o.seconds on the connected `sock`, half-closes and reads the receiver's report.
Result<GoodputResult> measure(int sock, const GoodputOptions& o, const std::string& what) {
  GoodputResult r;
  static const std::vector<uint8_t> chunk(kChunk, 0x5a);
  const int64_t start = now_ns();
  const int64_t stop_at = start + static_cast<int64_t>(o.seconds * 1e9);
  while (now_ns() < stop_at) {
    const ssize_t n = ::send(sock, chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n > 0) {
      r.sent_bytes += static_cast<uint64_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return sys_fail("send to " + what);
    wait_fd(sock, POLLOUT, stop_at);
  }
  r.send_seconds = static_cast<double>(now_ns() - start) / 1e9;
  if (::shutdown(sock, SHUT_WR) != 0) return sys_fail("half-close to " + what);

  std::array<uint8_t, kReportBytes> buf{};
  size_t got = 0;
  const int64_t drain_deadline = now_ns() + int64_t{o.drain_ms} * 1'000'000;
  while (got < buf.size()) {
    const ssize_t n = ::recv(sock, buf.data() + got, buf.size() - got, 0);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return fail("goodput to " + what + ": the receiver closed without a report");
    if (errno != EAGAIN && errno != EINTR) return sys_fail("read report from " + what);
    if (wait_fd(sock, POLLIN, drain_deadline) == 0)
      return fail("goodput to " + what + ": no report within " + std::to_string(o.drain_ms) +
                      " ms of the end of sending (the link drains slower than expected)",
                  ETIMEDOUT);
  }
  auto report = decode_report(buf);
  if (!report) return fail("goodput to " + what + ": the receiver's report is not ours");
  r.receiver = *report;
  r.confirmed = report->bytes == r.sent_bytes;
  const bool window = report->measured_ns > 0 && report->measured_bytes > 0;
  const double bytes = static_cast<double>(window ? report->measured_bytes : report->bytes);
  const double ns = static_cast<double>(window ? report->measured_ns : report->ns);
  r.goodput_bps = ns > 0 ? bytes * 8 / (ns / 1e9) : 0;

  tcp_info ti{};
  socklen_t len = sizeof ti;
  if (::getsockopt(sock, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
    r.mss = static_cast<int>(ti.tcpi_snd_mss);
    r.timestamps = (ti.tcpi_options & TCPI_OPT_TIMESTAMPS) != 0;
    r.retransmits = ti.tcpi_total_retrans;
    r.tcp_rtt_us = ti.tcpi_rtt;
    // Linux 4.6+; an older kernel returns a shorter struct and leaves it 0.
    if (len >= offsetof(tcp_info, tcpi_data_segs_out) + sizeof ti.tcpi_data_segs_out)
      r.data_segs_out = ti.tcpi_data_segs_out;
  }
  r.sndbuf = get_buffer(sock, SO_SNDBUF);
  return r;
}

}  // namespace

Result<GoodputResult> run_goodput(const GoodputOptions& o) {
  TB_TRY(validate(o));
  auto to = ipv4_endpoint(o.to, o.port);
  if (!to) return std::unexpected(to.error());
  const std::string what =
      o.to + ":" + std::to_string(o.port) + (o.dev.empty() ? "" : " via " + o.dev);
  auto fd = open_socket(SOCK_STREAM, o.dev);
  if (!fd) return std::unexpected(fd.error());
  TB_TRY(set_dscp(fd->get(), o.dscp));
  if (o.buffer > 0) {
    auto b = set_buffer(fd->get(), SO_SNDBUF, o.buffer);
    if (!b) return std::unexpected(b.error());
  }
  if (o.pace_bps > 0) {
    // Bytes per second; a 32-bit option before Linux 4.20, so clamp to what it can say.
    const unsigned bytes = static_cast<unsigned>(std::min<uint64_t>(o.pace_bps / 8, ~0u));
    if (::setsockopt(fd->get(), SOL_SOCKET, SO_MAX_PACING_RATE, &bytes, sizeof bytes) != 0)
      return sys_fail("SO_MAX_PACING_RATE " + std::to_string(bytes) + " B/s on " + what);
  }
  TB_TRY(connect_by(fd->get(), *to, what, now_ns() + int64_t{kConnectTimeoutMs} * 1'000'000));
  const auto hello = encode(GoodputHello{static_cast<uint32_t>(o.warmup_ms)});
  TB_TRY(send_all(fd->get(), hello, now_ns() + int64_t{kConnectTimeoutMs} * 1'000'000,
                  "send to " + what));
  auto measured = measure(fd->get(), o, what);
  if (!measured) {
    // Nothing of a failed run may outlive it: a plain close would leave the kernel sending the
    // rest of a send buffer of up to 2 x BDP (megabytes on a fast, lossy link) for seconds,
    // into whatever is measured next. Linger 0 makes close() reset the connection and drop it.
    linger abort{1, 0};
    ::setsockopt(fd->get(), SOL_SOCKET, SO_LINGER, &abort, sizeof abort);
  }
  return measured;
}

nlohmann::json to_json(const GoodputOptions& o, const GoodputResult& r) {
  return {{"mode", "goodput"},
          {"to", o.to},
          {"port", o.port},
          {"dev", o.dev},
          {"seconds_requested", o.seconds},
          {"warmup_ms", o.warmup_ms},
          {"buffer_requested", o.buffer},
          {"pace_bps", o.pace_bps},
          {"sndbuf", r.sndbuf},
          {"sent_bytes", r.sent_bytes},
          {"send_seconds", r.send_seconds},
          {"receiver",
           {{"bytes", r.receiver.bytes},
            {"seconds", static_cast<double>(r.receiver.ns) / 1e9},
            {"measured_bytes", r.receiver.measured_bytes},
            {"measured_seconds", static_cast<double>(r.receiver.measured_ns) / 1e9}}},
          {"confirmed", r.confirmed},
          {"goodput_bps", r.goodput_bps},
          {"mss", r.mss},
          {"timestamps", r.timestamps},
          {"retransmits", r.retransmits},
          {"data_segs_out", r.data_segs_out},
          {"tcp_rtt_us", r.tcp_rtt_us}};
}

Result<GoodputResult> goodput_from_json(const nlohmann::json& j) {
  try {
    GoodputResult r;
    r.sent_bytes = j.at("sent_bytes");
    r.send_seconds = j.at("send_seconds");
    const auto& rx = j.at("receiver");
    r.receiver.bytes = rx.at("bytes");
    r.receiver.ns = static_cast<uint64_t>(rx.at("seconds").get<double>() * 1e9);
    r.receiver.measured_bytes = rx.at("measured_bytes");
    r.receiver.measured_ns = static_cast<uint64_t>(rx.at("measured_seconds").get<double>() * 1e9);
    r.confirmed = j.at("confirmed");
    r.goodput_bps = j.at("goodput_bps");
    r.mss = j.value("mss", 0);
    r.timestamps = j.value("timestamps", false);
    r.retransmits = j.value("retransmits", 0u);
    r.data_segs_out = j.value("data_segs_out", uint64_t{0});
    r.tcp_rtt_us = j.value("tcp_rtt_us", 0.0);
    r.sndbuf = j.value("sndbuf", 0);
    return r;
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("malformed goodput result: ") + e.what());
  }
}

}  // namespace tb::probe
