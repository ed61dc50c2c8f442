// The hosts and resolv.conf files `up` writes under /etc/netns/<netns>/ (apply/marker.h): a file
// appears whole, marker line first, or not at all, so that `down` and `clean` (which remove only
// what carries the marker) leave nothing behind even when writing stopped part-way (a kill -9
// between creating a file and writing it, a full disk).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
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

ino_t inode(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? st.st_ino : 0;
}

// One inode per distinct content (marker.h SharedFiles): the same hosts text in two namespaces
// is one file with two names, every resolv.conf of a lab one file; different text its own.
TEST(HostsFile, SameContentSharesOneFile) {
  TempDir etc;
  SharedFiles shared;
  const std::string other = kMarker + "\n198.18.0.9 dc-s1-g0\n";
  ASSERT_TRUE(write_hosts_file(etc.path(), "tb-t-a", kContent, &shared));
  ASSERT_TRUE(write_hosts_file(etc.path(), "tb-t-b", kContent, &shared));
  ASSERT_TRUE(write_hosts_file(etc.path(), "tb-t-c", other, &shared));
  const std::string d = etc.path() + "/";
  EXPECT_NE(inode(d + "tb-t-a/hosts"), 0u);
  EXPECT_EQ(inode(d + "tb-t-a/hosts"), inode(d + "tb-t-b/hosts"));
  EXPECT_NE(inode(d + "tb-t-a/hosts"), inode(d + "tb-t-c/hosts"));
  EXPECT_EQ(inode(d + "tb-t-a/resolv.conf"), inode(d + "tb-t-c/resolv.conf"));
  EXPECT_EQ(read_file(d + "tb-t-b/hosts"), kContent);
  EXPECT_EQ(read_file(d + "tb-t-c/hosts"), other);
  EXPECT_EQ(shared.size(), 3u);  // two hosts texts, one resolv.conf
  // Removing one namespace's names leaves the other's file whole.
  ASSERT_TRUE(remove_hosts_file_if_ours(etc.path(), "tb-t-a", kMarker));
  EXPECT_FALSE(fs::exists(d + "tb-t-a"));
  EXPECT_EQ(read_file(d + "tb-t-b/hosts"), kContent);
  // A name already there is refused even when a shared file of that content exists.
  EXPECT_FALSE(write_hosts_file(etc.path(), "tb-t-b", kContent, &shared)) << "overwrote a file";
}

// Once every name of a shared file is gone (an undo), the next namespace with that content
// gets a file of its own instead of an error, and later ones share that one.
TEST(HostsFile, AFileWhoseNamesAreGoneIsWrittenAnew) {
  TempDir etc;
  SharedFiles shared;
  ASSERT_TRUE(write_hosts_file(etc.path(), "tb-t-a", kContent, &shared));
  ASSERT_TRUE(remove_hosts_file_if_ours(etc.path(), "tb-t-a", kMarker));
  ASSERT_TRUE(write_hosts_file(etc.path(), "tb-t-b", kContent, &shared));
  ASSERT_TRUE(write_hosts_file(etc.path(), "tb-t-c", kContent, &shared));
  const std::string d = etc.path() + "/";
  EXPECT_EQ(read_file(d + "tb-t-b/hosts"), kContent);
  EXPECT_EQ(inode(d + "tb-t-b/hosts"), inode(d + "tb-t-c/hosts"));
  EXPECT_TRUE(read_file(d + "tb-t-c/resolv.conf").starts_with(kMarker + "\n"));
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
