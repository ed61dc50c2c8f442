#include "runner/exec.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>

#include "core/paths.h"
#include "core/unique_fd.h"

namespace tb::runner {

Status enter_node(const std::string& netns) {
  const paths::Roots where = paths::roots();
  const std::string path = where.netns + "/" + netns;
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_fail("open namespace " + path);
  if (::setns(fd.get(), CLONE_NEWNET) != 0) return sys_fail("enter namespace " + netns);
  // Same mount set-up as iproute2's netns_switch() (ip/ipnetns.c).
  if (::unshare(CLONE_NEWNS) != 0) return sys_fail("unshare mount namespace");
  if (::mount("", "/", nullptr, MS_SLAVE | MS_REC, nullptr) != 0)
    return sys_fail("make / a slave mount");
  // Every file in /etc/netns/<netns>/ (core/paths.h etc_netns) replaces its namesake in /etc
  // (iproute2's bind_etc()): the lab's hosts and resolv.conf.
  const std::string dir = where.etc_netns + "/" + netns;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      const std::string src = dir + "/" + name, dst = "/etc/" + name;
      if (::mount(src.c_str(), dst.c_str(), nullptr, MS_BIND, nullptr) != 0) {
        ::closedir(d);
        return sys_fail("bind " + src + " over " + dst);
      }
    }
    ::closedir(d);
  }
  ::umount2("/sys", MNT_DETACH);
  if (::mount(netns.c_str(), "/sys", "sysfs", 0, nullptr) != 0)
    return sys_fail("mount /sys for " + netns);
  return {};
}

Result<int> exec_in_netns(const std::string& netns, const std::vector<std::string>& argv) {
  if (argv.empty()) return bad_input("exec needs a command after --");
  // Like system(3): the terminal's SIGINT/SIGQUIT go to the child; we wait for it.
  struct sigaction ign {
  }, old_int{}, old_quit{};
  ign.sa_handler = SIG_IGN;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  pid_t pid = ::fork();
  if (pid < 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    return sys_fail("fork");
  }
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    if (auto r = enter_node(netns); !r) {
      std::fprintf(stderr, "testbedctl exec: %s\n", r.error().message.c_str());
      ::_exit(126);
    }
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    std::fprintf(stderr, "testbedctl exec: %s: %s\n", args[0], std::strerror(errno));
    ::_exit(errno == ENOENT ? 127 : 126);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace tb::runner
