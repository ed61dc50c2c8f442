#include "workload/job.h"

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

namespace tb::workload {

nlohmann::json to_json(const Job& j) {
  nlohmann::json ranks = nlohmann::json::array();
  for (const auto& r : j.ranks)
    ranks.push_back(
        {{"node", r.node}, {"netns", r.netns}, {"server", r.server}, {"gloo_addr", r.gloo_addr}});
  nlohmann::json peers = nlohmann::json::array();
  for (const auto& row : j.peers) {
    nlohmann::json pr = nlohmann::json::array();
    for (const auto& p : row) {
      nlohmann::json e = {p.dst, p.src, p.tier};
      if (!p.ports.empty()) e.push_back(p.ports);  // bound channels (--ports spread) only
      pr.push_back(e);
    }
    peers.push_back(pr);
  }
  nlohmann::json rdma = nlohmann::json::array();
  for (const auto& row : j.rdma) {
    nlohmann::json r = nlohmann::json::array();
    for (char c : row) r.push_back(c ? 1 : 0);
    rdma.push_back(r);
  }
  nlohmann::json out = {{"lab", j.lab},
                        {"run_id", j.run_id},
                        {"results_dir", j.results_dir},
                        {"store_dir", j.store_dir},
                        {"impl", to_string(j.impl)},
                        {"channels", j.transport.channels},
                        {"timeout_ms", j.timeout_ms},
                        {"bench", to_json(j.bench)},
                        {"steady", j.steady},
                        {"start_iter", j.start_iter},
                        {"ranks", ranks},
                        {"peers", peers},
                        {"transport", to_string(j.transport.kind)},
                        {"intra_server", std::string(name(j.transport.intra_server))},
                        {"qps", j.transport.qps},
                        {"ib_timeout", j.transport.ib_timeout},
                        {"ib_retry_cnt", j.transport.ib_retry_cnt},
                        {"ports", j.transport.spread_ports ? "spread" : "route"},
                        {"rdma", rdma},
                        {"rdma_fallback", j.rdma_fallback}};
  if (j.training) out["training"] = to_json(*j.training);
  return out;
}

Result<Job> job_from_json(const nlohmann::json& in) {
  Job j;
  try {
    j.lab = in.at("lab").get<std::string>();
    j.run_id = in.at("run_id").get<std::string>();
    j.results_dir = in.at("results_dir").get<std::string>();
    j.store_dir = in.at("store_dir").get<std::string>();
    const auto impl = in.at("impl").get<std::string>();
    if (auto i = parse_impl(impl))
      j.impl = *i;
    else
      return bad_input("job: impl '" + impl + "' is not " + impl_choices());
    j.transport.channels = in.at("channels").get<int>();
    j.timeout_ms = in.at("timeout_ms").get<int>();
    j.steady = in.value("steady", false);
    j.start_iter = in.value("start_iter", int64_t{0});
    auto b = bench_spec_from_json(in.at("bench"));
    if (!b) return std::unexpected(b.error());
    j.bench = *b;
    for (const auto& r : in.at("ranks"))
      j.ranks.push_back({r.at("node").get<std::string>(), r.at("netns").get<std::string>(),
                         r.at("server").get<int>(), r.at("gloo_addr").get<std::string>()});
    for (const auto& row : in.at("peers")) {
      std::vector<collective::TcpPeer> pr;
      for (const auto& p : row)
        pr.push_back(
            {p[0].get<std::string>(), p[1].get<std::string>(), p[2].get<std::string>(),
             p.size() > 3 ? p[3].get<std::vector<std::string>>() : std::vector<std::string>{}});
      j.peers.push_back(std::move(pr));
    }
    // Absent in jobs written before the RDMA transport: TCP.
    const auto transport = in.value("transport", std::string("tcp"));
    j.transport.qps = in.value("qps", 1);
    j.transport.ib_timeout = in.value("ib_timeout", 14);
    j.transport.ib_retry_cnt = in.value("ib_retry_cnt", 7);
    // Absent in jobs written before --ports: route.
    const auto ports = in.value("ports", std::string("route"));
    if (ports != "route" && ports != "spread")
      return bad_input("job: ports '" + ports + "' is not route or spread");
    j.transport.spread_ports = ports == "spread";
    if (in.contains("rdma"))
      for (const auto& row : in.at("rdma")) {
        std::vector<char> r;
        for (const auto& c : row) r.push_back(c.get<int>() != 0 ? 1 : 0);
        j.rdma.push_back(std::move(r));
      }
    if (in.contains("rdma_fallback"))
      j.rdma_fallback = in.at("rdma_fallback").get<std::vector<std::string>>();
    if (in.contains("training")) {
      auto t = training_spec_from_json(in.at("training"));
      if (!t) return std::unexpected(t.error());
      j.training = *t;
    }
    // Absent in jobs written before the shared-memory transport: net.
    const auto intra = in.value("intra_server", std::string("net"));
    if (auto i = parse_intra_server(intra))
      j.transport.intra_server = *i;
    else
      return bad_input("job: intra_server '" + intra + "' is not " + intra_server_choices());
    if (auto t = parse_transport(transport))
      j.transport.kind = *t;
    else
      return bad_input("job: transport '" + transport + "' is not " + transport_choices());
    if (!j.rdma.empty() && j.rdma.size() != j.ranks.size())
      return bad_input("job: rdma has " + std::to_string(j.rdma.size()) + " rows for " +
                       std::to_string(j.ranks.size()) + " ranks");
  } catch (const nlohmann::json::exception& e) {
    return bad_input(std::string("job: ") + e.what());
  }
  return j;
}

std::string stop_path(const Job& j) {
  return j.results_dir + "/stop";
}

Result<Job> load_job(const std::string& path) {
  std::ifstream in(path);
  if (!in) return sys_fail("read job " + path);
  try {
    auto j = job_from_json(nlohmann::json::parse(in));
    if (!j) return std::unexpected(with_context(j.error(), path));
    return j;
  } catch (const nlohmann::json::exception& e) {
    return bad_input(path + ": " + e.what());
  }
}

RdmaPairCount count_rdma_pairs(const Job& job) {
  RdmaPairCount c;
  for (size_t i = 0; i < job.peers.size(); ++i)
    for (size_t j = i + 1; j < job.peers[i].size(); ++j) {
      if (job.peers[i][j].tier == "rail") ++c.rail;
      if (i < job.rdma.size() && j < job.rdma[i].size() && job.rdma[i][j]) ++c.rdma;
    }
  return c;
}

}  // namespace tb::workload
