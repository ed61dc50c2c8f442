#include "core/shm_names.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <memory>

#include "core/unique_fd.h"

namespace tb {

Result<int> remove_shm_files(const std::string& prefix) {
  const auto slash = prefix.rfind('/');
  TB_CHECK(slash != std::string::npos && slash + 1 < prefix.size());
  const std::string dir = slash == 0 ? "/" : prefix.substr(0, slash);
  const std::string start = prefix.substr(slash + 1);
  UniqueFd fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT) return 0;
    return sys_fail("open " + dir);
  }
  const int dfd = ::dup(fd.get());
  if (dfd < 0) return sys_fail("dup " + dir);
  std::unique_ptr<DIR, int (*)(DIR*)> d(::fdopendir(dfd), ::closedir);
  if (!d) {
    ::close(dfd);
    return sys_fail("list " + dir);
  }
  int n = 0;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (!name.starts_with(start)) continue;
    // unlinkat never follows: a symlink with the name goes, not what it points to.
    if (::unlinkat(fd.get(), name.c_str(), 0) == 0)
      ++n;
    else if (errno != ENOENT)
      return sys_fail("remove " + dir + "/" + name);
  }
  return n;
}

}  // namespace tb
