#include "probe/checkpoint.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "core/safe_file.h"
#include "probe/socket.h"

namespace tb::probe {
namespace {

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr int kCheckpointConnectTimeoutMs = 5000;
constexpr int kIdleTimeoutMs = 60'000;  // a receiver's connection that moves nothing this long
constexpr size_t kMaxStreams = 64;

// Reads exactly out.size() bytes before the deadline; false on EOF, error or timeout.
Status recv_all(int fd, std::span<uint8_t> out, int64_t deadline_ns, const std::string& what) {
  size_t got = 0;
  while (got < out.size()) {
    const ssize_t n = ::recv(fd, out.data() + got, out.size() - got, MSG_DONTWAIT);
    if (n > 0) {
      got += static_cast<size_t>(n);
      continue;
    }
    if (n == 0) return fail(what + ": connection closed after " + std::to_string(got) + " bytes");
    if (errno != EAGAIN && errno != EINTR) return sys_fail(what);
    if (wait_fd(fd, POLLIN, deadline_ns) == 0) return fail(what + ": timed out");
  }
  return {};
}

template <class T>
std::span<const uint8_t> bytes_of(const T& v) {
  return {reinterpret_cast<const uint8_t*>(&v), sizeof v};
}
template <class T>
std::span<uint8_t> bytes_of(T& v) {
  return {reinterpret_cast<uint8_t*>(&v), sizeof v};
}

Result<UniqueFd> connect_to(const CkptSendOptions& o, int64_t deadline_ns) {
  auto to = ipv4_endpoint(o.to, o.port);
  if (!to) return std::unexpected(to.error());
  auto fd = open_socket(SOCK_STREAM, "");
  if (!fd) return std::unexpected(fd.error());
  TB_TRY(set_dscp(fd->get(), o.dscp));
  TB_TRY(connect_by(
      fd->get(), *to, "checkpoint receiver " + o.to + ":" + std::to_string(o.port),
      std::min(deadline_ns, now_ns() + int64_t{kCheckpointConnectTimeoutMs} * 1'000'000)));
  return fd;
}

}  // namespace

std::string_view to_string(CkptMode m) {
  switch (m) {
    case CkptMode::kFull:
      return "full";
    case CkptMode::kIncremental:
      return "incremental";
    case CkptMode::kLayered:
      return "layered";
  }
  return "?";
}

Result<CkptMode> parse_ckpt_mode(std::string_view s) {
  for (auto m : {CkptMode::kFull, CkptMode::kIncremental, CkptMode::kLayered})
    if (to_string(m) == s) return m;
  return bad_input("checkpoint mode \"" + std::string(s) +
                   "\" is unknown; use full, incremental or layered");
}

uint64_t block_count(const CkptShard& s) {
  return s.block == 0 ? 0 : (s.bytes + s.block - 1) / s.block;
}

uint32_t block_len(const CkptShard& s, uint64_t b) {
  const uint64_t start = b * s.block;
  return static_cast<uint32_t>(std::min<uint64_t>(s.block, s.bytes - start));
}

std::vector<uint64_t> changed_blocks(const CkptShard& s, double fraction, int rep) {
  const uint64_t n = block_count(s);
  if (rep <= 0 || n == 0) return {};
  const uint64_t k = std::clamp<uint64_t>(
      static_cast<uint64_t>(std::llround(std::clamp(fraction, 0.0, 1.0) * static_cast<double>(n))),
      1, n);
  // A partial Fisher-Yates shuffle driven by (seed, rep): k distinct blocks.
  std::vector<uint64_t> idx(n);
  for (uint64_t i = 0; i < n; ++i) idx[i] = i;
  uint64_t state = splitmix64(s.seed ^ (static_cast<uint64_t>(rep) * 0x632be59bd9b4e019ull));
  for (uint64_t i = 0; i < k; ++i) {
    state = splitmix64(state);
    const uint64_t j = i + state % (n - i);
    std::swap(idx[i], idx[j]);
  }
  idx.resize(k);
  std::sort(idx.begin(), idx.end());
  return idx;
}

std::vector<uint32_t> versions_at(const CkptShard& s, double fraction, int rep) {
  std::vector<uint32_t> v(block_count(s), 0);
  for (int r = 1; r <= rep; ++r)
    for (uint64_t b : changed_blocks(s, fraction, r)) ++v[b];
  return v;
}

bool sends_full(CkptMode m, int rep, int full_every) {
  if (rep <= 0 || m == CkptMode::kFull) return true;
  if (m == CkptMode::kLayered) return full_every > 0 && rep % full_every == 0;
  return false;
}

std::vector<uint64_t> blocks_to_send(const CkptShard& s, CkptMode m, double fraction,
                                     int full_every, int rep) {
  if (!sends_full(m, rep, full_every)) return changed_blocks(s, fraction, rep);
  std::vector<uint64_t> all(block_count(s));
  for (uint64_t i = 0; i < all.size(); ++i) all[i] = i;
  return all;
}

void fill_block(const CkptShard& s, uint64_t b, uint32_t v, std::span<uint8_t> out) {
  const uint64_t base = splitmix64(s.seed ^ splitmix64(b * 0x9e3779b97f4a7c15ull + v));
  size_t i = 0;
  for (uint64_t w = 0; i < out.size(); ++w) {
    const uint64_t x = splitmix64(base + w);
    const size_t n = std::min<size_t>(8, out.size() - i);
    std::memcpy(out.data() + i, &x, n);
    i += n;
  }
}

void Checksum::add(std::span<const uint8_t> bytes) {
  uint64_t h = h_;
  for (uint8_t c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  h_ = h;
}

uint64_t shard_checksum(const CkptShard& s, const std::vector<uint32_t>& v) {
  Checksum c;
  std::vector<uint8_t> buf(s.block);
  for (uint64_t b = 0; b < block_count(s); ++b) {
    std::span<uint8_t> out(buf.data(), block_len(s, b));
    fill_block(s, b, v[b], out);
    c.add(out);
  }
  return c.value();
}

Status validate(const CkptSendOptions& o) {
  if (o.port == 0) return bad_input("ckpt-send needs --port");
  if (o.data.bytes == 0) return bad_input("--bytes must be greater than 0");
  if (o.data.block < 512 || o.data.block > (64u << 20))
    return bad_input("--block " + std::to_string(o.data.block) + ": must be 512..64M");
  if (!(o.changed > 0 && o.changed <= 1)) return bad_input("--changed must be in (0, 1]");
  if (o.full_every < 2) return bad_input("--full-every must be at least 2");
  if (o.rep < 0) return bad_input("--rep must be at least 0");
  if (o.streams < 1 || o.streams > static_cast<int>(kMaxStreams))
    return bad_input("--streams must be 1..64");
  if (o.dscp < 0 || o.dscp > 63) return bad_input("--dscp must be 0..63");
  if (o.timeout_ms < 100) return bad_input("--timeout-ms must be at least 100");
  return {};
}

Result<CkptSendResult> run_ckpt_send(const CkptSendOptions& o) {
  TB_TRY(validate(o));
  CkptSendResult r;
  const CkptShard& s = o.data;
  const std::vector<uint32_t> v = versions_at(s, o.changed, o.rep);
  const std::vector<uint64_t> send = blocks_to_send(s, o.mode, o.changed, o.full_every, o.rep);
  r.full = sends_full(o.mode, o.rep, o.full_every);
  r.blocks = send.size();
  r.checksum = shard_checksum(s, v);
  const size_t streams =
      std::min<size_t>(static_cast<size_t>(o.streams), std::max<size_t>(1, send.size()));
  const int64_t start = now_ns();
  const int64_t deadline = start + int64_t{o.timeout_ms} * 1'000'000;
  // Contiguous parts, one per stream, on threads of their own.
  std::vector<Status> status(streams);
  std::vector<uint64_t> payload(streams, 0), wire(streams, 0);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < streams; ++k)
    threads.emplace_back([&, k] {
      const size_t a = send.size() * k / streams, b = send.size() * (k + 1) / streams;
      const std::string what = "checkpoint shard " + std::to_string(o.shard) + " stream " +
                               std::to_string(k) + " to " + o.to;
      auto fd = connect_to(o, deadline);
      if (!fd) {
        status[k] = std::unexpected(fd.error());
        return;
      }
      WireHeader h;
      h.kind = static_cast<uint32_t>(CkptKind::kData);
      h.shard = o.shard;
      h.rep = static_cast<uint32_t>(o.rep);
      h.shard_bytes = s.bytes;
      h.block = s.block;
      h.count = b - a;
      if (auto w = send_all(fd->get(), bytes_of(h), deadline, what); !w) {
        status[k] = w;
        return;
      }
      wire[k] += sizeof h;
      std::vector<uint8_t> buf(sizeof(uint64_t) + s.block);
      for (size_t i = a; i < b; ++i) {
        const uint64_t blk = send[i];
        const uint32_t len = block_len(s, blk);
        std::memcpy(buf.data(), &blk, sizeof blk);
        fill_block(s, blk, v[blk], std::span<uint8_t>(buf.data() + sizeof blk, len));
        if (auto w = send_all(fd->get(), {buf.data(), sizeof blk + len}, deadline, what); !w) {
          status[k] = w;
          return;
        }
        wire[k] += sizeof blk + len;
        payload[k] += len;
      }
      uint64_t ack = 0;
      if (auto w = recv_all(fd->get(), bytes_of(ack), deadline, what + " (acknowledgement)"); !w) {
        status[k] = w;
        return;
      }
      if (ack != payload[k])
        status[k] = fail(what + ": the receiver wrote " + std::to_string(ack) + " of " +
                         std::to_string(payload[k]) + " bytes");
    });
  for (auto& t : threads) t.join();
  for (const auto& st : status) TB_TRY(st);
  for (size_t k = 0; k < streams; ++k) r.payload += payload[k], r.wire += wire[k];
  r.data_seconds = static_cast<double>(now_ns() - start) / 1e9;
  // Commit: the receiver checksums the shard it rebuilt.
  const std::string what = "checkpoint shard " + std::to_string(o.shard) + " commit to " + o.to;
  auto fd = connect_to(o, deadline);
  if (!fd) return std::unexpected(fd.error());
  WireHeader h;
  h.kind = static_cast<uint32_t>(CkptKind::kCommit);
  h.shard = o.shard;
  h.rep = static_cast<uint32_t>(o.rep);
  h.shard_bytes = s.bytes;
  h.block = s.block;
  h.count = r.checksum;
  TB_TRY(send_all(fd->get(), bytes_of(h), deadline, what));
  r.wire += sizeof h;
  uint64_t answer[2] = {0, 0};
  TB_TRY(recv_all(fd->get(), bytes_of(answer), deadline, what + " (answer)"));
  r.receiver_checksum = answer[0];
  r.receiver_bytes = answer[1];
  r.seconds = static_cast<double>(now_ns() - start) / 1e9;
  return r;
}

nlohmann::json to_json(const CkptSendOptions& o, const CkptSendResult& r) {
  return {{"mode", "ckpt-send"},
          {"shard", o.shard},
          {"rep", o.rep},
          {"ckpt_mode", to_string(o.mode)},
          {"full", r.full},
          {"shard_bytes", o.data.bytes},
          {"blocks", r.blocks},
          {"payload_bytes", r.payload},
          {"wire_bytes", r.wire},
          {"streams", o.streams},
          {"dscp", o.dscp},
          {"seconds", r.seconds},
          {"data_seconds", r.data_seconds},
          {"checksum", r.checksum},
          {"receiver_checksum", r.receiver_checksum},
          {"receiver_bytes", r.receiver_bytes},
          {"ok", r.ok()},
          {"measured",
           "CLOCK_MONOTONIC at the sender, first connect to the receiver's checksum; FNV-1a 64 "
           "of the whole shard at both ends"}};
}

namespace {

// One receiver connection: a data stream or a commit.
Status serve_one(int fd, const CkptServeOptions& o, std::mutex& out_mu,
                 const std::function<void(const nlohmann::json&)>& out) {
  auto deadline = [] { return now_ns() + int64_t{kIdleTimeoutMs} * 1'000'000; };
  WireHeader h;
  TB_TRY(recv_all(fd, bytes_of(h), deadline(), "checkpoint header"));
  if (h.magic != kCkptMagic) return fail("checkpoint connection: not a checkpoint header");
  if (h.block < 512 || h.block > (64u << 20) || h.shard_bytes == 0)
    return fail("checkpoint header: block " + std::to_string(h.block) + ", shard bytes " +
                std::to_string(h.shard_bytes));
  const CkptShard s{h.shard_bytes, h.block, 0};
  const std::string path = o.dir + "/shard-" + std::to_string(h.shard) + ".bin";
  auto file = open_file(path, O_RDWR | O_CREAT);
  if (!file) return std::unexpected(file.error());
  struct stat sb {};
  if (::fstat(file->get(), &sb) != 0) return sys_fail("stat " + path);
  if (static_cast<uint64_t>(sb.st_size) != h.shard_bytes &&
      ::ftruncate(file->get(), static_cast<off_t>(h.shard_bytes)) != 0)
    return sys_fail("size " + path);
  if (h.kind == static_cast<uint32_t>(CkptKind::kData)) {
    std::vector<uint8_t> buf(h.block);
    uint64_t written = 0;
    for (uint64_t i = 0; i < h.count; ++i) {
      uint64_t blk = 0;
      TB_TRY(recv_all(fd, bytes_of(blk), deadline(), "checkpoint block index"));
      if (blk >= block_count(s))
        return fail("checkpoint shard " + std::to_string(h.shard) + ": block " +
                    std::to_string(blk) + " is past its end");
      const uint32_t len = block_len(s, blk);
      TB_TRY(recv_all(fd, {buf.data(), len}, deadline(), "checkpoint block"));
      const off_t at = static_cast<off_t>(blk * h.block);
      if (::pwrite(file->get(), buf.data(), len, at) != static_cast<ssize_t>(len))
        return sys_fail("write " + path);
      written += len;
    }
    return send_all(fd, bytes_of(written), deadline(), "checkpoint acknowledgement");
  }
  if (h.kind != static_cast<uint32_t>(CkptKind::kCommit))
    return fail("checkpoint header: unknown kind " + std::to_string(h.kind));
  // The checksum of the file as it is now: every stream of this replication was acknowledged.
  Checksum c;
  std::vector<uint8_t> buf(1 << 20);
  uint64_t read = 0;
  while (read < h.shard_bytes) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), h.shard_bytes - read));
    const ssize_t n = ::pread(file->get(), buf.data(), want, static_cast<off_t>(read));
    if (n <= 0) return sys_fail("read " + path);
    c.add({buf.data(), static_cast<size_t>(n)});
    read += static_cast<uint64_t>(n);
  }
  const uint64_t answer[2] = {c.value(), read};
  {
    std::lock_guard<std::mutex> l(out_mu);
    out({{"event", "commit"},
         {"shard", h.shard},
         {"rep", h.rep},
         {"checksum", c.value()},
         {"sender_checksum", h.count},
         {"ok", c.value() == h.count},
         {"bytes", read},
         {"t_mono_ns", now_ns()}});
  }
  return send_all(fd, bytes_of(answer), deadline(), "checkpoint commit answer");
}

}  // namespace

Status serve_ckpt(const CkptServeOptions& o, const std::atomic<bool>& stop,
                  const std::function<void(const nlohmann::json&)>& out) {
  if (o.port == 0) return bad_input("ckpt-recv needs --port");
  if (o.dir.empty()) return bad_input("ckpt-recv needs --dir");
  if (o.dscp < 0 || o.dscp > 63) return bad_input("--dscp must be 0..63");
  auto lst = open_socket(SOCK_STREAM, "");
  if (!lst) return std::unexpected(lst.error());
  const int one = 1;
  ::setsockopt(lst->get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  auto any = ipv4_endpoint("0.0.0.0", o.port);
  if (!any) return std::unexpected(any.error());
  if (::bind(lst->get(), reinterpret_cast<const sockaddr*>(&*any), sizeof *any) != 0)
    return sys_fail("bind TCP port " + std::to_string(o.port));
  if (::listen(lst->get(), 128) != 0) return sys_fail("listen");
  std::mutex out_mu;
  {
    std::lock_guard<std::mutex> l(out_mu);
    out({{"event", "ready"}, {"port", o.port}});
  }
  struct Conn {
    std::thread t;
    std::shared_ptr<std::atomic<bool>> done;
  };
  std::vector<Conn> conns;
  const int64_t end = now_ns() + int64_t{o.seconds} * 1'000'000'000;
  while (!stop.load() && now_ns() < end) {
    std::erase_if(conns, [](Conn& c) {
      if (!c.done->load()) return false;
      c.t.join();
      return true;
    });
    if (wait_fd(lst->get(), POLLIN, std::min(end, now_ns() + 200'000'000)) == 0) continue;
    const int c = ::accept4(lst->get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (c < 0) continue;
    auto fd = std::make_shared<UniqueFd>(c);
    (void)set_dscp(c, o.dscp);
    auto done = std::make_shared<std::atomic<bool>>(false);
    conns.push_back({std::thread([fd, done, &o, &out_mu, &out] {
                       if (auto r = serve_one(fd->get(), o, out_mu, out); !r) {
                         std::lock_guard<std::mutex> l(out_mu);
                         out({{"event", "error"}, {"error", r.error().message}});
                       }
                       done->store(true);
                     }),
                     done});
  }
  for (auto& c : conns) c.t.join();
  return {};
}

}  // namespace tb::probe
