#include "probe/rtt.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>

#include "probe/packet.h"
#include "probe/socket.h"

namespace tb::probe {

Status validate(const RttOptions& o) {
  if (o.port == 0) return bad_input("rtt needs --port");
  if (o.count < 1 || o.count > kMaxProbeCount)
    return bad_input("--count " + std::to_string(o.count) + ": must be 1.." +
                     std::to_string(kMaxProbeCount));
  if (o.interval_us < 10 || o.interval_us > 10'000'000)
    return bad_input("--interval-us " + std::to_string(o.interval_us) + ": must be 10..10000000");
  if (o.wait_ms < 0 || o.wait_ms > 60'000)
    return bad_input("--wait-ms " + std::to_string(o.wait_ms) + ": must be 0..60000");
  if (o.warmup_ms < 0 || o.warmup_ms > kMaxWarmupMs)
    return bad_input("--warmup-ms " + std::to_string(o.warmup_ms) + ": must be 0.." +
                     std::to_string(kMaxWarmupMs));
  const int64_t total_ms = int64_t{o.count} * o.interval_us / 1000 + o.wait_ms + o.warmup_ms;
  if (total_ms > kMaxRunSeconds * 1000)
    return bad_input("count x interval + wait is " + std::to_string(total_ms / 1000) +
                     " s; a probe run is bounded to " + std::to_string(kMaxRunSeconds) + " s");
  return {};
}

Result<RttResult> run_rtt(const RttOptions& o) {
  TB_TRY(validate(o));
  auto to = ipv4_endpoint(o.to, o.port);
  if (!to) return std::unexpected(to.error());
  const std::string what =
      o.to + ":" + std::to_string(o.port) + (o.dev.empty() ? "" : " via " + o.dev);
  auto fd = open_socket(SOCK_DGRAM, o.dev);
  if (!fd) return std::unexpected(fd.error());
  TB_TRY(set_dscp(fd->get(), o.dscp));
  // Connected: the kernel drops datagrams from anyone else and reports ICMP errors to us.
  if (::connect(fd->get(), reinterpret_cast<const sockaddr*>(&*to), sizeof *to) != 0)
    return sys_fail("rtt to " + what);
  ::prctl(PR_SET_TIMERSLACK, 1UL);  // wake on time: the default 50 us slack would blur RTTs
  uint64_t session = 0;
  if (::getrandom(&session, sizeof session, 0) != sizeof session) session = now_ns();

  RttResult r;
  uint8_t buf[2048];
  // Warm-up: its own session, so a late answer is neither timed nor a stray.
  const uint64_t warm = session + 1;
  if (o.warmup_ms > 0) {
    const int64_t warm_end = now_ns() + int64_t{o.warmup_ms} * 1'000'000;
    int64_t next_warm = now_ns();
    while (!r.warmup_answered) {
      const int64_t now = now_ns();
      if (now >= warm_end) break;
      if (now >= next_warm) {
        const auto pkt = encode(ProbePacket{warm, static_cast<uint64_t>(r.warmup_sent), now});
        ::send(fd->get(), pkt.data(), pkt.size(), 0);  // an error here is the timed probes' to say
        ++r.warmup_sent;
        next_warm = now + int64_t{kWarmupIntervalMs} * 1'000'000;
        continue;
      }
      if (wait_fd(fd->get(), POLLIN, std::min(next_warm, warm_end)) == 0) continue;
      for (;;) {
        const ssize_t n = ::recv(fd->get(), buf, sizeof buf, MSG_DONTWAIT);
        if (n < 0) {
          if (errno == EAGAIN || errno == EINTR) break;
          continue;  // an ICMP error: the server may not be up yet
        }
        auto p = decode_probe({buf, static_cast<size_t>(n)});
        if (p && p->session == warm) r.warmup_answered = true;
      }
    }
  }
  std::vector<int64_t> sent_at(o.count, 0), rtt_ns(o.count, -1);
  const int64_t interval = int64_t{o.interval_us} * 1000;
  const int64_t start = now_ns();
  int64_t next = start, end = 0;
  for (;;) {
    int64_t now = now_ns();
    if (r.sent < o.count && now >= next) {
      const auto pkt = encode(ProbePacket{session, static_cast<uint64_t>(r.sent), now});
      sent_at[r.sent] = now;
      if (::send(fd->get(), pkt.data(), pkt.size(), 0) < 0) {
        if (r.send_errors++ == 0) r.first_error = std::strerror(errno);
      }
      ++r.sent;
      next = start + interval * r.sent;
      if (next < now - interval) next = now;  // a long stall: skip ahead rather than burst
      if (r.sent == o.count) end = now + int64_t{o.wait_ms} * 1'000'000;
      continue;
    }
    if (r.sent == o.count && (r.received == o.count || now >= end)) break;
    if (wait_fd(fd->get(), POLLIN, r.sent < o.count ? next : end) == 0) continue;
    for (;;) {
      const ssize_t n = ::recv(fd->get(), buf, sizeof buf, MSG_DONTWAIT);
      const int64_t t = now_ns();
      if (n < 0) {
        if (errno == EAGAIN || errno == EINTR) break;
        if (r.send_errors++ == 0) r.first_error = std::strerror(errno);  // ICMP error
        continue;
      }
      auto p = decode_probe({buf, static_cast<size_t>(n)});
      if (p && p->session == warm && o.warmup_ms > 0) continue;  // a late warm-up answer
      if (!p || p->session != session || p->seq >= static_cast<uint64_t>(r.sent)) {
        ++r.strays;
        continue;
      }
      if (rtt_ns[p->seq] >= 0) {
        ++r.duplicates;
        continue;
      }
      rtt_ns[p->seq] = t - sent_at[p->seq];
      ++r.received;
    }
  }
  r.seconds = static_cast<double>(now_ns() - start) / 1e9;
  for (int64_t v : rtt_ns)
    if (v >= 0) r.rtt_us.push_back(static_cast<double>(v) / 1e3);
  r.start_ns = start;
  for (int i = 0; i < r.sent;) {
    if (rtt_ns[i] >= 0) {
      ++i;
      continue;
    }
    int j = i;
    while (j < r.sent && rtt_ns[j] < 0) ++j;
    r.outages_ns.emplace_back(sent_at[i], j < r.sent ? sent_at[j] : sent_at[r.sent - 1] + interval);
    i = j;
  }
  r.summary = summarize(r.rtt_us);
  return r;
}

nlohmann::json to_json(const RttOptions& o, const RttResult& r) {
  nlohmann::json j = {{"mode", "rtt"},
                      {"to", o.to},
                      {"port", o.port},
                      {"dev", o.dev},
                      {"count", o.count},
                      {"interval_us", o.interval_us},
                      {"wait_ms", o.wait_ms},
                      {"payload_bytes", kProbeBytes},
                      {"sent", r.sent},
                      {"received", r.received},
                      {"lost", r.sent - r.received},
                      {"duplicates", r.duplicates},
                      {"strays", r.strays},
                      {"send_errors", r.send_errors},
                      {"seconds", r.seconds},
                      {"rtt_us", to_json(r.summary)}};
  if (!r.first_error.empty()) j["first_error"] = r.first_error;
  if (o.warmup_ms > 0)
    j["warmup"] = {{"ms", o.warmup_ms}, {"sent", r.warmup_sent}, {"answered", r.warmup_answered}};
  if (o.samples) {
    j["samples_us"] = r.rtt_us;
    j["start_ns"] = r.start_ns;
    nlohmann::json out = nlohmann::json::array();
    for (auto [a, b] : r.outages_ns) out.push_back({a, b});
    j["outages_ns"] = out;
  }
  return j;
}

Result<RttResult> rtt_from_json(const nlohmann::json& j) {
  try {
    RttResult r;
    r.sent = j.at("sent");
    r.received = j.at("received");
    r.duplicates = j.value("duplicates", 0);
    r.strays = j.value("strays", 0);
    r.send_errors = j.value("send_errors", 0);
    r.first_error = j.value("first_error", "");
    if (j.contains("warmup")) {
      r.warmup_sent = j["warmup"].value("sent", 0);
      r.warmup_answered = j["warmup"].value("answered", false);
    }
    r.seconds = j.value("seconds", 0.0);
    if (j.contains("samples_us")) r.rtt_us = j["samples_us"].get<std::vector<double>>();
    r.start_ns = j.value("start_ns", int64_t{0});
    if (j.contains("outages_ns"))
      for (const auto& o : j["outages_ns"]) r.outages_ns.emplace_back(o[0], o[1]);
    r.summary = summary_from_json(j.at("rtt_us"));
    return r;
  } catch (const nlohmann::json::exception& e) {
    return fail(std::string("malformed rtt result: ") + e.what());
  }
}

}  // namespace tb::probe
