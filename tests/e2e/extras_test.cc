// A verb whose optional package is missing exits 2 naming the Debian package and the
// scripts/setup group (core/extras.h), before it builds or starts anything. Each test hides the
// program: PATH narrowed to an empty directory, or FRR's directory pointed at one.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <set>
#include <string>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

class Extras : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/tb-e2e-extras-XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    empty_ = dir_ + "/empty";
    std::filesystem::create_directory(empty_);
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  // A directory of links to every program in the usual bin directories but `hidden`: a PATH
  // where only those are missing.
  std::string path_without(const std::set<std::string>& hidden) {
    const std::string d = dir_ + "/path";
    std::filesystem::create_directory(d);
    std::error_code ec;
    for (const char* bin : {"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"})
      for (const auto& e : std::filesystem::directory_iterator(bin, ec)) {
        const std::string n = e.path().filename();
        if (!hidden.contains(n)) std::filesystem::create_symlink(e.path(), d + "/" + n, ec);
      }
    return d;
  }
  std::string dir_, empty_;
};

TEST_F(Extras, LaunchMpiWithoutMpirunNamesOpenMpiBeforeReadingTheLab) {
  // No lab of this name exists: the missing mpirun is what is reported, first.
  auto r = sh("PATH=" + empty_ + " " + tbctl() + " launch " + unique_lab("xmpi") +
              " --mpi -- /bin/true");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("testbedctl: launch --mpi needs mpirun: install the Debian package "
                       "openmpi-bin (scripts/setup --with launch)"),
            std::string::npos)
      << r.out;
}

TEST_F(Extras, UpOfABfdLabWithoutFrrNamesFrrAndBuildsNothing) {
  if (!is_root()) GTEST_SKIP() << "needs root";
  std::ifstream in(scenario("hz-bj.toml"));
  std::string text((std::istreambuf_iterator<char>(in)), {});
  text = text.substr(0, text.find("[[fault]]")) + "[failover]\nmode = \"bfd\"\n";
  const std::string path = dir_ + "/bfd.toml";
  std::ofstream(path) << text;
  LabGuard guard(unique_lab("xfrr"));
  auto r =
      sh("TESTBEDCTL_FRR_DIR=" + empty_ + " " + tbctl() + " up " + path + " --name " + guard.lab());
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("needs zebra: install the Debian package frr (scripts/setup --with frr)"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(marked_netns(guard.lab()).empty());
  EXPECT_FALSE(std::filesystem::exists("/run/testbedctl/" + guard.lab())) << r.out;
}

TEST_F(Extras, DoctorListsEachExtraWithItsPackage) {
  auto r = sh("PATH=" + empty_ + " TESTBEDCTL_FRR_DIR=" + empty_ + " " + tbctl() +
              " doctor --json 2>/dev/null");
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.contains("extras")) << r.out;
  std::map<std::string, nlohmann::json> by_name;
  for (const auto& e : j["extras"]) by_name[e["name"].get<std::string>()] = e;
  ASSERT_TRUE(by_name.contains("mpirun")) << r.out;
  EXPECT_FALSE(by_name["mpirun"]["found"].get<bool>());
  EXPECT_EQ(by_name["mpirun"]["package"], "openmpi-bin");
  EXPECT_EQ(by_name["mpirun"]["group"], "launch");
  ASSERT_TRUE(by_name.contains("bgpd")) << r.out;
  EXPECT_FALSE(by_name["bgpd"]["found"].get<bool>());
  EXPECT_EQ(by_name["bgpd"]["package"], "frr");
  // iptables is also looked for in /usr/sbin and /sbin, where Debian puts it.
  ASSERT_TRUE(by_name.contains("iptables")) << r.out;
  EXPECT_EQ(by_name["iptables"]["found"].get<bool>(),
            std::filesystem::exists("/usr/sbin/iptables"));
}

TEST_F(Extras, ScriptsNameThePackageOfAMissingProgram) {
  const std::string path = path_without({"debootstrap", "qemu-system-x86_64", "srun", "lintian"});
  const std::string src = TB_SOURCE_DIR;
  struct Case {
    std::string cmd, want;
  };
  std::vector<Case> cases = {
      {src + "/scripts/tb-srun -N 1 -- status nolab",
       "tb-srun: needs srun: install the Debian package slurm-client (scripts/setup --with slurm)"},
      {src + "/scripts/package --build " + dir_ + "/nobuild",
       "package: needs lintian: install the Debian package lintian (scripts/setup --with package)"},
  };
  // labvm build refuses a non-root user first; a machine-wide cached image needs no debootstrap
  // (docs/lab-vm.md), so the cache is off here.
  if (is_root())
    cases.push_back({"LABVM_CACHE=off " + src + "/scripts/labvm build --out " + dir_ + "/labvm",
                     "labvm: needs debootstrap: install the Debian package debootstrap "
                     "(scripts/setup --with vm)"});
  for (const auto& c : cases) {
    auto r = sh("PATH=" + path + " " + c.cmd);
    EXPECT_EQ(r.rc, 2) << c.cmd << "\n" << r.out;
    EXPECT_NE(r.out.find(c.want), std::string::npos) << c.cmd << "\n" << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/nobuild")) << "package started a build";
}

}  // namespace
}  // namespace tb::e2e
