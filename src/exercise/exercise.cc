#include "exercise/exercise.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "core/paths.h"
#include "core/safe_file.h"
#include "lab/down.h"
#include "lab/state.h"

namespace tb::exercise {
namespace fs = std::filesystem;

namespace {

Result<SafeDir> session_dir(const std::string& lab) {
  auto root = SafeDir::open_root(state_root());
  if (!root) return std::unexpected(root.error());
  return root->sub(lab);
}

Status save_session(const Session& s) {
  auto dir = session_dir(s.lab);
  if (!dir) return std::unexpected(dir.error());
  nlohmann::json j{{"lab", s.lab}, {"exercise", s.exercise}, {"hints_shown", s.hints_shown}};
  return dir->write("session.json", j.dump(1) + "\n");
}

// The session of `lab` for `ex`: none, or another exercise's, is exit 2 naming what to do.
Result<Session> session_for(const Exercise& ex, const std::string& lab) {
  auto s = load_session(lab);
  if (!s) return std::unexpected(s.error());
  if (!*s)
    return bad_input("lab " + lab + " has no session of exercise " + std::to_string(ex.number) +
                     "; start it: testbedctl exercise start " + std::to_string(ex.number) +
                     (lab == lab_for(ex, "") ? "" : " --name " + lab));
  if ((*s)->exercise != ex.id)
    return bad_input("lab " + lab + " is doing exercise " + (*s)->exercise + ", not " + ex.id +
                     "; stop that one first or use another --name");
  return **s;
}

}  // namespace

std::string state_root() {
  return paths::roots().exercises;
}

std::string student_scenario(const std::string& lab) {
  return state_root() + "/" + lab + "/scenario.toml";
}

std::string lab_for(const Exercise& ex, const std::string& name) {
  if (!name.empty()) return name;
  return std::string("ex") + (ex.number < 10 ? "0" : "") + std::to_string(ex.number);
}

Result<std::optional<Session>> load_session(const std::string& lab) {
  const std::string path = state_root() + "/" + lab + "/session.json";
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<Session>{};
  auto text = read_text(path, "the exercise session");
  if (!text) return std::unexpected(text.error());
  auto j = nlohmann::json::parse(*text, nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return bad_input(path + ": not a session file (JSON); `testbedctl exercise stop` removes it");
  Session s;
  s.lab = j.value("lab", lab);
  s.exercise = j.value("exercise", "");
  s.hints_shown = j.value("hints_shown", 0);
  return std::optional<Session>{s};
}

Result<StartReport> start(const StartOptions& o) {
  auto ex = find_exercise(o.root, o.which);
  if (!ex) return std::unexpected(ex.error());
  TB_TRY(lab::require_root("exercise start"));
  StartReport rep;
  rep.ex = *ex;
  const std::string lab = lab_for(*ex, o.name);
  auto existing = load_session(lab);
  if (!existing) return std::unexpected(existing.error());
  if (*existing && (*existing)->exercise != ex->id)
    return bad_input("lab " + lab + " is doing exercise " + (*existing)->exercise +
                     "; stop it first (testbedctl exercise stop) or use another --name");
  auto st = lab::load_state(lab);
  if (st && !*existing)
    return bad_input("lab " + lab +
                     " is up and is not an exercise's; choose another --name or take it down");
  Session s = *existing ? **existing : Session{lab, ex->id, 0};
  if (o.reset) s.hints_shown = 0;
  rep.scenario_copy = student_scenario(lab);
  auto dir = session_dir(lab);
  if (!dir) return std::unexpected(dir.error());
  std::error_code ec;
  if (o.reset || !fs::exists(rep.scenario_copy, ec)) {
    auto text = read_text(ex->scenario_path(), "the exercise's scenario");
    if (!text) return std::unexpected(text.error());
    TB_TRY(dir->write("scenario.toml", *text));
  }
  // A file check's template (the student's measurements), kept like the scenario's copy.
  if (ex->check.measure == Measure::kFile &&
      (o.reset || !fs::exists(state_root() + "/" + lab + "/" + ex->check.file, ec))) {
    auto text = read_text(ex->dir + "/" + ex->check.file, "the measurements template");
    if (!text) return std::unexpected(text.error());
    TB_TRY(dir->write(ex->check.file, *text));
  }
  TB_TRY(save_session(s));
  if (st) {
    auto d = lab::take_down({lab});
    if (!d) return std::unexpected(d.error());
    rep.rebuilt = true;
  }
  lab::UpOptions up;
  up.scenario_path = rep.scenario_copy;
  up.plan.lab = lab;
  up.plan.shaping = o.shaping;
  up.plan.rdma = "none";
  up.progress = o.progress;
  auto r = lab::bring_up(up);
  if (!r) return std::unexpected(r.error());
  rep.up = std::move(*r);
  rep.session = s;
  return rep;
}

Result<HintReport> next_hint(const std::string& root, const std::string& which,
                             const std::string& name) {
  auto ex = find_exercise(root, which);
  if (!ex) return std::unexpected(ex.error());
  auto s = session_for(*ex, lab_for(*ex, name));
  if (!s) return std::unexpected(s.error());
  HintReport rep;
  rep.ex = *ex;
  if (s->hints_shown < static_cast<int>(ex->hints.size())) {
    rep.hint = ex->hints[static_cast<size_t>(s->hints_shown)];
    s->hints_shown += 1;
    rep.number = s->hints_shown;
    TB_TRY(save_session(*s));
  }
  rep.session = *s;
  return rep;
}

Result<StopReport> stop(const std::string& root, const std::string& which,
                        const std::string& name) {
  auto ex = find_exercise(root, which);
  if (!ex) return std::unexpected(ex.error());
  TB_TRY(lab::require_root("exercise stop"));
  const std::string lab = lab_for(*ex, name);
  auto s = load_session(lab);
  if (!s) return std::unexpected(s.error());
  if (*s && (*s)->exercise != ex->id)
    return bad_input("lab " + lab + " is doing exercise " + (*s)->exercise + ", not " + ex->id);
  if (!*s && lab::load_state(lab))
    return bad_input("lab " + lab + " is up and is not an exercise's; `testbedctl down " + lab +
                     "` takes it down");
  auto d = lab::take_down({lab});
  if (!d) return std::unexpected(d.error());
  std::error_code ec;
  fs::remove_all(state_root() + "/" + lab, ec);
  if (ec) return fail("remove " + state_root() + "/" + lab + ": " + ec.message());
  return StopReport{lab, d->was_up};
}

Result<CheckReport> check(const std::string& root, const std::string& which,
                          const std::string& name, const CheckTools& tools) {
  auto ex = find_exercise(root, which);
  if (!ex) return std::unexpected(ex.error());
  const std::string lab = lab_for(*ex, name);
  auto s = session_for(*ex, lab);
  if (!s) return std::unexpected(s.error());
  TB_TRY(lab::require_root("exercise check"));
  auto rep = measure(*ex, lab, student_scenario(lab), tools);
  if (!rep) return std::unexpected(rep.error());
  // A failed check reveals the next hint (and counts it as shown).
  if (rep->verdict == Verdict::kFail && s->hints_shown < static_cast<int>(ex->hints.size())) {
    rep->next_hint = ex->hints[static_cast<size_t>(s->hints_shown)];
    rep->next_hint_number = ++s->hints_shown;
    TB_TRY(save_session(*s));
  }
  return rep;
}

}  // namespace tb::exercise
