#include "plan/host.h"

#include <regex>
#include <vector>

#include "shaping/backend.h"

namespace tb::plan {

HostCaps assumed_host(std::string how) {
  HostCaps h;
  h.tbf = h.htb = h.nfqueue = true;
  h.how = std::move(how);
  return h;
}

Status validate(const PlanOptions& o) {
  if (!o.lab.empty() && !std::regex_match(o.lab, std::regex("[a-z][a-z0-9]{0,7}")))
    return bad_input("--name \"" + o.lab +
                     "\": a lab name is 1-8 lowercase letters or digits, starting with a letter");
  if (o.shaping != "auto" && o.shaping != "none" && !shaping::find_backend(o.shaping))
    return bad_input("--shaping " + o.shaping + ": use auto, none or one of " +
                     shaping::backend_kinds());
  if (o.rdma != "auto" && o.rdma != "none")
    return bad_input("--rdma " + o.rdma + ": use auto or none");
  return {};
}

Result<ShapingChoice> choose_shaping(const std::string& requested, const HostCaps& host) {
  if (requested == "none") return ShapingChoice{"none", "asked"};
  if (requested != "auto") {
    if (!shaping::find_backend(requested))
      return bad_input("--shaping " + requested + ": use auto, none or one of " +
                       shaping::backend_kinds());
    return ShapingChoice{requested, "asked"};
  }
  std::vector<std::string> available;
  if (host.netem) available.emplace_back("netem");
  if (host.tbf) available.emplace_back("tbf");
  if (host.htb) available.emplace_back("htb");
  const shaping::Backend* b = shaping::pick_backend(available);
  if (!b)
    return bad_input(
        "no shaping backend works on this kernel (netem, tbf and htb all failed "
        "their probes; see `testbedctl doctor`); use --shaping none to build "
        "unshaped links");
  return ShapingChoice{std::string(b->kind), host.how};
}

}  // namespace tb::plan
