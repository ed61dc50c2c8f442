// The pause-episode timeline, `<lab dir>/congestion.jsonl` (docs/design-congestion.md §5): the
// pauses of one upstream less than kEpisodeMergeNs apart (from a resume to the next pause) are
// one episode, written as one JSON line once it has closed (no pause for kEpisodeMergeNs after
// its last resume) or when the agent stops:
//   {"t0_ns", "t1_ns", "upstream", "by": [ports], "cycles"}
// t0/t1 are CLOCK_MONOTONIC (core/clock.h, as events.jsonl's t_mono_ns): the first pause and the
// last resume; `cycles` the pauses merged; `by` every port whose XOFF paused it in the episode.
//
// EpisodeTracker is the merge, pure, on the caller's clock (the agent's I/O layer feeds it the
// commands it carries out; the PauseMachine knows nothing of it); not thread-safe. EpisodeLog
// appends the lines and, past its cap, renames the file to `<path>.1` (one old file kept, so at
// most twice the cap on disk); move-only, not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::congestion {

inline constexpr const char* kEpisodesFile = "congestion.jsonl";  // in <lab dir>
inline constexpr int64_t kEpisodeMergeNs = 10'000'000;
inline constexpr uint64_t kEpisodeLogCap = 16u << 20;

struct Episode {
  int64_t t0_ns = 0, t1_ns = 0;
  std::string upstream;         // "dc/s0/g0:rail"
  std::vector<std::string> by;  // ports, sorted
  uint64_t cycles = 0;
};
nlohmann::json to_json(const Episode& e);
Episode episode_from_json(const nlohmann::json& j);  // missing keys stay at their defaults

class EpisodeTracker {
 public:
  EpisodeTracker(std::vector<std::string> upstreams, std::vector<std::string> ports,
                 int64_t merge_ns = kEpisodeMergeNs);
  // A pause of `upstream` carried out at `now` (by: the port that asked, -1 none: ownership);
  // one already paused only adds `by`.
  void paused(int upstream, int by, int64_t now);
  void resumed(int upstream, int64_t now);
  // The episodes that closed by `now`, oldest first, moved out.
  std::vector<Episode> take_closed(int64_t now);
  // Every episode, an open pause ending at `now` (the agent stopping).
  std::vector<Episode> take_all(int64_t now);

 private:
  struct Open {
    bool active = false, paused = false;
    int64_t t0 = 0, t1 = 0;
    uint64_t cycles = 0;
    std::vector<int> by;
  };
  Episode close(size_t u, Open& o);
  std::vector<std::string> upstreams_, ports_;
  int64_t merge_ns_;
  std::vector<Open> open_;
};

class EpisodeLog {
 public:
  static Result<EpisodeLog> open(const std::string& path, uint64_t cap = kEpisodeLogCap);
  Status append(const std::vector<Episode>& episodes);
  const std::string& path() const { return path_; }

 private:
  EpisodeLog(std::string path, UniqueFd fd, uint64_t size, uint64_t cap)
      : path_(std::move(path)), fd_(std::move(fd)), size_(size), cap_(cap) {}
  std::string path_;
  UniqueFd fd_;
  uint64_t size_ = 0, cap_ = 0;
};

// The episodes in the file at `path` (and its rotated `.1` before it) that overlap
// [from_ns, to_ns], oldest first; lines that do not parse are skipped.
std::vector<Episode> read_episodes(const std::string& path, int64_t from_ns, int64_t to_ns);

}  // namespace tb::congestion
