// Capabilities without root: the registry's shape, backend choice, the report's JSON, the probe
// messages' bytes, and the forked-child harness (no namespaces: unshare_flags = 0).
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/pkt_sched.h>
#include <linux/rtnetlink.h>
#include <rdma/rdma_netlink.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

#include "capability/capabilities.h"
#include "capability/capability_checks.h"
#include "capability/capability_netlink.h"
#include "capability/host_cache.h"
#include "core/extras.h"
#include "core/safe_file.h"

namespace tb::capability {
namespace {

Capability cap(std::string name, bool available) {
  Capability c;
  c.name = std::move(name);
  c.available = available;
  return c;
}

std::vector<Capability> all_available(bool available) {
  std::vector<Capability> caps;
  for (const auto& s : check_registry()) caps.push_back(cap(std::string(s.name), available));
  return caps;
}

void set(std::vector<Capability>& caps, std::string_view name, bool available) {
  for (auto& c : caps)
    if (c.name == name) c.available = available;
}

TEST(CapabilityRegistry, NamesAreUniqueAndEveryRowIsComplete) {
  std::set<std::string_view> names;
  for (const auto& s : check_registry()) {
    SCOPED_TRACE(std::string(s.name));
    EXPECT_TRUE(names.insert(s.name).second) << "duplicate name";
    EXPECT_FALSE(s.name.empty());
    EXPECT_NE(s.probe, nullptr);
    EXPECT_FALSE(s.enables.empty());
    EXPECT_FALSE(s.fallback.empty());
    EXPECT_FALSE(s.method.empty());
  }
  for (const char* n : {"root",    "netns",      "netns_dir",    "veth",     "bridge",    "vxlan",
                        "macvlan", "dummy",      "bonding",      "vrf",      "multipath", "htb",
                        "tbf",     "netem",      "fq_codel",     "prio",     "ingress",   "clsact",
                        "nfqueue", "nft_numgen", "rdma_netlink", "rdma_rxe", "frr",       "kvm",
                        "qemu",    "red",        "dctcp",        "userns",   "rtprio"})
    EXPECT_TRUE(names.contains(n)) << n;
}

TEST(CapabilityRegistry, EssentialsAreRootNetnsVethBridge) {
  std::set<std::string_view> essential;
  for (const auto& s : check_registry())
    if (s.essential) essential.insert(s.name);
  EXPECT_EQ(essential, (std::set<std::string_view>{"root", "netns", "veth", "bridge"}));
}

TEST(CapabilityRegistry, DesignTextsForTheBackendsThatFallBack) {
  for (const auto& s : check_registry()) {
    if (s.name == "netem") {
      EXPECT_EQ(s.enables, "delay, jitter and loss in the kernel");
      EXPECT_EQ(s.fallback, "userspace NFQUEUE delay stage + HTB/TBF rate + nft numgen loss");
    }
    if (s.name == "rdma_rxe") {
      EXPECT_EQ(s.enables, "RDMA transport over Soft-RoCE");
      EXPECT_EQ(s.fallback, "TCP transport; reports say so");
    }
    if (s.name == "frr") {
      EXPECT_EQ(s.enables, "BGP+BFD failover");
      EXPECT_EQ(s.fallback, "static routes or the built-in probing agent");
    }
  }
}

TEST(ChooseBackends, NetemAndRxeWhenPresent) {
  auto b = choose_backends(all_available(true));
  EXPECT_EQ(b.shaping, "netem");
  EXPECT_EQ(b.transport, "rdma");
  EXPECT_EQ(b.failover, "bgp+bfd (frr)");
}

TEST(ChooseBackends, ThisKernelsFallbacks) {
  auto caps = all_available(true);
  for (const char* n : {"netem", "rdma_netlink", "rdma_rxe", "frr", "dummy"}) set(caps, n, false);
  auto b = choose_backends(caps);
  EXPECT_EQ(b.shaping, "htb/tbf + nfqueue delay stage");
  EXPECT_EQ(b.transport, "tcp");
  EXPECT_EQ(b.failover, "static routes or the built-in probing agent");
  set(caps, "nfqueue", false);
  EXPECT_EQ(choose_backends(caps).shaping, "htb/tbf (rate only; no delay emulation)");
  set(caps, "htb", false);
  set(caps, "tbf", false);
  EXPECT_EQ(choose_backends(caps).shaping, "none (links run unshaped)");
  EXPECT_EQ(choose_backends(all_available(false)).shaping,
            "unknown (namespaces could not be probed)");
}

TEST(MissingEssentials, InRegistryOrder) {
  auto caps = all_available(true);
  EXPECT_TRUE(missing_essentials(caps).empty());
  set(caps, "bridge", false);
  set(caps, "netns", false);
  set(caps, "netem", false);  // not essential
  EXPECT_EQ(missing_essentials(caps), (std::vector<std::string>{"netns", "bridge"}));
}

TEST(DoctorReport, JsonShape) {
  std::vector<Capability> caps = {
      {"root", true, "euid 0", "e1", "f1", "geteuid", true},
      {"netem", false, "add netem qdisc: No such file or directory", "e2", "f2", "RTM_NEWQDISC",
       false},
  };
  auto r = make_report("6.18.44-test", caps);
  auto j = to_json(r);
  EXPECT_EQ(j["kernel"], "6.18.44-test");
  EXPECT_EQ(j["usable"], false);  // netns, veth, bridge are not in the list
  EXPECT_EQ(j["missing_essentials"], nlohmann::json({"netns", "veth", "bridge"}));
  ASSERT_TRUE(j["chosen"].is_object());
  EXPECT_TRUE(j["chosen"]["shaping_backend"].is_string());
  EXPECT_EQ(j["chosen"]["transport"], "tcp");
  EXPECT_TRUE(j["chosen"]["failover"].is_string());
  ASSERT_TRUE(j["capabilities"].is_array());
  ASSERT_EQ(j["capabilities"].size(), 2u);
  const auto& netem = j["capabilities"][1];
  EXPECT_EQ(netem["name"], "netem");
  EXPECT_EQ(netem["available"], false);
  EXPECT_EQ(netem["essential"], false);
  EXPECT_EQ(netem["detail"], "add netem qdisc: No such file or directory");
  EXPECT_EQ(netem["enables"], "e2");
  EXPECT_EQ(netem["fallback"], "f2");
  EXPECT_EQ(netem["method"], "RTM_NEWQDISC");
  ASSERT_TRUE(j["extras"].is_array());  // every row of core/extras.h, found or not
  EXPECT_EQ(j["extras"].size(), tb::extras().size());
  for (const auto& e : j["extras"]) {
    EXPECT_TRUE(e["package"].is_string());
    EXPECT_TRUE(e["found"].is_boolean());
  }
  EXPECT_EQ(j.size(), 6u);
  EXPECT_EQ(netem.size(), 7u);
}

// --- message bytes -------------------------------------------------------------------------

const nlmsghdr* hdr(const probe::NlBytes& m) {
  EXPECT_EQ(reinterpret_cast<const nlmsghdr*>(m.data())->nlmsg_len, m.size());
  return reinterpret_cast<const nlmsghdr*>(m.data());
}

// The top-level attributes after a family header of `offset` bytes (mnl_attr_for_each, in C++).
std::vector<const nlattr*> attrs(const nlmsghdr* h, size_t offset) {
  std::vector<const nlattr*> out;
  auto* a = static_cast<const nlattr*>(mnl_nlmsg_get_payload_offset(h, offset));
  auto* end = static_cast<const char*>(mnl_nlmsg_get_payload_tail(h));
  while (mnl_attr_ok(a, static_cast<int>(end - reinterpret_cast<const char*>(a)))) {
    out.push_back(a);
    a = mnl_attr_next(a);
  }
  return out;
}

bool contains(const probe::NlBytes& m, std::string_view s) {
  std::string bytes(m.begin(), m.end());
  return bytes.find(std::string(s) + '\0') != std::string::npos;
}

TEST(ProbeMessages, VethCarriesKindAndPeer) {
  auto m = probe::newlink_msg("veth", "tbp0", 0, probe::fill_veth_peer);
  const nlmsghdr* h = hdr(m);
  EXPECT_EQ(h->nlmsg_type, RTM_NEWLINK);
  EXPECT_EQ(h->nlmsg_flags, NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL);
  EXPECT_TRUE(contains(m, "tbp0"));
  EXPECT_TRUE(contains(m, "veth"));
  EXPECT_TRUE(contains(m, "tbp1"));
}

TEST(ProbeMessages, NetemOptionsAreARawStruct) {
  auto m = probe::newqdisc_msg(3, TC_H_ROOT, 0x10000, "netem", probe::fill_netem);
  const nlmsghdr* h = hdr(m);
  EXPECT_EQ(h->nlmsg_type, RTM_NEWQDISC);
  auto* tcm = static_cast<const tcmsg*>(mnl_nlmsg_get_payload(h));
  EXPECT_EQ(tcm->tcm_ifindex, 3);
  EXPECT_EQ(tcm->tcm_parent, TC_H_ROOT);
  EXPECT_EQ(tcm->tcm_handle, 0x10000u);
  int options_len = -1;
  for (const nlattr* a : attrs(h, sizeof(tcmsg)))
    if (mnl_attr_get_type(a) == TCA_OPTIONS) options_len = mnl_attr_get_payload_len(a);
  EXPECT_EQ(options_len, static_cast<int>(sizeof(tc_netem_qopt)));
}

TEST(ProbeMessages, MultipathNexthopsCoverTheirGateways) {
  auto m = probe::multipath_route_msg(0xC6130000, 24, 5, 0xC6120002, 0xC6120003);
  const nlmsghdr* h = hdr(m);
  int nexthops = 0;
  for (const nlattr* a : attrs(h, sizeof(rtmsg))) {
    if (mnl_attr_get_type(a) != RTA_MULTIPATH) continue;
    auto* p = static_cast<const uint8_t*>(mnl_attr_get_payload(a));
    size_t left = mnl_attr_get_payload_len(a);
    while (left >= sizeof(rtnexthop)) {
      auto* nh = reinterpret_cast<const rtnexthop*>(p);
      EXPECT_EQ(nh->rtnh_ifindex, 5);
      EXPECT_EQ(nh->rtnh_len, RTNH_ALIGN(sizeof(rtnexthop)) + MNL_ATTR_HDRLEN + 4);
      ++nexthops;
      p += RTNH_ALIGN(nh->rtnh_len);
      left -= RTNH_ALIGN(nh->rtnh_len);
    }
  }
  EXPECT_EQ(nexthops, 2);
}

// --- the forked-child harness and the tool runner ------------------------------------------

TEST(ProbeHarness, CarriesTheOutcomeBack) {
  auto o = probe::in_child([] { return probe::yes("hello from the child"); }, 0);
  EXPECT_TRUE(o.available);
  EXPECT_EQ(o.detail, "hello from the child");
  o = probe::in_child([] { return probe::no(""); }, 0);
  EXPECT_FALSE(o.available);
  EXPECT_EQ(o.detail, "");
}

TEST(ProbeHarness, KillsAChildThatHangs) {
  auto start = std::chrono::steady_clock::now();
  auto o = probe::in_child(
      [] {
        std::this_thread::sleep_for(std::chrono::seconds(30));
        return probe::yes("too late");
      },
      0, std::chrono::milliseconds(200));
  EXPECT_FALSE(o.available);
  EXPECT_EQ(o.detail, "probe timed out after 0.2 s and was killed");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
}

TEST(ProbeHarness, ReportsAChildThatDies) {
  auto o = probe::in_child(
      []() -> probe::Outcome {
        std::signal(SIGABRT, SIG_DFL);
        std::abort();
      },
      0);
  EXPECT_FALSE(o.available);
  EXPECT_EQ(o.detail, "probe child died: Aborted");
}

TEST(ToolRunner, DistinguishesMissingFailingAndTimedOut) {
  EXPECT_EQ(probe::find_tool("tb-no-such-tool-anywhere"), "");
  std::string sh = probe::find_tool("sh");
  ASSERT_FALSE(sh.empty());
  auto ok = probe::run_tool(sh, {"-c", "echo out; echo err >&2"});
  EXPECT_EQ(ok.state, probe::ToolRun::State::kExited);
  EXPECT_EQ(ok.exit_code, 0);
  EXPECT_EQ(ok.output, "out err");
  auto bad = probe::run_tool(sh, {"-c", "echo nope; exit 3"});
  EXPECT_EQ(bad.exit_code, 3);
  EXPECT_EQ(bad.output, "nope");
  auto slow = probe::run_tool(sh, {"-c", "sleep 30"}, std::chrono::milliseconds(200));
  EXPECT_EQ(slow.state, probe::ToolRun::State::kTimedOut);
  auto missing = probe::run_tool("/nonexistent/tool", {});
  EXPECT_EQ(missing.state, probe::ToolRun::State::kExecFailed);
}

// The probed answer kept for the boot (host_cache.h): used only under the same key, a miss on
// anything else, and the file hidden from `ls` of the run root.
TEST(HostCache, KeptUnderItsKeyOnlyAndSaysSo) {
  auto tmp = tb::TempDir::make("tb-hostcache");
  ASSERT_TRUE(tmp) << tmp.error().message;
  const std::string dir = tmp->path();
  const std::string key = host_cache_key();
  EXPECT_NE(key.find("boot="), std::string::npos) << key;
  EXPECT_NE(key.find(" kernel=" + kernel_release()), std::string::npos) << key;
  EXPECT_NE(key.find(" iptables="), std::string::npos) << key;
  EXPECT_EQ(host_cache_key(), key);         // nothing changed between two calls
  EXPECT_FALSE(read_host_cache(dir, key));  // nothing kept yet

  plan::HostCaps h;
  h.how = "probed";
  h.probed = true;
  h.tbf = h.htb = h.nfqueue = true;
  h.rxe_checked = true;
  h.rxe_detail = "doctor's rdma_rxe probe: no rdma_rxe";
  write_host_cache(dir, key, h);
  EXPECT_TRUE(std::filesystem::exists(dir + "/.host-caps.json"));
  auto kept = read_host_cache(dir, key);
  ASSERT_TRUE(kept);
  EXPECT_FALSE(kept->netem);
  EXPECT_TRUE(kept->tbf && kept->htb && kept->nfqueue && kept->probed && kept->rxe_checked);
  EXPECT_FALSE(kept->rxe);
  EXPECT_EQ(kept->rxe_detail, h.rxe_detail);
  EXPECT_EQ(kept->how, "probed this boot, kept in " + dir + "/.host-caps.json");

  EXPECT_FALSE(read_host_cache(dir, key + "x"));  // a module loaded, iptables upgraded, reboot
  std::ofstream(dir + "/.host-caps.json") << "{\"version\": 1, \"key\": \"" << key << "\"}";
  EXPECT_FALSE(read_host_cache(dir, key));  // fields missing
  std::ofstream(dir + "/.host-caps.json") << "not json";
  EXPECT_FALSE(read_host_cache(dir, key));

  plan::HostCaps assumed = plan::assumed_host();  // not probed: never kept
  std::filesystem::remove(dir + "/.host-caps.json");
  write_host_cache(dir, key, assumed);
  EXPECT_FALSE(std::filesystem::exists(dir + "/.host-caps.json"));
}

TEST(HostCache, DoctorsFindingsBecomeThePlannersAnswer) {
  auto caps = all_available(false);
  set(caps, "tbf", true);
  set(caps, "nfqueue", true);
  const plan::HostCaps h = host_caps_from(caps);
  EXPECT_TRUE(h.probed && h.tbf && h.nfqueue && h.rxe_checked);
  EXPECT_FALSE(h.netem || h.htb || h.rxe);
  EXPECT_EQ(h.how, "probed");
}

}  // namespace
}  // namespace tb::capability
