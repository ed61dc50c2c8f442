// The `link` use case: change one link of a live lab in place — set its figures (merged into
// the ones in force), reset them to the scenario's, or take its carrier down or up
// (link_ops.h does the work; every change is an event). It lives in fault/ beside link_ops.h
// because fault/ depends on lab/, not the other way round.
// Order of refusals (all exit code 2): the options alone (check_change: `set` without a figure,
// a figure on reset/down/up, a rate the kernel cannot take), lab not up, no such link, a link
// with no end on this host (a lab over several hosts: it names the host that has it), not
// root, lab busy (its lock is held for the change). On a link between this host and another
// (a VXLAN tunnel) the change is this host's part (link_ops.h EndsHere). Not thread-safe.
#pragma once

#include <optional>
#include <string>

#include "core/error.h"
#include "lab/link_change.h"
#include "plan/topology.h"

namespace tb::fault {

enum class LinkAction { kSet, kReset, kDown, kUp };

struct LinkChangeOptions {
  std::string lab;
  LinkAction action = LinkAction::kSet;
  std::string a, b;          // the link's ends: node, or node:interface
  lab::FigureChange change;  // kSet: at least one figure
};

struct LinkChangeReport {
  std::string key;                               // "hz/tr:ec <-> bj/tr:ec"
  std::optional<plan::EmulatedFigures> figures;  // kSet, kReset: the figures now in force
  // A link between hosts changed from one of them: which end this host has and what is left to
  // the other (link_ops.h EndsHere::elsewhere); empty when both ends are here.
  std::string here, elsewhere;
};

// The options alone, before any lab is read (change_live_link calls it first).
Status check_change(const LinkChangeOptions& o);
Result<LinkChangeReport> change_live_link(const LinkChangeOptions& o);

}  // namespace tb::fault
