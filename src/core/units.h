// Units: parsing and printing rates, durations, byte sizes and percentages as users write them
// in scenarios and on the command line ("400gbit", "900GB/s", "25ms", "8K", "0.5%"), and plain
// numbers inside a range (a flag's "20" for 1..100000, "30" seconds for 0.1..86400).
//
// Parsing errors list the accepted forms; the caller adds where the text came from.
// Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tb {

// Bits per second. double keeps 900 GB/s and 10 kbit/s both exact enough.
struct Rate {
  double bps = 0;
  friend auto operator<=>(const Rate&, const Rate&) = default;
};
// Nanoseconds.
struct Duration {
  int64_t ns = 0;
  friend auto operator<=>(const Duration&, const Duration&) = default;
  double ms() const { return static_cast<double>(ns) / 1e6; }
  double seconds() const { return static_cast<double>(ns) / 1e9; }
};

// "10mbit", "400Gbit", "1.5tbit", "900GB/s", "64MB/s", "0" (bits: bit kbit mbit gbit tbit, or
// bytes per second: B/s KB/s MB/s GB/s TB/s; SI multipliers, case-insensitive prefix).
Result<Rate> parse_rate(std::string_view text);
// "100ns", "2us", "25ms", "1.5s", "0".
Result<Duration> parse_duration(std::string_view text);
// "8K", "64M", "1G", "512" -> bytes (binary multipliers, as nccl-tests' -b/-e).
Result<uint64_t> parse_size(std::string_view text);
// "0.5%" -> 0.5. A bare number is also a percentage.
Result<double> parse_percent(std::string_view text);

// An inclusive range of whole numbers a flag or a key may take; text() is "1..100000", or
// "0 or more" when hi is the largest int.
struct IntRange {
  int lo = 0, hi = 0;
  bool contains(int64_t v) const { return v >= lo && v <= hi; }
  std::string text() const;
};
// An inclusive range of finite numbers; text() is "0.1..86400".
struct RealRange {
  double lo = 0, hi = 0;
  bool contains(double v) const { return v >= lo && v <= hi; }  // false for NaN
  std::string text() const;
};
// "20" inside `r`. Errors: "\"abc\" is not a whole number; use 1..100000", "\"0\" is out of
// range; use 1..100000" (also for numbers too large for any int).
Result<int> parse_whole(std::string_view text, IntRange r);
// "30", "0.5", "1e3" inside `r`; "nan" is not a number, "inf" is out of range.
Result<double> parse_real(std::string_view text, RealRange r);

// Shortest readable forms: "400Gbit", "2.5Mbit", "900GB/s" is printed as "7.2Tbit".
std::string format_rate(Rate r);
std::string format_duration(Duration d);
std::string format_size(uint64_t bytes);

inline constexpr std::string_view kRateForms =
    "a number with bit, kbit, mbit, gbit or tbit (bits per second, e.g. \"400gbit\"), or with "
    "B/s, KB/s, MB/s, GB/s or TB/s (bytes per second, e.g. \"900GB/s\")";
inline constexpr std::string_view kDurationForms =
    "a number with ns, us, ms or s (e.g. \"25ms\", \"2us\")";
inline constexpr std::string_view kSizeForms =
    "a number of bytes, optionally with K, M or G (powers of 1024, e.g. \"8K\", \"64M\")";
inline constexpr std::string_view kPercentForms = "a percentage from 0 to 100 (e.g. \"0.5%\")";

}  // namespace tb
