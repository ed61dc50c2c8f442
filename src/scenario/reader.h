// Internal to the scenario loader: the pieces every section reader shares.
//
//   Diags      problems found in one file, each at a line and column; printed sorted by place
//   Table      a TOML table being read: typed getters that record a problem instead of throwing,
//              remember which keys were read, and report the rest as unknown keys
//   LoadState  what the section readers build up and share while one file is loaded
//
// Not part of the scenario room's interface (use loader.h). Plain values used by one thread.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml.hpp>

#include "scenario/model.h"

namespace tb::scenario::detail {

// Where a TOML value was written, the whole line it starts on, and its own text (views into the
// parsed source, valid while the value is). toml11's own location() counts the newlines from the
// top of the file and copies the line on every call: once per value, that made loading a file
// of many small values quadratic (found by tests/fuzz). This looks the place up in an index of
// line starts made once per file (per thread). nullopt for a value not read from text.
struct Place {
  Loc at;
  std::string_view line;
  std::string_view token;
};
std::optional<Place> place_of(const toml::value& v);
// Where a TOML value was written (place_of, else toml11's location()).
Loc loc_of(const toml::value& v);
// "an integer", "a string", ... for messages.
std::string type_name(const toml::value& v);
// "\"x\""; a value longer than kMaxQuoted characters is cut there and its length added:
// "\"xxx…\" (2097152 characters)".
inline constexpr size_t kMaxQuoted = 60;
std::string quote(std::string_view s);
// `message` (from a parser that quotes `value` in full) with "\"value\"" replaced by
// quote(value).
std::string cite(std::string message, std::string_view value);
// "a, b, c".
std::string join(const std::vector<std::string>& items, std::string_view sep = ", ");

int edit_distance(std::string_view a, std::string_view b);
// The candidate closest to `word` by edit distance, if close enough to be a likely typo.
std::optional<std::string> closest(std::string_view word,
                                   const std::vector<std::string>& candidates);
// "did you mean \"x\"?" when one is close, else "<what>: a, b, c".
std::string suggest(std::string_view word, const std::vector<std::string>& candidates,
                    std::string_view what);

// Problems in one file. Messages are "FIELD: PROBLEM; VALID"; text() prefixes "FILE:LINE:COL: ".
class Diags {
 public:
  explicit Diags(std::string file) : file_(std::move(file)) {}
  void add(Loc at, std::string message);
  bool empty() const { return items_.empty(); }
  // All problems sorted by place (then in the order found), one per line.
  std::string text() const;

 private:
  struct Item {
    Loc at;
    std::string message;
  };
  std::string file_;
  std::vector<Item> items_;
};

// One TOML table being read. `context` prefixes every problem ("region \"hz\""); `section` names
// the table in unknown-key messages ("[[region]]"); `keys` are all keys it may hold.
class Table {
 public:
  Table(const toml::value& v, std::string context, std::string section,
        std::vector<std::string> keys, Diags& d);

  void set_context(std::string context) { context_ = std::move(context); }
  const std::string& context() const { return context_; }
  Loc loc() const { return loc_of(v_); }
  // Where `key`'s value was written; the table's place when absent.
  Loc loc(std::string_view key) const;
  const toml::value* find(std::string_view key) const;
  bool has(std::string_view key) const { return find(key) != nullptr; }

  // "CONTEXT: KEY: message" at the key's value.
  void error(std::string_view key, std::string message);
  // "CONTEXT: KEY: message" at `at` (an element of the key's array, say).
  void error_at(Loc at, std::string_view key, std::string message);
  // "CONTEXT: KEY: missing; why" at the table.
  void missing(std::string_view key, std::string_view why = "");

  // Each getter returns nullopt when the key is absent (a problem if `required`) or its value
  // is wrong (always a problem).
  std::optional<std::string> str(std::string_view key, bool required = false);
  std::optional<int64_t> integer(std::string_view key, bool required, int64_t lo, int64_t hi,
                                 std::string_view why_hi = "");
  // Integer or float; `lo_open`: the value must be greater than lo, not equal.
  std::optional<double> number(std::string_view key, bool required, double lo, double hi,
                               bool lo_open = false);
  std::optional<bool> boolean(std::string_view key);
  std::optional<Rate> rate(std::string_view key, bool required = false);
  std::optional<Duration> duration(std::string_view key, bool required = false);
  std::optional<double> percent(std::string_view key, bool required = false);  // also a number
  std::optional<uint64_t> size(std::string_view key, bool required = false);   // also an integer
  // A string, or (when `list`) an array of strings; each with where it was written.
  std::optional<std::vector<std::pair<std::string, Loc>>> strings(std::string_view key,
                                                                  bool required, bool list);
  // Checks `value` against `choices`; reports and returns false when it is not one of them.
  bool one_of(std::string_view key, const std::string& value,
              const std::vector<std::string>& choices);

  // Reports each of `keys` that is present: "KEY: <reason>".
  void not_for(const std::vector<std::string>& keys, std::string_view reason);
  // Reports every key not among the table's keys, with the closest valid key.
  void finish();

 private:
  const toml::value& v_;
  std::string context_;
  std::string section_;
  std::vector<std::string> keys_;
  Diags& d_;
  std::string prefix(std::string_view key) const;
};

// What is wrong with a name, or nullopt: [a-z] then [a-z0-9] (and '-' when `hyphens`), at most
// `max_len` characters (0 = no limit). `what` names the thing ("region name"); `why_len` says
// why the limit exists.
std::optional<std::string> name_problem(const std::string& name, size_t max_len, bool hyphens,
                                        std::string_view what, std::string_view why_len = "");
// The same, reported against `key` of `t`; true when the name is fine.
bool check_name(Table& t, std::string_view key, const std::string& name, size_t max_len,
                bool hyphens, std::string_view what, std::string_view why_len = "");

// The tables of an array of tables (`[[region]]`); reports a value of another shape.
std::vector<const toml::value*> table_array(Table& top, std::string_view key);

// Shared while one file is loaded.
struct LoadState {
  Scenario& s;
  Diags& d;
  std::map<std::string, LinkProfile> declared;  // [profiles.*], even those with errors
  std::set<std::string> unsure_regions;         // node sets unknown after errors: skip checks
  // Profile names regions and WAN links refer to, checked once all are read.
  struct ProfileRef {
    std::string name;
    Loc at;
    std::string field;  // "region \"hz\": rail"
  };
  std::vector<ProfileRef> profile_refs;
};

// Section readers, in the order the loader calls them.
void read_profiles(Table& top, LoadState& st);
void read_regions(Table& top, LoadState& st);
void read_wans(Table& top, LoadState& st);
void read_hosts(Table& top, LoadState& st);
void read_vxlan(Table& top, LoadState& st);
void resolve_profiles(LoadState& st);
void read_workloads(Table& top, LoadState& st);
void read_faults(Table& top, LoadState& st);

// Node references ("hz/s0/g1" or "hz-s0-g1").
enum class NodeClass { kNone, kGpu, kServer, kTor, kSpine, kVpc, kTr };
// What the canonical `node` names, or kNone when it does not exist in the scenario.
NodeClass node_class(const Scenario& s, const std::string& node);
// Why `node` does not exist, with the closest existing name ("no node ...; did you mean ...").
std::string explain_missing_node(const Scenario& s, const std::string& node);
// The region part of a node name ("hz" of "hz/s0/g1").
std::string region_of(const std::string& node);
// "no region named \"x\"; did you mean \"y\"?" for a region that does not exist.
std::string explain_missing_region(const Scenario& s, const std::string& name);

}  // namespace tb::scenario::detail
