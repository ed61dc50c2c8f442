// The byte scan behind exceeds_bounds: a small TOML tokenizer that knows only what it must to
// count nesting and key parts (strings, comments, brackets, braces, '=', ',' and '.').
#include "scenario/bounds.h"

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

  void next() {
    if (t_[i_] == '\n') {
      ++line_;
      col_ = 1;
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

}  // namespace

std::optional<std::string> exceeds_bounds(std::string_view text, const std::string& name) {
  if (text.size() > kMaxFileBytes)
    return name + ": scenario file too large (" + std::to_string(text.size()) +
           " bytes); at most " + std::to_string(kMaxFileBytes) + " bytes (1 MiB)";
  return Scan(text, name).run();
}

}  // namespace tb::scenario::detail
