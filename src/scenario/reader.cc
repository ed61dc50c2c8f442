#include "scenario/reader.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <memory>

#include "core/units.h"

namespace tb::scenario::detail {
namespace {

bool is_key_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-';
}

// Where `key` itself was written: searched for on the line its value (or table header) is on,
// nearest before the value (a key precedes its value), else first after it. Searching only that
// far keeps many unknown keys on one long line linear, not quadratic.
Loc key_loc(std::string_view key, const toml::value& v) {
  const auto p = place_of(v);
  if (!p) return loc_of(v);
  const std::string_view line = p->line;
  auto whole_word = [&](size_t pos) {
    const size_t end = pos + key.size();
    return (pos == 0 || !is_key_char(line[pos - 1])) &&
           (end == line.size() || !is_key_char(line[end]));
  };
  auto at = [&](size_t pos) { return Loc{p->at.line, static_cast<int>(pos + 1)}; };
  const size_t value_at = static_cast<size_t>(p->at.col - 1);
  if (!key.empty() && value_at >= key.size()) {
    for (size_t pos = line.rfind(key, value_at - key.size()); pos != std::string_view::npos;
         pos = pos == 0 ? std::string_view::npos : line.rfind(key, pos - 1))
      if (whole_word(pos)) return at(pos);
  }
  for (size_t pos = line.find(key, value_at); pos != std::string_view::npos;
       pos = line.find(key, pos + 1))
    if (whole_word(pos)) return at(pos);
  return p->at;
}

std::string number_text(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.15g", v);
  return buf;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::optional<Place> place_of(const toml::value& v) {
  const auto* r = dynamic_cast<const toml::detail::region*>(toml::detail::get_region(v));
  if (!r || !r->is_ok()) return std::nullopt;
  const auto& src = r->source();
  // The line starts of the last file asked about, per thread. A weak_ptr holds the control
  // block, so a later file can never be taken for this one.
  thread_local std::weak_ptr<const std::vector<char>> indexed;
  thread_local std::vector<size_t> starts;
  if (indexed.expired() || indexed.owner_before(src) || src.owner_before(indexed)) {
    starts.assign(1, 0);
    for (size_t i = 0; i < src->size(); ++i)
      if ((*src)[i] == '\n') starts.push_back(i + 1);
    indexed = src;
  }
  const std::string_view text(src->data(), src->size());
  const auto first = static_cast<size_t>(r->first() - r->begin());
  const auto last = static_cast<size_t>(r->last() - r->begin());
  const size_t line = static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), first) -
                                          starts.begin());  // 1-based: starts[0] = 0 <= first
  const size_t from = starts[line - 1];
  const size_t to = line < starts.size() ? starts[line] - 1 : text.size();
  return Place{Loc{static_cast<int>(line), static_cast<int>(first - from + 1)},
               text.substr(from, to - from), text.substr(first, last - first)};
}

Loc loc_of(const toml::value& v) {
  if (auto p = place_of(v)) return p->at;
  const auto l = v.location();
  return Loc{static_cast<int>(l.line()), static_cast<int>(l.column())};
}

std::string type_name(const toml::value& v) {
  switch (v.type()) {
    case toml::value_t::boolean:
      return "a boolean";
    case toml::value_t::integer:
      return "an integer";
    case toml::value_t::floating:
      return "a float";
    case toml::value_t::string:
      return "a string";
    case toml::value_t::array:
      return "an array";
    case toml::value_t::table:
      return "a table";
    case toml::value_t::empty:
      return "nothing";
    default:
      return "a date/time";
  }
}

std::string quote(std::string_view s) {
  // Characters, not bytes: a UTF-8 continuation byte (10xxxxxx) does not start one.
  auto starts_char = [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; };
  size_t chars = 0, cut = s.size();
  for (size_t i = 0; i < s.size(); ++i) {
    if (!starts_char(s[i])) continue;
    if (chars == kMaxQuoted) cut = i;
    ++chars;
  }
  if (chars <= kMaxQuoted) return "\"" + std::string(s) + "\"";
  return "\"" + std::string(s.substr(0, cut)) + "\u2026\" (" + std::to_string(chars) +
         " characters)";
}

std::string cite(std::string message, std::string_view value) {
  const std::string full = "\"" + std::string(value) + "\"";
  for (size_t pos = message.find(full); pos != std::string::npos;
       pos = message.find(full, pos + 1)) {
    const std::string q = quote(value);
    message.replace(pos, full.size(), q);
    pos += q.size() - 1;
  }
  return message;
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
  std::string out;
  for (const auto& i : items) {
    if (!out.empty()) out += sep;
    out += i;
  }
  return out;
}

// Optimal string alignment distance: Levenshtein plus adjacent transpositions ("hnp" -> "hpn").
int edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      const int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

std::optional<std::string> closest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  const std::string w = lower(word);
  // A typo is a few edits: one for short words, up to three for long ones.
  const int limit = std::clamp(static_cast<int>(w.size()) / 3, 1, 3);
  std::optional<std::string> best;
  int best_d = limit + 1;
  for (const auto& c : candidates) {
    // The distance is at least the difference in length: skip the quadratic table when that
    // alone rules a candidate out (a 1 MiB unknown key against short valid ones).
    const size_t diff = w.size() > c.size() ? w.size() - c.size() : c.size() - w.size();
    if (diff > static_cast<size_t>(limit)) continue;
    const int d = edit_distance(w, lower(c));
    if (d < best_d && d < static_cast<int>(std::max(w.size(), c.size()))) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

std::string suggest(std::string_view word, const std::vector<std::string>& candidates,
                    std::string_view what) {
  if (auto c = closest(word, candidates)) return "did you mean " + quote(*c) + "?";
  return std::string(what) + ": " + (candidates.empty() ? "(none)" : join(candidates));
}

void Diags::add(Loc at, std::string message) {
  if (at.line <= 0) at = Loc{1, 1};  // no place known: the top of the file, so every line has one
  items_.push_back({at, std::move(message)});
}

std::string Diags::text() const {
  std::vector<Item> sorted = items_;
  std::stable_sort(sorted.begin(), sorted.end(), [](const Item& a, const Item& b) {
    return std::pair(a.at.line, a.at.col) < std::pair(b.at.line, b.at.col);
  });
  std::string out;
  for (const auto& i : sorted) {
    if (!out.empty()) out += '\n';
    out +=
        file_ + ":" + std::to_string(i.at.line) + ":" + std::to_string(i.at.col) + ": " + i.message;
  }
  return out;
}

Table::Table(const toml::value& v, std::string context, std::string section,
             std::vector<std::string> keys, Diags& d)
    : v_(v),
      context_(std::move(context)),
      section_(std::move(section)),
      keys_(std::move(keys)),
      d_(d) {}

std::string Table::prefix(std::string_view key) const {
  return (context_.empty() ? "" : context_ + ": ") + std::string(key) + ": ";
}

const toml::value* Table::find(std::string_view key) const {
  if (!v_.is_table()) return nullptr;
  const auto& t = v_.as_table();
  auto it = t.find(std::string(key));
  return it == t.end() ? nullptr : &it->second;
}

Loc Table::loc(std::string_view key) const {
  const toml::value* x = find(key);
  return x ? loc_of(*x) : loc();
}

void Table::error(std::string_view key, std::string message) {
  d_.add(loc(key), prefix(key) + message);
}

void Table::error_at(Loc at, std::string_view key, std::string message) {
  d_.add(at, prefix(key) + message);
}

void Table::missing(std::string_view key, std::string_view why) {
  d_.add(loc(), prefix(key) + "missing" + (why.empty() ? "" : "; " + std::string(why)));
}

std::optional<std::string> Table::str(std::string_view key, bool required) {
  const toml::value* x = find(key);
  if (!x) {
    if (required) missing(key);
    return std::nullopt;
  }
  if (!x->is_string()) {
    error(key, "must be a string (got " + type_name(*x) + ")");
    return std::nullopt;
  }
  return x->as_string().str;
}

std::optional<int64_t> Table::integer(std::string_view key, bool required, int64_t lo, int64_t hi,
                                      std::string_view why_hi) {
  const toml::value* x = find(key);
  if (!x) {
    if (required) missing(key);
    return std::nullopt;
  }
  if (!x->is_integer()) {
    std::string m = "must be an integer (got " + type_name(*x) + ")";
    if (x->is_floating() && std::trunc(x->as_floating()) == x->as_floating())
      m += "; write " + number_text(x->as_floating()) + " without a decimal point";
    error(key, m);
    return std::nullopt;
  }
  const int64_t n = x->as_integer();
  if (n < lo) {
    error(key, "must be at least " + std::to_string(lo) + " (got " + std::to_string(n) + ")");
    return std::nullopt;
  }
  if (n > hi) {
    error(key, "must be at most " + std::to_string(hi) + " (got " + std::to_string(n) + ")" +
                   (why_hi.empty() ? "" : "; " + std::string(why_hi)));
    return std::nullopt;
  }
  return n;
}

std::optional<double> Table::number(std::string_view key, bool required, double lo, double hi,
                                    bool lo_open) {
  const toml::value* x = find(key);
  if (!x) {
    if (required) missing(key);
    return std::nullopt;
  }
  if (!x->is_integer() && !x->is_floating()) {
    error(key, "must be a number (got " + type_name(*x) + ")");
    return std::nullopt;
  }
  const double n = x->is_integer() ? static_cast<double>(x->as_integer()) : x->as_floating();
  if (std::isnan(n) || (lo_open ? n <= lo : n < lo)) {
    error(key, std::string(lo_open ? "must be greater than " : "must be at least ") +
                   number_text(lo) + " (got " + number_text(n) + ")");
    return std::nullopt;
  }
  if (n > hi) {
    error(key, "must be at most " + number_text(hi) + " (got " + number_text(n) + ")");
    return std::nullopt;
  }
  return n;
}

std::optional<bool> Table::boolean(std::string_view key) {
  const toml::value* x = find(key);
  if (!x) return std::nullopt;
  if (!x->is_boolean()) {
    error(key, "must be true or false (got " + type_name(*x) + ")");
    return std::nullopt;
  }
  return x->as_boolean();
}

namespace {

// A unit-bearing value: a string parsed by `parse`; the integer 0 is also accepted.
template <class T, class Parse>
std::optional<T> unit_value(Table& t, std::string_view key, bool required, Parse parse,
                            std::string_view example) {
  const toml::value* x = t.find(key);
  if (!x) {
    if (required) t.missing(key);
    return std::nullopt;
  }
  if (x->is_integer() && x->as_integer() == 0) return parse("0").value();
  if (!x->is_string()) {
    t.error(key, "must be a string with a unit such as " + quote(example) + " (got " +
                     type_name(*x) + ")");
    return std::nullopt;
  }
  auto r = parse(x->as_string().str);
  if (!r) {
    t.error(key, cite(r.error().message, x->as_string().str));
    return std::nullopt;
  }
  return *r;
}

}  // namespace

std::optional<Rate> Table::rate(std::string_view key, bool required) {
  return unit_value<Rate>(*this, key, required, parse_rate, "400gbit");
}

std::optional<Duration> Table::duration(std::string_view key, bool required) {
  return unit_value<Duration>(*this, key, required, parse_duration, "25ms");
}

std::optional<double> Table::percent(std::string_view key, bool required) {
  const toml::value* x = find(key);
  if (x && (x->is_integer() || x->is_floating())) return number(key, required, 0, 100);
  return unit_value<double>(*this, key, required, parse_percent, "0.5%");
}

std::optional<uint64_t> Table::size(std::string_view key, bool required) {
  const toml::value* x = find(key);
  if (x && x->is_integer()) {
    auto n = integer(key, required, 0, INT64_MAX);
    return n ? std::optional<uint64_t>(static_cast<uint64_t>(*n)) : std::nullopt;
  }
  return unit_value<uint64_t>(*this, key, required, parse_size, "64M");
}

std::optional<std::vector<std::pair<std::string, Loc>>> Table::strings(std::string_view key,
                                                                       bool required, bool list) {
  const toml::value* x = find(key);
  if (!x) {
    if (required) missing(key);
    return std::nullopt;
  }
  std::vector<std::pair<std::string, Loc>> out;
  if (x->is_string()) {
    out.emplace_back(x->as_string().str, loc_of(*x));
    return out;
  }
  if (!x->is_array()) {
    error(key, std::string(list ? "must be a string or an array of strings" : "must be a string") +
                   " (got " + type_name(*x) + ")");
    return std::nullopt;
  }
  bool ok = true;
  for (const auto& e : x->as_array()) {
    if (e.is_string()) {
      out.emplace_back(e.as_string().str, loc_of(e));
    } else {
      error_at(loc_of(e), key, "each entry must be a string (got " + type_name(e) + ")");
      ok = false;
    }
  }
  if (!ok) return std::nullopt;
  return out;
}

bool Table::one_of(std::string_view key, const std::string& value,
                   const std::vector<std::string>& choices) {
  if (std::ranges::find(choices, value) != choices.end()) return true;
  error(key, quote(value) + " is not valid; " + suggest(value, choices, "use one of"));
  return false;
}

void Table::not_for(const std::vector<std::string>& keys, std::string_view reason) {
  for (const auto& k : keys)
    if (has(k)) error(k, std::string(reason));
}

void Table::finish() {
  if (!v_.is_table()) return;
  for (const auto& [k, x] : v_.as_table()) {
    if (std::ranges::find(keys_, k) != keys_.end()) continue;
    d_.add(key_loc(k, x),
           "unknown key " + quote(k) + " in " + section_ + "; " + suggest(k, keys_, "valid keys"));
  }
}

std::optional<std::string> name_problem(const std::string& name, size_t max_len, bool hyphens,
                                        std::string_view what, std::string_view why_len) {
  const std::string rule = std::string("use a lowercase letter followed by lowercase letters") +
                           (hyphens ? ", digits or '-'" : " or digits") +
                           (max_len ? ", " + std::to_string(max_len) + " characters at most" : "");
  if (name.empty()) return std::string(what) + " must not be empty; " + rule;
  bool ok = std::islower(static_cast<unsigned char>(name[0]));
  for (char c : name)
    ok = ok && (std::islower(static_cast<unsigned char>(c)) ||
                std::isdigit(static_cast<unsigned char>(c)) || (hyphens && c == '-'));
  if (!ok) return quote(name) + " is not a valid " + std::string(what) + "; " + rule;
  if (max_len && name.size() > max_len)
    return quote(name) + " is too long" +
           (name.size() > kMaxQuoted ? "" : " (" + std::to_string(name.size()) + " characters)") +
           "; at most " + std::to_string(max_len) +
           (why_len.empty() ? "" : ", " + std::string(why_len));
  return std::nullopt;
}

bool check_name(Table& t, std::string_view key, const std::string& name, size_t max_len,
                bool hyphens, std::string_view what, std::string_view why_len) {
  auto problem = name_problem(name, max_len, hyphens, what, why_len);
  if (problem) t.error(key, *problem);
  return !problem;
}

std::vector<const toml::value*> table_array(Table& top, std::string_view key) {
  std::vector<const toml::value*> out;
  const toml::value* v = top.find(key);
  if (!v) return out;
  if (!v->is_array()) {
    top.error(key, "must be an array of tables: write [[" + std::string(key) + "]], not [" +
                       std::string(key) + "] (got " + type_name(*v) + ")");
    return out;
  }
  for (const auto& e : v->as_array()) {
    if (e.is_table())
      out.push_back(&e);
    else
      top.error_at(loc_of(e), key, "each entry must be a table (got " + type_name(e) + ")");
  }
  return out;
}

}  // namespace tb::scenario::detail
