#include "multihost/mirror.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "core/safe_file.h"
#include "multihost/wire.h"

namespace tb::multihost {
namespace {

std::vector<std::string> components(const std::string& rel) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    const size_t slash = rel.find('/', start);
    out.push_back(
        rel.substr(start, slash == std::string::npos ? std::string::npos : slash - start));
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return out;
}

bool is_temporary(const std::string& name) {
  const size_t t = name.rfind(".tmp");
  if (t == std::string::npos || t + 4 >= name.size()) return false;
  const std::string tail = name.substr(t + 4);
  return tail.find_first_not_of("0123456789-") == std::string::npos;
}

// Reads `path` from `offset` to its end (at most kMaxChunk bytes).
Result<std::string> read_from(const std::string& path, uint64_t offset) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) return sys_fail("open " + path);
  std::string out;
  char buf[65536];
  while (out.size() < kMaxChunk) {
    const ssize_t n = ::pread(fd.get(), buf, std::min(sizeof buf, kMaxChunk - out.size()),
                              static_cast<off_t>(offset + out.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_fail("read " + path);
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

}  // namespace

nlohmann::json to_json(const Chunk& c) {
  return {{"rel", c.rel}, {"offset", c.offset}, {"data", base64_encode(c.data)}};
}

Result<Chunk> chunk_from_json(const nlohmann::json& j) {
  if (!j.is_object() || !j.contains("rel") || !j["rel"].is_string() || !j.contains("data") ||
      !j["data"].is_string() || !j.value("offset", nlohmann::json(0)).is_number_unsigned())
    return fail("a file chunk without rel, offset and data");
  auto data = base64_decode(j["data"].get<std::string>());
  if (!data) return std::unexpected(data.error());
  return Chunk{j["rel"].get<std::string>(), j.value("offset", uint64_t{0}), std::move(*data)};
}

bool DirMirror::mirrored_name(const std::string& rel) const {
  if (rel.empty() || rel.front() == '/') return false;
  const auto parts = components(rel);
  if (static_cast<int>(parts.size()) > kMaxDepth) return false;
  if (skip_.contains(parts.front())) return false;
  for (const auto& p : parts)
    if (p.empty() || p == "." || p == ".." || p.front() == '.' || is_temporary(p)) return false;
  return !rel.ends_with(".progress");
}

void DirMirror::walk(const std::string& rel_dir, int depth, std::vector<std::string>& files) const {
  if (depth > kMaxDepth) return;
  const std::string dir = rel_dir.empty() ? root_ : root_ + "/" + rel_dir;
  DIR* d = ::opendir(dir.c_str());
  if (!d) return;
  while (dirent* e = ::readdir(d)) {
    if (files.size() >= kMaxFiles) break;
    const std::string name = e->d_name;
    if (name.empty() || name.front() == '.') continue;
    const std::string rel = rel_dir.empty() ? name : rel_dir + "/" + name;
    struct stat st {};
    if (::fstatat(dirfd(d), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (!(rel_dir.empty() && skip_.contains(name))) walk(rel, depth + 1, files);
    } else if (S_ISREG(st.st_mode) && mirrored_name(rel)) {
      files.push_back(rel);
    }
  }
  ::closedir(d);
}

std::vector<Chunk> DirMirror::scan(bool final) {
  std::vector<std::string> files;
  walk("", 1, files);
  std::vector<Chunk> out;
  for (const auto& rel : files) {
    auto it = sent_.find(rel);
    if (mode_ == Mode::kWhole) {
      if (it != sent_.end()) continue;
      auto data = read_from(root_ + "/" + rel, 0);
      if (!data) continue;  // gone again: a later scan
      sent_[rel] = data->size();
      out.push_back({rel, 0, std::move(*data)});
      continue;
    }
    const uint64_t from = it == sent_.end() ? 0 : it->second;
    auto data = read_from(root_ + "/" + rel, from);
    if (!data || data->empty()) continue;
    if (!final) {
      const size_t nl = data->rfind('\n');
      if (nl == std::string::npos) {
        if (data->size() < kMaxChunk) continue;  // a line longer than a chunk goes as it is
      } else {
        data->resize(nl + 1);
      }
    }
    sent_[rel] = from + data->size();
    out.push_back({rel, from, std::move(*data)});
  }
  return out;
}

Status DirMirror::apply(const Chunk& c) {
  if (!mirrored_name(c.rel)) return fail("a file chunk for '" + c.rel + "', which is not mirrored");
  auto root = SafeDir::open_existing(root_);
  if (!root) return std::unexpected(root.error());
  const size_t slash = c.rel.rfind('/');
  const std::string name = slash == std::string::npos ? c.rel : c.rel.substr(slash + 1);
  std::optional<SafeDir> sub;
  if (slash != std::string::npos) {
    auto s = root->sub(c.rel.substr(0, slash));
    if (!s) return std::unexpected(s.error());
    sub.emplace(std::move(*s));
  }
  const SafeDir& dir = sub ? *sub : *root;
  if (mode_ == Mode::kWhole) {
    if (sent_.contains(c.rel)) return {};
    sent_[c.rel] = c.data.size();
    return dir.write(name, c.data);
  }
  auto fd = dir.open(name, O_WRONLY | O_CREAT);
  if (!fd) return std::unexpected(fd.error());
  struct stat st {};
  if (::fstat(fd->get(), &st) != 0) return sys_fail("stat " + root_ + "/" + c.rel);
  const uint64_t have = static_cast<uint64_t>(st.st_size);
  if (c.offset > have)
    return fail(root_ + "/" + c.rel + ": a chunk at " + std::to_string(c.offset) + " but only " +
                std::to_string(have) + " bytes here");
  if (c.offset + c.data.size() <= have) return {};
  const std::string_view rest = std::string_view(c.data).substr(have - c.offset);
  if (::lseek(fd->get(), static_cast<off_t>(have), SEEK_SET) < 0)
    return sys_fail("seek " + root_ + "/" + c.rel);
  TB_TRY(write_all(fd->get(), rest, root_ + "/" + c.rel));
  sent_[c.rel] = have + rest.size();  // not sent back by scan()
  return {};
}

}  // namespace tb::multihost
