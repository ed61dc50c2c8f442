// core/extras.h: the table of optional programs and files, their Debian packages and the
// scripts/setup groups; each package is in the group scripts/lib/packages.sh gives it.
#include "core/extras.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "capability/capabilities.h"
#include "report/doctor.h"
#include "temp_dir.h"

namespace tb {
namespace {

using testing_util::TempDir;

// scripts/lib/packages.sh's arrays as bash reads them: "light" and each group -> its packages.
std::map<std::string, std::set<std::string>> package_groups() {
  const std::string cmd = std::string("bash -c 'source ") + TB_SOURCE_DIR +
                          "/scripts/lib/packages.sh && for g in light \"${tb_pkg_groups[@]}\"; "
                          "do n=\"tb_pkg_$g[@]\"; echo \"$g ${!n}\"; done'";
  std::map<std::string, std::set<std::string>> out;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return out;
  std::string text;
  std::array<char, 4096> buf{};
  for (size_t n; (n = std::fread(buf.data(), 1, buf.size(), p)) > 0;) text.append(buf.data(), n);
  ::pclose(p);
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::string group, pkg;
    words >> group;
    while (words >> pkg) out[group].insert(pkg);
  }
  return out;
}

// Sets an environment variable for one scope, and puts the old value back.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void write_file(const std::string& path, mode_t mode) {
  std::ofstream(path) << "#!/bin/sh\n";
  ::chmod(path.c_str(), mode);
}

TEST(Extras, EveryPackageIsInTheSetupGroupNamed) {
  const auto groups = package_groups();
  ASSERT_TRUE(groups.contains("light")) << "scripts/lib/packages.sh did not source";
  std::set<std::string_view> names;
  for (const Extra& e : extras()) {
    EXPECT_TRUE(names.insert(e.name).second) << e.name << " twice";
    EXPECT_FALSE(e.package.empty()) << e.name;
    EXPECT_FALSE(e.needed_for.empty()) << e.name;
    const std::string group = e.group.empty() ? "light" : std::string(e.group);
    ASSERT_TRUE(groups.contains(group)) << e.name << ": no group " << group;
    EXPECT_TRUE(groups.at(group).contains(std::string(e.package)))
        << e.name << ": " << e.package << " is not in scripts/lib/packages.sh's " << group;
    EXPECT_EQ(find_extra(e.name), &e);
  }
  EXPECT_EQ(find_extra("no-such-program"), nullptr);
}

TEST(Extras, MessagesNameThePackageAndTheSetupGroup) {
  EXPECT_EQ(install_hint(*find_extra("mpirun")),
            "install the Debian package openmpi-bin (scripts/setup --with launch)");
  EXPECT_EQ(install_hint(*find_extra("chart.min.js")),
            "install the Debian package libjs-chart.js (scripts/setup installs it)");
  const Error e = missing_extra("launch --mpi", *find_extra("mpirun"), "not found in PATH").error();
  EXPECT_EQ(e.exit_code, kExitBadInput);
  EXPECT_EQ(e.message,
            "launch --mpi needs mpirun: install the Debian package openmpi-bin (scripts/setup "
            "--with launch); not found in PATH");
}

TEST(Extras, AProgramIsLookedUpInPath) {
  TempDir with, without;
  write_file(with.path() + "/mpirun", 0755);
  write_file(without.path() + "/mpirun", 0644);  // there, but not executable
  {
    ScopedEnv path("PATH", without.path() + ":" + with.path());
    EXPECT_EQ(locate(*find_extra("mpirun")), with.path() + "/mpirun");
    EXPECT_EQ(require_extra("launch --mpi", "mpirun").value_or(""), with.path() + "/mpirun");
  }
  ScopedEnv path("PATH", without.path());
  EXPECT_EQ(locate(*find_extra("mpirun")), std::nullopt);
  auto r = require_extra("launch --mpi", "mpirun");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().exit_code, kExitBadInput);
  EXPECT_NE(r.error().message.find("openmpi-bin"), std::string::npos) << r.error().message;
}

TEST(Extras, FrrDaemonsAreLookedUpInTheirDirectory) {
  TempDir dir;
  ScopedEnv frr("TESTBEDCTL_FRR_DIR", dir.path());
  EXPECT_EQ(locate(*find_extra("bgpd")), std::nullopt);
  auto r = require_extra("[failover] mode = \"bfd\"", "bgpd");
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("install the Debian package frr (scripts/setup --with frr)"),
            std::string::npos)
      << r.error().message;
  write_file(dir.path() + "/bgpd", 0755);
  EXPECT_EQ(locate(*find_extra("bgpd")), dir.path() + "/bgpd");
}

TEST(Extras, AFileIsReadWhereItsVariableSays) {
  TempDir dir;
  {
    ScopedEnv js("TESTBEDCTL_CHART_JS", dir.path() + "/chart.min.js");
    EXPECT_EQ(locate(*find_extra("chart.min.js")), std::nullopt);
    write_file(dir.path() + "/chart.min.js", 0644);
    EXPECT_EQ(locate(*find_extra("chart.min.js")), dir.path() + "/chart.min.js");
  }
}

TEST(Extras, ALibraryIsWhatDlopenFinds) {
  EXPECT_EQ(locate(Extra{"libc.so.6", ExtraKind::kLibrary, "", "", "libc6", "", "x"}), "libc.so.6");
  EXPECT_EQ(locate(Extra{"libtb-no-such.so.0", ExtraKind::kLibrary, "", "", "x", "", "x"}),
            std::nullopt);
}

TEST(Extras, DoctorListsEveryExtraWithItsPackageAndGroup) {
  const auto r = capability::make_report("6.1.0-test", {});
  ASSERT_EQ(r.extras.size(), extras().size());
  const std::string text = report::doctor_text(r);
  for (const Extra& e : extras()) {
    EXPECT_NE(text.find(std::string(e.name)), std::string::npos) << e.name;
    EXPECT_NE(text.find(std::string(e.package)), std::string::npos) << e.package;
  }
  EXPECT_NE(text.find("--with launch"), std::string::npos) << text;
  const auto j = capability::to_json(r);
  ASSERT_EQ(j["extras"].size(), extras().size());
  EXPECT_EQ(j["extras"][0]["name"], std::string(extras()[0].name));
  EXPECT_EQ(j["extras"][0]["package"], std::string(extras()[0].package));
}

}  // namespace
}  // namespace tb
