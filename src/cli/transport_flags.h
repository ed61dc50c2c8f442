// bench's and run's transport flags, one definition for both verbs; values are checked where
// the job is made (exit 2). Not thread-safe (CLI11 set-up).
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace tb::cli {

inline void add_transport_flags(CLI::App* app, std::string& transport, int& qps, int& ib_timeout,
                                int& ib_retry_cnt) {
  app->add_option("--transport", transport,
                  "tcp, or rdma (rail pairs over RDMA verbs on the lab's rxe devices)")
      ->capture_default_str();
  app->add_option("--qps", qps, "--transport rdma: queue pairs per peer (1..16)")
      ->capture_default_str();
  app->add_option("--ib-timeout", ib_timeout,
                  "--transport rdma: ACK timeout exponent, 4.096 us * 2^T (1..31)")
      ->capture_default_str();
  app->add_option("--ib-retry-cnt", ib_retry_cnt,
                  "--transport rdma: retries before a peer counts as gone (0..7)")
      ->capture_default_str();
}

}  // namespace tb::cli
