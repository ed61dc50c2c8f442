// CLI11 checks that run the project's own parsers (core/units.h) and name checks on a flag's
// text while the command line is parsed, before any verb runs: a bad value ends in exit 2 with
// "--FLAG: <what is wrong>; <what is valid>" (CLI11 adds the flag's name) before any lab is looked
// up or anything built. The ranges and names themselves live with the data they bound (bench
// counts in workload/bench.h, transport tunables in workload/transport.h, ...): these only hook
// them to a flag. Not thread-safe (CLI11 set-up).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <string>
#include <utility>

#include "core/units.h"
#include "plan/host.h"

namespace tb::cli {

// A check from any function of the text that returns a Result or a Status: its error message
// is the flag's message. `desc` is what --help shows after the type.
template <class Check>
CLI::Validator checked_by(Check check, std::string desc) {
  return CLI::Validator(
      [check](std::string& text) -> std::string {
        auto r = check(text);
        return r ? std::string() : r.error().message;
      },
      std::move(desc));
}

inline CLI::Validator whole_in(IntRange r) {
  return checked_by([r](const std::string& t) { return parse_whole(t, r); }, r.text());
}
inline CLI::Validator real_in(RealRange r) {
  return checked_by([r](const std::string& t) { return parse_real(t, r); }, r.text());
}
inline CLI::Validator size_text() {
  return checked_by([](const std::string& t) { return parse_size(t); }, "SIZE");
}
inline CLI::Validator duration_text() {
  return checked_by([](const std::string& t) { return parse_duration(t); }, "DURATION");
}
inline CLI::Validator rate_text() {
  return checked_by([](const std::string& t) { return parse_rate(t); }, "RATE");
}
inline CLI::Validator percent_text() {
  return checked_by([](const std::string& t) { return parse_percent(t); }, "PERCENT 0..100");
}

// A LAB argument: a lab name (it becomes part of paths under /run and of namespace names, so
// nothing else is looked up with it).
inline CLI::Validator lab_name() {
  return checked_by(plan::check_lab_name, "LAB (1-32 of a-z0-9, a letter first)");
}
// A TARGET argument: an existing scenario file, or else a lab name.
inline CLI::Validator scenario_file_or_lab_name() {
  return checked_by(
      [](const std::string& t) -> Status {
        if (std::filesystem::is_regular_file(t) || plan::check_lab_name(t)) return {};
        return bad_input("\"" + t +
                         "\" is neither a scenario file nor a lab name (1-32 lowercase letters or "
                         "digits, starting with a letter)");
      },
      "SCENARIO|LAB");
}

}  // namespace tb::cli
