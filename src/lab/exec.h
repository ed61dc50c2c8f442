// The `exec` use case: run a command inside one node's namespace of a live lab, the way
// `ip netns exec` does (runner/exec.h). The node is named as in the scenario ("hz/s0/g3") or
// as in its host name ("hz-s0-g3"); an unknown one is exit code 2 with examples of valid names.
// Needs root. Not thread-safe (forks).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace tb::lab {

struct ExecOptions {
  std::string lab;
  std::string node;
  std::vector<std::string> argv;  // the command and its arguments
};

// The command's exit status (128 + signal when killed, 127 when not found).
Result<int> exec_on_node(const ExecOptions& o);

}  // namespace tb::lab
