// Files written without following a planted symlink, with fixed modes (core/safe_file.h), and
// the lab state that goes through it (lab/state.h). Runs in a temporary directory; no root
// needed (the one case that plants a link as another user runs only as root).
#include "core/safe_file.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "lab/state.h"
#include "temp_dir.h"

namespace tb {
namespace {

namespace fs = std::filesystem;
using testing_util::TempDir;

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t mode_of(const std::string& path) {
  struct stat st {};
  EXPECT_EQ(::lstat(path.c_str(), &st), 0) << path;
  return st.st_mode & 07777;
}

// The umask for one test, restored after it.
class Umask {
 public:
  explicit Umask(mode_t m) : old_(::umask(m)) {}
  ~Umask() { ::umask(old_); }

 private:
  mode_t old_;
};

void expect_refused_symlink(const Error& e, const std::string& path) {
  EXPECT_EQ(e.exit_code, kExitBadInput) << e.message;
  EXPECT_NE(e.message.find(path + " is a symlink; refusing to follow it"), std::string::npos)
      << e.message;
}

TEST(SafeFile, MakesRootAndSubdirsWithFixedModesWhateverTheUmask) {
  for (mode_t mask : {mode_t{0}, mode_t{077}}) {
    TempDir tmp;
    Umask um(mask);
    auto root = SafeDir::open_root(tmp.path() + "/run/testbedctl");
    ASSERT_TRUE(root) << root.error().message;
    auto lab = root->sub("hz/logs");
    ASSERT_TRUE(lab) << lab.error().message;
    EXPECT_EQ(lab->path(), tmp.path() + "/run/testbedctl/hz/logs");
    ASSERT_TRUE(lab->write("state.json", "{}\n"));
    auto log = lab->open("a.log", O_WRONLY | O_CREAT | O_APPEND);
    ASSERT_TRUE(log) << log.error().message;
    auto secret = lab->open("key", O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ASSERT_TRUE(secret) << secret.error().message;
    for (const char* d :
         {"/run", "/run/testbedctl", "/run/testbedctl/hz", "/run/testbedctl/hz/logs"})
      EXPECT_EQ(mode_of(tmp.path() + d), 0755u) << d << " umask " << mask;
    EXPECT_EQ(mode_of(lab->path() + "/state.json"), 0644u) << "umask " << mask;
    EXPECT_EQ(mode_of(lab->path() + "/a.log"), 0644u) << "umask " << mask;
    EXPECT_EQ(mode_of(lab->path() + "/key"), 0600u) << "umask " << mask;
    EXPECT_EQ(read(lab->path() + "/state.json"), "{}\n");
  }
}

TEST(SafeFile, WriteReplacesAtomicallyAndLeavesNoTemporaryFile) {
  TempDir tmp;
  auto root = SafeDir::open_root(tmp.path());
  ASSERT_TRUE(root);
  ASSERT_TRUE(root->write("f", "one"));
  ASSERT_TRUE(root->write("f", "two"));
  EXPECT_EQ(read(tmp.path() + "/f"), "two");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path()), fs::directory_iterator()), 1);
}

TEST(SafeFile, RefusesASymlinkPlantedWhereADirectoryGoes) {
  TempDir tmp;
  fs::create_directories(tmp.path() + "/elsewhere");
  fs::create_directories(tmp.path() + "/run");
  fs::create_directory_symlink(tmp.path() + "/elsewhere", tmp.path() + "/run/hz");
  auto root = SafeDir::open_root(tmp.path() + "/run");
  ASSERT_TRUE(root);
  auto lab = root->sub("hz");
  ASSERT_FALSE(lab);
  expect_refused_symlink(lab.error(), tmp.path() + "/run/hz");
  // Deeper too: a link inside a directory we entered.
  fs::create_directories(tmp.path() + "/run/ok");
  fs::create_directory_symlink(tmp.path() + "/elsewhere", tmp.path() + "/run/ok/logs");
  auto deep = root->sub("ok/logs/more");
  ASSERT_FALSE(deep);
  expect_refused_symlink(deep.error(), tmp.path() + "/run/ok/logs");
  EXPECT_TRUE(fs::is_empty(tmp.path() + "/elsewhere"));
}

TEST(SafeFile, RefusesASymlinkPlantedWhereAFileGoes) {
  TempDir tmp;
  const std::string target = tmp.path() + "/target";
  std::ofstream(target) << "precious";
  ::chmod(target.c_str(), 0600);
  auto root = SafeDir::open_root(tmp.path() + "/run");
  ASSERT_TRUE(root);
  for (const char* name : {"state.json", "journal.jsonl", "lock"})
    fs::create_symlink(target, tmp.path() + "/run/" + name);

  auto w = root->write("state.json", "evil");
  ASSERT_FALSE(w);
  expect_refused_symlink(w.error(), tmp.path() + "/run/state.json");
  auto o = root->open("journal.jsonl", O_WRONLY | O_CREAT | O_TRUNC);
  ASSERT_FALSE(o);
  expect_refused_symlink(o.error(), tmp.path() + "/run/journal.jsonl");
  auto p = write_file(tmp.path() + "/run/lock", "evil");
  ASSERT_FALSE(p);
  expect_refused_symlink(p.error(), tmp.path() + "/run/lock");

  EXPECT_EQ(read(target), "precious");
  EXPECT_EQ(mode_of(target), 0600u);
  EXPECT_TRUE(fs::is_symlink(tmp.path() + "/run/state.json"));
  // Nothing left behind by the refused atomic write.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path() + "/run"), fs::directory_iterator()),
            3);
}

TEST(SafeFile, RefusesDirectoriesOthersCanWrite) {
  TempDir tmp;
  fs::create_directories(tmp.path() + "/open/hz");
  ::chmod((tmp.path() + "/open").c_str(), 01777);
  auto root = SafeDir::open_root(tmp.path() + "/open");
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().exit_code, kExitBadInput);
  EXPECT_NE(root.error().message.find("is writable by others (mode 1777)"), std::string::npos)
      << root.error().message;

  ::chmod((tmp.path() + "/open").c_str(), 0755);
  ::chmod((tmp.path() + "/open/hz").c_str(), 0777);
  root = SafeDir::open_root(tmp.path() + "/open");
  ASSERT_TRUE(root);
  auto lab = root->sub("hz");
  ASSERT_FALSE(lab);
  EXPECT_NE(lab.error().message.find(tmp.path() + "/open/hz is writable by others"),
            std::string::npos)
      << lab.error().message;
  // A user-named file's directory may be /tmp-like: open_existing does not judge it.
  EXPECT_TRUE(SafeDir::open_existing(tmp.path() + "/open/hz"));
}

TEST(SafeFile, RootFollowsItsOwnersSymlinksAndNamesOnlyDirectories) {
  TempDir tmp;
  fs::create_directories(tmp.path() + "/real");
  fs::create_directory_symlink("real", tmp.path() + "/alias");  // like /var/run -> /run
  auto root = SafeDir::open_root(tmp.path() + "/alias/testbedctl");
  ASSERT_TRUE(root) << root.error().message;
  ASSERT_TRUE(root->write("f", "x"));
  EXPECT_EQ(read(tmp.path() + "/real/testbedctl/f"), "x");

  std::ofstream(tmp.path() + "/file") << "x";
  auto not_dir = SafeDir::open_root(tmp.path() + "/file/sub");
  ASSERT_FALSE(not_dir);
  EXPECT_NE(not_dir.error().message.find("/file is not a directory"), std::string::npos)
      << not_dir.error().message;
  EXPECT_FALSE(root->sub(".."));
  EXPECT_FALSE(root->write("../f", "x"));
}

// Root follows only links that root or this user owns; one planted by another user is refused.
TEST(SafeFile, RootRefusesASymlinkAnotherUserOwns) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to make a symlink another user owns";
  TempDir tmp;
  fs::create_directories(tmp.path() + "/elsewhere");
  const std::string link = tmp.path() + "/results";
  fs::create_directory_symlink(tmp.path() + "/elsewhere", link);
  ASSERT_EQ(::lchown(link.c_str(), 65534, 65534), 0);
  auto root = SafeDir::open_root(link + "/hz");
  ASSERT_FALSE(root);
  EXPECT_EQ(root.error().exit_code, kExitBadInput);
  EXPECT_NE(root.error().message.find(link + " is a symlink owned by uid 65534"), std::string::npos)
      << root.error().message;
  EXPECT_TRUE(fs::is_empty(tmp.path() + "/elsewhere"));
}

// The lab's state goes through it: a link planted in the run directory is refused (exit 2)
// and its target is left as it was.
class LabStateFiles : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("TESTBEDCTL_RUN_DIR", (tmp_.path() + "/run").c_str(), 1); }
  void TearDown() override { ::unsetenv("TESTBEDCTL_RUN_DIR"); }
  lab::LabState state() const {
    lab::LabState s;
    s.lab = "sealx";
    s.scenario = "/dev/null";
    s.phase = "up";
    return s;
  }
  TempDir tmp_;
};

TEST_F(LabStateFiles, SaveStateWritesModesWhateverTheUmask) {
  Umask um(0);
  auto saved = lab::save_state(state());
  ASSERT_TRUE(saved) << saved.error().message;
  EXPECT_EQ(mode_of(tmp_.path() + "/run"), 0755u);
  EXPECT_EQ(mode_of(tmp_.path() + "/run/sealx"), 0755u);
  EXPECT_EQ(mode_of(tmp_.path() + "/run/sealx/state.json"), 0644u);
  auto lock = lab::LabLock::acquire("sealx");
  ASSERT_TRUE(lock) << lock.error().message;
  EXPECT_EQ(mode_of(tmp_.path() + "/run/sealx/lock"), 0644u);
}

TEST_F(LabStateFiles, SaveStateRefusesASymlinkedLabDirectory) {
  fs::create_directories(tmp_.path() + "/run");
  fs::create_directories(tmp_.path() + "/victim");
  fs::create_directory_symlink(tmp_.path() + "/victim", tmp_.path() + "/run/sealx");
  auto saved = lab::save_state(state());
  ASSERT_FALSE(saved);
  expect_refused_symlink(saved.error(), tmp_.path() + "/run/sealx");
  auto lock = lab::LabLock::acquire("sealx");
  ASSERT_FALSE(lock);
  expect_refused_symlink(lock.error(), tmp_.path() + "/run/sealx");
  EXPECT_TRUE(fs::is_empty(tmp_.path() + "/victim"));
}

TEST_F(LabStateFiles, SaveStateRefusesASymlinkedStateFileOrLock) {
  fs::create_directories(tmp_.path() + "/run/sealx");
  const std::string victim = tmp_.path() + "/victim";
  std::ofstream(victim) << "precious";
  fs::create_symlink(victim, tmp_.path() + "/run/sealx/state.json");
  fs::create_symlink(victim, tmp_.path() + "/run/sealx/lock");
  auto saved = lab::save_state(state());
  ASSERT_FALSE(saved);
  expect_refused_symlink(saved.error(), tmp_.path() + "/run/sealx/state.json");
  auto lock = lab::LabLock::acquire("sealx");
  ASSERT_FALSE(lock);
  expect_refused_symlink(lock.error(), tmp_.path() + "/run/sealx/lock");
  EXPECT_EQ(read(victim), "precious");
}

// StateParts::kBrief (down, clean) reads only the text before "stages" and "topology", which
// sort last in what save_state writes; it agrees with the whole load on every field it has,
// and a file laid out otherwise is parsed whole.
TEST_F(LabStateFiles, BriefLoadReadsOnlyWhatComesBeforeTheTopology) {
  lab::LabState s = state();
  s.pid = 4242;
  s.rdma = "rxe";
  s.rdma_why = "probed";
  s.digest = "0123456789abcdef";
  s.host = "a";
  s.topo.nodes.push_back(
      plan::Node{"dc/s0", "tb-sealx-dc-s0", plan::NodeKind::kServer, "dc", 0, -1, {}});
  s.rxe.push_back({"dc/s0/g0", "tb-sealx-dc-s0-g0", "rail", "rxe0", 1, "fe80::1"});
  ASSERT_TRUE(lab::save_state(s));
  const std::string path = tmp_.path() + "/run/sealx/state.json";
  auto whole = lab::load_state("sealx");
  auto brief = lab::load_state("sealx", lab::StateParts::kBrief);
  ASSERT_TRUE(whole) << whole.error().message;
  ASSERT_TRUE(brief) << brief.error().message;
  EXPECT_EQ(whole->topo.nodes.size(), 1u);
  EXPECT_TRUE(brief->topo.nodes.empty());
  for (const auto* st : {&*whole, &*brief}) {
    EXPECT_EQ(st->pid, 4242);
    EXPECT_EQ(st->phase, "up");
    EXPECT_EQ(st->rdma, "rxe");
    EXPECT_EQ(st->digest, "0123456789abcdef");
    EXPECT_EQ(st->host, "a");
    ASSERT_EQ(st->rxe.size(), 1u);
    EXPECT_EQ(st->rxe[0].name, "rxe0");
  }
  // Only the part before "stages" is read: a topology the parser would refuse does not matter
  // to a brief load (it does to the whole one).
  std::string text = read(path);
  const size_t topo = text.find("\"topology\": ");
  ASSERT_NE(topo, std::string::npos);
  std::ofstream(path) << text.substr(0, topo) + "\"topology\": {\"nodes\": [ broken\n}\n";
  EXPECT_TRUE(lab::load_state("sealx", lab::StateParts::kBrief));
  EXPECT_FALSE(lab::load_state("sealx"));
  // The same state on one line (not save_state's layout): parsed whole, the same fields.
  std::ofstream(path) << nlohmann::json::parse(text).dump() << "\n";
  auto one_line = lab::load_state("sealx", lab::StateParts::kBrief);
  ASSERT_TRUE(one_line) << one_line.error().message;
  EXPECT_EQ(one_line->pid, 4242);
  EXPECT_EQ(one_line->rxe.size(), 1u);
}

TEST(TempDirTest, IsPrivateAndRemovedWithAllItHoldsWhenDestroyed) {
  std::string path;
  {
    auto t = tb::TempDir::make("tbtest");
    ASSERT_TRUE(t) << t.error().message;
    path = t->path();
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0);
    EXPECT_TRUE(S_ISDIR(st.st_mode));
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    fs::create_directories(path + "/0/ompi");
    std::ofstream(path + "/0/ompi/f") << "x";
    tb::TempDir moved = std::move(*t);
    EXPECT_TRUE(t->path().empty());
    EXPECT_EQ(moved.path(), path);
  }
  EXPECT_FALSE(fs::exists(path));
}

}  // namespace
}  // namespace tb
