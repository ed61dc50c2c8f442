#include "netlink/netns.h"

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>

#include "core/paths.h"
#include "core/safe_file.h"

namespace tb::netlink {
namespace {

// Makes /run/netns a shared mount point, once per process, exactly as iproute2 ip/ipnetns.c
// netns_add does: mkdir, take an flock on it (concurrent setups could stack mounts endlessly,
// Debian bug 949235), then "mount --make-shared", bind-mounting the directory on itself first
// if it is not a mount point yet (EINVAL). The directory is made, or checked, as a root of
// core/safe_file.h: not a symlink another user planted, writable by root only.
Status prepare_run_dir_once() {
  std::string dir = netns_run_dir();
  if (auto d = SafeDir::open_root(dir); !d) return std::unexpected(d.error());
  UniqueFd lock(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!lock) return sys_fail("open " + dir);
  if (flock(lock.get(), LOCK_EX) < 0) return sys_fail("lock " + dir);
  bool made_mount = false;
  while (mount("", dir.c_str(), "none", MS_SHARED | MS_REC, nullptr) < 0) {
    if (errno != EINVAL || made_mount) return sys_fail("mount --make-shared " + dir);
    if (mount(dir.c_str(), dir.c_str(), "none", MS_BIND | MS_REC, nullptr) < 0)
      return sys_fail("bind-mount " + dir + " on itself");
    made_mount = true;
  }
  return {};  // the flock goes with the descriptor
}

Status prepare_run_dir() {
  static std::once_flag once;
  static Status result;
  std::call_once(once, [] { result = prepare_run_dir_once(); });
  return result;
}

std::string thread_netns_path() {
  return "/proc/self/task/" + std::to_string(gettid()) + "/ns/net";
}

}  // namespace

Result<UniqueFd> current_netns() {
  UniqueFd fd(::open(thread_netns_path().c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_fail("open this thread's network namespace");
  return fd;
}

Result<ScopedNetns> ScopedNetns::enter(int netns_fd) {
  auto saved = current_netns();
  if (!saved) return std::unexpected(saved.error());
  if (setns(netns_fd, CLONE_NEWNET) < 0) return sys_fail("enter network namespace");
  return ScopedNetns(std::move(*saved));
}

Result<ScopedNetns> ScopedNetns::enter_new() {
  auto saved = current_netns();
  if (!saved) return std::unexpected(saved.error());
  if (unshare(CLONE_NEWNET) < 0) return sys_fail("create network namespace (unshare)");
  return ScopedNetns(std::move(*saved));
}

ScopedNetns::~ScopedNetns() {
  if (saved_.valid()) TB_CHECK(setns(saved_.get(), CLONE_NEWNET) == 0);
}

bool valid_netns_name(std::string_view name) {
  return !name.empty() && name.size() < NAME_MAX && name.find('/') == std::string_view::npos &&
         name != "." && name != "..";
}

std::string netns_run_dir() {
  return paths::roots().netns;
}

std::string netns_path(std::string_view name) {
  return netns_run_dir() + "/" + std::string(name);
}

Result<UniqueFd> create_named_netns(const std::string& name,
                                    const std::function<Status()>& inside) {
  const std::string what = "create netns " + name;
  if (!valid_netns_name(name)) return bad_input(what + ": not a valid namespace name");
  if (auto r = prepare_run_dir(); !r) return std::unexpected(with_context(r.error(), what));
  const std::string path = netns_path(name);
  {
    UniqueFd f(::open(path.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0));
    if (!f) return sys_fail(what);
  }
  auto undo_file = [&] {
    umount2(path.c_str(), MNT_DETACH);
    unlink(path.c_str());
  };
  UniqueFd ns;
  {
    auto sw = ScopedNetns::enter_new();
    if (!sw) {
      undo_file();
      return std::unexpected(with_context(sw.error(), what));
    }
    const std::string self = thread_netns_path();
    // `inside` runs before the bind mount: whatever it marks the namespace with is there
    // before the name is, so a kill between the two leaves an empty file, never an unmarked
    // namespace.
    if (inside) {
      if (auto r = inside(); !r) {
        undo_file();
        return std::unexpected(with_context(r.error(), what));
      }
    }
    if (mount(self.c_str(), path.c_str(), "none", MS_BIND, nullptr) < 0) {
      int e = errno;
      undo_file();
      return sys_fail(what + ": bind-mount " + self + " on " + path, e);
    }
    ns.reset(::open(self.c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) {
      int e = errno;
      undo_file();
      return sys_fail(what + ": open " + self, e);
    }
  }  // back in the caller's namespace
  return ns;
}

Status delete_named_netns(const std::string& name) {
  const std::string what = "delete netns " + name;
  if (!valid_netns_name(name)) return bad_input(what + ": not a valid namespace name");
  const std::string path = netns_path(name);
  // EINVAL: not a mount point (a half-made entry); ENOENT: already gone. Both leave unlink.
  if (umount2(path.c_str(), MNT_DETACH) < 0 && errno != EINVAL && errno != ENOENT)
    return sys_fail(what + ": unmount " + path);
  if (unlink(path.c_str()) < 0 && errno != ENOENT) return sys_fail(what + ": remove " + path);
  return {};
}

bool is_half_made_netns(const std::string& name) {
  if (!valid_netns_name(name)) return false;
  struct stat file {
  }, dir{};
  if (::stat(netns_path(name).c_str(), &file) != 0 || ::stat(netns_run_dir().c_str(), &dir) != 0)
    return false;
  // A mounted namespace lives on nsfs, another device than the directory's.
  return S_ISREG(file.st_mode) && file.st_size == 0 && file.st_dev == dir.st_dev;
}

Result<UniqueFd> open_named_netns(const std::string& name) {
  if (!valid_netns_name(name)) return bad_input("open netns " + name + ": not a valid name");
  UniqueFd fd(::open(netns_path(name).c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_fail("open netns " + name);
  return fd;
}

Result<std::vector<std::string>> list_named_netns() {
  std::string dir = netns_run_dir();
  std::vector<std::string> names;
  DIR* d = opendir(dir.c_str());
  if (!d) {
    if (errno == ENOENT) return names;
    return sys_fail("list " + dir);
  }
  while (dirent* e = readdir(d)) {
    std::string_view n = e->d_name;
    if (n != "." && n != "..") names.emplace_back(n);
  }
  closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

namespace {

bool valid_sysctl_key(std::string_view key) {
  return !key.empty() && key.front() != '/' && key.find("..") == std::string_view::npos;
}

// Opens /proc/sys/<key> from inside the namespace: /proc/sys/net resolves against the opening
// thread's namespace, and the open file keeps pointing there after we switch back.
Result<UniqueFd> open_sysctl(int netns_fd, std::string_view key, int flags) {
  if (!valid_sysctl_key(key)) return bad_input("\"" + std::string(key) + "\" is not a sysctl key");
  const std::string path = "/proc/sys/" + std::string(key);
  auto sw = ScopedNetns::enter(netns_fd);
  if (!sw) return std::unexpected(sw.error());
  UniqueFd fd(::open(path.c_str(), flags | O_CLOEXEC));
  if (!fd) return sys_fail("open " + path);
  return fd;
}

}  // namespace

Status write_sysctl(int netns_fd, std::string_view key, std::string_view value) {
  auto fd = open_sysctl(netns_fd, key, O_WRONLY);
  if (!fd) return std::unexpected(fd.error());
  std::string v(value);
  v += '\n';
  ssize_t n = ::write(fd->get(), v.data(), v.size());
  if (n < 0)
    return sys_fail("write " + v.substr(0, v.size() - 1) + " to /proc/sys/" + std::string(key));
  return {};
}

Result<std::string> read_sysctl(int netns_fd, std::string_view key) {
  auto fd = open_sysctl(netns_fd, key, O_RDONLY);
  if (!fd) return std::unexpected(fd.error());
  char buf[4096];
  ssize_t n = ::read(fd->get(), buf, sizeof(buf));
  if (n < 0) return sys_fail("read /proc/sys/" + std::string(key));
  std::string s(buf, static_cast<size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

}  // namespace tb::netlink
