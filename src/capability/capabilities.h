// Capabilities: what this kernel and machine offer testbedctl, found by real probes.
//
// Each capability is probed by making the object it names (a veth, an htb qdisc, an NFQUEUE rule,
// an rxe device) inside an anonymous network namespace in a forked child that reports back over a
// pipe; nothing is named, nothing outlives the child, and each child is killed after 5 s. A few
// capabilities are not kernel objects (root, FRR binaries, /dev/kvm, qemu) and are checked
// directly. The registry (capabilities.cc) is one table row per capability: its name, probe,
// what it enables in testbedctl and what testbedctl does without it.
//
// `testbedctl doctor` prints the result; the planner can choose backends from it
// (choose_backends). check_all() forks; call it from one thread at a time.
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "plan/host.h"

namespace tb::capability {

struct CheckOutcome {
  bool available = false;
  std::string detail;  // what the probe saw, e.g. the kernel's errno and extack text
};

struct Capability {
  std::string name;
  bool available = false;
  std::string detail;      // what the probe saw, e.g. the kernel's errno text
  std::string enables;     // what testbedctl does with it
  std::string fallback;    // what testbedctl does without it
  std::string method;      // how it was probed
  bool essential = false;  // without it no lab can be built
};

// One registry row (STYLE rule 8): adding a probe is adding a row.
struct CheckSpec {
  std::string_view name;
  CheckOutcome (*probe)();
  std::string_view enables;
  std::string_view fallback;
  std::string_view method;
  bool essential = false;
};

std::span<const CheckSpec> check_registry();

// The rdma_rxe probe alone (`up` decides on Soft-RoCE with it): a real RC send between rxe
// devices in two throwaway namespaces.
CheckOutcome check_rxe();

// Runs every probe in registry order.
std::vector<Capability> check_all();

// The mechanisms testbedctl would pick given `caps`.
struct Backends {
  std::string shaping;    // "netem" | "htb/tbf + nfqueue delay stage" | ...
  std::string transport;  // "rdma" | "tcp"
  std::string failover;   // "bgp+bfd (frr)" | "static routes or the built-in probing agent"
};
Backends choose_backends(const std::vector<Capability>& caps);

// Names of essential capabilities that are missing, in registry order.
std::vector<std::string> missing_essentials(const std::vector<Capability>& caps);

// uname -r.
std::string kernel_release();

// One row of core/extras.h's table as found on this host.
struct ExtraFound {
  std::string name, package, group, needed_for;
  std::string path;  // where it is; "" when missing
};
// Every row of core/extras.h, located.
std::vector<ExtraFound> find_extras();

struct DoctorReport {
  std::string kernel;
  std::vector<Capability> capabilities;
  Backends chosen;
  std::vector<std::string> missing_essentials;
  std::vector<ExtraFound> extras;  // the optional programs and files, found or missing
  bool usable() const { return missing_essentials.empty(); }
};
DoctorReport make_report(std::string kernel, std::vector<Capability> caps);

// {"kernel", "usable", "missing_essentials", "chosen": {shaping_backend, transport, failover},
//  "capabilities": [{name, available, essential, detail, enables, fallback, method}],
//  "extras": [{name, found, path, package, group, needed_for}]}
nlohmann::json to_json(const DoctorReport& r);

// What the planner needs of this host (plan/host.h): the checks that decide shaping (netem, tbf,
// htb, nfqueue) and, when `with_rxe`, Soft-RoCE (a real RC send between two namespaces). Without
// root nothing can be checked: plan::assumed_host(), saying so. With a `cache_dir` (the run
// root), an answer probed earlier in this boot is used while nothing it depends on changed, and a
// fresh one is kept there (host_cache.h); "" probes every time.
plan::HostCaps host_for_plan(bool with_rxe, const std::string& cache_dir = "");

}  // namespace tb::capability
