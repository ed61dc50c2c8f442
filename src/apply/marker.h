// Owner markers as the kernel side reads them back: a namespace is ours when its loopback's
// alias starts with our marker; a hosts file is ours when its first line equals the marker
// line it was written with (plan::owner_marker builds the marker itself).
//
// Pure functions, and two that touch only <etc_netns>/<netns>/hosts; thread-safe (a
// SharedFiles is not: one per writer).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "core/error.h"
#include "core/unique_fd.h"

namespace tb::apply {

// Per-namespace files live here: for root /etc/netns, as iproute2 defines it (NETNS_ETC_DIR in
// ip/ipnetns.c); rootless <runtime root>/.etc-netns (core/paths.h etc_netns).
std::string etc_netns_dir();

// True when `alias` carries `marker`. An empty marker matches nothing: it must never select
// every namespace on the machine.
inline bool has_marker(std::string_view alias, std::string_view marker) {
  return !marker.empty() && alias.starts_with(marker);
}

// The text up to the first newline (all of it when there is none).
inline std::string_view first_line(std::string_view text) {
  return text.substr(0, text.find('\n'));
}

// Writes <etc_netns>/<netns>/hosts and resolv.conf (creating both directories as needed), the
// files `ip netns exec` and `testbedctl exec` bind-mount over /etc. resolv.conf names only
// loopback, so lookups of names not in the hosts file fail at once inside the lab. Refuses to
// overwrite a file that is already there. Each file appears whole, marker line first, or not at
// all (where the filesystem has O_TMPFILE), so a kill -9 part-way leaves nothing that
// remove_hosts_file_if_ours would not take.
//
// With `shared`, a file whose content one written through the same SharedFiles already has is
// a hard link to that file instead of a file of its own (issue 34). A lab's namespaces have few
// distinct hosts files (one per server's GPUs, one for the switches: 34 of 300 for 256 GPUs)
// and one resolv.conf, and a new inode costs 0.03-4 ms on a journal-less ext4 that has
// recently deleted many (this machine's /etc: ext4 skips inodes deleted within the last 5 s, or
// 5 min while their table block is dirty, scanning past each one), where a link costs none.
// A name that is already there is still refused; a file since removed is written anew.
// Removing one name leaves the others; a file edited in place changes in every namespace
// that shares it.
class SharedFiles {
 public:
  // An open file of this content (-1: none yet).
  int find(const std::string& content) const;
  void keep(const std::string& content, UniqueFd fd);
  size_t size() const { return by_content_.size(); }

 private:
  std::unordered_map<std::string, UniqueFd> by_content_;
};
Status write_hosts_file(const std::string& etc_netns, const std::string& netns,
                        const std::string& content, SharedFiles* shared = nullptr);
// Removes <etc_netns>/<netns>/hosts and resolv.conf, each only when its first line is
// `marker_line`, then the directory if that left it empty. A missing file, or someone else's, is
// success.
Status remove_hosts_file_if_ours(const std::string& etc_netns, const std::string& netns,
                                 std::string_view marker_line);

}  // namespace tb::apply
