// Real processes over UCX (tcp and shared memory): workers built with
// Communicator::FromEnvironment (the chief serves the bootstrap store), reducers run with
// RunReducerFromEnvironment, exactly as the agent launches them. Fault tests SIGKILL a worker or
// a reducer and check that every survivor's all-reduce returns an error before the deadline.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>

#include "collective/algorithms/halving_doubling.h"
#include "collective/communicator.h"
#include "collective/reducer.h"
#include "collective/store_bootstrap.h"
#include "tests/collective/process_util.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// The exit code of a worker whose all-reduce failed with `code` (its other exit codes are below
// 16), so that the test reads the status code back.
int ExitCodeFor(StatusCode code) { return 16 + static_cast<int>(code); }

// Every type and op at counts 0, 1, odd and several chunks; checks against the reference and
// that a repeat is bit-identical.
int WorkerCorrectnessMain(int rank, int reducers) {
  setenv("RANK", std::to_string(rank).c_str(), 1);
  auto comm = Communicator::FromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "worker %d: %s\n", rank, comm.status().ToString().c_str());
    return 1;
  }
  int failures = 0;
  std::vector<Algorithm> algos = {Algorithm::kAuto};
  if ((*comm)->AutoAlgorithm() != Algorithm::kRing) algos.push_back(Algorithm::kRing);
  if (HalvingDoublingFits((*comm)->size())) algos.push_back(Algorithm::kHalvingDoubling);
  algos.push_back(Algorithm::kRecursiveDoubling);
  // Over sm every rank shares this host: the shared-memory all-reduce must be there (and is what
  // kAuto runs without reducers); over tcp it must not be.
  if ((*comm)->shared_memory_available() != (std::getenv("UCX_TLS") == std::string("sm"))) {
    std::fprintf(stderr, "worker %d: shared memory available=%d with UCX_TLS=%s\n", rank,
                 (*comm)->shared_memory_available(), std::getenv("UCX_TLS"));
    return 3;
  }
  if ((*comm)->shared_memory_available() && reducers > 0) algos.push_back(Algorithm::kSharedMemory);
  for (Algorithm algo : algos) {
    for (DataType type : testing::kAllTypes) {
      for (ReduceOp op : testing::OpsFor(type)) {
        for (size_t count : {size_t{0}, size_t{1}, size_t{999}, size_t{70001}}) {
          std::vector<char> a = testing::MakeInput(type, rank, count);
          std::vector<char> b = a;
          Status s = (*comm)->Allreduce(a.data(), count, type, op, algo);
          if (s.ok()) s = (*comm)->Allreduce(b.data(), count, type, op, algo);
          if (!s.ok()) {
            std::fprintf(stderr, "worker %d: %s\n", rank, s.ToString().c_str());
            return 1;
          }
          const std::string bad = testing::CheckResult(type, op, (*comm)->size(), a.data(), count);
          if (!bad.empty() || a != b) {
            std::fprintf(stderr, "worker %d %s/%s/%s/%zu: %s%s\n", rank,
                         std::string(AlgorithmName(algo)).c_str(),
                         std::string(DataTypeName(type)).c_str(),
                         std::string(ReduceOpName(op)).c_str(), count, bad.c_str(),
                         a != b ? " (repeat differs)" : "");
            ++failures;
          }
        }
      }
    }
  }
  return failures == 0 ? 0 : 2;
}

class UcxProcessTest : public ::testing::TestWithParam<testing::UcxJob> {};

// On one host kAuto would run the shared-memory all-reduce; these tests are about the Reduction
// Server's processes, so a job with reducers asks for it.
TEST_P(UcxProcessTest, EveryTypeAndOpAcrossProcesses) {
  const int reducers = std::get<2>(GetParam());
  testing::RunUcxJob(GetParam(), reducers > 0,
                     [reducers](int rank) { return WorkerCorrectnessMain(rank, reducers); });
}

INSTANTIATE_TEST_SUITE_P(
    Tcp, UcxProcessTest,
    ::testing::Values(std::make_tuple("tcp", 1, 0), std::make_tuple("tcp", 3, 0),
                      std::make_tuple("tcp", 4, 0), std::make_tuple("tcp", 1, 1),
                      std::make_tuple("tcp", 2, 1), std::make_tuple("tcp", 3, 2),
                      std::make_tuple("tcp", 4, 4)),
    testing::UcxJobName);
INSTANTIATE_TEST_SUITE_P(SharedMemory, UcxProcessTest,
                         ::testing::Values(std::make_tuple("sm", 2, 0), std::make_tuple("sm", 5, 0),
                                           std::make_tuple("sm", 3, 1),
                                           std::make_tuple("sm", 4, 3)),
                         testing::UcxJobName);

// A worker whose all-reduce differs from the others' (worker 1 passes one element more), in a
// buffer that travels by rendezvous, so the workers that do not take it drain it: every worker,
// worker 1 too, must fail with kInvalidArgument naming a worker whose call differs (exit 0), not
// at the 30 s deadline (another code) nor with a result.
int WorkerDisagreeMain(int rank, Algorithm algo) {
  setenv("RANK", std::to_string(rank).c_str(), 1);
  auto comm = Communicator::FromEnvironment();
  if (!comm.ok()) {
    std::fprintf(stderr, "worker %d: %s\n", rank, comm.status().ToString().c_str());
    return 1;
  }
  constexpr size_t kCount = 300000;  // 1.2 MB
  const size_t count = rank == 1 ? kCount + 1 : kCount;
  std::vector<float> v(count, 1.0f);
  const Status s = (*comm)->Allreduce(v.data(), count, DataType::kF32, ReduceOp::kSum, algo);
  const std::string want = rank == 1 ? " called 300000 f32 (sum), this worker 300001 f32"
                                     : "worker 1 called 300001 f32 (sum), this worker 300000";
  if (s.code() != StatusCode::kInvalidArgument || s.message().find(want) == std::string::npos) {
    std::fprintf(stderr, "worker %d: %s\n", rank, s.ToString().c_str());
    return 2;
  }
  return 0;
}

TEST(UcxAgreementTest, WorkersWhoseCallsDifferAllFailNamingOne) {
  const std::vector<std::pair<testing::UcxJob, Algorithm>> cases = {
      {{"tcp", 3, 0}, Algorithm::kRecursiveDoubling},  // worker 1 takes worker 0's fold
      {{"tcp", 4, 0}, Algorithm::kHalvingDoubling},
      {{"sm", 5, 0}, Algorithm::kRecursiveDoubling},
      {{"tcp", 3, 0}, Algorithm::kRing},
      {{"sm", 4, 0}, Algorithm::kRing}};
  for (const auto& [job, algo] : cases) {
    SCOPED_TRACE(std::get<0>(job) + ", " + std::to_string(std::get<1>(job)) + " workers, " +
                 std::string(AlgorithmName(algo)));
    testing::RunUcxJob(job, false, [algo](int rank) { return WorkerDisagreeMain(rank, algo); });
  }
}

TEST(CommunicatorEnvTest, AllreduceAlgorithmFromTheEnvironment) {
  // A job of one needs no bootstrap: FromEnvironment builds it at once.
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  unsetenv("COHORT_BOOTSTRAP_ADDR");
  unsetenv("COHORT_NUM_REDUCERS");
  setenv("COHORT_ALLREDUCE_ALGORITHM", "tree", 1);
  auto bad = Communicator::FromEnvironment();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("COHORT_ALLREDUCE_ALGORITHM='tree'"), std::string::npos);
  for (const char* name : {"auto", "ring", "reduction-server"}) {
    setenv("COHORT_ALLREDUCE_ALGORITHM", name, 1);
    auto comm = Communicator::FromEnvironment();
    ASSERT_TRUE(comm.ok()) << name << ": " << comm.status().ToString();
    // Without reducers every choice is the ring.
    EXPECT_EQ((*comm)->AutoAlgorithm(), Algorithm::kRing) << name;
  }
  unsetenv("COHORT_ALLREDUCE_ALGORITHM");
}

// The chunk size both ranks of a two-worker UCX communicator (threads of this process) pick when
// CommunicatorOptions::chunk_bytes is 0.
std::vector<size_t> PickedChunkBytes(const char* tls) {
  setenv("UCX_TLS", tls, 1);
  InMemoryBootstrap bootstrap;
  std::vector<size_t> picked(2, 0);
  testing::RunRanks(2, [&](int r) {
    CommunicatorOptions options;
    options.timeout = milliseconds(20000);
    auto comm = Communicator::Create(bootstrap, r, 2, 0, options);
    if (comm.ok()) picked[r] = (*comm)->chunk_bytes();
  });
  unsetenv("UCX_TLS");
  return picked;
}

// Over UCX with shared memory allowed and every rank on this host, the workers map each other's
// segments and kAuto runs the shared-memory all-reduce; without shared memory (UCX_TLS=tcp) it is
// not there, and asking for it by name is refused clearly.
TEST(CommunicatorEnvTest, SharedMemoryAllreduceOnlyWhenEveryRankSharesTheHostOverSharedMemory) {
  for (const char* tls : {"sm,tcp", "tcp"}) {
    setenv("UCX_TLS", tls, 1);
    const bool shm = std::string(tls) != "tcp";
    InMemoryBootstrap bootstrap;
    std::vector<std::string> failures(3);
    testing::RunRanks(3, [&](int r) {
      CommunicatorOptions options;
      options.timeout = milliseconds(20000);
      auto comm = Communicator::Create(bootstrap, r, 3, 0, options);
      if (!comm.ok()) {
        failures[r] = comm.status().ToString();
        return;
      }
      if ((*comm)->shared_memory_available() != shm)
        failures[r] = "shared_memory_available() is wrong";
      const Algorithm want = shm ? Algorithm::kSharedMemory : Algorithm::kRing;
      if ((*comm)->AutoAlgorithm() != want) {
        failures[r] = "kAuto picks " + std::string(AlgorithmName((*comm)->AutoAlgorithm()));
      }
      int64_t v[2] = {r + 1, -(r + 1)};
      Status s = (*comm)->Allreduce(v, 2, DataType::kI64, ReduceOp::kSum, Algorithm::kSharedMemory);
      if (shm && (!s.ok() || v[0] != 6 || v[1] != -6))
        failures[r] = "shared memory: " + s.ToString();
      if (!shm && (s.code() != StatusCode::kInvalidArgument ||
                   s.message().find("UCX_TLS") == std::string::npos)) {
        failures[r] = "without shared memory: " + s.ToString();
      }
      // One host: nothing to be hierarchical about, and asking for it is refused by name.
      s = (*comm)->Allreduce(v, 2, DataType::kI64, ReduceOp::kSum, Algorithm::kHierarchical);
      if ((*comm)->hierarchical_available() || s.code() != StatusCode::kInvalidArgument ||
          s.message().find("two or more hosts") == std::string::npos) {
        failures[r] = "hierarchical on one host: " + s.ToString();
      }
    });
    for (int r = 0; r < 3; ++r) EXPECT_EQ(failures[r], "") << tls << ", worker " << r;
  }
  unsetenv("UCX_TLS");
}

TEST(CommunicatorEnvTest, ChunkBytesFollowPlacementUnlessSet) {
  // Every rank on this host with shared memory allowed: the one-host pipeline unit.
  EXPECT_EQ(PickedChunkBytes("sm,tcp"), std::vector<size_t>(2, kSameHostChunkBytes));
  // Without shared memory the ranks talk as they would across hosts.
  EXPECT_EQ(PickedChunkBytes("tcp"), std::vector<size_t>(2, kDefaultChunkBytes));
  // Set by hand (COHORT_CHUNK_BYTES), it is used as it is; too small is refused by name.
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  unsetenv("COHORT_BOOTSTRAP_ADDR");
  unsetenv("COHORT_NUM_REDUCERS");
  unsetenv("COHORT_ALLREDUCE_ALGORITHM");
  setenv("COHORT_CHUNK_BYTES", "65536", 1);
  auto set = Communicator::FromEnvironment();
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ((*set)->chunk_bytes(), 65536u);
  setenv("COHORT_CHUNK_BYTES", "100", 1);
  auto bad = Communicator::FromEnvironment();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("COHORT_CHUNK_BYTES"), std::string::npos)
      << bad.status().ToString();
  unsetenv("COHORT_CHUNK_BYTES");
}

TEST(UcxRdmaTest, RcAndUdNeedAnRdmaDevice) {
  GTEST_SKIP() << "no RDMA device on this machine (ucx_info -d lists only tcp and shared memory); "
                  "rc/ud run where a fabric exists, selected with UCX_TLS=rc or UCX_TLS=ud";
}

// Kill tests: workers all-reduce 1 MiB buffers in a loop (each reports on a pipe after its first
// success); the parent SIGKILLs one process; every survivor must exit with an error in time.
struct KillCase {
  std::string tls;
  int workers;
  int reducers;
  bool kill_reducer;
  int victim;
};

void PrintTo(const KillCase& c, std::ostream* os) {
  *os << c.tls << " workers=" << c.workers << " reducers=" << c.reducers << " kill "
      << (c.kill_reducer ? "reducer " : "worker ") << c.victim;
}

class UcxKillTest : public ::testing::TestWithParam<KillCase> {};

TEST_P(UcxKillTest, SurvivorsReturnErrorsBeforeTheDeadline) {
  const KillCase c = GetParam();
  constexpr int kTimeoutMs = 10000;
  const int port = cohort::testing::PickFreePort();
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  testing::ProcessGroup group;
  for (int i = 0; i < c.reducers; ++i) {
    group.Spawn([&, i] {
      close(ready[0]);
      testing::SetJobEnv(c.tls, port, c.workers, c.reducers, kTimeoutMs, c.reducers > 0);
      return testing::ReducerMain(i);
    });
  }
  for (int r = 0; r < c.workers; ++r) {
    group.Spawn([&, r] {
      close(ready[0]);
      testing::SetJobEnv(c.tls, port, c.workers, c.reducers, kTimeoutMs, c.reducers > 0);
      setenv("RANK", std::to_string(r).c_str(), 1);
      auto comm = Communicator::FromEnvironment();
      if (!comm.ok()) return 1;
      std::vector<float> v(256 * 1024, 1.0f);
      for (int i = 0; i < 1000000; ++i) {
        Status s = (*comm)->Allreduce(v.data(), v.size(), DataType::kF32, ReduceOp::kAvg);
        if (!s.ok()) {
          std::fprintf(stderr, "worker %d after %d rounds: %s\n", r, i, s.ToString().c_str());
          const auto t0 = SteadyClock::now();
          comm->reset();
          std::fprintf(
              stderr, "worker %d: communicator closed in %lld ms\n", r,
              static_cast<long long>(
                  std::chrono::duration_cast<milliseconds>(SteadyClock::now() - t0).count()));
          return ExitCodeFor(s.code());
        }
        if (i == 0) {
          char b = 'r';
          (void)!write(ready[1], &b, 1);
        }
      }
      return 0;
    });
  }
  close(ready[1]);
  for (int i = 0; i < c.workers; ++i) {
    char b;
    ASSERT_EQ(read(ready[0], &b, 1), 1) << "a worker died before its first all-reduce";
  }
  close(ready[0]);
  const int victim = c.kill_reducer ? c.victim : c.reducers + c.victim;
  group.Kill(victim);
  const auto killed_at = SteadyClock::now();
  std::vector<int> survivors;
  for (int i = c.reducers; i < c.reducers + c.workers; ++i) {
    if (i != victim) survivors.push_back(i);
  }
  ASSERT_TRUE(group.Wait(milliseconds(kTimeoutMs + 5000), survivors)) << "a survivor hung";
  const auto elapsed = SteadyClock::now() - killed_at;
  EXPECT_LT(elapsed, milliseconds(kTimeoutMs + 3000));
  int unavailable = 0;
  for (int i : survivors) {
    const bool gone = group.code(i) == ExitCodeFor(StatusCode::kUnavailable);
    EXPECT_TRUE(gone || group.code(i) == ExitCodeFor(StatusCode::kDeadlineExceeded))
        << "worker " << i - c.reducers << " exited " << group.code(i);
    unavailable += gone;
  }
  if (c.tls == "tcp" || c.reducers == 0) {
    // tcp notices a dead peer itself; without reducers on one host the workers run the
    // shared-memory all-reduce, which checks its peers' PIDs.
    EXPECT_GT(unavailable, 0) << "the dead peer should be noticed, not just timed out";
  }
  group.KillAll();
}

INSTANTIATE_TEST_SUITE_P(
    Kill, UcxKillTest,
    ::testing::Values(KillCase{"tcp", 3, 2, true, 1}, KillCase{"tcp", 3, 1, false, 2},
                      KillCase{"tcp", 4, 0, false, 1}, KillCase{"sm", 3, 2, true, 0},
                      KillCase{"sm", 3, 0, false, 2}),
    [](const auto& info) {
      const KillCase& c = info.param;
      return c.tls + "_w" + std::to_string(c.workers) + "_r" + std::to_string(c.reducers) +
             "_kill_" + (c.kill_reducer ? "reducer" : "worker") + std::to_string(c.victim);
    });

// Reducer 0 of 1, started for 2 workers (as the agent starts it for a job of 2 training replicas),
// serving two generations of the job whose store is on `port`; 0 when both ended well.
int ReducerOfTwoGenerations(int port) {
  testing::SetJobEnv("tcp", port, 2, 1, 20000, true);
  auto bootstrap = StoreBootstrap::Connect("127.0.0.1:" + std::to_string(port));
  if (!bootstrap.ok()) return 1;
  ReducerOptions options;
  options.comm.timeout = milliseconds(20000);
  options.rejoin_timeout = milliseconds(20000);
  options.max_generations = 2;
  std::atomic<bool> stop{false};
  Status s = RunReducer(**bootstrap, 2, 1, 0, options, stop);
  if (!s.ok()) std::fprintf(stderr, "reducer: %s\n", s.ToString().c_str());
  return s.ok() ? 0 : 1;
}

// A reducer outlives its workers: they rebuild (new chief store, new generation) and the same
// reducer process serves the second generation too.
TEST(UcxReducerTest, ReducerRejoinsWhenWorkersRebuild) {
  const int port = cohort::testing::PickFreePort();
  testing::ProcessGroup group;
  group.Spawn([&] { return ReducerOfTwoGenerations(port); });
  for (int r = 0; r < 2; ++r) {
    group.Spawn([&, r] {
      testing::SetJobEnv("tcp", port, 2, 1, 20000, true);
      setenv("RANK", std::to_string(r).c_str(), 1);
      for (int gen = 0; gen < 2; ++gen) {
        auto comm = Communicator::FromEnvironment();
        if (!comm.ok()) {
          std::fprintf(stderr, "worker %d gen %d: %s\n", r, gen, comm.status().ToString().c_str());
          return 1;
        }
        int64_t v[3] = {r + 1, 10 * (r + 1), gen};
        Status s = (*comm)->Allreduce(v, 3, DataType::kI64, ReduceOp::kSum);
        if (!s.ok() || v[0] != 3 || v[1] != 30 || v[2] != 2 * gen) {
          std::fprintf(stderr, "worker %d gen %d: %s\n", r, gen, s.ToString().c_str());
          return 2;
        }
      }
      return 0;
    });
  }
  ASSERT_TRUE(group.Wait(milliseconds(90000)));
  EXPECT_EQ(group.code(0), 0) << "reducer";
  EXPECT_EQ(group.code(1), 0) << "worker 0";
  EXPECT_EQ(group.code(2), 0) << "worker 1";
}

// A reducer serves the workers each generation's chief recorded, not the count it was started
// for: under Cohort it is told one worker per training replica (COHORT_NUM_WORKERS), and where a
// launcher inside each replica (torchrun --nproc_per_node 2) starts two ranks the workers are
// twice that. Generation 1 has the 2 workers it was started for, generation 2 has 4.
TEST(UcxReducerTest, ReducerServesTheWorkersTheGenerationRecords) {
  const int port = cohort::testing::PickFreePort();
  testing::ProcessGroup group;
  group.Spawn([&] { return ReducerOfTwoGenerations(port); });
  // Generation 1: two workers; generation 2: four, started once the first two have ended (a
  // relaunch of the job with two ranks per replica).
  auto spawn_generation = [&](int gen, int workers) {
    std::vector<int> children;
    for (int r = 0; r < workers; ++r) {
      children.push_back(group.Spawn([&, gen, workers, r] {
        testing::SetJobEnv("tcp", port, workers, 1, 20000, true);
        setenv("RANK", std::to_string(r).c_str(), 1);
        auto comm = Communicator::FromEnvironment();
        if (!comm.ok()) {
          std::fprintf(stderr, "gen %d worker %d: %s\n", gen, r, comm.status().ToString().c_str());
          return 1;
        }
        int64_t v[3] = {r + 1, 10 * (r + 1), gen};
        const int64_t sum = workers * (workers + 1) / 2;
        Status s = (*comm)->Allreduce(v, 3, DataType::kI64, ReduceOp::kSum);
        if (!s.ok() || v[0] != sum || v[1] != 10 * sum || v[2] != workers * gen) {
          std::fprintf(stderr, "gen %d worker %d: %s\n", gen, r, s.ToString().c_str());
          return 2;
        }
        return 0;
      }));
    }
    return children;
  };
  ASSERT_TRUE(group.Wait(milliseconds(60000), spawn_generation(0, 2)));
  spawn_generation(1, 4);
  ASSERT_TRUE(group.Wait(milliseconds(90000)));
  for (int i = 0; i < 7; ++i) {
    EXPECT_EQ(group.code(i), 0) << (i == 0 ? "the reducer" : "worker process " + std::to_string(i));
  }
}

// A reducer that never shows up is named in the error.
TEST(UcxReducerTest, MissingReducerIsNamed) {
  const int port = cohort::testing::PickFreePort();
  testing::ProcessGroup group;
  group.Spawn([&] {
    testing::SetJobEnv("tcp", port, 1, 2, 1500, true);
    setenv("RANK", "0", 1);
    auto comm = Communicator::FromEnvironment();
    if (comm.ok()) return 1;
    const std::string m = comm.status().ToString();
    std::fprintf(stderr, "%s\n", m.c_str());
    return m.find("reducer 0 never published its address within 1.5s") != std::string::npos ? 0 : 2;
  });
  ASSERT_TRUE(group.Wait(milliseconds(30000)));
  EXPECT_EQ(group.code(0), 0);
}

}  // namespace
}  // namespace cohort::collective
