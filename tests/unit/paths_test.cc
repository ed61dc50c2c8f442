// core/paths.h: the runtime, state, results and netns roots per mode, and the socket-path limit;
// core/userns.h's pure parts (pid file, start time, thread count).
#include "core/paths.h"

#include <gtest/gtest.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "core/userns.h"
#include "temp_dir.h"

namespace tb {
namespace {

using testing_util::TempDir;

paths::Env rootless_env(const std::string& runtime) {
  paths::Env e;
  e.rootless = true;
  e.euid = ::geteuid();
  e.xdg_runtime_dir = runtime;
  e.home = "/home/student01";
  return e;
}

TEST(Paths, RootKeepsTodaysPlaces) {
  paths::Env e;  // euid 0, nothing set
  auto r = paths::decide(e);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_FALSE(r->rootless);
  EXPECT_EQ(r->runtime, "/run/testbedctl");
  EXPECT_EQ(r->state, "/var/lib/testbedctl");
  EXPECT_EQ(r->results, "/var/lib/testbedctl/results");
  EXPECT_EQ(r->exercises, "/var/lib/testbedctl/exercises");
  EXPECT_EQ(r->netns, "/run/netns");
  EXPECT_EQ(r->etc_netns, "/etc/netns");
  EXPECT_EQ(r->keeper, "");
}

TEST(Paths, RootIgnoresXdgAndKeepsOverrides) {
  paths::Env e;
  e.xdg_runtime_dir = "/run/user/1000";
  e.xdg_state_home = "/home/x/.local/state";
  e.run_dir = "/tmp/a";
  e.results_dir = "/tmp/b";
  e.exercise_state = "/tmp/c";
  auto r = paths::decide(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->runtime, "/tmp/a");
  EXPECT_EQ(r->results, "/tmp/b");
  EXPECT_EQ(r->exercises, "/tmp/c");
  EXPECT_EQ(r->state, "/var/lib/testbedctl");
  EXPECT_EQ(r->netns, "/run/netns");  // the overrides move files, never namespaces
}

TEST(Paths, RootlessUsesXdgDirectories) {
  TempDir d;
  ASSERT_EQ(::chmod(d.path().c_str(), 0700), 0);
  paths::Env e = rootless_env(d.path());
  e.xdg_state_home = "/home/student01/state";
  auto r = paths::decide(e);
  ASSERT_TRUE(r) << r.error().message;
  EXPECT_TRUE(r->rootless);
  EXPECT_EQ(r->runtime, d.path() + "/testbedctl");
  EXPECT_EQ(r->keeper, d.path() + "/testbedctl");
  EXPECT_EQ(r->netns, d.path() + "/testbedctl/.netns");
  EXPECT_EQ(r->etc_netns, d.path() + "/testbedctl/.etc-netns");
  EXPECT_EQ(r->state, "/home/student01/state/testbedctl");
  EXPECT_EQ(r->results, "/home/student01/state/testbedctl/results");
  EXPECT_EQ(r->exercises, "/home/student01/state/testbedctl/exercises");

  e.xdg_state_home = "relative/state";  // invalid by the XDG specification: ignored
  r = paths::decide(e);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->state, "/home/student01/.local/state/testbedctl");

  e.xdg_state_home.clear();
  e.home.clear();
  r = paths::decide(e);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("XDG_STATE_HOME"), std::string::npos);
}

TEST(Paths, RootlessRefusesAnUnusableRuntimeDir) {
  auto refused = [](const paths::Env& e, const std::string& says) {
    auto r = paths::decide(e);
    ASSERT_FALSE(r) << says;
    EXPECT_EQ(r.error().exit_code, kExitBadInput);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  refused(rootless_env(""), "XDG_RUNTIME_DIR is not set");
  refused(rootless_env("run/user/1000"), "not an absolute path");
  TempDir d;
  refused(rootless_env(d.path() + "/missing"), "No such file");
  ASSERT_EQ(::chmod(d.path().c_str(), 0755), 0);
  refused(rootless_env(d.path()), "has mode 0755");
  ASSERT_EQ(::chmod(d.path().c_str(), 0700), 0);
  paths::Env other = rootless_env(d.path());
  other.euid = ::geteuid() + 4242;  // the directory is not this (pretend) user's
  refused(other, "belongs to uid");
  const std::string link = d.path() + "/link";
  ASSERT_EQ(::symlink(d.path().c_str(), link.c_str()), 0);
  refused(rootless_env(link), "is not a directory");
}

TEST(Paths, SocketPathsFitSunPath) {
  EXPECT_TRUE(paths::check_socket_path("/" + std::string(106, 'a'), "x"));
  auto r = paths::check_socket_path("/" + std::string(107, 'a'), "lab \"l\"'s router r");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("/" + std::string(107, 'a')), std::string::npos);
  EXPECT_NE(r.error().message.find("108 bytes"), std::string::npos);
}

TEST(Paths, ThisProcessIsInTheInitialUserNamespaceAsRoot) {
  // The unit tier runs as root on the host: identity uid_map, root's places.
  if (::geteuid() != 0) GTEST_SKIP() << "not root";
  EXPECT_TRUE(paths::initial_user_namespace());
  EXPECT_FALSE(paths::rootless());
  EXPECT_EQ(paths::roots().netns, "/run/netns");
}

TEST(Userns, PidFileAndStartTime) {
  auto me = userns::start_time(::getpid());
  ASSERT_TRUE(me);
  EXPECT_GT(*me, 0u);
  TempDir d;
  const std::string file = d.path() + "/keeper.pid";
  EXPECT_FALSE(userns::read_pid_file(file));
  std::ofstream(file) << ::getpid() << " " << *me << "\n";
  auto k = userns::read_pid_file(file);
  ASSERT_TRUE(k);
  EXPECT_EQ(k->pid, ::getpid());
  EXPECT_TRUE(userns::live_keeper(file, ::geteuid()));
  EXPECT_FALSE(userns::live_keeper(file, ::geteuid() + 1));     // another user's process
  std::ofstream(file) << ::getpid() << " " << *me + 1 << "\n";  // a reused pid
  EXPECT_FALSE(userns::live_keeper(file, ::geteuid()));
  auto threads = userns::thread_count();
  ASSERT_TRUE(threads);
  EXPECT_GE(*threads, 1);
}

// Root's walk over users' keepers lists a /run/user/<uid> only when that uid owns it, holds a
// testbedctl/keeper.pid there and is in the password database; never root's own, never a name
// that is not a uid.
TEST(Userns, UsersRuntimesListsOnlyDirectoriesTheirUidOwnsWithAPidFile) {
  if (::geteuid() != 0) GTEST_SKIP() << "not root: chowns directories to another uid";
  const passwd* nobody = ::getpwnam("nobody");
  if (nobody == nullptr) GTEST_SKIP() << "no user nobody";
  const unsigned uid = nobody->pw_uid;
  TempDir d;
  auto make = [&](const std::string& name, unsigned owner, bool pid_file) {
    const std::string dir = d.path() + "/" + name;
    ASSERT_EQ(::mkdir(dir.c_str(), 0700), 0);
    ASSERT_EQ(::mkdir((dir + "/testbedctl").c_str(), 0700), 0);
    if (pid_file) std::ofstream(dir + "/testbedctl/keeper.pid") << "1 1\n";
    ASSERT_EQ(::chown(dir.c_str(), owner, static_cast<gid_t>(-1)), 0);
  };
  make(std::to_string(uid), uid, true);      // listed
  make(std::to_string(uid + 1), uid, true);  // not owned by its uid
  make("0", 0, true);                        // root's own: never
  make("abc", uid, true);                    // no uid
  auto rt = userns::users_runtimes(d.path());
  ASSERT_EQ(rt.size(), 1u);
  EXPECT_EQ(rt[0].uid, uid);
  EXPECT_EQ(rt[0].user, nobody->pw_name);
  EXPECT_EQ(rt[0].runtime, d.path() + "/" + std::to_string(uid));
  std::filesystem::remove(d.path() + "/" + std::to_string(uid) + "/testbedctl/keeper.pid");
  EXPECT_TRUE(userns::users_runtimes(d.path()).empty());  // no pid file: no keeper
  EXPECT_TRUE(userns::users_runtimes(d.path() + "/missing").empty());
}

// The relay a joined verb leaves outside the keeper's pid namespace (userns::fork_into_keeper,
// here without a keeper: the fork and the relay are the same): the child runs on and its exit
// code comes back; a signal another process sends the relay reaches the child, and the relay
// ends by the signal that ended the child.
TEST(Userns, ForkIntoKeeperRelaysTheExitCodeAndForwardsSignals) {
  auto run_relay = [](bool wait_for_signal, int ready_fd) {
    const pid_t relay = ::fork();
    if (relay != 0) return relay;
    auto rc = userns::fork_into_keeper();
    if (rc) ::_exit(*rc);  // the relay
    // The verb's process.
    if (!wait_for_signal) ::_exit(7);
    [[maybe_unused]] ssize_t n = ::write(ready_fd, "r", 1);
    ::pause();
    ::_exit(0);
  };
  int st = 0;
  pid_t relay = run_relay(false, -1);
  ASSERT_GT(relay, 0);
  ASSERT_EQ(::waitpid(relay, &st, 0), relay);
  ASSERT_TRUE(WIFEXITED(st));
  EXPECT_EQ(WEXITSTATUS(st), 7);

  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  relay = run_relay(true, p[1]);
  ASSERT_GT(relay, 0);
  char c = 0;
  ASSERT_EQ(::read(p[0], &c, 1), 1);  // the verb's process is waiting
  ::close(p[0]);
  ::close(p[1]);
  ASSERT_EQ(::kill(relay, SIGTERM), 0);
  ASSERT_EQ(::waitpid(relay, &st, 0), relay);
  ASSERT_TRUE(WIFSIGNALED(st)) << "status " << st;
  EXPECT_EQ(WTERMSIG(st), SIGTERM);
}

}  // namespace
}  // namespace tb
