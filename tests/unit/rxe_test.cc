// Soft-RoCE pieces that need no RDMA kernel: RDMA netlink bytes and parsing, the RoCE v2 GID
// choice, device naming and which NICs get a device.
#include <gtest/gtest.h>
#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

#include <filesystem>
#include <fstream>

#include "apply/rxe.h"
#include "netlink/rdma.h"
#include "plan/plan.h"
#include "plan/rxe.h"
#include "scenario/loader.h"
#include "temp_dir.h"

namespace tb {
namespace {

constexpr uint16_t nldev(uint16_t op) {
  return static_cast<uint16_t>((RDMA_NL_NLDEV << 10) + op);
}

std::map<uint16_t, std::string> string_attrs(const netlink::NlMsg& m) {
  std::map<uint16_t, std::string> out;
  mnl_attr_parse(
      m.header(), 0,
      [](const nlattr* a, void* data) {
        (*static_cast<std::map<uint16_t, std::string>*>(data))[mnl_attr_get_type(a)] = std::string(
            static_cast<const char*>(mnl_attr_get_payload(a)), mnl_attr_get_payload_len(a));
        return MNL_CB_OK;
      },
      &out);
  return out;
}

TEST(RdmaNetlink, NewlinkIsWhatRdmaLinkAddSends) {
  auto m = netlink::rdma_newlink("tb-x-g0-rail", "rxe", "rail");
  EXPECT_EQ(m.header()->nlmsg_type, nldev(RDMA_NLDEV_CMD_NEWLINK));
  EXPECT_EQ(m.header()->nlmsg_len, m.bytes.size());
  auto attrs = string_attrs(m);
  // NUL-terminated strings, as iproute2 rdma/link.c sends them.
  EXPECT_EQ(attrs[RDMA_NLDEV_ATTR_DEV_NAME], std::string("tb-x-g0-rail\0", 13));
  EXPECT_EQ(attrs[RDMA_NLDEV_ATTR_LINK_TYPE], std::string("rxe\0", 4));
  EXPECT_EQ(attrs[RDMA_NLDEV_ATTR_NDEV_NAME], std::string("rail\0", 5));
}

TEST(RdmaNetlink, DumpAndDelete) {
  auto d = netlink::rdma_dev_dump();
  EXPECT_EQ(d.header()->nlmsg_type, nldev(RDMA_NLDEV_CMD_GET));
  EXPECT_TRUE(d.header()->nlmsg_flags & NLM_F_DUMP);  // without it the kernel wants an index
  auto del = netlink::rdma_dellink(7);
  EXPECT_EQ(del.header()->nlmsg_type, nldev(RDMA_NLDEV_CMD_DELLINK));
  const nlattr* a = static_cast<const nlattr*>(mnl_nlmsg_get_payload(del.header()));
  EXPECT_EQ(mnl_attr_get_type(a), RDMA_NLDEV_ATTR_DEV_INDEX);
  EXPECT_EQ(mnl_attr_get_u32(a), 7u);
}

// A reply as the kernel builds it (nldev.c fill_dev_info / fill_port_info).
std::vector<uint8_t> reply(uint16_t type, uint32_t index, const char* name, uint32_t port,
                           const char* ndev) {
  std::vector<uint8_t> buf(512);
  nlmsghdr* h = mnl_nlmsg_put_header(buf.data());
  h->nlmsg_type = type;
  mnl_attr_put_u32(h, RDMA_NLDEV_ATTR_DEV_INDEX, index);
  mnl_attr_put_strz(h, RDMA_NLDEV_ATTR_DEV_NAME, name);
  mnl_attr_put_u32(h, RDMA_NLDEV_ATTR_PORT_INDEX, port);
  if (ndev) {
    mnl_attr_put_u32(h, RDMA_NLDEV_ATTR_NDEV_INDEX, 3);
    mnl_attr_put_strz(h, RDMA_NLDEV_ATTR_NDEV_NAME, ndev);
  }
  buf.resize(h->nlmsg_len);
  return buf;
}

TEST(RdmaNetlink, ParsesDevicesAndPorts) {
  // A device record also carries a port index (the number of ports).
  auto dev = reply(nldev(RDMA_NLDEV_CMD_GET), 4, "tb-mini-dc-s0-g0-rail", 1, nullptr);
  auto d = netlink::parse_rdma_dev(reinterpret_cast<const nlmsghdr*>(dev.data()));
  ASSERT_TRUE(d);
  EXPECT_EQ(d->index, 4u);
  EXPECT_EQ(d->name, "tb-mini-dc-s0-g0-rail");
  // A port get is answered with type RDMA_NLDEV_CMD_GET and the netdev when it is in the
  // asking socket's namespace.
  auto port = reply(nldev(RDMA_NLDEV_CMD_GET), 4, "tb-mini-dc-s0-g0-rail", 1, "rail");
  auto p = netlink::parse_rdma_port(reinterpret_cast<const nlmsghdr*>(port.data()));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->dev_index, 4u);
  EXPECT_EQ(p->port, 1u);
  EXPECT_EQ(p->ndev_name, "rail");
  EXPECT_EQ(p->ndev_index, 3);
  auto other = reply(16 /* RTM_NEWLINK */, 4, "x", 1, "rail");
  EXPECT_FALSE(netlink::parse_rdma_dev(reinterpret_cast<const nlmsghdr*>(other.data())));
}

TEST(Rxe, PicksTheRoceV2GidOfTheRailAddress) {
  const Ipv4 rail = *parse_ipv4("198.18.0.8");
  std::vector<apply::GidEntry> table = {
      {0, "fe80:0000:0000:0000:0000:0000:0000:0001", "IB/RoCE v1"},
      {1, "fe80:0000:0000:0000:0000:0000:0000:0001", "RoCE v2"},
      {2, "0000:0000:0000:0000:0000:ffff:c612:0008", "IB/RoCE v1"},
      {3, "0000:0000:0000:0000:0000:ffff:c612:0008", "RoCE v2"},
  };
  EXPECT_EQ(apply::pick_rocev2_gid(table, rail), 3);
  EXPECT_EQ(apply::pick_rocev2_gid(table, *parse_ipv4("198.18.0.9")), -1);
  table.pop_back();  // v1 only: not chosen
  EXPECT_EQ(apply::pick_rocev2_gid(table, rail), -1);
}

TEST(Rxe, ReadsTheGidTableFromSysfs) {
  testing_util::TempDir root;
  const std::string port = root.path() + "/class/infiniband/rxe0/ports/1/";
  std::filesystem::create_directories(port + "gids");
  std::filesystem::create_directories(port + "gid_attrs/types");
  auto put = [](const std::string& p, const std::string& v) { std::ofstream(p) << v << "\n"; };
  put(port + "gids/0", "fe80:0000:0000:0000:0000:0000:0000:0001");
  put(port + "gid_attrs/types/0", "IB/RoCE v1");
  put(port + "gids/1", "0000:0000:0000:0000:0000:ffff:c612:0008");
  put(port + "gid_attrs/types/1", "RoCE v2");
  auto t = apply::read_gid_table(root.path(), "rxe0", 4);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[1].type, "RoCE v2");
  EXPECT_EQ(apply::pick_rocev2_gid(t, *parse_ipv4("198.18.0.8")), 1);
}

TEST(Rxe, NamesFitTheKernelLimit) {
  EXPECT_EQ(plan::rxe_name("tb-mini-dc-s0-g0", "rail"), "tb-mini-dc-s0-g0-rail");
  const std::string longer = plan::rxe_name(std::string(70, 'n'), "railb");
  EXPECT_LE(longer.size(), 63u);
  EXPECT_NE(longer, plan::rxe_name(std::string(70, 'm'), "railb"));
}

plan::Topology topology_of(const std::string& scenario) {
  auto s = scenario::load(std::string(TB_SOURCE_DIR) + "/scenarios/" + scenario);
  EXPECT_TRUE(s) << s.error().message;
  auto p = plan::compile(*s);
  EXPECT_TRUE(p) << p.error().message;
  return p->topo;
}

TEST(Rxe, EveryGpuRailNicGetsOneAndNothingElse) {
  auto mini = plan::rail_nics(topology_of("mini.toml"));
  ASSERT_EQ(mini.size(), 4u);  // 2 servers x 2 GPUs, one ToR
  for (const auto& n : mini) {
    EXPECT_EQ(n.ifname, "rail");
    EXPECT_EQ(n.netns.rfind("tb-mini-dc-s", 0), 0u) << n.netns;
  }
  // hz-bj: dual-ToR in one region gives each of those GPUs two rail NICs.
  auto hz = topology_of("hz-bj.toml");
  auto nics = plan::rail_nics(hz);
  // hz: 4 servers x 4 GPUs, dual ToR (two NICs each) = 32; bj: 2 x 2, single ToR = 4.
  EXPECT_EQ(nics.size(), 36u);
  for (const auto& n : nics) EXPECT_TRUE(n.ifname.starts_with("rail")) << n.ifname;  // raila, railb
}

}  // namespace
}  // namespace tb
