// bench's and run's transport flags, one definition for both verbs. --transport is checked here
// against its name table (exit 2); the ranges where the job is made. Not thread-safe (CLI11
// set-up).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

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
  app->add_option("--qps", t.qps, "--transport rdma: queue pairs per peer (1..16)")
      ->capture_default_str();
  app->add_option("--ib-timeout", t.ib_timeout,
                  "--transport rdma: ACK timeout exponent, 4.096 us * 2^T (1..31)")
      ->capture_default_str();
  app->add_option("--ib-retry-cnt", t.ib_retry_cnt,
                  "--transport rdma: retries before a peer counts as gone (0..7)")
      ->capture_default_str();
}

}  // namespace tb::cli
