// plan::compile — builds the topology and the ordered ops. See plan.h for the address plan.
#include <algorithm>
#include <map>
#include <set>
#include <type_traits>
#include <variant>

#include "plan/address.h"
#include "plan/congestion.h"
#include "plan/emulate.h"
#include "plan/hosts.h"
#include "plan/plan.h"
#include "plan/rxe.h"
#include "plan/shaping.h"
#include "scenario/names.h"

namespace tb::plan {
namespace {

using scenario::Region;
using scenario::Scenario;

constexpr uint32_t kGpuRailOffset = 8;  // .1 ToR a, .2 ToR b, .3-.7 reserved, GPUs from .8
constexpr int kMetricPrimary = 100;
constexpr int kMetricBackup = 200;

struct RegionAddrs {
  Prefix rail_block;          // every rail prefix plus the spines' chunk
  std::vector<Prefix> rails;  // one per rail
  Prefix spines;              // spine router addresses (inside rail_block)
  Prefix frontend_block;      // VPC subnet, NVLink subnets, VPC<->TR /31
  Prefix vpc;
  std::vector<Prefix> nvl;  // one per server
  Prefix uplink;            // /31 VPC <-> TR
};

class Compiler {
 public:
  explicit Compiler(const Scenario& s) : s_(s), alloc_(s.address_space) {}

  Result<Plan> run(const HostCaps& host, const PlanOptions& o) {
    plan_.lab = s_.lab;
    plan_.failover = s_.failover.mode;
    for (const auto& r : s_.regions) TB_TRY(allocate(r));
    for (const auto& r : s_.regions) build_region(r);
    TB_TRY(build_wan());
    TB_TRY(place_on_hosts(o.host));
    // ECN marking without RED is the delay stage's (design-congestion.md section 4): a kernel
    // with neither RED nor NFQUEUE keeps ecn links drop-tail, and says so.
    if (!host.nfqueue && !host.red)
      for (auto& l : plan_.topo.links)
        if (l.emulated.congestion.model == "ecn") {
          l.emulated.congestion.model = "droptail";
          l.emulated.notes.push_back(
              "ecn not emulated: the delay stage that marks CE needs NFQUEUE, which this kernel "
              "lacks (testbedctl doctor); droptail");
        }
    // Congestion models (issue 32): each lossless queue's figures before shaping sizes it.
    TB_TRY(congestion_plan(plan_, s_));
    for (auto& c : congestion_sysctls(plan_)) sysctls_.push_back(std::move(c));
    set_ecn_congctl(plan_, addrs_, routes_, host.dctcp ? kEcnCongctlDctcp : kEcnCongctl);
    // Of the topology every host plans alike (the congestion figures too; not what depends on
    // this host's kernel, which comes below).
    plan_.digest = digest(plan_.lab, plan_.hosts, plan_.vxlan_port, plan_.topo);
    // Where this kernel has RED, an ecn port marks there (a RED child of its TBF) rather than in
    // a delay stage: the kernel's own ECN, and no NFQUEUE copy of every VPC packet. After the
    // digest: it is this host's kernel, not the topology.
    if (host.red) use_red();
    std::vector<Op> ops;
    std::ranges::move(netns_, std::back_inserter(ops));
    std::ranges::move(bridges_, std::back_inserter(ops));
    for (auto& v : veths_)
      std::visit(
          [&](auto& o) {
            if constexpr (!std::is_same_v<std::decay_t<decltype(o)>, std::monostate>)
              ops.push_back(std::move(o));
          },
          v);
    for (auto* group : {&addrs_, &routes_, &sysctls_})
      std::ranges::move(*group, std::back_inserter(ops));
    for (auto& h : hosts_files(plan_.lab, plan_.topo, wan_adjacent_)) ops.push_back(std::move(h));
    plan_.ops = std::move(ops);
    add_rxe(host, o);
    auto choice = choose_shaping(o.shaping, host);
    if (!choice) return std::unexpected(choice.error());
    // QoS classes are HTB classes whatever the backend (shaping/backend_qos.cc): a kernel found
    // without sch_htb keeps one rate limit per WAN link, and the plan says so.
    if (host.probed && !host.htb)
      for (auto& l : plan_.topo.links)
        if (!l.emulated.qos.empty()) {
          l.emulated.qos = {};
          l.emulated.notes.push_back(
              "QoS classes not built: this kernel has no sch_htb (testbedctl doctor)");
        }
    TB_TRY(add_shaping(plan_, choice->backend, [&](const Link& l) {
      auto p = s_.profiles.find(l.profile);
      if (p == s_.profiles.end() || p->second.loc.line == 0)
        return s_.file.empty() ? std::string() : s_.file + ": ";
      return s_.file + ":" + std::to_string(p->second.loc.line) + ":" +
             std::to_string(p->second.loc.col) + ": [profiles." + l.profile + "] ";
    }));
    plan_.shaping_how = choice->how;
    if (!plan_.stages().empty() && !host.nfqueue)
      return bad_input("links need delay, jitter or loss that backend " + choice->backend +
                       " leaves to the userspace delay stage, but NFQUEUE does not work on this "
                       "kernel (see `testbedctl doctor`); use a kernel with netem "
                       "(scripts/labvm) or --shaping none");
    for (auto& a : agents_) plan_.ops.push_back(StartDaemon{a.netns, std::move(a)});
    for (auto& r : routers_) plan_.ops.push_back(StartDaemon{r.netns, std::move(r)});
    for (auto& f : fabric_) plan_.ops.push_back(StartDaemon{f.netns, std::move(f)});
    // One congestion agent per host, in its first polled switch's namespace: keep_host_ops
    // keeps each host's own.
    for (auto& c : congestion_agents(plan_, s_))
      plan_.ops.push_back(StartDaemon{c.netns, std::move(c)});
    if (!o.host.empty()) keep_host_ops(o.host);
    return std::move(plan_);
  }

 private:
  // Every marking ecn egress (congestion_plan's: bridge ports are left unmarked either way)
  // marks by RED, with no mark slot.
  void use_red() {
    for (auto& l : plan_.topo.links) {
      auto& ec = l.emulated.congestion;
      for (auto* f : {&ec.ab, &ec.ba})
        if (f->model == "ecn") {
          f->red = true;
          f->mark_slot = -1;
        }
    }
  }

  // [[host]]: every node's host, every link between hosts a VXLAN tunnel (VNI vni_base + its
  // index among the cross-host links, in link order; MTU less the encapsulation), each host's
  // part. Before the ops are gathered: a tunnel's two CreateVxlan ops take the
  // place of its CreateVeth, and shaping sees the reduced MTU.
  Status place_on_hosts(const std::string& only) {
    if (s_.hosts.empty()) {
      if (!only.empty())
        return bad_input("--host " + only + ": " + s_.file +
                         " declares no [[host]]; the whole lab is built on one host, without "
                         "--host");
      return {};
    }
    if (!only.empty() && !s_.host(only)) {
      std::vector<std::string> names;
      for (const auto& h : s_.hosts) names.push_back(h.name);
      std::string list;
      for (const auto& n : names) list += (list.empty() ? "" : ", ") + n;
      return bad_input("--host " + only + ": no [[host]] named \"" + only + "\" in " + s_.file +
                       "; its hosts: " + list);
    }
    plan_.vxlan_port = s_.vxlan.port;
    std::map<std::string, std::string> region_host, server_host;
    for (const auto& h : s_.hosts) {
      for (const auto& r : h.regions) region_host[r] = h.name;
      for (const auto& sv : h.servers) server_host[sv] = h.name;
      plan_.hosts.push_back(HostPart{h.name, h.underlay, h.regions, h.servers, 0, 0, 0});
    }
    auto part = [&](const std::string& name) -> HostPart& {
      for (auto& h : plan_.hosts)
        if (h.name == name) return h;
      TB_CHECK(false);
      return plan_.hosts.front();
    };
    for (auto& n : plan_.topo.nodes) {
      if (n.server >= 0)
        if (auto it = server_host.find(scenario::server_node(n.region, n.server));
            it != server_host.end())
          n.host = it->second;
      if (n.host.empty()) n.host = region_host.at(n.region);
      ++part(n.host).nodes;
      if (n.kind == NodeKind::kGpu) ++part(n.host).gpus;
    }
    uint32_t vni = s_.vxlan.vni_base;
    TB_CHECK(veths_.size() == plan_.topo.links.size());  // link() adds one of each
    for (size_t i = 0; i < plan_.topo.links.size(); ++i) {
      Link& l = plan_.topo.links[i];
      const Node* a = plan_.topo.node(l.a.node);
      const Node* b = plan_.topo.node(l.b.node);
      if (a->host == b->host) continue;
      l.vni = vni++;
      const int mtu = l.emulated.mtu - kVxlanOverhead;
      l.emulated.notes.push_back("between hosts " + a->host + " and " + b->host + ": VXLAN VNI " +
                                 std::to_string(l.vni) + ", MTU " + std::to_string(l.emulated.mtu) +
                                 " - " + std::to_string(kVxlanOverhead) +
                                 " bytes of encapsulation = " + std::to_string(mtu));
      l.emulated.mtu = mtu;
      const auto& v = std::get<CreateVeth>(veths_[i]);
      const Ipv4 ua = s_.host(a->host)->underlay, ub = s_.host(b->host)->underlay;
      auto end = [&](const Endpoint& e, Ipv4 local, Ipv4 remote, const std::string& host) {
        return CreateVxlan{e.netns,  e.ifname,      e.alias + " vxlan " + std::to_string(l.vni),
                           e.master, l.vni,         local,
                           remote,   s_.vxlan.port, mtu,
                           host};
      };
      tunnels_.push_back(end(v.a, ua, ub, a->host));
      tunnels_.push_back(end(v.b, ub, ua, b->host));
      ++part(a->host).tunnels;
      ++part(b->host).tunnels;
      veths_[i] = std::monostate{};
    }
    std::erase_if(veths_,
                  [](const auto& op) { return std::holds_alternative<std::monostate>(op); });
    for (auto& t : tunnels_) veths_.push_back(std::move(t));
    return {};
  }

  // Only `host`'s part: the ops acting in the namespaces of its nodes.
  void keep_host_ops(const std::string& host) {
    std::set<std::string> local;
    for (const auto& n : plan_.topo.nodes)
      if (n.host == host) local.insert(n.netns);
    std::erase_if(plan_.ops, [&](const Op& op) { return !local.contains(op_netns(op)); });
    plan_.host = host;
  }

  // Soft-RoCE on every GPU rail NIC when the host carries it and the user did not say no.
  void add_rxe(const HostCaps& host, const PlanOptions& o) {
    if (o.rdma == "none") {
      plan_.rdma_why = "--rdma none";
      return;
    }
    if (!host.rxe_checked) {
      plan_.rdma_why = "Soft-RoCE not checked (" + host.how + ")";
      return;
    }
    plan_.rdma_why = host.rxe_detail;
    if (!host.rxe) return;
    plan_.rdma = "rxe";
    const auto nics = rail_nics(plan_.topo);
    for (const auto& nic : nics)
      plan_.ops.push_back(
          CreateRxe{nic.netns, nic.ifname, nic.node, rxe_name(nic.netns, nic.ifname), nic.addr});
    plan_.rdma_why += "; " + std::to_string(nics.size()) + " rxe devices, one per GPU rail NIC";
  }

  Status allocate(const Region& r) {
    RegionAddrs a;
    const int rails = s_.rails(r);
    const int per_rail = r.servers * ((r.gpus_per_server + rails - 1) / rails);
    const uint64_t rail_size = uint64_t{1} << (32 - prefix_len_for(kGpuRailOffset + per_rail + 1));
    const uint64_t spine_chunk = std::max<uint64_t>(rail_size, r.spines + 1);
    auto block = alloc_.allocate(rail_size * rails + spine_chunk, "region " + r.name + " rails");
    if (!block) return std::unexpected(block.error());
    a.rail_block = *block;
    for (int i = 0; i < rails; ++i)
      a.rails.push_back(Prefix{Ipv4{a.rail_block.addr.value + static_cast<uint32_t>(i * rail_size)},
                               prefix_len_for(rail_size)});
    a.spines = Prefix{Ipv4{a.rail_block.addr.value + static_cast<uint32_t>(rails * rail_size)},
                      prefix_len_for(spine_chunk)};
    const uint64_t vpc_size = uint64_t{1} << (32 - prefix_len_for(r.servers + 3));
    const uint64_t nvl_size = uint64_t{1} << (32 - prefix_len_for(r.gpus_per_server + 3));
    const uint64_t fe_size = std::max(vpc_size, nvl_size) * 2 + nvl_size * r.servers;
    auto fe = alloc_.allocate(fe_size, "region " + r.name + " frontend");
    if (!fe) return std::unexpected(fe.error());
    a.frontend_block = *fe;
    // Largest-first packing keeps every subnet aligned inside the block.
    uint32_t cur = fe->addr.value;
    auto take = [&](uint64_t size) {
      cur = static_cast<uint32_t>((uint64_t{cur} + size - 1) / size * size);
      Prefix p{Ipv4{cur}, prefix_len_for(size)};
      cur += static_cast<uint32_t>(size);
      return p;
    };
    a.vpc = take(vpc_size);
    for (int s = 0; s < r.servers; ++s) a.nvl.push_back(take(nvl_size));
    a.uplink = take(2);
    TB_CHECK(uint64_t{cur} <= uint64_t{fe->addr.value} + fe->size());
    region_addrs_[r.name] = std::move(a);
    return {};
  }

  Node& add_node(const std::string& name, NodeKind kind, const std::string& region, int server,
                 int index) {
    std::string ns = scenario::netns_name(s_.lab, name);
    netns_.push_back(CreateNetns{ns, name, owner_marker(s_.lab) + " node=" + name});
    plan_.topo.nodes.push_back(Node{name, ns, kind, region, server, index, {}});
    return plan_.topo.nodes.back();
  }

  const std::string& ns(const std::string& node) {
    return plan_.topo.node(node)->netns;  // nodes are added before links name them
  }

  void set_addr(const std::string& node, const std::string& role, Prefix p) {
    for (auto& n : plan_.topo.nodes)
      if (n.name == node) n.addrs.emplace_back(role, p);
  }

  // One veth pair between node a's `ia` and node b's `ib`, plus its addresses.
  void link(const std::string& a, const std::string& ia, std::optional<Prefix> aa,
            const std::string& master_a, const std::string& b, const std::string& ib,
            std::optional<Prefix> ab, const std::string& master_b, Tier tier,
            const std::string& profile, const std::string& wan = "", const std::string& role = "") {
    const auto& p = s_.profile(profile);
    Link l{{a, ia, aa, !master_a.empty()},
           {b, ib, ab, !master_b.empty()},
           tier,
           profile,
           wan,
           role,
           real_figures(p),
           emulate(p, s_.scale)};
    std::string what = std::string(" ") + to_string(tier) + " link " + a + ":" + ia + " <-> " + b +
                       ":" + ib + " (" + profile + ")";
    veths_.push_back(CreateVeth{{ns(a), ia, owner_marker(s_.lab) + what, master_a},
                                {ns(b), ib, owner_marker(s_.lab) + what, master_b},
                                p.mtu});
    if (aa) addrs_.push_back(AddAddr{ns(a), ia, *aa});
    if (ab) addrs_.push_back(AddAddr{ns(b), ib, *ab});
    plan_.topo.links.push_back(std::move(l));
  }

  void bridge(const std::string& node, const std::string& ifname, int mtu, Prefix addr) {
    bridges_.push_back(CreateBridge{ns(node), ifname,
                                    owner_marker(s_.lab) + " bridge " + node + ":" + ifname, mtu});
    addrs_.push_back(AddAddr{ns(node), ifname, addr});
  }

  void route(const std::string& node, Prefix dst, std::vector<Nexthop> nhs,
             std::optional<Ipv4> src = std::nullopt, int metric = 0) {
    if (nhs.size() > 1) multipath_.insert(node);
    routes_.push_back(AddRoute{ns(node), dst.network(), std::move(nhs), src, metric});
  }

  void sysctl(const std::string& node, const std::string& key, const std::string& value) {
    sysctls_.push_back(SetSysctl{ns(node), key, value});
  }

  void forwarding(const std::string& node) { sysctl(node, "net/ipv4/ip_forward", "1"); }

  void build_region(const Region& r);
  Status build_wan();
  Agent& agent(const std::string& tr);
  Router& router(const std::string& region);
  uint32_t asn_of(const std::string& region) const;

  const Scenario& s_;
  AddressAllocator alloc_;
  Plan plan_;
  std::vector<Agent> agents_;        // [failover] mode = "agent"
  std::vector<Router> routers_;      // mode = "bfd"
  std::vector<FabricAgent> fabric_;  // host_routes = "withdraw"
  std::map<std::string, RegionAddrs> region_addrs_;
  std::set<std::pair<std::string, std::string>> wan_adjacent_;
  std::set<std::string> multipath_;  // nodes holding a route with more than one next hop
  std::vector<Op> netns_, bridges_, addrs_, routes_, sysctls_;
  // CreateVeth per link, in link order; a cross-host link's slot emptied (monostate) and its
  // tunnels appended (place_on_hosts).
  std::vector<std::variant<std::monostate, CreateVeth, CreateVxlan>> veths_;
  std::vector<CreateVxlan> tunnels_;
};

void Compiler::build_region(const Region& r) {
  using namespace scenario;
  const RegionAddrs& a = region_addrs_.at(r.name);
  const int rails = s_.rails(r);
  const int gpr = (r.gpus_per_server + rails - 1) / rails;  // GPUs per server on one rail
  const std::vector<int> sides = r.dual_tor ? std::vector<int>{1, 2} : std::vector<int>{0};
  const std::string spine_profile = r.spine_link.empty() ? r.rail : r.spine_link;
  auto tor_addr = [&](int rail, int side) { return host(a.rails[rail], side == 2 ? 2 : 1); };
  auto gpu_rail_addr = [&](int s, int j) {
    return host(a.rails[j % rails], kGpuRailOffset + s * gpr + j / rails);
  };
  auto spine_addr = [&](int k) { return host(a.spines, k + 1); };
  auto side_suffix = [](int side) { return side == 0 ? "" : side == 1 ? "a" : "b"; };

  // Nodes, outermost first.
  add_node(tr_node(r.name), NodeKind::kTransitRouter, r.name, -1, -1);
  add_node(vpc_node(r.name), NodeKind::kVpc, r.name, -1, -1);
  for (int k = 0; k < r.spines; ++k)
    add_node(spine_node(r.name, k), NodeKind::kSpine, r.name, -1, k);
  for (int rail = 0; rail < rails; ++rail)
    for (int side : sides) add_node(tor_node(r.name, rail, side), NodeKind::kTor, r.name, -1, rail);
  for (int s = 0; s < r.servers; ++s) {
    add_node(server_node(r.name, s), NodeKind::kServer, r.name, s, -1);
    for (int j = 0; j < r.gpus_per_server; ++j)
      add_node(gpu_node(r.name, s, j), NodeKind::kGpu, r.name, s, j);
  }

  // Frontend: VPC switch (bridge + gateway) <-> transit router.
  const std::string vpc = vpc_node(r.name), tr = tr_node(r.name);
  const Prefix vpc_gw = nth(a.vpc, 1);
  bridge(vpc, "br", s_.profile(r.frontend).mtu, vpc_gw);
  set_addr(vpc, "fe", vpc_gw);
  link(vpc, "tr", nth(a.uplink, 0), "", tr, "vpc", nth(a.uplink, 1), "", Tier::kUplink, r.frontend);
  set_addr(tr, "fe", nth(a.uplink, 1));
  route(vpc, Prefix{Ipv4{0}, 0}, {{"tr", nth_addr(a.uplink, 1)}});
  route(tr, a.frontend_block, {{"vpc", nth_addr(a.uplink, 0)}});
  forwarding(vpc);
  forwarding(tr);
  sysctl(tr, "net/ipv4/conf/all/ignore_routes_with_linkdown", "1");

  // Aggregation: every ToR to every spine, unnumbered (/32 on both ends, onlink routes).
  for (int k = 0; k < r.spines; ++k) {
    const std::string sp = spine_node(r.name, k);
    set_addr(sp, "rail", spine_addr(k));
    for (int rail = 0; rail < rails; ++rail) {
      std::vector<Nexthop> to_rail;
      for (int side : sides) {
        const std::string tor = tor_node(r.name, rail, side);
        const std::string port = "t" + std::to_string(rail) + side_suffix(side);
        link(tor, "sp" + std::to_string(k), tor_addr(rail, side), "", sp, port, spine_addr(k), "",
             Tier::kAggregation, spine_profile);
        to_rail.push_back({port, tor_addr(rail, side).addr});
        route(sp, tor_addr(rail, side), {{port, tor_addr(rail, side).addr}});
      }
      route(sp, a.rails[rail], to_rail);
    }
    forwarding(sp);
    sysctl(sp, "net/ipv4/conf/all/ignore_routes_with_linkdown", "1");
  }
  for (int rail = 0; rail < rails; ++rail)
    for (int side : sides) {
      const std::string tor = tor_node(r.name, rail, side);
      set_addr(tor, "rail", tor_addr(rail, side));
      std::vector<Nexthop> up;
      for (int k = 0; k < r.spines; ++k)
        up.push_back({"sp" + std::to_string(k), spine_addr(k).addr});
      if (!up.empty()) route(tor, a.rail_block, up);
      forwarding(tor);
      sysctl(tor, "net/ipv4/conf/all/ignore_routes_with_linkdown", "1");
    }

  // Servers: NVSwitch bridge, frontend NIC; GPUs: NVLink port and rail port(s).
  for (int s = 0; s < r.servers; ++s) {
    const std::string srv = server_node(r.name, s);
    const Prefix host_nvl = nth(a.nvl[s], 1), fe = Prefix{nth_addr(a.vpc, 2 + s), a.vpc.len};
    bridge(srv, "nvsw", s_.profile(r.scale_up).mtu, host_nvl);
    set_addr(srv, "nvl", host_nvl);
    set_addr(srv, "fe", fe);
    link(srv, "fe", fe, "", vpc, "s" + std::to_string(s), std::nullopt, "br", Tier::kFrontend,
         r.frontend);
    route(srv, Prefix{Ipv4{0}, 0}, {{"fe", vpc_gw.addr}});
    route(vpc, a.nvl[s], {{"br", fe.addr}});
    forwarding(srv);
    for (int j = 0; j < r.gpus_per_server; ++j) {
      const std::string gpu = gpu_node(r.name, s, j);
      const Prefix nvl = nth(a.nvl[s], 2 + j), rail_addr = gpu_rail_addr(s, j);
      link(gpu, "nvl", nvl, "", srv, "g" + std::to_string(j), std::nullopt, "nvsw", Tier::kScaleUp,
           r.scale_up);
      set_addr(gpu, "nvl", nvl);
      set_addr(gpu, "rail", rail_addr);
      std::vector<Nexthop> via_tors;
      const std::string tor_port = "s" + std::to_string(s) + "g" + std::to_string(j);
      for (int side : sides) {
        const std::string tor = tor_node(r.name, j % rails, side);
        const std::string port = std::string("rail") + side_suffix(side);
        link(gpu, port, rail_addr, "", tor, tor_port, tor_addr(j % rails, side), "",
             Tier::kScaleOut, r.rail);
        route(tor, rail_addr, {{tor_port, std::nullopt}});
        via_tors.push_back({port, tor_addr(j % rails, side).addr});
      }
      route(gpu, a.rail_block, via_tors, rail_addr.addr);
      route(gpu, Prefix{Ipv4{0}, 0}, {{"nvl", host_nvl.addr}});
      if (r.dual_tor) sysctl(gpu, "net/ipv4/conf/all/ignore_routes_with_linkdown", "1");
    }
  }

  // L4 multipath hashing (ecmp_hash = "l4") in every namespace of the region that holds a
  // multipath route: ToRs with several spines, spines and GPUs with dual ToRs.
  if (r.ecmp_hash == "l4")
    for (const auto& n : plan_.topo.nodes)
      if (n.region == r.name && multipath_.contains(n.name))
        sysctl(n.name, "net/ipv4/fib_multipath_hash_policy", "1");

  // Host-route withdrawal: only where a GPU has two ToRs and the spines choose between them.
  if (r.dual_tor && r.spines > 0 && s_.failover.host_routes == "withdraw") {
    FabricAgent f;
    f.region = r.name;
    for (int k = 0; k < r.spines; ++k) {
      f.spine_nodes.push_back(spine_node(r.name, k));
      f.spine_netns.push_back(scenario::netns_name(plan_.lab, spine_node(r.name, k)));
    }
    f.netns = f.spine_netns.front();
    for (int rail = 0; rail < rails; ++rail)
      for (int side : sides) {
        const std::string tor = tor_node(r.name, rail, side);
        f.tors.push_back({tor, scenario::netns_name(plan_.lab, tor),
                          "t" + std::to_string(rail) + side_suffix(side),
                          tor_addr(rail, side).addr});
      }
    for (int s = 0; s < r.servers; ++s)
      for (int j = 0; j < r.gpus_per_server; ++j) {
        FabricGpu g{gpu_node(r.name, s, j), gpu_rail_addr(s, j).addr, {}};
        for (size_t side = 0; side < sides.size(); ++side)
          g.ports.push_back({static_cast<int>((j % rails) * sides.size() + side),
                             "s" + std::to_string(s) + "g" + std::to_string(j)});
        f.gpus.push_back(std::move(g));
      }
    fabric_.push_back(std::move(f));
  }
}

Agent& Compiler::agent(const std::string& tr) {
  for (auto& a : agents_)
    if (a.node == tr) return a;
  Agent a;
  a.node = tr;
  a.netns = scenario::netns_name(plan_.lab, tr);
  a.interval_ns = s_.failover.probe_interval.ns;
  a.misses = s_.failover.misses;
  agents_.push_back(a);
  return agents_.back();
}

// Private ASNs, one per region in scenario order (RFC 6996).
uint32_t Compiler::asn_of(const std::string& region) const {
  for (size_t i = 0; i < s_.regions.size(); ++i)
    if (s_.regions[i].name == region) return 65001 + static_cast<uint32_t>(i);
  return 65000;
}

Router& Compiler::router(const std::string& region) {
  const std::string tr = scenario::tr_node(region);
  for (auto& r : routers_)
    if (r.node == tr) return r;
  Router r;
  r.node = tr;
  r.netns = scenario::netns_name(plan_.lab, tr);
  r.asn = asn_of(region);
  r.networks = {region_addrs_.at(region).frontend_block};
  for (const auto& [role, p] : plan_.topo.node(tr)->addrs)
    if (role == "fe" || r.router_id.value == 0) r.router_id = p.addr;
  r.bfd_interval_ms = static_cast<int>(s_.failover.bfd_interval.ns / 1'000'000);
  r.bfd_multiplier = s_.failover.bfd_multiplier;
  routers_.push_back(r);
  return routers_.back();
}

Status Compiler::build_wan() {
  std::map<std::pair<std::string, std::string>, int> backups;
  for (const auto& w : s_.wans) {
    if (w.name == "vpc")
      return bad_input(s_.file + ":" + std::to_string(w.loc.line) + ":" +
                       std::to_string(w.loc.col) +
                       ": wan \"vpc\": name is reserved for the transit router's VPC port; "
                       "choose another name");
    auto p = alloc_.allocate(2, "wan " + w.name);
    if (!p) return std::unexpected(p.error());
    const std::string ta = scenario::tr_node(w.a), tb = scenario::tr_node(w.b);
    const bool primary = w.role == scenario::WanRole::kPrimary;
    link(ta, w.name, nth(*p, 0), "", tb, w.name, nth(*p, 1), "", Tier::kWan, w.profile, w.name,
         primary ? "primary" : "backup");
    plan_.topo.links.back().emulated.qos = qos_classes(s_.qos);  // [qos]: every WAN link
    int metric = kMetricPrimary;
    if (!primary) metric = kMetricBackup + backups[std::minmax(w.a, w.b)]++;
    // [failover] mode = "none": static routes over the primary only, nothing to fail over to;
    // "bfd": no static WAN routes, BGP learns them.
    if (s_.failover.mode == "bfd") {
      const int pref = primary ? 200 : 101 - backups[std::minmax(w.a, w.b)];  // 100, 99, ...
      router(w.a).neighbors.push_back({w.name, nth_addr(*p, 1), asn_of(w.b), pref});
      router(w.b).neighbors.push_back({w.name, nth_addr(*p, 0), asn_of(w.a), pref});
    } else if (primary || s_.failover.mode != "none") {
      route(ta, region_addrs_.at(w.b).frontend_block, {{w.name, nth_addr(*p, 1)}}, std::nullopt,
            metric);
      route(tb, region_addrs_.at(w.a).frontend_block, {{w.name, nth_addr(*p, 0)}}, std::nullopt,
            metric);
    }
    if (s_.failover.mode == "agent") {
      agent(ta).paths.push_back(
          {w.name, w.name, nth_addr(*p, 1), {region_addrs_.at(w.b).frontend_block}, metric});
      agent(tb).paths.push_back(
          {w.name, w.name, nth_addr(*p, 0), {region_addrs_.at(w.a).frontend_block}, metric});
    }
    wan_adjacent_.insert({w.a, w.b});
    wan_adjacent_.insert({w.b, w.a});
  }
  return {};
}

}  // namespace

std::string owner_marker(const std::string& lab) {
  return "testbedctl lab=" + lab;
}

std::string stage_rule_marker(const std::string& lab, const std::string& ifname, bool egress) {
  return owner_marker(lab) + " rule " + ifname + (egress ? " out" : " in");
}

Result<Plan> compile(const Scenario& s, const HostCaps& host, const PlanOptions& o) {
  TB_TRY(validate(o));
  if (o.lab.empty()) return Compiler(s).run(host, o);
  Scenario renamed = s;
  renamed.lab = o.lab;
  return Compiler(renamed).run(host, o);
}

Result<Plan> compile(const Scenario& s) {
  return compile(s, assumed_host("unshaped"), PlanOptions{"", "none", "none"});
}

}  // namespace tb::plan
