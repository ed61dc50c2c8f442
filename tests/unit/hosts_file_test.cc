// The hosts and resolv.conf files `up` writes under /etc/netns/<netns>/ (apply/marker.h): a file
// appears whole, marker line first, or not at all, so that `down` and `clean` (which remove only
// what carries the marker) leave nothing behind even when writing stopped part-way (a kill -9
// between creating a file and writing it, a full disk).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "apply/marker.h"
#include "temp_dir.h"

namespace tb::apply {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

const std::string kMarker = "# testbedctl lab=t hosts";
const std::string kContent = kMarker + "\n198.18.0.1 dc-s0-g0\n198.18.0.2 dc-s0-g1\n";

std::string read_file(const fs::path& p) {
  std::ifstream in(p);
  return {std::istreambuf_iterator<char>(in), {}};
}

TEST(HostsFile, WrittenWholeAndRemovedWithItsDirectory) {
  TempDir etc;
  ASSERT_TRUE(write_hosts_file(etc.path(), "tb-t-a", kContent));
  EXPECT_EQ(read_file(etc.path() + "/tb-t-a/hosts"), kContent);
  EXPECT_TRUE(read_file(etc.path() + "/tb-t-a/resolv.conf").starts_with(kMarker + "\n"));
  EXPECT_FALSE(write_hosts_file(etc.path(), "tb-t-a", kContent)) << "overwrote a file";
  ASSERT_TRUE(remove_hosts_file_if_ours(etc.path(), "tb-t-a", kMarker));
  EXPECT_FALSE(fs::exists(etc.path() + "/tb-t-a"));
}

TEST(HostsFile, SomeoneElsesFileStays) {
  TempDir etc;
  fs::create_directories(etc.path() + "/tb-t-a");
  std::ofstream(etc.path() + "/tb-t-a/hosts") << "127.0.0.1 mine\n";
  EXPECT_FALSE(write_hosts_file(etc.path(), "tb-t-a", kContent));
  ASSERT_TRUE(remove_hosts_file_if_ours(etc.path(), "tb-t-a", kMarker));
  EXPECT_EQ(read_file(etc.path() + "/tb-t-a/hosts"), "127.0.0.1 mine\n");
}

// Writing stops after `limit` bytes of any file (RLIMIT_FSIZE: write fails with EFBIG), in a
// child: the state a kill -9 between open and write leaves, or a full disk. Whatever it left,
// removing by marker must take, directory included.
void write_stopped_after(const std::string& etc, rlim_t limit) {
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::signal(SIGXFSZ, SIG_IGN);
    rlimit r{limit, limit};
    ::setrlimit(RLIMIT_FSIZE, &r);
    _exit(write_hosts_file(etc, "tb-t-a", kContent) ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 1) << "the write did not fail; the limit did not apply";
}

TEST(HostsFile, AFileWrittenPartWayLeavesNothingAfterRemoval) {
  for (rlim_t limit : {rlim_t{0}, rlim_t{5}}) {
    TempDir etc;
    write_stopped_after(etc.path(), limit);
    ASSERT_TRUE(remove_hosts_file_if_ours(etc.path(), "tb-t-a", kMarker));
    std::string left;
    if (fs::exists(etc.path() + "/tb-t-a"))
      for (const auto& e : fs::directory_iterator(etc.path() + "/tb-t-a"))
        left += e.path().filename().string() + " (" + std::to_string(fs::file_size(e)) + " B) ";
    EXPECT_FALSE(fs::exists(etc.path() + "/tb-t-a")) << "limit " << limit << ": left " << left;
  }
}

}  // namespace
}  // namespace tb::apply
