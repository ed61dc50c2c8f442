#include "report/launch.h"

#include <fmt/format.h>

namespace tb::report {

std::string launch_prefix(const launch::CommandJob& job, int rank) {
  if (job.mpi) return "[mpirun " + job.ranks.front().node + "] ";
  return "[rank " + std::to_string(rank) + " " + job.ranks.at(static_cast<size_t>(rank)).node +
         "] ";
}

std::string launch_header(const launch::CommandJob& job) {
  std::string cmd;
  for (const auto& a : job.argv) cmd += (cmd.empty() ? "" : " ") + a;
  std::string out =
      fmt::format("launch {}: {} rank(s){} over {} ({}), MASTER_ADDR={}:{}\n", job.lab,
                  job.ranks.size(), job.mpi ? " under mpirun" : "", launch::to_string(job.tier),
                  job.ifname, job.master_addr, job.master_port);
  if (!job.tier_note.empty()) out += "launch " + job.lab + ": " + job.tier_note + "\n";
  out += "launch " + job.lab + ": " + cmd + "\n";
  out += "launch " + job.lab + ": logs and job.json in " + job.results_dir + "\n";
  return out;
}

std::string launch_footer(const launch::CommandJob& job, const launch::CommandResult& res) {
  std::string out;
  for (size_t i = 0; i < res.ranks.size(); ++i) {
    const auto& e = res.ranks[i];
    const std::string who = job.mpi ? "mpirun (" + job.ranks.front().node + ")"
                                    : fmt::format("rank {} ({})", i, job.ranks.at(i).node);
    out += fmt::format("launch {}: {}: {} after {:.2f} s\n", job.lab, who, e.how, e.end_s);
  }
  if (!res.hosts.empty())
    out += fmt::format("launch {}: ranks on hosts {}; every rank's log gathered here in {}/logs\n",
                       job.lab, res.hosts, job.results_dir);
  for (const auto& e : res.errors) out += fmt::format("launch {}: {}\n", job.lab, e);
  if (res.ok())
    out +=
        fmt::format("launch {}: all {} exited 0 in {:.2f} s\n", job.lab,
                    job.mpi ? std::string("(mpirun)") : std::to_string(res.ranks.size()) + " ranks",
                    res.wall_s);
  else
    out += fmt::format("launch {}: failed: {} ({:.2f} s); logs in {}/logs\n", job.lab,
                       res.reason.empty() ? "a rank exited non-zero" : res.reason, res.wall_s,
                       job.results_dir);
  return out;
}

}  // namespace tb::report
