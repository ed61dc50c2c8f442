// Where a lab's jobs keep their shared-memory segments (collective/shm/shm.h): files in
// /dev/shm named testbedctl.<lab>.<run id>.<lo>-<hi>, the owner marker in the name, so the job's
// orchestrator removes its own when the job ends and `down` removes every one of its lab's
// (a lab name has no '.': scenario/model.h). Pure names plus one remover; thread-safe.
#pragma once

#include <string>

#include "core/error.h"

namespace tb {

inline constexpr const char* kShmDir = "/dev/shm";

// "/dev/shm/testbedctl.<lab>."
inline std::string shm_lab_prefix(const std::string& lab, const std::string& dir = kShmDir) {
  return dir + "/testbedctl." + lab + ".";
}
// "/dev/shm/testbedctl.<lab>.<run id>."
inline std::string shm_job_prefix(const std::string& lab, const std::string& run_id,
                                  const std::string& dir = kShmDir) {
  return shm_lab_prefix(lab, dir) + run_id + ".";
}

// Unlinks every file whose path starts with `prefix` (its directory is listed, nothing is
// followed); returns how many. A missing directory is 0.
Result<int> remove_shm_files(const std::string& prefix);

}  // namespace tb
