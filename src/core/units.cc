#include "core/units.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>

namespace tb {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

std::string upper(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::toupper(c); });
  return out;
}

// Splits "12.5ms" into 12.5 and "ms" (lowercased; `raw_suffix` keeps the case). Fails on no
// number, a negative one, or NaN/infinity; `why` then says which, if it is worth saying.
bool split_number(std::string_view text, double& value, std::string& suffix,
                  std::string* raw_suffix = nullptr, std::string* why = nullptr) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec == std::errc::result_out_of_range) {
    if (why) *why = " (too large)";
    return false;
  }
  if (ec != std::errc() || !std::isfinite(value)) return false;
  if (value < 0 || (value == 0 && std::signbit(value))) {
    if (why) *why = " (must not be negative)";
    return false;
  }
  std::string_view rest(ptr, text.data() + text.size() - ptr);
  while (!rest.empty() && std::isspace(static_cast<unsigned char>(rest.front())))
    rest.remove_prefix(1);
  if (raw_suffix) *raw_suffix = std::string(rest);
  suffix = lower(rest);
  return true;
}

// Largest value a Duration or a byte count may hold after scaling, kept well inside int64 so
// llround never overflows.
constexpr double kMaxScaled = 9.0e18;

std::string trim_number(double v, int digits = 3) {
  std::string s = fmt::format("{:.{}f}", v, digits);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

Result<Rate> parse_rate(std::string_view text) {
  double v = 0;
  std::string suf, raw, why;
  auto bad = [&](std::string hint) {
    return bad_input("\"" + std::string(text) + "\" is not a rate" + hint + "; use " +
                     std::string(kRateForms));
  };
  if (!split_number(text, v, suf, &raw, &why)) return bad(why);
  const std::string n = trim_number(v);
  if (suf.ends_with("bps")) {
    // "gbps" -> "gbit" / "GB/s"; a bare "bps" -> "bit" / "B/s".
    const std::string prefix = suf.substr(0, suf.size() - 3);
    return bad(
        " (\"bps\" is ambiguous: tc reads it as bytes per second, most people as bits; "
        "write \"" +
        n + prefix + "bit\" or \"" + n + upper(prefix) + "B/s\")");
  }
  // Bytes per second need a capital B: "Mb/s" conventionally means megabits, so reading it
  // case-insensitively as megabytes would be off by a factor of 8.
  if (suf.ends_with("b/s") && !raw.ends_with("B/s")) {
    const std::string prefix = suf.substr(0, suf.size() - 3);
    return bad(" (a small \"b\" in \"b/s\" reads as bits, a capital \"B\" as bytes; write \"" + n +
               prefix + "bit\" for bits or \"" + n + upper(prefix) + "B/s\" for bytes)");
  }
  static const struct {
    const char* suffix;
    double mult;
  } kTable[] = {{"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12},
                {"b/s", 8}, {"kb/s", 8e3}, {"mb/s", 8e6}, {"gb/s", 8e9}, {"tb/s", 8e12}};
  if (suf.empty() && v == 0) return Rate{0};
  for (const auto& e : kTable)
    if (suf == e.suffix) {
      if (!std::isfinite(v * e.mult)) return bad(" (too large)");
      return Rate{v * e.mult};
    }
  return bad("");
}

Result<Duration> parse_duration(std::string_view text) {
  double v = 0;
  std::string suf, why;
  auto bad = [&] {
    return bad_input("\"" + std::string(text) + "\" is not a duration" + why + "; use " +
                     std::string(kDurationForms));
  };
  if (!split_number(text, v, suf, nullptr, &why)) return bad();
  double mult = 0;
  if (suf == "ns")
    mult = 1;
  else if (suf == "us" || suf == "µs")
    mult = 1e3;
  else if (suf == "ms")
    mult = 1e6;
  else if (suf == "s")
    mult = 1e9;
  else if (suf.empty() && v == 0)
    mult = 1;
  else
    return bad();
  if (v * mult > kMaxScaled) {
    why = " (too large)";
    return bad();
  }
  return Duration{static_cast<int64_t>(std::llround(v * mult))};
}

Result<uint64_t> parse_size(std::string_view text) {
  double v = 0;
  std::string suf, why;
  auto bad = [&] {
    return bad_input("\"" + std::string(text) + "\" is not a size" + why + "; use " +
                     std::string(kSizeForms));
  };
  if (!split_number(text, v, suf, nullptr, &why)) return bad();
  double mult = 0;
  if (suf.empty() || suf == "b")
    mult = 1;
  else if (suf == "k" || suf == "kb" || suf == "kib")
    mult = 1024.0;
  else if (suf == "m" || suf == "mb" || suf == "mib")
    mult = 1024.0 * 1024;
  else if (suf == "g" || suf == "gb" || suf == "gib")
    mult = 1024.0 * 1024 * 1024;
  else
    return bad();
  const double bytes = v * mult;
  if (bytes > kMaxScaled) {
    why = " (too large)";
    return bad();
  }
  if (std::fabs(bytes - std::round(bytes)) > 1e-6) {
    why = " (not a whole number of bytes)";
    return bad();
  }
  return static_cast<uint64_t>(std::llround(bytes));
}

Result<double> parse_percent(std::string_view text) {
  double v = 0;
  std::string suf, why;
  if (split_number(text, v, suf, nullptr, &why) && v > 100) why = " (more than 100)";
  if (!why.empty() || !split_number(text, v, suf) || !(suf.empty() || suf == "%"))
    return bad_input("\"" + std::string(text) + "\" is not a percentage" + why + "; use " +
                     std::string(kPercentForms));
  return v;
}

std::string IntRange::text() const {
  if (hi == std::numeric_limits<int>::max()) return std::to_string(lo) + " or more";
  return std::to_string(lo) + ".." + std::to_string(hi);
}

std::string RealRange::text() const {
  return fmt::format("{:g}..{:g}", lo, hi);
}

Result<int> parse_whole(std::string_view text, IntRange r) {
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range))
    return bad_input("\"" + std::string(text) + "\" is not a whole number; use " + r.text());
  if (ec != std::errc() || !r.contains(v))
    return bad_input("\"" + std::string(text) + "\" is out of range; use " + r.text());
  return static_cast<int>(v);
}

Result<double> parse_real(std::string_view text, RealRange r) {
  double v = 0;
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, v);
  if (ptr != end || (ec != std::errc() && ec != std::errc::result_out_of_range) || std::isnan(v))
    return bad_input("\"" + std::string(text) + "\" is not a number; use " + r.text());
  if (ec != std::errc() || !r.contains(v))
    return bad_input("\"" + std::string(text) + "\" is out of range; use " + r.text());
  return v;
}

std::string format_rate(Rate r) {
  static const struct {
    double mult;
    const char* unit;
  } kUnits[] = {{1e12, "Tbit"}, {1e9, "Gbit"}, {1e6, "Mbit"}, {1e3, "Kbit"}};
  for (const auto& u : kUnits)
    if (r.bps >= u.mult) return trim_number(r.bps / u.mult) + u.unit;
  return trim_number(r.bps) + "bit";
}

std::string format_duration(Duration d) {
  if (d.ns < 0) return "-" + format_duration(Duration{-d.ns});
  double ns = static_cast<double>(d.ns);
  if (d.ns == 0) return "0";
  if (d.ns % 1000000000 == 0 || ns >= 1e9) return trim_number(ns / 1e9) + "s";
  if (ns >= 1e6) return trim_number(ns / 1e6) + "ms";
  if (ns >= 1e3) return trim_number(ns / 1e3) + "us";
  return trim_number(ns, 0) + "ns";
}

std::string format_size(uint64_t bytes) {
  static const struct {
    uint64_t mult;
    const char* unit;
  } kUnits[] = {{1ull << 30, "G"}, {1ull << 20, "M"}, {1ull << 10, "K"}};
  for (const auto& u : kUnits)
    if (bytes >= u.mult && bytes % u.mult == 0) return std::to_string(bytes / u.mult) + u.unit;
  return std::to_string(bytes);
}

}  // namespace tb
