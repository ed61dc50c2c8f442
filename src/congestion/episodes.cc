#include "congestion/episodes.h"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/safe_file.h"

namespace tb::congestion {

using nlohmann::json;

json to_json(const Episode& e) {
  return {{"t0_ns", e.t0_ns},
          {"t1_ns", e.t1_ns},
          {"upstream", e.upstream},
          {"by", e.by},
          {"cycles", e.cycles}};
}

Episode episode_from_json(const json& j) {
  Episode e;
  if (!j.is_object()) return e;
  e.t0_ns = j.value("t0_ns", int64_t{0});
  e.t1_ns = j.value("t1_ns", int64_t{0});
  e.upstream = j.value("upstream", "");
  if (auto b = j.find("by"); b != j.end() && b->is_array())
    for (const auto& p : *b)
      if (p.is_string()) e.by.push_back(p.get<std::string>());
  e.cycles = j.value("cycles", uint64_t{0});
  return e;
}

EpisodeTracker::EpisodeTracker(std::vector<std::string> upstreams, std::vector<std::string> ports,
                               int64_t merge_ns)
    : upstreams_(std::move(upstreams)),
      ports_(std::move(ports)),
      merge_ns_(merge_ns),
      open_(upstreams_.size()) {}

void EpisodeTracker::paused(int upstream, int by, int64_t now) {
  if (upstream < 0 || static_cast<size_t>(upstream) >= open_.size()) return;
  Open& o = open_[static_cast<size_t>(upstream)];
  if (!o.active) {
    o = Open{};
    o.active = true;
    o.t0 = now;
  }
  if (!o.paused) ++o.cycles;
  o.paused = true;
  o.t1 = now;
  if (by >= 0 && std::find(o.by.begin(), o.by.end(), by) == o.by.end()) o.by.push_back(by);
}

void EpisodeTracker::resumed(int upstream, int64_t now) {
  if (upstream < 0 || static_cast<size_t>(upstream) >= open_.size()) return;
  Open& o = open_[static_cast<size_t>(upstream)];
  if (!o.active || !o.paused) return;  // a leftover's resume: no episode of ours
  o.paused = false;
  o.t1 = now;
}

Episode EpisodeTracker::close(size_t u, Open& o) {
  Episode e;
  e.t0_ns = o.t0;
  e.t1_ns = o.t1;
  e.upstream = upstreams_[u];
  e.cycles = o.cycles;
  for (int p : o.by)
    e.by.push_back(static_cast<size_t>(p) < ports_.size() ? ports_[static_cast<size_t>(p)]
                                                          : std::to_string(p));
  std::sort(e.by.begin(), e.by.end());
  o = Open{};
  return e;
}

std::vector<Episode> EpisodeTracker::take_closed(int64_t now) {
  std::vector<Episode> out;
  for (size_t u = 0; u < open_.size(); ++u) {
    Open& o = open_[u];
    if (o.active && !o.paused && now - o.t1 >= merge_ns_) out.push_back(close(u, o));
  }
  std::sort(out.begin(), out.end(),
            [](const Episode& a, const Episode& b) { return a.t0_ns < b.t0_ns; });
  return out;
}

std::vector<Episode> EpisodeTracker::take_all(int64_t now) {
  std::vector<Episode> out;
  for (size_t u = 0; u < open_.size(); ++u) {
    Open& o = open_[u];
    if (!o.active) continue;
    if (o.paused) o.t1 = now;
    out.push_back(close(u, o));
  }
  std::sort(out.begin(), out.end(),
            [](const Episode& a, const Episode& b) { return a.t0_ns < b.t0_ns; });
  return out;
}

Result<EpisodeLog> EpisodeLog::open(const std::string& path, uint64_t cap) {
  auto fd = open_file(path, O_WRONLY | O_CREAT | O_APPEND);
  if (!fd) return std::unexpected(with_context(fd.error(), "pause episode log"));
  struct stat st {};
  const uint64_t size = ::fstat(fd->get(), &st) == 0 ? static_cast<uint64_t>(st.st_size) : 0;
  return EpisodeLog(path, std::move(*fd), size, cap);
}

Status EpisodeLog::append(const std::vector<Episode>& episodes) {
  if (episodes.empty()) return {};
  std::string text;
  for (const auto& e : episodes) text += to_json(e).dump() + "\n";
  if (size_ > 0 && size_ + text.size() > cap_) {
    // One old file kept: <path>.1 replaced (rename(2) replaces a link, never follows it).
    if (::rename(path_.c_str(), (path_ + ".1").c_str()) != 0)
      return sys_fail("rotate pause episode log " + path_);
    auto fd = open_file(path_, O_WRONLY | O_CREAT | O_APPEND);
    if (!fd) return std::unexpected(with_context(fd.error(), "pause episode log"));
    fd_ = std::move(*fd);
    size_ = 0;
  }
  TB_TRY(write_all(fd_.get(), text, "pause episode log " + path_));
  size_ += text.size();
  return {};
}

std::vector<Episode> read_episodes(const std::string& path, int64_t from_ns, int64_t to_ns) {
  std::vector<Episode> out;
  for (const auto& p : {path + ".1", path}) {
    std::ifstream in(p);
    for (std::string line; std::getline(in, line);) {
      const auto j = json::parse(line, nullptr, false);
      if (!j.is_object()) continue;
      Episode e = episode_from_json(j);
      if (e.t1_ns >= from_ns && e.t0_ns <= to_ns) out.push_back(std::move(e));
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Episode& a, const Episode& b) { return a.t0_ns < b.t0_ns; });
  return out;
}

}  // namespace tb::congestion
