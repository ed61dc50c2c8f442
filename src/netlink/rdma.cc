#include "netlink/rdma.h"

#include <libmnl/libmnl.h>
#include <rdma/rdma_netlink.h>

#include "netlink/message_builder.h"

namespace tb::netlink {
namespace {

// <rdma/rdma_netlink.h> RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op).
constexpr uint16_t nldev(uint16_t op) {
  return static_cast<uint16_t>((RDMA_NL_NLDEV << 10) + op);
}

struct Attrs {
  std::optional<uint32_t> dev_index, port, ndev_index;
  std::string dev_name, ndev_name;
};

int attr_cb(const nlattr* attr, void* data) {
  auto& a = *static_cast<Attrs*>(data);
  switch (mnl_attr_get_type(attr)) {
    case RDMA_NLDEV_ATTR_DEV_INDEX:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0) a.dev_index = mnl_attr_get_u32(attr);
      break;
    case RDMA_NLDEV_ATTR_PORT_INDEX:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0) a.port = mnl_attr_get_u32(attr);
      break;
    case RDMA_NLDEV_ATTR_NDEV_INDEX:
      if (mnl_attr_validate(attr, MNL_TYPE_U32) >= 0) a.ndev_index = mnl_attr_get_u32(attr);
      break;
    case RDMA_NLDEV_ATTR_DEV_NAME:
      if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) a.dev_name = mnl_attr_get_str(attr);
      break;
    case RDMA_NLDEV_ATTR_NDEV_NAME:
      if (mnl_attr_validate(attr, MNL_TYPE_NUL_STRING) >= 0) a.ndev_name = mnl_attr_get_str(attr);
      break;
    default:
      break;
  }
  return MNL_CB_OK;
}

Attrs read_attrs(const nlmsghdr* nlh) {
  Attrs a;
  mnl_attr_parse(nlh, 0, attr_cb, &a);
  return a;
}

}  // namespace

NlMsg rdma_newlink(std::string_view name, std::string_view type, std::string_view netdev) {
  MessageBuilder m(nldev(RDMA_NLDEV_CMD_NEWLINK), NLM_F_REQUEST);
  m.put_str(RDMA_NLDEV_ATTR_DEV_NAME, name);
  m.put_str(RDMA_NLDEV_ATTR_LINK_TYPE, type);
  m.put_str(RDMA_NLDEV_ATTR_NDEV_NAME, netdev);
  return m.finish();
}

NlMsg rdma_dellink(uint32_t dev_index) {
  MessageBuilder m(nldev(RDMA_NLDEV_CMD_DELLINK), NLM_F_REQUEST);
  m.put_u32(RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  return m.finish();
}

NlMsg rdma_dev_dump() {
  return MessageBuilder(nldev(RDMA_NLDEV_CMD_GET), NLM_F_REQUEST | NLM_F_DUMP).finish();
}

NlMsg rdma_port_get(uint32_t dev_index, uint32_t port) {
  MessageBuilder m(nldev(RDMA_NLDEV_CMD_PORT_GET), NLM_F_REQUEST);
  m.put_u32(RDMA_NLDEV_ATTR_DEV_INDEX, dev_index);
  m.put_u32(RDMA_NLDEV_ATTR_PORT_INDEX, port);
  return m.finish();
}

std::optional<RdmaDevRecord> parse_rdma_dev(const nlmsghdr* nlh) {
  if (nlh->nlmsg_type != nldev(RDMA_NLDEV_CMD_GET)) return std::nullopt;
  Attrs a = read_attrs(nlh);
  if (!a.dev_index || a.dev_name.empty()) return std::nullopt;
  return RdmaDevRecord{*a.dev_index, a.dev_name};
}

std::optional<RdmaPortRecord> parse_rdma_port(const nlmsghdr* nlh) {
  // The kernel answers a port get with messages of type RDMA_NLDEV_CMD_GET carrying a port index
  // (drivers/infiniband/core/nldev.c nldev_port_get_doit); accept either type.
  if (nlh->nlmsg_type != nldev(RDMA_NLDEV_CMD_PORT_GET) &&
      nlh->nlmsg_type != nldev(RDMA_NLDEV_CMD_GET))
    return std::nullopt;
  Attrs a = read_attrs(nlh);
  if (!a.dev_index || !a.port) return std::nullopt;
  return RdmaPortRecord{*a.dev_index, *a.port, static_cast<int>(a.ndev_index.value_or(0)),
                        a.ndev_name};
}

Result<std::vector<RdmaDevRecord>> list_rdma_devices(NlSocket& sock, const std::string& where) {
  std::vector<RdmaDevRecord> out;
  TB_TRY(sock.dump(rdma_dev_dump(), "list RDMA devices in " + where, [&](const nlmsghdr* nlh) {
    if (auto d = parse_rdma_dev(nlh)) out.push_back(std::move(*d));
  }));
  return out;
}

Result<RdmaPortRecord> query_rdma_port(NlSocket& sock, uint32_t dev_index, uint32_t port,
                                       const std::string& where) {
  std::optional<RdmaPortRecord> got;
  TB_TRY(sock.call(rdma_port_get(dev_index, port),
                   "query RDMA device " + std::to_string(dev_index) + " port " +
                       std::to_string(port) + " in " + where,
                   [&](const nlmsghdr* nlh) {
                     if (auto p = parse_rdma_port(nlh)) got = *p;
                   }));
  if (!got)
    return fail("query RDMA device " + std::to_string(dev_index) + " in " + where +
                ": no port record in the reply");
  return *got;
}

}  // namespace tb::netlink
