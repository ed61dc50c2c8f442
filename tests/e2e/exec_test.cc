// End to end, as root: `testbedctl exec LAB NODE -- CMD ARGS...` hands its arguments to the
// program as they are (execvp, no shell in between), so shell syntax in an argument is text.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

// Runs argv directly (no shell here either, so the test's own quoting cannot hide one in
// testbedctl); stdout and stderr together.
CmdResult run_argv(const std::vector<std::string>& argv) {
  CmdResult r;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return r;
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);
    ::dup2(fds[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(fds[1]);
  char buf[4096];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) r.out.append(buf, n);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

TEST(Exec, PassesArgumentsVerbatimWithoutAShell) {
  TB_REQUIRE_ROOT();
  const std::string lab = unique_lab("exe");
  LabGuard guard(lab);
  auto up = testbedctl("up " + scenario("mini.toml") + " --name " + lab + " --shaping none");
  ASSERT_EQ(up.rc, 0) << up.out;

  // A shell would run `id`, the touch and the backquotes, expand $HOME and the glob, and
  // split at ; | && and the spaces.
  const std::string marker = "/tmp/tb-e2e-exec-" + std::to_string(::getpid());
  const std::vector<std::string> args = {
      "a;b $(id)",  "$(touch " + marker + ")", "`id`",        "$HOME", "*",
      "x && y | z", "it's \"quoted\"",         "two  spaces", ""};
  std::vector<std::string> argv = {tbctl(), "exec", lab, "dc/s0/g0", "--", "printf", "[%s]\\n"};
  argv.insert(argv.end(), args.begin(), args.end());
  auto r = run_argv(argv);
  ASSERT_EQ(r.rc, 0) << r.out;
  std::string want;
  for (const auto& a : args) want += "[" + a + "]\n";
  EXPECT_EQ(r.out, want);
  EXPECT_FALSE(std::filesystem::exists(marker)) << "an argument was run by a shell";
  std::filesystem::remove(marker);

  // The brief's example, exactly: echo prints its one argument as it is.
  r = run_argv({tbctl(), "exec", lab, "dc/s0/g0", "--", "echo", "a;b $(id)"});
  ASSERT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out, "a;b $(id)\n");
  // A program name with shell syntax is looked up as a name, not run by a shell (127).
  r = run_argv({tbctl(), "exec", lab, "dc/s0/g0", "--", "true; touch " + marker});
  EXPECT_EQ(r.rc, 127) << r.out;
  EXPECT_FALSE(std::filesystem::exists(marker));
}

}  // namespace
}  // namespace tb::e2e
