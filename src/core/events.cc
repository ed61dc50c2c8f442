#include "core/events.h"

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "core/safe_file.h"

namespace tb {

Status append_event(const std::string& path, nlohmann::json event) {
  event["t_mono_ns"] = monotonic_ns();
  event["t_unix_ms"] = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::system_clock::now().time_since_epoch())
                           .count();
  const std::string line = event.dump() + "\n";
  auto fd = open_file(path, O_WRONLY | O_CREAT | O_APPEND);
  if (!fd) return std::unexpected(with_context(fd.error(), "event log"));
  if (::write(fd->get(), line.data(), line.size()) != static_cast<ssize_t>(line.size()))
    return sys_fail("append to event log " + path);
  return {};
}

}  // namespace tb
