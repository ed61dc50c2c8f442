#include "apply/journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string_view>
#include <unordered_set>

#include "core/safe_file.h"

namespace tb::apply {

Result<Journal> Journal::create(const std::string& path) {
  auto fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC);
  if (!fd) return std::unexpected(with_context(fd.error(), "create journal"));
  return Journal(std::move(*fd), path);
}

namespace {

// The whole file in one buffer (one allocation: page faults are dear on a paravirtualized
// host), and its complete lines as views into it; a torn last line (no newline: a crash
// mid-write) is left out.
struct Lines {
  std::string text;
  std::vector<std::string_view> lines;
};

Result<Lines> read_lines(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return sys_fail("read journal " + path);
  Lines out;
  struct stat st {};
  if (::fstat(fd.get(), &st) == 0 && st.st_size > 0)
    out.text.reserve(static_cast<size_t>(st.st_size) + 1);
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return sys_fail("read journal " + path);
    if (n == 0) break;
    out.text.append(buf, static_cast<size_t>(n));
  }
  const std::string_view all = out.text;
  for (size_t from = 0, nl; (nl = all.find('\n', from)) != std::string_view::npos; from = nl + 1)
    out.lines.push_back(all.substr(from, nl - from));
  return out;
}

Result<plan::Op> parse_line(const std::string& path, std::string_view line) {
  auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return fail("journal " + path + ": unreadable line: " + std::string(line));
  auto op = plan::op_from_json(j);
  if (!op) return std::unexpected(with_context(op.error(), "journal " + path));
  return op;
}

// The string values of `pattern` ("key":" with its quotes) in a compact JSON line, in order (a
// value with an escape in it ends the scan: {"?"} is returned, which no namespace or kind is
// named).
std::vector<std::string_view> values_of(std::string_view line, std::string_view pattern) {
  std::vector<std::string_view> out;
  for (size_t at = line.find(pattern); at != std::string_view::npos;
       at = line.find(pattern, at + 1)) {
    const size_t from = at + pattern.size();
    const size_t end = line.find('"', from);
    if (end == std::string_view::npos ||
        line.substr(from, end - from).find('\\') != std::string_view::npos)
      return {"?"};
    out.push_back(line.substr(from, end - from));
  }
  return out;
}

}  // namespace

Result<std::vector<plan::Op>> Journal::read(const std::string& path) {
  auto lines = read_lines(path);
  if (!lines) return std::unexpected(lines.error());
  std::vector<plan::Op> ops;
  ops.reserve(lines->lines.size());
  for (const auto line : lines->lines) {
    auto op = parse_line(path, line);
    if (!op) return std::unexpected(op.error());
    ops.push_back(std::move(*op));
  }
  return ops;
}

Result<std::vector<plan::Op>> Journal::read_for_teardown(const std::string& path) {
  auto lines = read_lines(path);
  if (!lines) return std::unexpected(lines.error());
  // A quoted "op":"..." or "netns":"..." cannot occur inside a string value (its quotes would
  // be escaped), so each found is a key; exactly one "op" means it is the line's own.
  constexpr std::string_view kOp = "\"op\":\"", kNetns = "\"netns\":\"";
  auto kind_of = [&](std::string_view line) {
    auto kinds = values_of(line, kOp);
    return kinds.size() == 1 ? kinds.front() : std::string_view{};
  };
  // A CreateNetns line holds one "netns" (its name). One read otherwise leaves its ops in, which
  // teardown then skips as before.
  std::unordered_set<std::string_view> created;
  for (const auto line : lines->lines)
    if (kind_of(line) == "netns")
      if (auto netns = values_of(line, kNetns); netns.size() == 1) created.insert(netns.front());
  static const std::unordered_set<std::string_view> kInside = {"addr",  "route",      "sysctl",
                                                               "shape", "stage-rule", "bridge"};
  auto goes_with_a_namespace = [&](std::string_view line) {
    const std::string_view kind = kind_of(line);
    const bool veth = kind == "veth";
    if (!veth && !kInside.contains(kind)) return false;
    auto netns = values_of(line, kNetns);
    if (netns.size() != (veth ? 2u : 1u)) return false;
    return std::ranges::any_of(netns, [&](std::string_view n) { return created.contains(n); });
  };
  std::vector<plan::Op> ops;
  for (const auto line : lines->lines) {
    if (goes_with_a_namespace(line)) continue;
    auto op = parse_line(path, line);
    if (!op) return std::unexpected(op.error());
    ops.push_back(std::move(*op));
  }
  return ops;
}

void Journal::append(const plan::Op& op) {
  pending_ += plan::to_json(op).dump();
  pending_ += '\n';
  ops_.push_back(op);
}

Status Journal::flush() {
  TB_TRY(write_all(fd_.get(), pending_, "journal " + path_));
  pending_.clear();
  return {};
}

}  // namespace tb::apply
