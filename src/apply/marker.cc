#include "apply/marker.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/unique_fd.h"

namespace tb::apply {

Status write_hosts_file(const std::string& etc_netns, const std::string& netns,
                        const std::string& content) {
  const std::string dir = etc_netns + "/" + netns;
  const std::string path = dir + "/hosts";
  if (mkdir(etc_netns.c_str(), 0755) < 0 && errno != EEXIST) return sys_fail("create " + etc_netns);
  if (mkdir(dir.c_str(), 0755) < 0 && errno != EEXIST) return sys_fail("create " + dir);
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return sys_fail("write " + path);
  size_t off = 0;
  while (off < content.size()) {
    ssize_t n = ::write(fd.get(), content.data() + off, content.size() - off);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_fail("write " + path);
    off += static_cast<size_t>(n);
  }
  return {};
}

Status remove_hosts_file_if_ours(const std::string& etc_netns, const std::string& netns,
                                 std::string_view marker_line) {
  const std::string dir = etc_netns + "/" + netns;
  const std::string path = dir + "/hosts";
  if (marker_line.empty()) return {};  // nothing to recognise ours by
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return errno == ENOENT ? Status{} : sys_fail("remove " + path);
  // One byte past the marker: the newline that must end the first line (or end of file).
  std::string head(marker_line.size() + 1, '\0');
  ssize_t n = ::read(fd.get(), head.data(), head.size());
  if (n < 0) return sys_fail("remove " + path + ": read");
  head.resize(static_cast<size_t>(n));
  if (first_line(head) != marker_line) return {};
  if (unlink(path.c_str()) < 0 && errno != ENOENT) return sys_fail("remove " + path);
  rmdir(dir.c_str());  // only succeeds when nothing else is left in it
  return {};
}

}  // namespace tb::apply
