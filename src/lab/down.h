// The `down` and `clean` use cases: removing what a lab made. `down` replays the lab's journal
// and sweeps its owner marker (lab.h down); `clean` sweeps markers alone, for when state is lost.
// `clean --all` cleans lab by lab, each under its lock: a lab whose lock another testbedctl holds
// (an `up` in progress) is left alone and named in the error (exit code 1) after the rest.
// Both need root (exit code 2 otherwise) and succeed when there is nothing left to remove.
// Not thread-safe (signal handlers are process-wide).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"

namespace tb::lab {

struct DownOptions {
  std::string target;  // a lab name, or a scenario file naming its lab
  // A lab over several hosts: the [[host]] the caller means; refused (exit code 2) when this
  // host's state of the lab says another ("" = whatever this host holds).
  std::string host;
};

struct DownReport {
  std::string lab;
  bool was_up = false;  // false: it had no state; only leftovers (if any) were removed
};

Result<DownReport> take_down(const DownOptions& o);

struct CleanOptions {
  std::string lab;   // this lab's leftovers (under its lock) ...
  bool all = false;  // ... or every lab's; exactly one of the two (exit code 2 otherwise)
};

// Root's clean --all also takes down every user's labs: inside each live keeper (core/userns.h
// as_user_in_keeper, that user's ids), every lab of that user's is taken down as that user's
// `down` would, then its leftovers cleaned.
struct UserClean {
  std::string user;
  int labs = 0;        // taken down
  int namespaces = 0;  // leftovers removed after
  std::string error;   // what failed, if anything
};

struct CleanReport {
  int namespaces = 0;            // how many were removed
  std::vector<UserClean> users;  // root's --all: each user with a live keeper
};

Result<CleanReport> clean_up(const CleanOptions& o);

}  // namespace tb::lab
