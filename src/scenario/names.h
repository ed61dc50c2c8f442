// Node names: the stable, readable names users type ("hz/s0/g3") and how they map to
// namespace names and host names. Shared by the loader (to check references) and the planner.
//
//   GPU            <region>/s<i>/g<j>      GPU j of server i (its NIC is on rail j)
//   server host    <region>/s<i>           holds the NVSwitch bridge and the frontend NIC
//   ToR            <region>/tor<j>         rail j's ToR; with dual-ToR <region>/tor<j>a and ...b
//   spine          <region>/spine<k>       aggregation tier
//   VPC switch     <region>/vpc            frontend VPC switch and gateway
//   transit router <region>/tr             towards the WAN
//
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "scenario/model.h"

namespace tb::scenario {

// A lab's name is in its namespaces' names (tb-<lab>-<node>: NAME_MAX, 255), the owner marker
// on every interface's alias (IFALIASZ, 256), its /dev/shm segments' and state directories'
// names (NAME_MAX) and iptables comments (256), never in an interface name (IFNAMSIZ, 15): 32
// leaves room beside the longest node name (issue 33: "student01" and longer). It was 8, from the
// first skeleton, with no kernel name behind it.
inline constexpr int kMaxLabNameLen = 32;
inline constexpr int kMaxRegionNameLen = 6;
inline constexpr int kMaxWanNameLen = 12;
inline constexpr int kMaxHostNameLen = 15;

std::string gpu_node(const std::string& region, int server, int gpu);
std::string server_node(const std::string& region, int server);
// side: 0 = single ToR ("tor3"), 1 = "tor3a", 2 = "tor3b".
std::string tor_node(const std::string& region, int rail, int side);
std::string spine_node(const std::string& region, int spine);
std::string vpc_node(const std::string& region);
std::string tr_node(const std::string& region);

// "hz/s0/g3" -> "hz-s0-g3" (usable in hosts files and as a DNS label).
std::string host_name(std::string_view node);
// "hz/s0/g3" in lab "hzbj" -> "tb-hzbj-hz-s0-g3".
std::string netns_name(std::string_view lab, std::string_view node);
// Accepts both "hz/s0/g3" and "hz-s0-g3"; returns the canonical slash form.
std::string canonical_node(std::string_view name);

// True when `node` (canonical or hyphenated) names a node this scenario would build.
bool node_exists(const Scenario& s, std::string_view node);

}  // namespace tb::scenario
