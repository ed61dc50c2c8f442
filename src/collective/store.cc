#include "collective/store.h"

#include <fcntl.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include "core/safe_file.h"

namespace tb::collective {

Status FileStore::set(const std::string& key, const std::string& value) const {
  // A temporary file and rename (core/safe_file.h): a reader sees the whole value or none.
  if (auto w = write_file(dir_ + "/" + key, value); !w)
    return std::unexpected(with_context(w.error(), "store"));
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
