// tb-rank: one emulated GPU's worker. `testbedctl bench` starts one per selected GPU inside
// that GPU's namespace:
//
//   tb-rank --job RESULTS/job.json --rank R
//
// Exit codes: 0 done, 1 a collective failed (timeout, a peer gone), 2 bad job or arguments.
#include <csignal>

#include <CLI/CLI.hpp>

#include "workload/rank_main.h"

int main(int argc, char** argv) {
  CLI::App app{"tb-rank: one rank of a testbedctl bench"};
  std::string job;
  int rank = -1;
  app.add_option("--job", job, "the run's job.json")->required();
  app.add_option("--rank", rank, "this process's rank")->required();
  CLI11_PARSE(app, argc, argv);
  // A write to a peer that died must fail with EPIPE and reach the collective as an error, not
  // kill this rank: our transports send with MSG_NOSIGNAL, Gloo's TCP pair does not (seen: a
  // surviving Gloo rank reported as "signal Broken pipe" instead of its own error).
  std::signal(SIGPIPE, SIG_IGN);
  return tb::workload::rank_main(job, rank);
}
