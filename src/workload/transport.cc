#include "workload/transport.h"

#include <array>
#include <utility>

#include "collective/rdma/rdma.h"

namespace tb::workload {
namespace {

template <class E, size_t N>
using Table = std::array<std::pair<std::string_view, E>, N>;

constexpr Table<ImplKind, 2> kImpls{{{"native", ImplKind::kNative}, {"gloo", ImplKind::kGloo}}};
constexpr Table<Transport, 2> kTransports{{{"tcp", Transport::kTcp}, {"rdma", Transport::kRdma}}};
constexpr Table<IntraServer, 2> kIntraServers{
    {{"net", IntraServer::kNet}, {"shm", IntraServer::kShm}}};

template <class E, size_t N>
std::string_view name_of(const Table<E, N>& table, E e) {
  for (const auto& [k, v] : table)
    if (v == e) return k;
  TB_CHECK(false);  // every value has a row
  return {};
}

template <class E, size_t N>
std::optional<E> find(const Table<E, N>& table, std::string_view s) {
  for (const auto& [k, v] : table)
    if (k == s) return v;
  return std::nullopt;
}

// "a, b or c"
template <class E, size_t N>
std::string choices(const Table<E, N>& table) {
  std::string out;
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) out += i + 1 == N ? " or " : ", ";
    out += table[i].first;
  }
  return out;
}

}  // namespace

std::string_view name(ImplKind i) {
  return name_of(kImpls, i);
}
std::string_view name(Transport t) {
  return name_of(kTransports, t);
}
std::string_view name(IntraServer i) {
  return name_of(kIntraServers, i);
}
std::string to_string(ImplKind i) {
  return std::string(name(i));
}
std::string to_string(Transport t) {
  return std::string(name(t));
}
std::optional<ImplKind> parse_impl(std::string_view s) {
  return find(kImpls, s);
}
std::optional<Transport> parse_transport(std::string_view s) {
  return find(kTransports, s);
}
std::optional<IntraServer> parse_intra_server(std::string_view s) {
  return find(kIntraServers, s);
}
std::string intra_server_choices() {
  return choices(kIntraServers);
}
std::string impl_choices() {
  return choices(kImpls);
}
std::string transport_choices() {
  return choices(kTransports);
}

Result<Transport> parse_transport_flag(std::string_view text) {
  if (auto t = parse_transport(text)) return *t;
  return bad_input("--transport: '" + std::string(text) + "' is not " + transport_choices());
}

Result<IntraServer> parse_intra_server_flag(std::string_view text) {
  if (auto i = parse_intra_server(text)) return *i;
  return bad_input("--intra-server: '" + std::string(text) + "' is not " + intra_server_choices());
}

bool TransportOptions::rdma_tuned() const {
  const TransportOptions defaults;
  return qps != defaults.qps || ib_timeout != defaults.ib_timeout ||
         ib_retry_cnt != defaults.ib_retry_cnt;
}

Status validate(const TransportOptions& t) {
  if (!collective::kChannelsRange.contains(t.channels))
    return bad_input("--channels: must be " + collective::kChannelsRange.text());
  TB_TRY(collective::validate_rdma_tuning(t.qps, t.ib_timeout, t.ib_retry_cnt));
  if (t.kind == Transport::kTcp && t.rdma_tuned())
    return bad_input(
        "--qps, --ib-timeout and --ib-retry-cnt tune --transport rdma; this run is "
        "--transport tcp");
  return {};
}

}  // namespace tb::workload
