// QueueSpec text forms and queue sizing (queue_spec.h).
#include "stage/queue_spec.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

namespace tb::stage {
namespace {

constexpr std::string_view kKeys =
    "delay_us, delay_ns, delay, jitter_us, jitter_ns, jitter, maxlen, mark";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A whole non-negative number that fits in `max`.
bool parse_uint(std::string_view text, uint64_t max, uint64_t& out) {
  if (text.empty()) return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && p == text.data() + text.size() && out <= max;
}

// Sets `d` from key suffix "_us", "_ns" or "" (a duration with its unit).
Status parse_time(std::string_view suffix, std::string_view value, Duration& d,
                  const std::string& where) {
  constexpr uint64_t kMaxNs = 3600ull * 1'000'000'000;  // an hour: anything more is a typo
  uint64_t v = 0;
  if (suffix == "_us" || suffix == "_ns") {
    uint64_t scale = suffix == "_us" ? 1000 : 1;
    if (!parse_uint(value, kMaxNs / scale, v))
      return bad_input(where + ": \"" + std::string(value) + "\" is not a whole number up to " +
                       std::to_string(kMaxNs / scale));
    d.ns = static_cast<int64_t>(v * scale);
    return {};
  }
  auto parsed = parse_duration(value);
  if (!parsed) return bad_input(where + ": " + parsed.error().message);
  if (parsed->ns > static_cast<int64_t>(kMaxNs)) return bad_input(where + ": longer than 1 hour");
  d = *parsed;
  return {};
}

std::string time_arg(std::string_view name, Duration d) {
  if (d.ns % 1000 == 0) return std::string(name) + "_us=" + std::to_string(d.ns / 1000);
  return std::string(name) + "_ns=" + std::to_string(d.ns);
}

}  // namespace

std::string to_arg(const QueueSpec& spec) {
  return std::to_string(spec.num) + ":" + time_arg("delay", spec.delay) + ":" +
         time_arg("jitter", spec.jitter) + ":maxlen=" + std::to_string(spec.maxlen) +
         (spec.mark >= 0 ? ":mark=" + std::to_string(spec.mark) : "");
}

Result<QueueSpec> parse_queue_spec(std::string_view text) {
  const std::string what = "queue spec \"" + std::string(text) + "\"";
  text = trim(text);
  QueueSpec spec;
  size_t colon = text.find(':');
  uint64_t num = 0;
  if (!parse_uint(trim(text.substr(0, colon)), 65535, num))
    return bad_input(what + ": must start with a queue number 0-65535 (\"NUM:delay_us=...\")");
  spec.num = static_cast<uint16_t>(num);
  bool have_delay = false;
  std::set<std::string, std::less<>> seen;
  while (colon != std::string_view::npos) {
    text.remove_prefix(colon + 1);
    colon = text.find(':');
    std::string_view field = trim(text.substr(0, colon));
    size_t eq = field.find('=');
    if (eq == std::string_view::npos)
      return bad_input(what + ": \"" + std::string(field) +
                       "\" is not key=value (keys: " + std::string(kKeys) + ")");
    std::string_view key = trim(field.substr(0, eq)), value = trim(field.substr(eq + 1));
    std::string where = what + ": " + std::string(key);
    if (!seen.insert(std::string(key.substr(0, key.find('_')))).second)
      return bad_input(where + ": given twice");
    if (key.starts_with("delay") && (key.size() == 5 || key == "delay_us" || key == "delay_ns")) {
      TB_TRY(parse_time(key.substr(5), value, spec.delay, where));
      have_delay = true;
    } else if (key.starts_with("jitter") &&
               (key.size() == 6 || key == "jitter_us" || key == "jitter_ns")) {
      TB_TRY(parse_time(key.substr(6), value, spec.jitter, where));
    } else if (key == "maxlen") {
      uint64_t v = 0;
      if (!parse_uint(value, kMaxMaxlen, v) || v == 0)
        return bad_input(where + ": \"" + std::string(value) + "\" is not a packet count 1-" +
                         std::to_string(kMaxMaxlen));
      spec.maxlen = static_cast<uint32_t>(v);
    } else if (key == "mark") {
      uint64_t v = 0;
      if (!parse_uint(value, kMarkSlots - 1, v))
        return bad_input(where + ": \"" + std::string(value) + "\" is not a mark table slot 0-" +
                         std::to_string(kMarkSlots - 1));
      spec.mark = static_cast<int>(v);
    } else {
      return bad_input(what + ": unknown key \"" + std::string(key) +
                       "\" (keys: " + std::string(kKeys) + ")");
    }
  }
  if (!have_delay) return bad_input(what + ": no delay (add :delay_us=N or :delay=25ms)");
  return spec;
}

Result<std::vector<QueueSpec>> parse_queue_config(std::string_view text) {
  std::vector<QueueSpec> specs;
  int line_no = 0;
  while (!text.empty()) {
    ++line_no;
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (line.empty() || line.front() == '#') continue;
    auto spec = parse_queue_spec(line);
    if (!spec) return bad_input("line " + std::to_string(line_no) + ": " + spec.error().message);
    if (std::ranges::any_of(specs, [&](const QueueSpec& s) { return s.num == spec->num; }))
      return bad_input("line " + std::to_string(line_no) + ": queue " + std::to_string(spec->num) +
                       " is given twice");
    specs.push_back(*spec);
  }
  return specs;
}

std::string to_config(const std::vector<QueueSpec>& specs, uint64_t generation) {
  std::string out = generation ? "# generation " + std::to_string(generation) + "\n" : "";
  for (const auto& s : specs) out += to_arg(s) + "\n";
  return out;
}

uint64_t config_generation(std::string_view text) {
  constexpr std::string_view kTag = "# generation ";
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = trim(text.substr(0, nl));
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    if (!line.starts_with(kTag)) continue;
    line.remove_prefix(kTag.size());
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(line.data(), line.data() + line.size(), n);
    return ec == std::errc() && end == line.data() + line.size() ? n : 0;
  }
  return 0;
}

uint32_t queue_maxlen_for(Rate rate, Duration delay, int mtu) {
  double bytes_per_s = rate.bps / 8;
  double pps = kStagePpsCeiling;
  if (bytes_per_s > 0) {
    double small = bytes_per_s / kMinPacketBytes;
    double full = bytes_per_s / std::max(mtu, static_cast<int>(kMinPacketBytes));
    pps = std::min(small, std::max(kStagePpsCeiling, full));
  }
  double need = std::ceil(2 * pps * std::max(delay.seconds(), 0.0));
  return static_cast<uint32_t>(
      std::clamp(need, static_cast<double>(kDefaultMaxlen), static_cast<double>(kMaxMaxlen)));
}

}  // namespace tb::stage
