// Lab state on disk: /run/testbedctl/<lab>/ holds state.json (what was built from which
// scenario, the topology, when, by which pid), journal.jsonl (apply/journal.h) and a lock file
// held by whichever verb is changing the lab. On most hosts /run is a tmpfs, so state ends with
// the boot, as do the namespaces it describes (where /run is on disk, `clean --all` after a
// reboot removes stale state). Override the root with TESTBEDCTL_RUN_DIR (tests).
// Not thread-safe.
#pragma once

#include <string>
#include <vector>

#include "apply/rxe.h"
#include "core/error.h"
#include "core/ipv4.h"
#include "core/safe_file.h"
#include "core/unique_fd.h"
#include "plan/plan.h"

namespace tb::lab {

// A host of a lab over several ([[host]]): its name and underlay address, as the plan had them.
struct LabHost {
  std::string name;
  Ipv4 underlay;
};

struct LabState {
  std::string lab;
  std::string scenario;  // absolute path of the scenario file
  std::string phase;     // "building", "up"
  int64_t created_unix = 0;
  int pid = 0;
  plan::Topology topo;
  std::string shaping;              // backend kind, "" = unshaped
  std::vector<plan::Stage> stages;  // delay stages under the lab's supervisor
  // RDMA on the rail: "rxe" when `up` made devices, else "none"; rdma_why says why (the doctor
  // probe's verdict), shown by `status` and every report.
  std::string rdma = "none";
  std::string rdma_why;
  std::vector<apply::RxeDevice> rxe;
  // A lab over several hosts: the [[host]] this state is (`up --host`), "" for a lab on one
  // host; and the plan digest every host of the lab computed alike (plan.h digest).
  std::string host;
  std::string digest;
  std::vector<LabHost> hosts;  // every host of the lab, [[host]] order (empty: one host)
};

std::string run_root();
std::string lab_dir(const std::string& lab);
std::string journal_path(const std::string& lab);
// The lab's directory, made where missing (core/safe_file.h: the run root walked as a root,
// the lab's directory below it never a symlink); every file of the lab is written through it.
Result<SafeDir> open_lab_dir(const std::string& lab);

// Labs with a state directory.
std::vector<std::string> list_labs();
// kBrief leaves out the topology and the stages (most of a large lab's state: 2.6 MB for 1,024
// GPUs); `down` and `clean` need only the phase, pid, host and Soft-RoCE devices.
enum class StateParts { kAll, kBrief };
Result<LabState> load_state(const std::string& lab, StateParts parts = StateParts::kAll);
Status save_state(const LabState& s);
Status remove_state(const std::string& lab);

// An exclusive, non-blocking lock on the lab (a POSIX record lock on <dir>/lock); released on
// destruction or when the process ends, however it ends. Children do not inherit it. Held by
// another process: the error's sys_errno is EWOULDBLOCK. One per lab per process (a second
// acquire in the same process would succeed, and destroying either would release both).
class LabLock {
 public:
  static Result<LabLock> acquire(const std::string& lab);

 private:
  explicit LabLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;
};

}  // namespace tb::lab
