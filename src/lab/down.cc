#include "lab/down.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "apply/netlink_kernel.h"
#include "core/paths.h"
#include "core/userns.h"
#include "lab/lab.h"
#include "lab/up.h"
#include "plan/plan.h"
#include "scenario/loader.h"

namespace tb::lab {
namespace {

// "LAB|SCENARIO": a path to an existing file names the scenario's lab.
Result<std::string> resolve_lab(const std::string& target) {
  if (std::filesystem::is_regular_file(target)) {
    auto s = scenario::load(target);
    if (!s) return std::unexpected(s.error());
    return s->lab;
  }
  return target;
}

// The labs that have state or namespaces: namespaces are named tb-<lab>-<node>, and a lab name
// has no '-' (scenario/model.h), so the name says whose lock guards it (what is deleted is still
// chosen by owner marker).
std::set<std::string> known_labs(apply::Kernel& kernel) {
  std::set<std::string> labs;
  for (const auto& l : list_labs()) labs.insert(l);
  if (auto owned = kernel.owned_netns(plan::owner_marker("")))
    for (const auto& ns : *owned)
      if (ns.starts_with("tb-") && ns.find('-', 3) != std::string::npos)
        labs.insert(ns.substr(3, ns.find('-', 3) - 3));
  return labs;
}

// clean --all: lab by lab, each under its lock, so that a lab another testbedctl is building or
// changing is left alone (its lock is held) and named in the error once the others are clean.
// With no lab busy, a last sweep takes whatever still carries any lab's marker.
Result<CleanReport> clean_all(apply::Kernel& kernel) {
  CleanReport r;
  std::vector<std::string> busy;
  std::string errors;
  auto note = [&](const std::string& e) { errors += (errors.empty() ? "" : "; ") + e; };
  for (const auto& lab : known_labs(kernel)) {
    auto lock = LabLock::acquire(lab);
    if (!lock) {
      if (lock.error().sys_errno == EWOULDBLOCK)
        busy.push_back(lab);
      else
        note(lock.error().message);
      continue;
    }
    if (auto n = clean(lab, kernel))
      r.namespaces += *n;
    else
      note(n.error().message);
  }
  if (busy.empty()) {
    if (auto n = clean("", kernel))
      r.namespaces += *n;
    else
      note(n.error().message);
  }
  if (!errors.empty()) return fail(errors);
  if (!busy.empty()) {
    std::string names;
    for (const auto& b : busy) names += (names.empty() ? "" : ", ") + b;
    return std::unexpected(
        Error{"removed " + std::to_string(r.namespaces) + " namespaces; left lab(s) " + names +
                  " alone: another testbedctl holds their lock (an up or a change in progress); "
                  "run clean --all again once it is done",
              EWOULDBLOCK, kExitFailed});
  }
  return r;
}

}  // namespace

Result<DownReport> take_down(const DownOptions& o) {
  auto lab = resolve_lab(o.target);
  if (!lab) return std::unexpected(lab.error());
  TB_TRY(require_root("down"));
  auto st = load_state(*lab, StateParts::kBrief);
  if (!o.host.empty() && st && st->host != o.host)
    return bad_input(
        "down --host " + o.host + ": lab " + *lab + " here is " +
        (st->host.empty() ? std::string("a lab on one host") : "host " + st->host + "'s part") +
        "; run down --host " + o.host + " on host " + o.host);
  DownReport r{*lab, st.has_value()};
  apply::NetlinkKernel kernel;
  // Rootless, a name with neither state nor namespaces here is no lab of this user's (another
  // user's lab of that name lives in that user's namespaces): exit 2, as status and exec say.
  // Root's down stays idempotent.
  if (!st && paths::rootless() && !known_labs(kernel).contains(*lab))
    return bad_input(st.error().message);
  TB_TRY(down(*lab, kernel));
  return r;
}

Result<CleanReport> clean_up(const CleanOptions& o) {
  if (o.lab.empty() == !o.all) return bad_input("clean needs either a lab name or --all");
  TB_TRY(require_root("clean"));
  apply::NetlinkKernel kernel;
  if (o.all && !paths::rootless()) {
    // Root: its own labs, then every user's (each inside its keeper, as that user).
    auto own = clean_all(kernel);
    std::vector<UserClean> users;
    std::string errors;
    for (const auto& u : userns::users_runtimes()) {
      auto r = userns::as_user_in_keeper(u, [](int fd) {
        apply::NetlinkKernel k;
        int labs = 0, rc = 0;
        std::string why;
        for (const auto& lab : known_labs(k)) {
          if (auto d = down(lab, k))
            ++labs;
          else
            why += (why.empty() ? "" : "; ") + d.error().message;
        }
        int ns = 0;
        if (auto c = clean_all(k))
          ns = c->namespaces;
        else
          why += (why.empty() ? "" : "; ") + c.error().message;
        if (!why.empty()) rc = 1;
        const std::string text = std::to_string(labs) + " " + std::to_string(ns) + " " + why;
        return ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) ? rc : 1;
      });
      UserClean uc{u.user, 0, 0, ""};
      if (!r) {
        uc.error = r.error().message;
      } else if (!r->ran) {
        continue;
      } else {
        std::istringstream in(r->text);
        in >> uc.labs >> uc.namespaces;
        std::getline(in >> std::ws, uc.error);
        if (r->rc != 0 && uc.error.empty())
          uc.error = "exit " + std::to_string(r->rc) + " inside its keeper";
      }
      if (!uc.error.empty()) errors += (errors.empty() ? "" : "; ") + u.user + ": " + uc.error;
      users.push_back(std::move(uc));
    }
    if (!own) return std::unexpected(own.error());
    own->users = std::move(users);
    if (!errors.empty()) return fail("users' labs: " + errors);
    return own;
  }
  if (o.all) return clean_all(kernel);
  auto lock = LabLock::acquire(o.lab);
  if (!lock) return std::unexpected(lock.error());
  auto n = clean(o.lab, kernel);
  if (!n) return std::unexpected(n.error());
  return CleanReport{*n};
}

}  // namespace tb::lab
