// `watch` on a live mini lab while a bench runs: its JSON frames put a busy scale-out link
// first; under tmux (a real terminal) the busiest link shows at the top of the table, and the
// view exits on q and on Ctrl-C (the screen is kept as artifacts/watch.png). A tmux server of its
// own (-L) that the test kills at the end.
#include <unistd.h>

#include <sstream>
#include <thread>

#include "browser.h"

namespace tb::e2e {
namespace {

class Watch : public SharedMiniLab<Watch> {
 protected:
  static void SetUpTestSuite() { up_shared("wt", "watch"); }
  // A bench long enough to watch (interrupted when the test ends).
  std::unique_ptr<Background> busy() {
    return std::make_unique<Background>("bench " + lab_ + " allreduce -b 8M -e 8M -n 200 -w 0 -c 0",
                                        "/dev/null", "TESTBEDCTL_RESULTS_DIR=" + results_);
  }
};

TEST_F(Watch, JsonFramesPutTheBusyRailLinkFirst) {
  auto bench = busy();
  bool seen = false;
  std::string last;
  // Frames until the bench's traffic shows (bounded: 10 tries of 4 frames).
  for (int tries = 0; tries < 10 && !seen; ++tries) {
    auto r = sh(tbctl() + " watch " + lab_ + " --json --count 4 --interval 0.5");
    ASSERT_EQ(r.rc, 0) << r.out;
    std::istringstream lines(r.out);
    int frames = 0;
    for (std::string line; std::getline(lines, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      ASSERT_TRUE(j.is_object()) << line;
      ++frames;
      ASSERT_EQ(j["links"].size(), 11u);
      const auto& top = j["links"][0];
      last = top.dump();
      if (top["tier"] == "scale-out" &&
          std::max(top["ab_bps"].get<double>(), top["ba_bps"].get<double>()) > 1e6)
        seen = true;
    }
    EXPECT_EQ(frames, 4);
  }
  EXPECT_TRUE(seen) << "no frame put a busy scale-out link first; last top: " << last;
}

class Tmux {
 public:
  Tmux() : socket_("tb-e2e-" + std::to_string(::getpid())) {}
  ~Tmux() { sh(cmd("kill-server") + " 2>/dev/null"); }
  std::string cmd(const std::string& args) const { return "tmux -L " + socket_ + " " + args; }
  bool alive(const std::string& s) const {
    return sh(cmd("has-session -t " + s) + " 2>/dev/null").rc == 0;
  }
  std::string screen(const std::string& s) const { return sh(cmd("capture-pane -p -t " + s)).out; }
  // True when the session ended within `seconds` (polled every 100 ms).
  bool ends_within(const std::string& s, int seconds) const {
    for (int i = 0; i < seconds * 10; ++i) {
      if (!alive(s)) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

 private:
  std::string socket_;
};

// The first table row under the header: the busiest link.
std::string first_row(const std::string& screen) {
  std::istringstream in(screen);
  bool header = false;
  for (std::string line; std::getline(in, line);) {
    if (header && !line.empty()) return line;
    if (line.starts_with("LINK (A <-> B)")) header = true;
  }
  return {};
}

TEST_F(Watch, UnderTmuxTheBusiestLinkIsOnTopAndQAndCtrlCQuit) {
  if (sh("command -v tmux").rc != 0) GTEST_SKIP() << "no tmux (Debian: apt install tmux)";
  Tmux tmux;
  auto bench = busy();
  for (const std::string key : {"q", "C-c"}) {
    const std::string s = key == "q" ? "wq" : "wc";
    auto r = sh(tmux.cmd("new-session -d -s " + s + " -x 180 -y 50 '" + tbctl() + " watch " + lab_ +
                         " --interval 0.5'"));
    ASSERT_EQ(r.rc, 0) << r.out;
    std::string row, screen;
    for (int i = 0; i < 100; ++i) {  // up to 20 s for the bench's traffic to show
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      screen = tmux.screen(s);
      row = first_row(screen);
      if (row.find("scale-out") != std::string::npos && row.find("M ") != std::string::npos) break;
    }
    EXPECT_NE(row.find("scale-out"), std::string::npos) << screen;
    EXPECT_NE(row.find("M "), std::string::npos) << "no Mbit/s rate on the top row:\n" << screen;
    EXPECT_NE(screen.find("delay stages"), std::string::npos) << screen;
    // docs/usage.md's picture of watch: this screen, drawn by Chromium (artifacts/watch.png).
    if (key == "q" && have_chromium()) {
      EXPECT_FALSE(screenshot_terminal(screen, "watch.png", 180, 50).empty());
    }
    sh(tmux.cmd("send-keys -t " + s + " " + key));
    EXPECT_TRUE(tmux.ends_within(s, 5)) << "watch did not exit on " << key << ":\n"
                                        << tmux.screen(s);
  }
}

// Long operations show progress on a terminal and stay quiet off one (cli/progress.h): `run`
// keeps a status line under its timeline (where the timeline is, what is left) and clears it.
TEST_F(Watch, RunShowsItsProgressOnATerminalAndNoneOffIt) {
  if (sh("command -v tmux").rc != 0) GTEST_SKIP() << "no tmux (Debian: apt install tmux)";
  Tmux tmux;
  auto r = sh(tmux.cmd("new-session -d -s run -x 180 -y 50 'TESTBEDCTL_RESULTS_DIR=" + results_ +
                       " " + tbctl() + " run " + lab_ + "; sleep 60'"));
  ASSERT_EQ(r.rc, 0) << r.out;
  std::string screen, progress;
  bool ended = false;
  for (int i = 0; i < 600 && !ended; ++i) {  // up to 120 s for the run to end
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    screen = tmux.screen("run");
    std::istringstream in(screen);
    for (std::string line; std::getline(in, line);) {
      if (line.starts_with("run " + lab_ + ": timeline ") && line.find(" s left") != line.npos)
        progress = line;
      if (line.starts_with("report: ")) ended = true;
    }
  }
  ASSERT_TRUE(ended) << screen;
  EXPECT_FALSE(progress.empty()) << "no progress line was seen:\n" << screen;
  EXPECT_EQ(screen.find(": timeline "), std::string::npos) << "not cleared:\n" << screen;
  // Off a terminal: no status line, no terminal control.
  r = sh("TESTBEDCTL_RESULTS_DIR=" + results_ + " " + tbctl() + " run " + lab_ + " 2>&1");
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(": timeline "), std::string::npos) << r.out;
}

TEST_F(Watch, ALabThatIsNotUpIsExitTwo) {
  auto r = sh(tbctl() + " watch nosuch --count 1 2>&1");
  EXPECT_EQ(r.rc, 2) << r.out;
  r = sh(tbctl() + " watch " + lab_ + " --interval 0 2>&1");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--interval"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace tb::e2e
