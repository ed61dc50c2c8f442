// Capabilities with root: check_all() on this machine, checked against the kernel's own config
// where /proc/config.gz exists, and against what it must leave behind (nothing).
#include <grp.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "capability/capabilities.h"

namespace tb::apply {
using tb::capability::Capability;
using tb::capability::check_all;
using tb::capability::choose_backends;
using tb::capability::kernel_release;
using tb::capability::missing_essentials;
namespace {

std::string run(const std::string& cmd) {
  std::string out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
  ::pclose(p);
  return out;
}

std::set<std::string> lines(const std::string& s) {
  std::set<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) out.insert(l);
  return out;
}

std::map<std::string, Capability> by_name(const std::vector<Capability>& caps) {
  std::map<std::string, Capability> m;
  for (const auto& c : caps) m[c.name] = c;
  return m;
}

class CapabilitiesNetns : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root: probes create throwaway namespaces";
  }
};

TEST_F(CapabilitiesNetns, EssentialsAndRateShapingArePresent) {
  auto caps = by_name(check_all());
  for (const char* n : {"root", "netns", "netns_dir", "veth", "bridge", "htb", "tbf"}) {
    EXPECT_TRUE(caps[n].available) << n << ": " << caps[n].detail;
  }
  EXPECT_TRUE(missing_essentials(check_all()).empty());
}

// The dev/CI kernel (research/collectives.md section 0, limits.md): netem, fq, fq_codel, prio,
// bonding, dummy, VRF and all of RDMA are compiled out; the rest of what testbedctl uses is in.
TEST_F(CapabilitiesNetns, TheDevKernelsKnownFacts) {
  if (!kernel_release().starts_with("6.18.44-fc"))
    GTEST_SKIP() << "facts recorded for the 6.18.44-fc dev kernel; this is " << kernel_release()
                 << " (MatchesKernelConfig still checks it)";
  auto caps = by_name(check_all());
  for (const char* n :
       {"vxlan", "macvlan", "multipath", "ingress", "clsact", "nfqueue", "nft_numgen"})
    EXPECT_TRUE(caps[n].available) << n << ": " << caps[n].detail;
  for (const char* n : {"netem", "dummy", "bonding", "vrf", "fq_codel", "prio", "rdma_netlink",
                        "rdma_rxe", "red", "dctcp"})
    EXPECT_FALSE(caps[n].available) << n << ": " << caps[n].detail;
  EXPECT_NE(caps["netem"].detail.find("Specified qdisc kind is unknown"), std::string::npos)
      << caps["netem"].detail;
  EXPECT_NE(caps["dummy"].detail.find("Unknown device type"), std::string::npos)
      << caps["dummy"].detail;
  EXPECT_NE(caps["rdma_rxe"].detail.find("NETLINK_RDMA"), std::string::npos)
      << caps["rdma_rxe"].detail;
  auto b = choose_backends(check_all());
  EXPECT_EQ(b.shaping, "htb/tbf + nfqueue delay stage");
  EXPECT_EQ(b.transport, "tcp");
}

// The module a capability lives in when its symbol is =m (the kernel's Makefiles: net/sched/
// sch_*.o, drivers/net/*.o, drivers/infiniband/...).
std::string module_of(const std::string& cap) {
  static const std::map<std::string, std::string> module = {
      {"ingress", "sch_ingress"}, {"clsact", "sch_ingress"},
      {"htb", "sch_htb"},         {"tbf", "sch_tbf"},
      {"netem", "sch_netem"},     {"fq_codel", "sch_fq_codel"},
      {"prio", "sch_prio"},       {"rdma_netlink", "ib_core"},
      {"rdma_rxe", "rdma_rxe"},   {"multipath", "(built in only)"},
      {"red", "sch_red"},         {"dctcp", "tcp_dctcp"}};
  auto it = module.find(cap);
  return it == module.end() ? cap : it->second;
}

// Every kernel-object probe agrees with the kernel's build config: =y available, unset absent,
// =m available exactly when the probe left the module loaded.
TEST_F(CapabilitiesNetns, MatchesKernelConfig) {
  std::string config = run("zcat /proc/config.gz 2>/dev/null");
  if (config.empty()) GTEST_SKIP() << "no /proc/config.gz to compare with";
  const std::map<std::string, std::string> symbol = {{"veth", "VETH"},
                                                     {"bridge", "BRIDGE"},
                                                     {"vxlan", "VXLAN"},
                                                     {"macvlan", "MACVLAN"},
                                                     {"dummy", "DUMMY"},
                                                     {"bonding", "BONDING"},
                                                     {"vrf", "NET_VRF"},
                                                     {"htb", "NET_SCH_HTB"},
                                                     {"tbf", "NET_SCH_TBF"},
                                                     {"netem", "NET_SCH_NETEM"},
                                                     {"fq_codel", "NET_SCH_FQ_CODEL"},
                                                     {"prio", "NET_SCH_PRIO"},
                                                     {"red", "NET_SCH_RED"},
                                                     {"dctcp", "TCP_CONG_DCTCP"},
                                                     {"ingress", "NET_SCH_INGRESS"},
                                                     {"clsact", "NET_SCH_INGRESS"},
                                                     {"multipath", "IP_ROUTE_MULTIPATH"},
                                                     {"rdma_netlink", "INFINIBAND"},
                                                     {"rdma_rxe", "RDMA_RXE"}};
  auto caps = by_name(check_all());
  for (const auto& [name, sym] : symbol) {
    bool y = config.find("\nCONFIG_" + sym + "=y\n") != std::string::npos;
    bool m = config.find("\nCONFIG_" + sym + "=m\n") != std::string::npos;
    if (m) {
      // A module: the probe asked the kernel for the object, which loads the module on demand
      // (request_module), so after check_all() "available" must agree with "loaded".
      const bool loaded = std::filesystem::exists("/sys/module/" + module_of(name));
      EXPECT_EQ(caps[name].available, loaded)
          << name << " (CONFIG_" << sym << "=m, module " << module_of(name)
          << (loaded ? " loaded" : " not loaded") << "): " << caps[name].detail;
      continue;
    }
    EXPECT_EQ(caps[name].available, y) << name << " vs CONFIG_" << sym << ": " << caps[name].detail;
  }
}

TEST_F(CapabilitiesNetns, LeavesNothingBehind) {
  auto netns_before = run("ip netns list");
  auto links_before = lines(run("ip -o link show | cut -d: -f2"));
  auto run_before = run("ls -a /run");
  auto nft_before = run("nft list ruleset 2>&1");
  check_all();
  EXPECT_EQ(run("ip netns list"), netns_before);
  EXPECT_EQ(lines(run("ip -o link show | cut -d: -f2")), links_before);
  EXPECT_EQ(run("ls -a /run"), run_before);
  EXPECT_EQ(run("nft list ruleset 2>&1"), nft_before);  // rules went into throwaway namespaces
  // Every probe child was reaped: this process has no children left.
  std::ifstream kids("/proc/self/task/" + std::to_string(::gettid()) + "/children");
  std::string rest((std::istreambuf_iterator<char>(kids)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rest, "");
}

// Without root the probes still run and say "needs root" instead of guessing.
TEST_F(CapabilitiesNetns, WithoutRootProbesSayTheyNeedRoot) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(fds[0]);
    bool dropped = ::setgroups(0, nullptr) == 0 && ::setresgid(65534, 65534, 65534) == 0 &&
                   ::setresuid(65534, 65534, 65534) == 0;
    std::string out = dropped ? "" : "could not drop privileges";
    if (dropped) {
      auto all = check_all();
      auto caps = by_name(all);
      if (caps["root"].available) out += "root reported available; ";
      for (const char* n : {"netns", "veth", "bridge", "htb", "netem", "nfqueue", "rdma_rxe"})
        if (caps[n].available || !caps[n].detail.starts_with("needs root"))
          out += std::string(n) + ": " + caps[n].detail + "; ";
      if (missing_essentials(all) != std::vector<std::string>{"root", "netns", "veth", "bridge"})
        out += "missing essentials should be root, netns, veth, bridge; ";
    }
    (void)!::write(fds[1], out.data(), out.size());
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) got.append(buf, static_cast<size_t>(n));
  ::close(fds[0]);
  int status = 0;
  ::waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status));
  EXPECT_EQ(got, "");
}

}  // namespace
}  // namespace tb::apply
