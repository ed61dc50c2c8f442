// Starting a program without copying this process's address space. A fork copies the caller's
// page tables, which on the reference VM (2 vCPU, paravirtualised page tables) cost 2-5 ms for a
// 20-40 MB process — `testbedctl up` and the lab supervisor, which start one delay stage per
// namespace and one iptables-restore per shaped namespace (issue 34). Here the child shares our
// memory on a stack of its own (clone CLONE_VM | CLONE_VFORK, as glibc's posix_spawn does), and
// the caller resumes once the child has exec'd or failed. posix_spawn itself cannot enter a
// network namespace, which is why this exists.
//
// The child runs only system calls on data prepared here (no allocation, no locks): optionally
// a new process group or session, setns into a network namespace, stdin/stdout/stderr, one fd
// kept across the exec, every signal handler back to its default, the signal mask, execve.
// Thread-safe: each call has its own stack; other threads keep running (they share the memory
// the child reads, which the caller does not change until the call returns).
#pragma once

#include <signal.h>

#include <optional>
#include <string>
#include <vector>

#include "core/error.h"

namespace tb {

struct SpawnSpec {
  std::string path;               // no PATH search (execve)
  std::vector<std::string> argv;  // argv[0] included
  std::vector<std::string> env;   // the whole environment, "NAME=value"
  int netns_fd = -1;              // setns(CLONE_NEWNET) into it first (-1: stay)
  int stdin_fd = -1;              // -1: /dev/null
  int stdout_fd = -1;             // -1: ours
  int stderr_fd = -1;             // -1: ours
  int keep_fd = -1;               // kept open across the exec (FD_CLOEXEC cleared) and blocking
  bool new_group = false;         // setpgid(0, 0): a terminal's Ctrl-C does not reach it
  bool new_session = false;       // setsid(): a daemon, no terminal
  // Every fd above stderr but keep_fd closed: a daemon holds nothing of its starter's that is
  // not close-on-exec (a `flock` lock its caller ran under held for the lab's life, say).
  bool close_other_fds = false;
  // The signal mask it execs with; none: the calling thread's.
  std::optional<sigset_t> mask;
};

// Starts `spec` and returns its pid once it runs the program (its /proc/PID/environ is then
// spec.env). A step that fails in the child (setns, an fd, the exec) is an error naming the
// step and the program, and the child is reaped.
Result<int> spawn_process(const SpawnSpec& spec);

// Every signal handler of this process back to SIG_DFL (ignored ones stay ignored, as across an
// exec): a child about to run another program, or a fork running another main, must not run
// its parent's handlers. System calls only: safe in spawn_process's child and after a fork.
void reset_signal_handlers();

// This process's environment with `add` ("NAME=value") set, replacing any earlier NAME.
std::vector<std::string> environment_with(const std::vector<std::string>& add);

}  // namespace tb
