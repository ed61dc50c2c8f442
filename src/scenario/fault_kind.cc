#include "scenario/fault_kind.h"

#include <array>

#include "core/error.h"

namespace tb::scenario {
namespace {

using enum FaultKind;
using enum FaultTarget;

constexpr std::array<FaultKindInfo, 10> kKinds{{
    {kLinkDown, "link-down", "link-down", kLink},
    {kLinkUp, "link-up", "link-up", kLink},
    {kFlap, "flap", "flap", kLink},
    {kLoss, "loss", "loss", kLink},
    {kBlackhole, "blackhole", "blackhole", kLink},
    {kLatency, "latency", "latency", kLink},
    {kPartition, "partition", "partition", kRegions},
    {kNodeCrash, "node-crash", "crash", kNode},
    {kRankKill, "rank-kill", "kill", kNode},
    {kPfcStorm, "pfc-storm", "pfc-storm", kNode},
}};

}  // namespace

std::span<const FaultKindInfo> fault_kinds() {
  return kKinds;
}

const FaultKindInfo& info(FaultKind k) {
  for (const auto& i : kKinds)
    if (i.kind == k) return i;
  TB_CHECK(false);  // every FaultKind has a row in kKinds
  return kKinds.front();
}

std::string_view name(FaultKind k) {
  return info(k).name;
}

std::string to_string(FaultKind k) {
  return std::string(name(k));
}

std::optional<FaultKind> parse_fault_kind(std::string_view name) {
  for (const auto& i : kKinds)
    if (i.name == name) return i.kind;
  return std::nullopt;
}

std::vector<std::string> fault_kind_names() {
  std::vector<std::string> out;
  for (const auto& i : kKinds) out.emplace_back(i.name);
  return out;
}

std::vector<std::string> fault_kind_names(FaultTarget target) {
  std::vector<std::string> out;
  for (const auto& i : kKinds)
    if (i.target == target) out.emplace_back(i.name);
  return out;
}

}  // namespace tb::scenario
