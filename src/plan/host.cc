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

Status check_lab_name(std::string_view lab) {
  static const std::regex kLabName("[a-z][a-z0-9]{0,31}");  // scenario::kMaxLabNameLen
  if (std::regex_match(lab.begin(), lab.end(), kLabName)) return {};
  return bad_input(
      "\"" + std::string(lab) +
      "\" is not a lab name: 1-32 lowercase letters or digits, starting with a letter");
}

Status check_shaping(std::string_view shaping) {
  if (shaping == "auto" || shaping == "none" || shaping::find_backend(shaping)) return {};
  return bad_input("\"" + std::string(shaping) +
                   "\" is not a shaping backend; use auto, none or one of " +
                   shaping::backend_kinds());
}

Status check_rdma(std::string_view rdma) {
  if (rdma == "auto" || rdma == "none") return {};
  return bad_input("\"" + std::string(rdma) + "\" is not auto or none");
}

Status validate(const PlanOptions& o) {
  auto flag = [](const char* name, Status s) -> Status {
    if (s) return s;
    return bad_input(std::string(name) + ": " + s.error().message);
  };
  if (!o.lab.empty()) TB_TRY(flag("--name", check_lab_name(o.lab)));
  TB_TRY(flag("--shaping", check_shaping(o.shaping)));
  return flag("--rdma", check_rdma(o.rdma));
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
    if (auto c = check_shaping(requested); !c) return bad_input("--shaping: " + c.error().message);
    const shaping::Backend* asked = shaping::find_backend(requested);
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
