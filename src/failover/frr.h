// FRR for [failover] mode = "bfd": the configuration of one transit router's zebra, bfdd and
// bgpd (pure, unit-tested), and the supervisor children that run them in its namespace as
// user frr (Debian's frr package; its vty group check refuses root), each in the foreground
// with its own pid file, zserv socket and vty directory under <lab dir>/frr/<netns>/, logging
// to stdout (the child's log). The vty TCP ports are disabled (-P 0).
#pragma once

#include <string>
#include <vector>

#include "core/error.h"
#include "core/safe_file.h"
#include "plan/plan.h"
#include "runner/supervisor.h"

namespace tb::failover {

std::string frr_bgpd_conf(const plan::Router& r);
std::string frr_bfdd_conf(const plan::Router& r);

// zebra, bgpd and bfdd are executable in /usr/lib/frr ($TESTBEDCTL_FRR_DIR overrides it;
// core/extras.h) and group frr exists; else an exit-2 error naming the Debian package frr.
Status frr_installed();

// Writes the configs under <lab_dir>/frr/<netns>/ (0644) and returns the three children (zebra
// first). That directory is root:frr 0770: the daemons, as user frr, put their sockets and pid
// files there; no other user can write it. Exit-2 error when frr is not installed.
Result<std::vector<runner::ChildSpec>> frr_children(const SafeDir& lab_dir, const plan::Router& r);

// Waits until every router has a route to every network its neighbors announce (BGP up),
// bounded by `timeout_ms`.
Status wait_for_bgp(const std::vector<plan::Router>& routers, int timeout_ms);

}  // namespace tb::failover
