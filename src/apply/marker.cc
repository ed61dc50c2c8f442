#include "apply/marker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "core/paths.h"
#include "core/safe_file.h"
#include "core/unique_fd.h"

namespace tb::apply {

std::string etc_netns_dir() {
  return paths::roots().etc_netns;
}

namespace {

// Lookups inside a lab never leave its namespace: no nameserver but loopback, where nothing
// listens, so a name the hosts file lacks fails at once instead of sending DNS into the lab.
constexpr const char* kResolvConf = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";

Status exists_error(const std::string& path) {
  return sys_fail("write " + path +
                      " (it exists and this lab did not make it; if an earlier "
                      "run left it, `testbedctl clean` removes it when it carries our marker)",
                  EEXIST);
}

// Creates <dir>/<name> with `content`, whole or not at all: the text goes into an unnamed file
// in the same directory (O_TMPFILE), which is linked to its name only once complete. A kill -9
// or a failed write part-way leaves no file, where creating the name first would leave an empty
// or cut file without our marker, which no `down` or `clean` would remove. linkat neither
// overwrites nor follows a symlink planted at the name: a file already there is not ours
// (EEXIST). Where the filesystem has no O_TMPFILE, the file is created by name (O_EXCL).
// With `shared` (marker.h SharedFiles): a file of the same content written before is linked to
// the name instead (whole already); the file written here is kept for the next.
Status write_new_file(const SafeDir& dir, const std::string& name, const std::string& content,
                      SharedFiles* shared) {
  const std::string path = dir.path() + "/" + name;
  auto link_fd = [&](int fd) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd);
    return ::linkat(AT_FDCWD, self.c_str(), dir.fd(), name.c_str(), AT_SYMLINK_FOLLOW);
  };
  if (const int same = shared ? shared->find(content) : -1; same >= 0) {
    if (link_fd(same) == 0) return {};
    if (errno == EEXIST) return exists_error(path);
    // Else it is gone (ENOENT: its last name removed, an undo) or cannot take another link
    // (EMLINK): this one gets a file of its own, which later ones share.
  }
  UniqueFd tmp(::openat(dir.fd(), ".", O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644));
  if (tmp) {
    if (::fchmod(tmp.get(), 0644) != 0) return sys_fail("chmod " + path);
    TB_TRY(write_all(tmp.get(), content, path));
    if (link_fd(tmp.get()) != 0)
      return errno == EEXIST ? exists_error(path) : sys_fail("write " + path + ": link");
    if (shared) shared->keep(content, std::move(tmp));
    return {};
  }
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return sys_fail("write " + path);
  // O_EXCL: a file that is already there (a symlink included) is not ours to overwrite.
  auto fd = dir.open(name, O_WRONLY | O_CREAT | O_EXCL);
  if (!fd && fd.error().sys_errno == EEXIST) return exists_error(path);
  if (!fd) return std::unexpected(fd.error());
  TB_TRY(write_all(fd->get(), content, path));
  if (shared) shared->keep(content, std::move(*fd));
  return {};
}

// Removes `path` when its first line is `marker_line`; anything else is left alone.
Status remove_if_marked(const std::string& path, std::string_view marker_line) {
  // O_NOFOLLOW: a symlink is not ours (we write regular files), so it is left alone.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return errno == ENOENT || errno == ELOOP ? Status{} : sys_fail("remove " + path);
  // One byte past the marker: the newline that must end the first line (or end of file).
  std::string head(marker_line.size() + 1, '\0');
  ssize_t n = ::read(fd.get(), head.data(), head.size());
  if (n < 0) return sys_fail("remove " + path + ": read");
  head.resize(static_cast<size_t>(n));
  if (first_line(head) != marker_line) return {};
  if (unlink(path.c_str()) < 0 && errno != ENOENT) return sys_fail("remove " + path);
  return {};
}

}  // namespace

int SharedFiles::find(const std::string& content) const {
  auto it = by_content_.find(content);
  return it == by_content_.end() ? -1 : it->second.get();
}

void SharedFiles::keep(const std::string& content, UniqueFd fd) {
  by_content_.insert_or_assign(content, std::move(fd));
}

Status write_hosts_file(const std::string& etc_netns, const std::string& netns,
                        const std::string& content, SharedFiles* shared) {
  if (netns.empty() || netns.find('/') != std::string::npos || netns == "." || netns == "..")
    return bad_input("write hosts file: \"" + netns + "\" is not a namespace name");
  auto root = SafeDir::open_root(etc_netns);
  if (!root) return std::unexpected(root.error());
  auto dir = root->sub(netns);
  if (!dir) return std::unexpected(dir.error());
  TB_TRY(write_new_file(*dir, "hosts", content, shared));
  return write_new_file(*dir, "resolv.conf", std::string(first_line(content)) + "\n" + kResolvConf,
                        shared);
}

Status remove_hosts_file_if_ours(const std::string& etc_netns, const std::string& netns,
                                 std::string_view marker_line) {
  if (marker_line.empty()) return {};  // nothing to recognise ours by
  const std::string dir = etc_netns + "/" + netns;
  TB_TRY(remove_if_marked(dir + "/resolv.conf", marker_line));
  TB_TRY(remove_if_marked(dir + "/hosts", marker_line));
  rmdir(dir.c_str());  // only succeeds when nothing else is left in it
  return {};
}

}  // namespace tb::apply
