// Soft-RoCE (rxe) on the lab's rail: one RDMA device per CreateRxe op of the plan (every GPU rail
// NIC, plan/rxe.h), made by the netlink kernel through RDMA netlink inside the namespace that owns
// the NIC (RDMA_NLDEV_CMD_NEWLINK, what `rdma link add
// NAME type rxe netdev DEV` sends), and removed by `down` (the kernel also unregisters a device
// when its netdev goes with the namespace, the backstop).
//
// Whether to make them at all is the planner's choice from the doctor's `rdma_rxe` verdict
// (capability_rdma.cc): a real
// transfer between two namespaces. Kernels whose rxe sends nothing from inside a namespace
// (Debian 12's 6.1) get no devices; the lab says so (LabState::rdma_why) and runs TCP.
//
// Each device's RoCE v2 GID (the IPv4-mapped rail address) is looked up in sysfs, not guessed: the
// kernel fills the GID table asynchronously after the device appears. Ownership: devices are named
// after the lab's namespace and interface, recorded in the lab's state, and deleted only when the
// device's netdev is still that interface in that namespace.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ipv4.h"
#include "plan/op.h"

namespace tb::apply {

// A Soft-RoCE device `up` made on a GPU's rail NIC. RDMA device names are global in
// the kernel's default (shared) netns mode, so the name carries the lab's namespace name.
struct RxeDevice {
  std::string node;    // "dc/s0/g1"
  std::string netns;   // the namespace that owns the netdev
  std::string ifname;  // "rail"; "raila", "railb" with dual ToRs
  std::string name;    // RDMA device name
  int gid_index = -1;  // the RoCE v2 GID (IPv4-mapped rail address), read from sysfs
  std::string gid;
};

// One entry of a port's GID table as sysfs shows it (gids/<i>, gid_attrs/types/<i>).
struct GidEntry {
  int index = 0;
  std::string gid;   // "0000:0000:0000:0000:0000:ffff:c612:0001"
  std::string type;  // "RoCE v2", "IB/RoCE v1"
};
// The entry that is RoCE v2 and IPv4-mapped for `addr`; -1 when none.
int pick_rocev2_gid(const std::vector<GidEntry>& table, Ipv4 addr);
// Reads entries 0..n-1 of `dev` port 1 under `sysfs_root` ("/sys").
std::vector<GidEntry> read_gid_table(const std::string& sysfs_root, const std::string& dev,
                                     int n = 16);

// Waits (5 ms steps, until `deadline`) for `dev`'s RoCE v2 GID of `addr`: the kernel fills the
// GID table asynchronously after the device appears. nullopt at the deadline.
std::optional<GidEntry> wait_rocev2_gid(const std::string& dev, Ipv4 addr,
                                        std::chrono::steady_clock::time_point deadline);

// Makes the device `op` describes and waits (up to `gid_wait`) for its RoCE v2 GID; on failure
// removes it again and says why.
Result<RxeDevice> add_rxe(const plan::CreateRxe& op,
                          std::chrono::milliseconds gid_wait = std::chrono::seconds(5));
// Deletes the devices; a device already gone (its namespace went) is fine. Errors are joined.
Status remove_lab_rxe(const std::vector<RxeDevice>& devices);

}  // namespace tb::apply
