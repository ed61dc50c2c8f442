#include "failover/frr.h"

#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "core/extras.h"
#include "core/unique_fd.h"
#include "netlink/netns.h"

namespace tb::failover {

std::string frr_bfdd_conf(const plan::Router& r) {
  return "bfd\n profile wan\n  detect-multiplier " + std::to_string(r.bfd_multiplier) +
         "\n  receive-interval " + std::to_string(r.bfd_interval_ms) + "\n  transmit-interval " +
         std::to_string(r.bfd_interval_ms) + "\n !\n!\n";
}

std::string frr_bgpd_conf(const plan::Router& r) {
  std::string s = "hostname " + r.node + "\n";
  s += "router bgp " + std::to_string(r.asn) + "\n";
  s += " bgp router-id " + r.router_id.to_string() + "\n";
  s += " no bgp ebgp-requires-policy\n no bgp network import-check\n timers bgp 3 9\n";
  for (const auto& n : r.neighbors) {
    const std::string a = n.addr.to_string();
    s += " neighbor " + a + " remote-as " + std::to_string(n.asn) + "\n";
    s += " neighbor " + a + " description " + n.wan + "\n";
    s += " neighbor " + a + " timers connect 1\n";
    s += " neighbor " + a + " bfd profile wan\n";
  }
  s += " address-family ipv4 unicast\n";
  for (const auto& p : r.networks) s += "  network " + p.to_string() + "\n";
  for (const auto& n : r.neighbors)
    s += "  neighbor " + n.addr.to_string() + " route-map pref-" + n.wan + " in\n";
  s += " exit-address-family\n!\n";
  for (const auto& n : r.neighbors)
    s += "route-map pref-" + n.wan + " permit 10\n set local-preference " +
         std::to_string(n.local_pref) + "\n!\n";
  return s;
}

namespace {

constexpr const char* kFrrWho = "[failover] mode = \"bfd\"";

}  // namespace

Status frr_installed() {
  for (const char* d : {"zebra", "bgpd", "bfdd"}) TB_TRY(require_extra(kFrrWho, d));
  if (!::getgrnam("frr"))
    return missing_extra(kFrrWho, *find_extra("zebra"),
                         "its daemons run as group frr, which this host lacks");
  return {};
}

Result<std::vector<runner::ChildSpec>> frr_children(const SafeDir& lab_dir, const plan::Router& r) {
  TB_TRY(frr_installed());
  const group* frr = ::getgrnam("frr");
  auto frr_dir = lab_dir.sub("frr/" + r.netns);
  if (!frr_dir) return std::unexpected(frr_dir.error());
  const std::string dir = frr_dir->path();
  const std::vector<std::pair<std::string, std::string>> confs = {
      {"zebra", "hostname " + r.node + "\n"},
      {"bfdd", frr_bfdd_conf(r)},
      {"bgpd", frr_bgpd_conf(r)}};
  std::vector<runner::ChildSpec> out;
  // zebra first; bfdd once zebra's socket is there; bgpd once bfdd is registered with zebra:
  // a BFD session bgpd asks for before bfdd is connected is dropped, and not asked for again.
  int delay_ms = 0;
  for (const auto& [d, text] : confs) {
    auto program = require_extra(kFrrWho, d);
    if (!program) return std::unexpected(program.error());
    TB_TRY(frr_dir->write(d + ".conf", text));
    const std::string conf = dir + "/" + d + ".conf";
    out.push_back({d + " " + r.node,
                   r.netns,
                   {*program, "-f", conf, "-i", dir + "/" + d + ".pid", "-z", dir + "/zserv.api",
                    "--vty_socket", dir, "-P", "0", "-u", "frr", "-g", "frr", "--log", "stdout"},
                   delay_ms});
    delay_ms += 1000;
  }
  // The daemons run as user frr and put sockets and pids here: group frr may write, no one else.
  TB_TRY(frr_dir->set_owner(::geteuid(), frr->gr_gid, 0770));
  return out;
}

Status wait_for_bgp(const std::vector<plan::Router>& routers, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (const auto& r : routers) {
    UniqueFd ns(::open(netlink::netns_path(r.netns).c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns) return sys_fail("open namespace " + r.netns);
    for (const auto& peer : routers) {
      if (&peer == &r) continue;
      for (const auto& net : peer.networks) {
        // A UDP connect fails with ENETUNREACH until a route to the network exists.
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(9);
        to.sin_addr.s_addr = Ipv4{net.addr.value + 1}.network_order();
        for (;;) {
          bool ok = false;
          {
            auto in = netlink::ScopedNetns::enter(ns.get());
            if (!in) return std::unexpected(in.error());
            UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
            ok = fd && ::connect(fd.get(), reinterpret_cast<sockaddr*>(&to), sizeof to) == 0;
          }
          if (ok) break;
          if (std::chrono::steady_clock::now() >= deadline)
            return fail("BGP: " + r.node + " learned no route to " + peer.node + "'s " +
                        net.to_string() + " within " + std::to_string(timeout_ms / 1000) +
                        " s (see the frr logs under the lab's directory)");
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
    }
  }
  return {};
}

}  // namespace tb::failover
