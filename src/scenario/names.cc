#include "scenario/names.h"

#include <charconv>

namespace tb::scenario {

std::string gpu_node(const std::string& region, int server, int gpu) {
  return region + "/s" + std::to_string(server) + "/g" + std::to_string(gpu);
}
std::string server_node(const std::string& region, int server) {
  return region + "/s" + std::to_string(server);
}
std::string tor_node(const std::string& region, int rail, int side) {
  std::string n = region + "/tor" + std::to_string(rail);
  if (side == 1) n += "a";
  if (side == 2) n += "b";
  return n;
}
std::string spine_node(const std::string& region, int spine) {
  return region + "/spine" + std::to_string(spine);
}
std::string vpc_node(const std::string& region) {
  return region + "/vpc";
}
std::string tr_node(const std::string& region) {
  return region + "/tr";
}

std::string host_name(std::string_view node) {
  std::string s(node);
  for (char& c : s)
    if (c == '/') c = '-';
  return s;
}

std::string netns_name(std::string_view lab, std::string_view node) {
  return "tb-" + std::string(lab) + "-" + host_name(node);
}

std::string canonical_node(std::string_view name) {
  std::string s(name);
  for (char& c : s)
    if (c == '-') c = '/';
  return s;
}

namespace {

// Parses a decimal number at the front of `s`; advances `s` past it.
bool take_number(std::string_view& s, int& out) {
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  if (ec != std::errc() || p == s.data()) return false;
  s.remove_prefix(p - s.data());
  return true;
}

bool take(std::string_view& s, std::string_view word) {
  if (!s.starts_with(word)) return false;
  s.remove_prefix(word.size());
  return true;
}

}  // namespace

bool node_exists(const Scenario& sc, std::string_view name) {
  std::string canon = canonical_node(name);
  std::string_view s = canon;
  auto slash = s.find('/');
  if (slash == std::string_view::npos) return false;
  const Region* r = sc.region(std::string(s.substr(0, slash)));
  if (!r) return false;
  s.remove_prefix(slash + 1);
  int i = 0, j = 0;
  if (s == "vpc" || s == "tr") return true;
  if (take(s, "spine")) return take_number(s, i) && s.empty() && i >= 0 && i < r->spines;
  if (take(s, "tor")) {
    if (!take_number(s, i) || i < 0 || i >= sc.rails(*r)) return false;
    if (r->dual_tor) return s == "a" || s == "b";
    return s.empty();
  }
  if (take(s, "s")) {
    if (!take_number(s, i) || i < 0 || i >= r->servers) return false;
    if (s.empty()) return true;
    return take(s, "/g") && take_number(s, j) && s.empty() && j >= 0 && j < r->gpus_per_server;
  }
  return false;
}

}  // namespace tb::scenario
