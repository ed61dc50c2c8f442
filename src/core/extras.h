// The programs and files testbedctl uses at run time that come from a Debian package, and the
// package that installs each: one table, so every "needs X" message and doctor's list of extras
// name the same package and the same `scripts/setup` group (scripts/lib/packages.sh holds the
// groups; tests/unit/extras_test.cc checks that each package here is in the group named).
//
// A verb that finds one missing exits 2 before it builds or starts anything:
//   "launch --mpi needs mpirun: install the Debian package openmpi-bin (scripts/setup --with
//   launch)"
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "core/error.h"

namespace tb {

enum class ExtraKind {
  kProgram,  // looked up in PATH (then in `where`, a ':'-list of directories, when set)
  kFile,     // at `where`, or at $<env> when set
  kInDir,    // `name` in the directory `where`, or in $<env> when set
  kLibrary,  // a shared library dlopen() finds by `name`
};

struct Extra {
  std::string_view name;  // "mpirun", "bgpd", "libgvc.so.6", "chart.min.js"
  ExtraKind kind;
  std::string_view where;    // see ExtraKind
  std::string_view env;      // the environment variable that overrides `where`, or ""
  std::string_view package;  // the Debian package that installs it
  std::string_view group;    // its `scripts/setup --with` group; "" for the light set
  std::string_view needed_for;
};

// Every row, in a stable order (doctor lists them so).
std::span<const Extra> extras();

// The row named `name`; nullptr when there is none.
const Extra* find_extra(std::string_view name);

// A regular file this process may execute (what execvp would run).
bool executable_file(const std::string& path);

// Where `e` is on this host (an absolute path, or the library's name once dlopen() found it);
// nullopt when it is missing.
std::optional<std::string> locate(const Extra& e);

// "install the Debian package openmpi-bin (scripts/setup --with launch)"; for the light set
// "(scripts/setup installs it)".
std::string install_hint(const Extra& e);

// The exit-2 error "<who> needs <name>: install the Debian package P (scripts/setup ...)",
// with `detail` (what was looked at) after a "; " when given.
std::unexpected<Error> missing_extra(std::string_view who, const Extra& e,
                                     const std::string& detail = "");

// locate() or missing_extra(): the path of the extra `name` (a row of the table), or the
// exit-2 error naming its package.
Result<std::string> require_extra(std::string_view who, std::string_view name);

}  // namespace tb
