#include "lab/state.h"

#include <fcntl.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/safe_file.h"

namespace tb::lab {
using apply::RxeDevice;

namespace fs = std::filesystem;

std::string run_root() {
  return paths::roots().runtime;
}
std::string lab_dir(const std::string& lab) {
  return run_root() + "/" + lab;
}
std::string journal_path(const std::string& lab) {
  return lab_dir(lab) + "/journal.jsonl";
}

Result<SafeDir> open_lab_dir(const std::string& lab) {
  if (lab.empty() || lab.find('/') != std::string::npos)
    return bad_input("\"" + lab + "\" is not a lab name");
  auto root = SafeDir::open_root(run_root());
  if (!root) return std::unexpected(root.error());
  return root->sub(lab);
}

std::vector<std::string> list_labs() {
  std::vector<std::string> labs;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(run_root(), ec))
    // Dot names are the rootless runtime root's namespaces (.netns, .etc-netns: core/paths.h);
    // a lab's name starts with a letter.
    if (e.is_directory() && !e.path().filename().string().starts_with("."))
      labs.push_back(e.path().filename());
  std::ranges::sort(labs);
  return labs;
}

namespace {

// save_state's dump(1): each top-level key on a line of its own, one space in; nested ones deeper.
constexpr const char* kStagesKey = "\n \"stages\": ";

// The state without its topology and stages, parsed from the text before them alone: save_state
// writes the keys in order (nlohmann::json's objects are sorted maps), and "stages" and
// "topology" sort last, so for a large lab that is a few hundred bytes of megabytes (2.6 MB for
// 1,024 GPUs, which the parser would otherwise still read through: ~15 ms a load at 256 GPUs,
// three loads a `down`). Null when the text is not laid out so (then it is parsed whole).
nlohmann::json brief_part(const std::string& text) {
  const size_t at = text.find(kStagesKey);
  if (at == std::string::npos) return nullptr;
  const size_t comma = text.find_last_not_of(" \n", at);
  if (comma == std::string::npos || text[comma] != ',') return nullptr;
  auto j = nlohmann::json::parse(text.substr(0, comma) + "\n}", nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.contains("stages") || j.contains("topology"))
    return nullptr;
  return j;
}

}  // namespace

Result<LabState> load_state(const std::string& lab, StateParts parts) {
  const std::string path = lab_dir(lab) + "/state.json";
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // A user's labs are that user's alone (its keeper's namespaces): another user's lab of that
    // name is not "down", it does not exist here.
    if (paths::rootless())
      return fail("lab \"" + lab + "\" does not exist for this user (no " + path +
                      "; a user sees only the labs that user brought up)",
                  ENOENT);
    return fail("lab \"" + lab + "\" is not up (no " + path + ")", ENOENT);
  }
  // Read into memory, then parsed from there (nlohmann's stream input reads a character at a
  // time). Brief: read until the "stages" key (brief_part), often the first block alone.
  const bool brief = parts == StateParts::kBrief;
  std::string text;
  char buf[65536];
  while (in.read(buf, sizeof buf) || in.gcount() > 0) {
    const size_t before = text.size();
    text.append(buf, static_cast<size_t>(in.gcount()));
    if (brief && text.find(kStagesKey, before > 16 ? before - 16 : 0) != std::string::npos) break;
  }
  nlohmann::json j;
  if (brief) j = brief_part(text);
  if (j.is_null() && brief && !in.eof()) {  // not laid out so: the rest too, for a whole parse
    text.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (j.is_null()) {
    const nlohmann::json::parser_callback_t skip_big =
        [brief](int depth, nlohmann::json::parse_event_t event, nlohmann::json& parsed) {
          return !(brief && depth == 1 && event == nlohmann::json::parse_event_t::key &&
                   (parsed == "topology" || parsed == "stages"));
        };
    j = nlohmann::json::parse(text, brief ? skip_big : nullptr, false);
  }
  if (j.is_discarded()) return fail("lab \"" + lab + "\": " + path + " is unreadable");
  try {
    LabState s;
    s.lab = j.at("lab");
    s.scenario = j.at("scenario");
    s.phase = j.at("phase");
    s.created_unix = j.at("created_unix");
    s.pid = j.at("pid");
    if (!brief) s.topo = plan::topology_from_json(j.at("topology"));
    s.shaping = j.value("shaping", "");
    if (!brief)
      for (const auto& st : j.value("stages", nlohmann::json::array()))
        s.stages.push_back(plan::stage_from_json(st));
    s.rdma = j.value("rdma", "none");
    s.rdma_why = j.value("rdma_why", "");
    s.host = j.value("host", "");
    s.digest = j.value("digest", "");
    for (const auto& h : j.value("hosts", nlohmann::json::array())) {
      auto addr = parse_ipv4(h.at("underlay").get<std::string>());
      if (!addr) return fail("lab \"" + lab + "\": " + path + ": hosts: " + addr.error().message);
      s.hosts.push_back(LabHost{h.at("name"), *addr});
    }
    for (const auto& d : j.value("rxe", nlohmann::json::array()))
      s.rxe.push_back(RxeDevice{d.at("node"), d.at("netns"), d.at("ifname"), d.at("name"),
                                d.at("gid_index"), d.at("gid")});
    return s;
  } catch (const nlohmann::json::exception& e) {
    return fail("lab \"" + lab + "\": " + path + ": " + e.what());
  }
}

Status save_state(const LabState& s) {
  auto dir = open_lab_dir(s.lab);
  if (!dir) return std::unexpected(dir.error());
  nlohmann::json j = {{"lab", s.lab},        {"scenario", s.scenario},
                      {"phase", s.phase},    {"created_unix", s.created_unix},
                      {"pid", s.pid},        {"topology", plan::to_json(s.topo)},
                      {"shaping", s.shaping}};
  nlohmann::json stages = nlohmann::json::array();
  for (const auto& st : s.stages) stages.push_back(plan::to_json(st));
  j["stages"] = stages;
  j["rdma"] = s.rdma;
  j["rdma_why"] = s.rdma_why;
  if (!s.host.empty()) j["host"] = s.host;
  if (!s.digest.empty()) j["digest"] = s.digest;
  if (!s.hosts.empty()) {
    nlohmann::json hosts = nlohmann::json::array();
    for (const auto& h : s.hosts)
      hosts.push_back({{"name", h.name}, {"underlay", h.underlay.to_string()}});
    j["hosts"] = hosts;
  }
  nlohmann::json rxe = nlohmann::json::array();
  for (const auto& d : s.rxe)
    rxe.push_back({{"node", d.node},
                   {"netns", d.netns},
                   {"ifname", d.ifname},
                   {"name", d.name},
                   {"gid_index", d.gid_index},
                   {"gid", d.gid}});
  j["rxe"] = rxe;
  return dir->write("state.json", j.dump(1) + "\n");
}

Status remove_state(const std::string& lab) {
  std::error_code ec;
  fs::remove_all(lab_dir(lab), ec);
  if (ec) return fail("remove " + lab_dir(lab) + ": " + ec.message());
  return {};
}

Result<LabLock> LabLock::acquire(const std::string& lab) {
  auto dir = open_lab_dir(lab);
  if (!dir) return std::unexpected(dir.error());
  const std::string path = dir->path() + "/lock";
  auto opened = dir->open("lock", O_RDWR | O_CREAT);
  if (!opened) return std::unexpected(opened.error());
  UniqueFd fd = std::move(*opened);
  // A POSIX record lock, not flock(2): it belongs to this process, not to the open file, so a
  // child forked while it is held (a tool before its exec) does not keep it when this process
  // is killed. It is released when any descriptor of the file closes in this process: nothing
  // else here opens the lock file.
  struct flock whole {};
  whole.l_type = F_WRLCK;
  whole.l_whence = SEEK_SET;  // l_start = l_len = 0: the whole file
  if (::fcntl(fd.get(), F_SETLK, &whole) != 0) {
    if (errno == EACCES || errno == EAGAIN)
      return fail("lab \"" + lab + "\" is being changed by another testbedctl (lock " + path + ")",
                  EWOULDBLOCK);
    return sys_fail("lock " + path);
  }
  return LabLock(std::move(fd));
}

}  // namespace tb::lab
