#include "core/safe_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <deque>
#include <filesystem>

namespace tb {
namespace {

// Links followed while walking one root, as the kernel's MAXSYMLINKS (include/linux/namei.h).
constexpr int kMaxLinks = 40;
// Attempts at a component that keeps appearing and vanishing under us (mkdirat EEXIST, then
// openat ENOENT): someone is racing the walk.
constexpr int kMaxRaces = 8;

std::string octal(mode_t mode) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "%04o", static_cast<unsigned>(mode & 07777));
  return buf;
}

std::string join(const std::string& dir, std::string_view name) {
  if (dir.empty()) return "/" + std::string(name);
  if (dir.back() == '/') return dir + std::string(name);
  return dir + "/" + std::string(name);
}

std::deque<std::string> split(std::string_view path) {
  std::deque<std::string> parts;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t end = std::min(path.find('/', at), path.size());
    parts.emplace_back(path.substr(at, end - at));
    at = end + 1;
  }
  return parts;
}

bool trusted_owner(uid_t uid) {
  return uid == 0 || uid == ::geteuid();
}

std::unexpected<Error> symlink_refused(const std::string& path) {
  return bad_input(path + " is a symlink; refusing to follow it");
}

// A directory files go in: owned by root or us, writable by no one else.
Status check_private(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0) return sys_fail("stat " + path);
  if (!trusted_owner(st.st_uid))
    return bad_input(path + " is owned by uid " + std::to_string(st.st_uid) +
                     ", not by root or this user; refusing to keep files in it");
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    return bad_input(path + " is writable by others (mode " + octal(st.st_mode) +
                     "); refusing to keep files in it (chmod go-w " + path + ")");
  return {};
}

// Makes `name` in `dir` with `mode` whatever the umask and returns it opened; an empty
// descriptor when it exists already (someone made it between our look and mkdirat).
Result<UniqueFd> make_dir(int dir, const std::string& name, const std::string& path, mode_t mode) {
  if (::mkdirat(dir, name.c_str(), mode) != 0) {
    if (errno == EEXIST) return UniqueFd();
    return sys_fail("create directory " + path);
  }
  UniqueFd fd(::openat(dir, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd)
    return errno == ELOOP || errno == ENOTDIR ? symlink_refused(path)
                                              : sys_fail("open directory " + path);
  if (::fchmod(fd.get(), mode) != 0) return sys_fail("chmod " + path);
  return fd;
}

enum class Walk { kRoot, kExisting, kBelow };

// The walk the header describes. `start` is the directory `parts` are relative to (for kBelow),
// `shown` its path for messages.
Result<UniqueFd> walk(UniqueFd start, std::string shown, std::deque<std::string> parts, Walk how,
                      mode_t mode) {
  UniqueFd cur = std::move(start);
  int links = 0, races = 0;
  while (!parts.empty()) {
    const std::string name = std::move(parts.front());
    parts.pop_front();
    if (how != Walk::kBelow && (name.empty() || name == ".")) continue;
    if (how == Walk::kBelow &&
        (name.empty() || name == "." || name == ".." || name.size() > NAME_MAX))
      return bad_input("\"" + name + "\" is not a directory name (under " + shown + ")");
    const std::string here = join(shown, name);
    UniqueFd next(::openat(cur.get(), name.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next) {
      if (how == Walk::kBelow) TB_TRY(check_private(next.get(), here));
      cur = std::move(next);
      if (name != "..") {
        shown = here;
      } else if (const size_t slash = shown.find_last_of('/'); slash != std::string::npos) {
        shown.resize(slash);
      }
      continue;
    }
    const int e = errno;
    if (e == ENOENT && how != Walk::kExisting) {
      auto made = make_dir(cur.get(), name, here, mode);
      if (!made) return std::unexpected(made.error());
      if (!made->valid()) {  // someone made it between our openat and mkdirat: look again
        if (++races > kMaxRaces) return fail("create directory " + here + ": it keeps changing");
        parts.push_front(name);
        continue;
      }
      cur = std::move(*made);
      shown = here;
      continue;
    }
    if (e != ENOTDIR && e != ELOOP) return sys_fail("open directory " + here, e);
    struct stat st {};
    if (::fstatat(cur.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      return sys_fail("stat " + here);
    if (!S_ISLNK(st.st_mode)) return bad_input(here + " is not a directory");
    if (how == Walk::kBelow) return symlink_refused(here);
    if (!trusted_owner(st.st_uid))
      return bad_input(here + " is a symlink owned by uid " + std::to_string(st.st_uid) +
                       ", not by root or this user; refusing to follow it");
    if (++links > kMaxLinks) return sys_fail("open directory " + here, ELOOP);
    std::string target(PATH_MAX, '\0');
    const ssize_t n = ::readlinkat(cur.get(), name.c_str(), target.data(), target.size());
    if (n < 0) return sys_fail("read symlink " + here);
    target.resize(static_cast<size_t>(n));
    auto more = split(target);
    parts.insert(parts.begin(), more.begin(), more.end());
    if (!target.empty() && target.front() == '/') {
      cur.reset(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
      if (!cur) return sys_fail("open /");
      shown.clear();
    }
  }
  return cur;
}

bool valid_file_name(std::string_view name) {
  return !name.empty() && name != "." && name != ".." && name.size() <= NAME_MAX &&
         name.find('/') == std::string_view::npos;
}

std::pair<std::string, std::string> split_path(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {".", path};
  return {slash == 0 ? "/" : path.substr(0, slash), path.substr(slash + 1)};
}

}  // namespace

Result<SafeDir> SafeDir::open_root(const std::string& path, mode_t mode) {
  const bool absolute = !path.empty() && path.front() == '/';
  UniqueFd start(::open(absolute ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!start) return sys_fail(absolute ? "open /" : "open the working directory");
  auto fd = walk(std::move(start), absolute ? "" : ".", split(path), Walk::kRoot, mode);
  if (!fd) return std::unexpected(fd.error());
  TB_TRY(check_private(fd->get(), path));
  return SafeDir(std::move(*fd), path);
}

Result<SafeDir> SafeDir::open_existing(const std::string& path) {
  const bool absolute = !path.empty() && path.front() == '/';
  UniqueFd start(::open(absolute ? "/" : ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!start) return sys_fail(absolute ? "open /" : "open the working directory");
  auto fd = walk(std::move(start), absolute ? "" : ".", split(path), Walk::kExisting, 0);
  if (!fd) return std::unexpected(fd.error());
  return SafeDir(std::move(*fd), path);
}

Result<SafeDir> SafeDir::sub(std::string_view rel, mode_t mode) const {
  UniqueFd start(::fcntl(fd_.get(), F_DUPFD_CLOEXEC, 0));
  if (!start) return sys_fail("open directory " + path_);
  auto fd = walk(std::move(start), path_, split(rel), Walk::kBelow, mode);
  if (!fd) return std::unexpected(fd.error());
  return SafeDir(std::move(*fd), join(path_, rel));
}

Status SafeDir::write(std::string_view name, std::string_view content, mode_t mode) const {
  const std::string path = join(path_, name);
  if (!valid_file_name(name)) return bad_input("\"" + std::string(name) + "\" is not a file name");
  static std::atomic<unsigned> counter{0};
  std::string tmp;
  UniqueFd fd;
  for (int attempt = 0; !fd; ++attempt) {
    tmp = std::string(name) + ".tmp" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    fd.reset(::openat(fd_.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                      mode));
    if (!fd && (errno != EEXIST || attempt >= kMaxRaces))
      return sys_fail("create " + join(path_, tmp));
  }
  auto drop = [&] { ::unlinkat(fd_.get(), tmp.c_str(), 0); };
  if (::fchmod(fd.get(), mode) != 0) {
    const int e = errno;
    drop();
    return sys_fail("chmod " + join(path_, tmp), e);
  }
  if (auto w = write_all(fd.get(), content, join(path_, tmp)); !w) {
    drop();
    return w;
  }
  if (::close(fd.release()) != 0) {
    const int e = errno;
    drop();
    return sys_fail("write " + join(path_, tmp), e);
  }
  // renameat would replace a symlink rather than write through it, but a link where our file
  // goes is someone's plan gone wrong: say so instead of quietly removing it.
  struct stat st {};
  if (::fstatat(fd_.get(), std::string(name).c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISLNK(st.st_mode)) {
    drop();
    return symlink_refused(path);
  }
  if (::renameat(fd_.get(), tmp.c_str(), fd_.get(), std::string(name).c_str()) != 0) {
    const int e = errno;
    drop();
    return sys_fail("rename " + join(path_, tmp) + " to " + path, e);
  }
  return {};
}

Result<UniqueFd> SafeDir::open(std::string_view name, int flags, mode_t mode) const {
  const std::string path = join(path_, name);
  if (!valid_file_name(name)) return bad_input("\"" + std::string(name) + "\" is not a file name");
  UniqueFd fd(::openat(fd_.get(), std::string(name).c_str(), flags | O_NOFOLLOW | O_CLOEXEC, mode));
  if (!fd) {
    if (errno == ELOOP) return symlink_refused(path);
    return sys_fail("open " + path);
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return sys_fail("stat " + path);
  if (!S_ISREG(st.st_mode)) return bad_input(path + " is not a regular file");
  if ((flags & O_CREAT) && (st.st_mode & 07777) != mode && ::fchmod(fd.get(), mode) != 0)
    return sys_fail("chmod " + path);
  return fd;
}

Status SafeDir::set_owner(uid_t uid, gid_t gid, mode_t mode) const {
  TB_CHECK((mode & S_IWOTH) == 0);
  // fchown and fchmod need a descriptor that is not O_PATH: this directory itself, opened again.
  UniqueFd fd(::openat(fd_.get(), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) return sys_fail("open directory " + path_);
  if (::fchown(fd.get(), uid, gid) != 0) return sys_fail("chown " + path_);
  if (::fchmod(fd.get(), mode) != 0) return sys_fail("chmod " + path_);
  return {};
}

Status write_file(const std::string& path, std::string_view content, mode_t mode) {
  const auto [dir, name] = split_path(path);
  auto d = SafeDir::open_existing(dir);
  if (!d) return std::unexpected(d.error());
  return d->write(name, content, mode);
}

Result<UniqueFd> open_file(const std::string& path, int flags, mode_t mode) {
  const auto [dir, name] = split_path(path);
  auto d = SafeDir::open_existing(dir);
  if (!d) return std::unexpected(d.error());
  return d->open(name, flags, mode);
}

Status write_all(int fd, std::string_view data, const std::string& what) {
  size_t off = 0;
  while (off < data.size()) {
    const ssize_t n = ::write(fd, data.data() + off, data.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_fail("write " + what);
    off += static_cast<size_t>(n);
  }
  return {};
}

Result<TempDir> TempDir::make(const std::string& prefix) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + prefix + ".XXXXXX";
  if (!::mkdtemp(tmpl.data())) return sys_fail("mkdtemp " + tmpl);
  return TempDir(std::move(tmpl));
}

TempDir& TempDir::operator=(TempDir&& o) noexcept {
  if (this != &o) {
    remove();
    path_ = std::exchange(o.path_, {});
  }
  return *this;
}

void TempDir::remove() {
  if (path_.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
  path_.clear();
}

}  // namespace tb
