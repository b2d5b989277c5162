// The collectives other than the all-reduce across real processes over UCX (tcp and shared
// memory): workers built with Communicator::FromEnvironment, as the agent launches them (with
// reducers running beside them, which these calls must leave alone). Every type at counts 0, 1, odd
// and several chunks; results exact (moves) or against the reference (reductions). A SIGKILLed
// worker makes every survivor's allgather fail before the deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

#include "collective/communicator.h"
#include "collective/reducer.h"
#include "tests/collective/process_util.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// Runs every collective on every type and count; returns the number of failures (printed).
int WorkerMain(int rank) {
  setenv("RANK", std::to_string(rank).c_str(), 1);
  auto created = Communicator::FromEnvironment();
  if (!created.ok()) {
    std::fprintf(stderr, "worker %d: %s\n", rank, created.status().ToString().c_str());
    return 1;
  }
  Communicator& comm = **created;
  const int n = comm.size();
  int failures = 0;
  auto fail = [&](const std::string& what) {
    std::fprintf(stderr, "worker %d: %s\n", rank, what.c_str());
    ++failures;
  };
  // A failed call poisons the communicator: stop there.
  auto stop = [&](const std::string& what) {
    fail(what);
    return failures;
  };
  auto same = [](const std::vector<char>& want, const char* got, size_t bytes) {
    return std::memcmp(want.data(), got, bytes) == 0;
  };
  for (DataType type : testing::kAllTypes) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{999}, size_t{70001}}) {
      const size_t bytes = count * DataTypeSize(type);
      const std::string name = std::string(DataTypeName(type)) + "/" + std::to_string(count);
      const std::vector<char> mine = testing::MakeInput(type, rank, count);
      // Broadcast from the last worker.
      std::vector<char> b = rank == n - 1 ? mine : std::vector<char>(bytes + 1, 0);
      Status s = comm.Broadcast(b.data(), count, type, n - 1);
      if (!s.ok()) return stop("broadcast " + name + ": " + s.ToString());
      if (!same(testing::MakeInput(type, n - 1, count), b.data(), bytes)) fail("broadcast " + name);
      // Allgather.
      std::vector<char> all(n * bytes + 1);
      s = comm.Allgather(mine.data(), all.data(), count, type);
      if (!s.ok()) return stop("allgather " + name + ": " + s.ToString());
      for (int r = 0; r < n; ++r) {
        if (!same(testing::MakeInput(type, r, count), all.data() + r * bytes, bytes)) {
          fail("allgather " + name + " block " + std::to_string(r));
        }
      }
      // Reduce-scatter and reduce, every op.
      const std::vector<char> big = testing::MakeInput(type, rank, n * count);
      for (ReduceOp op : testing::OpsFor(type)) {
        std::vector<char> block(bytes + 1);
        s = comm.ReduceScatter(big.data(), block.data(), count, type, op);
        if (!s.ok()) return stop("reduce-scatter " + name + ": " + s.ToString());
        const double tol = testing::Tolerance(type, op, n);
        for (size_t i = 0; i < count; ++i) {
          if (!(std::fabs(testing::Load(type, block.data(), i) -
                          testing::Reference(type, op, n, rank * count + i)) <= tol)) {
            fail("reduce-scatter " + name + "/" + std::string(ReduceOpName(op)) + " element " +
                 std::to_string(i));
            break;
          }
        }
        std::vector<char> out(bytes + 1);
        s = comm.Reduce(mine.data(), out.data(), count, type, op, 0);
        if (!s.ok()) return stop("reduce " + name + ": " + s.ToString());
        if (rank == 0) {
          const std::string bad = testing::CheckResult(type, op, n, out.data(), count);
          if (!bad.empty())
            fail("reduce " + name + "/" + std::string(ReduceOpName(op)) + ": " + bad);
        }
      }
      // Gather to worker 1, scatter from it, alltoall.
      std::vector<char> gathered(n * bytes + 1);
      s = comm.Gather(mine.data(), gathered.data(), count, type, 1 % n);
      if (!s.ok()) return stop("gather " + name + ": " + s.ToString());
      if (rank == 1 % n && gathered != all) fail("gather " + name);
      std::vector<char> part(bytes + 1);
      s = comm.Scatter(all.data(), part.data(), count, type, 1 % n);
      if (!s.ok()) return stop("scatter " + name + ": " + s.ToString());
      if (!same(mine, part.data(), bytes)) fail("scatter " + name);
      std::vector<char> swapped(n * bytes + 1);
      s = comm.Alltoall(all.data(), swapped.data(), count, type);
      if (!s.ok()) return stop("alltoall " + name + ": " + s.ToString());
      for (int r = 0; r < n; ++r) {
        if (!same(mine, swapped.data() + r * bytes, bytes))
          fail("alltoall " + name + " block " + std::to_string(r));
      }
      // Point-to-point round the ring.
      if (n > 1) {
        std::vector<char> got(bytes + 1);
        auto recv = comm.Irecv(got.data(), count, type, (rank - 1 + n) % n, 5);
        s = recv.ok() ? comm.Send(mine.data(), count, type, (rank + 1) % n, 5) : recv.status();
        if (s.ok()) s = recv->Wait();
        if (!s.ok()) return stop("send/recv " + name + ": " + s.ToString());
        if (!same(testing::MakeInput(type, (rank - 1 + n) % n, count), got.data(), bytes))
          fail("recv " + name);
      }
    }
  }
  Status s = comm.Barrier();
  if (!s.ok()) fail("barrier: " + s.ToString());
  return failures == 0 ? 0 : 2;
}

class CollectivesProcessTest : public ::testing::TestWithParam<testing::UcxJob> {};

TEST_P(CollectivesProcessTest, EveryCollectiveAndTypeAcrossProcesses) {
  testing::RunUcxJob(GetParam(), false, WorkerMain);
}

INSTANTIATE_TEST_SUITE_P(Ucx, CollectivesProcessTest,
                         ::testing::Values(std::make_tuple("tcp", 1, 0),
                                           std::make_tuple("tcp", 3, 0),
                                           std::make_tuple("tcp", 4, 1),
                                           std::make_tuple("sm", 2, 0),
                                           std::make_tuple("sm", 5, 0)),
                         testing::UcxJobName);

// Workers allgather 1 MiB in a loop (each reports on a pipe after its first success); the parent
// SIGKILLs one; every survivor exits with kUnavailable or kDeadlineExceeded in time.
TEST(CollectivesKillTest, SurvivorsOfAKilledWorkerFailBeforeTheDeadline) {
  for (const std::string tls : {"tcp", "sm"}) {
    constexpr int kWorkers = 4;
    constexpr int kVictim = 2;
    constexpr int kTimeoutMs = 8000;
    const int port = cohort::testing::PickFreePort();
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    testing::ProcessGroup group;
    for (int r = 0; r < kWorkers; ++r) {
      group.Spawn([&, r] {
        close(ready[0]);
        testing::SetJobEnv(tls, port, kWorkers, 0, kTimeoutMs);
        setenv("RANK", std::to_string(r).c_str(), 1);
        auto comm = Communicator::FromEnvironment();
        if (!comm.ok()) return 1;
        std::vector<float> v(256 * 1024, 1.0f), all(kWorkers * v.size());
        for (int i = 0; i < 1000000; ++i) {
          Status s = (*comm)->Allgather(v.data(), all.data(), v.size(), DataType::kF32);
          if (!s.ok()) {
            std::fprintf(stderr, "worker %d after %d rounds: %s\n", r, i, s.ToString().c_str());
            if (s.code() == StatusCode::kUnavailable) return 3;
            return s.code() == StatusCode::kDeadlineExceeded ? 4 : 5;
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
    for (int i = 0; i < kWorkers; ++i) {
      char b;
      ASSERT_EQ(read(ready[0], &b, 1), 1) << tls << ": a worker died before its first allgather";
    }
    close(ready[0]);
    group.Kill(kVictim);
    const auto killed_at = SteadyClock::now();
    std::vector<int> survivors = {0, 1, 3};
    ASSERT_TRUE(group.Wait(milliseconds(kTimeoutMs + 5000), survivors))
        << tls << ": a survivor hung";
    EXPECT_LT(SteadyClock::now() - killed_at, milliseconds(kTimeoutMs + 3000)) << tls;
    int unavailable = 0;
    for (int i : survivors) {
      EXPECT_TRUE(group.code(i) == 3 || group.code(i) == 4)
          << tls << ": worker " << i << " exited " << group.code(i);
      unavailable += group.code(i) == 3;
    }
    EXPECT_GT(unavailable, 0) << tls << ": the dead peer should be noticed, not just timed out";
    group.KillAll();
  }
}

}  // namespace
}  // namespace cohort::collective
