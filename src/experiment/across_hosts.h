// `run` on a lab over several hosts (issue 19). Every host of the lab runs the same
// `testbedctl run LAB [flags]` (by hand or through scripts/tb-srun), and every host takes part —
// a host without a workload rank still holds link ends, routers and probe ends the timeline
// acts on. Roles as for bench (launch/across_hosts.h): the coordinator is the first [[host]]
// holding a workload rank (no workload: the first [[host]]); the others join it over the
// underlay with the plan digest and the run's digest (the workload job, the run's options, the
// faults and [expect]): different flags or timelines are exit 2 on both sides.
//
// Each host resolves every fault on the whole lab (the same faults, probes and timeline
// everywhere) and fires the steps of those it holds a part of (fires_here: a link end, a node of
// it), on its own part (fault/link_ops.h EndsHere), so a WAN link-down acts on both tunnel ends
// at the same moment: the coordinator measures each host's clock offset (multihost/relay.h's
// clock exchange, a few round trips, the shortest taken), fixes t0 on its own clock and gives
// each host t0 on that host's clock, so a host fires on time however late the message reaches
// it (clocks of real hosts differ; the offset and its error are in summary.json). Each host starts
// its own ranks (their store files and rows relayed as for bench), its route monitors and the
// probes whose ends are here (every host's servers listen before any client sends); the coordinator
// tells the others the workload's stop iteration (workload::stop_path); each joining host then
// sends its part — lab events, route changes, probe logs, errors — which the coordinator moves onto
// its own clock by the same offset, merges, analyses and judges; the joining hosts exit with its
// verdict.
//
// Not across hosts yet (exit 2, named): --resilient, checkpoint, command and training
// workloads, --transport rdma between hosts.
//
// Messages on the session (beside multihost/relay.h's job, put/append/exit, clock, start and
// done): coordinator → host {"stop": iter}; host → coordinator {"ready": true}, {"part": ...}
// (a long part goes in pieces: multihost/wire.h).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "experiment/experiment.h"
#include "fault/fault.h"
#include "lab/state.h"
#include "launch/across_hosts.h"
#include "scenario/model.h"
#include "workload/job.h"

namespace tb::experiment {

// This host's state of a lab over several hosts.
bool spans_hosts(const lab::LabState& st);

// The roles of a run whose workload ranks are on `rank_nodes` (none: no workload): the first
// [[host]] with a rank coordinates (none: the first [[host]]); every other host joins. Pure.
Result<launch::JobHosts> run_hosts(const lab::LabState& st,
                                   const std::vector<std::string>& rank_nodes);

// The hosts holding a part of `whole` (a fault resolved on the whole lab): the hosts of its
// links' ends, of a rank-kill's GPU; [[host]] order. Pure.
std::vector<std::string> fault_holders(const lab::LabState& st, const fault::Resolved& whole);
// Whether this host (st.host) fires `whole`'s steps (a lab on one host: always). Pure.
bool fires_here(const lab::LabState& st, const fault::Resolved& whole);

// What a run across hosts cannot do yet: exit 2 naming it. Nothing on a lab on one host.
Status check_across_hosts(const scenario::Scenario& s, const lab::LabState& st,
                          const RunOptions& o);

// What every host of a run must agree on: the workload's job (launch/across_hosts.h job_digest;
// nullptr: none), the options, the faults and [expect]. Pure.
std::string run_digest(const scenario::Scenario& s, const RunOptions& o, const workload::Job* job);

// The clock exchange's arithmetic (multihost/session.h).
using multihost::clock_offset;
using multihost::ClockSample;

// The whole run over several hosts, this host's role (run_scenario calls it once check_run
// passed on a lab that spans hosts). A joining host's result has `gathered_on` set and the
// coordinator's verdict.
Result<RunResult> run_across_hosts(const scenario::Scenario& s, lab::LabState& st,
                                   const RunOptions& o, const std::atomic<bool>& stop,
                                   const std::function<void(const std::string&)>& progress);

}  // namespace tb::experiment
