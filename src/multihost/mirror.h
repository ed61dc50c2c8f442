// DirMirror: a directory kept alike on several hosts, file by file, for a job whose ranks run on
// several hosts of a lab (issue 19). Two kinds:
//   kWhole  — files written once, whole, by a rename (the rendezvous store: collective/store.h,
//             Gloo's FileStore): a file is sent once, as soon as it is there;
//   kAppend — files that only grow (a rank's rows and log): the bytes past what was sent, whole
//             lines only until the final scan.
// What is never mirrored: a name with a component starting with '.', a temporary file of
// core/safe_file.h ("<name>.tmp<pid>-<n>"), the progress board ("*.progress": mapped and
// rewritten in place by the ranks of one host, collective/progress.h), the top-level names in
// `skip`, anything deeper than kMaxDepth. A scan reads at most kMaxFiles files.
// Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "core/error.h"

namespace tb::multihost {

inline constexpr size_t kMaxChunk = 1u << 20;  // bytes of one file per message
inline constexpr int kMaxDepth = 4;
inline constexpr size_t kMaxFiles = 20000;

struct Chunk {
  std::string rel;  // path below the mirrored directory, "rank3.jsonl", "logs/rank3.log"
  uint64_t offset = 0;
  std::string data;
};

nlohmann::json to_json(const Chunk& c);
Result<Chunk> chunk_from_json(const nlohmann::json& j);

class DirMirror {
 public:
  enum class Mode { kWhole, kAppend };
  DirMirror(std::string root, Mode mode, std::set<std::string> skip = {})
      : root_(std::move(root)), mode_(mode), skip_(std::move(skip)) {}

  // What this host has that was not sent yet (and did not come from apply()). `final`: kAppend
  // also sends a last partial line.
  std::vector<Chunk> scan(bool final = false);
  // Writes another host's chunk: kWhole the file atomically, once; kAppend at its offset (a
  // chunk already written is skipped; a gap is an error). The path is checked: relative, no
  // empty, "." or ".." component, no deeper than kMaxDepth, not a name scan() would skip.
  Status apply(const Chunk& c);

  const std::string& root() const { return root_; }

 private:
  bool mirrored_name(const std::string& rel) const;
  void walk(const std::string& rel_dir, int depth, std::vector<std::string>& files) const;

  std::string root_;
  Mode mode_;
  std::set<std::string> skip_;
  std::map<std::string, uint64_t> sent_;  // kAppend: bytes sent; kWhole: present = sent/applied
};

}  // namespace tb::multihost
