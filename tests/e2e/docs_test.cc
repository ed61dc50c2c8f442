// The documentation runs: every fenced shell block of README.md and docs/*.md carries a marker on
// the line before it (blank lines between are allowed):
//
//   <!-- doc-test: run lab=NAME[,NAME...] -->   run here by this test, as written, except that
//                                               each lab NAME is replaced by a name of the
//                                               test's own (unique per process)
//   <!-- doc-test: skip REASON -->              cannot run here (the lab VM, a .deb install, a
//                                               multi-minute benchmark, a synopsis); REASON says
//                                               which
//
// A shell block is a fenced block tagged sh, bash, shell or console, or an untagged one with a
// line that starts (after an optional "$ ") with sudo, testbedctl, apt, apt-get or scripts/.
// An unmarked shell block fails the test, naming file:line. The runnable blocks of one file run
// in document order (a later block may use the lab an earlier one brought up), each in its own
// `bash -e -o pipefail` from the source directory, with the build's testbedctl first on PATH and
// `sudo` a function that runs its arguments (the test is root); a block that exits non-zero
// fails the test with file:line of the block and of the last command it ran. Every lab a
// marker names is taken down (and cleaned by owner marker) when the test ends.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>

#include "e2e_util.h"

namespace tb::e2e {
namespace {

namespace fs = std::filesystem;

struct DocBlock {
  std::string file;  // relative to the source directory
  int line = 0;      // the opening fence, 1-based
  std::string info;  // the fence's info string
  std::vector<std::string> lines;
  bool shell = false;
  enum Kind { kUnmarked, kRun, kSkip } kind = kUnmarked;
  std::vector<std::string> labs;  // kRun
  std::string reason;             // kSkip
};

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  const auto e = s.find_last_not_of(" \t\r");
  return s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::string cur;
  for (char c : s) {
    if (c == sep) {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  out.push_back(cur);
  return out;
}

bool starts_with(const std::string& s, const std::string& p) {
  return s.rfind(p, 0) == 0;
}

bool looks_like_shell(const DocBlock& b) {
  const std::string tag = split(trim(b.info), ' ')[0];
  if (tag == "sh" || tag == "bash" || tag == "shell" || tag == "console") return true;
  if (!tag.empty()) return false;
  for (const auto& raw : b.lines) {
    std::string l = trim(raw);
    if (starts_with(l, "$ ")) l = trim(l.substr(2));
    const std::string word = split(l, ' ')[0];
    if (word == "sudo" || word == "testbedctl" || word == "apt" || word == "apt-get" ||
        starts_with(word, "scripts/"))
      return true;
  }
  return false;
}

// Parses the marker line into b; returns an error text for a malformed one.
std::string parse_marker(const std::string& line, DocBlock& b) {
  const std::string open = "<!-- doc-test:", close = "-->";
  std::string l = trim(line);
  if (!starts_with(l, open)) return "";
  if (l.size() < open.size() + close.size() || l.substr(l.size() - close.size()) != close)
    return "a doc-test marker must end with --> on the same line";
  const std::string body = trim(l.substr(open.size(), l.size() - open.size() - close.size()));
  if (starts_with(body, "run")) {
    const std::string args = trim(body.substr(3));
    if (!starts_with(args, "lab=") || args.find(' ') != std::string::npos)
      return "use `doc-test: run lab=NAME[,NAME...]`";
    for (const auto& name : split(args.substr(4), ',')) {
      const bool ok = !name.empty() && name.size() <= 8 && std::islower(name[0]) &&
                      std::all_of(name.begin(), name.end(),
                                  [](char c) { return std::islower(c) || std::isdigit(c); });
      if (!ok) return "lab \"" + name + "\": 1-32 lowercase letters or digits, a letter first";
      b.labs.push_back(name);
    }
    b.kind = DocBlock::kRun;
    return "";
  }
  if (starts_with(body, "skip")) {
    b.reason = trim(body.substr(4));
    if (b.reason.size() < 10) return "`doc-test: skip REASON` needs a reason (why it cannot run)";
    b.kind = DocBlock::kSkip;
    return "";
  }
  return "unknown doc-test marker; use `run lab=NAME` or `skip REASON`";
}

// Every fenced block of one markdown text; marker errors are appended to `errors`.
std::vector<DocBlock> parse_markdown(const std::string& file, const std::string& text,
                                     std::vector<std::string>& errors) {
  std::vector<DocBlock> out;
  const std::vector<std::string> lines = split(text, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string t = trim(lines[i]);
    if (!starts_with(t, "```")) continue;
    DocBlock b;
    b.file = file;
    b.line = static_cast<int>(i) + 1;
    b.info = t.substr(3);
    size_t j = i + 1;
    for (; j < lines.size() && trim(lines[j]) != "```"; ++j) b.lines.push_back(lines[j]);
    if (j == lines.size()) {
      errors.push_back(file + ":" + std::to_string(b.line) + ": fenced block never closed");
      break;
    }
    b.shell = looks_like_shell(b);
    // The marker: the nearest non-blank line before the fence.
    for (size_t k = i; k-- > 0;) {
      if (trim(lines[k]).empty()) continue;
      const std::string err = parse_marker(lines[k], b);
      if (!err.empty()) errors.push_back(file + ":" + std::to_string(k + 1) + ": " + err);
      break;
    }
    if (b.kind != DocBlock::kUnmarked && !b.shell)
      errors.push_back(file + ":" + std::to_string(b.line) +
                       ": a doc-test marker on a block that is not a shell block (tag it sh)");
    out.push_back(std::move(b));
    i = j;
  }
  return out;
}

std::vector<std::string> doc_files() {
  std::vector<std::string> files{"README.md"};
  std::vector<std::string> docs;
  for (const auto& e : fs::directory_iterator(fs::path(TB_SOURCE_DIR) / "docs"))
    if (e.path().extension() == ".md") docs.push_back("docs/" + e.path().filename().string());
  std::sort(docs.begin(), docs.end());
  files.insert(files.end(), docs.begin(), docs.end());
  return files;
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p);
  return std::string((std::istreambuf_iterator<char>(in)), {});
}

std::vector<DocBlock> all_blocks(std::vector<std::string>& errors) {
  std::vector<DocBlock> out;
  for (const auto& f : doc_files()) {
    auto bs = parse_markdown(f, read_text(fs::path(TB_SOURCE_DIR) / f), errors);
    out.insert(out.end(), bs.begin(), bs.end());
  }
  return out;
}

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '/' ||
         c == '-';
}

// `name` replaced by `with` where it stands alone: not part of a path, a file name or a word
// (so `--name tour` and `status tour` change, `/tmp/tour-run.toml` does not).
std::string replace_lab(const std::string& text, const std::string& name, const std::string& with) {
  std::string out;
  size_t pos = 0;
  for (size_t at; (at = text.find(name, pos)) != std::string::npos;) {
    const bool before_ok = at == 0 || !name_char(text[at - 1]);
    const size_t end = at + name.size();
    const bool after_ok = end == text.size() || !name_char(text[end]);
    out += text.substr(pos, at - pos);
    out += before_ok && after_ok ? with : name;
    pos = end;
  }
  return out + text.substr(pos);
}

TEST(DocsParse, FindsUnmarkedAndMarkedShellBlocks) {
  std::vector<std::string> errors;
  const std::string md =
      "# t\n\n```sh\necho unmarked\n```\n\n<!-- doc-test: run lab=tour -->\n\n```sh\n"
      "testbedctl status tour\n```\n<!-- doc-test: skip the lab VM takes minutes -->\n```\n"
      "sudo scripts/labvm check\n```\n```toml\n[lab]\n```\n```\nFILE:LINE: output\n```\n"
      "<!-- doc-test: skip x -->\n```sh\nls\n```\n";
  auto bs = parse_markdown("x.md", md, errors);
  ASSERT_EQ(bs.size(), 6u);
  EXPECT_TRUE(bs[0].shell);
  EXPECT_EQ(bs[0].kind, DocBlock::kUnmarked);
  EXPECT_EQ(bs[0].line, 3);
  EXPECT_EQ(bs[1].kind, DocBlock::kRun);
  ASSERT_EQ(bs[1].labs.size(), 1u);
  EXPECT_EQ(bs[1].labs[0], "tour");
  EXPECT_TRUE(bs[2].shell);  // untagged, but a command
  EXPECT_EQ(bs[2].kind, DocBlock::kSkip);
  EXPECT_FALSE(bs[3].shell);     // toml
  EXPECT_FALSE(bs[4].shell);     // untagged output
  ASSERT_EQ(errors.size(), 1u);  // "skip x": no reason
  EXPECT_NE(errors[0].find("x.md:22"), std::string::npos) << errors[0];
  EXPECT_EQ(replace_lab("up scenarios/mini.toml --name tour; cat /tmp/tour-run.toml; status tour",
                        "tour", "dt123"),
            "up scenarios/mini.toml --name dt123; cat /tmp/tour-run.toml; status dt123");
}

// Every shell block of README.md and docs/*.md is marked runnable or not runnable with a reason.
TEST(Docs, EveryShellBlockIsMarked) {
  std::vector<std::string> errors;
  const auto blocks = all_blocks(errors);
  int run = 0, skip = 0, unmarked = 0;
  for (const auto& b : blocks) {
    if (!b.shell) continue;
    if (b.kind == DocBlock::kRun) ++run;
    if (b.kind == DocBlock::kSkip) ++skip;
    if (b.kind == DocBlock::kUnmarked) {
      ++unmarked;
      errors.push_back(b.file + ":" + std::to_string(b.line) +
                       ": shell block without a doc-test marker (`<!-- doc-test: run lab=NAME -->`"
                       " or `<!-- doc-test: skip REASON -->` on the line before it)");
    }
  }
  std::printf("doc shell blocks: %d runnable, %d not runnable (with a reason), %d unmarked\n", run,
              skip, unmarked);
  for (const auto& e : errors) ADD_FAILURE() << e;
  EXPECT_GT(run, 0) << "no runnable block found: the README's tour should be one";
}

// Runs every runnable block, file by file, in document order.
TEST(Docs, RunnableBlocksRun) {
  TB_REQUIRE_ROOT();
  std::vector<std::string> errors;
  const auto blocks = all_blocks(errors);
  ASSERT_TRUE(errors.empty()) << errors.front();

  std::string results = "/tmp/tb-e2e-docs-XXXXXX";
  ASSERT_NE(::mkdtemp(results.data()), nullptr);
  // One unique name per lab name the docs use: "d" + a letter + this process's pid digits.
  std::map<std::string, std::string> names;
  std::vector<std::unique_ptr<LabGuard>> guards;
  for (const auto& b : blocks)
    for (const auto& l : b.labs)
      if (!names.count(l)) {
        const std::string prefix = std::string("d") + static_cast<char>('a' + names.size() % 26);
        names[l] = unique_lab(prefix);
        guards.push_back(std::make_unique<LabGuard>(names[l]));
      }
  const std::string bin_dir = fs::path(tbctl()).parent_path().string();
  int ran = 0;
  std::set<std::string> failed_files;
  for (const auto& b : blocks) {
    if (b.kind != DocBlock::kRun || failed_files.count(b.file)) continue;
    std::string body;
    for (const auto& l : b.lines) body += l + "\n";
    for (const auto& l : b.labs) body = replace_lab(body, l, names[l]);
    // Line 1 of the script is the prelude, so script line L is the document's line b.line + L - 1.
    const std::string script = results + "/block.sh";
    std::ofstream(script) << "sudo() { \"$@\"; }; PS4='+ L${LINENO}: '; set -x\n" << body;
    const std::string cmd = "cd " + std::string(TB_SOURCE_DIR) + " && PATH=" + bin_dir +
                            ":$PATH TESTBEDCTL_RESULTS_DIR=" + results +
                            " timeout 240 bash -e -o pipefail " + script + " </dev/null";
    const CmdResult r = sh(cmd);
    ++ran;
    if (r.rc == 0) continue;
    const size_t at = r.out.rfind("+ L");
    const int last = at == std::string::npos ? 0 : std::atoi(r.out.c_str() + at + 3);
    const std::string where = b.file + ":" + std::to_string(b.line);
    const std::string tail = r.out.size() > 6000 ? r.out.substr(r.out.size() - 6000) : r.out;
    ADD_FAILURE() << where << ": the block exited " << r.rc
                  << (last > 0 ? " at " + b.file + ":" + std::to_string(b.line + last - 1) : "")
                  << " (labs renamed:" <<
        [&] {
          std::string s;
          for (const auto& l : b.labs) s += " " + l + "->" + names[l];
          return s;
        }() << ")\n"
                  << tail;
    failed_files.insert(b.file);  // later blocks of the file build on this one
  }
  std::printf("ran %d doc blocks\n", ran);
  EXPECT_GT(ran, 0);
  guards.clear();  // down + clean
  for (const auto& [doc, lab] : names)
    EXPECT_TRUE(marked_netns(lab).empty()) << "lab " << lab << " (" << doc << ") left namespaces";
  fs::remove_all(results);
}

}  // namespace
}  // namespace tb::e2e
