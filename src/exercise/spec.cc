#include "exercise/spec.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <toml.hpp>

#include "core/units.h"
#include "scenario/reader.h"

#ifndef TB_EXERCISES_DIR
#define TB_EXERCISES_DIR "exercises"
#endif

namespace tb::exercise {
namespace fs = std::filesystem;
using scenario::detail::Diags;
using scenario::detail::Table;

Result<std::string> read_text(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return bad_input(path + ": cannot read " + what);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

namespace {

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// check.toml with every line that is not part of a [[fault]] table blanked: the faults keep
// their line numbers, so the scenario loader's errors about them point into check.toml.
std::string fault_lines(const std::string& text) {
  std::istringstream in(text);
  std::string out, line;
  bool in_fault = false;
  while (std::getline(in, line)) {
    const std::string t = trim(line);
    if (!t.empty() && t[0] == '[') in_fault = t.rfind("[[fault]]", 0) == 0;
    out += (in_fault ? line : "") + "\n";
  }
  return out;
}

int number_of(const std::string& id) {
  if (id.size() < 3 || !std::isdigit(static_cast<unsigned char>(id[0])) ||
      !std::isdigit(static_cast<unsigned char>(id[1])) || id[2] != '-')
    return -1;
  return (id[0] - '0') * 10 + (id[1] - '0');
}

}  // namespace

std::string exercises_root() {
  if (const char* e = std::getenv("TESTBEDCTL_EXERCISES"); e && *e) return e;
  return TB_EXERCISES_DIR;
}

Result<CheckSpec> parse_check(const std::string& text, const std::string& name) {
  toml::value root;
  try {
    std::istringstream in(text);
    root = toml::parse(in, name);
  } catch (const toml::exception& e) {
    return bad_input(name + ":" + std::to_string(e.location().line()) + ":" +
                     std::to_string(e.location().column()) + ": malformed TOML: " + e.what());
  } catch (const std::exception& e) {
    return bad_input(name + ": malformed TOML: " + e.what());
  }
  Diags d(name);
  CheckSpec c;
  Table top(root, "", "the top level", {"check", "target", "fault"}, d);
  const toml::value* cv = top.find("check");
  const toml::value* tv = top.find("target");
  if (!cv || !cv->is_table()) {
    d.add(scenario::Loc{1, 1},
          "check: missing; check.toml starts with a [check] table: measure = \"bench\" or \"run\"");
    top.finish();
    return bad_input(d.text());
  }
  Table ct(*cv, "check", "[check]",
           {"measure", "workload", "op", "bytes", "iters", "warmup", "ports", "rounds", "size",
            "settle", "file", "pairs"},
           d);
  const auto measure = ct.str("measure", true);
  if (measure && ct.one_of("measure", *measure, {"bench", "run", "file"}))
    c.measure = *measure == "run"    ? Measure::kRun
                : *measure == "file" ? Measure::kFile
                                     : Measure::kBench;
  const bool bench = c.measure == Measure::kBench;
  if (c.measure == Measure::kFile) {
    if (auto f = ct.str("file", true)) {
      if (f->empty() || f->find('/') != std::string::npos || (*f)[0] == '.')
        ct.error("file", "\"" + *f + "\" must be a file name in the exercise's directory (no '/')");
      else
        c.file = *f;
    }
    if (const toml::value* pv = ct.find("pairs")) {
      bool ok = pv->is_array() && !pv->as_array().empty();
      if (ok)
        for (const auto& e : pv->as_array()) {
          if (!e.is_array() || e.as_array().size() != 2 || !e.as_array()[0].is_string() ||
              !e.as_array()[1].is_string()) {
            ok = false;
            break;
          }
          c.pairs.emplace_back(e.as_array()[0].as_string().str, e.as_array()[1].as_string().str);
        }
      if (!ok) ct.error("pairs", "must be a non-empty array of [\"node\", \"node\"] pairs of GPUs");
    } else {
      ct.missing("pairs", "the GPU pairs the student measures");
    }
    ct.not_for({"workload", "op", "bytes", "iters", "warmup", "ports", "rounds", "size", "settle"},
               "not for measure = \"file\"");
  } else {
    if (auto w = ct.str("workload", true)) c.workload = *w;
    ct.not_for({"file", "pairs"}, "only for measure = \"file\"");
  }
  if (bench) {
    if (auto op = ct.str("op"); op && ct.one_of("op", *op,
                                                {"allreduce", "allgather", "reducescatter",
                                                 "broadcast", "reduce", "alltoall", "sendrecv"}))
      c.op = *op;
    if (auto b = ct.size("bytes")) {
      if (*b < 4)
        ct.error("bytes", "must be at least 4 (got " + std::to_string(*b) + ")");
      else
        c.bytes = *b;
    }
    if (auto n = ct.integer("iters", false, 1, 1000)) c.iters = static_cast<int>(*n);
    if (auto n = ct.integer("warmup", false, 0, 1000)) c.warmup = static_cast<int>(*n);
    if (auto p = ct.str("ports"); p && ct.one_of("ports", *p, {"route", "spread"}))
      c.spread_ports = *p == "spread";
    if (auto n = ct.integer("rounds", false, 1, 9)) {
      if (*n % 2 == 0)
        ct.error("rounds", "must be odd, so that a majority decides (got " + std::to_string(*n) +
                               "): 1, 3, 5, 7 or 9");
      else
        c.rounds = static_cast<int>(*n);
    }
    ct.not_for({"size", "settle"}, "only for measure = \"run\"");
  } else if (c.measure == Measure::kRun) {
    if (auto s = ct.size("size")) {
      if (*s < 4)
        ct.error("size", "must be at least 4 (got " + std::to_string(*s) + ")");
      else
        c.size = *s;
    }
    if (auto d = ct.duration("settle")) {
      if (d->ns < 100'000'000 || d->ns > 600'000'000'000)
        ct.error("settle", "must be 100ms to 600s (got " + format_duration(*d) +
                               "): a check is meant to take seconds");
      else
        c.settle_ms = static_cast<int>(d->ns / 1'000'000);
    }
    ct.not_for({"op", "bytes", "iters", "warmup", "ports", "rounds"},
               "only for measure = \"bench\"");
  }
  ct.finish();

  bool fault_targets = false;  // a run's stall, detection or recovery target
  bool no_target = !tv || !tv->is_table();
  if (!tv || !tv->is_table()) {
    d.add(ct.loc(), "target: missing; a [target] table says what the measurement must reach");
  } else {
    Table tt(*tv, "target", "[target]",
             {"min_busbw_fraction", "of", "max_ecmp_share", "max_control_p99_ms", "max_stall_ms",
              "max_detection_ms", "max_recovery_ms", "max_gold_p99_ms", "checkpoint_on_time",
              "tolerance", "delay_slack_us"},
             d);
    if (c.measure == Measure::kFile) {
      if (auto t = tt.number("tolerance", false, 0, 1, true)) c.tolerance = *t;
      if (auto t = tt.number("delay_slack_us", false, 0, 1e6)) c.delay_slack_us = *t;
      tt.not_for(
          {"min_busbw_fraction", "of", "max_ecmp_share", "max_control_p99_ms", "max_stall_ms",
           "max_detection_ms", "max_recovery_ms", "max_gold_p99_ms", "checkpoint_on_time"},
          "not for measure = \"file\"");
    } else if (bench) {
      // A bench judges busbw, the control probe, or both: min_busbw_fraction is required
      // unless max_control_p99_ms is there.
      c.max_control_p99_ms = tt.number("max_control_p99_ms", false, 0, 1e6, true);
      c.min_busbw_fraction =
          tt.number("min_busbw_fraction", !tt.has("max_control_p99_ms"), 0, 10, true);
      if (auto of = tt.str("of"); of && tt.one_of("of", *of, {"rail", "frontend", "nic"}))
        c.of_tier = *of;
      c.max_ecmp_share = tt.number("max_ecmp_share", false, 0, 1, true);
      tt.not_for({"max_stall_ms", "max_detection_ms", "max_recovery_ms", "max_gold_p99_ms",
                  "checkpoint_on_time", "tolerance", "delay_slack_us"},
                 "only for measure = \"run\" (stall, detection, recovery, gold p99, checkpoint "
                 "on time) or \"file\"");
    } else {
      c.max_stall_ms = tt.number("max_stall_ms", false, 0, 1e9);
      c.max_detection_ms = tt.number("max_detection_ms", false, 0, 1e9);
      c.max_recovery_ms = tt.number("max_recovery_ms", false, 0, 1e9);
      c.max_gold_p99_ms = tt.number("max_gold_p99_ms", false, 0, 1e9, true);
      if (auto b = tt.boolean("checkpoint_on_time")) {
        if (!*b)
          tt.error("checkpoint_on_time",
                   "false judges nothing; write true (every replication after the seed on time) "
                   "or leave it out");
        else
          c.checkpoint_on_time = true;
      }
      fault_targets =
          tt.has("max_stall_ms") || tt.has("max_detection_ms") || tt.has("max_recovery_ms");
      no_target = !fault_targets && !tt.has("max_gold_p99_ms") && !tt.has("checkpoint_on_time");
      if (no_target)
        d.add(tt.loc(),
              "target: a run needs at least one of max_stall_ms, max_detection_ms, "
              "max_recovery_ms, max_gold_p99_ms, checkpoint_on_time");
      tt.not_for({"min_busbw_fraction", "of", "max_ecmp_share", "max_control_p99_ms", "tolerance",
                  "delay_slack_us"},
                 "only for measure = \"bench\" or \"file\"");
    }
    tt.finish();
  }

  if (top.has("fault")) {
    if (c.measure != Measure::kRun)
      top.error("fault", "a timeline is only for measure = \"run\"");
    else
      c.faults_text = fault_lines(text);
  } else if (c.measure == Measure::kRun && (fault_targets || no_target)) {
    d.add(ct.loc(),
          "fault: missing; max_stall_ms, max_detection_ms and max_recovery_ms measure a fault: "
          "they need a timeline, at least one [[fault]]");
  }
  top.finish();
  if (!d.empty()) return bad_input(d.text());
  return c;
}

Status parse_task(const std::string& text, const std::string& name, Exercise& ex) {
  std::istringstream in(text);
  std::string line;
  bool in_hint = false;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    if (ex.title.empty() && line.rfind("# ", 0) == 0) {
      ex.title = trim(line.substr(2));
    }
    if (line.rfind("## Hint", 0) == 0) {
      in_hint = true;
      ex.hints.push_back({trim(line.substr(3)), ""});
      continue;
    }
    if (in_hint && line.rfind("## ", 0) == 0) in_hint = false;  // a section after the hints
    if (in_hint)
      ex.hints.back().text += line + "\n";
    else if (ex.hints.empty())
      ex.sheet += line + "\n";
  }
  for (auto& h : ex.hints) h.text = trim(h.text) + "\n";
  if (ex.title.empty())
    return bad_input(name + ":1:1: task sheet: no title; its first heading is \"# <title>\"");
  if (ex.hints.empty())
    return bad_input(name + ":" + std::to_string(n) +
                     ":1: task sheet: no hints; add \"## Hint 1\" (and more) sections at the end");
  return {};
}

Result<Exercise> load_exercise(const std::string& dir_in) {
  Exercise ex;
  ex.dir = fs::absolute(dir_in).lexically_normal().string();
  if (!ex.dir.empty() && ex.dir.back() == '/') ex.dir.pop_back();
  ex.id = fs::path(ex.dir).filename().string();
  ex.number = number_of(ex.id);
  if (ex.number < 0)
    return bad_input(ex.dir + ": an exercise directory is named NN-slug (two digits, '-', a name)");
  if (!fs::is_regular_file(ex.scenario_path()))
    return bad_input(ex.scenario_path() + ": missing; every exercise has its starting scenario");
  auto task = read_text(ex.task_path(), "the task sheet");
  if (!task) return std::unexpected(task.error());
  TB_TRY(parse_task(*task, ex.task_path(), ex));
  const std::string check_path = ex.dir + "/check.toml";
  auto check = read_text(check_path, "the checker's spec");
  if (!check) return std::unexpected(check.error());
  auto c = parse_check(*check, check_path);
  if (!c) return std::unexpected(c.error());
  ex.check = std::move(*c);
  if (ex.check.measure == Measure::kFile && !fs::is_regular_file(ex.dir + "/" + ex.check.file))
    return bad_input(check_path + ": check: file: " + ex.dir + "/" + ex.check.file +
                     " is missing; it is the template `start` copies for the student");
  return ex;
}

Result<std::vector<Exercise>> list_exercises(const std::string& root) {
  std::error_code ec;
  if (!fs::is_directory(root, ec))
    return bad_input(root +
                     ": no exercises directory here; set TESTBEDCTL_EXERCISES to the "
                     "repository's exercises/");
  std::vector<std::string> dirs;
  for (const auto& e : fs::directory_iterator(root, ec))
    if (e.is_directory() && number_of(e.path().filename().string()) >= 0)
      dirs.push_back(e.path().string());
  std::sort(dirs.begin(), dirs.end());
  std::vector<Exercise> out;
  for (const auto& d : dirs) {
    auto ex = load_exercise(d);
    if (!ex) return std::unexpected(ex.error());
    out.push_back(std::move(*ex));
  }
  return out;
}

Result<Exercise> find_exercise(const std::string& root, const std::string& which) {
  auto all = list_exercises(root);
  if (!all) return std::unexpected(all.error());
  int n = -1;
  if (!which.empty() && std::all_of(which.begin(), which.end(), ::isdigit) && which.size() <= 3)
    n = std::stoi(which);
  std::string valid;
  for (const auto& e : *all) {
    if (e.id == which || e.number == n) return e;
    valid += (valid.empty() ? "" : ", ") + std::to_string(e.number) + " (" + e.id + ")";
  }
  return bad_input("exercise \"" + which + "\": no such exercise in " + root + "; use one of " +
                   (valid.empty() ? std::string("none (the directory is empty)") : valid));
}

}  // namespace tb::exercise
