// The byte scan behind exceeds_bounds: a small TOML tokenizer that knows only what it must to
// count nesting, key parts and values per line (strings, comments, brackets, braces, '=', ','
// and '.').
#include "scenario/bounds.h"

#include <cstdio>
#include <vector>

namespace tb::scenario::detail {
namespace {

class Scan {
 public:
  Scan(std::string_view text, const std::string& name) : t_(text), name_(name) {}

  std::optional<std::string> run() {
    bool line_start = true;  // only blanks so far on a line outside any bracket
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '\n') {
        next();
        line_start = open_.empty();
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\r') {
        next();
        continue;
      }
      if (line_start) {  // a key or a [table] header begins
        start_key();
        line_start = false;
      }
      if (c == '=' || c == ',' || c == '[' || c == '{' || c == ']' || c == '}') {
        // Where a value starts or (one spanning lines) ends: at most one per such byte.
        if (++items_ > kMaxLineItems)
          return here("more than " + std::to_string(kMaxLineItems) +
                      " values on one line; the TOML parser takes time that grows with the "
                      "square of a line's values: spread them over several lines");
      }
      if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') next();
      } else if (c == '"' || c == '\'') {
        skip_string(c);
      } else if (c == '[' || c == '{') {
        if (open_.size() >= static_cast<size_t>(kMaxNesting))
          return here("arrays and inline tables nested more than " + std::to_string(kMaxNesting) +
                      " levels deep; a scenario needs three or four");
        open_.push_back(c);
        if (c == '{') start_key();
        next();
      } else if (c == ']' || c == '}') {
        if (!open_.empty()) open_.pop_back();
        if (open_.empty()) in_key_ = false;
        next();
      } else if (c == ',' && !open_.empty() && open_.back() == '{') {
        start_key();
        next();
      } else if (c == '=') {
        in_key_ = false;
        next();
      } else if (c == '.' && in_key_) {
        if (++key_parts_ > kMaxKeyParts)
          return here("a dotted key or table name of more than " + std::to_string(kMaxKeyParts) +
                      " parts; a scenario needs two or three");
        next();
      } else {
        next();
      }
    }
    return std::nullopt;
  }

 private:
  std::string_view t_;
  const std::string& name_;
  size_t i_ = 0;
  int line_ = 1, col_ = 1;
  std::vector<char> open_;  // the '[' and '{' not yet closed
  bool in_key_ = false;
  int key_parts_ = 0;
  int items_ = 0;  // value starts and ends on this line so far

  void next() {
    if (t_[i_] == '\n') {
      ++line_;
      col_ = 1;
      items_ = 0;
    } else {
      ++col_;
    }
    ++i_;
  }
  void start_key() {
    in_key_ = true;
    key_parts_ = 1;
  }
  std::string here(const std::string& what) const {
    return name_ + ":" + std::to_string(line_) + ":" + std::to_string(col_) + ": " + what;
  }
  bool at(std::string_view s) const { return t_.substr(i_, s.size()) == s; }

  // Skips a string starting at i_: "...", '...', """...""" or '''...''' (basic ones with
  // backslash escapes). An unterminated one-line string ends at the line's end; the parser
  // reports it.
  void skip_string(char q) {
    const bool basic = q == '"';
    const std::string triple(3, q);
    const bool multi = at(triple);
    for (int k = 0; k < (multi ? 3 : 1); ++k) next();
    while (i_ < t_.size()) {
      if (multi && at(triple)) {
        // Up to two quotes may end the content just before the closing three.
        int n = 0;
        while (i_ < t_.size() && t_[i_] == q && n < 5) {
          next();
          ++n;
        }
        return;
      }
      const char c = t_[i_];
      if (!multi && c == '\n') return;
      next();
      if (!multi && c == q) return;
      if (basic && c == '\\' && i_ < t_.size()) next();
    }
  }
};

// Where the first byte that is not part of well-formed UTF-8 is (RFC 3629: no overlong forms,
// no surrogates, nothing above U+10FFFF, no sequence cut short), or npos.
size_t first_bad_utf8(std::string_view t) {
  size_t i = 0;
  while (i < t.size()) {
    const auto b = static_cast<unsigned char>(t[i]);
    if (b < 0x80) {
      ++i;
      continue;
    }
    int n = 0;                           // continuation bytes
    unsigned char lo = 0x80, hi = 0xBF;  // the range of the first continuation byte
    if (b >= 0xC2 && b <= 0xDF) {
      n = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 2;
      if (b == 0xE0) lo = 0xA0;  // overlong
      if (b == 0xED) hi = 0x9F;  // surrogates
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 3;
      if (b == 0xF0) lo = 0x90;  // overlong
      if (b == 0xF4) hi = 0x8F;  // above U+10FFFF
    } else {
      return i;  // a continuation byte with no lead, C0/C1 (overlong) or F5..FF
    }
    for (int k = 1; k <= n; ++k) {
      if (i + k >= t.size()) return i;
      const auto c = static_cast<unsigned char>(t[i + k]);
      if (k == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xBF)) return i;
    }
    i += n + 1;
  }
  return std::string_view::npos;
}

}  // namespace

int64_t region_namespaces(const Region& r) {
  const int64_t rails = r.rails > 0 ? r.rails : r.gpus_per_server;  // Scenario::rails
  return 2 + int64_t{r.spines} + rails * (r.dual_tor ? 2 : 1) +
         int64_t{r.servers} * (1 + int64_t{r.gpus_per_server});
}

std::optional<std::string> exceeds_bounds(std::string_view text, const std::string& name) {
  if (text.size() > kMaxFileBytes)
    return name + ": scenario file too large (" + std::to_string(text.size()) +
           " bytes); at most " + std::to_string(kMaxFileBytes) + " bytes (1 MiB)";
  // toml11 3.7.1 reads past the end of its buffer on some invalid UTF-8 (a heap overflow under
  // ASan, found by tests/fuzz); TOML requires UTF-8 anyway.
  if (const size_t bad = first_bad_utf8(text); bad != std::string_view::npos) {
    int line = 1, col = 1;
    for (size_t i = 0; i < bad; ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    char byte[8];
    std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(text[bad]));
    return name + ":" + std::to_string(line) + ":" + std::to_string(col) +
           ": not valid UTF-8 (byte " + byte + "); a scenario file must be UTF-8 text";
  }
  return Scan(text, name).run();
}

}  // namespace tb::scenario::detail
