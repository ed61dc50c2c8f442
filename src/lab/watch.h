// The `watch` use case: a live lab sampled at an interval — every link's rate in each direction
// (the a end's byte counters over the interval, IFLA_STATS64) against its emulated rate, its
// drops since watching began (both ends' device drops and root qdisc drops, the delay stages'
// drops for its queues), what its queues hold now (root qdisc backlog, packets the delay stage
// holds), the delay stages' restarts, the congestion agent's pause counters on lossless links
// (congestion/counters.h: its stats file, differenced between frames), and the lab's last
// events. Reads only, takes no lock.
// Needs root (namespaces). Not thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "congestion/counters.h"
#include "core/error.h"
#include "lab/state.h"

namespace tb::lab {

// One direction of a link as the congestion agent saw its sender (that direction's a end for
// a -> b), between the agent's stats files read at this frame and at the previous one (the
// same file twice: the window before, kept).
struct WatchPause {
  bool pausable = false;     // the sender's queue is one the agent pauses (an upstream)
  bool polled = false;       // the sender's queue is a switch egress the agent polls
  bool lossless = false;     // polled and lossless: a drop there is a lossless violation
  uint64_t pauses = 0;       // pauses it received over the window
  double paused_frac = 0;    // share of the window it was paused
  bool paused_now = false;   // at the last stats file
  uint64_t xoff = 0;         // its queue's XOFF events over the window (polled)
  uint64_t pauses_sent = 0;  // pauses its queue's XOFF asked upstream over the window (polled)
  uint64_t drops = 0;        // its queue's drops since watch began but the PFC watchdog's (polled)
  bool ecn = false;          // polled and ecn: the stage after its queue marks CE
  uint64_t ce_marks = 0;     // ecn: CE marks over the window
  uint64_t ect = 0;          // ecn: ECT packets its marking stage took over the window
  // Anything for the PFC rows (an ecn port's marks are shown apart).
  bool any() const { return pauses || paused_now || xoff || pauses_sent || drops; }
};

struct WatchLink {
  size_t link = 0;   // index in the topology's links
  std::string a, b;  // "node:ifname"
  std::string tier;
  double emulated_bps = 0;        // the figure in force (0: unlimited)
  double ab_bps = 0, ba_bps = 0;  // over the last interval: a's tx, a's rx
  uint64_t drops = 0;             // since the first sample: device + root qdisc, both ends
  uint64_t backlog_bytes = 0;     // held now by both ends' root qdiscs
  uint64_t backlog_ab = 0;        // of which a's (waiting to go a -> b)
  uint64_t backlog_ba = 0;        // and b's (waiting to go b -> a)
  int stage_held = -1;            // packets the delay stages hold now for it (-1: no stage)
  uint64_t stage_drops = 0;       // the stages' drops for it since the first sample
  bool up = true;                 // both ends have carrier
  bool changed = false;           // a fault or live change holds other figures than the plan's
  bool seen = false;              // both ends were read
  WatchPause pause_ab, pause_ba;  // senders a (a -> b) and b (b -> a) on a lossless link
  bool congestion() const {
    return pause_ab.pausable || pause_ab.polled || pause_ba.pausable || pause_ba.polled;
  }
};

struct WatchFrame {
  double t_s = 0;                // since the first sample
  double interval_s = 0;         // since the previous one (0 on the first)
  std::vector<WatchLink> links;  // busiest first (max of both directions), then by name
  int stages = 0, stages_running = 0, stage_restarts = 0;
  // The congestion agent: kNoAgent when the lab has none (then nothing is shown of it); with
  // counts, the window (s) the pause figures cover (its stats files' uptimes; 0 before two).
  congestion::Source congestion = congestion::Source::kNoAgent;
  std::string congestion_why;
  double congestion_window_s = 0;
  std::vector<nlohmann::json> events;  // the lab's last events, oldest first (at most 8)
};

class Watcher {
 public:
  // Exit code 2 when the lab is not up.
  static Result<Watcher> open(const std::string& lab);
  // One sample; rates are 0 on the first. An error when the lab has gone.
  Result<WatchFrame> sample();
  const LabState& state() const { return st_; }

 private:
  explicit Watcher(LabState st) : st_(std::move(st)) {}
  void fill_pauses(WatchFrame& f);  // the congestion agent's counters onto f's links
  struct Counters {
    uint64_t tx = 0, rx = 0, drops = 0, stage_drops = 0;
  };
  LabState st_;
  std::vector<Counters> first_, last_;
  // The agent's counters: the first read (drops since watch began), the file read at the
  // previous frame (the window's start) and the window last computed (kept while no newer file
  // was written).
  std::optional<congestion::Counters> cg_first_, cg_prev_;
  congestion::Counters cg_window_;
  std::chrono::steady_clock::time_point t0_, prev_;
  bool started_ = false;
};

// The last `n` lines of the lab's events.jsonl that parse, oldest first.
std::vector<nlohmann::json> last_events(const std::string& lab, size_t n);

}  // namespace tb::lab
