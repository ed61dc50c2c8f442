#include "apply/journal.h"

#include <fcntl.h>

#include <fstream>
#include <nlohmann/json.hpp>

namespace tb::apply {

Result<Journal> Journal::create(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) return sys_fail("create journal " + path);
  return Journal(std::move(fd), path);
}

Result<std::vector<plan::Op>> Journal::read(const std::string& path) {
  std::ifstream in(path);
  if (!in) return sys_fail("read journal " + path);
  std::vector<plan::Op> ops;
  std::string line;
  while (std::getline(in, line)) {
    if (in.eof()) break;  // no trailing newline: torn write, ignore
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return fail("journal " + path + ": unreadable line: " + line);
    auto op = plan::op_from_json(j);
    if (!op) return std::unexpected(with_context(op.error(), "journal " + path));
    ops.push_back(std::move(*op));
  }
  return ops;
}

void Journal::append(const plan::Op& op) {
  pending_ += plan::to_json(op).dump();
  pending_ += '\n';
  ops_.push_back(op);
}

Status Journal::flush() {
  size_t off = 0;
  while (off < pending_.size()) {
    ssize_t n = ::write(fd_.get(), pending_.data() + off, pending_.size() - off);
    if (n < 0) {
      if (errno == EINTR) continue;
      return sys_fail("write journal " + path_);
    }
    off += static_cast<size_t>(n);
  }
  pending_.clear();
  return {};
}

}  // namespace tb::apply
