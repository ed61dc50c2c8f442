// `watch`: a live view of a lab's links (lab/watch.h, report/watch.h), refreshed every
// --interval. On a terminal the screen is redrawn and `q` or Ctrl-C quits; otherwise (or with
// --json) frames follow one another on stdout, and --count bounds them.
#include <poll.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <string>

#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/flag_checks.h"
#include "cli/stop_signals.h"
#include "lab/watch.h"
#include "report/watch.h"

namespace tb::cli {
namespace {

inline constexpr RealRange kIntervalRange{0.1, 60};
inline constexpr IntRange kCountRange{0, 1'000'000};

struct WatchFlags {
  std::string lab;
  bool json = false;
  double interval = 1;
  int count = 0;  // 0: until q or Ctrl-C
};

// The terminal in "one key at a time, no echo" mode while it lives (signals still work).
class RawKeys {
 public:
  RawKeys() {
    if (!::isatty(STDIN_FILENO) || ::tcgetattr(STDIN_FILENO, &old_) != 0) return;
    termios raw = old_;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    active_ = ::tcsetattr(STDIN_FILENO, TCSANOW, &raw) == 0;
  }
  ~RawKeys() {
    if (active_) ::tcsetattr(STDIN_FILENO, TCSANOW, &old_);
  }
  RawKeys(const RawKeys&) = delete;
  RawKeys& operator=(const RawKeys&) = delete;
  // Waits up to `ms` for a key; true when it was q (or Q).
  bool quit_within(int ms) const {
    if (!active_) {
      ::poll(nullptr, 0, ms);
      return false;
    }
    pollfd p{STDIN_FILENO, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0) return false;
    char c = 0;
    return ::read(STDIN_FILENO, &c, 1) == 1 && (c == 'q' || c == 'Q');
  }

 private:
  termios old_{};
  bool active_ = false;
};

size_t terminal_rows() {
  winsize w{};
  if (::ioctl(STDOUT_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_row > 0) return w.ws_row;
  return 0;
}

int cmd_watch(const WatchFlags& f) {
  if (auto rc = require_root("watch")) return *rc;
  auto w = lab::Watcher::open(f.lab);
  if (!w) return report(w.error());
  const bool screen = !f.json && ::isatty(STDOUT_FILENO);
  StopSignals signals;
  RawKeys keys;
  for (int frame = 0; f.count == 0 || frame <= f.count; ++frame) {
    auto s = w->sample();
    if (!s) {
      if (screen) std::cout << "\n";
      return report(s.error());
    }
    // The first sample only starts the counters; frames show rates from the second on.
    if (frame > 0) {
      if (f.json) {
        std::cout << report::watch_json(f.lab, *s).dump() << "\n" << std::flush;
      } else if (screen) {
        const size_t rows = terminal_rows();
        // Header 3 lines, events up to 10, footer 3 (and with a congestion agent its PFC
        // section, up to 13, and 2 more of footer): the rest for links.
        const size_t reserved = 18 + (s->congestion == congestion::Source::kNoAgent ? 0 : 15);
        const size_t max_links = rows > reserved + 6 ? rows - reserved : 6;
        std::cout << "\x1b[H\x1b[2J" << report::watch_text(f.lab, *s, max_links) << std::flush;
      } else {
        std::cout << report::watch_text(f.lab, *s, 0) << "\n" << std::flush;
      }
    }
    if (f.count != 0 && frame == f.count) break;
    // Wait out the interval in slices, so q and Ctrl-C answer within 100 ms.
    const auto until = std::chrono::steady_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(f.interval * 1000));
    while (std::chrono::steady_clock::now() < until) {
      if (stop_requested()) return kExitOk;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                            until - std::chrono::steady_clock::now())
                            .count();
      if (keys.quit_within(static_cast<int>(std::clamp<int64_t>(left, 1, 100)))) return kExitOk;
    }
    if (stop_requested()) return kExitOk;
  }
  return kExitOk;
}

}  // namespace

void add_watch(CLI::App& app, int& rc) {
  auto f = std::make_shared<WatchFlags>();
  auto* cmd = app.add_subcommand(
      "watch",
      "live view of a lab's links: rates against emulated rates, drops, queues, PFC pauses on "
      "lossless links (root)");
  cmd->add_option("LAB", f->lab)->required()->check(lab_name());
  cmd->add_flag("--json", f->json, "one JSON line per frame");
  cmd->add_option("--interval", f->interval, "seconds between frames (default 1)")
      ->check(real_in(kIntervalRange));
  cmd->add_option("--count", f->count, "frames to show, then exit (default 0: until q or Ctrl-C)")
      ->check(whole_in(kCountRange));
  cmd->callback([f, &rc] { rc = cmd_watch(*f); });
}

}  // namespace tb::cli
