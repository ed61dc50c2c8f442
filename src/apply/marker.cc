#include "apply/marker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "core/unique_fd.h"

namespace tb::apply {

namespace {

// Lookups inside a lab never leave its namespace: no nameserver but loopback, where nothing
// listens, so a name the hosts file lacks fails at once instead of sending DNS into the lab.
constexpr const char* kResolvConf = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n";

Status write_all(int fd, const std::string& path, const std::string& content) {
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd, content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_fail("write " + path);
    off += static_cast<size_t>(n);
  }
  return {};
}

Status exists_error(const std::string& path) {
  return sys_fail("write " + path +
                  " (it exists and this lab did not make it; if an earlier "
                  "run left it, `testbedctl clean` removes it when it carries our marker)");
}

// Creates `path` with `content`, whole or not at all: the text goes into an unnamed file in the
// same directory (O_TMPFILE), which is linked to its name only once complete. A kill -9 or a
// failed write part-way leaves no file, where creating the name first would leave an empty or
// cut file without our marker, which no `down` or `clean` would remove. linkat does not
// overwrite: a file already there is not ours (EEXIST). Where the filesystem has no O_TMPFILE,
// the file is created by name (O_EXCL) and written.
Status write_new_file(const std::string& path, const std::string& content) {
  const std::string dir = path.substr(0, path.rfind('/'));
  UniqueFd tmp(::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0644));
  if (tmp) {
    TB_TRY(write_all(tmp.get(), path, content));
    const std::string self = "/proc/self/fd/" + std::to_string(tmp.get());
    if (::linkat(AT_FDCWD, self.c_str(), AT_FDCWD, path.c_str(), AT_SYMLINK_FOLLOW) == 0) return {};
    return errno == EEXIST ? exists_error(path) : sys_fail("write " + path + ": link");
  }
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return sys_fail("write " + path);
  // O_EXCL: a file that is already there is not ours to overwrite.
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (!fd && errno == EEXIST) return exists_error(path);
  if (!fd) return sys_fail("write " + path);
  return write_all(fd.get(), path, content);
}

// Removes `path` when its first line is `marker_line`; anything else is left alone.
Status remove_if_marked(const std::string& path, std::string_view marker_line) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno == ENOENT ? Status{} : sys_fail("remove " + path);
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

Status write_hosts_file(const std::string& etc_netns, const std::string& netns,
                        const std::string& content) {
  const std::string dir = etc_netns + "/" + netns;
  if (mkdir(etc_netns.c_str(), 0755) < 0 && errno != EEXIST) return sys_fail("create " + etc_netns);
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) return sys_fail("create " + dir);
  TB_TRY(write_new_file(dir + "/hosts", content));
  return write_new_file(dir + "/resolv.conf",
                        std::string(first_line(content)) + "\n" + kResolvConf);
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
