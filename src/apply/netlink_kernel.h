// NetlinkKernel: the real Kernel. Applies plan ops with rtnetlink, named namespaces, sysctls
// and hosts files (netlink/ does the talking; this class decides what to say).
//
// Speed comes from three choices. (1) Each namespace gets one netlink socket, opened while the
// thread is inside the namespace being created, so later ops never setns. (2) Requests are
// pipelined: submit() sends and returns; acks are read at sync(), or when a socket has
// NlSocket::kMaxOutstanding in flight. The kernel applies a request inside sendmsg(), so order
// across sockets is submission order. (3) We choose ifindexes ourselves (2, 3, ... per
// namespace; lo is 1), so no op ever looks an interface up by name: the name -> ifindex map is
// filled as we create, and read from the kernel (one dump) only for a namespace this object
// did not create, or after a failure made the map doubtful.
//
// Owns, per namespace it touched: a descriptor of it and its socket (two fds; the constructor
// raises the soft RLIMIT_NOFILE to the hard limit). These keep a namespace alive even after
// someone else unmounts it; undo(CreateNetns) drops them first. The destructor closes them and
// deletes nothing (STYLE rule 5). Not thread-safe: one applier thread drives it.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "apply/kernel.h"
#include "apply/marker.h"
#include "core/unique_fd.h"
#include "netlink/socket.h"

namespace tb::apply {

class NetlinkKernel final : public Kernel {
 public:
  // Where WriteHosts puts <netns>/hosts (`ip netns exec` bind-mounts files from here).

  NetlinkKernel();
  ~NetlinkKernel() override;
  NetlinkKernel(const NetlinkKernel&) = delete;
  NetlinkKernel& operator=(const NetlinkKernel&) = delete;

  Status submit(const plan::Op& op) override;
  Status sync() override;
  Status undo(const plan::Op& op) override;
  void prepare_undo(const std::vector<plan::Op>& ops) override;
  Result<bool> add_probe_rules(const std::vector<std::string>& netns) override;
  Status set_link_up(const std::string& netns, const std::string& ifname, bool up) override;
  Result<int64_t> set_links_up(const std::vector<IfaceRef>& ends, int wait_ms,
                               int64_t* first_up_ns) override;
  Result<std::vector<std::string>> owned_netns(const std::string& marker,
                                               const std::string& name_prefix = "") override;
  Result<std::vector<IfaceInfo>> interfaces(const std::string& netns) override;

 private:
  // One namespace we hold: descriptor, socket, and what we know of its interfaces.
  struct Ns {
    std::string name;
    UniqueFd fd;
    netlink::NlSocket sock;
    std::unordered_map<std::string, int> ifindex;  // name -> ifindex
    int next_ifindex = 2;
    bool stale = true;  // re-read `ifindex` from the kernel before trusting it
  };

  Status submit_op(const plan::CreateNetns& op);
  Status submit_op(const plan::CreateVeth& op);
  Status submit_op(const plan::CreateBridge& op);
  Status submit_op(const plan::AddAddr& op);
  Status submit_op(const plan::AddRoute& op);
  Status submit_op(const plan::SetSysctl& op);
  Status submit_op(const plan::WriteHosts& op);
  Status submit_op(const plan::SetShape& op);      // netlink_kernel_shape.cc
  Status submit_op(const plan::AddStageRule& op);  // netlink_kernel_stage.cc
  Status submit_op(const plan::CreateRxe& op);     // netlink_kernel_rxe.cc
  Status submit_op(const plan::StartDaemon& op);   // refused: lab/daemons.h LabKernel
  Status submit_op(const plan::CreateVxlan& op);

  Status undo_op(const plan::CreateNetns& op);
  Status undo_op(const plan::CreateVeth& op);
  Status undo_op(const plan::CreateBridge& op);
  Status undo_op(const plan::AddAddr& op);
  Status undo_op(const plan::AddRoute& op);
  Status undo_op(const plan::SetSysctl& op);
  Status undo_op(const plan::WriteHosts& op);
  Status undo_op(const plan::SetShape& op);      // netlink_kernel_shape.cc
  Status undo_op(const plan::AddStageRule& op);  // netlink_kernel_stage.cc
  Status undo_op(const plan::CreateRxe& op);     // netlink_kernel_rxe.cc
  Status undo_op(const plan::StartDaemon& op);
  Status undo_op(const plan::CreateVxlan& op);

  // Opens a namespace by name: descriptor plus a socket inside it (not cached).
  static Result<std::unique_ptr<Ns>> open_ns(const std::string& name);
  // The cached handle, opening it on first use.
  Result<Ns*> handle(const std::string& name);
  // Like handle(), but nullptr (not an error) when the namespace does not exist.
  Result<Ns*> handle_if_exists(const std::string& name);
  // Deletes link `ifname` of `kind` ("bridge", "vxlan") in `netns`; nothing when the namespace
  // or the link is gone already.
  Status del_link_in(const std::string& netns, const std::string& ifname, const std::string& kind);
  Status refresh(Ns& ns);
  Result<int> ifindex_of(Ns& ns, const std::string& ifname);
  Result<int> allocate(Ns& ns, const std::string& ifname);
  // Reads every outstanding ack; keeps the earliest failure for the next sync().
  void settle();
  bool submitted_ = false;  // a submit() since the last settle()
  void note_failure();

  std::unordered_map<std::string, std::unique_ptr<Ns>> ns_;
  // netns -> whether its loopback carries the owner marker, checked by prepare_undo().
  std::unordered_map<std::string, bool> marked_;
  // netns -> its loopback's alias, as owned_netns() last read it (cleared by submit()).
  std::unordered_map<std::string, std::string> lo_alias_;
  // The loopback alias of each of `names` (nullopt: no such namespace, or not askable).
  std::vector<std::optional<std::string>> loopback_aliases(const std::vector<std::string>& names);
  // Whether `netns` exists and its loopback alias carries `marker` (nullopt: no such netns).
  Result<std::optional<bool>> carries_marker(const std::string& netns, const std::string& marker);
  std::optional<netlink::AckError> deferred_;
  // The hosts files and resolv.conf written so far, by content: a namespace whose file is the
  // same gets a hard link (apply/marker.h SharedFiles).
  SharedFiles hosts_files_;
  // Namespaces whose release-probe rule add_probe_rules installed: sync's rules leave it out.
  std::unordered_set<std::string> probes_added_;
  // AddStageRule ops submitted and not installed yet: sync() installs them, each namespace's
  // in one transaction per tool, namespaces in parallel (netlink_kernel_stage.cc).
  std::vector<plan::AddStageRule> pending_rules_;
  Status install_stage_rules();
  // A socket in the namespace this process runs in (the host's underlay), for the tunnels.
  std::optional<netlink::NlSocket> own_;
};

}  // namespace tb::apply
