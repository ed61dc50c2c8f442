// Running commands inside a lab node's namespace, the way `ip netns exec` does: enter the
// network namespace, take a private mount namespace, bind the node's hosts file over
// /etc/hosts and remount /sys so it shows the node's interfaces.
// Thread-safety: forks; call from one thread.
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace tb::runner {

// Runs argv (argv[0] looked up in PATH) in `netns` and waits. Returns the exit status
// (128 + signal number when it was killed, 127 when the program was not found).
Result<int> exec_in_netns(const std::string& netns, const std::vector<std::string>& argv);

// In a forked child: the namespace and mount set-up above. Exposed for the rank runner.
Status enter_node(const std::string& netns);

}  // namespace tb::runner
