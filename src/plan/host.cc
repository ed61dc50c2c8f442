#include "plan/host.h"

#include <algorithm>
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

namespace {

// The shaping capabilities the host has, by their capability names (Backend::needs).
std::vector<std::string> shaping_caps(const HostCaps& host) {
  std::vector<std::string> available;
  if (host.netem) available.emplace_back("netem");
  if (host.tbf) available.emplace_back("tbf");
  if (host.htb) available.emplace_back("htb");
  return available;
}

// What `b` needs that `available` lacks: "" when nothing.
std::string missing_need(const shaping::Backend& b, const std::vector<std::string>& available) {
  for (std::string_view need : b.needs)
    if (std::ranges::find(available, need) == available.end()) return std::string(need);
  return "";
}

}  // namespace

Result<ShapingChoice> choose_shaping(const std::string& requested, const HostCaps& host) {
  if (requested == "none") return ShapingChoice{"none", "asked"};
  const std::vector<std::string> available = shaping_caps(host);
  if (requested != "auto") {
    const shaping::Backend* asked = shaping::find_backend(requested);
    if (!asked)
      return bad_input("--shaping " + requested + ": use auto, none or one of " +
                       shaping::backend_kinds());
    if (const std::string need = missing_need(*asked, available); host.probed && !need.empty()) {
      std::string usable = "auto, none";
      for (const auto& b : shaping::backend_registry())
        if (missing_need(b, available).empty()) usable += ", " + std::string(b.kind);
      return bad_input("--shaping " + requested + ": this kernel has no working " + need +
                       " (see `testbedctl doctor`); use " + usable);
    }
    return ShapingChoice{requested, "asked"};
  }
  const shaping::Backend* b = shaping::pick_backend(available);
  if (!b)
    return bad_input(
        "no shaping backend works on this kernel (netem, tbf and htb all failed "
        "their probes; see `testbedctl doctor`); use --shaping none to build "
        "unshaped links");
  return ShapingChoice{std::string(b->kind), host.how};
}

}  // namespace tb::plan
