// The shared-memory transport (collective/shm/): the SPSC ring alone (bounded, wrap-around, odd
// sizes, two threads), ShmComm's set-up (the segment is unlinked once both sides hold it; another
// user's file is refused; a peer that never comes times out), its failure paths (a peer that
// closes, a peer process killed mid-transfer, the inner transport failing in a mixed exchange),
// the segment remover `down` uses, and the option's parsing (--intra-server, job.json, bench).
// The collectives over a shm + in-process mix are in collective_test.cc.
#include <gtest/gtest.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>

#include "collective/inproc/inproc.h"
#include "collective/shm/ring.h"
#include "collective/shm/shm.h"
#include "core/shm_names.h"
#include "launch/bench_run.h"
#include "temp_dir.h"
#include "workload/job.h"
#include "workload/transport.h"

namespace tb::collective {
namespace {

using testing_util::TempDir;

// A ring over plain memory (zero-filled, as a new segment is).
struct LocalRing {
  explicit LocalRing(size_t cap) : data(cap) {}
  shm::RingHeader h{};  // value-initialized: every counter 0
  std::vector<std::byte> data;
  shm::Ring ring() { return shm::Ring(&h, data.data(), data.size()); }
};

std::byte at(uint64_t i) {
  return static_cast<std::byte>((i * 2654435761u) >> 13);  // no short period
}

TEST(ShmRing, HoldsAtMostItsCapacityAndWrapsAround) {
  LocalRing lr(61);  // odd on purpose
  auto r = lr.ring();
  std::vector<std::byte> in(100), out(100);
  for (size_t i = 0; i < in.size(); ++i) in[i] = at(i);
  EXPECT_EQ(r.write(in.data(), 100), 61u);  // full
  EXPECT_EQ(r.write(in.data(), 1), 0u);
  EXPECT_EQ(r.read(out.data(), 40), 40u);
  EXPECT_EQ(r.write(in.data() + 61, 39), 39u);  // wraps: 21 at the end, 18 at the start
  EXPECT_EQ(r.read(out.data() + 40, 100), 60u);
  EXPECT_EQ(r.read(out.data(), 1), 0u);  // empty
  EXPECT_EQ(std::memcmp(in.data(), out.data(), 100), 0);
}

TEST(ShmRing, SleepsOnlyWhenThereIsNothingToMove) {
  LocalRing lr(8);
  auto r = lr.ring();
  const std::byte b[8]{};
  // Empty: the consumer may sleep, on head's word at its current value.
  auto w = r.consumer_sleep();
  ASSERT_NE(w.word, nullptr);
  EXPECT_EQ(w.value, 0u);
  EXPECT_EQ(lr.h.consumer_sleeps.load(), 1u);
  r.consumer_awake();
  // Not full: the producer must not sleep.
  EXPECT_EQ(r.producer_sleep().word, nullptr);
  EXPECT_EQ(lr.h.producer_sleeps.load(), 0u);
  ASSERT_EQ(r.write(b, 8), 8u);
  EXPECT_EQ(r.consumer_sleep().word, nullptr);  // bytes arrived: no sleep
  auto p = r.producer_sleep();                  // full
  ASSERT_NE(p.word, nullptr);
  EXPECT_EQ(p.value, 0u);  // tail
  r.producer_awake();
}

// Two threads stream 3 MB through a 4093-byte ring in odd, random pieces, each side sleeping on
// the futex when it cannot move: every byte arrives once and in order.
TEST(ShmRing, TwoThreadsStreamEveryByteInOrderThroughASmallRing) {
  LocalRing lr(4093);
  auto r = lr.ring();
  constexpr uint64_t kTotal = 3'000'017;
  uint64_t wrong = 0;
  auto sleep_on = [](shm::FutexWait w) {
    if (!w.word) return;
    timespec ts{0, 2'000'000};
    ::syscall(SYS_futex, w.word, FUTEX_WAIT, w.value, &ts, nullptr, 0);
  };
  std::thread producer([&] {
    std::mt19937 rng(1);
    std::vector<std::byte> buf(9000);
    for (uint64_t sent = 0; sent < kTotal;) {
      const size_t want = std::min<uint64_t>(kTotal - sent, 1 + rng() % 8999);
      for (size_t i = 0; i < want; ++i) buf[i] = at(sent + i);
      size_t done = 0;
      for (int spins = 0; done < want; ++spins) {
        ASSERT_LT(spins, 10'000'000);
        const size_t n = r.write(buf.data() + done, want - done);
        done += n;
        if (n == 0) {
          sleep_on(r.producer_sleep());
          r.producer_awake();
        }
      }
      sent += want;
    }
  });
  std::mt19937 rng(2);
  std::vector<std::byte> buf(7000);
  for (uint64_t got = 0, spins = 0; got < kTotal; ++spins) {
    ASSERT_LT(spins, 10'000'000u);
    const size_t n = r.read(buf.data(), 1 + rng() % 6999);
    for (size_t i = 0; i < n; ++i) wrong += buf[i] != at(got + i);
    got += n;
    if (n == 0) {
      sleep_on(r.consumer_sleep());
      r.consumer_awake();
    }
  }
  producer.join();
  EXPECT_EQ(wrong, 0u);
  EXPECT_EQ(lr.h.head.load(), kTotal);
  EXPECT_EQ(lr.h.tail.load(), kTotal);
}

ShmOptions options(const TempDir& d, int rank, int size, std::chrono::milliseconds timeout,
                   size_t ring = 4093) {
  ShmOptions o;
  o.rank = rank;
  o.size = size;
  o.shm.assign(static_cast<size_t>(size), 1);
  o.prefix = d.path() + "/seg.";
  o.board_path = d.path() + "/progress";
  o.timeout = timeout;
  o.ring_bytes = ring;
  return o;
}

std::vector<std::string> files(const std::string& dir, const std::string& start) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().starts_with(start))
      out.push_back(e.path().filename().string());
  return out;
}

TEST(ShmComm, MovesBytesBothWaysAndUnlinksItsSegmentOnceBothSidesHoldIt) {
  TempDir d;
  std::vector<std::unique_ptr<ShmComm>> c(2);
  std::vector<Status> st(2);
  std::vector<std::vector<uint32_t>> out(2, std::vector<uint32_t>(100'003));
  std::vector<std::vector<uint32_t>> in(2, std::vector<uint32_t>(100'003));
  for (int r = 0; r < 2; ++r)
    for (size_t i = 0; i < in[0].size(); ++i) in[r][i] = static_cast<uint32_t>(i * 3 + r);
  std::vector<std::thread> th;
  for (int r = 0; r < 2; ++r)
    th.emplace_back([&, r] {
      auto made = ShmComm::connect(options(d, r, 2, std::chrono::seconds(30)), nullptr);
      if (!made) {
        st[r] = std::unexpected(made.error());
        return;
      }
      c[r] = std::move(*made);
      const size_t bytes = in[r].size() * 4;
      st[r] = c[r]->exchange(
          {Xfer::send(1 - r, in[r].data(), bytes), Xfer::recv(1 - r, out[r].data(), bytes)});
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(st[r]) << st[r].error().message;
  EXPECT_EQ(out[0], in[1]);
  EXPECT_EQ(out[1], in[0]);
  EXPECT_TRUE(files(d.path(), "seg.").empty());  // unlinked while both still map it
}

TEST(ShmComm, APeerThatNeverAttachesTimesOutNamingIt) {
  TempDir d;
  auto made = ShmComm::connect(options(d, 0, 2, std::chrono::milliseconds(200)), nullptr);
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message.find("waiting for rank 1 to attach"), std::string::npos)
      << made.error().message;
}

TEST(ShmComm, RefusesASegmentAnotherUserOwns) {
  if (::geteuid() != 0) GTEST_SKIP() << "needs root to chown";
  TempDir d;
  const std::string path = d.path() + "/seg.0-1";
  { std::ofstream(path) << ""; }
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  auto made = ShmComm::connect(options(d, 0, 2, std::chrono::milliseconds(200)), nullptr);
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message.find("owned by uid 65534"), std::string::npos)
      << made.error().message;
}

// A peer that fails closes its side: the rank waiting on it fails at once with the reason,
// well before its 60 s timeout (the message says which; no timing is asserted).
TEST(ShmComm, APeerThatFailsClosesItsSideAndTheWaiterFailsAtOnce) {
  TempDir d;
  Status waiter;
  std::thread t0([&] {
    auto c = ShmComm::connect(options(d, 0, 2, std::chrono::seconds(60)), nullptr);
    ASSERT_TRUE(c) << c.error().message;
    std::vector<std::byte> buf(1 << 20);
    waiter = (*c)->exchange({Xfer::recv(1, buf.data(), buf.size())});
  });
  auto c1 = ShmComm::connect(options(d, 1, 2, std::chrono::seconds(60)), nullptr);
  ASSERT_TRUE(c1) << c1.error().message;
  std::vector<std::byte> half(1000);
  ASSERT_TRUE((*c1)->exchange({Xfer::send(0, half.data(), half.size())}));
  (*c1)->fail_with(Error{"injected", 0, kExitFailed});
  t0.join();
  ASSERT_FALSE(waiter);
  EXPECT_NE(waiter.error().message.find("rank 1 closed the shared-memory connection"),
            std::string::npos)
      << waiter.error().message;
}

// Rank 0 sends to rank 1 and receives from rank 2 in one exchange. Rank 1 takes its bytes and
// is gone (its comm destroyed: closed) while rank 2 sends late: rank 0 must not count rank 1,
// whose transfers are done, as a failure while it waits on rank 2.
TEST(ShmComm, APeerThatFinishedIsNoFailureWhileTheExchangeWaitsOnAnother) {
  TempDir d;
  std::vector<std::unique_ptr<ShmComm>> c(3);
  std::vector<std::thread> th;
  for (int r = 0; r < 3; ++r)
    th.emplace_back([&, r] {
      auto made = ShmComm::connect(options(d, r, 3, std::chrono::seconds(60)), nullptr);
      ASSERT_TRUE(made) << made.error().message;
      c[static_cast<size_t>(r)] = std::move(*made);
    });
  for (auto& t : th) t.join();
  th.clear();
  ASSERT_TRUE(c[0] && c[1] && c[2]);
  std::vector<std::byte> to1(1000), from2(1000), at1(1000);
  std::vector<std::byte> send2(1000, std::byte{7});
  Status s0, s1, s2;
  th.emplace_back([&] {
    s0 = c[0]->exchange({Xfer::send(1, to1.data(), 1000), Xfer::recv(2, from2.data(), 1000)});
  });
  th.emplace_back([&] {
    s1 = c[1]->exchange({Xfer::recv(0, at1.data(), 1000)});
    c[1].reset();  // finished and gone: its side is closed
  });
  th.emplace_back([&] {
    std::this_thread::sleep_for(kPeerCheck * 4);  // rank 0 looks at its peers meanwhile
    s2 = c[2]->exchange({Xfer::send(0, send2.data(), 1000)});
  });
  for (auto& t : th) t.join();
  ASSERT_TRUE(s1) << s1.error().message;
  ASSERT_TRUE(s2) << s2.error().message;
  ASSERT_TRUE(s0) << s0.error().message;
  EXPECT_EQ(from2, send2);
}

// A peer process killed mid-transfer (no chance to close anything): its neighbour notices
// through the pidfd and fails naming it, not by timing out.
TEST(ShmComm, APeerProcessKilledMidTransferFailsItsNeighbour) {
  TempDir d;
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto c = ShmComm::connect(options(d, 1, 2, std::chrono::seconds(60)), nullptr);
    if (!c) ::_exit(3);
    std::vector<std::byte> part(3000);
    if (!(*c)->exchange({Xfer::send(0, part.data(), part.size())})) ::_exit(4);
    ::raise(SIGKILL);
    ::_exit(5);
  }
  auto c = ShmComm::connect(options(d, 0, 2, std::chrono::seconds(60)), nullptr);
  ASSERT_TRUE(c) << c.error().message;
  std::vector<std::byte> buf(1 << 20);
  auto st = (*c)->exchange({Xfer::recv(1, buf.data(), buf.size())});
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("exited while transfers over shared memory"), std::string::npos)
      << st.error().message;
  EXPECT_NE(st.error().message.find("rank 1 (pid " + std::to_string(child) + ")"),
            std::string::npos)
      << st.error().message;
}

// Ranks 0 and 1 share a server, rank 2 is elsewhere (in-process inner transport). Rank 0's
// exchange sends to 1 (who never reads: the ring fills and it sleeps) and receives from 2; rank 2
// fails. Rank 0 returns rank 2's error at once instead of sleeping on the ring until its timeout.
TEST(ShmComm, TheInnerTransportFailingStopsTheSharedMemoryPartOfAMixedExchange) {
  TempDir d;
  InprocOptions io;
  io.timeout = std::chrono::seconds(60);
  auto inner = make_inproc_comms(3, io);
  std::vector<std::unique_ptr<ShmComm>> c(3);
  std::vector<std::thread> th;
  for (int r = 0; r < 3; ++r)
    th.emplace_back([&, r] {
      auto o = options(d, r, 3, std::chrono::seconds(60));
      o.shm = {1, 1, 0};
      if (r == 2) o.shm = {0, 0, 1};
      auto made = ShmComm::connect(o, std::move(inner[static_cast<size_t>(r)]));
      ASSERT_TRUE(made) << made.error().message;
      c[static_cast<size_t>(r)] = std::move(*made);
    });
  for (auto& t : th) t.join();
  ASSERT_TRUE(c[0] && c[1] && c[2]);
  Status st;
  std::thread t0([&] {
    std::vector<std::byte> out(1 << 20), in(1 << 20);
    st = c[0]->exchange(
        {Xfer::send(1, out.data(), out.size()), Xfer::recv(2, in.data(), in.size())});
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  c[2]->fail_with(Error{"rank 2 injected failure", 0, kExitFailed});
  t0.join();
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("rank 2 injected failure"), std::string::npos)
      << st.error().message;
}

TEST(ShmNames, RemovesOnlyTheFilesWithThePrefix) {
  TempDir d;
  for (const char* n : {"testbedctl.shmx.run-1.0-1", "testbedctl.shmx.run-1.1-2",
                        "testbedctl.shmx.run-2.0-1", "testbedctl.shmy.run-1.0-1", "other"})
    std::ofstream(d.path() + "/" + n) << "x";
  auto n = remove_shm_files(shm_job_prefix("shmx", "run-1", d.path()));
  ASSERT_TRUE(n) << n.error().message;
  EXPECT_EQ(*n, 2);
  n = remove_shm_files(shm_lab_prefix("shmx", d.path()));
  ASSERT_TRUE(n);
  EXPECT_EQ(*n, 1);
  EXPECT_EQ(files(d.path(), "testbedctl.").size(), 1u);  // shmy's
  EXPECT_EQ(files(d.path(), "other").size(), 1u);
  auto none = remove_shm_files(d.path() + "/missing/testbedctl.a.");
  ASSERT_TRUE(none);
  EXPECT_EQ(*none, 0);
}

TEST(IntraServerOption, ParsesItsNamesAndRefusesOthersAndGloo) {
  using workload::IntraServer;
  EXPECT_EQ(workload::parse_intra_server_flag("shm").value(), IntraServer::kShm);
  EXPECT_EQ(workload::parse_intra_server_flag("net").value(), IntraServer::kNet);
  auto bad = workload::parse_intra_server_flag("nvlink");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().exit_code, kExitBadInput);
  EXPECT_EQ(bad.error().message, "--intra-server: 'nvlink' is not net or shm");

  launch::BenchOptions o;
  o.transport.intra_server = IntraServer::kShm;
  EXPECT_TRUE(launch::check_options(o));
  o.impl = workload::ImplKind::kGloo;
  auto gloo = launch::check_options(o);
  ASSERT_FALSE(gloo);
  EXPECT_EQ(gloo.error().exit_code, kExitBadInput);
  EXPECT_NE(gloo.error().message.find("--intra-server shm"), std::string::npos);
}

TEST(IntraServerOption, TravelsInTheJobFileAndOldJobsMeanNet) {
  workload::Job j;
  j.lab = "shmx";
  j.run_id = "r";
  j.transport.intra_server = workload::IntraServer::kShm;
  auto json = workload::to_json(j);
  EXPECT_EQ(json["intra_server"], "shm");
  auto back = workload::job_from_json(json);
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(back->transport.intra_server, workload::IntraServer::kShm);
  json.erase("intra_server");
  EXPECT_EQ(workload::job_from_json(json)->transport.intra_server, workload::IntraServer::kNet);
  json["intra_server"] = "pcie";
  auto bad = workload::job_from_json(json);
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().message, "job: intra_server 'pcie' is not net or shm");
}

}  // namespace
}  // namespace tb::collective
