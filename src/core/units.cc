#include "core/units.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace tb {
namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  std::ranges::transform(out, out.begin(), [](unsigned char c) { return std::tolower(c); });
  return out;
}

// Splits "12.5ms" into 12.5 and "ms". Fails on no number, a negative one, or NaN.
bool split_number(std::string_view text, double& value, std::string& suffix) {
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.front())))
    text.remove_prefix(1);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back())))
    text.remove_suffix(1);
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || !std::isfinite(value) || value < 0) return false;
  suffix = lower(std::string_view(ptr, text.data() + text.size() - ptr));
  while (!suffix.empty() && suffix.front() == ' ') suffix.erase(0, 1);
  return true;
}

std::string trim_number(double v, int digits = 3) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  std::string s(buf);
  if (s.find('.') != std::string::npos) {
    while (s.back() == '0') s.pop_back();
    if (s.back() == '.') s.pop_back();
  }
  return s;
}

}  // namespace

Result<Rate> parse_rate(std::string_view text) {
  double v = 0;
  std::string suf;
  auto bad = [&] {
    std::string hint;
    if (suf.ends_with("bps"))
      hint = " (\"bps\" is ambiguous: tc reads it as bytes per second, most people as bits; "
             "write \"" + trim_number(v) + suf.substr(0, suf.size() - 3) + "bit\" or \"" +
             trim_number(v) + std::string(1, static_cast<char>(std::toupper(suf[0]))) +
             "B/s\")";
    return bad_input("\"" + std::string(text) + "\" is not a rate" + hint + "; use " +
                     std::string(kRateForms));
  };
  if (!split_number(text, v, suf)) return bad();
  static const struct {
    const char* suffix;
    double mult;
  } kTable[] = {{"bit", 1},           {"kbit", 1e3},         {"mbit", 1e6},
                {"gbit", 1e9},        {"tbit", 1e12},        {"b/s", 8},
                {"kb/s", 8e3},        {"mb/s", 8e6},         {"gb/s", 8e9},
                {"tb/s", 8e12}};
  if (suf.empty() && v == 0) return Rate{0};
  for (const auto& e : kTable)
    if (suf == e.suffix) return Rate{v * e.mult};
  return bad();
}

Result<Duration> parse_duration(std::string_view text) {
  double v = 0;
  std::string suf;
  auto bad = [&] {
    return bad_input("\"" + std::string(text) + "\" is not a duration; use " +
                     std::string(kDurationForms));
  };
  if (!split_number(text, v, suf)) return bad();
  double mult = 0;
  if (suf == "ns") mult = 1;
  else if (suf == "us" || suf == "µs") mult = 1e3;
  else if (suf == "ms") mult = 1e6;
  else if (suf == "s") mult = 1e9;
  else if (suf.empty() && v == 0) mult = 1;
  else return bad();
  return Duration{static_cast<int64_t>(std::llround(v * mult))};
}

Result<uint64_t> parse_size(std::string_view text) {
  double v = 0;
  std::string suf;
  auto bad = [&] {
    return bad_input("\"" + std::string(text) + "\" is not a size; use " +
                     std::string(kSizeForms));
  };
  if (!split_number(text, v, suf)) return bad();
  double mult = 0;
  if (suf.empty() || suf == "b") mult = 1;
  else if (suf == "k" || suf == "kb" || suf == "kib") mult = 1024.0;
  else if (suf == "m" || suf == "mb" || suf == "mib") mult = 1024.0 * 1024;
  else if (suf == "g" || suf == "gb" || suf == "gib") mult = 1024.0 * 1024 * 1024;
  else return bad();
  return static_cast<uint64_t>(std::llround(v * mult));
}

Result<double> parse_percent(std::string_view text) {
  double v = 0;
  std::string suf;
  if (!split_number(text, v, suf) || !(suf.empty() || suf == "%") || v > 100)
    return bad_input("\"" + std::string(text) + "\" is not a percentage; use " +
                     std::string(kPercentForms));
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
