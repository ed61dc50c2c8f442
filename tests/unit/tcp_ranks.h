// Ranks as threads over loopback TCP (collective::TcpComm), for the transport's unit tests.
#pragma once

#include <chrono>
#include <functional>
#include <thread>
#include <vector>

#include "collective/tcp/tcp.h"
#include "temp_dir.h"

namespace tb::testing_util {

// Runs body(rank, comm) on n threads over loopback TCP; returns each rank's status.
inline std::vector<Status> on_tcp(int n, int channels, std::chrono::milliseconds timeout,
                                  const std::function<Status(int, collective::TcpComm&)>& body) {
  TempDir dir;
  collective::FileStore store(dir.path());
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      collective::TcpOptions o;
      o.rank = r;
      o.size = n;
      o.channels = channels;
      o.timeout = timeout;
      o.peers.assign(static_cast<size_t>(n), {"127.0.0.1", "127.0.0.1", "lo"});
      auto c = collective::TcpComm::connect(store, o);
      if (!c) {
        st[static_cast<size_t>(r)] = std::unexpected(c.error());
        return;
      }
      st[static_cast<size_t>(r)] = body(r, **c);
    });
  for (auto& t : th) t.join();
  return st;
}

}  // namespace tb::testing_util
