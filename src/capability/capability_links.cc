// Probes for privileges, namespaces, link kinds and multipath routes (capability_probes.h).
// Every kernel object is made inside an anonymous network namespace in a forked child.
#include <fcntl.h>
#include <net/if.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>

#include "capability/capability_checks.h"
#include "capability/capability_netlink.h"
#include "core/paths.h"

namespace tb::capability::probe {
namespace {

// 198.18.0.0/15 (RFC 2544 benchmarking) is the only range probes use.
constexpr uint32_t kProbeNet = 0xC6120000;    // 198.18.0.0
constexpr uint32_t kProbeDst = 0xC6130000;    // 198.19.0.0
constexpr uint32_t kProbeLocal = 0xC6120001;  // 198.18.0.1

Outcome failed(const Error& e) {
  return no(e.message);
}

// A veth pair tbp0 <-> tbp1 in the current (throwaway) namespace; returns tbp0's ifindex.
Result<uint32_t> make_veth(CheckSocket& nl) {
  TB_TRY(nl.request(newlink_msg("veth", kProbeVeth, 0, fill_veth_peer),
                    std::string("create veth ") + kProbeVeth + " <-> " + kProbeVethPeer));
  uint32_t ifindex = ::if_nametoindex(kProbeVeth);
  if (ifindex == 0) return sys_fail(std::string("look up ") + kProbeVeth);
  return ifindex;
}

// Creates one link of `kind` (on top of a fresh veth when `on_veth`) inside a new netns.
Outcome link_probe(const char* kind, FillFn data, bool on_veth = false) {
  return in_child([=]() -> Outcome {
    auto nl = CheckSocket::open(NETLINK_ROUTE);
    if (!nl) return failed(nl.error());
    uint32_t lower = 0;
    if (on_veth) {
      auto v = make_veth(*nl);
      if (!v) return failed(v.error());
      lower = *v;
    }
    std::string what = std::string("create ") + kind + " link";
    if (auto r = nl->request(newlink_msg(kind, "tbpk", lower, data), what); !r)
      return failed(r.error());
    return yes(std::string("created a ") + kind + " link in a throwaway netns");
  });
}

}  // namespace

Outcome check_root() {
  uid_t euid = ::geteuid();
  if (euid == 0 && paths::rootless())
    return yes(
        "rootless: euid 0 in this user's keeper's user namespace (core/userns.h); "
        "Soft-RoCE devices and a lab over several hosts need real root");
  if (euid == 0) return yes("euid 0");
  return no("euid " + std::to_string(euid) + ": namespaces and links need root");
}

Outcome check_netns() {
  return in_child([] { return yes("unshare(CLONE_NEWNET) succeeded"); });
}

Outcome check_netns_dir() {
  // A named netns is an nsfs bind mount under /run/netns (iproute2 ip/ipnetns.c netns_add). The
  // probe checks the directory can hold one, then bind-mounts a namespace onto a scratch file in
  // /run (rootless: the runtime root) inside a private mount namespace, so `ip netns list` never
  // sees it and the mount dies with the child. The parent removes the scratch file whatever happens
  // to the child.
  static std::atomic<int> counter{0};
  // /run/netns and /run for root; <runtime root>/.netns and the runtime root rootless.
  const std::string dir = paths::roots().netns;
  const std::string parent = dir.substr(0, dir.rfind('/'));
  std::string scratch = parent + "/.tbprobe-netns-" + std::to_string(::getpid()) + "-" +
                        std::to_string(counter.fetch_add(1));
  Outcome o = in_child(
      [&scratch, &dir, &parent]() -> Outcome {
        if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
          return no(std::string("make mounts private: ") + std::strerror(errno));
        std::string state;
        struct stat st {};
        if (::stat(dir.c_str(), &st) == 0) {
          if (!S_ISDIR(st.st_mode)) return no(dir + " exists but is not a directory");
          if (::access(dir.c_str(), W_OK) != 0)
            return no(dir + " is not writable: " + std::strerror(errno));
          state = dir + " is a writable directory";
        } else if (errno == ENOENT) {
          if (::access(parent.c_str(), W_OK) != 0)
            return no(dir + " is absent and " + parent +
                      " is not writable: " + std::strerror(errno));
          state = dir + " is absent; " + parent + " is writable, so it can be made";
        } else {
          return no("stat " + dir + ": " + std::strerror(errno));
        }
        int fd = ::open(scratch.c_str(), O_RDONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0);
        if (fd < 0) return no("create " + scratch + ": " + std::strerror(errno));
        ::close(fd);
        if (::mount("/proc/self/ns/net", scratch.c_str(), "none", MS_BIND, nullptr) != 0) {
          int e = errno;
          ::unlink(scratch.c_str());
          return no("bind-mount a netns: " + std::string(std::strerror(e)));
        }
        ::umount2(scratch.c_str(), MNT_DETACH);
        ::unlink(scratch.c_str());
        return yes(state + "; an nsfs bind mount works");
      },
      CLONE_NEWNS | CLONE_NEWNET);
  ::unlink(scratch.c_str());  // normally gone already (ENOENT)
  return o;
}

Outcome check_veth() {
  return in_child([]() -> Outcome {
    auto nl = CheckSocket::open(NETLINK_ROUTE);
    if (!nl) return failed(nl.error());
    if (auto v = make_veth(*nl); !v) return failed(v.error());
    return yes("created a veth pair in a throwaway netns");
  });
}

Outcome check_bridge() {
  return link_probe("bridge", nullptr);
}
Outcome check_vxlan() {
  return link_probe("vxlan", fill_vxlan);
}
Outcome check_macvlan() {
  return link_probe("macvlan", nullptr, /*on_veth=*/true);
}
Outcome check_dummy() {
  return link_probe("dummy", nullptr);
}
Outcome check_bonding() {
  return link_probe("bond", nullptr);
}
Outcome check_vrf() {
  return link_probe("vrf", fill_vrf);
}

Outcome check_multipath() {
  return in_child([]() -> Outcome {
    auto nl = CheckSocket::open(NETLINK_ROUTE);
    if (!nl) return failed(nl.error());
    auto v = make_veth(*nl);
    if (!v) return failed(v.error());
    uint32_t peer = ::if_nametoindex(kProbeVethPeer);
    if (peer == 0) return no(std::string("look up ") + kProbeVethPeer + ": " + strerror(errno));
    if (auto r = nl->request(link_up_msg(*v), "set veth up"); !r) return failed(r.error());
    if (auto r = nl->request(link_up_msg(peer), "set veth peer up"); !r) return failed(r.error());
    if (auto r = nl->request(newaddr_msg(*v, kProbeLocal, 24), "add 198.18.0.1/24"); !r)
      return failed(r.error());
    if (auto r = nl->request(multipath_route_msg(kProbeDst, 24, *v, kProbeNet + 2, kProbeNet + 3),
                             "add route 198.19.0.0/24 via 198.18.0.2 and 198.18.0.3");
        !r)
      return failed(r.error());
    return yes("added a two-nexthop route (RTA_MULTIPATH) in a throwaway netns");
  });
}

}  // namespace tb::capability::probe
