// Parameter server over the loopback transport: workers and servers are threads of this process.
// Synchronous mode against a single-process optimizer, concurrent pushes with exact integer sums,
// the staleness bound, bad requests, and shard checkpoints.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <thread>

#include "collective/ps/ps_server.h"
#include "collective/ps/ps_worker.h"
#include "collective/transport/loopback/loopback_transport.h"

namespace cohort::collective::ps {
namespace {

// n workers and s servers over one loopback fabric. Servers serve until every worker said goodbye.
// checkpoint_dir(j), when given, is server j's checkpoint directory.
class PsCluster {
 public:
  PsCluster(int workers, int servers, PsServerOptions base = {},
            const std::function<std::string(int)>& checkpoint_dir = nullptr)
      : n_(workers), s_(servers), fabric_(workers + servers) {
    for (int j = 0; j < servers; ++j) {
      PsServerOptions o = base;
      o.num_workers = workers;
      o.num_servers = servers;
      o.server_index = j;
      if (checkpoint_dir) o.checkpoint_dir = checkpoint_dir(j);
      o.timeout = std::chrono::milliseconds(20000);
      o.poll_interval = std::chrono::milliseconds(20);
      servers_.push_back(std::make_unique<PsServer>(o));
    }
  }
  ~PsCluster() { Stop(); }

  void Start() {
    for (int j = 0; j < s_; ++j) {
      threads_.emplace_back([this, j] {
        auto t = fabric_.CreateTransport(n_ + j);
        results_[j] = servers_[j]->Serve(*t, stop_);
      });
    }
  }
  // Stops the servers (after the workers are gone, Serve has returned already).
  void Stop() {
    stop_.store(true);
    for (auto& t : threads_) t.join();
    threads_.clear();
  }
  std::unique_ptr<PsWorker> Worker(int rank, FlightRecorder* recorder = nullptr) {
    PsWorkerOptions o;
    o.timeout = std::chrono::milliseconds(20000);
    o.flight_recorder = recorder;
    auto w = PsWorker::Attach(fabric_.CreateTransport(rank), n_, s_, o);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return std::move(*w);
  }
  // Runs fn(rank, worker) on every worker in its own thread.
  void RunWorkers(const std::function<void(int, PsWorker&)>& fn) {
    std::vector<std::thread> ts;
    for (int r = 0; r < n_; ++r) {
      ts.emplace_back([&, r] {
        auto w = Worker(r);
        if (w) fn(r, *w);
      });
    }
    for (auto& t : ts) t.join();
  }
  PsServer& server(int j) { return *servers_[j]; }
  Status result(int j) const { return results_[j]; }
  // The whole model as the servers hold it (concatenation of the shards).
  std::vector<char> Model() const {
    std::vector<char> all;
    for (const auto& s : servers_) {
      auto part = s->Snapshot();
      all.insert(all.end(), part.begin(), part.end());
    }
    return all;
  }

 private:
  int n_, s_;
  LoopbackFabric fabric_;
  std::vector<std::unique_ptr<PsServer>> servers_;
  std::vector<std::thread> threads_;
  Status results_[16];
  std::atomic<bool> stop_{false};
};

// Keys of uneven sizes, one larger than a server's share (it is split).
ModelLayout TestLayout() {
  auto l = ModelLayout::Create({{3, 7, DataType::kF32},
                                {10, 1000, DataType::kF32},
                                {11, 1, DataType::kF32},
                                {20, 33, DataType::kF32},
                                {42, 259, DataType::kF32}});
  EXPECT_TRUE(l.ok());
  return *l;
}

std::vector<float> InitialValues(size_t n) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = 0.01f * static_cast<float>((i * 37) % 101) - 0.5f;
  return v;
}

// Worker w's gradient at step t: deterministic, different per worker and step.
std::vector<float> Gradient(int w, int t, const std::vector<float>& params) {
  std::vector<float> g(params.size());
  for (size_t i = 0; i < g.size(); ++i) {
    g[i] =
        0.1f * params[i] + 0.01f * static_cast<float>(((i + 1) * (w + 3) * (t + 7)) % 17) - 0.08f;
  }
  return g;
}

// Worker `rank`'s steps from..until-1 as ReferenceRun takes them: pull the model into *params,
// push Gradient(rank, t, *params), clock.
void TrainSteps(PsWorker& ps, int rank, int from, int until, std::vector<float>* params) {
  for (int t = from; t < until; ++t) {
    auto pull = ps.PullAll(params->data());
    ASSERT_TRUE(pull.ok() && ps.Wait(*pull).ok());
    auto g = Gradient(rank, t, *params);
    auto push = ps.PushAll(g.data());
    ASSERT_TRUE(push.ok() && ps.Wait(*push).ok());
    ASSERT_TRUE(ps.Clock().ok());
  }
}

// The single-process reference: the mean of the workers' gradients, one optimizer step per
// iteration, written out independently of the server's code.
std::vector<float> ReferenceRun(const OptimizerConfig& c, int workers, int steps, size_t n) {
  std::vector<float> w = InitialValues(n), m(n, 0), v(n, 0);
  for (int t = 0; t < steps; ++t) {
    std::vector<double> mean(n, 0);
    for (int k = 0; k < workers; ++k) {
      auto g = Gradient(k, t, w);
      for (size_t i = 0; i < n; ++i) mean[i] += g[i];
    }
    for (size_t i = 0; i < n; ++i) {
      const double g = mean[i] / workers;
      if (c.kind == OptimizerKind::kSgd) {
        w[i] = static_cast<float>(w[i] - c.learning_rate * g);
      } else if (c.kind == OptimizerKind::kMomentum) {
        m[i] = static_cast<float>(c.momentum * m[i] + g);
        w[i] = static_cast<float>(w[i] - c.learning_rate * m[i]);
      } else {
        m[i] = static_cast<float>(c.beta1 * m[i] + (1 - c.beta1) * g);
        v[i] = static_cast<float>(c.beta2 * v[i] + (1 - c.beta2) * g * g);
        const double mh = m[i] / (1 - std::pow(c.beta1, t + 1));
        const double vh = v[i] / (1 - std::pow(c.beta2, t + 1));
        w[i] = static_cast<float>(w[i] - c.learning_rate * mh / (std::sqrt(vh) + c.epsilon));
      }
    }
  }
  return w;
}

class PsSyncTest : public ::testing::TestWithParam<OptimizerKind> {};

TEST_P(PsSyncTest, SynchronousEqualsSingleProcessOptimizer) {
  constexpr int kWorkers = 3, kServers = 2, kSteps = 12;
  OptimizerConfig c;
  c.kind = GetParam();
  c.staleness = 0;
  c.learning_rate = c.kind == OptimizerKind::kAdam ? 0.01 : 0.1;
  const ModelLayout layout = TestLayout();
  const size_t n = layout.total_bytes() / 4;
  PsCluster cluster(kWorkers, kServers);
  cluster.Start();
  std::vector<std::vector<float>> finals(kWorkers);
  cluster.RunWorkers([&](int rank, PsWorker& ps) {
    std::vector<float> init = InitialValues(n);
    auto clock = ps.InitModel(layout, rank == 0 ? init.data() : nullptr, c);
    ASSERT_TRUE(clock.ok()) << clock.status().ToString();
    EXPECT_EQ(*clock, 0);
    std::vector<float> params(n);
    TrainSteps(ps, rank, 0, kSteps, &params);
    auto pull = ps.PullAll(params.data());
    ASSERT_TRUE(pull.ok());
    ASSERT_TRUE(ps.Wait(*pull).ok());
    finals[rank] = params;
  });
  const std::vector<float> ref = ReferenceRun(c, kWorkers, kSteps, n);
  for (int r = 0; r < kWorkers; ++r) {
    ASSERT_EQ(finals[r].size(), n);
    EXPECT_EQ(finals[r], finals[0]) << "every worker reads the same model after the last clock";
    for (size_t i = 0; i < n; ++i) {
      ASSERT_NEAR(finals[r][i], ref[i], 1e-5 * (1 + std::fabs(ref[i])))
          << "element " << i << " worker " << r;
    }
  }
  EXPECT_TRUE(cluster.result(0).ok()) << cluster.result(0).ToString();
  EXPECT_EQ(cluster.server(0).stats().applied_clock, kSteps);
  EXPECT_EQ(cluster.server(0).stats().max_read_gap, 0);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, PsSyncTest,
                         ::testing::Values(OptimizerKind::kSgd, OptimizerKind::kMomentum,
                                           OptimizerKind::kAdam),
                         [](const auto& info) {
                           return std::string(OptimizerKindName(info.param));
                         });

TEST(PsLoopbackTest, EightConcurrentWorkersLoseNoUpdate) {
  constexpr int kWorkers = 8, kServers = 2, kPushes = 40;
  // Small keys (inline requests) and a large one (separate payload messages), split over servers.
  auto layout = ModelLayout::FromCounts({5, 1, 3000, 17, 40000}, DataType::kF32);
  ASSERT_TRUE(layout.ok());
  const size_t n = layout->total_bytes() / 4;
  OptimizerConfig c;  // asynchronous SGD, lr 1, no rescale: the model moves by exactly -sum(grads)
  c.kind = OptimizerKind::kSgd;
  c.learning_rate = 1.0;
  c.rescale = 1.0;
  PsCluster cluster(kWorkers, kServers);
  cluster.Start();
  std::atomic<int> ready{0};
  cluster.RunWorkers([&](int rank, PsWorker& ps) {
    std::vector<float> zeros(n, 0.0f);
    auto clock = ps.InitModel(*layout, rank == 0 ? zeros.data() : nullptr, c);
    ASSERT_TRUE(clock.ok()) << clock.status().ToString();
    ready.fetch_add(1);
    while (ready.load() < kWorkers) std::this_thread::yield();
    std::vector<float> g(n);
    std::vector<uint64_t> some = {1, 3};  // a sparse subset too
    for (int p = 0; p < kPushes; ++p) {
      for (size_t i = 0; i < n; ++i)
        g[i] = static_cast<float>(-((rank + 1) * (p + 1) + static_cast<int>(i % 5)));
      auto id = ps.PushAll(g.data());
      ASSERT_TRUE(id.ok());
      ASSERT_TRUE(ps.Wait(*id).ok());
      std::vector<float> small(1 + 17, 1.0f);
      auto sid = ps.Push(some, small.data(), small.size() * 4, DataType::kF32);
      ASSERT_TRUE(sid.ok());
      ASSERT_TRUE(ps.Wait(*sid).ok());
    }
  });
  // Expected: -sum over workers and pushes of the gradient, minus the sparse pushes of 1.
  const std::vector<char> model = cluster.Model();
  ASSERT_EQ(model.size(), n * 4);
  std::vector<float> got(n);
  std::memcpy(got.data(), model.data(), model.size());
  auto is_sparse = [&](size_t i) {
    // key 1 is element 5; key 3 is elements 5 + 1 + 3000 .. + 17.
    return i == 5 || (i >= 3006 && i < 3023);
  };
  for (size_t i = 0; i < n; ++i) {
    double want = 0;
    for (int r = 0; r < kWorkers; ++r) {
      for (int p = 0; p < kPushes; ++p) want += (r + 1) * (p + 1) + static_cast<int>(i % 5);
    }
    if (is_sparse(i)) want -= kWorkers * kPushes;
    ASSERT_EQ(got[i], static_cast<float>(want)) << "element " << i;
  }
  EXPECT_EQ(cluster.server(0).stats().errors + cluster.server(1).stats().errors, 0u);
}

TEST(PsLoopbackTest, StalenessBoundHolds) {
  constexpr int kWorkers = 4, kServers = 2, kClocks = 30, kStaleness = 2;
  auto layout = ModelLayout::FromCounts({64, 100}, DataType::kF32);
  ASSERT_TRUE(layout.ok());
  const size_t n = layout->total_bytes() / 4;
  OptimizerConfig c;
  c.staleness = kStaleness;
  c.learning_rate = 0.01;
  PsCluster cluster(kWorkers, kServers);
  cluster.Start();
  // A worker raises its entry before it announces the clock, so at any moment these are >= the
  // clocks the servers have seen: a read at clock c must find min(announced) >= c - s.
  std::atomic<int64_t> announced[kWorkers];
  for (auto& a : announced) a.store(0);
  std::atomic<int64_t> max_gap{0};
  std::atomic<int> violations{0};
  cluster.RunWorkers([&](int rank, PsWorker& ps) {
    std::vector<float> params(n, 0.0f);
    auto clock = ps.InitModel(*layout, rank == 0 ? params.data() : nullptr, c);
    ASSERT_TRUE(clock.ok()) << clock.status().ToString();
    std::mt19937 rng(rank);
    for (int t = 0; t < kClocks; ++t) {
      // Uneven speeds: worker 0 is slow, the others jitter.
      const int spins = rank == 0 ? 4000 : static_cast<int>(rng() % 500);
      for (int i = 0; i < spins; ++i) std::this_thread::yield();
      auto pull = ps.PullAll(params.data());
      ASSERT_TRUE(pull.ok());
      ASSERT_TRUE(ps.Wait(*pull).ok());
      int64_t slowest = INT64_MAX;
      for (auto& a : announced) slowest = std::min(slowest, a.load());
      const int64_t gap = ps.clock() - slowest;
      if (gap > kStaleness) violations.fetch_add(1);
      int64_t m = max_gap.load();
      while (gap > m && !max_gap.compare_exchange_weak(m, gap)) {
      }
      std::vector<float> g(n, 1.0f);
      auto push = ps.PushAll(g.data());
      ASSERT_TRUE(push.ok());
      ASSERT_TRUE(ps.Wait(*push).ok());
      announced[rank].store(t + 1);
      ASSERT_TRUE(ps.Clock().ok());
    }
  });
  EXPECT_EQ(violations.load(), 0) << "a read saw a worker more than " << kStaleness
                                  << " clocks behind";
  EXPECT_LE(max_gap.load(), kStaleness);
  for (int j = 0; j < kServers; ++j) {
    const PsServerStats st = cluster.server(j).stats();
    EXPECT_LE(st.max_read_gap, kStaleness) << "server " << j;
    EXPECT_EQ(st.applied_clock, kClocks) << "server " << j;
  }
  // Every update was applied: each of the kClocks sums of 4 pushes of 1, times lr/4.
  const std::vector<char> model = cluster.Model();
  std::vector<float> got(n);
  std::memcpy(got.data(), model.data(), model.size());
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], -0.01 * kClocks, 1e-5);
}

TEST(PsLoopbackTest, BadRequestsGetClearErrorsAndTheServerKeepsServing) {
  constexpr int kWorkers = 2, kServers = 2;
  auto layout = ModelLayout::Create(
      {{1, 8, DataType::kF32}, {2, 8, DataType::kF64}, {3, 16, DataType::kF32}});
  ASSERT_TRUE(layout.ok());
  PsCluster cluster(kWorkers, kServers);
  cluster.Start();
  std::atomic<int> bad_done{0};
  std::atomic<int> pushed{0};
  cluster.RunWorkers([&](int rank, PsWorker& ps) {
    std::vector<char> init(layout->total_bytes(), 0);
    OptimizerConfig c;
    c.learning_rate = 1.0;
    c.rescale = 1.0;
    ASSERT_TRUE(ps.InitModel(*layout, rank == 0 ? init.data() : nullptr, c).ok());
    std::vector<float> f(64, 1.0f);
    const uint64_t key1[] = {1};
    const uint64_t key99[] = {99};
    if (rank == 1)
      [&] {
        struct Done {
          std::atomic<int>* flag;
          ~Done() { flag->store(1); }
        } done{&bad_done};
        // Refused by the worker library before anything is sent.
        auto unknown = ps.Push(key99, f.data(), 32, DataType::kF32);
        EXPECT_EQ(unknown.status().code(), StatusCode::kNotFound);
        EXPECT_NE(unknown.status().message().find("unknown key 99"), std::string::npos);
        EXPECT_EQ(ps.Push(key1, f.data(), 28, DataType::kF32).status().code(),
                  StatusCode::kInvalidArgument);
        EXPECT_EQ(ps.Push(key1, f.data(), 64, DataType::kF64).status().code(),
                  StatusCode::kInvalidArgument);
        // The same mistakes sent raw: the server answers each with an error and goes on.
        RequestHeader h;
        h.op = PsOp::kPush;
        h.type = static_cast<uint8_t>(DataType::kF32);
        h.payload_bytes = 32;
        auto r = ps.RawRequest(0, h, key99, ConstBytes{f.data(), 32}, MutableBytes{});
        ASSERT_TRUE(r.ok()) << r.status().ToString();
        EXPECT_EQ(r->code, static_cast<uint8_t>(StatusCode::kNotFound));
        EXPECT_NE(std::string(r->message).find("unknown key 99"), std::string::npos) << r->message;
        h.payload_bytes = 28;  // key 1 holds 32 bytes
        r = ps.RawRequest(0, h, key1, ConstBytes{f.data(), 28}, MutableBytes{});
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
        EXPECT_NE(std::string(r->message).find("wrong size"), std::string::npos) << r->message;
        h.payload_bytes = 32;
        h.type = static_cast<uint8_t>(DataType::kF64);
        r = ps.RawRequest(0, h, key1, ConstBytes{f.data(), 32}, MutableBytes{});
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
        EXPECT_NE(std::string(r->message).find("holds f32"), std::string::npos) << r->message;
        // A large wrong-size push travels as its own message: received, refused, still serving.
        std::vector<float> big(100000, 1.0f);
        h.type = static_cast<uint8_t>(DataType::kF32);
        h.payload_bytes = big.size() * 4;
        r = ps.RawRequest(0, h, key1, ConstBytes{big.data(), big.size() * 4}, MutableBytes{});
        ASSERT_TRUE(r.ok());
        EXPECT_EQ(r->code, static_cast<uint8_t>(StatusCode::kInvalidArgument));
      }();
    // Both workers go on using the servers normally.
    for (int i = 0; i < 20; ++i) {
      auto id = ps.Push(key1, f.data(), 32, DataType::kF32);
      ASSERT_TRUE(id.ok());
      ASSERT_TRUE(ps.Wait(*id).ok());
    }
    pushed.fetch_add(1);
    if (rank == 0) {
      while (bad_done.load() == 0 || pushed.load() < kWorkers) std::this_thread::yield();
      ASSERT_TRUE(ps.Shutdown().ok());
      auto late = ps.Push(key1, f.data(), 32, DataType::kF32);
      ASSERT_TRUE(late.ok());
      Status s = ps.Wait(*late);
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
      EXPECT_NE(s.message().find("push after shutdown"), std::string::npos) << s.ToString();
      std::vector<float> v(8);
      auto pull = ps.Pull(key1, v.data(), 32, DataType::kF32);
      ASSERT_TRUE(pull.ok());
      ASSERT_TRUE(ps.Wait(*pull).ok()) << "pulls are still served after shutdown";
      for (float x : v) EXPECT_EQ(x, -40.0f);  // 2 workers x 20 pushes of 1
    }
  });
  EXPECT_TRUE(cluster.server(0).shut_down());
  EXPECT_GE(cluster.server(0).stats().errors, 5u);
  EXPECT_TRUE(cluster.result(0).ok()) << cluster.result(0).ToString();
  EXPECT_TRUE(cluster.result(1).ok()) << cluster.result(1).ToString();
}

TEST(PsLoopbackTest, ShardCheckpointRestoresValuesOptimizerStateAndClock) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ps_ckpt_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto shard_dir = [&](int j) { return (dir / ("ps-" + std::to_string(j))).string(); };
  constexpr int kWorkers = 2, kServers = 2;
  auto layout = ModelLayout::FromCounts({100, 57}, DataType::kF32);
  ASSERT_TRUE(layout.ok());
  const size_t n = layout->total_bytes() / 4;
  OptimizerConfig c;
  c.kind = OptimizerKind::kAdam;
  c.staleness = 0;
  c.learning_rate = 0.05;
  // Every worker trains from the clock InitModel hands back up to `until`; worker 0's clock.
  auto train = [&](PsCluster& cluster, int until) {
    std::atomic<int64_t> from{-1};
    cluster.Start();
    cluster.RunWorkers([&](int r, PsWorker& ps) {
      std::vector<float> init = InitialValues(n);
      auto clock = ps.InitModel(*layout, r == 0 ? init.data() : nullptr, c);
      ASSERT_TRUE(clock.ok());
      if (r == 0) from = *clock;
      std::vector<float> p(n);
      TrainSteps(ps, r, static_cast<int>(*clock), until, &p);
    });
    cluster.Stop();
    return from.load();
  };
  {
    // Run to clock 5 with checkpoints every 2 clocks (steps 2 and 4 are written), then "crash".
    PsServerOptions o;
    o.checkpoint_every = 2;
    PsCluster cluster(kWorkers, kServers, o, shard_dir);
    train(cluster, 5);
    for (int j = 0; j < kServers; ++j) {
      EXPECT_EQ(cluster.server(j).stats().checkpoints, 2u) << "server " << j;
    }
  }
  // A fresh server restores the newest checkpoint: step 4 (the step-5 update is lost).
  std::vector<char> model;
  for (int j = 0; j < kServers; ++j) {
    PsServerOptions o;
    o.num_workers = kWorkers;
    o.num_servers = kServers;
    o.server_index = j;
    PsServer s(o);
    ASSERT_TRUE(s.Restore(shard_dir(j)).ok());
    EXPECT_EQ(s.stats().restored_step, 4);
    EXPECT_EQ(s.stats().applied_clock, 4);
    const std::vector<char> shard = s.Snapshot();
    model.insert(model.end(), shard.begin(), shard.end());
    // A server of another index refuses the checkpoint.
    PsServerOptions other = o;
    other.server_index = 1 - j;
    PsServer wrong(other);
    EXPECT_EQ(wrong.Restore(shard_dir(j)).code(), StatusCode::kFailedPrecondition);
  }
  // The restored model equals the single-process run at step 4, and training resumed from it
  // (optimizer state included) ends where an uninterrupted run ends.
  std::vector<float> got(n);
  std::memcpy(got.data(), model.data(), model.size());
  const auto ref4 = ReferenceRun(c, kWorkers, 4, n);
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], ref4[i], 1e-5 * (1 + std::fabs(ref4[i])));
  {
    PsCluster cluster(kWorkers, kServers);
    for (int j = 0; j < kServers; ++j) ASSERT_TRUE(cluster.server(j).Restore(shard_dir(j)).ok());
    EXPECT_EQ(train(cluster, 8), 4);
    model = cluster.Model();
  }
  std::memcpy(got.data(), model.data(), model.size());
  const auto ref8 = ReferenceRun(c, kWorkers, 8, n);
  for (size_t i = 0; i < n; ++i) ASSERT_NEAR(got[i], ref8[i], 1e-5 * (1 + std::fabs(ref8[i])));
  std::filesystem::remove_all(dir);
}

TEST(PsLoopbackTest, PushesAndPullsAreInTheFlightRecorderFromIssueToWait) {
  auto layout = ModelLayout::Create({{1, 8, DataType::kF32}, {2, 2000, DataType::kF32}});
  ASSERT_TRUE(layout.ok());
  auto recorder = FlightRecorder::CreateInMemory(16, 0, 1);
  ASSERT_TRUE(recorder.ok());
  PsCluster cluster(1, 2);
  cluster.Start();
  {
    std::unique_ptr<PsWorker> ps = cluster.Worker(0, recorder->get());
    ASSERT_NE(ps, nullptr);
    std::vector<float> model(layout->total_bytes() / 4, 0.5f);
    ASSERT_TRUE(ps->InitModel(*layout, model.data(), OptimizerConfig{}).ok());
    auto pull = ps->PullAll(model.data());
    ASSERT_TRUE(pull.ok());
    auto reader = FlightRecorderReader::Attach(**recorder);
    FlightRecorderSnapshot during = reader->Snapshot();
    ASSERT_TRUE(ps->Wait(*pull).ok());
    const uint64_t key1[] = {1};
    auto push = ps->Push(key1, model.data(), 32, DataType::kF32);
    ASSERT_TRUE(push.ok());
    ASSERT_TRUE(ps->Wait(*push).ok());

    ASSERT_EQ(during.communicators.size(), 1u);
    ASSERT_TRUE(during.communicators[0].current.has_value()) << "the pull runs until Wait";
    EXPECT_EQ(during.communicators[0].current->record.op, FlightOp::kPsPull);
  }
  FlightRecorderSnapshot s = FlightRecorderReader::Attach(**recorder)->Snapshot();
  ASSERT_EQ(s.recent.size(), 2u);
  const FlightRecord& pull = s.recent[0].record;
  EXPECT_EQ(pull.op, FlightOp::kPsPull);
  EXPECT_EQ(pull.outcome, FlightOutcome::kOk);
  EXPECT_EQ(pull.bytes, layout->total_bytes());
  EXPECT_EQ(pull.peer, -1) << "the whole model spans both servers";
  EXPECT_EQ(pull.group_size, 2);
  const FlightRecord& push = s.recent[1].record;
  EXPECT_EQ(push.op, FlightOp::kPsPush);
  EXPECT_EQ(push.outcome, FlightOutcome::kOk);
  EXPECT_EQ(push.bytes, 32u);
  EXPECT_EQ(push.peer, 0) << "key 1 lives on server 0";
  EXPECT_EQ(FlightDataTypeName(push.dtype), "f32");
  EXPECT_GT(push.op_seq, pull.op_seq);
}

}  // namespace
}  // namespace cohort::collective::ps
