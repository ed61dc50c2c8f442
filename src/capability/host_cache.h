// What host_for_plan probed, kept for the rest of this boot so that every `up` does not pay for
// the same probes again (netem, tbf, htb, the NFQUEUE rule with its two iptables processes, and
// Soft-RoCE: about 50 ms of a small lab's 0.3 s `up`; issue 34).
//
// The answer is a file, .host-caps.json, in the run root (/run/testbedctl: a tmpfs emptied at every
// boot), and it counts only while everything it depends on is unchanged — its key: the boot
// (/proc/sys/kernel/random/boot_id), the kernel release, the names of the loaded modules
// (/proc/modules: a qdisc or rdma_rxe loaded later changes it) and the iptables binary the NFQUEUE
// probe runs (path, size, mtime: a package installed or upgraded changes it). Any difference, an
// unreadable or malformed file, or a file of another version is a miss: probed again, and the file
// replaced. `testbedctl doctor` always probes, and replaces the file with what it found.
// Not thread-safe (files).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "capability/capabilities.h"
#include "plan/host.h"

namespace tb::capability {

// Hidden: `ls /run/testbedctl` lists labs (and scripts/soak counts what labs leave there).
inline constexpr const char* kHostCacheFile = ".host-caps.json";

// This host's key as described above, one line of text.
std::string host_cache_key();

// The kept answer in `dir`/.host-caps.json when its key is `key`; nullopt on any miss. `how` of the
// result says it was kept ("probed this boot, kept in DIR/.host-caps.json").
std::optional<plan::HostCaps> read_host_cache(const std::string& dir, const std::string& key);

// Keeps `caps` (probed: how == "probed") under `key`. Best effort: a run root that cannot be
// written (not root) keeps nothing, and the next call probes again.
void write_host_cache(const std::string& dir, const std::string& key, const plan::HostCaps& caps);

// doctor's findings as host_for_plan's answer (rxe checked: the registry's rdma_rxe row).
plan::HostCaps host_caps_from(const std::vector<Capability>& caps);

// The planner's field that registry check `name` decides (netem, tbf, htb, nfqueue); nullptr for
// every other check. host_for_plan probes these; host_caps_from reads them from doctor's rows.
bool* shaping_field(plan::HostCaps& h, std::string_view name);
// Soft-RoCE as checked by the rdma_rxe probe, with its words.
void set_rxe(plan::HostCaps& h, bool available, const std::string& detail);

}  // namespace tb::capability
