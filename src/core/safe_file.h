// Files testbedctl writes, made so that a symlink another user planted is never written
// through (issue #12), with fixed modes whatever the umask.
//
// Every directory testbedctl keeps files in hangs below a root: the run root (/run/testbedctl),
// the results root (/var/lib/testbedctl/results), /etc/netns, /run/netns, or the directory of a
// file the user named (bench --json PATH).
//  - A root is walked from "/" (or the working directory) one component at a time with
//    openat(O_NOFOLLOW): a directory is entered, a missing one is made, and a symlink is
//    followed only when root or this user owns it (/var/run -> /run); one another user owns is
//    refused. The root itself must be owned by root or this user and writable by no one else.
//  - Below a root nothing is followed: each directory is entered with O_NOFOLLOW|O_DIRECTORY
//    relative to its parent's descriptor and must be owned by root or this user and writable by
//    no one else; each file is opened with O_NOFOLLOW relative to its directory's descriptor.
//  - What is made gets its mode by fchmod (directories 0755, files 0644), so the umask does not
//    matter and nothing is group- or world-writable.
// A symlink where one of these goes is an Error with exit code 2 that names it:
// "/run/testbedctl/hz/state.json is a symlink; refusing to follow it". So is a directory owned
// by another user or writable by others.
//
// SafeDir owns its descriptor (O_PATH); move-only; not thread-safe.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb {

inline constexpr mode_t kDirMode = 0755;
inline constexpr mode_t kFileMode = 0644;

class SafeDir {
 public:
  // The root `path` as above, missing directories made with `mode`.
  static Result<SafeDir> open_root(const std::string& path, mode_t mode = kDirMode);
  // A directory the user named for one file (--json's): walked as a root, but nothing is made
  // and its owner and mode are not checked (it may be /tmp); the file is still not followed.
  static Result<SafeDir> open_existing(const std::string& path);

  // `rel` below this directory ("hz" or "hz/20250101-120000/logs"): each component made with
  // `mode` where missing, never a symlink, owned by root or this user, writable by no one else.
  // No component may be empty, "." or "..".
  Result<SafeDir> sub(std::string_view rel, mode_t mode = kDirMode) const;

  // Replaces the file `name` with `content` atomically: a new temporary file in this directory
  // (O_EXCL|O_NOFOLLOW, fchmod `mode`), then renameat over `name`, which must not be a symlink.
  Status write(std::string_view name, std::string_view content, mode_t mode = kFileMode) const;
  // Opens the file `name` with `flags` (O_WRONLY|O_CREAT|O_APPEND, O_RDWR|O_CREAT, ...) plus
  // O_NOFOLLOW|O_CLOEXEC; it must be a regular file. With O_CREAT it gets `mode` by fchmod.
  Result<UniqueFd> open(std::string_view name, int flags, mode_t mode = kFileMode) const;

  // Gives this directory to `uid`:`gid` with `mode`, for a daemon that drops privileges to
  // write in it (FRR's, as root:frr 0770). Never pass a mode others can write.
  Status set_owner(uid_t uid, gid_t gid, mode_t mode) const;

  int fd() const { return fd_.get(); }
  const std::string& path() const { return path_; }

 private:
  SafeDir(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;  // as the caller named it, for messages and for child processes
};

// For callers that hold a whole path: its directory, which must exist, is opened as
// open_existing does and the file as SafeDir::write / SafeDir::open do.
Status write_file(const std::string& path, std::string_view content, mode_t mode = kFileMode);
Result<UniqueFd> open_file(const std::string& path, int flags, mode_t mode = kFileMode);

// Writes all of `data` to `fd` (retrying short writes and EINTR); `what` names it in the error.
Status write_all(int fd, std::string_view data, const std::string& what);

// A fresh private directory (mkdtemp, mode 0700) under $TMPDIR or /tmp, named PREFIX.XXXXXX,
// removed with all it holds when the TempDir is destroyed. Move-only.
class TempDir {
 public:
  TempDir() = default;
  static Result<TempDir> make(const std::string& prefix);
  TempDir(TempDir&& o) noexcept : path_(std::exchange(o.path_, {})) {}
  TempDir& operator=(TempDir&& o) noexcept;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() { remove(); }
  const std::string& path() const { return path_; }

 private:
  explicit TempDir(std::string path) : path_(std::move(path)) {}
  void remove();
  std::string path_;
};

}  // namespace tb
