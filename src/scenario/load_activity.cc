// What runs on a lab: [[workload]] and [[fault]], and the node references they make.
#include <algorithm>
#include <map>
#include <regex>
#include <sstream>

#include "scenario/names.h"
#include "scenario/reader.h"

namespace tb::scenario::detail {
namespace {

const std::vector<std::string> kCollectiveKeys = {"op",        "algo",        "ranks", "min_bytes",
                                                  "max_bytes", "step_factor", "iters", "warmup",
                                                  "channels",  "resilient"};
const std::vector<std::string> kCheckpointKeys = {
    "from", "to", "bytes", "qos", "mode", "changed", "full_every", "every", "streams", "block"};
// kind = "command" takes "ranks" too (a collective key).
const std::vector<std::string> kCommandKeys = {"command", "tier", "progress"};
// kind = "training" takes "ranks", "channels" and "warmup" too (collective keys).
const std::vector<std::string> kTrainingKeys = {
    "params", "grad_bytes", "activation_bytes", "layers",  "micro_batches", "samples",
    "tp",     "pp",         "bucket_bytes",     "compute", "steps",         "servers"};
const std::vector<std::string> kTiers = {"auto", "nvl", "rail", "frontend"};
const std::vector<std::string> kOps = {"allreduce", "allgather", "reducescatter", "broadcast",
                                       "reduce",    "alltoall",  "sendrecv"};
// "s0..s3", or "s0" for one; `first` and `last` suffix the two ends ("tor0a..tor3b").
std::string range(const std::string& prefix, int n, std::string_view first = "",
                  std::string_view last = "") {
  const std::string a = prefix + "0" + std::string(first);
  const std::string b = prefix + std::to_string(n - 1) + std::string(last);
  return a == b ? a : a + ".." + b;
}

std::string describe_nodes(const Scenario& s, const Region& r) {
  std::string d = "region " + quote(r.name) + " has servers " + range("s", r.servers) +
                  " with GPUs " + range("g", r.gpus_per_server) + ", ToRs " +
                  (r.dual_tor ? range("tor", s.rails(r), "a", "b") : range("tor", s.rails(r))) +
                  ", ";
  d += r.spines > 0 ? "spines " + range("spine", r.spines) + ", " : "";
  return d + "vpc and tr";
}

std::vector<std::string> nodes_of(const Scenario& s, const Region& r) {
  std::vector<std::string> out = {vpc_node(r.name), tr_node(r.name)};
  for (int k = 0; k < r.spines; ++k) out.push_back(spine_node(r.name, k));
  for (int j = 0; j < s.rails(r); ++j) {
    if (r.dual_tor) {
      out.push_back(tor_node(r.name, j, 1));
      out.push_back(tor_node(r.name, j, 2));
    } else {
      out.push_back(tor_node(r.name, j, 0));
    }
  }
  for (int i = 0; i < r.servers; ++i) {
    out.push_back(server_node(r.name, i));
    for (int j = 0; j < r.gpus_per_server; ++j) out.push_back(gpu_node(r.name, i, j));
  }
  return out;
}

// Checks a node reference; returns its class, or nullopt when it was reported. A node in a
// region whose own fields had errors is not checked (kNone is returned for it).
std::optional<NodeClass> check_node(Table& t, std::string_view key, Loc at, const std::string& node,
                                    const LoadState& st) {
  if (st.unsure_regions.contains(region_of(node))) return NodeClass::kNone;
  NodeClass c = node_class(st.s, node);
  if (c != NodeClass::kNone) return c;
  t.error_at(at, key, explain_missing_node(st.s, node));
  return std::nullopt;
}

// One region reference at `at`; true when it exists.
bool check_region(Table& t, std::string_view key, Loc at, const std::string& name,
                  const Scenario& s) {
  if (s.region(name)) return true;
  t.error_at(at, key, explain_missing_region(s, name));
  return false;
}

void read_ranks(Table& t, Workload& w, const LoadState& st) {
  if (auto ranks = t.strings("ranks", false, true)) {
    w.rank_selectors.clear();
    for (const auto& [sel, at] : *ranks) {
      const std::string c = canonical_node(sel);
      if (c == "all" ||
          (c.find('/') == std::string::npos && check_region(t, "ranks", at, c, st.s))) {
        w.rank_selectors.push_back(c);
        continue;
      }
      if (c.find('/') == std::string::npos) continue;  // reported: no such region
      auto cls = check_node(t, "ranks", at, c, st);
      if (!cls) continue;
      if (*cls != NodeClass::kNone && *cls != NodeClass::kGpu && *cls != NodeClass::kServer) {
        t.error_at(at, "ranks",
                   quote(c) +
                       " is not a server or a GPU; ranks are GPUs, chosen with \"all\", "
                       "a region (\"hz\"), a server (\"hz/s0\") or a GPU (\"hz/s0/g1\")");
        continue;
      }
      w.rank_selectors.push_back(c);
    }
    if (ranks->empty()) t.error("ranks", "must name at least one region, server or GPU");
    w.ranks = join(w.rank_selectors, ",");
  }
}

void read_collective(Table& t, Workload& w, const LoadState& st) {
  if (auto op = t.str("op", true); op && t.one_of("op", *op, kOps)) w.op = *op;
  w.algo = "ring";
  if (auto a = t.str("algo"); a && t.one_of("algo", *a, {"ring", "tree", "hd", "hier"}))
    w.algo = *a;
  read_ranks(t, w, st);
  auto min = t.size("min_bytes");
  auto max = t.size("max_bytes");
  if (min && *min == 0) {
    t.error("min_bytes",
            "must be at least 1 (got 0); the size sweep multiplies it by "
            "step_factor");
    min.reset();
  }
  if (min) w.min_bytes = *min;
  if (max) w.max_bytes = *max;
  if ((min || max) && w.max_bytes < w.min_bytes)
    t.error(max ? "max_bytes" : "min_bytes", "min_bytes (" + format_size(w.min_bytes) +
                                                 ") must not exceed max_bytes (" +
                                                 format_size(w.max_bytes) + ")");
  if (auto f = t.integer("step_factor", false, 2, 1024)) w.step_factor = static_cast<int>(*f);
  if (auto n = t.integer("iters", false, 1, 1000000)) w.iters = static_cast<int>(*n);
  if (auto n = t.integer("warmup", false, 0, 1000000)) w.warmup = static_cast<int>(*n);
  if (auto n = t.integer("channels", false, 1, 64)) w.channels = static_cast<int>(*n);
  if (auto r = t.boolean("resilient")) w.resilient = *r;
}

void read_command(Table& t, Workload& w, const LoadState& st) {
  read_ranks(t, w, st);
  if (auto cmd = t.strings("command", true, true)) {
    for (const auto& [word, at] : *cmd) {
      if (cmd->size() > 1) {
        w.command.push_back(word);
        continue;
      }
      std::istringstream in(word);  // one string: split at spaces (no shell)
      for (std::string part; in >> part;) w.command.push_back(part);
    }
    if (w.command.empty() || w.command.front().empty())
      t.error("command", "must name a program, e.g. [\"/usr/bin/python3\", \"train.py\"]");
  }
  if (auto tier = t.str("tier"); tier && t.one_of("tier", *tier, kTiers)) w.tier = *tier;
  if (auto p = t.str("progress")) {
    try {
      std::regex re(*p);
      w.progress = *p;
    } catch (const std::regex_error& e) {
      t.error("progress", "not a regular expression (ECMAScript): " + std::string(e.what()));
    }
  }
}

void read_training(Table& t, Workload& w, const LoadState& st) {
  read_ranks(t, w, st);
  // Between servers: the rail ("auto") or the frontend (the VPC experiment).
  if (auto tier = t.str("tier"); tier && t.one_of("tier", *tier, {"auto", "rail", "frontend"}))
    w.tier = *tier;
  auto& m = w.training;
  w.warmup = 1;
  if (auto n = t.integer("warmup", false, 0, 1000)) w.warmup = static_cast<int>(*n);
  if (auto n = t.integer("channels", false, 1, 64)) w.channels = static_cast<int>(*n);
  if (auto r = t.boolean("resilient")) w.resilient = *r;
  // A count, not a size: 50_000_000 (TOML's digit separators), never "50M" (which is MiB).
  if (auto n = t.integer("params", true, 1, 1'000'000'000'000))
    m.params = static_cast<uint64_t>(*n);
  if (auto n = t.integer("grad_bytes", false, 1, 8)) m.grad_bytes = static_cast<int>(*n);
  if (auto n = t.size("activation_bytes")) {
    if (*n < 4)
      t.error("activation_bytes", "must be at least 4 bytes (one float32 element)");
    else
      m.activation_bytes = *n;
  }
  if (auto n = t.integer("layers", false, 1, 1024)) m.layers = static_cast<int>(*n);
  if (auto n = t.integer("micro_batches", false, 1, 1024)) m.micro_batches = static_cast<int>(*n);
  if (auto n = t.integer("samples", false, 1, 1024)) m.samples = static_cast<int>(*n);
  if (auto n = t.integer("tp", false, 1, 1024)) m.tp = static_cast<int>(*n);
  if (auto n = t.integer("pp", false, 1, 1024)) m.pp = static_cast<int>(*n);
  if (auto n = t.size("bucket_bytes")) {
    if (*n < 4)
      t.error("bucket_bytes", "must be at least 4 bytes (DDP's default is 25M)");
    else
      m.bucket_bytes = *n;
  }
  if (auto d = t.duration("compute")) m.compute = *d;
  if (auto n = t.integer("steps", false, 1, 100000)) m.steps = static_cast<int>(*n);
  if (m.layers % m.pp != 0)
    t.error(t.has("layers") ? "layers" : "pp",
            "layers (" + std::to_string(m.layers) +
                ") must divide into pp = " + std::to_string(m.pp) + " pipeline stages");
  if (const toml::value* v = t.find("servers")) {
    if (!v->is_array() || v->as_array().empty()) {
      t.error("servers", "must be an array of server counts, e.g. [1, 2, 4]");
    } else {
      for (const auto& e : v->as_array()) {
        if (!e.is_integer() || e.as_integer() < 1 || e.as_integer() > 100000) {
          t.error_at(loc_of(e), "servers",
                     "each entry must be a server count 1..100000 (e.g. [1, 2, 4])");
          m.servers.clear();
          break;
        }
        const int n = static_cast<int>(e.as_integer());
        if (!m.servers.empty() && n <= m.servers.back()) {
          t.error_at(loc_of(e), "servers",
                     "must increase (got " + std::to_string(n) + " after " +
                         std::to_string(m.servers.back()) + ")");
          m.servers.clear();
          break;
        }
        m.servers.push_back(n);
      }
    }
  }
}

void read_checkpoint(Table& t, Workload& w, const LoadState& st) {
  auto from = t.str("from", true);
  auto to = t.str("to", true);
  if (from && check_region(t, "from", t.loc("from"), *from, st.s)) w.from = *from;
  if (to && check_region(t, "to", t.loc("to"), *to, st.s)) w.to = *to;
  if (from && to && *from == *to)
    t.error("to", "must differ from from (both are " + quote(*to) +
                      "); a checkpoint is copied to another region");
  if (auto b = t.size("bytes", true)) {
    if (*b == 0)
      t.error("bytes", "must be greater than 0 (got 0)");
    else
      w.bytes = *b;
  }
  if (auto q = t.str("qos"); q && t.one_of("qos", *q, {"gold", "silver", "bronze"})) w.qos = *q;
  if (auto m = t.str("mode"); m && t.one_of("mode", *m, {"full", "incremental", "layered"}))
    w.mode = *m;
  if (auto c = t.percent("changed")) {
    if (*c > 0)
      w.changed = *c / 100;
    else
      t.error("changed", "must be above 0% (an incremental checkpoint of nothing sends nothing)");
  }
  if (auto k = t.integer("full_every", false, 2, 1000000)) w.full_every = static_cast<int>(*k);
  if (w.mode != "incremental" && w.mode != "layered" && t.has("changed"))
    t.error("changed", "only for mode = \"incremental\" or \"layered\"");
  if (w.mode != "layered" && t.has("full_every"))
    t.error("full_every", "only for mode = \"layered\"");
  if (const toml::value* e = t.find("every")) {
    if (e->is_integer()) {
      if (auto n = t.integer("every", false, 1, 1000000)) w.every_steps = static_cast<int>(*n);
    } else if (auto d = t.duration("every")) {
      if (d->ns >= 100'000'000 && d->ns <= 86'400'000'000'000)
        w.every = *d;
      else
        t.error("every", "must be 100ms..24h, or a whole number of the run's workload steps");
    }
  }
  if (auto n = t.integer("streams", false, 1, 64)) w.streams = static_cast<int>(*n);
  if (auto b = t.size("block")) {
    if (*b >= 512 && *b <= (64u << 20))
      w.block = *b;
    else
      t.error("block", "must be 512 bytes..64M (got " + format_size(*b) + ")");
  }
}

}  // namespace

void read_workloads(Table& top, LoadState& st) {
  std::map<std::string, Loc> seen;
  int index = 0;
  for (const toml::value* e : table_array(top, "workload")) {
    ++index;
    std::vector<std::string> keys = {"name", "kind"};
    keys.insert(keys.end(), kCollectiveKeys.begin(), kCollectiveKeys.end());
    keys.insert(keys.end(), kCheckpointKeys.begin(), kCheckpointKeys.end());
    keys.insert(keys.end(), kCommandKeys.begin(), kCommandKeys.end());
    keys.insert(keys.end(), kTrainingKeys.begin(), kTrainingKeys.end());
    Table t(*e, "workload #" + std::to_string(index), "[[workload]]", keys, st.d);
    Workload w;
    w.loc = t.loc();
    bool add = false;
    if (auto name = t.str("name", true)) {
      t.set_context("workload " + quote(*name));
      check_name(t, "name", *name, 32, true, "workload name", "since results are filed under it");
      w.name = *name;
      if (auto it = seen.find(*name); it != seen.end()) {
        t.error("name", "duplicate workload " + quote(*name) + " (first at line " +
                            std::to_string(it->second.line) + "); workload names must be unique");
      } else {
        seen[*name] = t.loc("name");
        add = true;
      }
    }
    auto kind = t.str("kind", true);
    if (kind && t.one_of("kind", *kind, {"collective", "checkpoint", "command", "training"})) {
      w.kind = *kind;
      if (*kind != "training") t.not_for(kTrainingKeys, "only for kind = \"training\"");
      if (*kind == "collective") {
        t.not_for(kCheckpointKeys, "only for kind = \"checkpoint\"");
        t.not_for(kCommandKeys, "only for kind = \"command\"");
        read_collective(t, w, st);
      } else if (*kind == "command") {
        std::vector<std::string> collective_only;
        for (const auto& k : kCollectiveKeys)
          if (k != "ranks") collective_only.push_back(k);
        t.not_for(collective_only, "only for kind = \"collective\"");
        t.not_for(kCheckpointKeys, "only for kind = \"checkpoint\"");
        read_command(t, w, st);
      } else if (*kind == "training") {
        std::vector<std::string> collective_only;
        for (const auto& k : kCollectiveKeys)
          if (k != "ranks" && k != "channels" && k != "warmup" && k != "resilient")
            collective_only.push_back(k);
        t.not_for(collective_only, "only for kind = \"collective\"");
        t.not_for(kCheckpointKeys, "only for kind = \"checkpoint\"");
        t.not_for({"command", "progress"}, "only for kind = \"command\"");
        read_training(t, w, st);
      } else {
        t.not_for(kCollectiveKeys, "only for kind = \"collective\"");
        t.not_for(kCommandKeys, "only for kind = \"command\"");
        read_checkpoint(t, w, st);
      }
    }
    t.finish();
    if (add) st.s.workloads.push_back(std::move(w));
  }
}

std::string region_of(const std::string& node) {
  return node.substr(0, node.find('/'));
}

NodeClass node_class(const Scenario& s, const std::string& node) {
  if (!node_exists(s, node)) return NodeClass::kNone;
  const std::string rest = node.substr(node.find('/') + 1);
  if (rest.find('/') != std::string::npos) return NodeClass::kGpu;
  if (rest == "vpc") return NodeClass::kVpc;
  if (rest == "tr") return NodeClass::kTr;
  if (rest.starts_with("spine")) return NodeClass::kSpine;
  if (rest.starts_with("tor")) return NodeClass::kTor;
  return NodeClass::kServer;
}

std::string explain_missing_node(const Scenario& s, const std::string& node) {
  const Region* r = s.region(region_of(node));
  if (node.find('/') == std::string::npos || !r) {
    std::string msg = "no node " + quote(node);
    if (node.find('/') == std::string::npos)
      return msg + "; node names are <region>/<node>, e.g. \"hz/s0/g1\", \"hz/tor0\", \"hz/tr\"";
    return msg + ": " + explain_missing_region(s, region_of(node));
  }
  std::string msg = "no node " + quote(node) + " in this lab; ";
  if (auto c = closest(node, nodes_of(s, *r))) msg += "did you mean " + quote(*c) + "? ";
  return msg + "(" + describe_nodes(s, *r) + ")";
}

}  // namespace tb::scenario::detail
