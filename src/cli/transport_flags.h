// bench's and run's transport flags, one definition for both verbs. --transport and
// --intra-server are checked here against their name tables, the tunables against their ranges
// (collective/rdma/rdma.h), both while the command line is parsed (exit 2). Not thread-safe
// (CLI11 set-up).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "cli/flag_checks.h"
#include "collective/rdma/rdma.h"
#include "workload/transport.h"

namespace tb::cli {

inline void add_transport_flags(CLI::App* app, workload::TransportOptions& t) {
  app->add_option_function<std::string>(
         "--transport",
         [&t](const std::string& text) {
           auto kind = workload::parse_transport_flag(text);
           if (!kind) throw CLI::ValidationError(kind.error().message);
           t.kind = *kind;
         },
         "tcp, or rdma (rail pairs over RDMA verbs on the lab's rxe devices)")
      ->default_str(workload::to_string(t.kind));
  app->add_option_function<std::string>(
         "--intra-server",
         [&t](const std::string& text) {
           auto i = workload::parse_intra_server_flag(text);
           if (!i) throw CLI::ValidationError(i.error().message);
           t.intra_server = *i;
         },
         "native: GPUs of one server talk over net (the emulated NVLink link, shaped and "
         "faultable) or shm (shared memory, as NCCL's SHM/P2P: bypasses the NVLink emulation)")
      ->default_str(std::string(workload::name(t.intra_server)));
  app->add_option("--qps", t.qps, "--transport rdma: queue pairs per peer")
      ->capture_default_str()
      ->check(whole_in(collective::kQpsRange));
  app->add_option("--ib-timeout", t.ib_timeout,
                  "--transport rdma: ACK timeout exponent, 4.096 us * 2^T")
      ->capture_default_str()
      ->check(whole_in(collective::kIbTimeoutRange));
  app->add_option("--ib-retry-cnt", t.ib_retry_cnt,
                  "--transport rdma: retries before a peer counts as gone")
      ->capture_default_str()
      ->check(whole_in(collective::kIbRetryCntRange));
}

}  // namespace tb::cli
