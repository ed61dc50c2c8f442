// Which shaping backend a lab uses: "auto" probes this kernel (doctor's real probes, only the
// ones that decide: netem, tbf, htb, nfqueue) and takes the first backend the registry prefers;
// any other value is taken as asked. Without root "auto" cannot probe and assumes tbf, saying so.
#pragma once

#include <string>

#include "core/error.h"

namespace tb::cli {

struct ShapingChoice {
  std::string backend;   // registry kind, or "none"
  bool stage_ok = true;  // NFQUEUE works: the userspace delay stage can run
  std::string how;       // "probed", "asked", "assumed (not root)"
};

Result<ShapingChoice> choose_shaping(const std::string& requested);

}  // namespace tb::cli
