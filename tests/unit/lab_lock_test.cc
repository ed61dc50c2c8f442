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

class LabLockTest : public testing::Test {
 protected:
  void SetUp() override { ::setenv("TESTBEDCTL_RUN_DIR", dir_.path().c_str(), 1); }
  void TearDown() override { ::unsetenv("TESTBEDCTL_RUN_DIR"); }
  testing_util::TempDir dir_;
};

TEST_F(LabLockTest, ASecondProcessIsRefusedWhileTheFirstHoldsIt) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    auto lock = LabLock::acquire("t");
    char c = lock ? 'y' : 'n';
    (void)!::write(ready[1], &c, 1);
    ::pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_EQ(c, 'y');
  auto busy = LabLock::acquire("t");
  ASSERT_FALSE(busy);
  EXPECT_EQ(busy.error().sys_errno, EWOULDBLOCK);
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  EXPECT_TRUE(LabLock::acquire("t")) << "the holder is dead; its lock must be free";
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST_F(LabLockTest, AChildOfAKilledHolderDoesNotKeepIt) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  pid_t holder = ::fork();
  ASSERT_GE(holder, 0);
  if (holder == 0) {
    auto lock = LabLock::acquire("t");
    // A child forked while the lock is held, still alive when the holder dies (a tool that has
    // not reached exec yet, or a process that never execs).
    pid_t child = ::fork();
    if (child == 0) {
      ::pause();
      _exit(0);
    }
    (void)!::write(ready[1], &child, sizeof child);
    ::pause();
    _exit(0);
  }
  pid_t child = 0;
  ASSERT_EQ(::read(ready[0], &child, sizeof child), static_cast<ssize_t>(sizeof child));
  ::kill(holder, SIGKILL);
  ::waitpid(holder, nullptr, 0);
  auto lock = LabLock::acquire("t");
  ::kill(child, SIGKILL);
  EXPECT_TRUE(lock) << "the lock outlived its holder in a child: " << lock.error().message;
  ::close(ready[0]);
  ::close(ready[1]);
}

}  // namespace
}  // namespace tb::lab
