// What a Debian install carries, checked from the build tree: `--version` names the commit the
// binary was built from; the man pages (scripts/make-man: one per verb and companion) exist and
// are not empty; bash completion (scripts/completion/testbedctl) completes verbs and flags from
// the binary's --help, and lab and node names of a live lab. The package itself is installed in
// a clean guest by the vm tier (labvm_deb_check, images/labvm/check-deb.sh).
#include <filesystem>
#include <sstream>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

namespace fs = std::filesystem;

std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// COMPREPLY for a command line (the last word is the one being completed), with the build's
// testbedctl first on PATH.
std::string complete(const std::vector<std::string>& words) {
  std::string arr;
  for (const auto& w : words) arr += " '" + w + "'";
  const std::string script = "PATH=" + fs::path(tbctl()).parent_path().string() +
                             ":$PATH; source " + std::string(TB_SOURCE_DIR) +
                             "/scripts/completion/testbedctl; COMP_WORDS=(" + arr +
                             "); COMP_CWORD=" + std::to_string(words.size() - 1) +
                             "; _testbedctl; echo \"${COMPREPLY[*]}\"";
  auto r = sh("bash -c " + quoted(script));
  return r.out.substr(0, r.out.find('\n'));
}

TEST(Install, VersionNamesTheCommitItWasBuiltFrom) {
  auto v = sh(tbctl() + " --version");
  ASSERT_EQ(v.rc, 0);
  auto head = sh("git -C " + std::string(TB_SOURCE_DIR) + " rev-parse --short=12 HEAD 2>/dev/null");
  if (head.rc != 0) GTEST_SKIP() << "not a git checkout: the commit is whatever TB_COMMIT says";
  const std::string commit = head.out.substr(0, head.out.find('\n'));
  EXPECT_EQ(v.out.rfind("testbedctl ", 0), 0u) << v.out;
  EXPECT_NE(v.out.find("(commit " + commit), std::string::npos)
      << v.out << " (HEAD is " << commit << "; rebuild if the tree moved)";
}

TEST(Install, ManPagesForEveryVerbAndCompanion) {
  const fs::path man = fs::path(tbctl()).parent_path() / "man";
  if (!fs::exists(man))
    GTEST_SKIP() << "no man pages built (help2man missing: apt install help2man)";
  auto help = sh(tbctl() + " --help");
  std::istringstream in(help.out);
  std::vector<std::string> pages{"testbedctl", "tb-delayd", "tb-probe", "tb-rank"};
  bool subs = false;
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("Subcommands:"))
      subs = true;
    else if (subs && line.starts_with("  ") && line.size() > 2 && line[2] != ' ')
      pages.push_back("testbedctl-" + line.substr(2, line.find(' ', 2) - 2));
  }
  ASSERT_GT(pages.size(), 15u) << help.out;
  for (const auto& p : pages) {
    const fs::path f = man / (p + ".1.gz");
    ASSERT_TRUE(fs::exists(f)) << f;
    auto text = sh("zcat " + f.string());
    EXPECT_NE(text.out.find(".SH NAME"), std::string::npos) << f;
    EXPECT_NE(text.out.find(".SH \"SEE ALSO\""), std::string::npos) << f;
    EXPECT_GT(text.out.size(), 500u) << f;
  }
}

class Completion : public SharedMiniLab<Completion> {
 protected:
  static void SetUpTestSuite() { up_shared("cp", "completion"); }
};

TEST_F(Completion, VerbsFlagsLabsAndNodes) {
  EXPECT_EQ(complete({"testbedctl", "be"}), "bench");
  EXPECT_EQ(complete({"testbedctl", "bench", "--al"}), "--algo");
  EXPECT_EQ(complete({"testbedctl", "up", "--shaping", "tb"}), "tbf");
  // The live lab's name, and its nodes where a verb takes one.
  const std::string labs = complete({"testbedctl", "status", ""});
  EXPECT_NE((" " + labs + " ").find(" " + lab_ + " "), std::string::npos) << labs;
  EXPECT_EQ(complete({"testbedctl", "exec", lab_, "dc/s1/g"}), "dc/s1/g0 dc/s1/g1");
  EXPECT_EQ(complete({"testbedctl", "link", lab_, "r"}), "reset");
  const std::string ends = " " + complete({"testbedctl", "link", lab_, "set", "dc/t"}) + " ";
  EXPECT_NE(ends.find(" dc/tor0 "), std::string::npos) << ends;
  EXPECT_NE(ends.find(" dc/tr "), std::string::npos) << ends;
  // status --names is what completion reads; a lab that is not up is exit 2.
  auto names = sh(tbctl() + " status " + lab_ + " --names");
  EXPECT_EQ(names.rc, 0);
  EXPECT_NE(names.out.find("dc/s0/g0\n"), std::string::npos) << names.out;
  EXPECT_EQ(sh(tbctl() + " status nosuch --names 2>&1").rc, 2);
}

}  // namespace
}  // namespace tb::e2e
