#include "core/extras.h"

#include <dlfcn.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace tb {
namespace {

constexpr const char* kFrrNeed = "[failover] mode = \"bfd\" (FRR's BGP + BFD on the routers)";

// One row per program or file; the groups are scripts/lib/packages.sh's.
constexpr auto kExtras = std::to_array<Extra>({
    {"iptables", ExtraKind::kProgram, "/usr/sbin:/sbin", "", "iptables", "",
     "the delay stage's NFQUEUE rules (kernels without netem)"},
    {"nft", ExtraKind::kProgram, "/usr/sbin:/sbin", "", "nftables", "",
     "random loss rules (nft numgen)"},
    {"libgvc.so.6", ExtraKind::kLibrary, "", "", "libgvc6", "",
     "the topology drawn in HTML reports (report.html)"},
    {"chart.min.js", ExtraKind::kFile, "/usr/share/javascript/chart.js/chart.min.js",
     "TESTBEDCTL_CHART_JS", "libjs-chart.js", "", "the charts in HTML reports (report.html)"},
    {"zebra", ExtraKind::kInDir, "/usr/lib/frr", "TESTBEDCTL_FRR_DIR", "frr", "frr", kFrrNeed},
    {"bgpd", ExtraKind::kInDir, "/usr/lib/frr", "TESTBEDCTL_FRR_DIR", "frr", "frr", kFrrNeed},
    {"bfdd", ExtraKind::kInDir, "/usr/lib/frr", "TESTBEDCTL_FRR_DIR", "frr", "frr", kFrrNeed},
    {"mpirun", ExtraKind::kProgram, "", "", "openmpi-bin", "launch",
     "launch --mpi (Open MPI's mpirun in rank 0's namespace)"},
    {"torch", ExtraKind::kFile, "/usr/lib/python3/dist-packages/torch/__init__.py", "",
     "python3-torch", "launch",
     "PyTorch under /usr/bin/python3 for launch's DDP jobs (tests/e2e/jobs/)"},
    {"srun", ExtraKind::kProgram, "", "", "slurm-client", "slurm",
     "scripts/tb-srun (a verb on every host of a lab, through Slurm)"},
    {"qemu-system-x86_64", ExtraKind::kProgram, "", "", "qemu-system-x86", "vm",
     "booting the lab VM (scripts/labvm)"},
    {"debootstrap", ExtraKind::kProgram, "/usr/sbin:/sbin", "", "debootstrap", "vm",
     "building the lab VM's image (scripts/labvm build)"},
    {"lintian", ExtraKind::kProgram, "", "", "lintian", "package",
     "checking the .deb (scripts/package)"},
});

std::optional<std::string> in_dirs(const std::string& dirs, std::string_view name) {
  std::istringstream in(dirs);
  for (std::string dir; std::getline(in, dir, ':');) {
    if (dir.empty()) continue;  // an empty entry would mean the working directory: never
    const std::string p = (std::filesystem::path(dir) / name).string();
    if (executable_file(p)) return std::filesystem::absolute(p).lexically_normal().string();
  }
  return std::nullopt;
}

std::string overridden(const Extra& e) {
  if (!e.env.empty())
    if (const char* v = std::getenv(std::string(e.env).c_str()); v && *v) return v;
  return std::string(e.where);
}

}  // namespace

bool executable_file(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(p.c_str(), X_OK) == 0;
}

std::span<const Extra> extras() {
  return kExtras;
}

const Extra* find_extra(std::string_view name) {
  for (const Extra& e : kExtras)
    if (e.name == name) return &e;
  return nullptr;
}

std::optional<std::string> locate(const Extra& e) {
  switch (e.kind) {
    case ExtraKind::kProgram: {
      const char* path = std::getenv("PATH");
      if (auto p = in_dirs(path ? path : "", e.name)) return p;
      return in_dirs(std::string(e.where), e.name);
    }
    case ExtraKind::kFile: {
      const std::string p = overridden(e);
      if (::access(p.c_str(), R_OK) == 0) return p;
      return std::nullopt;
    }
    case ExtraKind::kInDir:
      return in_dirs(overridden(e), e.name);
    case ExtraKind::kLibrary: {
      void* h = ::dlopen(std::string(e.name).c_str(), RTLD_LAZY | RTLD_LOCAL);
      if (!h) return std::nullopt;
      ::dlclose(h);
      return std::string(e.name);
    }
  }
  return std::nullopt;
}

std::string install_hint(const Extra& e) {
  return "install the Debian package " + std::string(e.package) +
         (e.group.empty() ? std::string(" (scripts/setup installs it)")
                          : " (scripts/setup --with " + std::string(e.group) + ")");
}

std::unexpected<Error> missing_extra(std::string_view who, const Extra& e,
                                     const std::string& detail) {
  return bad_input(std::string(who) + " needs " + std::string(e.name) + ": " + install_hint(e) +
                   (detail.empty() ? "" : "; " + detail));
}

Result<std::string> require_extra(std::string_view who, std::string_view name) {
  const Extra* e = find_extra(name);
  TB_CHECK(e != nullptr);
  if (auto p = locate(*e)) return *p;
  std::string looked;
  switch (e->kind) {
    case ExtraKind::kProgram:
      looked = "not found in PATH" + (e->where.empty() ? "" : " or " + std::string(e->where));
      break;
    case ExtraKind::kFile:
      looked = "no " + overridden(*e) +
               (e->env.empty() ? "" : " ($" + std::string(e->env) + " overrides the path)");
      break;
    case ExtraKind::kInDir:
      looked = "not executable in " + overridden(*e) +
               (e->env.empty() ? "" : " ($" + std::string(e->env) + " overrides the directory)");
      break;
    case ExtraKind::kLibrary:
      looked = "dlopen() did not find it";
      break;
  }
  return missing_extra(who, *e, looked);
}

}  // namespace tb
