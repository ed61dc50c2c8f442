#include "apply/journal.h"

#include <fcntl.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/safe_file.h"

namespace tb::apply {

Result<Journal> Journal::create(const std::string& path) {
  auto fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  if (!fd) return std::unexpected(with_context(fd.error(), "create journal"));
  return Journal(std::move(*fd), path);
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
  TB_TRY(write_all(fd_.get(), pending_, "journal " + path_));
  pending_.clear();
  return {};
}

}  // namespace tb::apply
