#include "launch/command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "core/extras.h"
#include "core/process.h"
#include "core/unique_fd.h"
#include "core/units.h"
#include "launch/bench_run.h"
#include "launch/place.h"
#include "plan/plan.h"
#include "runner/exec.h"
#include "runner/supervisor.h"

extern char** environ;

namespace tb::launch {

namespace {

using Clock = std::chrono::steady_clock;
constexpr const char* kJobEnv = "TESTBEDCTL_JOB";
constexpr size_t kMaxLine = 64 * 1024;  // a longer line is cut and handed on in pieces
constexpr int kDrainMs = 1000;          // output still flowing after the last rank exited

// The interface of `node` that holds `addr` (the topology's link ends); `role` when none does.
std::string ifname_of(const plan::Topology& topo, const plan::Node& node, const std::string& addr,
                      const std::string& role) {
  for (const auto& l : topo.links)
    for (const auto* e : {&l.a, &l.b})
      if (e->node == node.name && e->addr && e->addr->addr.to_string() == addr) return e->ifname;
  return role;
}

// argv[0] as execvp would find it, as an absolute path; nullopt when there is none.
std::optional<std::string> resolve_program(const std::string& name) {
  namespace fs = std::filesystem;
  if (name.empty()) return std::nullopt;
  if (name.find('/') != std::string::npos) {
    if (!executable_file(name)) return std::nullopt;
    return fs::absolute(name).lexically_normal().string();
  }
  const char* path = std::getenv("PATH");
  std::istringstream in(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(in, dir, ':');) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (executable_file(p.string())) return fs::absolute(p).lexically_normal().string();
  }
  return std::nullopt;
}

// As bench's (bench_run.cc): a process's second launch in one second gets a run id of its own.
std::string new_run_id() {
  static std::atomic<int> runs{0};
  const int n = ++runs;
  char ts[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(ts, sizeof ts, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return std::string("launch-") + ts + "-" + std::to_string(::getpid()) +
         (n > 1 ? "-" + std::to_string(n) : "");
}

std::string server_of(const plan::Node& g) {
  return g.region + "/s" + std::to_string(g.server);
}

// Single quotes for a POSIX shell.
std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace

Result<NetTier> parse_tier(std::string_view s) {
  if (s == "auto") return NetTier::kAuto;
  if (s == "nvl" || s == "nvlink") return NetTier::kNvl;
  if (s == "rail") return NetTier::kRail;
  if (s == "frontend" || s == "fe" || s == "vpc") return NetTier::kFrontend;
  return bad_input("'" + std::string(s) + "' is not a tier; use " + std::string(kTierChoices));
}

const char* to_string(NetTier t) {
  switch (t) {
    case NetTier::kAuto:
      return "auto";
    case NetTier::kNvl:
      return "nvl";
    case NetTier::kRail:
      return "rail";
    case NetTier::kFrontend:
      return "frontend";
  }
  return "?";
}

Result<int64_t> parse_job_duration_ms(std::string_view text) {
  const std::string t(text);
  auto scaled = [&](size_t suffix, double factor) -> Result<int64_t> {
    const std::string num = t.substr(0, t.size() - suffix);
    char* end = nullptr;
    const double v = std::strtod(num.c_str(), &end);
    if (num.empty() || end != num.c_str() + num.size() || !(v > 0) || v * factor > 1e12)
      return bad_input("\"" + t + "\" is not a duration; use e.g. \"90s\", \"10m\", \"1h\"");
    return static_cast<int64_t>(v * factor + 0.5);
  };
  if (t.ends_with("ms")) return scaled(2, 1);
  if (t.ends_with("min")) return scaled(3, 60'000);
  if (t.ends_with("h")) return scaled(1, 3'600'000);
  if (t.ends_with("m")) return scaled(1, 60'000);
  if (t.ends_with("s")) return scaled(1, 1000);
  return scaled(0, 1000);
}

Result<std::string> find_mpirun(const CommandOptions& o) {
  if (o.mpirun == "mpirun") return require_extra("launch --mpi", "mpirun");
  if (auto p = resolve_program(o.mpirun)) return *p;
  return bad_input("launch --mpi: " + o.mpirun + " not found (looked up as given)");
}

bool CommandResult::ok() const {
  if (interrupted || timed_out || first_failed >= 0 || !errors.empty()) return false;
  return std::all_of(ranks.begin(), ranks.end(),
                     [](const RankEnd& r) { return r.exited && r.code == 0; });
}

Result<CommandJob> prepare_command(const lab::LabState& lab, const CommandOptions& o) {
  if (o.argv.empty()) return bad_input("launch needs a command after --");
  if (o.timeout_ms < 0) return bad_input("--timeout: must not be negative");
  if (o.master_port < 1 || o.master_port > 65535)
    return bad_input("--master-port: " + std::to_string(o.master_port) +
                     " is not a port (1..65535)");
  auto gpus = select_ranks(lab.topo, o.ranks);
  if (!gpus) return std::unexpected(gpus.error());
  CommandJob job;
  job.lab = lab.lab;
  job.run_id = new_run_id();
  job.results_dir = results_root() + "/" + lab.lab + "/" + job.run_id;
  job.tier_requested = to_string(o.tier);
  job.master_port = o.master_port;
  job.mpi = o.mpi;

  std::vector<std::string> servers, regions;
  for (const auto* g : *gpus) {
    if (std::find(servers.begin(), servers.end(), server_of(*g)) == servers.end())
      servers.push_back(server_of(*g));
    if (std::find(regions.begin(), regions.end(), g->region) == regions.end())
      regions.push_back(g->region);
  }
  const bool all_rail = std::all_of(
      gpus->begin(), gpus->end(), [](const plan::Node* g) { return !addr_of(*g, "rail").empty(); });
  NetTier tier = o.tier;
  if (tier == NetTier::kAuto) {
    if (servers.size() == 1) {
      tier = NetTier::kNvl;
      job.tier_note = "auto: every rank is on " + servers.front() + ", so NVLink";
    } else if (regions.size() == 1 && all_rail) {
      tier = NetTier::kRail;
      job.tier_note = "auto: the ranks span " + std::to_string(servers.size()) +
                      " servers of region " + regions.front() + ", so its rail";
    } else {
      tier = NetTier::kFrontend;
      job.tier_note = "auto: the ranks span regions " + regions.front() + " and " + regions.back() +
                      " (no rail joins regions), so the frontend and the WAN";
    }
  } else if (tier == NetTier::kNvl && servers.size() > 1) {
    return bad_input("--tier nvl: the ranks span " + std::to_string(servers.size()) + " servers (" +
                     servers.front() + ", " + servers[1] + (servers.size() > 2 ? ", ..." : "") +
                     "); NVLink joins the GPUs of one server; use --tier rail, frontend or auto, "
                     "or --ranks " +
                     servers.front());
  } else if (tier == NetTier::kRail && regions.size() > 1) {
    return bad_input("--tier rail: the ranks span regions " + regions.front() + " and " +
                     regions[1] +
                     "; a rail joins the servers of one region; use --tier frontend or auto, or "
                     "--ranks " +
                     regions.front());
  } else if (tier == NetTier::kRail && !all_rail) {
    return bad_input("--tier rail: some selected GPU has no rail interface in lab " + lab.lab +
                     "; use --tier nvl, frontend or auto");
  } else if (tier == NetTier::kFrontend && servers.size() == 1) {
    job.tier_note = "frontend: every rank is on " + servers.front() +
                    ", whose GPUs reach each other over its NVLink whatever the tier";
  }
  job.tier = tier;
  const std::string role = tier == NetTier::kRail ? "rail" : "nvl";

  std::map<std::string, int> group_of, local_count;
  for (const auto* g : *gpus) {
    group_of.try_emplace(server_of(*g), static_cast<int>(group_of.size()));
    ++local_count[server_of(*g)];
  }
  std::map<std::string, int> local_next;
  for (size_t i = 0; i < gpus->size(); ++i) {
    const auto& g = *(*gpus)[i];
    CommandRank r;
    r.rank = static_cast<int>(i);
    r.node = g.name;
    r.netns = g.netns;
    r.group_rank = group_of[server_of(g)];
    r.local_rank = local_next[server_of(g)]++;
    r.local_world_size = local_count[server_of(g)];
    r.addr = addr_of(g, role);
    if (r.addr.empty())
      return bad_input("--tier " + std::string(to_string(tier)) + ": " + g.name + " has no " +
                       role + " address in lab " + lab.lab);
    r.ifname = ifname_of(lab.topo, g, r.addr, role);
    job.ranks.push_back(r);
  }
  job.ifname = job.ranks.front().ifname;
  for (const auto& r : job.ranks)
    if (r.ifname != job.ifname)
      return bad_input("--tier " + std::string(to_string(tier)) +
                       ": the ranks' interfaces differ (" + job.ifname + " on " +
                       job.ranks.front().node + ", " + r.ifname + " on " + r.node +
                       "); GLOO_SOCKET_IFNAME names one");
  job.master_addr = job.ranks.front().addr;

  auto prog = resolve_program(o.argv.front());
  if (!prog)
    return bad_input("launch: " + o.argv.front() + ": command not found (looked up as given" +
                     (o.argv.front().find('/') == std::string::npos ? " in PATH" : "") +
                     "; nothing was started)");
  job.argv = o.argv;
  job.argv.front() = *prog;
  if (o.mpi) {
    auto mpirun = find_mpirun(o);
    if (!mpirun) return std::unexpected(mpirun.error());
    if (o.testbedctl.empty()) return bad_input("--mpi: testbedctl's own path is unknown");
    const std::string n = std::to_string(job.ranks.size());
    auto& a = job.mpi_argv;
    a = {*mpirun, "-np", n, "--hostfile", job.results_dir + "/hostfile"};
    auto mca = [&a](const std::string& key, const std::string& value) {
      a.insert(a.end(), {"--mca", key, value});
    };
    mca("plm_rsh_agent", job.results_dir + "/rsh-agent");
    mca("plm_rsh_no_tree_spawn", "1");
    mca("btl", "tcp,self");
    mca("btl_tcp_if_include", job.ifname);
    mca("oob_tcp_if_include", job.ifname);
    // Each orted stays attached to its rsh agent instead of daemonizing (as no_tree_spawn
    // would have it): an orted that fails then ends its agent, mpirun reports it and its
    // stderr reaches the job's log. Daemonized, one that failed (orteds racing for a shared
    // session directory, before each got its own TMPDIR) left mpirun waiting for ever.
    a.push_back("--leave-session-attached");
    a.insert(a.end(), {"--bind-to", "none", "--tag-output"});
    for (const auto& a : job.argv) job.mpi_argv.push_back(a);
  }
  return job;
}

std::vector<std::string> rank_environment(const CommandJob& job, int rank) {
  const auto& r = job.ranks.at(static_cast<size_t>(rank));
  const std::string world = std::to_string(job.ranks.size());
  int groups = 0;
  for (const auto& x : job.ranks) groups = std::max(groups, x.group_rank + 1);
  std::vector<std::string> env = {
      "RANK=" + std::to_string(r.rank),
      "LOCAL_RANK=" + std::to_string(r.local_rank),
      "WORLD_SIZE=" + world,
      "LOCAL_WORLD_SIZE=" + std::to_string(r.local_world_size),
      "GROUP_RANK=" + std::to_string(r.group_rank),
      "GROUP_WORLD_SIZE=" + std::to_string(groups),
      "ROLE_RANK=" + std::to_string(r.rank),
      "ROLE_WORLD_SIZE=" + world,
      "ROLE_NAME=default",
      "MASTER_ADDR=" + job.master_addr,
      "MASTER_PORT=" + std::to_string(job.master_port),
      "TORCHELASTIC_RUN_ID=" + job.run_id,
      "TORCHELASTIC_RESTART_COUNT=0",
      "TORCHELASTIC_MAX_RESTARTS=0",
      "GLOO_SOCKET_IFNAME=" + r.ifname,
      "NCCL_SOCKET_IFNAME=" + r.ifname,
      "TESTBEDCTL_LAB=" + job.lab,
      "TESTBEDCTL_NODE=" + r.node,
      "TESTBEDCTL_TIER=" + std::string(to_string(job.tier)),
      "TESTBEDCTL_JOB_DIR=" + job.results_dir,
      std::string(kJobEnv) + "=" + job.run_id,
      std::string(kOwnerEnv) + "=" + plan::owner_marker(job.lab),
  };
  if (!job.host.empty()) env.push_back("TESTBEDCTL_HOST=" + job.host);
  // As torchrun: one OpenMP thread per worker unless the user chose (every rank shares the
  // host's cores).
  if (!std::getenv("OMP_NUM_THREADS")) env.push_back("OMP_NUM_THREADS=1");
  if (job.mpi) {
    env.push_back("OMPI_ALLOW_RUN_AS_ROOT=1");
    env.push_back("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1");
  }
  return env;
}

std::string mpi_hostfile(const CommandJob& job) {
  std::string out = "# testbedctl launch " + job.run_id + ": one slot per GPU, its " +
                    to_string(job.tier) + " address\n";
  for (const auto& r : job.ranks) out += r.addr + " slots=1  # " + r.node + "\n";
  return out;
}

std::string mpi_agent_script(const CommandJob& job, const std::string& testbedctl,
                             const std::string& tmp_base) {
  std::string s =
      "#!/bin/sh\n"
      "# mpirun's rsh agent for testbedctl launch " +
      job.run_id +
      ": HOST COMMAND... runs COMMAND in HOST's namespace, with a TMPDIR of its own (every\n"
      "# emulated host has the same host name and /tmp: orteds sharing Open MPI's session\n"
      "# directory race to create it and one fails)\n"
      "host=$1; shift\n"
      "case \"$host\" in\n";
  for (size_t i = 0; i < job.ranks.size(); ++i)
    s += "  " + job.ranks[i].addr + ") node=" + sh_quote(job.ranks[i].node) +
         " tmp=" + sh_quote(tmp_base + "/" + std::to_string(i)) + " ;;\n";
  s += "  *) echo \"rsh-agent: $host is not a host of this job\" >&2; exit 1 ;;\n"
       "esac\n"
       "mkdir -p \"$tmp\" || exit 1\n"
       "TMPDIR=$tmp; export TMPDIR\n"
       "exec " +
       sh_quote(testbedctl) + " exec " + sh_quote(job.lab) + " \"$node\" -- /bin/sh -c \"$*\"\n";
  return s;
}

nlohmann::json to_json(const CommandJob& job, const CommandResult* res) {
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t i = 0; i < job.ranks.size(); ++i) {
    const auto& r = job.ranks[i];
    nlohmann::json j = {{"rank", r.rank},
                        {"node", r.node},
                        {"netns", r.netns},
                        {"group_rank", r.group_rank},
                        {"local_rank", r.local_rank},
                        {"local_world_size", r.local_world_size},
                        {"addr", r.addr},
                        {"ifname", r.ifname},
                        {"log", "logs/rank" + std::to_string(r.rank) + ".log"}};
    if (res && i < res->ranks.size()) {
      const auto& e = res->ranks[i];
      j["pid"] = e.pid;
      j["exit_code"] = e.exited ? nlohmann::json(e.code) : nlohmann::json(nullptr);
      j["how"] = e.how;
      j["start_s"] = e.start_s;
      j["end_s"] = e.end_s;
    }
    ranks.push_back(j);
  }
  nlohmann::json j = {{"lab", job.lab},
                      {"run_id", job.run_id},
                      {"kind", job.mpi ? "mpi" : "command"},
                      {"command", job.argv},
                      {"tier", to_string(job.tier)},
                      {"tier_requested", job.tier_requested},
                      {"tier_note", job.tier_note},
                      {"ifname", job.ifname},
                      {"master_addr", job.master_addr},
                      {"master_port", job.master_port},
                      {"world_size", job.ranks.size()},
                      {"ranks", ranks}};
  if (job.mpi) j["mpirun"] = job.mpi_argv;
  if (!res) {
    j["state"] = "running";
  } else {
    j["state"] = res->ok() ? "succeeded" : "failed";
    j["reason"] = res->reason;
    j["interrupted"] = res->interrupted;
    j["timed_out"] = res->timed_out;
    j["first_failed"] = res->first_failed;
    j["wall_s"] = res->wall_s;
  }
  return j;
}

std::vector<int> job_processes(const std::string& owner, const std::string& run_id,
                               const std::string& host) {
  const std::string want_owner = std::string(kOwnerEnv) + "=" + owner;
  const std::string want_job = std::string(kJobEnv) + "=" + run_id;
  const std::string want_host = "TESTBEDCTL_HOST=" + host;
  std::vector<int> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const int pid = std::stoi(name);
    if (pid == ::getpid()) continue;
    std::ifstream in(e.path() / "environ", std::ios::binary);
    bool has_owner = false, has_job = false, has_host = host.empty();
    for (std::string var; std::getline(in, var, '\0');) {
      has_owner = has_owner || var == want_owner;
      has_job = has_job || var == want_job;
      has_host = has_host || var == want_host;
    }
    if (has_owner && has_job && has_host) out.push_back(pid);
  }
  return out;
}

namespace {

struct Live {
  int pid = 0;
  UniqueFd out;         // read end of the rank's stdout+stderr pipe; closed at EOF
  UniqueFd log;         // logs/rank<N>.log
  std::string partial;  // output after the last newline
  bool running = true;
};

// fork -> own process group -> enter the node (runner/exec.h) -> exec with `env` added to ours.
// Returns once the child has exec'd (or the error why it could not).
Result<int> spawn_rank(const std::string& netns, const std::vector<std::string>& argv,
                       const std::vector<std::string>& env, int out_fd) {
  std::set<std::string> names;
  for (const auto& e : env) names.insert(e.substr(0, e.find('=')));
  std::vector<std::string> envs;
  for (char** p = environ; p && *p; ++p) {
    const std::string v = *p;
    if (!names.contains(v.substr(0, v.find('=')))) envs.push_back(v);
  }
  envs.insert(envs.end(), env.begin(), env.end());
  std::vector<char*> envp, args;
  for (auto& e : envs) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& a : argv_copy) args.push_back(a.data());
  args.push_back(nullptr);

  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) return sys_fail("pipe");
  UniqueFd exec_r(exec_pipe[0]), exec_w(exec_pipe[1]);
  const pid_t pid = ::fork();
  if (pid < 0) return sys_fail("fork");
  if (pid == 0) {
    ::setpgid(0, 0);  // its own group: ended as a whole; the terminal's Ctrl-C is ours to pass on
    auto report = [&](const std::string& msg) {
      (void)!::write(exec_w.get(), msg.data(), msg.size());
      ::_exit(127);
    };
    if (auto r = runner::enter_node(netns); !r) report(r.error().message);
    ::dup2(out_fd, STDOUT_FILENO);
    ::dup2(out_fd, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int s : {SIGINT, SIGTERM, SIGHUP, SIGPIPE, SIGQUIT}) ::signal(s, SIG_DFL);
    ::execve(args[0], args.data(), envp.data());
    report(std::string("exec ") + args[0] + ": " + std::strerror(errno));
  }
  exec_w.reset();
  std::string why;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(exec_r.get(), buf, sizeof buf);
    if (n > 0) {
      why.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  if (!why.empty()) {
    ::waitpid(pid, nullptr, 0);
    return fail("start in " + netns + ": " + why);
  }
  return pid;
}

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

}  // namespace

Result<CommandResult> run_command(const CommandJob& job, const CommandOptions& o,
                                  const std::atomic<bool>& stop,
                                  const std::function<void(int, std::string_view)>& on_line,
                                  const CommandHooks& hooks) {
  auto here = [&](size_t i) { return hooks.local.empty() || job.mpi || hooks.local[i]; };
  auto dir = open_results_dir(job.results_dir);
  if (!dir) return std::unexpected(with_context(dir.error(), "create results directory"));
  auto logs = dir->sub("logs");
  if (!logs) return std::unexpected(with_context(logs.error(), "create results directory"));
  TB_TRY(dir->write("job.json", to_json(job, nullptr).dump(1) + "\n"));
  // mpi: the orteds' TMPDIRs, under one private directory removed when the job ends.
  TempDir mpi_tmp;
  if (job.mpi) {
    auto t = TempDir::make("tbmpi");
    if (!t) return std::unexpected(with_context(t.error(), "MPI temporary directory"));
    mpi_tmp = std::move(*t);
    TB_TRY(dir->write("hostfile", mpi_hostfile(job)));
    TB_TRY(dir->write("rsh-agent", mpi_agent_script(job, o.testbedctl, mpi_tmp.path()), 0755));
  }
  const std::string owner = plan::owner_marker(job.lab);

  // What runs: a process per rank, or mpirun alone (in rank 0's namespace) for --mpi.
  struct Proc {
    std::string netns;
    std::vector<std::string> argv;
    std::vector<std::string> env;
  };
  std::vector<Proc> procs;
  if (job.mpi) {
    procs.push_back({job.ranks.front().netns, job.mpi_argv, rank_environment(job, 0)});
  } else {
    for (size_t r = 0; r < job.ranks.size(); ++r)
      procs.push_back({job.ranks[r].netns, job.argv, rank_environment(job, static_cast<int>(r))});
  }

  CommandResult res;
  std::vector<Live> live(procs.size());
  res.ranks.resize(procs.size());
  const auto t0 = Clock::now();
  auto signal_all = [&](int sig) {
    for (const auto& l : live)
      if (l.running && l.pid > 0) {
        ::kill(-l.pid, sig);
        ::kill(l.pid, sig);
      }
    for (int pid : job_processes(owner, job.run_id, job.host)) ::kill(pid, sig);
  };
  for (size_t i = 0; i < procs.size(); ++i) {
    if (!here(i)) {  // another host's rank: its end and lines come through hooks.turn
      res.ranks[i].start_s = since(t0);
      if (!hooks.remote_ends) {
        live[i].running = false;
        res.ranks[i].how = "on another host";
        res.ranks[i].code = 0;
      }
      continue;
    }
    auto log = logs->open("rank" + std::to_string(i) + ".log", O_WRONLY | O_CREAT | O_APPEND);
    if (!log) {
      signal_all(SIGKILL);
      for (auto& l : live)
        if (l.pid > 0) ::waitpid(l.pid, nullptr, 0);
      return std::unexpected(log.error());
    }
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return sys_fail("pipe");
    UniqueFd rd(p[0]), wr(p[1]);
    auto pid = spawn_rank(procs[i].netns, procs[i].argv, procs[i].env, wr.get());
    if (!pid) {
      signal_all(SIGKILL);
      for (auto& l : live)
        if (l.pid > 0) ::waitpid(l.pid, nullptr, 0);
      return std::unexpected(with_context(pid.error(), "rank " + std::to_string(i)));
    }
    ::fcntl(rd.get(), F_SETFL, O_NONBLOCK);
    live[i].pid = *pid;
    live[i].out = std::move(rd);
    live[i].log = std::move(*log);
    res.ranks[i].pid = *pid;
    res.ranks[i].start_s = since(t0);
  }

  auto emit = [&](size_t i, std::string_view line) {
    (void)write_all(live[i].log.get(), std::string(line) + "\n", "log");
    if (on_line) on_line(static_cast<int>(i), line);
  };
  auto read_output = [&](size_t i) {
    char buf[16384];
    for (int k = 0; k < 64; ++k) {  // bounded per round
      const ssize_t n = ::read(live[i].out.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return;  // EAGAIN
      if (n == 0) {
        if (!live[i].partial.empty()) emit(i, live[i].partial);
        live[i].partial.clear();
        live[i].out.reset();
        return;
      }
      auto& p = live[i].partial;
      p.append(buf, static_cast<size_t>(n));
      size_t start = 0;
      for (size_t nl; (nl = p.find('\n', start)) != std::string::npos; start = nl + 1)
        emit(i, std::string_view(p).substr(start, nl - start));
      p.erase(0, start);
      if (p.size() > kMaxLine) {
        emit(i, p);
        p.clear();
      }
    }
  };

  bool ending = false, killed = false;
  Clock::time_point kill_at{}, drain_until{};
  bool draining = false;
  auto end_job = [&](const std::string& why) {
    if (ending) return;
    ending = true;
    res.reason = why;
    signal_all(SIGTERM);
    kill_at = Clock::now() + std::chrono::milliseconds(o.grace_ms);
    if (hooks.ending) hooks.ending(why, o.grace_ms);
  };
  auto ended = [&](size_t i, int code, const std::string& how, bool by_signal) {
    live[i].running = false;
    auto& e = res.ranks[i];
    e.exited = true;
    e.code = code;
    e.how = how;
    e.end_s = since(t0);
    if (ending) {
      if (by_signal) e.how += " (ended by testbedctl: " + res.reason + ")";
    } else if (e.code != 0) {
      res.first_failed = static_cast<int>(i);
      const std::string who = job.mpi ? "mpirun" : "rank " + std::to_string(i);
      end_job(who + " (" + job.ranks[i].node + ") " + e.how);
    }
  };
  for (;;) {
    std::vector<pollfd> fds;
    std::vector<size_t> which;
    for (size_t i = 0; i < live.size(); ++i)
      if (live[i].out) {
        fds.push_back({live[i].out.get(), POLLIN, 0});
        which.push_back(i);
      }
    if (!fds.empty()) {
      if (::poll(fds.data(), fds.size(), 50) > 0)
        for (size_t k = 0; k < fds.size(); ++k)
          if (fds[k].revents) read_output(which[k]);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    for (size_t i = 0; i < live.size(); ++i) {
      auto& l = live[i];
      if (!l.running || l.pid <= 0) continue;
      int status = 0;
      if (::waitpid(l.pid, &status, WNOHANG) != l.pid) continue;
      ended(i, WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status),
            runner::describe_exit(status), WIFSIGNALED(status));
      if (hooks.local_end) {
        read_output(i);  // its last lines into its log before its end is told
        hooks.local_end(static_cast<int>(i), res.ranks[i]);
      }
    }
    if (hooks.turn) {
      std::vector<RemoteEnd> ends;
      std::vector<std::pair<int, std::string>> lines;
      std::string end;
      hooks.turn(ends, lines, end);
      for (const auto& [rank, line] : lines)
        if (on_line) on_line(rank, line);
      for (const auto& e : ends)
        if (e.rank >= 0 && static_cast<size_t>(e.rank) < live.size() && !here(e.rank) &&
            live[e.rank].running)
          ended(static_cast<size_t>(e.rank), e.code, e.how, e.code > 128);
      if (!end.empty() && !ending) end_job(end);
    }
    const bool all_done =
        std::none_of(live.begin(), live.end(), [](const Live& l) { return l.running; });
    if (all_done) {
      if (!draining) {
        draining = true;
        drain_until = Clock::now() + std::chrono::milliseconds(kDrainMs);
        // Whatever the ranks left behind (a daemon in its own session holding the pipe).
        terminate(job_processes(owner, job.run_id, job.host), std::min(o.grace_ms, 2000));
      }
      const bool pipes_closed =
          std::none_of(live.begin(), live.end(), [](const Live& l) { return bool(l.out); });
      if (pipes_closed || Clock::now() >= drain_until) break;
      continue;
    }
    if (!ending && stop.load()) {
      res.interrupted = true;
      end_job("interrupted");
    }
    if (!ending && o.timeout_ms > 0 &&
        Clock::now() - t0 >= std::chrono::milliseconds(o.timeout_ms)) {
      res.timed_out = true;
      end_job("timeout after " + format_duration(Duration{o.timeout_ms * 1'000'000}));
    }
    if (ending && !killed && Clock::now() >= kill_at) {
      killed = true;
      signal_all(SIGKILL);
    }
  }
  for (size_t i = 0; i < live.size(); ++i)
    if (live[i].out) read_output(i);
  res.wall_s = since(t0);
  (void)dir->write("job.json", to_json(job, &res).dump(1) + "\n");
  return res;
}

}  // namespace tb::launch
