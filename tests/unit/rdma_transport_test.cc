// The RDMA transport without a device: the per-QP chunk accounting (QpStream) against a
// simulated reliable connection, the options' checks, the failure on a host with no RDMA
// device, RdmaComm's TCP half, and TcpComm's peer mask and interrupt. With
// TB_RDMA_TEST_ADDR=<an address an RDMA device holds> (the lab VM, with rdma_rxe), the same
// collectives also run over real verbs; without it those cases skip and say why.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <random>
#include <thread>

#include "collective/collective.h"
#include "collective/rdma/rdma.h"
#include "collective/rdma/stream.h"
#include "collective/tcp/tcp.h"
#include "temp_dir.h"

namespace tb {
namespace {

using collective::Algo;
using collective::Call;
using collective::Coll;
using collective::DataType;
using collective::QpStream;
using collective::RedOp;
using testing_util::TempDir;
using Clock = std::chrono::steady_clock;

// One direction of a reliable connection between two QpStreams: a SEND completes only into a
// posted receive, in posting order, as on an RC queue pair. A message sent while the receiver
// has fewer receives posted than messages in flight would meet an empty receive queue on a
// real QP (a receiver-not-ready retry): `rnr` counts every moment that is possible.
struct Wire {
  struct Msg {
    int slot;  // -1: a credit-only message
    size_t len;
    uint32_t credits;
  };
  QpStream& tx;
  QpStream& rx;
  std::deque<Msg> in_flight;  // posted sends, in order
  std::deque<int> posted;     // rx's posted receive slots, in order
  int rnr = 0;
  int credit_msgs = 0;

  Wire(QpStream& t, QpStream& r) : tx(t), rx(r) {
    for (int s = 0; s < r.depth(); ++s) posted.push_back(s);
  }
  void check() {
    if (in_flight.size() > posted.size()) ++rnr;
  }
  void post_sends() {
    while (auto c = tx.next_send()) {
      in_flight.push_back(Msg{c->slot, c->len, c->credits});
      check();
    }
    if (auto credits = tx.next_credit()) {
      in_flight.push_back(Msg{-1, 0, *credits});
      ++credit_msgs;
      check();
    }
  }
  // Delivers up to `n` messages; returns how many moved.
  int deliver(int n) {
    int moved = 0;
    while (moved < n && !in_flight.empty() && !posted.empty()) {
      const auto m = in_flight.front();
      in_flight.pop_front();
      const int slot = posted.front();
      posted.pop_front();
      if (m.len > 0) std::memcpy(rx.recv_slot(slot), tx.send_slot(m.slot), m.len);
      rx.received(slot, m.len, m.credits);
      if (m.slot >= 0)
        tx.send_done(m.slot);
      else
        tx.credit_done();
      ++moved;
    }
    return moved;
  }
  // The receiver takes what its exchange wants and posts the emptied buffers again.
  void consume() {
    std::vector<int> repost;
    rx.consume(repost);
    for (int s : repost) posted.push_back(s);
  }
};

struct StreamPair {
  static constexpr int kDepth = 4;
  static constexpr size_t kChunk = 1024;
  std::vector<char> a_send = std::vector<char>(kDepth * kChunk),
                    a_recv = std::vector<char>(kDepth * kChunk);
  std::vector<char> b_send = std::vector<char>(kDepth * kChunk),
                    b_recv = std::vector<char>(kDepth * kChunk);
  QpStream a{a_send.data(), a_recv.data(), kDepth, kChunk};
  QpStream b{b_send.data(), b_recv.data(), kDepth, kChunk};
  Wire ab{a, b};
  Wire ba{b, a};  // b's data and credits to a
  // One round of everything both sides do in RdmaComm's progress(): take completions, consume
  // and repost, post sends and credits.
  void round(int deliver = 100) {
    ab.deliver(deliver);
    ba.deliver(deliver);
    ab.consume();
    ba.consume();
    ab.post_sends();
    ba.post_sends();
  }
  int rnr() const { return ab.rnr + ba.rnr; }
};

std::vector<char> pattern(size_t n, int seed) {
  std::vector<char> v(n);
  for (size_t i = 0; i < n; ++i)
    v[i] = static_cast<char>((i * 131 + static_cast<size_t>(seed)) % 251);
  return v;
}

TEST(QpStream, StripesArePackedAndReadBackAsOneByteStream) {
  StreamPair p;
  // Three sends (one smaller than a chunk, one of a single byte) read back as two receives
  // with other boundaries: the receiver sees bytes, not messages.
  auto s1 = pattern(1500, 1), s2 = pattern(1, 2), s3 = pattern(2600, 3);
  std::vector<char> all;
  for (auto* s : {&s1, &s2, &s3}) all.insert(all.end(), s->begin(), s->end());
  p.a.add_send(s1.data(), s1.size());
  p.a.add_send(s2.data(), s2.size());
  p.a.add_send(s3.data(), s3.size());
  std::vector<char> r1(2000), r2(all.size() - 2000);
  p.b.add_recv(r1.data(), r1.size());
  p.b.add_recv(r2.data(), r2.size());
  for (int round = 0; round < 100 && !(p.a.done() && p.b.done()); ++round) p.round(1);
  ASSERT_TRUE(p.a.done());
  ASSERT_TRUE(p.b.done());
  r1.insert(r1.end(), r2.begin(), r2.end());
  EXPECT_EQ(r1, all);
  EXPECT_EQ(p.b.posted_recvs(), StreamPair::kDepth);  // every buffer back in the ring
  EXPECT_EQ(p.rnr(), 0);
}

TEST(QpStream, APartlyConsumedBufferWaitsForTheNextExchange) {
  StreamPair p;
  auto s = pattern(150, 7);  // two sends of one exchange, packed into one 150-byte message
  p.a.add_send(s.data(), 100);
  p.a.add_send(s.data() + 100, 50);
  std::vector<char> first(100);
  p.b.add_recv(first.data(), first.size());
  p.ab.post_sends();
  EXPECT_EQ(p.ab.in_flight.size(), 1u);
  EXPECT_EQ(p.ab.deliver(10), 1);
  p.ab.consume();
  EXPECT_TRUE(p.a.done());
  EXPECT_TRUE(p.b.done());
  EXPECT_EQ(p.b.queued_bytes(), 50u);                     // the rest stays queued...
  EXPECT_EQ(p.b.posted_recvs(), StreamPair::kDepth - 1);  // ...and its buffer is not reposted
  EXPECT_EQ(std::vector<char>(s.begin(), s.begin() + 100), first);

  std::vector<char> second(50);  // the next exchange takes it
  p.b.add_recv(second.data(), second.size());
  EXPECT_FALSE(p.b.done());
  p.ab.consume();
  EXPECT_TRUE(p.b.done());
  EXPECT_EQ(std::vector<char>(s.begin() + 100, s.end()), second);
  EXPECT_EQ(p.b.queued_bytes(), 0u);
  EXPECT_EQ(p.b.posted_recvs(), StreamPair::kDepth);
  EXPECT_EQ(p.b.owed(), 1u);  // to be returned with b's next message
}

TEST(QpStream, AnExchangeEndsWithoutWaitingForItsLastAcknowledgement) {
  StreamPair p;
  auto s = pattern(2 * StreamPair::kChunk, 5);
  p.a.add_send(s.data(), s.size());
  p.ab.post_sends();
  // Both chunks are copied out and posted: the step is over for the sender and the user's
  // buffer free, while the sends are still unacknowledged.
  EXPECT_TRUE(p.a.done());
  EXPECT_EQ(p.a.sends_in_flight(), 2);
  EXPECT_FALSE(p.a.drained());
  // The next exchange's chunk goes into a buffer not in flight: one comes back only with its
  // completion.
  auto t = pattern(StreamPair::kChunk, 6);
  p.a.add_send(t.data(), t.size());
  auto c = p.a.next_send();
  ASSERT_TRUE(c);
  EXPECT_NE(c->slot, p.ab.in_flight[0].slot);
  EXPECT_NE(c->slot, p.ab.in_flight[1].slot);
  p.ab.in_flight.push_back(Wire::Msg{c->slot, c->len, c->credits});
  // One credit left, kept for a credit-only message: the next data waits for the receiver.
  EXPECT_EQ(p.a.credits(), 1);
  auto u = pattern(10, 7);
  p.a.add_send(u.data(), u.size());
  EXPECT_FALSE(p.a.next_send());
  std::vector<char> r(s.size() + t.size() + u.size());
  p.b.add_recv(r.data(), r.size());
  for (int round = 0; round < 100 && !(p.a.done() && p.b.done() && p.a.drained()); ++round)
    p.round(1);
  ASSERT_TRUE(p.b.done());
  EXPECT_TRUE(p.a.drained());
  s.insert(s.end(), t.begin(), t.end());
  s.insert(s.end(), u.begin(), u.end());
  EXPECT_EQ(r, s);
  EXPECT_EQ(p.rnr(), 0);
}

TEST(QpStream, TheSenderNeverPostsMoreThanTheReceiverHasPosted) {
  StreamPair p;
  auto s = pattern(10 * StreamPair::kChunk, 9);
  p.a.add_send(s.data(), s.size());
  p.ab.post_sends();
  // depth - 1 messages: the last credit stays for a credit-only message.
  EXPECT_EQ(p.a.sends_in_flight(), StreamPair::kDepth - 1);
  EXPECT_EQ(p.a.credits(), 1);
  EXPECT_FALSE(p.a.next_send());
  // The receiver has not asked for anything yet: its buffers fill, and the sender, told nothing,
  // posts nothing more (no SEND is left to meet an empty receive queue).
  EXPECT_EQ(p.ab.deliver(100), StreamPair::kDepth - 1);
  for (int i = 0; i < 5; ++i) p.round();
  EXPECT_EQ(p.ab.in_flight.size(), 0u);
  EXPECT_EQ(p.b.queued_bytes(), (StreamPair::kDepth - 1) * StreamPair::kChunk);
  EXPECT_EQ(p.b.posted_recvs(), 1);
  std::vector<char> r(s.size());
  p.b.add_recv(r.data(), r.size());
  for (int round = 0; round < 100 && !(p.a.done() && p.b.done()); ++round) p.round(3);
  EXPECT_TRUE(p.a.done());
  EXPECT_TRUE(p.b.done());
  EXPECT_EQ(r, s);
  EXPECT_EQ(p.rnr(), 0);
  // b sent no data, so every credit came back in credit-only messages, several buffers each.
  EXPECT_GT(p.ba.credit_msgs, 0);
  EXPECT_LE(p.ba.credit_msgs, 10);
}

TEST(QpStream, CreditsRideOnDataGoingTheOtherWay) {
  StreamPair p;
  // Both directions busy: every data message carries the receives its sender posted again, so
  // few credit-only messages are needed.
  auto sa = pattern(20 * StreamPair::kChunk, 1), sb = pattern(20 * StreamPair::kChunk, 2);
  std::vector<char> ra(sb.size()), rb(sa.size());
  p.a.add_send(sa.data(), sa.size());
  p.b.add_send(sb.data(), sb.size());
  p.a.add_recv(ra.data(), ra.size());
  p.b.add_recv(rb.data(), rb.size());
  for (int round = 0; round < 1000 && !(p.a.done() && p.b.done()); ++round) p.round(1);
  ASSERT_TRUE(p.a.done());
  ASSERT_TRUE(p.b.done());
  EXPECT_EQ(ra, sb);
  EXPECT_EQ(rb, sa);
  EXPECT_EQ(p.rnr(), 0);
}

TEST(QpStream, TwoIdlePeersDoNotTradeCreditMessagesForEver) {
  StreamPair p;
  auto s = pattern(3 * StreamPair::kChunk, 4);
  std::vector<char> r(s.size());
  p.a.add_send(s.data(), s.size());
  p.b.add_recv(r.data(), r.size());
  for (int round = 0; round < 50; ++round) p.round();
  ASSERT_TRUE(p.b.done());
  EXPECT_EQ(r, s);
  const int msgs = p.ab.credit_msgs + p.ba.credit_msgs;
  for (int round = 0; round < 50; ++round) p.round();  // nothing left to move
  EXPECT_EQ(p.ab.credit_msgs + p.ba.credit_msgs, msgs);
  EXPECT_TRUE(p.ab.in_flight.empty());
  EXPECT_TRUE(p.ba.in_flight.empty());
}

// Random exchanges in both directions, random delivery and consumption: every byte arrives in
// order, no SEND could ever meet an empty receive queue, and nothing deadlocks (each exchange
// completes whenever the two sides keep taking their completions).
TEST(QpStream, RandomExchangesAndDeliveryOrdersKeepEveryByteWithoutRnr) {
  std::mt19937 rng(12345);
  StreamPair p;
  struct Dir {
    QpStream& tx;
    QpStream& rx;
    std::vector<char> sent, got;
    size_t carried = 0;  // bytes sent in earlier exchanges and not yet received
    std::vector<std::vector<char>> outs, ins;
  };
  Dir dirs[2] = {{p.a, p.b, {}, {}, 0, {}, {}}, {p.b, p.a, {}, {}, 0, {}, {}}};
  for (int ex = 0; ex < 200; ++ex) {
    // Each exchange sends a few stripes each way and receives a few of other sizes: what
    // earlier ones left, and all but up to 499 bytes of its own, which wait in a partly
    // consumed buffer (as a sender's exchange must be able to finish, the lag stays within the
    // buffers). Some exchanges are one-way.
    const int oneway = static_cast<int>(rng() % 3);  // 0: both, 1: a->b only, 2: b->a only
    for (int d = 0; d < 2; ++d) {
      Dir& x = dirs[d];
      x.outs.clear();
      x.ins.clear();
      const bool silent = (oneway == 1 && d == 1) || (oneway == 2 && d == 0);
      for (int k = static_cast<int>(rng() % 3); k >= 0 && !silent; --k)
        x.outs.push_back(pattern(rng() % 3000, static_cast<int>(rng())));
      size_t out_bytes = 0;
      for (auto& o : x.outs) {
        x.tx.add_send(o.data(), o.size());
        x.sent.insert(x.sent.end(), o.begin(), o.end());
        out_bytes += o.size();
      }
      const size_t available = x.carried + out_bytes;
      const size_t least = std::max(x.carried, available >= 499 ? available - 499 : 0);
      const size_t want = ex == 199 ? available : least + rng() % (available - least + 1);
      for (size_t left = want; left > 0;) {
        const size_t n = std::min<size_t>(left, 1 + rng() % 2500);
        x.ins.emplace_back(n);
        left -= n;
      }
      for (auto& i : x.ins) x.rx.add_recv(i.data(), i.size());
      x.carried = available - want;
    }
    for (int round = 0; round < 10000 && !(p.a.done() && p.b.done()); ++round) {
      if (rng() % 2) p.ab.post_sends();
      if (rng() % 2) p.ba.post_sends();
      if (rng() % 2) p.ab.deliver(static_cast<int>(rng() % 3));
      if (rng() % 2) p.ba.deliver(static_cast<int>(rng() % 3));
      if (rng() % 2) p.ab.consume();
      if (rng() % 2) p.ba.consume();
    }
    ASSERT_TRUE(p.a.done()) << "exchange " << ex;
    ASSERT_TRUE(p.b.done()) << "exchange " << ex;
    for (auto& x : dirs)
      for (auto& i : x.ins) x.got.insert(x.got.end(), i.begin(), i.end());
  }
  for (auto& x : dirs) {
    ASSERT_EQ(x.got.size(), x.sent.size());
    EXPECT_TRUE(x.got == x.sent);
  }
  EXPECT_EQ(p.rnr(), 0);
  EXPECT_GT(p.ab.credit_msgs + p.ba.credit_msgs, 0);
}

TEST(RdmaOptions, TunablesOutOfRangeNameTheirFlag) {
  auto bad = [](int qps, int t, int r) {
    auto st = collective::validate_rdma_tuning(qps, t, r);
    EXPECT_FALSE(st);
    if (st) return std::string();
    EXPECT_EQ(st.error().exit_code, kExitBadInput);
    return st.error().message;
  };
  EXPECT_NE(bad(0, 14, 7).find("--qps: 0 is not 1..16"), std::string::npos);
  EXPECT_NE(bad(17, 14, 7).find("--qps"), std::string::npos);
  EXPECT_NE(bad(1, 0, 7).find("--ib-timeout: 0 is not 1..31"), std::string::npos);
  EXPECT_NE(bad(1, 32, 7).find("--ib-timeout"), std::string::npos);
  EXPECT_NE(bad(1, 14, 8).find("--ib-retry-cnt: 8 is not 0..7"), std::string::npos);
  EXPECT_NE(bad(1, 14, -1).find("--ib-retry-cnt"), std::string::npos);
  EXPECT_TRUE(collective::validate_rdma_tuning(16, 31, 0));
  EXPECT_TRUE(collective::validate_rdma_tuning(1, 1, 7));

  collective::RdmaOptions o;
  o.rank = 0;
  o.size = 2;
  o.peers = {{}, {"10.0.0.2", "10.0.0.1", "rail"}};
  o.rdma = {0, 1};
  EXPECT_TRUE(collective::validate(o));
  o.qps = 0;
  EXPECT_FALSE(collective::validate(o));
  o.qps = 2;
  o.rdma = {0};
  EXPECT_FALSE(collective::validate(o));  // one flag per rank
  o.rdma = {0, 1};
  o.peers[1].src = "";
  auto st = collective::validate(o);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("marked RDMA but has no address"), std::string::npos);
}

TEST(RdmaDescription, SaysWhichPairsRunOnWhatAndHowTuned) {
  collective::RdmaDescription d;
  d.rdma_peers = {2, 3};
  d.rdma_tiers = {"rail"};
  d.tcp_peers = {1};
  d.tcp_tiers = {"nvl"};
  d.devices = {"rxe-g0"};
  d.qps = 2;
  d.depth = 16;
  d.chunk = 64 * 1024;
  const auto s = d.to_string();
  EXPECT_NE(s.find("native over rdma: rail pairs on RDMA device rxe-g0 (2 QP(s)/peer, "
                   "ib_timeout 14 (67.1 ms), retry 7"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("16 x 64 KiB"), std::string::npos) << s;
  EXPECT_NE(s.find("nvl pairs on tcp (1 connection(s) per peer)"), std::string::npos) << s;
}

// Runs body(rank) for every rank on its own thread; returns each rank's status.
std::vector<Status> on_threads(int n, const std::function<Status(int)>& body) {
  std::vector<Status> st(static_cast<size_t>(n));
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r) th.emplace_back([&, r] { st[static_cast<size_t>(r)] = body(r); });
  for (auto& t : th) t.join();
  return st;
}

Status allreduce_check(collective::Comm& c, Algo algo, size_t count) {
  const int n = c.size();
  std::vector<float> buf(count);
  for (size_t i = 0; i < count; ++i) buf[i] = static_cast<float>((c.rank() + 1) * (i % 7));
  TB_TRY(collective::run(c, Call{Coll::kAllReduce, algo, DataType::kFloat32, RedOp::kSum, 0,
                                 buf.data(), buf.data(), count}));
  const float sum = static_cast<float>(n * (n + 1) / 2);
  for (size_t i = 0; i < count; ++i)
    if (buf[i] != sum * static_cast<float>(i % 7))
      return fail("rank " + std::to_string(c.rank()) + ": wrong at " + std::to_string(i));
  return {};
}

TEST(RdmaComm, WithoutAnRdmaDeviceAnRdmaPairFailsAtOnceNamingTheAddress) {
  // 192.0.2.1 (TEST-NET-1) is on no interface and no RDMA device, here or in the lab VM.
  TempDir dir;
  collective::FileStore store(dir.path());
  const auto t0 = Clock::now();
  auto st = on_threads(2, [&](int r) -> Status {
    collective::RdmaOptions o;
    o.rank = r;
    o.size = 2;
    o.qps = 2;
    o.timeout = std::chrono::seconds(10);
    o.peers.assign(2, {"192.0.2.1", "192.0.2.1", "rail"});
    o.rdma = {1, 1};
    auto c = collective::RdmaComm::connect(store, o);
    if (c) return {};
    return std::unexpected(c.error());
  });
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));  // not the 10 s timeout
  for (int r = 0; r < 2; ++r) {
    ASSERT_FALSE(st[static_cast<size_t>(r)]) << "rank " << r << " connected over RDMA";
    const auto& m = st[static_cast<size_t>(r)].error().message;
    EXPECT_NE(m.find("rank " + std::to_string(r) + ": no RDMA device holds 192.0.2.1"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("rail address for rank(s) " + std::to_string(1 - r)), std::string::npos) << m;
  }
}

TEST(RdmaComm, PairsNotMarkedRdmaRunOverTcp) {
  // No pair marked: RdmaComm is its TCP half, which needs no device.
  TempDir dir;
  collective::FileStore store(dir.path());
  const int n = 3;
  auto st = on_threads(n, [&](int r) -> Status {
    collective::RdmaOptions o;
    o.rank = r;
    o.size = n;
    o.channels = 2;
    o.timeout = std::chrono::seconds(10);
    o.peers.assign(n, {"127.0.0.1", "127.0.0.1", "nvl"});
    o.rdma.assign(n, 0);
    auto c = collective::RdmaComm::connect(store, o);
    if (!c) return std::unexpected(c.error());
    const auto d = (*c)->description().to_string();
    if (d.find("no pair of this rank on RDMA, nvl pairs on tcp (2 connection(s)") ==
        std::string::npos)
      return fail("description: " + d);
    for (Algo a : {Algo::kRing, Algo::kHalvingDoubling, Algo::kTree})
      TB_TRY(allreduce_check(**c, a, 200'003));
    return {};
  });
  for (auto& s : st) EXPECT_TRUE(s) << s.error().message;
}

TEST(TcpComm, AMaskConnectsOnlyTheMaskedPairs) {
  // A chain 0 - 1 - 2: rank 2's address for rank 0 leads nowhere (TEST-NET-1), so if the mask
  // let 2 dial 0 the set-up would fail; the masked pairs exchange normally.
  TempDir dir;
  collective::FileStore store(dir.path());
  const std::vector<std::vector<char>> use = {{0, 1, 0}, {1, 0, 1}, {0, 1, 0}};
  auto st = on_threads(3, [&](int r) -> Status {
    collective::TcpOptions o;
    o.rank = r;
    o.size = 3;
    o.channels = 2;
    o.timeout = std::chrono::seconds(5);
    o.peers.assign(3, {"127.0.0.1", "127.0.0.1", "lo"});
    if (r == 2) o.peers[0] = {"192.0.2.1", "", "lo"};
    o.use = use[static_cast<size_t>(r)];
    auto c = collective::TcpComm::connect(store, o);
    if (!c) return std::unexpected(c.error());
    if ((*c)->uses(0) != (r == 1) || (*c)->uses(2) != (r == 1) || (*c)->uses(1) == (r == 1))
      return fail("uses() does not follow the mask");
    // Rank 1 swaps 300 KB (striped over both channels) with each neighbour.
    const size_t len = 300'000;
    if (r == 1) {
      auto to0 = pattern(len, 10), to2 = pattern(len, 12);
      std::vector<char> from0(len), from2(len);
      TB_TRY((*c)->exchange({collective::Xfer::send(0, to0.data(), len),
                             collective::Xfer::send(2, to2.data(), len),
                             collective::Xfer::recv(0, from0.data(), len),
                             collective::Xfer::recv(2, from2.data(), len)}));
      if (from0 != pattern(len, 1) || from2 != pattern(len, 21)) return fail("rank 1: wrong data");
      return {};
    }
    auto out = pattern(len, r == 0 ? 1 : 21);
    std::vector<char> in(len);
    TB_TRY((*c)->exchange(
        {collective::Xfer::send(1, out.data(), len), collective::Xfer::recv(1, in.data(), len)}));
    if (in != pattern(len, r == 0 ? 10 : 12))
      return fail("rank " + std::to_string(r) + ": wrong data");
    return {};
  });
  for (auto& s : st) EXPECT_TRUE(s) << s.error().message;
}

TEST(TcpComm, InterruptEndsAnExchangeBlockedOnAnotherThread) {
  TempDir dir;
  collective::FileStore store(dir.path());
  std::atomic<collective::TcpComm*> comm0{nullptr};
  std::atomic<bool> done0{false};
  const auto t0 = Clock::now();
  auto st = on_threads(2, [&](int r) -> Status {
    collective::TcpOptions o;
    o.rank = r;
    o.size = 2;
    o.timeout = std::chrono::seconds(20);
    o.peers.assign(2, {"127.0.0.1", "127.0.0.1", "lo"});
    auto c = collective::TcpComm::connect(store, o);
    if (!c) return std::unexpected(c.error());
    if (r == 1) {  // never sends; interrupts rank 0's wait, and stays until rank 0 is done
      while (comm0.load() == nullptr) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      comm0.load()->interrupt();
      while (!done0.load()) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      return {};
    }
    comm0 = c->get();
    char x = 0;
    auto s = (*c)->exchange({collective::Xfer::recv(1, &x, 1)});
    done0 = true;
    return s;
  });
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));  // not the 20 s timeout
  ASSERT_FALSE(st[0]);
  EXPECT_NE(st[0].error().message.find("interrupted"), std::string::npos) << st[0].error().message;
  EXPECT_TRUE(st[1]);
}

// ---- Over real verbs: only where an RDMA device holds TB_RDMA_TEST_ADDR (the lab VM). ----

const char* rdma_test_addr() {
  const char* a = std::getenv("TB_RDMA_TEST_ADDR");
  return a && *a ? a : nullptr;
}

// Every pair over RDMA on one address (rxe loops back), except the pairs `tcp_pairs` marks.
std::vector<Status> on_rdma(int n, int qps, std::chrono::milliseconds timeout,
                            const std::function<bool(int, int)>& tcp_pair,
                            const std::function<Status(int, collective::RdmaComm&)>& body) {
  TempDir dir;
  collective::FileStore store(dir.path());
  const std::string addr = rdma_test_addr();
  return on_threads(n, [&](int r) -> Status {
    collective::RdmaOptions o;
    o.rank = r;
    o.size = n;
    o.qps = qps;
    o.timeout = timeout;
    o.peers.assign(static_cast<size_t>(n), {addr, addr, "rail"});
    o.rdma.assign(static_cast<size_t>(n), 1);
    for (int j = 0; j < n; ++j)
      if (tcp_pair(r, j)) o.rdma[static_cast<size_t>(j)] = 0;
    auto c = collective::RdmaComm::connect(store, o);
    if (!c) return std::unexpected(c.error());
    return body(r, **c);
  });
}

TEST(RdmaVerbs, AllReduceOverRealQueuePairs) {
  if (!rdma_test_addr())
    GTEST_SKIP() << "set TB_RDMA_TEST_ADDR to an address an RDMA device (rxe) holds";
  auto st = on_rdma(
      4, 2, std::chrono::seconds(20), [](int, int) { return false; },
      [](int, collective::RdmaComm& c) -> Status {
        for (size_t count : {size_t{1}, size_t{1000}, size_t{300'001}, size_t{4'000'000}})
          for (Algo a : {Algo::kRing, Algo::kHalvingDoubling, Algo::kTree})
            TB_TRY(allreduce_check(c, a, count));
        return {};
      });
  for (auto& s : st) EXPECT_TRUE(s) << s.error().message;
}

TEST(RdmaVerbs, MixedRdmaAndTcpPairsInOneExchange) {
  if (!rdma_test_addr())
    GTEST_SKIP() << "set TB_RDMA_TEST_ADDR to an address an RDMA device (rxe) holds";
  // Pairs (0,1) and (2,3) on TCP, the rest on RDMA: ring steps mix both.
  auto tcp = [](int a, int b) { return a / 2 == b / 2; };
  auto st =
      on_rdma(4, 1, std::chrono::seconds(20), tcp, [](int, collective::RdmaComm& c) -> Status {
        for (Algo a : {Algo::kRing, Algo::kHalvingDoubling})
          TB_TRY(allreduce_check(c, a, 1'000'003));
        return {};
      });
  for (auto& s : st) EXPECT_TRUE(s) << s.error().message;
}

TEST(RdmaVerbs, APeerThatDiesFailsTheOthersFast) {
  if (!rdma_test_addr())
    GTEST_SKIP() << "set TB_RDMA_TEST_ADDR to an address an RDMA device (rxe) holds";
  const auto t0 = Clock::now();
  auto st = on_rdma(
      3, 1, std::chrono::seconds(20), [](int, int) { return false; },
      [](int r, collective::RdmaComm& c) -> Status {
        if (r == 1) {
          c.fail_with(Error{"rank 1 dies", 0, kExitFailed});  // disconnects everything
          return fail("rank 1 dies");
        }
        return allreduce_check(c, Algo::kRing, 1 << 20);
      });
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(8));
  for (int r : {0, 2}) {
    ASSERT_FALSE(st[static_cast<size_t>(r)]);
    EXPECT_NE(st[static_cast<size_t>(r)].error().message.find("(it exited or failed"),
              std::string::npos)
        << st[static_cast<size_t>(r)].error().message;
  }
}

// The timeout is on the collective's progress (collective/progress.h): rank 0 waits for rank 1
// longer than the timeout while ranks 1 and 2 keep exchanging (a folded rank of
// halving-doubling, a tree leaf behind a slow link), and must not time out.
TEST(RdmaVerbs, ARankWaitingWhileOthersProgressDoesNotTimeOut) {
  if (!rdma_test_addr())
    GTEST_SKIP() << "set TB_RDMA_TEST_ADDR to an address an RDMA device (rxe) holds";
  const auto timeout = std::chrono::milliseconds(2000);  // set-up under TCG needs about 1 s
  auto st = on_rdma(
      3, 1, timeout, [](int, int) { return false; },
      [&](int r, collective::RdmaComm& c) -> Status {
        std::vector<char> big(300'000), back(big.size());
        for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 7 + 3);
        if (r == 0) {
          TB_TRY(c.exchange({collective::Xfer::recv(1, back.data(), back.size())}));
          if (back != big) return fail("rank 0: wrong bytes from rank 1");
          return {};
        }
        const int other = r == 1 ? 2 : 1;
        std::vector<char> out(1024, static_cast<char>(r)), in(1024);
        for (int i = 0; i < 24; ++i) {  // 3 timeouts of slow, steady progress
          TB_TRY(c.exchange({collective::Xfer::send(other, out.data(), out.size()),
                             collective::Xfer::recv(other, in.data(), in.size())}));
          std::this_thread::sleep_for(std::chrono::milliseconds(250));
        }
        if (r == 1) TB_TRY(c.exchange({collective::Xfer::send(0, big.data(), big.size())}));
        return {};
      });
  for (auto& s : st) EXPECT_TRUE(s) << s.error().message;
}

// ...and a communicator where nobody moves a byte times out within about the timeout.
TEST(RdmaVerbs, NoProgressAnywhereTimesOut) {
  if (!rdma_test_addr())
    GTEST_SKIP() << "set TB_RDMA_TEST_ADDR to an address an RDMA device (rxe) holds";
  const auto t0 = Clock::now();
  std::atomic<bool> done0{false};
  auto st = on_rdma(
      2, 1, std::chrono::milliseconds(2000), [](int, int) { return false; },
      [&](int r, collective::RdmaComm& c) -> Status {
        if (r == 1) {  // silent, and connected until rank 0 gave up
          for (int i = 0; i < 2000 && !done0.load(); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
          return {};
        }
        char x = 0;
        auto s = c.exchange({collective::Xfer::recv(1, &x, 1)});
        done0 = true;
        return s;
      });
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(15));  // set-up, then about the timeout
  ASSERT_FALSE(st[0]);
  EXPECT_NE(st[0].error().message.find("timed out: no progress"), std::string::npos)
      << st[0].error().message;
  EXPECT_TRUE(st[1]);
}

}  // namespace
}  // namespace tb
