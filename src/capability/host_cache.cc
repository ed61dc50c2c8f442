#include "capability/host_cache.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "capability/capability_checks.h"
#include "core/safe_file.h"

namespace tb::capability {
namespace {

constexpr int kVersion = 3;  // 2: red, 3: dctcp

std::string first_line(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// The loaded modules' names, sorted, comma-separated; "none" on a kernel without /proc/modules
// (no loadable modules: nothing can change until the next boot).
std::string module_names() {
  std::ifstream in("/proc/modules");
  if (!in) return "none";
  std::vector<std::string> names;
  std::string line;
  while (std::getline(in, line)) names.push_back(line.substr(0, line.find(' ')));
  std::ranges::sort(names);
  std::string out;
  for (const std::string& n : names) out += n + ",";
  return out.empty() ? "none" : out;
}

std::string tool_stamp(const std::string& name) {
  const std::string path = probe::find_tool(name);
  struct stat st {};
  if (path.empty() || ::stat(path.c_str(), &st) != 0) return name + "=absent";
  return name + "=" + path + ":" + std::to_string(st.st_size) + ":" +
         std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec);
}

}  // namespace

std::string host_cache_key() {
  // The module list can be long; a hash keeps the file small and the key one line.
  const std::string modules = module_names();
  std::ostringstream key;
  key << "boot=" << first_line("/proc/sys/kernel/random/boot_id") << " kernel=" << kernel_release()
      << " modules=" << std::hash<std::string>{}(modules) << " " << tool_stamp("iptables");
  return key.str();
}

std::optional<plan::HostCaps> read_host_cache(const std::string& dir, const std::string& key) {
  std::ifstream in(dir + "/" + kHostCacheFile);
  if (!in) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || j.value("version", 0) != kVersion || j.value("key", "") != key)
    return std::nullopt;
  try {
    plan::HostCaps h;
    h.netem = j.at("netem").get<bool>();
    h.tbf = j.at("tbf").get<bool>();
    h.htb = j.at("htb").get<bool>();
    h.red = j.at("red").get<bool>();
    h.dctcp = j.at("dctcp").get<bool>();
    h.dctcp = j.at("dctcp").get<bool>();
    h.nfqueue = j.at("nfqueue").get<bool>();
    h.rxe_checked = j.at("rxe_checked").get<bool>();
    h.rxe = j.at("rxe").get<bool>();
    h.rxe_detail = j.at("rxe_detail").get<std::string>();
    h.probed = true;
    h.how = "probed this boot, kept in " + dir + "/" + kHostCacheFile;
    return h;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

void write_host_cache(const std::string& dir, const std::string& key, const plan::HostCaps& h) {
  if (dir.empty() || !h.probed) return;
  const nlohmann::json j = {{"version", kVersion},
                            {"key", key},
                            {"netem", h.netem},
                            {"tbf", h.tbf},
                            {"htb", h.htb},
                            {"red", h.red},
                            {"dctcp", h.dctcp},
                            {"nfqueue", h.nfqueue},
                            {"rxe_checked", h.rxe_checked},
                            {"rxe", h.rxe},
                            {"rxe_detail", h.rxe_detail}};
  auto root = SafeDir::open_root(dir);
  if (root) (void)root->write(kHostCacheFile, j.dump() + "\n");
}

plan::HostCaps host_caps_from(const std::vector<Capability>& caps) {
  plan::HostCaps h;
  h.how = "probed";
  h.probed = true;
  for (const Capability& c : caps) {
    if (bool* slot = shaping_field(h, c.name)) *slot = c.available;
    if (c.name == "rdma_rxe") set_rxe(h, c.available, c.detail);
  }
  return h;
}

bool* shaping_field(plan::HostCaps& h, std::string_view name) {
  return name == "netem"     ? &h.netem
         : name == "tbf"     ? &h.tbf
         : name == "htb"     ? &h.htb
         : name == "red"     ? &h.red
         : name == "dctcp"   ? &h.dctcp
         : name == "nfqueue" ? &h.nfqueue
                             : nullptr;
}

void set_rxe(plan::HostCaps& h, bool available, const std::string& detail) {
  h.rxe = available;
  h.rxe_checked = true;
  h.rxe_detail = "doctor's rdma_rxe probe: " + detail;
}

}  // namespace tb::capability
