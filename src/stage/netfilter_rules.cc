// NFQUEUE and loss rules through iptables and nft, inside a named namespace (netfilter_rules.h).
#include "stage/netfilter_rules.h"

#include <fcntl.h>
#include <limits.h>
#include <linux/netlink.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "core/extras.h"
#include "core/paths.h"
#include "core/spawn.h"
#include "core/unique_fd.h"
#include "netlink/netns.h"
#include "netlink/socket.h"
#include "stage/calibration.h"

namespace tb::stage {
namespace {

constexpr int kToolTimeoutMs = 5000;
constexpr size_t kMaxOutput = 1 << 20;

struct ToolRun {
  int exit_code = -1;  // 128 + signal when killed
  std::string output;  // stdout and stderr
};

std::string trimmed(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  if (s.size() > 600) s = s.substr(0, 600) + "...";
  return s;
}

std::string find_tool(const std::string& name) {
  for (const char* dir : {"/usr/sbin", "/sbin", "/usr/bin", "/bin", "/usr/local/sbin"}) {
    std::string path = std::string(dir) + "/" + name;
    if (::access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

// Runs `tool args...` inside /run/netns/<netns> (or here when netns is ""), bounded in time,
// with `input` (when given) on its stdin, else /dev/null.
Result<ToolRun> run_tool(const std::string& netns, const std::string& tool,
                         const std::vector<std::string>& args, const std::string* input = nullptr) {
  std::string path = find_tool(tool);
  if (path.empty()) {
    const std::string where = "not found in /usr/sbin, /sbin, /usr/bin or /bin";
    if (const Extra* e = find_extra(tool))
      return missing_extra("the lab's netfilter rules", *e, where);
    return fail(tool + " " + where);
  }
  UniqueFd ns_fd;
  if (!netns.empty()) {
    if (netns.find('/') != std::string::npos) return bad_input("bad netns name \"" + netns + "\"");
    ns_fd.reset(::open((paths::roots().netns + "/" + netns).c_str(), O_RDONLY | O_CLOEXEC));
    if (!ns_fd) return sys_fail("open netns " + netns);
  }
  UniqueFd in_fd;  // the input, in a memory file read from its start
  if (input) {
    in_fd.reset(::memfd_create("tb-rules", MFD_CLOEXEC));
    if (!in_fd) return sys_fail("memfd for " + tool + "'s input");
    for (size_t off = 0; off < input->size();) {
      const ssize_t n = ::write(in_fd.get(), input->data() + off, input->size() - off);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return sys_fail("write " + tool + "'s input");
      off += static_cast<size_t>(n);
    }
    if (::lseek(in_fd.get(), 0, SEEK_SET) != 0) return sys_fail("rewind " + tool + "'s input");
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_fail("pipe");
  UniqueFd rd(fds[0]), wr(fds[1]);
  // core/spawn.h: no copy of our memory (`up` runs one of these per shaped namespace, in
  // parallel; a fork of it cost 2-5 ms on the reference VM).
  std::vector<std::string> argv{path};
  argv.insert(argv.end(), args.begin(), args.end());
  SpawnSpec spec{path,        argv,        {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"},
                 ns_fd.get(), in_fd.get(), wr.get(),
                 wr.get(),    -1,          /*new_group=*/true};
  auto spawned = spawn_process(spec);
  if (!spawned) return std::unexpected(with_context(spawned.error(), tool + " in netns " + netns));
  const pid_t pid = *spawned;
  wr.reset();
  timespec start{};
  clock_gettime(CLOCK_MONOTONIC, &start);
  auto elapsed_ms = [&start] {
    timespec now{};
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1'000'000;
  };
  ToolRun run;
  bool timed_out = false;
  char buf[4096];
  for (;;) {
    long left = kToolTimeoutMs - elapsed_ms();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{rd.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) < 0 && errno != EINTR) break;
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      break;
    }
    if (run.output.size() < kMaxOutput) run.output.append(buf, static_cast<size_t>(n));
  }
  if (timed_out) {
    ::kill(-pid, SIGKILL);  // its own process group: the tool and anything it started
    ::kill(pid, SIGKILL);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) return fail(tool + " in netns " + netns + " took over 5 s and was killed");
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  if (run.exit_code == 127 && run.output.empty()) return fail("exec " + path + " failed");
  return run;
}

// Runs the tool and turns a non-zero exit into "<what> in netns N: <tool> exit E: <stderr>".
Result<std::string> run_checked(const std::string& netns, const std::string& what,
                                const std::string& tool, const std::vector<std::string>& args,
                                const std::string* input = nullptr) {
  std::string where = what + (netns.empty() ? "" : " in netns " + netns);
  auto run = run_tool(netns, tool, args, input);
  if (!run) return std::unexpected(with_context(run.error(), where));
  if (run->exit_code != 0)
    return fail(where + ": " + tool + " exit " + std::to_string(run->exit_code) + ": " +
                trimmed(run->output));
  return run->output;
}

// Splits a line of `iptables -S` output into words; "..." with \" and \\ escapes is one word.
std::vector<std::string> shell_words(const std::string& line) {
  std::vector<std::string> words;
  std::string cur;
  bool in_word = false, quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (quoted) {
      if (c == '\\' && i + 1 < line.size()) {
        cur += line[++i];
      } else if (c == '"') {
        quoted = false;
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(cur);
  return words;
}

bool has_marker(const std::string& comment, const std::string& marker) {
  return !marker.empty() && comment.starts_with(marker);
}

// Drops table `family` tb_loss once no rule, ours or another lab's, is left in it.
void drop_empty_table(const std::string& netns, const std::string& family) {
  auto left = run_tool(netns, "nft", {"-j", "-a", "list", "table", family, kLossTable});
  if (left && left->exit_code == 0 && left->output.find("\"rule\"") == std::string::npos)
    (void)run_tool(netns, "nft", {"delete", "table", family, kLossTable});
}

// Whether `iptables` here is iptables-nft (xtables-nft-multi, however the distribution links
// it): then rules made over nf_tables netlink in its own encoding are the ones it lists and
// deletes (netlink/nft_message.h). An iptables-legacy host keeps iptables' rules in x_tables,
// where `iptables -S` never sees nf_tables ones, so there — and only there — the NFQUEUE rules
// still go through iptables-restore. Read once per process.
bool iptables_is_nft() {
  static const bool nft = [] {
    const std::string tool = find_tool("iptables");
    char real[PATH_MAX];
    if (tool.empty() || ::realpath(tool.c_str(), real) == nullptr) return false;
    return std::string_view(real).ends_with("/xtables-nft-multi");
  }();
  return nft;
}

// `rules` (and `probe`'s rule last) in one nf_tables transaction in `netns` ("" here).
Status add_queue_rules_netlink(const std::string& netns, const std::vector<MarkedQueue>& rules,
                               const ProbeRule* probe, const std::string& where) {
  auto batch = queue_rules_batch(rules, probe);
  if (!batch) return std::unexpected(with_context(batch.error(), where));
  // A socket opened inside the namespace stays bound to it (ScopedNetns on this thread only).
  auto sock = [&]() -> Result<netlink::NlSocket> {
    if (netns.empty()) return netlink::NlSocket::open(NETLINK_NETFILTER);
    auto fd = netlink::open_named_netns(netns);
    if (!fd) return std::unexpected(fd.error());
    return netlink::NlSocket::open_in(fd->get(), NETLINK_NETFILTER);
  }();
  if (!sock) return std::unexpected(with_context(sock.error(), where));
  if (auto r = sock->transact(std::move(batch->bytes), batch->what); !r)
    return std::unexpected(with_context(r.error(), where));
  return {};
}

// The same rules through `iptables-restore --noflush` (one transaction): iptables-legacy hosts.
Status add_queue_rules_tool(const std::string& netns, const std::vector<MarkedQueue>& rules,
                            const ProbeRule* probe, const std::string& what) {
  const std::string script = queue_restore_script(rules, probe);
  auto r = run_checked(netns, what, "iptables-restore", {"-w", "5", "--noflush"}, &script);
  if (!r) return std::unexpected(r.error());
  return {};
}

// NFQUEUE rules, all or none: over netlink where iptables is iptables-nft, else the tool.
Status add_queue_rules(const std::string& netns, const std::vector<MarkedQueue>& rules,
                       const ProbeRule* probe, const std::string& what) {
  if (!iptables_is_nft()) return add_queue_rules_tool(netns, rules, probe, what);
  return add_queue_rules_netlink(netns, rules, probe,
                                 what + (netns.empty() ? "" : " in netns " + netns));
}

}  // namespace

Result<netlink::NftBatch> queue_rules_batch(const std::vector<MarkedQueue>& rules,
                                            const ProbeRule* probe, uint32_t first_seq) {
  std::vector<netlink::XtQueueRule> xt;
  for (const auto& [rule, marker] : rules)
    xt.push_back({rule.ifname, rule.egress, std::nullopt, marker, rule.queue});
  // probe_rule_args: POSTROUTING -o lo -m mark --mark M.
  if (probe) xt.push_back({"lo", true, probe->mark, probe->marker, probe->queue});
  return netlink::xt_queue_batch(xt, first_seq);
}

uint32_t loss_ppm(double percent) {
  if (!(percent > 0)) return 0;
  const double per = static_cast<double>(kLossModulus) / 100;  // ppm per percent
  return std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(std::min(percent, 100.0) * per)));
}

Status check_marker(const std::string& marker) {
  if (marker.empty() || marker.size() > 120)
    return bad_input("owner marker must be 1-120 characters, got " + std::to_string(marker.size()));
  for (unsigned char c : marker)
    if (c < 0x20 || c == 0x7f || c == '"' || c == '\\')
      return bad_input("owner marker \"" + marker + "\" has a quote, backslash or control byte");
  return {};
}

std::vector<std::string> queue_rule_args(const QueueRule& rule, const std::string& marker,
                                         bool add) {
  // No --queue-bypass, on purpose: fail-closed (netfilter_rules.h).
  return {"-w",
          "5",
          "-t",
          "mangle",
          add ? "-A" : "-D",
          rule.egress ? "POSTROUTING" : "PREROUTING",
          rule.egress ? "-o" : "-i",
          rule.ifname,
          "-m",
          "comment",
          "--comment",
          marker,
          "-j",
          "NFQUEUE",
          "--queue-num",
          std::to_string(rule.queue)};
}

std::vector<std::string> probe_rule_args(uint16_t queue, uint32_t mark, const std::string& marker,
                                         bool add) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%08x", mark);
  return {"-w",          "5",  "-t",      "mangle",      add ? "-A" : "-D",
          "POSTROUTING", "-o", "lo",      "-m",          "mark",
          "--mark",      hex,  "-m",      "comment",     "--comment",
          marker,        "-j", "NFQUEUE", "--queue-num", std::to_string(queue)};
}

namespace {

const char* family_of(const LossRule& rule) {
  return rule.bridge ? "bridge" : "inet";
}

std::string chain_decl(const std::string& family, const std::string& chain) {
  // The bridge family has no "raw" priority name; -300 is raw's value, ahead of anything else.
  return "add chain " + family + " " + kLossTable + " " + chain + " { type filter hook " + chain +
         (family == "bridge" ? " priority -300" : " priority raw") + "; policy accept; }";
}

// The table and its chains (inet: both; bridge: prerouting), idempotent.
std::string table_decl(const std::string& family) {
  std::string s = "add table " + family + " " + kLossTable;
  if (family == "bridge") return s + "; " + chain_decl(family, kLossChain);
  for (const char* chain : {kLossChain, kLossEgressChain}) s += "; " + chain_decl(family, chain);
  return s;
}

// "add rule ..." alone.
std::string loss_rule_line(const LossRule& rule, const std::string& marker) {
  const std::string chain = rule.egress ? kLossEgressChain : kLossChain;
  return std::string("add rule ") + family_of(rule) + " " + kLossTable + " " + chain +
         (rule.egress ? " oif \"" : " iif \"") + rule.ifname + "\"" +
         // 100 %: no numgen (its right-hand side must stay below the modulus).
         (rule.ppm >= kLossModulus ? std::string()
                                   : " numgen random mod " + std::to_string(kLossModulus) + " < " +
                                         std::to_string(rule.ppm)) +
         " counter drop comment \"" + marker + "\"";
}

}  // namespace

std::string loss_rule_script(const LossRule& rule, const std::string& marker) {
  return std::string("add table ") + family_of(rule) + " " + kLossTable + "; " +
         chain_decl(family_of(rule), rule.egress ? kLossEgressChain : kLossChain) + "; " +
         loss_rule_line(rule, marker);
}

std::string loss_swap_script(const LossRule& rule, const std::string& marker,
                             const std::vector<MarkedRule>& old) {
  // The tables and chains first, so the deletes below always find them (add is idempotent):
  // the new rule's family, then any other family an old rule is in.
  std::string s = table_decl(family_of(rule));
  for (const auto& r : old)
    if (r.kind == MarkedRule::Kind::kLoss && r.family != family_of(rule) &&
        s.find("add table " + r.family + " ") == std::string::npos)
      s += "; " + table_decl(r.family);
  if (rule.ppm > 0) s += "; " + loss_rule_line(rule, marker);
  for (const auto& r : old)
    if (r.kind == MarkedRule::Kind::kLoss)
      s += "; delete rule " + r.family + " " + kLossTable + " " + r.chain + " handle " +
           std::to_string(r.handle);
  return s;
}

std::string queue_restore_script(const std::vector<MarkedQueue>& rules, const ProbeRule* probe) {
  // The tools' words after "-w 5 -t mangle", the comment quoted (check_marker: no '"').
  auto line = [](const std::vector<std::string>& words) {
    std::string s;
    for (size_t i = 4; i < words.size(); ++i) {
      s += i == 4 ? "" : " ";
      s += words[i - 1] == "--comment" ? "\"" + words[i] + "\"" : words[i];
    }
    return s + "\n";
  };
  std::string s = "*mangle\n";
  for (const auto& [rule, marker] : rules) s += line(queue_rule_args(rule, marker, true));
  if (probe) s += line(probe_rule_args(probe->queue, probe->mark, probe->marker, true));
  return s + "COMMIT\n";
}

std::string loss_rules_script(const std::vector<MarkedLoss>& rules) {
  std::string decls, lines;
  for (const auto& [rule, marker] : rules) {
    if (rule.ppm == 0) continue;
    const std::string decl =
        chain_decl(family_of(rule), rule.egress ? kLossEgressChain : kLossChain) + "\n";
    const std::string table = std::string("add table ") + family_of(rule) + " " + kLossTable + "\n";
    if (decls.find(table) == std::string::npos) decls += table;
    if (decls.find(decl) == std::string::npos) decls += decl;
    lines += loss_rule_line(rule, marker) + "\n";
  }
  return lines.empty() ? "" : decls + lines;
}

std::vector<MarkedRule> parse_iptables_rules(const std::string& save_text,
                                             const std::string& marker) {
  std::vector<MarkedRule> out;
  size_t pos = 0;
  while (pos < save_text.size()) {
    size_t nl = save_text.find('\n', pos);
    std::string line = save_text.substr(pos, nl == std::string::npos ? nl : nl - pos);
    pos = nl == std::string::npos ? save_text.size() : nl + 1;
    auto words = shell_words(line);
    if (words.size() < 2 || words[0] != "-A") continue;
    MarkedRule r;
    bool nfqueue = false;
    for (size_t i = 0; i + 1 < words.size(); ++i) {
      if (words[i] == "-i" || words[i] == "-o") r.ifname = words[i + 1];
      if (words[i] == "--comment") r.comment = words[i + 1];
      if (words[i] == "-j" && words[i + 1] == "NFQUEUE") nfqueue = true;
      if (words[i] == "--queue-num")
        r.queue = static_cast<uint16_t>(std::strtoul(words[i + 1].c_str(), nullptr, 10));
    }
    if (!nfqueue || !has_marker(r.comment, marker)) continue;
    r.kind = MarkedRule::Kind::kQueue;
    r.iptables = std::move(words);
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<MarkedRule>> parse_nft_rules(const std::string& json_text,
                                                const std::string& marker) {
  auto doc = nlohmann::json::parse(json_text, nullptr, false);
  if (doc.is_discarded() || !doc.contains("nftables"))
    return fail("nft -j printed something that is not its JSON: " + trimmed(json_text));
  std::vector<MarkedRule> out;
  for (const auto& item : doc["nftables"]) {
    if (!item.contains("rule")) continue;
    const auto& rule = item["rule"];
    MarkedRule r;
    r.kind = MarkedRule::Kind::kLoss;
    r.comment = rule.value("comment", "");
    if (!has_marker(r.comment, marker)) continue;
    r.handle = rule.value("handle", uint64_t{0});
    r.ppm = kLossModulus;  // a drop without numgen drops everything
    for (const auto& e : rule.value("expr", nlohmann::json::array())) {
      if (!e.contains("match")) continue;
      const auto& m = e["match"];
      const auto& left = m.value("left", nlohmann::json::object());
      if (left.contains("meta") && m["right"].is_string()) r.ifname = m["right"];
      if (left.contains("numgen") && m["right"].is_number_unsigned()) {
        // Scaled to ppm: a rule of another modulus (10000 before 0.0001 % steps) reads the same.
        // nft -j prints a modulus above 2^31 as a negative number; count it as unsigned.
        const auto& gen = left["numgen"];
        uint64_t mod = kLossModulus;
        if (gen.contains("mod") && gen["mod"].is_number_integer())
          mod = static_cast<uint32_t>(gen["mod"].get<int64_t>());
        const uint64_t k = m["right"].get<uint64_t>();
        r.ppm = mod == 0 ? kLossModulus
                         : static_cast<uint32_t>(std::min<uint64_t>(
                               kLossModulus, (k * kLossModulus + mod / 2) / mod));
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

Status add_queue_rule(const std::string& netns, const QueueRule& rule, const std::string& marker) {
  TB_TRY(check_marker(marker));
  return add_queue_rules(netns, {{rule, marker}}, nullptr,
                         "add NFQUEUE " + std::to_string(rule.queue) + " rule on " + rule.ifname);
}

Status remove_queue_rule(const std::string& netns, const QueueRule& rule,
                         const std::string& marker) {
  TB_TRY(check_marker(marker));
  auto run = run_tool(netns, "iptables", queue_rule_args(rule, marker, false));
  if (!run) return std::unexpected(run.error());
  // iptables-nft says "Bad rule (does a matching rule exist in that chain?)" for a rule that is
  // not there, and "No chain/target/match by that name" when the chain is missing.
  if (run->exit_code == 0 || run->output.find("does a matching rule exist") != std::string::npos ||
      run->output.find("No chain/target/match") != std::string::npos)
    return {};
  return fail("remove NFQUEUE " + std::to_string(rule.queue) + " rule on " + rule.ifname +
              " in netns " + netns + ": iptables exit " + std::to_string(run->exit_code) + ": " +
              trimmed(run->output));
}

Status remove_probe_rule(const std::string& netns, uint16_t queue, uint32_t mark,
                         const std::string& marker) {
  TB_TRY(check_marker(marker));
  auto run = run_tool(netns, "iptables", probe_rule_args(queue, mark, marker, false));
  if (!run) return std::unexpected(run.error());
  // As remove_queue_rule: a rule or chain that is not there is success.
  if (run->exit_code == 0 || run->output.find("does a matching rule exist") != std::string::npos ||
      run->output.find("No chain/target/match") != std::string::npos)
    return {};
  return fail("remove the release probe's NFQUEUE " + std::to_string(queue) +
              " rule: iptables exit " + std::to_string(run->exit_code) + ": " +
              trimmed(run->output));
}

Status add_probe_rule(const std::string& netns, uint16_t queue, uint32_t mark,
                      const std::string& marker) {
  TB_TRY(remove_probe_rule(netns, queue, mark, marker));
  const ProbeRule probe{queue, mark, marker};
  return add_queue_rules(netns, {}, &probe,
                         "add the release probe's NFQUEUE " + std::to_string(queue) + " rule");
}

Status add_rules(const NetnsRules& rules) {
  for (const auto& q : rules.queue) TB_TRY(check_marker(q.marker));
  for (const auto& l : rules.loss) {
    TB_TRY(check_marker(l.marker));
    if (l.rule.egress && l.rule.bridge)
      return bad_input("a bridge port's loss rule is on its ingress");
    if (l.rule.ppm > kLossModulus) return bad_input("loss above 100 %");
  }
  if (!rules.queue.empty() || rules.release_probe) {
    const ProbeRule probe{kProbeQueue, kProbeMark, kProbeMarker};
    TB_TRY(add_queue_rules(rules.netns, rules.queue, rules.release_probe ? &probe : nullptr,
                           "add " + std::to_string(rules.queue.size()) + " NFQUEUE rule(s)" +
                               (rules.release_probe ? " and the release probe's" : "")));
  }
  if (const std::string script = loss_rules_script(rules.loss); !script.empty()) {
    auto r = run_checked(rules.netns, "add loss rule(s)", "nft", {"-f", "-"}, &script);
    if (!r) return std::unexpected(r.error());
  }
  return {};
}

Status add_rules(const std::vector<NetnsRules>& all, int parallel) {
  std::vector<Status> done(all.size());
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i; (i = next.fetch_add(1)) < all.size();) done[i] = add_rules(all[i]);
  };
  const size_t n = std::min<size_t>(std::max(parallel, 1), all.size());
  std::vector<std::jthread> threads;
  for (size_t t = 1; t < n; ++t) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  size_t failed = 0;
  Status first;
  for (auto& d : done)
    if (!d && failed++ == 0) first = std::move(d);
  if (failed > 1) first.error().message += " (and " + std::to_string(failed - 1) + " more)";
  return first;
}

Status add_loss_rule(const std::string& netns, const LossRule& rule, const std::string& marker) {
  TB_TRY(check_marker(marker));
  if (rule.egress && rule.bridge) return bad_input("a bridge port's loss rule is on its ingress");
  if (rule.ppm == 0) return {};
  if (rule.ppm > kLossModulus) return bad_input("loss above 100 %");
  auto r = run_checked(netns, "add loss rule on " + rule.ifname, "nft",
                       {loss_rule_script(rule, marker)});
  if (!r) return std::unexpected(r.error());
  return {};
}

Status replace_loss_rule(const std::string& netns, const LossRule& rule, const std::string& marker,
                         const std::vector<std::string>& replaces) {
  TB_TRY(check_marker(marker));
  if (rule.egress && rule.bridge) return bad_input("a bridge port's loss rule is on its ingress");
  if (rule.ppm > kLossModulus) return bad_input("loss above 100 %");
  std::string prefix = marker;  // one listing that finds every comment in `replaces`
  for (const auto& c : replaces)
    while (!c.starts_with(prefix)) prefix.pop_back();
  if (prefix.empty()) return bad_input("loss rule markers with nothing in common");
  auto found = list_marked_rules(netns, prefix);
  if (!found) return std::unexpected(found.error());
  std::vector<MarkedRule> old;
  for (auto& r : *found)
    if (r.kind == MarkedRule::Kind::kLoss &&
        std::ranges::find(replaces, r.comment) != replaces.end())
      old.push_back(std::move(r));
  if (old.empty() && rule.ppm == 0) return {};
  auto r = run_checked(netns, "swap loss rule on " + rule.ifname, "nft",
                       {loss_swap_script(rule, marker, old)});
  if (!r) return std::unexpected(r.error());
  if (rule.ppm == 0) drop_empty_table(netns, family_of(rule));
  for (const auto& o : old)
    if (o.family != family_of(rule)) drop_empty_table(netns, o.family);
  return {};
}

Result<std::vector<MarkedRule>> list_marked_rules(const std::string& netns,
                                                  const std::string& marker) {
  TB_TRY(check_marker(marker));
  std::vector<MarkedRule> out;
  for (const char* chain : {"PREROUTING", "POSTROUTING"}) {
    auto save = run_checked(netns, "list NFQUEUE rules", "iptables",
                            {"-w", "5", "-t", "mangle", "-S", chain});
    if (!save) return std::unexpected(save.error());
    auto found = parse_iptables_rules(*save, marker);
    out.insert(out.end(), found.begin(), found.end());
  }
  const std::pair<const char*, const char*> chains[] = {
      {"inet", kLossChain}, {"inet", kLossEgressChain}, {"bridge", kLossChain}};
  for (const auto& [family, chain] : chains) {
    auto nft = run_tool(netns, "nft", {"-j", "-a", "list", "chain", family, kLossTable, chain});
    if (!nft) return std::unexpected(nft.error());
    if (nft->exit_code != 0) {
      if (nft->output.find("No such file or directory") != std::string::npos) continue;
      return fail("list loss rules in netns " + netns + ": nft exit " +
                  std::to_string(nft->exit_code) + ": " + trimmed(nft->output));
    }
    auto loss = parse_nft_rules(nft->output, marker);
    if (!loss) return std::unexpected(loss.error());
    for (auto& r : *loss) r.chain = chain, r.family = family;
    out.insert(out.end(), loss->begin(), loss->end());
  }
  return out;
}

Status remove_marked_rules(const std::string& netns, const std::string& marker) {
  auto rules = list_marked_rules(netns, marker);
  if (!rules) return std::unexpected(rules.error());
  Status first;
  for (const auto& r : *rules) {
    Result<std::string> done;
    if (r.kind == MarkedRule::Kind::kQueue) {
      std::vector<std::string> args{"-w", "5", "-t", "mangle"};
      args.insert(args.end(), r.iptables.begin(), r.iptables.end());
      args[4] = "-D";  // "-A PREROUTING ..." as printed, deleted by the same words
      done = run_checked(netns, "remove NFQUEUE rule on " + r.ifname, "iptables", args);
    } else {
      done = run_checked(
          netns, "remove loss rule on " + r.ifname, "nft",
          {"delete", "rule", r.family, kLossTable, r.chain, "handle", std::to_string(r.handle)});
    }
    if (!done && first) first = std::unexpected(done.error());
  }
  for (const char* family : {"inet", "bridge"})
    if (std::ranges::any_of(*rules, [&](const MarkedRule& r) {
          return r.kind == MarkedRule::Kind::kLoss && r.family == family;
        }))
      drop_empty_table(netns, family);
  return first;
}

}  // namespace tb::stage
