// How a job's ranks move their bytes, as types with their name tables: whose collectives run
// (ImplKind: ours, "native", or Gloo's, "gloo") and, for native, the transport ("tcp" for
// every pair, or "rdma": the rail pairs over RDMA verbs, collective/rdma/rdma.h) with its
// tunables (TransportOptions, one struct from the flags through the job file to the ranks).
// The names are the flags' values and the job file's strings. Pure; thread-safe.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tb::workload {

enum class ImplKind { kNative, kGloo };
enum class Transport { kTcp, kRdma };
// How native moves bytes between GPUs of one emulated server: over the lab's network like every
// other pair ("net": the emulated NVLink link, its shaping and faults), or over shared memory
// ("shm", collective/shm/shm.h: as NCCL's SHM/P2P; it bypasses the NVLink emulation).
enum class IntraServer { kNet, kShm };

std::string_view name(ImplKind i);     // "native" "gloo"
std::string_view name(Transport t);    // "tcp" "rdma"
std::string_view name(IntraServer i);  // "net" "shm"
std::string to_string(ImplKind i);
std::string to_string(Transport t);
std::optional<ImplKind> parse_impl(std::string_view s);
std::optional<Transport> parse_transport(std::string_view s);
std::optional<IntraServer> parse_intra_server(std::string_view s);
// The valid names for messages: "native or gloo", "tcp or rdma".
std::string impl_choices();
std::string transport_choices();
std::string intra_server_choices();  // "net or shm"

// The --transport flag's value, checked: "--transport: 'foo' is not tcp or rdma" (exit 2).
Result<Transport> parse_transport_flag(std::string_view text);
// The --intra-server flag's value: "--intra-server: 'foo' is not net or shm" (exit 2).
Result<IntraServer> parse_intra_server_flag(std::string_view text);

// The transport and its tunables, as `bench` and `run` take them (--transport, --intra-server,
// --qps, --ib-timeout, --ib-retry-cnt; bench's --channels) and the job carries them.
struct TransportOptions {
  Transport kind = Transport::kTcp;
  IntraServer intra_server = IntraServer::kNet;  // native: pairs of one server over shm or not
  int qps = 1;           // RDMA: queue pairs per peer (NCCL_IB_QPS_PER_CONNECTION)
  int ib_timeout = 14;   // RDMA: ACK timeout exponent, 4.096 us * 2^t (NCCL_IB_TIMEOUT)
  int ib_retry_cnt = 7;  // RDMA: retries before a peer counts as gone (NCCL_IB_RETRY_CNT)
  int channels = 1;      // TCP connections per peer (native)
  // --ports spread (bench): each pair's channels bound to the GPU NIC's ports in turn where the
  // NIC has several on the same ToRs (dual ToR; launch::bind_ports, collective/tcp/tcp.h);
  // false (--ports route, the default): the routing table's multipath hash picks the port.
  bool spread_ports = false;
  // Whether any RDMA tunable differs from its default.
  bool rdma_tuned() const;
};

// The ranges, each message naming its flag: --channels 1..64, --qps 1..16,
// --ib-timeout 1..31, --ib-retry-cnt 0..7; and no RDMA tunable on --transport tcp (exit 2).
Status validate(const TransportOptions& t);

}  // namespace tb::workload
