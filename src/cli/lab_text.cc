#include "cli/lab_text.h"

#include <cstdio>
#include <string>
#include <vector>

#include "report/status.h"
#include "scenario/names.h"

namespace tb::cli {

void print_up(const lab::UpReport& r) {
  const plan::Plan& p = r.plan;
  if (p.host.empty()) {
    std::printf("lab %s is up: %s built in %.2f s\n", p.lab.c_str(),
                report::summary_text(p.topo).c_str(), r.seconds);
  } else {
    size_t here = 0;
    for (const auto& n : p.topo.nodes) here += n.host == p.host;
    std::printf("lab %s is up on host %s: %zu of its %s built in %.2f s\n", p.lab.c_str(),
                p.host.c_str(), here, report::summary_text(p.topo).c_str(), r.seconds);
  }
  std::printf("shaping: %s (%s)%s\n", p.shaping.empty() ? "none" : p.shaping.c_str(),
              p.shaping_how.c_str(),
              p.stages().empty()
                  ? ""
                  : (", " + std::to_string(p.stages().size()) + " delay stages running").c_str());
  std::printf("rdma: %s (%s)\n", r.state.rdma == "rxe" ? "Soft-RoCE on the rail" : "none, TCP",
              r.state.rdma_why.c_str());
  if (!p.host.empty()) {
    int ends = 0;
    for (const auto& op : p.ops) ends += std::holds_alternative<plan::CreateVxlan>(op);
    std::printf("host: %s of %zu (plan digest %s): %d VXLAN tunnel ends to the other hosts\n",
                p.host.c_str(), p.hosts.size(), p.digest.c_str(), ends);
  }
  std::vector<std::string> gpus;
  for (const auto& n : p.topo.nodes)
    if (n.kind == plan::NodeKind::kGpu) gpus.push_back(n.name);
  if (gpus.size() >= 2)
    std::printf("try:  testbedctl status %s\n      testbedctl exec %s %s -- ping -c1 %s\n",
                p.lab.c_str(), p.lab.c_str(), gpus.front().c_str(),
                scenario::host_name(gpus.back()).c_str());
  std::printf("      testbedctl down %s\n", p.lab.c_str());
}

void print_down(const lab::DownReport& r) {
  std::printf(r.was_up ? "lab %s is down\n" : "lab %s was not up; nothing left of it\n",
              r.lab.c_str());
}

}  // namespace tb::cli
