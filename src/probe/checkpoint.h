// Checkpoint replication with real bytes (`tb-probe ckpt-send` / `ckpt-recv`, the `checkpoint`
// workload of `run`; docs/scenario.md "workload").
//
// A shard is `bytes` long, cut into blocks of `block` bytes (the last may be shorter). Its content
// is a pure function of (seed, block, version): each replication r >= 1 changes a fixed fraction
// of the blocks (changed_blocks: distinct, drawn from (seed, r)), bumping their versions, so the
// sender needs no state between replications — replication r's shard is versions_at(r) — and a
// receiver that missed nothing holds exactly that shard after applying what r sent.
//
// Modes: full sends every block; incremental the blocks changed in r (r = 0 is always full);
// layered a full replication every `full_every`, incremental in between. Both ends checksum the
// whole shard after the replication (FNV-1a 64 over its bytes): the sender the shard it holds,
// the receiver the file it rebuilt, and a difference fails the replication.
//
// Wire (TCP, host byte order: both ends are on this host): a 40-byte header (WireHeader), then for
// data `count` x (u64 block index, the block's bytes); the receiver answers a data stream with the
// payload bytes it wrote (u64) and a commit with its checksum and the file's size (2 x u64).
// Each replication: `streams` data connections in parallel, each a contiguous part of the blocks
// to send, then one commit connection once every stream is acknowledged.
//
// Bounded: every connect, send and receive has a deadline. Pure functions are thread-safe;
// run_ckpt_send and serve_ckpt block the caller.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace tb::probe {

enum class CkptMode { kFull, kIncremental, kLayered };
std::string_view to_string(CkptMode m);
Result<CkptMode> parse_ckpt_mode(std::string_view s);  // "full", "incremental", "layered"

struct CkptShard {
  uint64_t bytes = 0;
  uint32_t block = 4096;
  uint64_t seed = 1;  // the shard's identity: its content and which blocks change
};

uint64_t block_count(const CkptShard& s);
uint32_t block_len(const CkptShard& s, uint64_t b);
// The blocks replication `rep` (>= 1) changes: max(1, round(fraction x blocks)) distinct blocks,
// sorted; the same for the same (seed, rep). None for rep 0 (the first checkpoint).
std::vector<uint64_t> changed_blocks(const CkptShard& s, double fraction, int rep);
// Each block's version once replications 1..rep changed theirs (all 0 at rep 0).
std::vector<uint32_t> versions_at(const CkptShard& s, double fraction, int rep);
// Whether replication `rep` sends the whole shard.
bool sends_full(CkptMode m, int rep, int full_every);
// The blocks replication `rep` sends, ascending.
std::vector<uint64_t> blocks_to_send(const CkptShard& s, CkptMode m, double fraction,
                                     int full_every, int rep);
// Block b's bytes at version v (out.size() == block_len(s, b)).
void fill_block(const CkptShard& s, uint64_t b, uint32_t v, std::span<uint8_t> out);

// FNV-1a 64, streamed.
class Checksum {
 public:
  void add(std::span<const uint8_t> bytes);
  uint64_t value() const { return h_; }

 private:
  uint64_t h_ = 0xcbf29ce484222325ull;
};
// The checksum of the whole shard at versions `v`.
uint64_t shard_checksum(const CkptShard& s, const std::vector<uint32_t>& v);

inline constexpr uint32_t kCkptMagic = 0x4B434254;  // "TBCK"
enum class CkptKind : uint32_t { kData = 1, kCommit = 2 };
struct WireHeader {
  uint32_t magic = kCkptMagic;
  uint32_t kind = 0;
  uint32_t shard = 0;
  uint32_t rep = 0;
  uint64_t shard_bytes = 0;
  uint32_t block = 0;
  uint32_t reserved = 0;
  uint64_t count = 0;  // data: blocks that follow; commit: the sender's checksum
};
static_assert(sizeof(WireHeader) == 40);

struct CkptSendOptions {
  std::string to;  // receiver address
  uint16_t port = 0;
  uint32_t shard = 0;
  CkptShard data;
  CkptMode mode = CkptMode::kFull;
  double changed = 0.1;
  int full_every = 4;
  int rep = 0;
  int streams = 1;
  int dscp = 0;              // IP_TOS = dscp << 2 on every connection
  int timeout_ms = 120'000;  // the whole replication
};

struct CkptSendResult {
  bool full = false;
  uint64_t blocks = 0;      // sent
  uint64_t payload = 0;     // block bytes sent
  uint64_t wire = 0;        // bytes written to the sockets (headers and indices included)
  double seconds = 0;       // first connect to the commit's answer
  double data_seconds = 0;  // first connect to the last stream's acknowledgement
  uint64_t checksum = 0;    // the sender's shard
  uint64_t receiver_checksum = 0;
  uint64_t receiver_bytes = 0;  // the receiver's file size
  bool ok() const { return checksum == receiver_checksum; }
};

Status validate(const CkptSendOptions& o);
Result<CkptSendResult> run_ckpt_send(const CkptSendOptions& o);
nlohmann::json to_json(const CkptSendOptions& o, const CkptSendResult& r);

struct CkptServeOptions {
  uint16_t port = 0;
  std::string dir;  // shard-<N>.bin files are written here
  int dscp = 0;     // on accepted connections (so the ACKs are classified as the data)
  int seconds = 600;
};

// Serves until `seconds` pass or `stop`; `out` gets {"event":"ready"} and one JSON object per
// commit ({"event":"commit","shard","rep","checksum","bytes"}).
Status serve_ckpt(const CkptServeOptions& o, const std::atomic<bool>& stop,
                  const std::function<void(const nlohmann::json&)>& out);

}  // namespace tb::probe
