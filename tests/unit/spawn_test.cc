// Starting a program without a copy of our memory (core/spawn.h): its environment, output,
// stdin, kept fd, signal mask and handlers, and a step that fails reported as an error. No
// root needed (the netns step runs in the netns and e2e tiers, through the supervisor).
#include "core/spawn.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <string>

#include "core/unique_fd.h"

namespace tb {
namespace {

// Runs `script` under /bin/sh with `spec`'s other fields, its stdout into a pipe; returns what
// it wrote and its exit status.
struct Ran {
  std::string out;
  int status = -1;
};
Ran run_sh(SpawnSpec spec, const std::string& script) {
  int p[2];
  EXPECT_EQ(::pipe2(p, O_CLOEXEC), 0);
  UniqueFd rd(p[0]), wr(p[1]);
  spec.path = "/bin/sh";
  spec.argv = {"sh", "-c", script};
  spec.stdout_fd = wr.get();
  auto pid = spawn_process(spec);
  EXPECT_TRUE(pid.has_value()) << (pid ? "" : pid.error().message);
  wr.reset();
  Ran r;
  char buf[256];
  for (ssize_t n; (n = ::read(rd.get(), buf, sizeof buf)) > 0;) r.out.append(buf, n);
  if (pid) ::waitpid(*pid, &r.status, 0);
  return r;
}

TEST(Spawn, RunsWithTheGivenEnvironmentAndOutput) {
  SpawnSpec spec;
  spec.env = {"TB_SPAWN_TEST=one two", "PATH=/usr/bin:/bin"};
  auto r = run_sh(spec, "echo \"$TB_SPAWN_TEST\"; test -z \"$HOME\" && echo no-home; exit 3");
  EXPECT_EQ(r.out, "one two\nno-home\n");
  ASSERT_TRUE(WIFEXITED(r.status));
  EXPECT_EQ(WEXITSTATUS(r.status), 3);
}

TEST(Spawn, EnvironmentWithReplacesAName) {
  ::setenv("TB_SPAWN_TEST_X", "old", 1);
  auto env = environment_with({"TB_SPAWN_TEST_X=new"});
  ::unsetenv("TB_SPAWN_TEST_X");
  int seen = 0;
  for (const auto& e : env)
    if (e.starts_with("TB_SPAWN_TEST_X=")) {
      ++seen;
      EXPECT_EQ(e, "TB_SPAWN_TEST_X=new");
    }
  EXPECT_EQ(seen, 1);
}

TEST(Spawn, StdinIsDevNullOrTheGivenFdAndKeepFdSurvivesTheExec) {
  SpawnSpec spec;
  spec.env = {"PATH=/usr/bin:/bin"};
  EXPECT_EQ(run_sh(spec, "cat; echo end").out, "end\n");  // /dev/null: cat ends at once

  int in[2];
  ASSERT_EQ(::pipe2(in, O_CLOEXEC), 0);
  UniqueFd in_rd(in[0]), in_wr(in[1]);
  ASSERT_EQ(::write(in_wr.get(), "abc", 3), 3);
  in_wr.reset();
  int keep[2];
  ASSERT_EQ(::pipe2(keep, O_CLOEXEC | O_NONBLOCK), 0);
  UniqueFd keep_rd(keep[0]), keep_wr(keep[1]);
  spec.stdin_fd = in_rd.get();
  spec.keep_fd = keep_wr.get();
  const std::string fd = std::to_string(keep_wr.get());
  auto r = run_sh(spec, "cat; echo; echo x >&" + fd + " && echo kept");
  EXPECT_EQ(r.out, "abc\nkept\n");
  char byte = 0;
  EXPECT_EQ(::read(keep_rd.get(), &byte, 1), 1);
  EXPECT_EQ(byte, 'x');
}

TEST(Spawn, TheChildExecsWithTheMaskAskedForElseOurs) {
  // Ours: SIGUSR2 blocked (and every signal, inside spawn_process, until the child has reset
  // its handlers). /proc/self/status SigBlk is the mask in hex: SIGUSR2 (12) is 0x800.
  sigset_t usr2, before;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &usr2, &before), 0);
  SpawnSpec spec;
  spec.env = {"PATH=/usr/bin:/bin"};
  const std::string script = "grep SigBlk /proc/self/status | tr -d ' \\t'";
  std::string ours;  // this thread's mask, SIGUSR2 included
  {
    std::ifstream status("/proc/thread-self/status");
    for (std::string line; std::getline(status, line);)
      if (line.starts_with("SigBlk:")) {
        std::erase_if(line, [](char c) { return c == ' ' || c == '\t'; });
        ours = line + "\n";
      }
  }
  const std::string inherited = run_sh(spec, script).out;
  sigset_t none;
  sigemptyset(&none);
  spec.mask = none;
  const std::string asked = run_sh(spec, script).out;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  EXPECT_EQ(inherited, ours);
  EXPECT_NE(ours.find("800\n"), std::string::npos) << ours;
  EXPECT_EQ(asked, "SigBlk:0000000000000000\n");
}

TEST(Spawn, CloseOtherFdsLeavesOnlyStdioAndKeepFd) {
  UniqueFd inherited(::open("/dev/null", O_RDONLY));  // not close-on-exec
  int keep[2];
  ASSERT_EQ(::pipe2(keep, O_CLOEXEC), 0);
  UniqueFd keep_rd(keep[0]), keep_wr(keep[1]);
  SpawnSpec spec;
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.keep_fd = keep_wr.get();
  const std::string script = "for fd in " + std::to_string(inherited.get()) + " " +
                             std::to_string(keep_wr.get()) +
                             "; do test -e /proc/self/fd/$fd && echo open || echo closed; done";
  EXPECT_EQ(run_sh(spec, script).out, "open\nopen\n");
  spec.close_other_fds = true;
  EXPECT_EQ(run_sh(spec, script).out, "closed\nopen\n");
}

TEST(Spawn, AFailedExecIsAnErrorNamingTheStep) {
  SpawnSpec spec;
  spec.path = "/nonexistent/tb-spawn-test";
  spec.argv = {"tb-spawn-test"};
  auto pid = spawn_process(spec);
  ASSERT_FALSE(pid.has_value());
  EXPECT_NE(pid.error().message.find("/nonexistent/tb-spawn-test: exec"), std::string::npos)
      << pid.error().message;
  EXPECT_NE(pid.error().message.find("No such file"), std::string::npos) << pid.error().message;
}

TEST(Spawn, ABadNamespaceFdIsAnErrorNamingSetns) {
  UniqueFd not_ns(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  SpawnSpec spec;
  spec.path = "/bin/true";
  spec.argv = {"true"};
  spec.netns_fd = not_ns.get();
  auto pid = spawn_process(spec);
  ASSERT_FALSE(pid.has_value());
  EXPECT_NE(pid.error().message.find("setns"), std::string::npos) << pid.error().message;
}

}  // namespace
}  // namespace tb
