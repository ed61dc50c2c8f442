// FileStore: the rendezvous ranks meet through, a directory every namespace of the lab can
// see (network namespaces share the filesystem), so it needs no network set-up. set() writes
// a temporary file and renames it into place, so a reader sees all of a value or none.
// Keys are plain names ([A-Za-z0-9._-]). Thread-safe (no shared state beyond the directory).
#pragma once

#include <chrono>
#include <string>

#include "core/error.h"

namespace tb::collective {

class FileStore {
 public:
  explicit FileStore(std::string dir) : dir_(std::move(dir)) {}
  const std::string& dir() const { return dir_; }

  Status set(const std::string& key, const std::string& value) const;
  // Waits (polling, bounded by `timeout`) for the key; the error names the key and the wait.
  Result<std::string> get(const std::string& key, std::chrono::milliseconds timeout) const;

 private:
  std::string dir_;
};

}  // namespace tb::collective
