// SharedMemoryGroup with workers as threads of this process (the segments are real POSIX shared
// memory; ucx_process_test.cc runs it across processes and kills one): every type and op against
// the double-precision reference, both kinds of slot (summed whole by everyone, and cut into
// slices), repeats bit-identical, failures that stop every worker, and creation that every worker
// agrees on.
#include "collective/algorithms/shared_memory_allreduce.h"

#include <dirent.h>
#include <gtest/gtest.h>

#include <thread>

#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// 256 KiB slots: slots up to 128 KiB are summed whole by every worker, larger ones by slices.
constexpr size_t kSlotBytes = size_t{256} << 10;
static_assert(kSharedMemorySumAllMaxBytes == kSlotBytes / 2, "the counts below assume this");

// Names in /dev/shm that contain `part`.
std::vector<std::string> DevShmNames(const std::string& part) {
  std::vector<std::string> names;
  if (DIR* d = opendir("/dev/shm")) {
    while (dirent* e = readdir(d)) {
      if (std::string(e->d_name).find(part) != std::string::npos) names.push_back(e->d_name);
    }
    closedir(d);
  }
  return names;
}

std::vector<std::unique_ptr<SharedMemoryGroup>> CreateGroups(int workers, const std::string& prefix,
                                                             size_t slot_bytes = kSlotBytes) {
  InMemoryBootstrap bootstrap;
  std::vector<std::unique_ptr<SharedMemoryGroup>> groups(workers);
  testing::RunRanks(workers, [&](int r) {
    auto g = SharedMemoryGroup::Create(bootstrap, prefix, r, workers, slot_bytes,
                                       DeadlineAfter(milliseconds(20000)));
    if (g.ok()) groups[r] = std::move(*g);
  });
  return groups;
}

AllreduceOptions Options(void* data, size_t count, DataType type, ReduceOp op,
                         milliseconds timeout) {
  return {.data = data, .count = count, .type = type, .op = op, .deadline = DeadlineAfter(timeout)};
}

class SharedMemoryAllreduceTest : public ::testing::TestWithParam<int> {};

TEST_P(SharedMemoryAllreduceTest, EveryTypeOpAndCountMatchesReferenceAndRepeatsBitIdentically) {
  const int workers = GetParam();
  auto groups = CreateGroups(workers, "shm-test-every-" + std::to_string(workers));
  for (int r = 0; r < workers; ++r)
    ASSERT_NE(groups[r], nullptr) << "worker " << r << " has no group";
  EXPECT_TRUE(DevShmNames("shm_test_every_" + std::to_string(workers)).empty())
      << "segments left in /dev/shm";

  // 0; 1; one small slot; one small slot (2- and 4-byte types) or sliced one (8-byte types);
  // several slots, sliced but for the last of 4- and 8-byte types.
  const auto failures = testing::CheckEveryCase(
      workers, {0, 1, 1001, 20011, 200003},
      [&](int w, void* data, size_t count, DataType type, ReduceOp op) {
        return groups[w]->Allreduce(Options(data, count, type, op, milliseconds(60000)));
      });
  for (const auto& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(Workers, SharedMemoryAllreduceTest, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "w" + std::to_string(info.param); });

// Workers whose calls differ (count in one small slot, a small call against a sliced one, type with
// the same bytes, op, an empty call against a full one): every worker, the odd one out included,
// fails with kInvalidArgument naming a worker whose call differs from its own and quoting both
// calls, not at its deadline.
TEST(SharedMemoryAllreduceAgreementTest, WorkersWhoseCallsDifferAllFailNamingOne) {
  struct Call {
    size_t count;
    DataType type;
    ReduceOp op;
  };
  const Call common = {1000, DataType::kF32, ReduceOp::kSum};
  const std::vector<std::pair<std::string, Call>> odd_calls = {
      {"count", {1001, DataType::kF32, ReduceOp::kSum}},
      {"sliced", {200003, DataType::kF32, ReduceOp::kSum}},
      {"type", {1000, DataType::kI32, ReduceOp::kSum}},
      {"op", {1000, DataType::kF32, ReduceOp::kMin}},
      {"empty", {0, DataType::kF32, ReduceOp::kSum}}};
  auto describe = [](const Call& c) {
    return std::to_string(c.count) + " " + std::string(DataTypeName(c.type)) + " (" +
           std::string(ReduceOpName(c.op)) + ")";
  };
  constexpr int kWorkers = 4;
  constexpr int kOdd = 2;
  for (const auto& [name, odd_call] : odd_calls) {
    auto groups = CreateGroups(kWorkers, "shm-test-agree-" + name);
    for (int r = 0; r < kWorkers; ++r) ASSERT_NE(groups[r], nullptr) << name;
    std::vector<Status> status(kWorkers);
    testing::RunRanks(kWorkers, [&](int r) {
      const Call& c = r == kOdd ? odd_call : common;
      std::vector<char> data(c.count * DataTypeSize(c.type) + 1);
      status[r] =
          groups[r]->Allreduce(Options(data.data(), c.count, c.type, c.op, milliseconds(20000)));
    });
    for (int r = 0; r < kWorkers; ++r) {
      const std::string want =
          r == kOdd ? " called " + describe(common) + ", this worker " + describe(odd_call)
                    : "worker " + std::to_string(kOdd) + " called " + describe(odd_call) +
                          ", this worker " + describe(common);
      EXPECT_EQ(status[r].code(), StatusCode::kInvalidArgument)
          << name << ", worker " << r << ": " << status[r].ToString();
      EXPECT_NE(status[r].message().find("the workers disagree: "), std::string::npos)
          << name << ", worker " << r << ": " << status[r].ToString();
      EXPECT_NE(status[r].message().find(want), std::string::npos)
          << name << ", worker " << r << ": " << status[r].ToString();
    }
  }
}

// Workers whose calls are the same but at different places of their sequences (one worker's
// earlier call ended without the others: AllreduceOptions::seq differs) do not sum each other's
// data: every one fails with kInvalidArgument naming a worker at another place and both places.
// (With the Communicator's stall check they name the calls instead:
// CollectiveAgreementTest.AWorkerAheadOfTheOthersByEagerCallsFailsWithThemWhenTheirCallsDiffer.)
TEST(SharedMemoryAllreduceAgreementTest, WorkersAtDifferentPlacesOfTheirCallsAllFail) {
  constexpr int kWorkers = 3;
  constexpr int kAhead = 1;
  auto groups = CreateGroups(kWorkers, "shm-test-places");
  for (int r = 0; r < kWorkers; ++r) ASSERT_NE(groups[r], nullptr);
  std::vector<Status> status(kWorkers);
  testing::RunRanks(kWorkers, [&](int r) {
    std::vector<float> data(1000, 1.0f);
    AllreduceOptions o =
        Options(data.data(), data.size(), DataType::kF32, ReduceOp::kSum, milliseconds(20000));
    o.seq = r == kAhead ? 8 : 7;
    status[r] = groups[r]->Allreduce(o);
  });
  for (int r = 0; r < kWorkers; ++r) {
    const std::string want = r == kAhead ? " is in its call #7, this worker in its call #8"
                                         : "worker 1 is in its call #8, this worker in its call #7";
    EXPECT_EQ(status[r].code(), StatusCode::kInvalidArgument)
        << "worker " << r << ": " << status[r].ToString();
    EXPECT_NE(status[r].message().find(want), std::string::npos)
        << "worker " << r << ": " << status[r].ToString();
  }
}

// A worker whose wait fails (its deadline) marks itself failed; its peers stop waiting for it and
// fail with its code long before their own deadlines (their own code would be kDeadlineExceeded
// too, but only after 60 s); later calls are refused with kAborted.
TEST(SharedMemoryAllreduceFaultTest, AFailedWorkerStopsTheOthers) {
  auto groups = CreateGroups(3, "shm-test-abort");
  for (int r = 0; r < 3; ++r) ASSERT_NE(groups[r], nullptr);
  std::vector<Status> status(3);
  testing::RunRanks(3, [&](int r) {
    std::vector<float> v(50000, 1.0f);
    if (r == 1) std::this_thread::sleep_for(milliseconds(1000));
    const milliseconds timeout = r == 2 ? milliseconds(200) : milliseconds(60000);
    status[r] =
        groups[r]->Allreduce(Options(v.data(), v.size(), DataType::kF32, ReduceOp::kSum, timeout));
  });
  EXPECT_EQ(status[2].code(), StatusCode::kDeadlineExceeded) << status[2].ToString();
  EXPECT_NE(status[2].message().find("worker 1"), std::string::npos) << status[2].ToString();
  for (int r : {0, 1}) {
    EXPECT_EQ(status[r].code(), StatusCode::kDeadlineExceeded)
        << "worker " << r << ": " << status[r].ToString();
    // Worker 2 gave up first; a worker may hear it from worker 2 or from one that gave up after it.
    EXPECT_NE(status[r].message().find("gave up on this all-reduce (DEADLINE_EXCEEDED)"),
              std::string::npos)
        << status[r].ToString();
  }
  float x = 1;
  Status again =
      groups[0]->Allreduce(Options(&x, 1, DataType::kF32, ReduceOp::kSum, milliseconds(1000)));
  EXPECT_EQ(again.code(), StatusCode::kAborted) << again.ToString();
}

// Cancel from another thread ends a worker's call in progress with kCancelled, long before its
// one-minute deadline; the worker that waited for it stops too, told that it gave up (for it,
// worker 0 left: kUnavailable), and the cancelled group refuses later calls. Worker 1 never calls.
TEST(SharedMemoryAllreduceFaultTest, CancelEndsTheCallAndTellsThePeers) {
  auto groups = CreateGroups(3, "shm-test-cancel");
  for (int r = 0; r < 3; ++r) ASSERT_NE(groups[r], nullptr);
  std::vector<Status> status(3);
  testing::RunRanks(3, [&](int r) {
    if (r == 1) return;
    std::thread canceller;
    if (r == 0) {
      canceller = std::thread([&] {
        std::this_thread::sleep_for(milliseconds(300));
        groups[0]->Cancel();
      });
    }
    std::vector<float> v(50000, 1.0f);
    status[r] = groups[r]->Allreduce(
        Options(v.data(), v.size(), DataType::kF32, ReduceOp::kSum, milliseconds(60000)));
    if (canceller.joinable()) canceller.join();
  });
  EXPECT_EQ(status[0].code(), StatusCode::kCancelled) << status[0].ToString();
  // For worker 2, worker 0 left its calls: as a transport reports a peer that went.
  EXPECT_EQ(status[2].code(), StatusCode::kUnavailable) << status[2].ToString();
  EXPECT_NE(status[2].message().find("worker 0 gave up on this all-reduce (CANCELLED)"),
            std::string::npos)
      << status[2].ToString();
  float x = 1;
  Status again =
      groups[0]->Allreduce(Options(&x, 1, DataType::kF32, ReduceOp::kSum, milliseconds(1000)));
  EXPECT_EQ(again.code(), StatusCode::kCancelled) << again.ToString();
}

TEST(SharedMemoryAllreduceFaultTest, DeadlineNamesTheWorkerThatNeverCame) {
  auto groups = CreateGroups(2, "shm-test-deadline");
  ASSERT_NE(groups[0], nullptr);
  ASSERT_NE(groups[1], nullptr);
  std::vector<double> v(10, 1.0);
  Status s = groups[0]->Allreduce(
      Options(v.data(), v.size(), DataType::kF64, ReduceOp::kSum, milliseconds(300)));
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("worker 1"), std::string::npos) << s.ToString();
}

// Creation: when one worker cannot take part, every worker gets no group (and says why), and no
// segment stays in /dev/shm. Here the test plays worker 1 through the bootstrap.
TEST(SharedMemoryGroupTest, EveryWorkerGivesUpWhenOneCannotTakePart) {
  const std::string prefix = "shm-test-refused";
  // Worker 0 of 2 with worker 1's two bootstrap values as given; returns what worker 0 published
  // as its verdict ("1": it could map every segment), or a failure.
  auto worker0_with = [&](const std::string& segment, const std::string& verdict) -> std::string {
    InMemoryBootstrap bootstrap;
    if (!bootstrap.Put(prefix + "/shm/1", segment).ok() ||
        !bootstrap.Put(prefix + "/shm-ok/1", verdict).ok()) {
      return "bootstrap failed";
    }
    auto g = SharedMemoryGroup::Create(bootstrap, prefix, 0, 2, kSlotBytes,
                                       DeadlineAfter(milliseconds(5000)));
    if (!g.ok()) return g.status().ToString();
    if (*g != nullptr) return "worker 0 has a group";
    auto said = bootstrap.Get(prefix + "/shm-ok/0", DeadlineAfter(milliseconds(100)));
    return said.ok() ? *said : said.status().ToString();
  };
  // Worker 1 could not create its segment: worker 0 maps nothing and gives up too.
  const std::string no_room = "reserving 8 MiB of /dev/shm: No space left on device";
  EXPECT_EQ(worker0_with("!" + no_room, no_room), "worker 1: " + no_room);
  // Worker 1 claims a segment that does not exist: worker 0 cannot open it.
  EXPECT_NE(
      worker0_with("/cohort-shm-test-refused-missing", "1").find("opening worker 1's segment"),
      std::string::npos);
  EXPECT_TRUE(DevShmNames("shm_test_refused").empty()) << "segments left in /dev/shm";
}

// SharedMemoryGroup::Create as worker `rank` of 2 whose partner never comes (300 ms deadline):
// the status it returns.
Status CreateAlone(const std::string& prefix, int rank) {
  InMemoryBootstrap bootstrap;
  return SharedMemoryGroup::Create(bootstrap, prefix, rank, 2, kSlotBytes,
                                   DeadlineAfter(milliseconds(300)))
      .status();
}

TEST(SharedMemoryGroupTest, AWorkerThatNeverPublishesIsAnError) {
  const Status s = CreateAlone("shm-test-silent", 0);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
  EXPECT_NE(s.message().find("worker 1"), std::string::npos) << s.ToString();
  EXPECT_TRUE(DevShmNames("shm_test_silent").empty()) << "segments left in /dev/shm";
}

TEST(SharedMemoryGroupTest, BadArgumentsAreRefused) {
  EXPECT_EQ(CreateAlone("shm-test-bad", 2).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace cohort::collective
