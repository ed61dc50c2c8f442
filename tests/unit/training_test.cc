// The training-step workload without root: the layout, DDP's buckets, the step schedule (which
// collective runs when, which bytes on which tier), the efficiency arithmetic, and whole steps
// over in-process communicators (ranks as threads) with the reduced gradients checked.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "collective/inproc/inproc.h"
#include "temp_dir.h"
#include "workload/job.h"
#include "workload/training.h"
#include "workload/training_rank.h"

namespace tb {
namespace {

using workload::Action;
using workload::TrainingSpec;
using workload::TrainPos;

TrainingSpec small_spec() {
  TrainingSpec s;
  s.params = 10'000;
  s.grad_bytes = 4;
  s.activation_bytes = 4096;
  s.layers = 4;
  s.micro_batches = 2;
  s.samples = 4;
  s.bucket_bytes = 8192;
  s.compute_ns = 3'000'000;
  s.steps = 2;
  s.warmup = 1;
  return s;
}

TEST(TrainingLayout, MegatronOrderTensorParallelFastest) {
  auto s = small_spec();
  s.tp = 2;
  s.pp = 2;
  const std::vector<int> server = {0, 0, 1, 1, 2, 2, 3, 3};
  auto p = workload::train_position(s, 8, 5, server);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->dp, 2);
  EXPECT_EQ(p->t, 1);
  EXPECT_EQ(p->d, 0);
  EXPECT_EQ(p->s, 1);
  EXPECT_EQ(workload::tp_group(*p), (std::vector<int>{4, 5}));
  EXPECT_EQ(workload::dp_group(*p), (std::vector<int>{5, 7}));
}

TEST(TrainingLayout, RefusesTensorParallelAcrossServersAndUnevenSplits) {
  auto s = small_spec();
  s.tp = 4;
  auto p = workload::train_position(s, 8, 0, {0, 0, 1, 1, 2, 2, 3, 3});
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("spans servers"), std::string::npos) << p.error().message;
  s.tp = 3;
  p = workload::train_position(s, 8, 0, std::vector<int>(8, 0));
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("do not divide"), std::string::npos) << p.error().message;
  s.tp = 1;
  s.pp = 3;
  EXPECT_FALSE(workload::validate(s));  // 4 layers into 3 stages
}

TEST(TrainingBuckets, CoverTheGradientsInBackwardOrder) {
  // 100 KB over 4 layers (25 KB each), buckets of 30 KB: 30, 30, 30, 10.
  const auto b = workload::buckets(100'000, 30'000, 4);
  ASSERT_EQ(b.size(), 4u);
  uint64_t off = 0;
  for (const auto& k : b) {
    EXPECT_EQ(k.offset, off);
    EXPECT_EQ(k.bytes % 4, 0u);
    off += k.bytes;
  }
  EXPECT_EQ(off, 100'000u);
  // Bucket 0 ends at 30 KB: complete when layer 1 (50 KB produced) ends; 60 KB: layer 2;
  // 90 KB and 100 KB: layer 3.
  EXPECT_EQ(b[0].ready_layer, 1);
  EXPECT_EQ(b[1].ready_layer, 2);
  EXPECT_EQ(b[2].ready_layer, 3);
  EXPECT_EQ(b[3].ready_layer, 3);
  // One bucket larger than the gradients: one bucket, ready at the last layer.
  const auto one = workload::buckets(100'000, 1 << 30, 4);
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].ready_layer, 3);
}

TEST(TrainingSchedule, CollectivesAndBytesPerPhase) {
  auto s = small_spec();
  s.tp = 2;
  s.pp = 2;
  TrainPos p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.s = 0;  // first stage: sends forward, receives backward
  s.bucket_bytes = 4096;
  const auto a = workload::step_schedule(s, p);
  int tp = 0, send = 0, recv = 0, bucket = 0, wait = 0;
  int64_t compute = 0;
  size_t first_bucket = a.size(), last_recv = 0, last_compute = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    switch (a[i].kind) {
      case Action::kCompute:
        compute += a[i].ns;
        last_compute = i;
        break;
      case Action::kTpAllReduce:
        ++tp;
        EXPECT_EQ(a[i].bytes, s.activation_bytes);
        break;
      case Action::kPpSend:
        ++send;
        EXPECT_EQ(a[i].peer, +1);
        break;
      case Action::kPpRecv:
        ++recv;
        EXPECT_EQ(a[i].peer, +1);
        last_recv = i;
        break;
      case Action::kBucket:
        first_bucket = std::min(first_bucket, i);
        ++bucket;
        break;
      case Action::kWaitBuckets:
        ++wait;
        break;
    }
  }
  // 2 layers per stage, 2 micro-batches, forward and backward, 2 AllReduces per layer.
  EXPECT_EQ(tp, 2 * 2 * 2 * 2);
  EXPECT_EQ(send, 2);  // activations to stage 1, one per micro-batch
  EXPECT_EQ(recv, 2);  // their gradients back
  // The rank's gradients: 10,000 params / (tp 2 * pp 2) * 4 bytes = 10,000 bytes in buckets of
  // 4096: 3, the first complete when the first backward layer (5,000 bytes) ends.
  EXPECT_EQ(workload::grad_bytes_per_rank(s), 10'000u);
  EXPECT_EQ(bucket, 3);
  EXPECT_EQ(wait, 1);
  EXPECT_EQ(a.back().kind, Action::kWaitBuckets);
  // Buckets start in the last micro-batch's backward, after its activation gradient arrived.
  EXPECT_GT(first_bucket, last_recv);
  // ... and before backward's last compute: they overlap the rest of the backward pass.
  EXPECT_LT(first_bucket, last_compute);
  // The compute of 2 micro-batches, up to the rounding of the split per layer.
  EXPECT_NEAR(static_cast<double>(compute), 2.0 * s.compute_ns, 16);

  // The last stage receives forward and sends backward; one data-parallel rank: no buckets.
  p.s = 1;
  p.dp = 1;
  const auto b = workload::step_schedule(s, p);
  for (const auto& x : b) {
    if (x.kind == Action::kPpSend || x.kind == Action::kPpRecv) {
      EXPECT_EQ(x.peer, -1);
    }
    EXPECT_NE(x.kind, Action::kBucket);
    EXPECT_NE(x.kind, Action::kWaitBuckets);
  }
}

TEST(TrainingArithmetic, ThroughputAndEfficiency) {
  auto s = small_spec();
  EXPECT_EQ(workload::samples_per_step(s, 4), 4u * 2 * 4);
  EXPECT_DOUBLE_EQ(workload::samples_per_second(32, 0.5), 64);
  // One server: 100 samples/s; four servers: 360 samples/s = 90% of linear.
  EXPECT_DOUBLE_EQ(workload::scaling_efficiency(360, 4, 100), 0.9);
  EXPECT_DOUBLE_EQ(workload::scaling_efficiency(100, 1, 100), 1.0);
  EXPECT_EQ(workload::ring_allreduce_sent(1000, 4), 1500u);
  EXPECT_EQ(workload::ring_allreduce_sent(1000, 1), 0u);
}

TEST(TrainingSpecJson, RoundTripsAndRefusesBadFields) {
  auto s = small_spec();
  s.tp = 2;
  auto back = workload::training_spec_from_json(workload::to_json(s));
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(workload::to_json(*back), workload::to_json(s));
  auto j = workload::to_json(s);
  j["micro_batches"] = 0;
  auto bad = workload::training_spec_from_json(j);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("micro_batches"), std::string::npos) << bad.error().message;
}

// A comm that adds 1 to the first float of every receive: a corrupted link.
class CorruptComm final : public collective::Comm {
 public:
  explicit CorruptComm(std::unique_ptr<collective::Comm> inner)
      : Comm(inner->rank(), inner->size()), inner_(std::move(inner)) {}

 protected:
  Status do_exchange(std::span<const collective::Xfer> xfers) override {
    TB_TRY(inner_->exchange(xfers));
    for (const auto& x : xfers)
      if (x.kind == collective::Xfer::kRecv && x.len >= 4) {
        float f;
        std::memcpy(&f, x.buf, 4);
        f += 1;
        std::memcpy(x.buf, &f, 4);
      }
    return {};
  }
  void abort() override { inner_->fail_with(*failed()); }

 public:
  void interrupt() override { inner_->interrupt(); }

 private:
  std::unique_ptr<collective::Comm> inner_;
};

// Runs the spec on `ranks` threads with in-process comms per group; rows by rank.
std::vector<std::vector<workload::StepRow>> run_threads(const TrainingSpec& s, int ranks,
                                                        const std::vector<int>& server,
                                                        bool corrupt_dp,
                                                        std::vector<Status>* status) {
  std::vector<TrainPos> pos;
  for (int r = 0; r < ranks; ++r) {
    auto p = workload::train_position(s, ranks, r, server);
    EXPECT_TRUE(p);
    pos.push_back(*p);
  }
  // One hub per group; comm k of a group goes to the group's k-th rank.
  std::vector<std::unique_ptr<collective::Comm>> tp(ranks), dp(ranks), prev(ranks), next(ranks);
  collective::InprocOptions o;
  o.timeout = std::chrono::seconds(20);
  o.stream_bytes = collective::kInprocBoundedBytes;
  for (int r = 0; r < ranks; ++r) {
    const auto& p = pos[static_cast<size_t>(r)];
    if (p.t == 0 && p.tp > 1) {
      auto c = collective::make_inproc_comms(p.tp, o);
      auto g = workload::tp_group(p);
      for (size_t k = 0; k < g.size(); ++k) tp[static_cast<size_t>(g[k])] = std::move(c[k]);
    }
    if (p.d == 0 && p.dp > 1) {
      auto c = collective::make_inproc_comms(p.dp, o);
      auto g = workload::dp_group(p);
      for (size_t k = 0; k < g.size(); ++k) {
        std::unique_ptr<collective::Comm> comm = std::move(c[k]);
        if (corrupt_dp && k == 0) comm = std::make_unique<CorruptComm>(std::move(comm));
        dp[static_cast<size_t>(g[k])] = std::move(comm);
      }
    }
    if (p.s + 1 < p.pp) {
      auto c = collective::make_inproc_comms(2, o);
      next[static_cast<size_t>(r)] = std::move(c[0]);
      prev[static_cast<size_t>(p.rank(p.t, p.d, p.s + 1))] = std::move(c[1]);
    }
  }
  std::vector<std::vector<workload::StepRow>> rows(static_cast<size_t>(ranks));
  status->assign(static_cast<size_t>(ranks), Status{});
  std::vector<std::thread> th;
  for (int r = 0; r < ranks; ++r)
    th.emplace_back([&, r] {
      const auto i = static_cast<size_t>(r);
      workload::TrainComms c;
      c.tp = tp[i].get();
      c.dp = dp[i].get();
      c.pp_prev = prev[i].get();
      c.pp_next = next[i].get();
      (*status)[i] = workload::run_training(
          s, pos[i], c, [&](const workload::StepRow& row) { rows[i].push_back(row); });
    });
  for (auto& t : th) t.join();
  return rows;
}

TEST(TrainingRun, StepsWithAllThreeParallelismsReduceCorrectly) {
  auto s = small_spec();
  s.tp = 2;
  s.pp = 2;
  std::vector<Status> st;
  const auto rows = run_threads(s, 8, {0, 0, 1, 1, 2, 2, 3, 3}, false, &st);
  for (int r = 0; r < 8; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)])
        << r << ": " << st[static_cast<size_t>(r)].error().message;
    const auto& rr = rows[static_cast<size_t>(r)];
    ASSERT_EQ(rr.size(), 2u);
    for (const auto& row : rr) {
      EXPECT_EQ(row.wrong, 0u) << "rank " << r;
      EXPECT_GE(row.step_ns(), row.compute_ns);
      EXPECT_NEAR(static_cast<double>(row.compute_ns), 2.0 * s.compute_ns, 16);
      // Tensor parallel: 16 AllReduces of 4 KiB over 2 ranks (4 KiB each sent).
      EXPECT_EQ(row.bytes.at("nvl") % 4096, 0u);
      // Data parallel: 10,000 gradient bytes over 2 ranks: 10,000 sent (ring: 2 (n-1)/n),
      // and the pipeline's sends: 2 micro-batches of 4 KiB; both on the rail tier.
      EXPECT_EQ(row.bytes.at("rail"), 10'000u + 2 * 4096);
    }
    EXPECT_EQ(rr[0].step, 0);
    EXPECT_EQ(rr[1].step, 1);
  }
  EXPECT_EQ(rows[0][0].bytes.at("nvl"), 16u * 4096);
}

TEST(TrainingRun, DataParallelOnlyOverlapsBucketsAndCountsCorruption) {
  auto s = small_spec();
  s.micro_batches = 1;
  std::vector<Status> st;
  auto rows = run_threads(s, 4, {0, 1, 2, 3}, false, &st);
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)]) << st[static_cast<size_t>(r)].error().message;
    for (const auto& row : rows[static_cast<size_t>(r)]) {
      EXPECT_EQ(row.wrong, 0u);
      EXPECT_EQ(row.tp_ns, 0);
      EXPECT_EQ(row.pp_ns, 0);
      EXPECT_EQ(row.bytes.count("nvl"), 0u);
    }
  }
  // A link that corrupts what it delivers shows in the check of the reduced gradients.
  rows = run_threads(s, 4, {0, 1, 2, 3}, true, &st);
  uint64_t wrong = 0;
  for (int r = 0; r < 4; ++r) {
    ASSERT_TRUE(st[static_cast<size_t>(r)]) << st[static_cast<size_t>(r)].error().message;
    for (const auto& row : rows[static_cast<size_t>(r)]) wrong += row.wrong;
  }
  EXPECT_GT(wrong, 0u);
}

// tb-rank's path: a job over loopback TCP, one communicator per group made from the job's peers.
TEST(TrainingRun, JobOverTcpMakesOneCommPerGroup) {
  testing_util::TempDir dir;
  workload::Job job;
  job.run_id = "t1";
  job.store_dir = dir.path();
  job.timeout_ms = 20000;
  auto s = small_spec();
  s.tp = 2;
  s.pp = 2;
  job.training = s;
  const int n = 8;
  for (int r = 0; r < n; ++r) job.ranks.push_back({"g" + std::to_string(r), "", r / 2, ""});
  job.peers.assign(n, std::vector<collective::TcpPeer>(n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      job.peers[i][j] = {"127.0.0.1", "127.0.0.1", i / 2 == j / 2 ? "nvl" : "rail"};
  auto back = workload::job_from_json(workload::to_json(job));
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(back->training);
  std::vector<std::vector<nlohmann::json>> lines(n);
  std::vector<Status> st(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      st[r] = workload::run_training_job(*back, r,
                                         [&](const nlohmann::json& j) { lines[r].push_back(j); });
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r]) << r << ": " << st[r].error().message;
    ASSERT_EQ(lines[r].size(), 1u + 2);  // the layout, then one line per timed step
    const auto& layout = lines[r][0].at("train_layout");
    EXPECT_EQ(layout.at("tp_tier"), "nvl");
    EXPECT_EQ(layout.at("dp_tier"), "rail");
    EXPECT_EQ(layout.at("pp_tier"), "rail");
    const auto row = workload::step_row_from_json(lines[r][1].at("train_step"));
    EXPECT_EQ(row.wrong, 0u);
    EXPECT_EQ(row.bytes.at("nvl"), 16u * 4096);
  }
}

// run's workload: steps until the stop file's K, each also an iteration line, then the wrong count.
TEST(TrainingRun, SteadyJobStopsAtTheStopFilesStep) {
  testing_util::TempDir dir;
  workload::Job job;
  job.run_id = "t2";
  job.store_dir = dir.path();
  job.results_dir = dir.path();
  job.timeout_ms = 20000;
  job.steady = true;
  job.start_iter = 5;  // as after a restart: steps are numbered from here
  auto s = small_spec();
  s.steps = 1;  // steady ignores it
  job.training = s;
  const int n = 2;
  for (int r = 0; r < n; ++r) job.ranks.push_back({"g" + std::to_string(r), "", r, ""});
  job.peers.assign(n, std::vector<collective::TcpPeer>(n, {"127.0.0.1", "127.0.0.1", "rail"}));
  std::ofstream(workload::stop_path(job)) << 8 << "\n";
  std::vector<std::vector<nlohmann::json>> lines(n);
  std::vector<Status> st(n);
  std::vector<std::thread> th;
  for (int r = 0; r < n; ++r)
    th.emplace_back([&, r] {
      st[r] = workload::run_training_job(job, r,
                                         [&](const nlohmann::json& j) { lines[r].push_back(j); });
    });
  for (auto& t : th) t.join();
  for (int r = 0; r < n; ++r) {
    ASSERT_TRUE(st[r]) << st[r].error().message;
    std::vector<int64_t> iters;
    for (const auto& l : lines[r])
      if (l.contains("iter")) iters.push_back(l["iter"].get<int64_t>());
    EXPECT_EQ(iters, (std::vector<int64_t>{5, 6, 7}));
    ASSERT_FALSE(lines[r].empty());
    EXPECT_EQ(lines[r].back(), (nlohmann::json{{"wrong", 0}}));
  }
}

TEST(TrainingRun, GroupTierIsTheRingSuccessors) {
  workload::Job job;
  const int n = 4;
  job.peers.assign(n, std::vector<collective::TcpPeer>(n));
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) job.peers[i][j].tier = i / 2 == j / 2 ? "nvl" : "rail";
  const std::vector<int> ring = {0, 1, 2, 3};
  EXPECT_EQ(workload::group_tier(job, 0, ring), "nvl");   // 0 -> 1, one server
  EXPECT_EQ(workload::group_tier(job, 1, ring), "rail");  // 1 -> 2, across
  EXPECT_EQ(workload::group_tier(job, 3, ring), "rail");  // 3 -> 0, around
  EXPECT_EQ(workload::group_tier(job, 2, {2}), "");
}

TEST(TrainingRun, StepRowJsonRoundTrips) {
  workload::StepRow r;
  r.step = 3;
  r.start_ns = 10;
  r.end_ns = 50;
  r.compute_ns = 30;
  r.tp_ns = 4;
  r.pp_ns = 2;
  r.dp_wait_ns = 1;
  r.bytes = {{"nvl", 7}, {"rail", 9}};
  r.wrong = 2;
  const auto back = workload::step_row_from_json(workload::to_json(r));
  EXPECT_EQ(workload::to_json(back), workload::to_json(r));
  EXPECT_EQ(back.exposed_ns(), 10);
}

}  // namespace
}  // namespace tb
