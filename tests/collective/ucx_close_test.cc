// Closing a UcxTransport whose peer is not progressing (two ranks in one process, closed one
// after the other; a rank whose peer is busy computing): the close stays bounded, leaves no UCX
// worker, context or thread behind, and a child forked afterwards (without exec) builds a fresh
// transport. Each test runs in a forked process of its own, so the UCX state it leaves cannot
// reach the other tests, and one that hangs is killed at a deadline.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "collective/transport/ucx/ucx_reaper.h"
#include "collective/transport/ucx/ucx_transport.h"
#include "tests/collective/process_util.h"
#include "tests/testing/process.h"
#include "tests/testing/scoped_env.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// Threads of this process (entries of /proc/self/task).
int ThreadCount() {
  int n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/task"))
    ++n;
  return n;
}

// Rank `rank` of a 2-rank UcxTransport, after one message each way; null with `why` set when it
// fails.
std::unique_ptr<UcxTransport> ConnectOne(Bootstrap& bootstrap, int rank, std::string* why) {
  UcxTransportOptions options;
  options.connect_timeout = milliseconds(20000);
  auto t = UcxTransport::Create(bootstrap, rank, 2, options);
  if (!t.ok()) {
    *why = t.status().ToString();
    return nullptr;
  }
  uint64_t out = 7 + rank, in = 0;
  const Deadline deadline = DeadlineAfter(milliseconds(20000));
  auto r = (*t)->Irecv(1 - rank, MakeTag(1, 1), MutableBytes{&in, sizeof(in)});
  auto s = (*t)->Isend(1 - rank, MakeTag(1, 1), ConstBytes{&out, sizeof(out)});
  Status status = !s.ok() ? s.status() : !r.ok() ? r.status() : s->Wait(deadline);
  if (status.ok()) status = r->Wait(deadline);
  if (status.ok() && in != static_cast<uint64_t>(8 - rank)) status = DataLoss("wrong payload");
  if (!status.ok()) {
    *why = status.ToString();
    return nullptr;
  }
  return std::move(*t);
}

// Both ranks in this process, each connected on a thread of its own (ConnectOne); false with `why`
// set when either fails.
bool ConnectPair(std::unique_ptr<UcxTransport> ranks[2], std::string* why) {
  InMemoryBootstrap bootstrap;
  std::string whys[2];
  std::vector<std::thread> threads;
  for (int rank = 0; rank < 2; ++rank) {
    threads.emplace_back([&, rank] { ranks[rank] = ConnectOne(bootstrap, rank, &whys[rank]); });
  }
  for (auto& t : threads) t.join();
  for (int rank = 0; rank < 2; ++rank) {
    if (!ranks[rank]) {
      *why = "rank " + std::to_string(rank) + ": " + whys[rank];
      return false;
    }
  }
  return true;
}

// Exit codes of the processes below.
constexpr int kPairFailed = 10;
constexpr int kForkedChildFailed = 11;
constexpr int kThreadsLeft = 12;

// In a child forked without exec: a fresh pair exchanges a message each way. 0 when it did.
int FreshPairMain() {
  std::unique_ptr<UcxTransport> ranks[2];
  std::string why;
  if (!ConnectPair(ranks, &why)) {
    std::fprintf(stderr, "forked child: %s\n", why.c_str());
    return 1;
  }
  return 0;
}

// Connects a pair, closes rank 0 while nobody progresses rank 1, then rank 1 (one after the
// other, as one process holding both would). `after` then runs in this process.
int StuckCloseMain(const std::string& tls, const std::function<int(int baseline)>& after) {
  setenv("UCX_TLS", tls.c_str(), 1);
  setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
  const int baseline = ThreadCount();
  {
    std::unique_ptr<UcxTransport> ranks[2];
    std::string why;
    if (!ConnectPair(ranks, &why)) {
      std::fprintf(stderr, "pair: %s\n", why.c_str());
      return kPairFailed;
    }
    ranks[0].reset();
    ranks[1].reset();
  }
  return after(baseline);
}

class UcxCloseTest : public ::testing::TestWithParam<std::string> {};

// The defect: a close left its worker and context behind (and with them UCX's async thread, whose
// state a fork copies without the thread), so a child forked afterwards never completed its
// hello. Now the child connects and exchanges messages.
TEST_P(UcxCloseTest, ChildForkedAfterAStuckCloseBuildsAFreshTransport) {
  testing::ProcessGroup outer;
  outer.Spawn([&] {
    return StuckCloseMain(GetParam(), [](int) {
      testing::ProcessGroup inner;
      inner.Spawn(FreshPairMain);
      if (!inner.Wait(milliseconds(60000))) {
        std::fprintf(stderr, "the forked child did not finish within 60 s\n");
        return kForkedChildFailed;
      }
      return inner.code(0) == 0 ? 0 : kForkedChildFailed;
    });
  });
  ASSERT_TRUE(outer.Wait(milliseconds(120000))) << "the closing process did not finish";
  EXPECT_EQ(outer.code(0), 0) << "10: the pair did not connect; 11: the forked child failed";
}

// The leak: after both ranks closed, every thread UCX started (its async thread) is gone again.
TEST_P(UcxCloseTest, StuckCloseLeavesNoUcxThreadBehind) {
  testing::ProcessGroup outer;
  outer.Spawn([&] {
    return StuckCloseMain(GetParam(), [](int baseline) {
      if (cohort::testing::WaitUntil([&] { return ThreadCount() <= baseline; },
                                     milliseconds(30000)))
        return 0;
      std::fprintf(stderr, "%d threads, %d before the transports\n", ThreadCount(), baseline);
      return kThreadsLeft;
    });
  });
  ASSERT_TRUE(outer.Wait(milliseconds(120000))) << "the closing process did not finish";
  EXPECT_EQ(outer.code(0), 0) << "10: the pair did not connect; 12: threads were left";
}

// A Bootstrap over files in a directory, for ranks in processes forked from one another.
class DirBootstrap final : public Bootstrap {
 public:
  explicit DirBootstrap(std::string dir) : dir_(std::move(dir)) {}
  Status Put(const std::string& key, const std::string& value) override {
    const std::string path = Path(key);
    cohort::testing::WriteFile(path + ".tmp", value);
    std::filesystem::rename(path + ".tmp", path);
    return Status::Ok();
  }
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override {
    while (!cohort::testing::FileExists(Path(key))) {
      if (SteadyClock::now() >= deadline) return DeadlineExceeded("no " + key);
      std::this_thread::sleep_for(milliseconds(5));
    }
    return cohort::testing::ReadFile(Path(key));
  }

 private:
  std::string Path(std::string key) const {
    std::replace(key.begin(), key.end(), '/', '_');
    return dir_ + "/" + key;
  }
  std::string dir_;
};

constexpr int kPeerMessages = 32;
constexpr size_t kPeerMessageBytes = 8000;

// Rank 1, a healthy peer that stops progressing UCX (computing: it says so in the file `busy`)
// until `go` exists (or rank 0's process is gone); then it receives the kPeerMessages messages
// rank 0 sent before it closed: 0 when all came intact, 2 when one failed (a forced close cut it
// off), 3 when one came wrong.
int BusyPeerMain(const std::string& dir) {
  const pid_t parent = getppid();
  DirBootstrap bootstrap(dir);
  std::string why;
  auto t = ConnectOne(bootstrap, 1, &why);
  if (!t) {
    std::fprintf(stderr, "busy peer: %s\n", why.c_str());
    return 1;
  }
  cohort::testing::WriteFile(dir + "/busy", "");
  while (!cohort::testing::FileExists(dir + "/go") && getppid() == parent)
    std::this_thread::sleep_for(milliseconds(10));
  for (int k = 0; k < kPeerMessages; ++k) {
    std::vector<char> in(kPeerMessageBytes, 0);
    auto r = t->Irecv(0, MakeTag(2, k), MutableBytes{in.data(), in.size()});
    Status s = r.ok() ? r->Wait(DeadlineAfter(milliseconds(20000))) : r.status();
    if (!s.ok() || in != std::vector<char>(kPeerMessageBytes, static_cast<char>(k))) {
      std::fprintf(stderr, "busy peer: message %d: %s\n", k, s.ToString().c_str());
      return s.ok() ? 3 : 2;
    }
  }
  return 0;
}

constexpr int kNotPending = 13;
constexpr int kWrongCounts = 14;
constexpr int kPeerFailed = 15;

// Rank 0 in this process, rank 1 (BusyPeerMain) in a child; once rank 1 is busy, rank 0 sends
// its messages and closes (the close stays pending: the reaper holds its worker), then runs
// `while_pending`, tells rank 1 to go on, and waits for it. `forced`: while_pending ends the
// close by force, so rank 1 may lose messages (but never gets wrong ones).
int BusyPeerMainOfRankZero(const std::function<int(const std::string& dir)>& while_pending,
                           bool forced) {
  setenv("UCX_TLS", "tcp", 1);
  cohort::testing::TempDir dir("ucx-close");
  testing::ProcessGroup peer;
  peer.Spawn([&] { return BusyPeerMain(dir.path()); });
  DirBootstrap bootstrap(dir.path());
  std::string why;
  auto t = ConnectOne(bootstrap, 0, &why);
  if (!t) {
    std::fprintf(stderr, "rank 0: %s\n", why.c_str());
    return kPairFailed;
  }
  if (!cohort::testing::WaitUntil([&] { return cohort::testing::FileExists(dir.Join("busy")); },
                                  milliseconds(60000))) {
    std::fprintf(stderr, "rank 0: the peer never got busy\n");
    return kPairFailed;
  }
  std::vector<std::vector<char>> out;
  for (int k = 0; k < kPeerMessages; ++k) {
    out.emplace_back(kPeerMessageBytes, static_cast<char>(k));
    auto s = t->Isend(1, MakeTag(2, k), ConstBytes{out.back().data(), out.back().size()});
    Status status = s.ok() ? s->Wait(DeadlineAfter(milliseconds(20000))) : s.status();
    if (!status.ok()) {
      std::fprintf(stderr, "rank 0: send %d: %s\n", k, status.ToString().c_str());
      return kPairFailed;
    }
  }
  t.reset();
  out.clear();
  if (GetUcxReaperCounts().held != 1) {
    std::fprintf(stderr, "rank 0: the reaper holds %d workers\n", GetUcxReaperCounts().held);
    return kNotPending;
  }
  const int code = while_pending(dir.path());
  cohort::testing::WriteFile(dir.Join("go"), "");
  if (!peer.Wait(milliseconds(60000)) || (peer.code(0) != 0 && !(forced && peer.code(0) == 2))) {
    std::fprintf(stderr, "rank 0: the busy peer ended with %d\n", peer.code(0));
    return kPeerFailed;
  }
  return code;
}

// A child forked while a close is pending (its worker held by the reaper) builds a fresh
// transport: the fork destroys what the reaper held (a forced close), so the child inherits no
// UCX state. The busy peer may lose the last messages (a forced close), and is told so.
TEST(UcxCloseForkTest, ChildForkedWhileACloseIsPendingBuildsAFreshTransport) {
  testing::ProcessGroup outer;
  outer.Spawn([&] {
    return BusyPeerMainOfRankZero(
        [](const std::string&) {
          testing::ProcessGroup inner;
          inner.Spawn(FreshPairMain);
          const bool finished = inner.Wait(milliseconds(60000));
          const UcxReaperCounts counts = GetUcxReaperCounts();
          if (counts.held != 0 || counts.forced != 1) {
            std::fprintf(stderr, "after the fork: %d held, %ld forced\n", counts.held,
                         static_cast<long>(counts.forced));
            return kWrongCounts;
          }
          return finished && inner.code(0) == 0 ? 0 : kForkedChildFailed;
        },
        /*forced=*/true);
  });
  ASSERT_TRUE(outer.Wait(milliseconds(120000))) << "the closing process did not finish";
  EXPECT_EQ(outer.code(0), 0) << "10: no pair; 11: the forked child failed; 13: no close was "
                                 "pending; 14: the fork did not end it; 15: the busy peer failed";
}

// A healthy peer busy for longer than the close waits still gets everything this side sent
// before closing: the reaper keeps progressing the worker until the peer took it all in, and the
// close then completes (not forced).
TEST(UcxCloseForkTest, BusyPeerGetsTheLastSendsAndTheCloseCompletes) {
  testing::ProcessGroup outer;
  outer.Spawn([&] {
    const int code = BusyPeerMainOfRankZero([](const std::string&) { return 0; }, false);
    if (code != 0) return code;
    cohort::testing::WaitUntil([] { return GetUcxReaperCounts().held == 0; }, milliseconds(60000));
    const UcxReaperCounts counts = GetUcxReaperCounts();
    if (counts.held == 0 && counts.completed == 1 && counts.forced == 0) return 0;
    std::fprintf(stderr, "%d held, %ld completed, %ld forced\n", counts.held,
                 static_cast<long>(counts.completed), static_cast<long>(counts.forced));
    return kWrongCounts;
  });
  ASSERT_TRUE(outer.Wait(milliseconds(120000))) << "the closing process did not finish";
  EXPECT_EQ(outer.code(0), 0) << "10: no pair; 13: no close was pending; 14: the close did not "
                                 "complete; 15: the busy peer failed";
}

// Registered before the reaper's own exit handler, so it runs after it: the worker the reaper
// held is gone, destroyed by force (the peer never progressed).
void CheckTheReaperAtExit() {
  const UcxReaperCounts counts = GetUcxReaperCounts();
  std::fflush(nullptr);
  _exit(counts.held == 0 && counts.forced == 1 ? 0 : kWrongCounts);
}

// A process that exits while a close is pending destroys the worker on its way out (no crash, no
// hang, nothing left to the process).
TEST(UcxCloseForkTest, ExitWhileACloseIsPendingDestroysTheWorker) {
  testing::ProcessGroup outer;
  outer.Spawn([&] {
    std::atexit(&CheckTheReaperAtExit);
    return BusyPeerMainOfRankZero(
        [](const std::string& dir) -> int {
          std::filesystem::remove_all(dir);  // exit skips the TempDir's destructor
          std::exit(kWrongCounts);           // CheckTheReaperAtExit decides the code
        },
        /*forced=*/true);
  });
  ASSERT_TRUE(outer.Wait(milliseconds(120000))) << "the closing process did not finish";
  EXPECT_EQ(outer.code(0), 0) << "10: no pair; 13: no close was pending; 14: the worker was left";
}

INSTANTIATE_TEST_SUITE_P(Tls, UcxCloseTest, ::testing::Values("tcp", "sm"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace cohort::collective
