// The session plumbing the verbs across hosts share (multihost/relay.h) and the wire's failure
// modes (multihost/wire.h), over loopback with the other hosts played by threads: what only
// separate machines would show — a clock offset, hosts started far apart, a peer that stops
// taking bytes, a message longer than a line — made to happen here. No root, no lab.
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "launch/across_hosts.h"
#include "multihost/relay.h"
#include "multihost/session.h"
#include "multihost/wire.h"
#include "temp_dir.h"

namespace tb::multihost::relay_test {
namespace {
using std::chrono::milliseconds;

const Ipv4 kLo{0x7f000001};

// A port for one test: spread by pid, below the kernel's ephemeral range; the unit tests that
// listen on loopback keep to their own ranges (multihost_session_test.cc test_port): this one
// 16000-19999.
int test_port(int k) {
  return 16000 + static_cast<int>(::getpid() % 1000) * 4 + k;
}

Hello hello(const std::string& host) {
  return Hello{"lab", host, "run", "p1", "j1"};
}

Roles roles_of(const std::string& me, const std::vector<std::string>& peers) {
  Roles r;
  r.me = me;
  r.coordinator = "a";
  r.coordinator_addr = kLo;
  r.peers = peers;
  return r;
}

// A connected pair over loopback: {the listener's side, the connecting side}.
std::pair<Conn, Conn> conn_pair(int port) {
  auto l = Listener::open(kLo, port);
  EXPECT_TRUE(l) << l.error().message;
  std::atomic<bool> stop{false};
  auto c = connect_to(kLo, port, std::chrono::steady_clock::now() + std::chrono::seconds(10), stop);
  EXPECT_TRUE(c) << c.error().message;
  std::optional<Conn> s;
  for (int i = 0; i < 100 && !s; ++i) {
    auto a = l->accept(100);
    EXPECT_TRUE(a);
    if (a && *a) s.emplace(std::move(**a));
  }
  EXPECT_TRUE(s.has_value());
  return {std::move(*s), std::move(*c)};
}

// Risk 1 of the review: a joining host's t0. Its clock runs 7 s ahead of the coordinator's (as
// on another machine), and it reads the start message 150 ms after it arrived (a busy host):
// it still fires at the coordinator's t0, to within the measured offset's error — never the
// delay of the message or of its own reading, which a t0 sent as "in N ns" would add.
TEST(MultihostRelay, AJoiningHostsT0IsTheCoordinatorsOnItsOwnClock) {
  constexpr int64_t kSkew = 7'000'000'000;
  std::atomic<bool> stop{false};
  const int port = test_port(0);
  int64_t t0_b = 0;
  std::string b_error;
  std::thread b([&] {
    auto p =
        PeerRelay::join(hello("b"), roles_of("b", {"b"}), port, std::chrono::seconds(20), stop);
    if (!p) {
      b_error = p.error().message;
      return;
    }
    p->set_clock([] { return monotonic_ns() + kSkew; });
    auto job = p->await_job(stop);
    auto clocks = job ? p->answer_clocks(std::chrono::seconds(20), stop) : Status{};
    if (!job || !clocks) {
      b_error = !job ? job.error().message : clocks.error().message;
      return;
    }
    std::this_thread::sleep_for(milliseconds(150));  // the start message waits unread
    auto start = p->await("start", std::chrono::seconds(20), stop);
    if (!start) {
      b_error = start.error().message;
      return;
    }
    t0_b = p->t0_of(*start);
    (void)p->send({{"bye", true}});
  });
  auto c = CoordinatorRelay::open(hello("a"), roles_of("a", {"b"}), port, std::chrono::seconds(20),
                                  stop);
  ASSERT_TRUE(c) << c.error().message;
  c->broadcast({{"job", {{"run_id", "r1"}}}});
  auto clocks = c->measure_clocks(stop);
  ASSERT_TRUE(clocks) << clocks.error().message;
  const int64_t offset = clocks->offset.at("b"), error = clocks->error.at("b");
  // The true offset lies within the shortest round trip's half of the measured one.
  EXPECT_LE(std::llabs(offset - kSkew), error) << offset << " ± " << error;
  EXPECT_LT(error, 50'000'000) << "loopback round trips of " << error * 2 << " ns";
  const int64_t t0 = monotonic_ns() + 1'000'000'000;
  c->start_at(t0, clocks->offset);
  b.join();
  ASSERT_EQ(b_error, "");
  // b's t0 on the coordinator's clock: the same moment, within the offset's error.
  EXPECT_LE(std::llabs(t0_b - kSkew - t0), error)
      << "b fires " << (t0_b - kSkew - t0) << " ns late";
}

// A joining host hears of its coordinator's end before its own part once (PeerRelay::on_gone,
// which cuts a run short there): the coordinator's verdict before this host finished (it failed
// on its side), or its connection gone; never a verdict after this host's part and bye, however
// the connection ends after it.
TEST(MultihostRelay, AJoinerIsToldOnceWhenItsCoordinatorEndsBeforeItsPart) {
  for (const std::string how : {"early verdict", "gone", "normal end"}) {
    SCOPED_TRACE(how);
    std::atomic<bool> stop{false};
    const int port = test_port(3);
    std::vector<std::string> told;
    std::mutex told_mu;
    std::string b_error;
    std::thread b([&] {
      auto p =
          PeerRelay::join(hello("b"), roles_of("b", {"b"}), port, std::chrono::seconds(20), stop);
      if (!p) {
        b_error = p.error().message;
        return;
      }
      p->on_gone([&](const std::string& what) {
        std::lock_guard lk(told_mu);
        told.push_back(what);
      });
      auto job = p->await_job(stop);
      if (!job) {
        b_error = job.error().message;
        return;
      }
      p->run_in_background();
      if (how == "normal end") {
        (void)p->finish();
        (void)p->verdict(std::chrono::seconds(10), stop);
      } else {
        (void)p->await("start", std::chrono::seconds(10), stop);  // never comes
      }
      std::this_thread::sleep_for(milliseconds(200));  // the connection's end read too
      p->halt();
    });
    {
      auto c = CoordinatorRelay::open(hello("a"), roles_of("a", {"b"}), port,
                                      std::chrono::seconds(20), stop);
      ASSERT_TRUE(c) << c.error().message;
      c->broadcast({{"job", {{"run_id", "r1"}}}});
      if (how == "early verdict") c->done({false, 1, "/r"});
      if (how == "normal end") {
        c->finish(std::chrono::seconds(10));
        c->done({true, 0, "/r"});
      }
    }  // the coordinator's end closes the connection
    b.join();
    ASSERT_EQ(b_error, "");
    std::lock_guard lk(told_mu);
    if (how == "normal end") {
      EXPECT_TRUE(told.empty()) << told[0];
    } else {
      ASSERT_EQ(told.size(), 1u);
      EXPECT_NE(told[0].find(how == "gone" ? "host a went away" : "host a ended the run before"),
                std::string::npos)
          << told[0];
    }
  }
}

// Risk 3: with three hosts, the coordinator sends the job once the last has joined, up to its
// join timeout after it started; an early joiner waits for the job at least that long. Here
// the join timeout is 3 s and c comes 2.5 s after b (as hosts started 40 s apart under the
// 60 s default): b gets its job. (Before: a joiner waited half the coordinator's limit.)
TEST(MultihostRelay, AnEarlyJoinerWaitsAsLongAsTheCoordinatorGathersTheOthers) {
  std::atomic<bool> stop{false};
  const int port = test_port(1);
  const milliseconds join(3000);
  std::vector<std::string> errors(2);
  std::vector<nlohmann::json> jobs(2);
  auto peer = [&](int i, const std::string& name, milliseconds after) {
    return std::thread([&, i, name, after] {
      std::this_thread::sleep_for(after);
      auto p = PeerRelay::join(hello(name), roles_of(name, {"b", "c"}), port, join, stop);
      if (!p) {
        errors[i] = p.error().message;
        return;
      }
      auto job = p->await_job(stop);
      if (!job) errors[i] = job.error().message;
      if (job) jobs[i] = *job;
    });
  };
  std::thread b = peer(0, "b", milliseconds(0)), c = peer(1, "c", milliseconds(2500));
  const auto t = std::chrono::steady_clock::now();
  auto coord = CoordinatorRelay::open(hello("a"), roles_of("a", {"b", "c"}), port, join, stop);
  ASSERT_TRUE(coord) << coord.error().message;
  EXPECT_GE(std::chrono::steady_clock::now() - t, milliseconds(2000));
  coord->broadcast({{"job", 42}});
  b.join();
  c.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
  EXPECT_EQ(jobs[0], 42);
  EXPECT_EQ(jobs[1], 42);
  // The arithmetic behind it: the job may come join_timeout after this host joined.
  static_assert(kJobMargin.count() > 0);
}

// Risk 4: a peer that takes nothing. The send that cannot finish ends the connection: the other
// side reads every whole message sent before it, then the end — never half a line followed by
// the next message (which it would take for a broken line, or worse, for a message).
TEST(MultihostWire, ASendThatTimesOutEndsTheConnectionAndLeavesNoHalfLine) {
  auto [server, client] = conn_pair(test_port(2));
  const nlohmann::json big = {{"append", std::string(256 * 1024, 'x')}};
  int sent = 0;
  Status last{};
  for (int i = 0; i < 400 && last; ++i) {  // the socket buffers fill within a few MiB
    last = client.send(big, milliseconds(200));
    if (last) ++sent;
  }
  ASSERT_FALSE(last) << "the peer took " << sent << " messages without reading";
  EXPECT_NE(last.error().message.find("the connection is ended"), std::string::npos)
      << last.error().message;
  EXPECT_TRUE(client.closed());
  EXPECT_NE(client.closed_why().find("bytes of a message"), std::string::npos);
  EXPECT_FALSE(client.send({{"bye", true}}));  // nothing follows the half line
  int got = 0;
  for (int i = 0; i < 2000 && !server.closed(); ++i) {
    std::vector<nlohmann::json> in;
    auto r = server.receive(in, 10);
    ASSERT_TRUE(r) << r.error().message;
    for (const auto& m : in) {
      EXPECT_TRUE(m.contains("append")) << m.dump().substr(0, 80);
      ++got;
    }
  }
  EXPECT_TRUE(server.closed());
  EXPECT_EQ(got, sent);
}

// Risk 7: a message longer than a line (a long run's part with every probe sample) goes in
// pieces and comes back whole.
TEST(MultihostWire, AMessageLongerThanALineGoesInPiecesAndComesBackWhole) {
  auto [server, client] = conn_pair(test_port(3));
  nlohmann::json part = nlohmann::json::array();
  for (int i = 0; i < 300'000; ++i) part.push_back({{"t", i}, {"rtt_us", 25000 + i % 97}});
  const nlohmann::json msg = {{"part", part}};
  ASSERT_GT(msg.dump().size(), kMaxLine);
  Status sent{};
  std::thread t([&] { sent = client.send(msg); });
  std::vector<nlohmann::json> in;
  for (int i = 0; i < 2000 && in.empty(); ++i) ASSERT_TRUE(server.receive(in, 10));
  t.join();
  ASSERT_TRUE(sent) << sent.error().message;
  ASSERT_EQ(in.size(), 1u);
  EXPECT_EQ(in[0], msg);
}

// Risk 5: a silent peer. Every connection, either side, keeps TCP keepalive and a user timeout
// of kSilentMs, so a machine that stops answering ends it within seconds (the e2e
// MultihostBench.AHostWhoseUnderlayIsCutIsNoticedWithinSeconds cuts one).
TEST(MultihostWire, EveryConnectionNoticesASilentPeerWithinSeconds) {
  auto [server, client] = conn_pair(test_port(0));
  for (const Conn* c : {&server, &client}) {
    int on = 0, idle = 0, intvl = 0;
    unsigned int user = 0;
    socklen_t len = sizeof on;
    ASSERT_EQ(::getsockopt(c->fd(), SOL_SOCKET, SO_KEEPALIVE, &on, &len), 0);
    len = sizeof idle;
    ASSERT_EQ(::getsockopt(c->fd(), IPPROTO_TCP, TCP_KEEPIDLE, &idle, &len), 0);
    len = sizeof intvl;
    ASSERT_EQ(::getsockopt(c->fd(), IPPROTO_TCP, TCP_KEEPINTVL, &intvl, &len), 0);
    len = sizeof user;
    ASSERT_EQ(::getsockopt(c->fd(), IPPROTO_TCP, TCP_USER_TIMEOUT, &user, &len), 0);
    EXPECT_EQ(on, 1);
    EXPECT_EQ(idle, kKeepIdleS);
    EXPECT_EQ(intvl, kKeepIntvlS);
    EXPECT_EQ(user, static_cast<unsigned>(kSilentMs));
    EXPECT_LE(kKeepIdleS * 1000 + kSilentMs, 10000);  // within the 10 s
  }
}

// Risk 6: a joining host of bench or launch runs the coordinator's run (its run id) under its
// own results root, never the coordinator's absolute paths.
TEST(MultihostRelay, BenchAndLaunchJoinersKeepTheirOwnResultsRoot) {
  workload::Job theirs, mine;
  theirs.run_id = "bench-20261205-a";
  theirs.results_dir = "/srv/a/results/lab/bench-20261205-a";
  theirs.store_dir = theirs.results_dir + "/store";
  mine.run_id = "bench-20261205-b";
  mine.results_dir = "/home/b/.local/state/testbedctl/results/lab/bench-20261205-b";
  mine.store_dir = mine.results_dir + "/store";
  const auto here = launch::job_here(theirs, mine);
  EXPECT_EQ(here.run_id, "bench-20261205-a");
  EXPECT_EQ(here.results_dir, "/home/b/.local/state/testbedctl/results/lab/bench-20261205-a");
  EXPECT_EQ(here.store_dir, here.results_dir + "/store");
  EXPECT_EQ(launch::job_digest(here), launch::job_digest(theirs));
  launch::CommandJob cmd;
  cmd.run_id = "launch-b";
  cmd.results_dir = "/var/lib/b/results/lab/launch-b";
  const auto c = launch::command_here(cmd, "launch-a");
  EXPECT_EQ(c.run_id, "launch-a");
  EXPECT_EQ(c.results_dir, "/var/lib/b/results/lab/launch-a");
}

// A joining host that refuses the job (here: it would run rank 0 and 1's pair over TCP, the
// coordinator over RDMA) says why to the coordinator before it leaves: the coordinator's
// errors and the ends of that host's ranks carry the joiner's reason, not only "went away".
TEST(MultihostRelay, AJoinerThatRefusesTheJobTellsTheCoordinatorWhy) {
  std::atomic<bool> stop{false};
  const int port = test_port(2);
  const testing_util::TempDir tmp;
  const std::string dir = tmp.path();
  workload::Job mine;
  mine.lab = "lab";
  mine.ranks = {{"dc/s0/g0", "tb-lab-dc-s0-g0", 0, "198.18.0.1"},
                {"dc/s1/g0", "tb-lab-dc-s1-g0", 1, "198.18.0.2"}};
  mine.run_id = "bench-b";
  mine.results_dir = dir + "/b/bench-b";
  mine.store_dir = mine.results_dir + "/store";
  workload::Job theirs = mine;
  theirs.run_id = "bench-a";
  theirs.results_dir = dir + "/a/bench-a";
  theirs.store_dir = theirs.results_dir + "/store";
  theirs.rdma = {{0, 1}, {1, 0}};  // a made rxe devices; b did not
  launch::JobHosts on_a, on_b;
  static_cast<Roles&>(on_a) = roles_of("a", {"b"});
  static_cast<Roles&>(on_b) = roles_of("b", {"b"});
  on_a.rank_host = on_b.rank_host = {"a", "b"};
  on_a.local = {1, 0};
  on_b.local = {0, 1};
  Result<launch::PeerOutcome> b_out = fail("not run");
  std::thread b(
      [&] { b_out = launch::serve_job(mine, on_b, "bench", "p1", port, "/bin/false", {}, stop); });
  std::vector<std::string> gone;
  std::vector<RankEnd> ends;
  {
    auto c = launch::open_relay(theirs, on_a, "bench", "p1", port, stop);
    ASSERT_TRUE(c) << c.error().message;
    c->on_gone([&](const std::string&, const std::string& what) { gone.push_back(what); });
    c->finish(std::chrono::seconds(10));
    ends = c->take_ends();
    const auto errors = c->errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("host b went away before it was done (host b refused the job: "
                             "--transport rdma: host a runs ranks 0 (dc/s0/g0, host a) and 1 "
                             "(dc/s1/g0, host b) over RDMA, this host (b) over TCP"),
              std::string::npos)
        << errors[0];
  }
  b.join();
  ASSERT_FALSE(b_out);
  EXPECT_EQ(b_out.error().exit_code, kExitBadInput) << b_out.error().message;
  EXPECT_NE(b_out.error().message.find("over RDMA, this host (b) over TCP"), std::string::npos)
      << b_out.error().message;
  ASSERT_EQ(gone.size(), 1u);
  EXPECT_NE(gone[0].find("host b went away (host b refused the job: --transport rdma"),
            std::string::npos)
      << gone[0];
  ASSERT_EQ(ends.size(), 1u);
  EXPECT_EQ(ends[0].rank, 1);
  EXPECT_NE(ends[0].how.find("refused the job"), std::string::npos) << ends[0].how;
}

// The same for `launch` across hosts (serve_command): a job without its run id is refused, and
// the coordinator's error says so.
TEST(MultihostRelay, ALaunchJoinerThatRefusesTheJobTellsTheCoordinatorWhy) {
  std::atomic<bool> stop{false};
  const int port = test_port(1);
  const testing_util::TempDir tmp;
  const std::string dir = tmp.path();
  launch::CommandJob mine;
  mine.lab = "lab";
  mine.run_id = "launch-b";
  mine.results_dir = dir + "/b/launch-b";
  launch::JobHosts on_a, on_b;
  static_cast<Roles&>(on_a) = roles_of("a", {"b"});
  static_cast<Roles&>(on_b) = roles_of("b", {"b"});
  launch::CommandOptions o;
  o.rendezvous_port = port;
  Result<launch::PeerOutcome> b_out = fail("not run");
  std::thread b([&] { b_out = launch::serve_command(mine, on_b, "p1", o, {}, {}, stop); });
  {
    const Hello h{"lab", "a", "launch", "p1", launch::job_digest(mine)};
    auto c = launch::open_relay(h, on_a, {{"results_dir", dir + "/a"}}, "", dir + "/a", port, stop);
    ASSERT_TRUE(c) << c.error().message;
    c->finish(std::chrono::seconds(10));
    const auto errors = c->errors();
    ASSERT_EQ(errors.size(), 1u);
    EXPECT_NE(errors[0].find("host b went away before it was done (host b refused the job: host "
                             "a sent a job without its run id)"),
              std::string::npos)
        << errors[0];
  }
  b.join();
  ASSERT_FALSE(b_out);
  EXPECT_NE(b_out.error().message.find("sent a job without its run id"), std::string::npos)
      << b_out.error().message;
}

// The roles every verb shares: the first host with a part coordinates, in [[host]] order.
TEST(MultihostRelay, TheFirstHostWithAPartCoordinates) {
  const std::vector<HostAddr> hosts = {{"a", Ipv4{1}}, {"b", Ipv4{2}}, {"c", Ipv4{3}}};
  auto r = choose_roles("c", hosts, [](const std::string& h) { return h != "a"; });
  EXPECT_EQ(r.coordinator, "b");
  EXPECT_EQ(r.coordinator_addr, Ipv4{2});
  EXPECT_EQ(r.peers, std::vector<std::string>{"c"});
  EXPECT_EQ(r.parts, (std::vector<std::string>{"b", "c"}));
  EXPECT_TRUE(choose_roles("", hosts, [](const std::string&) { return true; }).coordinator.empty());
  const auto v = verdict_from_json(to_json(Verdict{false, 2, "host a"}));
  EXPECT_FALSE(v.ok);
  EXPECT_EQ(v.rc, 2);
  EXPECT_EQ(v.where, "host a");
}

}  // namespace
}  // namespace tb::multihost::relay_test
