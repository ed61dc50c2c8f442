// Journal: the write-ahead record of every op `up` started, one JSON object per line, under
// /run/testbedctl/<lab>/journal.jsonl. An op is appended before it is submitted, so after a
// crash the journal names everything that may exist; undo treats "not found" as success.
// Owns its file descriptor. Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"
#include "plan/op.h"

namespace tb::apply {

class Journal {
 public:
  // Creates (truncates) the journal at `path`.
  static Result<Journal> create(const std::string& path);
  // Reads every complete line; a torn last line (crash mid-write) is ignored.
  static Result<std::vector<plan::Op>> read(const std::string& path);
  // read() less the ops teardown skips (applier.h goes_with_a_namespace), which are most of a
  // lab's: an op that lives inside a namespace the journal creates (addr, route, sysctl, shape,
  // stage-rule, bridge; a veth by either end) goes with that namespace. Such a line is told from
  // its text alone (the compact JSON append() writes: its one "op" key, its one "netns" key, two
  // for a veth) and not parsed: `down` of 1,024 GPUs reads 18,613 lines, of which it parses ~2,500.
  // A line not laid out so is parsed and kept; teardown skips it as before.
  static Result<std::vector<plan::Op>> read_for_teardown(const std::string& path);

  // Buffers the op; flush() writes buffered lines with one write(2).
  void append(const plan::Op& op);
  Status flush();
  const std::vector<plan::Op>& ops() const { return ops_; }

 private:
  explicit Journal(UniqueFd fd, std::string path) : fd_(std::move(fd)), path_(std::move(path)) {}
  UniqueFd fd_;
  std::string path_;
  std::string pending_;
  std::vector<plan::Op> ops_;
};

}  // namespace tb::apply
