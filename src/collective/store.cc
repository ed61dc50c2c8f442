#include "collective/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "core/unique_fd.h"

namespace tb::collective {

Status FileStore::set(const std::string& key, const std::string& value) const {
  const std::string path = dir_ + "/" + key;
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return sys_fail("store: create " + tmp);
  if (::write(fd.get(), value.data(), value.size()) != static_cast<ssize_t>(value.size()))
    return sys_fail("store: write " + tmp);
  fd.reset();
  if (::rename(tmp.c_str(), path.c_str()) != 0) return sys_fail("store: rename to " + path);
  return {};
}

Result<std::string> FileStore::get(const std::string& key,
                                   std::chrono::milliseconds timeout) const {
  const std::string path = dir_ + "/" + key;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto pause = std::chrono::milliseconds(1);
  for (;;) {
    std::ifstream in(path);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      return ss.str();
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return fail("rendezvous: no '" + key + "' in " + dir_ + " after " +
                  std::to_string(timeout.count()) + " ms (did that rank start?)");
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, std::chrono::milliseconds(20));
  }
}

}  // namespace tb::collective
