#include "congestion/control.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>

namespace tb::congestion {

using nlohmann::json;

json to_json(const ControlDoc& d) {
  json storms = json::array();
  for (const auto& p : d.storms) storms.push_back({{"port", p}});
  return {{"generation", d.generation}, {"storms", storms}};
}

Result<ControlDoc> control_from_json(const json& j, const std::string& where) {
  if (!j.is_object())
    return bad_input(where + ": must be a JSON object {\"generation\": N, \"storms\": [...]}");
  for (const auto& [key, v] : j.items())
    if (key != "generation" && key != "storms")
      return bad_input(where + ": unknown key \"" + key + "\"; valid: generation, storms");
  ControlDoc d;
  auto g = j.find("generation");
  if (g == j.end() || !g->is_number_unsigned())
    return bad_input(where + ": generation: must be a whole number >= 0");
  d.generation = g->get<uint64_t>();
  if (auto s = j.find("storms"); s != j.end()) {
    if (!s->is_array()) return bad_input(where + ": storms: must be an array of {\"port\": ...}");
    for (size_t i = 0; i < s->size(); ++i) {
      const json& x = (*s)[i];
      const std::string at = where + ": storms[" + std::to_string(i) + "]";
      if (!x.is_object() || !x.contains("port") || !x["port"].is_string() ||
          x["port"].get<std::string>().empty())
        return bad_input(at + ".port: must be a string naming a polled port, e.g. " +
                         "\"dc/tor0:s4g0\"");
      if (x.size() != 1) return bad_input(at + ": only \"port\" is valid here");
      d.storms.push_back(x["port"].get<std::string>());
    }
  }
  std::sort(d.storms.begin(), d.storms.end());
  d.storms.erase(std::unique(d.storms.begin(), d.storms.end()), d.storms.end());
  return d;
}

Result<ControlDoc> read_control(const std::string& path) {
  std::ifstream in(path);
  if (!in) return ControlDoc{};
  auto j = json::parse(in, nullptr, false);
  if (j.is_discarded()) return bad_input(path + ": not JSON");
  return control_from_json(j, path);
}

ControlDoc with_storms(ControlDoc d, const std::vector<std::string>& ports, bool on) {
  for (const auto& p : ports) {
    auto it = std::lower_bound(d.storms.begin(), d.storms.end(), p);
    const bool there = it != d.storms.end() && *it == p;
    if (on && !there) d.storms.insert(it, p);
    if (!on && there) d.storms.erase(it);
  }
  ++d.generation;
  return d;
}

}  // namespace tb::congestion
