// The delay stage's main (tb-delayd's command line, delayd_main.cc). tb-delayd's own main calls
// it; a lab's supervisor runs it in a fork of itself, without an exec (runner/supervisor.h
// ChildSpec::in_process: an exec and dynamic load of tb-delayd cost ~10 ms of CPU per stage on
// the reference VM, issue 34). `ready_fd` (>= 0): the fd to write the ready byte to once the
// stage serves; -1: $TESTBEDCTL_READY_FD, when set. Returns the exit code.
#pragma once

int delayd_main(int argc, char** argv, int ready_fd = -1);
