// The lab lock (lab/state.h LabLock): held by the process that took it, for as long as it lives.
// A child it forked (a tool between fork and exec, anything that never execs) does not keep it:
// when a verb is killed with SIGKILL, `clean` and `down` can take the lock at once.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include "lab/state.h"
#include "temp_dir.h"

namespace tb::lab {
namespace {

// A forked process that runs `body` (which reports through `report`, then waits), killed with
// SIGKILL and reaped when the test ends on any path, a failed ASSERT included.
class Forked {
 public:
  template <class Body>
  explicit Forked(Body body) {
    if (::pipe(pipe_) != 0) return;
    pid_ = ::fork();
    if (pid_ == 0) {
      body(pipe_[1]);
      ::pause();
      _exit(0);
    }
  }
  ~Forked() {
    kill();
    ::close(pipe_[0]);
    ::close(pipe_[1]);
  }
  Forked(const Forked&) = delete;
  Forked& operator=(const Forked&) = delete;

  bool started() const { return pid_ > 0; }
  // Reads what the child reported; false when it did not report all of it.
  template <class T>
  bool read(T& out) {
    return ::read(pipe_[0], &out, sizeof out) == static_cast<ssize_t>(sizeof out);
  }
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  int pipe_[2] = {-1, -1};
  pid_t pid_ = -1;
};

// A process (not a waitpid child of the test) by pid, killed when the test ends.
struct KillOnExit {
  pid_t pid = -1;
  ~KillOnExit() {
    if (pid > 0) ::kill(pid, SIGKILL);
  }
};

class LabLockTest : public testing::Test {
 protected:
  void SetUp() override { ::setenv("TESTBEDCTL_RUN_DIR", dir_.path().c_str(), 1); }
  void TearDown() override { ::unsetenv("TESTBEDCTL_RUN_DIR"); }
  testing_util::TempDir dir_;
};

TEST_F(LabLockTest, ASecondProcessIsRefusedWhileTheFirstHoldsIt) {
  Forked holder([](int report) {
    auto lock = LabLock::acquire("t");
    char c = lock ? 'y' : 'n';
    (void)!::write(report, &c, 1);
    ::pause();  // keeps `lock` alive
  });
  ASSERT_TRUE(holder.started());
  char c = 0;
  ASSERT_TRUE(holder.read(c));
  EXPECT_EQ(c, 'y');
  auto busy = LabLock::acquire("t");
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().sys_errno, EWOULDBLOCK);
  holder.kill();
  EXPECT_TRUE(LabLock::acquire("t")) << "the holder is dead; its lock must be free";
}

TEST_F(LabLockTest, AChildOfAKilledHolderDoesNotKeepIt) {
  Forked holder([](int report) {
    auto lock = LabLock::acquire("t");
    // A child forked while the lock is held, still alive when the holder dies (a tool that has
    // not reached exec yet, or a process that never execs).
    pid_t child = ::fork();
    if (child == 0) {
      ::pause();
      _exit(0);
    }
    (void)!::write(report, &child, sizeof child);
    ::pause();  // keeps `lock` alive
  });
  ASSERT_TRUE(holder.started());
  KillOnExit child;
  ASSERT_TRUE(holder.read(child.pid));
  holder.kill();
  auto lock = LabLock::acquire("t");
  EXPECT_TRUE(lock) << "the lock outlived its holder in a child: " << lock.error().message;
}

}  // namespace
}  // namespace tb::lab
