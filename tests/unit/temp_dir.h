// A fresh directory under /tmp for one test, removed with everything in it when this goes away.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>

#include "core/error.h"

namespace tb::testing_util {

class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tb-unit-test-XXXXXX";
    const char* p = mkdtemp(tmpl);
    TB_CHECK(p != nullptr);
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace tb::testing_util
