// End to end, as root: the lab's files are not written through a symlink someone planted
// (core/safe_file.h): `up` says which path is a symlink, exits 2 and builds nothing.
#include <unistd.h>

#include <filesystem>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

namespace fs = std::filesystem;

TEST(Files, UpRefusesASymlinkPlantedWhereTheLabsDirectoryGoes) {
  TB_REQUIRE_ROOT();
  const std::string lab = unique_lab("fil");
  char t[] = "/tmp/tb-e2e-files-XXXXXX";
  const fs::path dir = ::mkdtemp(t);
  LabGuard guard(lab);
  fs::create_directories(dir / "run");
  fs::create_directories(dir / "victim");
  fs::create_directory_symlink(dir / "victim", dir / "run" / lab);

  auto r = sh("TESTBEDCTL_RUN_DIR=" + (dir / "run").string() + " " + tbctl() + " up " +
              scenario("mini.toml") + " --name " + lab + " --shaping none");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find((dir / "run" / lab).string() + " is a symlink; refusing to follow it"),
            std::string::npos)
      << r.out;
  EXPECT_TRUE(fs::is_empty(dir / "victim"));
  EXPECT_TRUE(marked_netns(lab).empty());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tb::e2e
