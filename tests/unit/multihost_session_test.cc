// The wire, the mirrored directories and the hello between hosts (src/multihost/), over
// loopback: no root, no lab.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "multihost/mirror.h"
#include "multihost/session.h"
#include "multihost/wire.h"
#include "temp_dir.h"

namespace tb::multihost {
namespace {
using tb::testing_util::TempDir;

const Ipv4 kLo{0x7f000001};

// A port for one test: spread by pid so parallel test processes do not meet.
// Below the kernel's ephemeral range (32768-60999 by default), which the client sockets of
// tests and labs running beside this one draw from: a port there can be taken by one of them
// (this test once waited its 20 s for a coordinator that could not listen, under load). The
// unit tests that listen on loopback keep to their own ranges: this one 20000-23999,
// verify_hosts_test 24000-25999, ckpt_test 26000-31999.
int test_port(int k) {
  return 20000 + static_cast<int>(::getpid() % 1000) * 4 + k;
}

void put(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string get(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST(MultihostWire, Base64RoundTripsEveryByte) {
  std::string all;
  for (int i = 0; i < 256; ++i) all += static_cast<char>(i);
  for (size_t n : {0, 1, 2, 3, 4, 5, 255, 256}) {
    const std::string in = all.substr(0, n);
    auto out = base64_decode(base64_encode(in));
    ASSERT_TRUE(out) << n;
    EXPECT_EQ(*out, in) << n;
  }
  EXPECT_EQ(base64_encode("Man"), "TWFu");
  EXPECT_EQ(base64_encode("Ma"), "TWE=");
  EXPECT_FALSE(base64_decode("TWE"));
  EXPECT_FALSE(base64_decode("T!E="));
  EXPECT_FALSE(base64_decode("TW==TWFu"));  // padding only at the end
}

TEST(MultihostMirror, WholeFilesGoOnceAndSkipTemporariesBoardAndDotFiles) {
  TempDir a, b;
  DirMirror from(a.path(), DirMirror::Mode::kWhole), to(b.path(), DirMirror::Mode::kWhole);
  put(a.path() + "/r1.port.0", "4242");
  put(a.path() + "/r1/rank_0", std::string("\0\1bin", 5));  // Gloo's prefix directory
  put(a.path() + "/r1.port.1.tmp123-4", "half");            // core/safe_file.h's temporary
  put(a.path() + "/r1.progress", "board");
  put(a.path() + "/.r1/rank_1", "gloo's temporary");
  auto chunks = from.scan();
  ASSERT_EQ(chunks.size(), 2u);
  for (const auto& c : chunks) ASSERT_TRUE(to.apply(c)) << c.rel;
  EXPECT_EQ(get(b.path() + "/r1.port.0"), "4242");
  EXPECT_EQ(get(b.path() + "/r1/rank_0"), std::string("\0\1bin", 5));
  EXPECT_TRUE(from.scan().empty());  // sent once
  EXPECT_TRUE(to.scan().empty());    // what came in is not sent back
  put(a.path() + "/r1.port.1", "4343");
  ASSERT_EQ(from.scan().size(), 1u);
}

TEST(MultihostMirror, AppendSendsWholeLinesThenTheRestAtTheEnd) {
  TempDir a, b;
  DirMirror from(a.path(), DirMirror::Mode::kAppend, {"store", "job.json"});
  DirMirror to(b.path(), DirMirror::Mode::kAppend, {"store", "job.json"});
  put(a.path() + "/rank1.jsonl", "{\"a\":1}\n{\"b\"");
  put(a.path() + "/store/r1.port.0", "1");
  put(a.path() + "/job.json", "{}");
  auto c1 = from.scan();
  ASSERT_EQ(c1.size(), 1u);
  EXPECT_EQ(c1[0].data, "{\"a\":1}\n");
  ASSERT_TRUE(to.apply(c1[0]));
  ASSERT_TRUE(to.apply(c1[0]));  // again: already there, skipped
  put(a.path() + "/rank1.jsonl", "{\"a\":1}\n{\"b\":2}\n");
  put(a.path() + "/logs/rank1.log", "no newline yet");
  auto c2 = from.scan();
  ASSERT_EQ(c2.size(), 1u);
  EXPECT_EQ(c2[0].offset, 8u);
  ASSERT_TRUE(to.apply(c2[0]));
  auto c3 = from.scan(true);
  ASSERT_EQ(c3.size(), 1u);
  ASSERT_TRUE(to.apply(c3[0]));
  EXPECT_EQ(get(b.path() + "/rank1.jsonl"), "{\"a\":1}\n{\"b\":2}\n");
  EXPECT_EQ(get(b.path() + "/logs/rank1.log"), "no newline yet");
  // A gap is an error; a path outside, a dot file or a skipped name is refused.
  EXPECT_FALSE(to.apply({"rank1.jsonl", 1000, "x"}));
  EXPECT_FALSE(to.apply({"../escape", 0, "x"}));
  EXPECT_FALSE(to.apply({"/etc/passwd", 0, "x"}));
  EXPECT_FALSE(to.apply({"a//b", 0, "x"}));
  EXPECT_FALSE(to.apply({".hidden", 0, "x"}));
  EXPECT_FALSE(to.apply({"job.json", 0, "x"}));
  EXPECT_FALSE(to.apply({"a/b/c/d/e", 0, "x"}));
  EXPECT_FALSE(std::filesystem::exists(b.path() + "/../escape"));
  auto j = chunk_from_json(to_json(Chunk{"x/y", 3, std::string("\0z", 2)}));
  ASSERT_TRUE(j);
  EXPECT_EQ(j->rel, "x/y");
  EXPECT_EQ(j->offset, 3u);
  EXPECT_EQ(j->data, std::string("\0z", 2));
}

Hello hello(const std::string& host, const std::string& plan = "p1",
            const std::string& job = "j1") {
  return Hello{"lab", host, "bench", plan, job};
}

TEST(MultihostSession, PeersJoinAndMessagesFlowBothWays) {
  std::atomic<bool> stop{false};
  const int port = test_port(0);
  std::vector<Result<Peer>> peers;
  std::thread t([&] {
    for (const char* h : {"b", "c"})
      peers.push_back(Peer::join(hello(h), "a", kLo, port, std::chrono::seconds(20), stop));
  });
  auto coord =
      Coordinator::gather(hello("a"), kLo, port, {"b", "c"}, std::chrono::seconds(20), stop);
  t.join();
  ASSERT_TRUE(coord) << coord.error().message;
  ASSERT_EQ(peers.size(), 2u);
  for (auto& p : peers) ASSERT_TRUE(p) << p.error().message;
  coord->broadcast({{"job", 7}});
  for (auto& p : peers) {  // (for c, "job" may come in the same read as its welcome)
    std::vector<nlohmann::json> got;
    for (int i = 0; i < 100 && got.empty(); ++i) {
      auto r = p->receive(50);
      ASSERT_TRUE(r);
      got = *r;
    }
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0]["job"], 7);
  }
  ASSERT_TRUE(peers[1]->send({{"bye", true}}));
  std::vector<Message> msgs;
  for (int i = 0; i < 100 && msgs.empty(); ++i) msgs = coord->receive(50);
  ASSERT_EQ(msgs.size(), 1u);
  EXPECT_EQ(msgs[0].host, "c");
  peers[0] = fail("gone");  // closes b's connection
  bool closed = false;
  for (int i = 0; i < 100 && !closed; ++i)
    for (const auto& m : coord->receive(50))
      closed = closed || (m.host == "b" && m.body.contains("closed"));
  EXPECT_TRUE(closed);
  EXPECT_FALSE(coord->open("b"));
  EXPECT_TRUE(coord->open("c"));
}

TEST(MultihostSession, AnotherPlanDigestIsExit2OnBothSides) {
  std::atomic<bool> stop{false};
  const int port = test_port(1);
  std::optional<Result<Peer>> peer;
  std::thread t(
      [&] { peer = Peer::join(hello("b", "p2"), "a", kLo, port, std::chrono::seconds(20), stop); });
  auto coord = Coordinator::gather(hello("a"), kLo, port, {"b"}, std::chrono::seconds(20), stop);
  t.join();
  ASSERT_FALSE(coord);
  EXPECT_EQ(coord.error().exit_code, kExitBadInput);
  EXPECT_NE(coord.error().message.find("plan digest p2 differs"), std::string::npos)
      << coord.error().message;
  ASSERT_TRUE(peer && !*peer);
  EXPECT_EQ((*peer).error().exit_code, kExitBadInput);
  EXPECT_NE((*peer).error().message.find("refused this host"), std::string::npos)
      << (*peer).error().message;
  EXPECT_NE((*peer).error().message.find("different scenarios"), std::string::npos);
}

TEST(MultihostSession, AnotherJobIsRefusedNamingTheFlags) {
  std::atomic<bool> stop{false};
  const int port = test_port(2);
  std::optional<Result<Peer>> peer;
  std::thread t([&] {
    peer = Peer::join(hello("b", "p1", "j2"), "a", kLo, port, std::chrono::seconds(20), stop);
  });
  auto coord = Coordinator::gather(hello("a"), kLo, port, {"b"}, std::chrono::seconds(20), stop);
  t.join();
  ASSERT_FALSE(coord);
  EXPECT_NE(coord.error().message.find("same flags"), std::string::npos) << coord.error().message;
}

TEST(MultihostSession, AHostThatNeverComesIsExit2NamingIt) {
  std::atomic<bool> stop{false};
  auto coord = Coordinator::gather(hello("a"), kLo, test_port(3), {"b"},
                                   std::chrono::milliseconds(300), stop);
  ASSERT_FALSE(coord);
  EXPECT_EQ(coord.error().exit_code, kExitBadInput);
  EXPECT_NE(coord.error().message.find("host(s) b did not join"), std::string::npos)
      << coord.error().message;
  auto peer = Peer::join(hello("b"), "a", kLo, test_port(3), std::chrono::milliseconds(300), stop);
  ASSERT_FALSE(peer);
  EXPECT_EQ(peer.error().exit_code, kExitBadInput);
  EXPECT_NE(peer.error().message.find("could not reach the coordinator, host a (127.0.0.1:"),
            std::string::npos)
      << peer.error().message;
}

}  // namespace
}  // namespace tb::multihost
