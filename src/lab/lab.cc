#include "lab/lab.h"

#include <arpa/inet.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <utility>

#include "apply/applier.h"
#include "apply/marker.h"
#include "apply/rxe.h"
#include "core/shm_names.h"
#include "lab/daemons.h"
#include "scenario/names.h"

namespace tb::lab {
using apply::apply_plan;
using apply::ApplyOptions;
using apply::etc_netns_dir;
using apply::Journal;
using apply::remove_hosts_file_if_ours;
using apply::remove_lab_rxe;
using apply::teardown;

namespace {

std::atomic<bool> g_interrupted{false};
void on_signal(int) {
  g_interrupted = true;
}

// Catches SIGINT/SIGTERM/SIGHUP for its lifetime; restores the previous handlers after.
class SignalGuard {
 public:
  SignalGuard() {
    g_interrupted = false;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &sa, &old_[i]);
  }
  ~SignalGuard() {
    for (int i = 0; i < 3; ++i) sigaction(kSignals[i], &old_[i], nullptr);
  }

 private:
  static constexpr int kSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  struct sigaction old_[3];
};

// The names a lab's namespaces carry (scenario::netns_name: tb-<lab>-<node>); every name for
// clean --all's sweep (lab ""). Narrows which namespaces owned_netns asks; the marker decides.
std::string lab_netns_prefix(const std::string& lab) {
  return lab.empty() ? "" : scenario::netns_name(lab, "");
}

bool pid_alive(int pid) {
  return pid > 0 && (::kill(pid, 0) == 0 || errno == EPERM);
}

// Hosts and resolv.conf files under /etc/netns/*/ whose first line is one of our markers.
int remove_marked_hosts(const std::string& lab) {
  namespace fs = std::filesystem;
  const std::string want = "# " + plan::owner_marker(lab) + (lab.empty() ? "" : " ");
  int removed = 0;
  std::error_code ec;
  std::vector<std::pair<std::string, std::string>> ours;  // (netns, marker line)
  for (const auto& e : fs::directory_iterator(etc_netns_dir(), ec)) {
    std::ifstream in(e.path() / "hosts");
    std::string first;
    if (in && std::getline(in, first) && first.starts_with(want))
      ours.emplace_back(e.path().filename(), first);
  }
  for (const auto& [netns, marker] : ours)
    if (remove_hosts_file_if_ours(etc_netns_dir(), netns, marker)) ++removed;
  return removed;
}

// The rxe devices the plan made, with their RoCE v2 GIDs (the netlink kernel waited for each
// when it made it), for `status` and the RDMA transport's rank jobs.
Status record_rxe(const plan::Plan& plan, LabState& state) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (const auto& op : plan.ops) {
    const auto* r = std::get_if<plan::CreateRxe>(&op);
    if (!r) continue;
    auto gid = apply::wait_rocev2_gid(r->name, r->addr, deadline);
    if (!gid)
      return fail("rxe device " + r->name + " has no RoCE v2 GID for " + r->addr.to_string());
    state.rxe.push_back({r->node, r->netns, r->ifname, r->name, gid->index, gid->gid});
  }
  return {};
}

}  // namespace

std::vector<std::string> overlapping_host_routes(const Prefix& space) {
  std::vector<std::string> out;
  std::ifstream in("/proc/net/route");
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string ifname, dst, gw, flags, refcnt, use, metric, mask;
    if (!(ls >> ifname >> dst >> gw >> flags >> refcnt >> use >> metric >> mask)) continue;
    uint32_t d = ntohl(static_cast<uint32_t>(std::stoul(dst, nullptr, 16)));
    uint32_t m = ntohl(static_cast<uint32_t>(std::stoul(mask, nullptr, 16)));
    if (m == 0) continue;  // the default route covers everything; it is not a conflict
    Prefix p{Ipv4{d}, std::popcount(m)};
    if (p.overlaps(space)) out.push_back(p.to_string() + " dev " + ifname);
  }
  return out;
}

Result<UpResult> up(const plan::Plan& plan, const std::string& scenario_path, apply::Kernel& kernel,
                    const std::function<void(size_t, size_t)>& progress) {
  const std::string& lab = plan.lab;
  auto left = kernel.owned_netns(plan::owner_marker(lab) + " ", lab_netns_prefix(lab));
  if (!left) return std::unexpected(left.error());
  if (auto st = load_state(lab)) {
    if (st->phase == "up" && !left->empty())
      return bad_input("lab \"" + lab + "\" is already up (from " + st->scenario +
                       "); run `testbedctl down " + lab + "` first");
    if (st->phase == "building" && st->pid != ::getpid() && pid_alive(st->pid))
      return bad_input("lab \"" + lab + "\" is being built by testbedctl pid " +
                       std::to_string(st->pid));
    TB_TRY(remove_state(lab));  // stale: its namespaces are gone (a reboot, a manual delete)
  }
  if (!left->empty())
    return bad_input("lab \"" + lab + "\" has " + std::to_string(left->size()) +
                     " namespaces left over from an earlier run (e.g. " + left->front() +
                     "); run `testbedctl clean " + lab + "` first");
  // A missing program is found before anything is built, not at the end of the build.
  TB_TRY(check_daemon_programs(plan.all_daemons()));
  TB_TRY(check_socket_paths(lab, plan.all_daemons()));
  auto lock = LabLock::acquire(lab);
  if (!lock) return std::unexpected(lock.error());

  LabState state{lab,        scenario_path, "building",   std::time(nullptr),
                 ::getpid(), plan.topo,     plan.shaping, plan.stages()};
  state.rdma = plan.rdma;
  state.rdma_why = plan.rdma_why;
  state.host = plan.host;
  state.digest = plan.digest;
  for (const auto& h : plan.hosts) state.hosts.push_back(LabHost{h.name, h.underlay});
  if (auto saved = save_state(state); !saved) {
    (void)remove_state(lab);  // the lab directory it may have made (a full disk, say)
    return std::unexpected(saved.error());
  }
  auto journal = Journal::create(journal_path(lab));
  if (!journal) {
    (void)remove_state(lab);
    return std::unexpected(journal.error());
  }
  SignalGuard signals;
  ApplyOptions opts;
  opts.interrupted = &g_interrupted;
  opts.progress = progress;
  // Daemons start once every kernel object is in place; their supervisor is launched at the
  // first op, so its own start overlaps the build, and the delay stages are handed to it once
  // their namespaces exist, so theirs does too (lab/daemons.h LabKernel).
  const bool daemons = std::ranges::any_of(
      plan.ops, [](const plan::Op& op) { return std::holds_alternative<plan::StartDaemon>(op); });
  LabKernel machine(lab, kernel, daemons, plan.stages());
  const auto t0 = std::chrono::steady_clock::now();
  if (auto r = apply_plan(plan, machine, *journal, opts); !r) {
    (void)remove_state(lab);
    return std::unexpected(with_context(r.error(), "bring up lab " + lab));
  }
  state.phase = "up";
  Status saved = record_rxe(plan, state);
  if (saved) saved = save_state(state);
  if (!saved) {
    (void)teardown(journal->ops(), machine);
    (void)remove_state(lab);
    Error e = with_context(saved.error(), "bring up lab " + lab);
    e.message += "; everything made so far was removed";
    return std::unexpected(e);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return UpResult{std::move(state), secs};
}

Status down(const std::string& lab, apply::Kernel& kernel) {
  auto lock = LabLock::acquire(lab);
  if (!lock) return std::unexpected(lock.error());
  auto r = clean(lab, kernel);
  if (!r) return fail("take down lab " + lab + ": " + r.error().message);
  return {};
}

Result<int> clean(const std::string& lab, apply::Kernel& kernel) {
  std::string errors;
  auto note = [&](const std::string& e) { errors += (errors.empty() ? "" : "; ") + e; };
  const std::string select = plan::owner_marker(lab) + (lab.empty() ? "" : " ");
  auto before = kernel.owned_netns(select, lab_netns_prefix(lab));
  if (!before) return std::unexpected(before.error());
  // Processes first (the supervisor and what it runs): told to stop now, and waited for once
  // their namespaces are unmounted (a namespace lives on, unnamed, until the last process in
  // it exits), so their exit overlaps the removal; nothing is left running when clean returns.
  StoppingDaemons stopping = signal_daemons(lab);
  bool awaited = false;
  auto await_stopping = [&] {
    if (!std::exchange(awaited, true)) await_daemons(stopping);
  };
  struct OnReturn {
    decltype(await_stopping)& f;
    ~OnReturn() { f(); }
  } on_return{await_stopping};  // every way out waits for them
  // The journal first: it also names what no marker can (a namespace file made but never
  // mounted, a hosts file not yet written when a crash came).
  for (const auto& l : list_labs()) {
    if (!lab.empty() && l != lab) continue;
    // Soft-RoCE devices before their netdevs (deleting the namespace would also unregister them),
    // and after every process that may hold one open has gone (rxe cannot take a device from
    // its users: the removal would wait for them).
    if (auto st = load_state(l, StateParts::kBrief); st && !st->rxe.empty()) {
      await_stopping();
      if (auto r = remove_lab_rxe(st->rxe); !r) note(r.error().message);
    }
    auto ops = Journal::read_for_teardown(journal_path(l));
    if (ops) {
      if (auto r = teardown(*ops, kernel); !r) note(r.error().message);
    } else if (ops.error().sys_errno != ENOENT) {
      spdlog::warn("{}; relying on the owner-marker sweep", ops.error().message);
    }
  }
  // Then the marker sweep: whatever the journal did not name still carries the marker.
  auto owned = kernel.owned_netns(select, lab_netns_prefix(lab));
  if (!owned) return std::unexpected(owned.error());
  for (const auto& ns : *owned)
    if (auto r = kernel.undo(plan::CreateNetns{ns, "", select}); !r) note(r.error().message);
  // Before the lab's files go: a stopping stage or supervisor writes its last stats there.
  await_stopping();
  remove_marked_hosts(lab);
  // Shared-memory segments a job's rank left when it died during set-up (--intra-server shm).
  for (const auto& l : lab.empty() ? list_labs() : std::vector<std::string>{lab})
    if (auto r = remove_shm_files(shm_lab_prefix(l)); !r) note(r.error().message);
  for (const auto& l : list_labs()) {
    if (!lab.empty() && l != lab) continue;
    auto st = load_state(l, StateParts::kBrief);
    if (st && pid_alive(st->pid) && st->pid != ::getpid() && st->phase == "building") continue;
    if (auto r = remove_state(l); !r) note(r.error().message);
  }
  if (!errors.empty()) return fail(errors);
  return static_cast<int>(before->size());
}

}  // namespace tb::lab
