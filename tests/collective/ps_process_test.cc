// cohort-ps as a real process over UCX: a server killed with SIGKILL and started again resumes
// from its last checkpoint, and the workers carry on from the clock it reports.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>

#include "collective/ps/ps_worker.h"
#include "collective/store_bootstrap.h"
#include "tests/collective/process_util.h"

namespace cohort::collective::ps {
namespace {

using testing::ProcessGroup;

int ExecServer(const std::string& bootstrap, const std::string& dir) {
  const std::string b = "--bootstrap=" + bootstrap;
  const std::string d = "--checkpoint-dir=" + dir;
  execl(COHORT_PS_BINARY, COHORT_PS_BINARY, b.c_str(), d.c_str(), "--num-workers=1",
        "--num-servers=1", "--index=0", "--checkpoint-every=1", "--restore-latest",
        "--timeout-ms=10000", "--rejoin-timeout-ms=20000", static_cast<char*>(nullptr));
  return 127;
}

void PushAndClock(PsWorker& ps, std::vector<float>& g, float value) {
  std::fill(g.begin(), g.end(), value);
  auto push = ps.PushAll(g.data());
  ASSERT_TRUE(push.ok()) << push.status().ToString();
  ASSERT_TRUE(ps.Wait(*push).ok());
  ASSERT_TRUE(ps.Clock().ok());
}

std::vector<float> PullAll(PsWorker& ps, size_t n) {
  std::vector<float> v(n, -1.0f);
  auto pull = ps.PullAll(v.data());
  EXPECT_TRUE(pull.ok());
  if (pull.ok()) {
    EXPECT_TRUE(ps.Wait(*pull).ok());
  }
  return v;
}

// The only worker of one server: it initialises the model with `init` everywhere (a restarted
// server keeps its checkpoint's values instead); *clock is the clock the server is at. A failure
// is fatal (callers wrap it in ASSERT_NO_FATAL_FAILURE).
void StartWorker(Bootstrap& bootstrap, const ModelLayout& layout, const OptimizerConfig& c,
                 float init, std::unique_ptr<PsWorker>* worker, int64_t* clock) {
  PsWorkerOptions options;
  options.timeout = std::chrono::milliseconds(10000);
  auto ps = PsWorker::Create(bootstrap, 0, 1, 1, options);
  ASSERT_TRUE(ps.ok()) << ps.status().ToString();
  std::vector<float> values(layout.total_bytes() / 4, init);
  auto at = (*ps)->InitModel(layout, values.data(), c);
  ASSERT_TRUE(at.ok()) << at.status().ToString();
  *worker = std::move(*ps);
  *clock = *at;
}

TEST(PsProcessTest, KilledServerRestartsFromItsCheckpoint) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("ps_process_test_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  auto store = StoreServer::Start("tcp://127.0.0.1:0");
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  const std::string address = "127.0.0.1:" + std::to_string((*store)->port());
  auto bootstrap = StoreBootstrap::Connect(address, std::chrono::milliseconds(10000));
  ASSERT_TRUE(bootstrap.ok());

  // A small key (inline messages) and a large one (zero-copy rendezvous over UCX).
  auto layout = ModelLayout::FromCounts({1000, 300000}, DataType::kF32);
  ASSERT_TRUE(layout.ok());
  const size_t n = layout->total_bytes() / 4;
  OptimizerConfig c;
  c.staleness = 0;
  c.learning_rate = 0.5;
  std::vector<float> g(n);

  ProcessGroup procs;
  const int first = procs.Spawn([&] { return ExecServer(address, dir.string()); });
  {
    std::unique_ptr<PsWorker> ps;
    int64_t clock = -1;
    ASSERT_NO_FATAL_FAILURE(StartWorker(**bootstrap, *layout, c, 10.0f, &ps, &clock));
    EXPECT_EQ(clock, 0);
    for (int t = 1; t <= 3; ++t) PushAndClock(*ps, g, static_cast<float>(t));
    const auto v3 = PullAll(*ps, n);
    for (float x : v3) ASSERT_EQ(x, 7.0f);  // 10 - 0.5 * (1 + 2 + 3)
    procs.Kill(first);
    ASSERT_TRUE(procs.Wait(std::chrono::milliseconds(5000), {first}));
    // The dead server fails the next request quickly instead of hanging.
    std::fill(g.begin(), g.end(), 100.0f);
    auto push = ps->PushAll(g.data());
    Status s = push.ok() ? ps->Wait(*push) : push.status();
    EXPECT_TRUE(s.code() == StatusCode::kUnavailable || s.code() == StatusCode::kDeadlineExceeded)
        << s.ToString();
  }
  const int second = procs.Spawn([&] { return ExecServer(address, dir.string()); });
  {
    std::unique_ptr<PsWorker> ps;
    int64_t clock = -1;
    ASSERT_NO_FATAL_FAILURE(StartWorker(**bootstrap, *layout, c, 0.0f, &ps, &clock));
    EXPECT_EQ(clock, 3) << "the restarted server resumes at its checkpoint's clock";
    const auto restored = PullAll(*ps, n);
    for (float x : restored)
      ASSERT_EQ(x, 7.0f) << "the restored model, not the chief's new init values";
    PushAndClock(*ps, g, 4.0f);
    const auto v4 = PullAll(*ps, n);
    for (float x : v4) ASSERT_EQ(x, 5.0f);
    ASSERT_TRUE(ps->Shutdown().ok());
  }
  // After a shutdown and every worker's goodbye the server exits 0.
  ASSERT_TRUE(procs.Wait(std::chrono::milliseconds(10000), {second}));
  EXPECT_EQ(procs.code(second), 0);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cohort::collective::ps
