// Fault tests of the Reduction Server in real processes over UCX (tcp, and shared memory on one
// host): workers built with Communicator::FromEnvironment and reducers run with
// RunReducerFromEnvironment, as the agent launches them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <thread>

#include "collective/communicator.h"
#include "tests/collective/process_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// A survivor's exit codes: it got the error the test wants, another error, or its call worked.
constexpr int kNamedTheDeadWorker = 0;
constexpr int kOtherError = 2;
constexpr int kNoError = 3;
constexpr int kVictimExit = 9;

class UcxFaultTest : public ::testing::TestWithParam<std::string> {};

// Worker 1 of 3 dies (without a goodbye) after an all-reduce that worked; the others compute for
// 4 s, well past the reducers' old 2 s notice window, then all-reduce again with a 60 s deadline:
// each fails with kUnavailable naming worker 1 (not a reducer, not a timeout).
TEST_P(UcxFaultTest, WorkerDeadBetweenCallsIsNamedAtTheNextCall) {
  const std::string tls = GetParam();
  constexpr int kWorkers = 3, kReducers = 2, kVictim = 1;
  const int port = cohort::testing::PickFreePort();
  int done[2];  // each survivor writes a byte here once its first all-reduce worked
  ASSERT_EQ(pipe(done), 0);
  testing::ProcessGroup group;
  for (int i = 0; i < kReducers; ++i) {
    group.Spawn([&, i] {
      testing::SetJobEnv(tls, port, kWorkers, kReducers, 60000, /*reduction_server=*/true);
      return testing::ReducerMain(i);
    });
  }
  for (int r = 0; r < kWorkers; ++r) {
    group.Spawn([&, r] {
      testing::SetJobEnv(tls, port, kWorkers, kReducers, 60000, /*reduction_server=*/true);
      setenv("RANK", std::to_string(r).c_str(), 1);
      auto comm = Communicator::FromEnvironment();
      if (!comm.ok()) {
        std::fprintf(stderr, "worker %d: %s\n", r, comm.status().ToString().c_str());
        return 1;
      }
      std::vector<float> v(256 * 1024, 1.0f);
      if (Status s = (*comm)->Allreduce(v.data(), v.size(), DataType::kF32, ReduceOp::kSum);
          !s.ok() || v[0] != kWorkers) {
        std::fprintf(stderr, "worker %d: first all-reduce: %s\n", r, s.ToString().c_str());
        return 1;
      }
      if (r == kVictim) {
        // Dies once the others have their results, without closing anything.
        char b;
        for (int i = 0; i < kWorkers - 1; ++i) {
          if (read(done[0], &b, 1) != 1) return 1;
        }
        std::fflush(nullptr);
        _exit(kVictimExit);
      }
      (void)!write(done[1], "d", 1);
      std::this_thread::sleep_for(milliseconds(4000));
      Status s = (*comm)->Allreduce(v.data(), v.size(), DataType::kF32, ReduceOp::kSum);
      std::fprintf(stderr, "worker %d: next all-reduce: %s\n", r, s.ToString().c_str());
      if (s.ok()) return kNoError;
      const bool named = s.code() == StatusCode::kUnavailable &&
                         s.message().find("worker 1 is gone") != std::string::npos;
      return named ? kNamedTheDeadWorker : kOtherError;
    });
  }
  close(done[0]);
  close(done[1]);
  // Generous: each survivor's call must end by the error, not by its 60 s deadline.
  std::vector<int> workers;
  for (int r = 0; r < kWorkers; ++r) workers.push_back(kReducers + r);
  ASSERT_TRUE(group.Wait(milliseconds(120000), workers)) << "a worker hung";
  for (int r = 0; r < kWorkers; ++r) {
    const int code = group.code(kReducers + r);
    if (r == kVictim) {
      EXPECT_EQ(code, kVictimExit) << "worker 1 should have died after its first all-reduce";
    } else {
      EXPECT_EQ(code, kNamedTheDeadWorker)
          << "worker " << r << " (" << (code == kNoError ? "no error" : "see its stderr") << ")";
    }
  }
  group.KillAll();
}

INSTANTIATE_TEST_SUITE_P(Transports, UcxFaultTest, ::testing::Values("tcp", "sm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cohort::collective
