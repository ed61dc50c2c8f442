// Network namespaces: a scoped per-thread switch, named namespaces the way iproute2 keeps them
// (bind mounts under /run/netns, so `ip netns list` and `ip netns exec` see ours), and
// per-namespace sysctls.
//
// setns() is per thread: ScopedNetns moves only the calling thread and moves it back in its
// destructor. Failing to move back is a broken invariant (the thread would silently act in the
// wrong namespace), so it aborts. Functions here are safe to call from several threads; each
// switch affects only its caller.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::netlink {

// Where named namespaces are kept (core/paths.h): iproute2's /run/netns (include/namespace.h
// NETNS_RUN_DIR) for root, <runtime root>/.netns inside a rootless user's keeper.
std::string netns_run_dir();

// ScopedNetns: the calling thread is inside another network namespace while this lives.
// Owns a descriptor of the namespace to return to. Move-only.
class ScopedNetns {
 public:
  // Enter the namespace behind `netns_fd` (the descriptor stays the caller's).
  static Result<ScopedNetns> enter(int netns_fd);
  // Enter a brand-new, empty namespace (unshare(CLONE_NEWNET)).
  static Result<ScopedNetns> enter_new();

  ScopedNetns(ScopedNetns&& o) noexcept = default;
  ScopedNetns& operator=(ScopedNetns&&) = delete;
  ScopedNetns(const ScopedNetns&) = delete;
  ~ScopedNetns();

 private:
  explicit ScopedNetns(UniqueFd saved) : saved_(std::move(saved)) {}
  UniqueFd saved_;
};

// A descriptor of the calling thread's current network namespace.
Result<UniqueFd> current_netns();

// "<netns_run_dir()>/<name>". `name` must be a valid namespace name (see valid_netns_name).
std::string netns_path(std::string_view name);
// iproute2's rule (ip/ipnetns.c is_valid_netns_name): non-empty, < NAME_MAX, no '/', not . or ..
bool valid_netns_name(std::string_view name);

// Creates the named namespace as `ip netns add` does and returns a descriptor of it. While the
// calling thread is inside the new namespace, and before the namespace is bind-mounted under its
// name, it runs `inside` (to open sockets there without a later setns, and to mark it as ours);
// if that fails the namespace is removed again. EEXIST if the name is taken.
Result<UniqueFd> create_named_netns(const std::string& name,
                                    const std::function<Status()>& inside = {});
// Unmounts and unlinks /run/netns/<name>. A name that does not exist is success.
Status delete_named_netns(const std::string& name);
// True when /run/netns/<name> is an empty file with no namespace mounted on it (a create that
// died between making the file and bind-mounting the namespace).
bool is_half_made_netns(const std::string& name);
// Opens /run/netns/<name> (the error carries ENOENT when there is no such namespace).
Result<UniqueFd> open_named_netns(const std::string& name);
// Names under /run/netns, sorted; none when the directory does not exist.
Result<std::vector<std::string>> list_named_netns();

// Writes /proc/sys/<key> as seen from inside the namespace, e.g. key "net/ipv4/ip_forward".
Status write_sysctl(int netns_fd, std::string_view key, std::string_view value);
// Reads it back (trailing newline removed).
Result<std::string> read_sysctl(int netns_fd, std::string_view key);

}  // namespace tb::netlink
