// A real Slurm cluster over emulated hosts (issue 19): munged, slurmctld and one slurmd per host,
// the Debian packages' own daemons (slurmctld, slurmd, slurm-client, munge; scripts/setup --with
// slurm), not a mock. Everything lives in a temporary directory of its own: the munge key and
// socket, the slurm.conf, the controller's state, each node's spool directory, the logs and pid
// files.
//
//   root namespace     munged, on its own socket (<dir>/munge/sock) with its own key
//   switch namespace   slurmctld (its own UTS namespace named "tbctl"), at the hosts' controller
//                      address (EmulatedHosts with `controller`); srun, sinfo and scripts/tb-srun
//                      run here (client())
//   host h             slurmd, in h's network, mount and UTS namespaces: hostname = NodeName, so
//                      SLURMD_NODENAME is h and a task of srun runs inside host h, as on a real
//                      node (one slurmd per host: no --enable-multiple-slurmd build needed)
//
// start() waits (bounded) until sinfo shows every node idle; the destructor cancels any job,
// stops exactly the daemons it started (by pid, checked against each process's start time so a
// reused pid is never hit), any slurmstepd left in its hosts, and removes its directory, also
// when the test failed. Build with start(), check ok()/error(), run srun(args), tb_srun(args)
// (scripts/tb-srun) or client(cmd).
// Needs root, nsenter and unshare; the EmulatedHosts must outlive it. Not thread-safe.
#pragma once

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "e2e_util.h"
#include "emulated_hosts.h"

namespace tb::e2e {

// Whether the Slurm and munge programs the fixture runs are installed (`scripts/setup --with slurm`
// installs them); empty when they are, else what is missing.
inline std::string slurm_missing() {
  std::string missing;
  for (const char* p :
       {"munged", "munge", "slurmctld", "slurmd", "srun", "sinfo", "squeue", "scancel"})
    if (sh(std::string("command -v ") + p).rc != 0)
      missing += std::string(missing.empty() ? "" : " ") + p;
  return missing;
}

class SlurmCluster {
 public:
  explicit SlurmCluster(const EmulatedHosts& hosts) : hosts_(hosts) {}
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;
  ~SlurmCluster() { stop(); }

  // Writes the configuration, starts munged, slurmctld and the slurmds, and waits until every
  // node is idle (at most `wait_s` seconds). False with error() saying what failed and the
  // daemons' logs.
  bool start(int wait_s = 90) {
    const auto t0 = std::chrono::steady_clock::now();
    ok_ = start_all(wait_s);
    start_s_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!ok_) error_ += "\n" + logs();
    return ok_;
  }
  bool ok() const { return ok_; }
  const std::string& error() const { return error_; }
  // Seconds start() took: writing the files to every node idle (steady clock).
  double start_seconds() const { return start_s_; }
  const std::string& dir() const { return dir_; }
  std::string conf() const { return dir_ + "/slurm.conf"; }
  std::string controller_name() const { return "tbctl"; }
  // slurmd's pid in host i (0 when it was not started).
  pid_t slurmd(size_t i) const { return i < slurmds_.size() ? slurmds_[i].pid : 0; }

  // `cmd` (a shell command line) where a cluster's user works: the switch namespace, with
  // SLURM_CONF set to this cluster's configuration.
  CmdResult client(const std::string& cmd) const {
    return hosts_.run_switch("export SLURM_CONF=" + shell_quote(conf()) + "; " + cmd);
  }
  // srun ARGS (already shell words), bounded by `timeout_s`: its exit code and its output.
  CmdResult srun(const std::string& args, int timeout_s = 300) const {
    return client("timeout -k 10 " + std::to_string(timeout_s) + " srun " + args);
  }
  // scripts/tb-srun ARGS (shell words) as a cluster's user runs it, with this build's
  // testbedctl on the nodes (TESTBEDCTL), bounded by `timeout_s`.
  CmdResult tb_srun(const std::string& args, int timeout_s = 300) const {
    return client("TESTBEDCTL=" + shell_quote(tbctl()) + " timeout -k 10 " +
                  std::to_string(timeout_s) + " " +
                  shell_quote(std::string(TB_SOURCE_DIR) + "/scripts/tb-srun") + " " + args);
  }
  // The last lines of every log the daemons wrote (for failure messages).
  std::string logs() const {
    std::string out;
    std::error_code ec;
    if (dir_.empty()) return out;
    for (const auto& e : std::filesystem::directory_iterator(dir_ + "/log", ec)) {
      out += "--- " + e.path().filename().string() + "\n";
      out += sh("tail -n 15 " + shell_quote(e.path().string())).out;
    }
    return out;
  }

  // Cancels every job, stops the daemons this object started (slurmds, then slurmctld, then
  // munged) and any slurmstepd left in its hosts, then removes its directory. Idempotent.
  void stop() {
    if (!dir_.empty() && ctld_.pid > 0 && alive(ctld_)) {
      client("scancel --quiet --user=root");
      for (int t = 0; t < 100; ++t) {  // at most ~20 s under load
        CmdResult q = client("squeue -h -o %i");
        if (q.rc != 0 || q.out.empty()) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
      }
    }
    for (auto& d : slurmds_) end(d);
    // A step whose slurmd is gone leaves its slurmstepd: those in this cluster's hosts are its.
    for (size_t i = 0; i < hosts_.size() && i < slurmds_.size(); ++i)
      for (const auto& p : hosts_.processes(i)) {
        std::istringstream in(p);
        pid_t pid = 0;
        std::string comm;
        in >> pid >> comm;
        if (comm == "slurmstepd") {
          Daemon d{pid, start_time(pid)};
          end(d);
        }
      }
    slurmds_.clear();
    end(ctld_);
    end(munged_);
    if (!dir_.empty()) {
      std::error_code ec;
      std::filesystem::remove_all(dir_, ec);
      dir_.clear();
    }
    ok_ = false;
  }

 private:
  struct Daemon {
    pid_t pid = 0;
    unsigned long long started = 0;  // /proc/PID/stat's starttime: who this pid is
  };

  // Field 22 of /proc/PID/stat (clock ticks after boot); 0 when there is no such process.
  static unsigned long long start_time(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');
    if (close == std::string::npos) return 0;
    std::istringstream rest(stat.substr(close + 2));
    std::string field;
    for (int i = 3; i < 22 && (rest >> field); ++i) {
    }
    unsigned long long t = 0;
    rest >> t;
    return t;
  }
  // The same process, still running (not a zombie).
  static bool alive(const Daemon& d) {
    if (d.pid <= 0 || start_time(d.pid) != d.started) return false;
    std::ifstream in("/proc/" + std::to_string(d.pid) + "/stat");
    std::string stat;
    std::getline(in, stat);
    const auto close = stat.rfind(')');
    return close != std::string::npos && close + 2 < stat.size() && stat[close + 2] != 'Z';
  }
  // SIGTERM, up to 10 s, then SIGKILL and up to 5 s more.
  static void end(Daemon& d) {
    if (!alive(d)) {
      d.pid = 0;
      return;
    }
    ::kill(d.pid, SIGTERM);
    for (int t = 0; t < 200 && alive(d); ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    if (alive(d)) ::kill(d.pid, SIGKILL);
    for (int t = 0; t < 100 && alive(d); ++t)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    d.pid = 0;
  }

  bool fail(const std::string& what) {
    if (error_.empty()) error_ = what;
    return false;
  }

  // `cmd` in the background, its output in `log`; the pid is the daemon's own (nsenter, unshare
  // and sh -c 'exec ...' all exec).
  bool spawn(const std::string& cmd, const std::string& log, Daemon& d) {
    CmdResult r = sh(cmd + " </dev/null >" + shell_quote(log) + " 2>&1 & echo $!");
    d.pid = static_cast<pid_t>(std::atoi(r.out.c_str()));
    d.started = d.pid > 0 ? start_time(d.pid) : 0;
    if (d.pid <= 0 || d.started == 0) return fail("could not start: " + cmd + ": " + r.out);
    return true;
  }

  bool write(const std::string& path, const std::string& text, mode_t mode) {
    {
      std::ofstream out(path, std::ios::binary);
      out << text;
      if (!out) return fail("cannot write " + path);
    }
    return ::chmod(path.c_str(), mode) == 0 || fail("cannot chmod " + path);
  }

  std::string slurm_conf() const {
    const unsigned cpus = std::clamp(std::thread::hardware_concurrency(), 1u, 2u);
    std::string c =
        "# A test cluster over emulated hosts: tests/e2e/slurm_cluster.h\n"
        "ClusterName=" +
        cluster_ +
        "\n"
        "SlurmctldHost=" +
        controller_name() + "(" + hosts_.controller_address() +
        ")\n"
        "SlurmUser=root\n"
        "SlurmdUser=root\n"
        "AuthType=auth/munge\n"
        "CredType=cred/munge\n"
        "AuthInfo=socket=" +
        dir_ +
        "/munge/sock\n"
        "ProctrackType=proctrack/linuxproc\n"
        "TaskPlugin=task/none\n"
        "SelectType=select/cons_tres\n"
        "JobAcctGatherType=jobacct_gather/none\n"
        "AccountingStorageType=accounting_storage/none\n"
        "JobCompType=jobcomp/none\n"
        "MpiDefault=none\n"
        "MailProg=/bin/true\n"
        "ReturnToService=2\n"
        "KillWait=5\n"
        "MessageTimeout=30\n"
        "StateSaveLocation=" +
        dir_ +
        "/ctld\n"
        "SlurmctldPidFile=" +
        dir_ +
        "/run/slurmctld.pid\n"
        "SlurmctldLogFile=" +
        dir_ +
        "/log/slurmctld.log\n"
        "SlurmdSpoolDir=" +
        dir_ +
        "/spool/%n\n"
        "SlurmdPidFile=" +
        dir_ +
        "/run/slurmd-%n.pid\n"
        "SlurmdLogFile=" +
        dir_ + "/log/slurmd-%n.log\n";
    for (size_t i = 0; i < hosts_.size(); ++i)
      c += "NodeName=" + hosts_.name(i) + " NodeAddr=" + hosts_.underlay(i) +
           " CPUs=" + std::to_string(cpus) + "\n";
    c += "PartitionName=tb Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
    return c;
  }

  bool start_all(int wait_s) {
    if (!is_root()) return fail("needs root");
    if (!hosts_.ok()) return fail("the emulated hosts are not up: " + hosts_.error());
    if (const std::string m = slurm_missing(); !m.empty())
      return fail("not installed: " + m +
                  " (scripts/setup --with slurm installs slurmctld slurmd slurm-client munge)");
    std::string t = "/tmp/" + hosts_.prefix() + "-slurm-XXXXXX";
    if (::mkdtemp(t.data()) == nullptr) return fail("mkdtemp " + t);
    dir_ = t;
    cluster_ = "tb" + std::to_string(::getpid());
    std::error_code ec;
    for (const char* d : {"munge", "ctld", "run", "log", "spool"})
      std::filesystem::create_directory(dir_ + "/" + d, ec);
    for (size_t i = 0; i < hosts_.size(); ++i)
      std::filesystem::create_directory(dir_ + "/spool/" + hosts_.name(i), ec);
    // Clients reach munged's socket through its directory: searchable by all, as munged wants.
    ::chmod(dir_.c_str(), 0711);
    ::chmod((dir_ + "/munge").c_str(), 0711);

    // munge: a key of its own (1 KiB from the kernel's random source), its own socket.
    std::string key(1024, '\0');
    {
      std::ifstream random("/dev/urandom", std::ios::binary);
      if (!random.read(key.data(), static_cast<std::streamsize>(key.size())))
        return fail("cannot read /dev/urandom");
    }
    if (!write(dir_ + "/munge/key", key, 0600) || !write(conf(), slurm_conf(), 0644)) return false;
    const std::string m = dir_ + "/munge/";
    if (!spawn("munged --foreground --force --num-threads=10 --socket=" + m +
                   "sock --key-file=" + m + "key --pid-file=" + m + "pid --seed-file=" + m +
                   "seed --log-file=" + m + "log",
               dir_ + "/log/munged.out", munged_))
      return false;
    if (!until(10, [&] {
          return sh("{ munge -n -S " + m + "sock | unmunge -S " + m + "sock; } 2>&1").rc == 0;
        }))
      return fail("munged did not answer on " + m + "sock within 10 s");

    // slurmctld in the switch namespace, named as SlurmctldHost says.
    if (!spawn("nsenter --net=/run/netns/" + hosts_.switch_netns() + " unshare -u sh -c " +
                   shell_quote("hostname " + controller_name() + " && exec slurmctld -D -f " +
                               shell_quote(conf())),
               dir_ + "/log/slurmctld.out", ctld_))
      return false;
    if (!until(30, [&] { return client("scontrol ping").out.find("is UP") != std::string::npos; }))
      return fail("slurmctld did not answer within 30 s");

    // One slurmd inside each host.
    for (size_t i = 0; i < hosts_.size(); ++i) {
      Daemon d;
      if (!spawn("nsenter -t " + std::to_string(hosts_.holder(i)) + " -n -m -u -- slurmd -D -f " +
                     shell_quote(conf()),
                 dir_ + "/log/slurmd-" + hosts_.name(i) + ".out", d))
        return false;
      slurmds_.push_back(d);
    }
    std::string last;
    const bool idle = until(wait_s, [&] {
      CmdResult r = client("sinfo -h -N -o '%N %t'");
      last = r.out;
      if (r.rc != 0) return false;
      for (size_t i = 0; i < hosts_.size(); ++i)
        if (r.out.find(hosts_.name(i) + " idle\n") == std::string::npos) return false;
      return true;
    });
    if (!idle)
      return fail("not every node idle within " + std::to_string(wait_s) + " s; sinfo: " + last);
    return true;
  }

  // Polls `ready` every 100 ms for at most `seconds`.
  template <class F>
  static bool until(int seconds, F ready) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (ready()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return ready();
  }

  const EmulatedHosts& hosts_;
  std::string dir_, cluster_, error_;
  Daemon munged_, ctld_;
  std::vector<Daemon> slurmds_;
  bool ok_ = false;
  double start_s_ = 0;
};

}  // namespace tb::e2e
