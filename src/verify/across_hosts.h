// `verify` on a lab over several hosts (issue 19). Every host runs the same `testbedctl verify
// LAB [flags]`; each computes the same classes (classes.h link_classes: a class's representative
// and the host that measures it, and for a link between hosts the host that serves at its B end)
// and the same roles: the first [[host]] (scenario order) with a part coordinates, listening on
// its underlay address; every other host with a part joins it (multihost/session.h: the plan
// digest, and a digest of verify's flags; a mismatch is exit 2 on both sides, as bench's).
//
// The coordinator walks the classes in order, one at a time (measurements never overlap):
//   - a class wholly on one host: that host measures it — the coordinator itself, or it sends
//     {"measure": i} and gets {"result": {"class": i, "result": wire}} (result_json.h);
//   - a class whose representative crosses hosts (a VXLAN tunnel): the host holding B's end is
//     asked first, {"serve": i}, starts `tb-probe serve` at B's end (measure.h ServeEnd) and
//     answers {"serving": {"class": i, "end": {...}}} once it listens; the host holding A's end
//     then measures as on one host (its clients in A's namespace, to B's address: the probes
//     cross the lab's own link, the tunnel, never the underlay), the server named by the answer;
//     then {"unserve": i} stops the server, answered {"unserved": i}.
// A joining host answers those until {"done": {"rc": N, "where": TEXT}}, the coordinator's
// verdict, which it exits with; a measuring host says {"again": {"class", "n", "why"}} before a
// further reading. Every wait is bounded (class_limit); a host gone mid-run fails the classes it
// had; on a joining host every server it started is stopped (by pid) when the session ends,
// however it ends.
// Not thread-safe: forks; one thread drives a session.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/ipv4.h"
#include "lab/state.h"
#include "multihost/relay.h"
#include "multihost/session.h"
#include "verify/paths.h"
#include "verify/result.h"

namespace tb::verify {

// How long the coordinator waits for the other hosts to join, and a host for the coordinator.
inline constexpr std::chrono::seconds kVerifyJoinTimeout = multihost::kJoinTimeout;

// The figures in force on each link of this host's lab: the scenario's, or the last `link set`
// made here.
FiguresOf figures_in_force(const lab::LabState& st);

// What measuring a class on this host needs.
struct ClassContext {
  const lab::LabState* st = nullptr;
  Settings settings;
  std::string tb_probe;
  std::string work_dir;                  // the run's directory under the lab's
  std::vector<std::string> stage_files;  // this host's delay stages' stats (host.h)
  FiguresOf figures;
};

// B's end of a link between hosts as the host serving it says: the target's B half.
struct RemoteEnd {
  std::string host;
  Ipv4 addr;
  std::string server_dev, why;
  std::vector<std::string> notes;  // sysctls raised there
};
nlohmann::json to_json(const RemoteEnd& e);
Result<RemoteEnd> remote_end_from_json(const nlohmann::json& j);

// Measures class `cls` (the n-th) on this host: the link's figures in force here, its target
// (B's interfaces read here, or `remote` for a link between hosts), up to kMaxReadings readings
// with the host sampled around each (measure_class). `on_again` as measure_class's.
ClassResult measure_here(const ClassContext& ctx, const LinkClass& cls, size_t n,
                         const std::optional<RemoteEnd>& remote, const std::atomic<bool>& stop,
                         const std::function<void(int, const std::string&)>& on_again);

// A class that could not be measured: its figures, no measurement, `why` as its error (it fails).
ClassResult unmeasured(const ClassContext& ctx, const LinkClass& cls, const std::string& why);

// The longest a class's measurement may take: kMaxReadings readings at their request's bounds.
std::chrono::seconds class_limit(const plan::Link& l, const Settings& s);

// Who does what (pure): the hosts with a part in `classes` (a representative's A host, or its
// B host for one between hosts), the first of them in [[host]] order coordinating.
struct VerifyHosts : multihost::Roles {
  bool across() const { return !me.empty() && !peers.empty(); }
  bool coordinates() const { return across() && me == coordinator; }
  bool joins() const { return across() && me != coordinator && has_part(); }
  bool has_part() const;
};
VerifyHosts verify_hosts(const lab::LabState& st, const std::vector<LinkClass>& classes);

// What every host's verify must agree on besides the plan: the classes and the flags that
// change a measurement (`flags`: e.g. "quick=1 link=3").
std::string verify_digest(const std::vector<LinkClass>& classes, const std::string& flags);

class VerifyCoordinator {
 public:
  // Waits (kVerifyJoinTimeout) for every peer to join with the same plan and verify digest.
  static Result<VerifyCoordinator> open(const lab::LabState& st, const VerifyHosts& hosts,
                                        const std::string& digest, int port,
                                        const std::atomic<bool>& stop);
  // Class `n` of `classes`, measured wherever its roles say (this host included); `on_again`
  // also hears a joining host's further readings.
  ClassResult measure(const ClassContext& ctx, const LinkClass& cls, size_t n,
                      const std::atomic<bool>& stop,
                      const std::function<void(int, const std::string&)>& on_again);
  // The verdict (the exit code) and where the report is, to every host.
  void done(int rc, const std::string& where);

 private:
  explicit VerifyCoordinator(multihost::CoordinatorRelay r, std::string me)
      : relay_(std::move(r)), me_(std::move(me)) {}
  // The next message from `host` with `key` ({"again"} from it to `on_again`), within `limit`.
  Result<nlohmann::json> await(const std::string& host, const std::string& key,
                               std::chrono::seconds limit, const std::atomic<bool>& stop,
                               const std::function<void(int, const std::string&)>& on_again);
  multihost::CoordinatorRelay relay_;
  std::string me_;
};

struct PeerVerdict {
  int rc = 2;  // the coordinator's verdict: 0 pass, 1 fail, 2 not judged or bad input
  std::string coordinator, where;
  int measured = 0, served = 0;
};

// A joining host's whole part: join, answer the coordinator until done. `say` sees progress.
Result<PeerVerdict> serve_verify(const ClassContext& ctx, const std::vector<LinkClass>& classes,
                                 const VerifyHosts& hosts, const std::string& digest, int port,
                                 const std::function<void(const std::string&)>& say,
                                 const std::atomic<bool>& stop);

}  // namespace tb::verify
