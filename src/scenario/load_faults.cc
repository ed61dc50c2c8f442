// The fault timeline: [[fault]] tables, each checked against the nodes, regions and WAN links
// the scenario builds.
#include <algorithm>

#include "scenario/fault_kind.h"
#include "scenario/names.h"
#include "scenario/reader.h"

namespace tb::scenario::detail {
namespace {

// The kinds acting on `target`, quoted: "\"node-crash\" or \"rank-kill\"".
std::string quoted_kinds(FaultTarget target) {
  const auto names = fault_kind_names(target);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += i + 1 == names.size() ? " or " : ", ";
    out += quote(names[i]);
  }
  return out;
}

// Reads node `key` (canonical form into *out); returns its class, kNone when unchecked, or
// nullopt when absent or reported.
std::optional<NodeClass> read_node(Table& t, std::string_view key, const LoadState& st,
                                   std::string* out) {
  auto v = t.str(key, true);
  if (!v) return std::nullopt;
  *out = canonical_node(*v);
  if (st.unsure_regions.contains(region_of(*out))) return NodeClass::kNone;
  NodeClass c = node_class(st.s, *out);
  if (c == NodeClass::kNone) {
    t.error(key, explain_missing_node(st.s, *out));
    return std::nullopt;
  }
  return c;
}

// A link fault between two transit routers names the WAN link when more than one joins them.
void read_wan_link(Table& t, Fault& f, const LoadState& st) {
  const std::string ra = region_of(f.a), rb = region_of(f.b);
  std::vector<std::string> joining;
  for (const auto& w : st.s.wans)
    if ((w.a == ra && w.b == rb) || (w.a == rb && w.b == ra)) joining.push_back(w.name);
  const std::string ends = quote(f.a) + " and " + quote(f.b);
  auto link = t.str("link");
  if (joining.empty()) {
    t.error("b", "no WAN link joins " + ends + "; add a [[wan]] between " + quote(ra) + " and " +
                     quote(rb));
  } else if (link) {
    if (std::ranges::find(joining, *link) != joining.end())
      f.link = *link;
    else
      t.error("link", quote(*link) + " does not join " + ends + "; " +
                          suggest(*link, joining, "links between them"));
  } else if (joining.size() > 1) {
    t.missing("link", ends + " are joined by " + std::to_string(joining.size()) + " WAN links (" +
                          join(joining) +
                          "); say which one, e.g. link = " + quote(joining.front()));
  } else {
    f.link = joining.front();
  }
}

void read_link_fault(Table& t, Fault& f, const LoadState& st) {
  auto ca = read_node(t, "a", st, &f.a);
  auto cb = read_node(t, "b", st, &f.b);
  if (ca && cb && f.a == f.b)
    t.error("b", "must differ from a (both are " + quote(f.a) + ")");
  else if (ca == NodeClass::kTr && cb == NodeClass::kTr)
    read_wan_link(t, f, st);
  else if (ca && cb && t.has("link") && *ca != NodeClass::kNone && *cb != NodeClass::kNone)
    t.error("link", "only for faults between two transit routers (a and b are " + quote(f.a) +
                        " and " + quote(f.b) + ")");
  else if (t.has("link"))
    t.str("link");  // type-checked; ends were reported above

  if (f.kind == FaultKind::kFlap) {
    if (auto p = t.duration("period", true)) {
      if (p->ns > 0)
        f.period = *p;
      else
        t.error("period", "must be greater than 0");
    }
    if (auto c = t.integer("count", true, kFlapCountRange.lo, kFlapCountRange.hi))
      f.count = static_cast<int>(*c);
  } else {
    t.not_for({"period", "count"}, "only for kind = \"flap\"");
  }
  if (f.kind == FaultKind::kLoss) {
    if (auto l = t.percent("loss", true)) f.loss_pct = *l;
  } else {
    t.not_for({"loss"}, "only for kind = \"loss\"");
  }
  if (f.kind == FaultKind::kLatency) {
    if (auto d = t.duration("delay", true)) f.delay = *d;
  } else {
    t.not_for({"delay"}, "only for kind = \"latency\"");
  }
}

void read_partition(Table& t, Fault& f, const LoadState& st) {
  auto regions = t.strings("regions", true, true);
  if (!regions) return;
  if (regions->size() != 2) {
    t.error("regions", "must name exactly two regions, e.g. [\"hz\", \"bj\"] (got " +
                           std::to_string(regions->size()) + ")");
    return;
  }
  bool ok = true;
  for (const auto& [name, at] : *regions) {
    if (!st.s.region(name)) {
      t.error_at(at, "regions", explain_missing_region(st.s, name));
      ok = false;
    }
  }
  const auto& [a, a_at] = (*regions)[0];
  const auto& [b, b_at] = (*regions)[1];
  if (a == b) {
    t.error_at(b_at, "regions", "must name two different regions (got " + quote(a) + " twice)");
    ok = false;
  }
  if (!ok) return;
  f.region_a = a;
  f.region_b = b;
}

void read_node_fault(Table& t, Fault& f, const LoadState& st) {
  auto c = read_node(t, "node", st, &f.node);
  if (!c || *c == NodeClass::kNone) return;
  if (f.kind == FaultKind::kRankKill && *c != NodeClass::kGpu)
    t.error("node", quote(f.node) +
                        " is not a GPU; rank-kill stops the rank on a GPU node such "
                        "as \"" +
                        region_of(f.node) +
                        "/s0/g0\" (node-crash takes "
                        "the other nodes)");
  if (f.kind == FaultKind::kPfcStorm && *c != NodeClass::kGpu)
    t.error("node", quote(f.node) +
                        " is not a GPU; pfc-storm takes the GPU whose NIC keeps pausing the "
                        "ToR port facing it, such as \"" +
                        region_of(f.node) + "/s0/g0\" (its rail must be lossless)");
  if (f.kind == FaultKind::kNodeCrash && *c == NodeClass::kGpu)
    t.error("node", quote(f.node) +
                        " is a GPU; node-crash takes a ToR, spine, vpc, tr or server "
                        "node (use kind = \"rank-kill\" for a GPU)");
}

}  // namespace

void read_faults(Table& top, LoadState& st) {
  int index = 0;
  for (const toml::value* e : table_array(top, "fault")) {
    ++index;
    Table t(*e, "fault #" + std::to_string(index), "[[fault]]",
            {"at", "kind", "a", "b", "link", "for", "period", "count", "loss", "delay", "regions",
             "node"},
            st.d);
    Fault f;
    f.loc = t.loc();
    if (auto at = t.duration("at", true)) f.at = *at;
    if (auto d = t.duration("for")) f.duration = *d;
    auto kind = t.str("kind", true);
    if (kind && t.one_of("kind", *kind, fault_kind_names())) {
      f.kind = *parse_fault_kind(*kind);
      t.set_context("fault #" + std::to_string(index) + " (" + *kind + ")");
      const FaultTarget target = info(f.kind).target;
      if (target == FaultTarget::kLink)
        read_link_fault(t, f, st);
      else
        t.not_for({"a", "b", "link", "period", "count", "loss", "delay"},
                  "only for link faults (" + join(fault_kind_names(FaultTarget::kLink)) + ")");
      if (target == FaultTarget::kRegions)
        read_partition(t, f, st);
      else
        t.not_for({"regions"}, "only for kind = " + quoted_kinds(FaultTarget::kRegions));
      if (target == FaultTarget::kNode)
        read_node_fault(t, f, st);
      else
        t.not_for({"node"}, "only for kind = " + quoted_kinds(FaultTarget::kNode));
    }
    t.finish();
    st.s.faults.push_back(std::move(f));
  }
}

}  // namespace tb::scenario::detail
