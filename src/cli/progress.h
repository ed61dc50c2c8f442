// Progress of a long operation (up of a large lab, verify, run) on the terminal: one status line
// on stderr, rewritten in place — what is happening, step n of N, time elapsed and, once a step
// is done, an estimate of the time left — and cleared when done. Quiet when stderr is not a
// terminal (logs, CI, pipes). Not thread-safe.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>

namespace tb::cli {

class Progress {
 public:
  explicit Progress(std::string what)
      : what_(std::move(what)), tty_(::isatty(STDERR_FILENO)), t0_(Clock::now()) {}
  ~Progress() { done(); }
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Step `n` of `total` (n counts from 1) is starting, described by `step`.
  void step(size_t n, size_t total, const std::string& step = "") {
    if (!tty_) return;
    const double el = elapsed();
    std::string s = what_ + ": " + std::to_string(n) + "/" + std::to_string(total);
    if (!step.empty()) s += " " + step;
    char t[96];
    if (n > 1 && total >= n) {
      const double left = el / static_cast<double>(n - 1) * static_cast<double>(total - n + 1);
      std::snprintf(t, sizeof t, "  %.1f s, about %.0f s left", el, left);
    } else {
      std::snprintf(t, sizeof t, "  %.1f s", el);
    }
    s += t;
    line(s);
  }
  // A status line of the caller's own (what_ and the time elapsed are not added).
  void line(std::string s) {
    if (!tty_) return;
    if (s.size() > 150) s = s.substr(0, 147) + "...";
    std::fprintf(stderr, "\r\x1b[K%s", s.c_str());
    std::fflush(stderr);
    shown_ = true;
  }
  double elapsed() const { return std::chrono::duration<double>(Clock::now() - t0_).count(); }
  bool on_terminal() const { return tty_; }
  // Clears the line (idempotent).
  void done() {
    if (tty_ && shown_) {
      std::fprintf(stderr, "\r\x1b[K");
      std::fflush(stderr);
    }
    shown_ = false;
  }

 private:
  using Clock = std::chrono::steady_clock;
  std::string what_;
  bool tty_ = false, shown_ = false;
  Clock::time_point t0_;
};

}  // namespace tb::cli
