// Data-parallel digits training across ranks: threads over the collective's loopback transport
// (ring and Reduction Server), and real digits-trainer processes over UCX (tcp) with real
// cohort-reducer processes, configured only by the environment the agent injects. Every rank
// must end with the same model, and a multi-rank run resumed from a checkpoint must end equal to
// an uninterrupted one.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "collective/communicator.h"
#include "collective/reducer.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "examples/digits_trainer/collective_gradient_averager.h"
#include "examples/digits_trainer/digits_dataset.h"
#include "examples/digits_trainer/digits_split_test.h"
#include "examples/digits_trainer/trainer.h"
#include "tests/testing/process.h"

extern char** environ;

namespace cohort::examples {
namespace {

namespace fs = std::filesystem;
using collective::CommunicatorOptions;

struct RankOutcome {
  Status status;
  TrainResult result;
};

class DistributedDigitsTest : public DigitsSplitTest {
 protected:
  void SetUp() override {
    DigitsSplitTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    std::string pattern = (fs::temp_directory_path() / "digits_distributed.XXXXXX").string();
    dir_ = ::mkdtemp(pattern.data());
  }
  void TearDown() override {
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  // Runs `workers` trainers and `reducers` reducers as threads over one loopback fabric; each
  // worker's options come from `options_for(rank)`.
  std::vector<RankOutcome> RunThreads(int workers, int reducers,
                                      const std::function<TrainerOptions(int)>& options_for) {
    collective::LoopbackFabric fabric(workers + reducers);
    collective::InMemoryBootstrap bootstrap;
    CommunicatorOptions comm_options;
    comm_options.transport = CommunicatorOptions::TransportKind::kLoopback;
    comm_options.loopback_fabric = &fabric;
    comm_options.timeout = std::chrono::milliseconds(20000);
    std::atomic<bool> stop{false};
    std::vector<RankOutcome> outcomes(workers);
    std::vector<Status> reducer_status(reducers);
    std::vector<std::thread> threads;
    for (int r = 0; r < workers + reducers; ++r) {
      threads.emplace_back([&, r] {
        if (r >= workers) {
          collective::ReducerOptions ro;
          ro.comm = comm_options;
          ro.rejoin_timeout = std::chrono::milliseconds(0);
          ro.max_generations = 1;
          reducer_status[r - workers] =
              collective::RunReducer(bootstrap, workers, reducers, r - workers, ro, stop);
          return;
        }
        auto comm = collective::Communicator::Create(bootstrap, r, workers, reducers, comm_options);
        if (!comm.ok()) {
          outcomes[r].status = comm.status();
          return;
        }
        CollectiveGradientAverager averager(std::move(*comm));
        Trainer trainer(options_for(r), train_, test_, &averager);
        auto result = trainer.Run();
        if (result.ok()) {
          outcomes[r].result = std::move(*result);
        } else {
          outcomes[r].status = result.status();
        }
      });
    }
    for (auto& t : threads) t.join();
    for (int i = 0; i < reducers; ++i) {
      EXPECT_TRUE(reducer_status[i].ok())
          << "reducer " << i << ": " << reducer_status[i].ToString();
    }
    return outcomes;
  }

  static TrainerOptions Quiet() {
    TrainerOptions options;
    options.epochs = 3;
    options.batch_size = 48;
    options.log = nullptr;
    return options;
  }

  static void ExpectSameModel(const std::vector<RankOutcome>& outcomes) {
    for (size_t r = 0; r < outcomes.size(); ++r) {
      ASSERT_TRUE(outcomes[r].status.ok()) << "rank " << r << ": " << outcomes[r].status.ToString();
    }
    const auto& chief = outcomes[0].result.params;
    ASSERT_FALSE(chief.empty());
    for (size_t r = 1; r < outcomes.size(); ++r) {
      ASSERT_EQ(outcomes[r].result.params.size(), chief.size());
      EXPECT_EQ(0, std::memcmp(outcomes[r].result.params.data(), chief.data(),
                               chief.size() * sizeof(float)))
          << "rank " << r << " ended with a different model than the chief";
    }
  }

  std::string dir_;
};

TEST_F(DistributedDigitsTest, ThreeRanksOverTheRingEndWithOneModel) {
  auto outcomes = RunThreads(3, 0, [](int) { return Quiet(); });
  ExpectSameModel(outcomes);
  EXPECT_GT(outcomes[0].result.test_accuracy, 0.90);
}

TEST_F(DistributedDigitsTest, ReductionServerRunResumesBitForBit) {
  auto straight = RunThreads(2, 2, [](int) { return Quiet(); });
  ExpectSameModel(straight);
  EXPECT_GT(straight[0].result.test_accuracy, 0.90);

  // Every rank fails after step 50 (mid-epoch 2); the chief has checkpointed step 40.
  const std::string checkpoints = dir_ + "/checkpoints";
  auto interrupted = RunThreads(2, 2, [&](int) {
    TrainerOptions o = Quiet();
    o.checkpoint_dir = checkpoints;
    o.checkpoint_every = 20;
    o.fail_at_step = 50;
    return o;
  });
  for (const auto& outcome : interrupted) {
    ASSERT_EQ(outcome.status.code(), StatusCode::kAborted) << outcome.status.ToString();
  }
  auto resumed = RunThreads(2, 2, [&](int) {
    TrainerOptions o = Quiet();
    o.checkpoint_dir = checkpoints;
    o.checkpoint_every = 20;
    o.restore_from = checkpoints;
    return o;
  });
  ExpectSameModel(resumed);
  EXPECT_EQ(resumed[0].result.restored_step, 40);
  EXPECT_EQ(0, std::memcmp(resumed[0].result.params.data(), straight[0].result.params.data(),
                           straight[0].result.params.size() * sizeof(float)));
}

// Starts `argv[0]` with the current environment plus `env`, stdout and stderr into `log`.
pid_t Spawn(const std::vector<std::string>& argv, const std::map<std::string, std::string>& env,
            const std::string& log) {
  std::map<std::string, std::string> merged;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) merged[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  for (const auto& [k, v] : env) merged[k] = v;
  std::vector<std::string> env_strings;
  for (const auto& [k, v] : merged) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp, args;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (auto& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? pid : -1;
}

// Waits for `pid` until `deadline`; returns its exit code, or -1 after killing it at the deadline.
int WaitExit(pid_t pid, std::chrono::steady_clock::time_point deadline) {
  int status = 0;
  const bool exited =
      cohort::testing::WaitUntil([&] { return ::waitpid(pid, &status, WNOHANG) == pid; },
                                 std::chrono::duration_cast<std::chrono::milliseconds>(
                                     deadline - std::chrono::steady_clock::now()),
                                 std::chrono::milliseconds(20));
  if (exited) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  ::kill(pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  return -1;
}

// The "model crc32 ..." line every rank logs at the end.
std::string ModelLine(const std::string& log) {
  const size_t at = log.find("model crc32 ");
  if (at == std::string::npos) return "";
  return log.substr(at, log.find('\n', at) - at);
}

TEST_F(DistributedDigitsTest, ProcessesOverUcxWithReducerProcessesAgree) {
  const int port = cohort::testing::PickFreePort();
  ASSERT_GT(port, 0);
  constexpr int kWorkers = 3;
  constexpr int kReducers = 2;
  std::map<std::string, std::string> job = {
      {"COHORT_BOOTSTRAP_ADDR", "127.0.0.1:" + std::to_string(port)},
      {"WORLD_SIZE", std::to_string(kWorkers)},
      {"COHORT_NUM_REDUCERS", std::to_string(kReducers)},
      {"COHORT_COMM_TIMEOUT_MS", "20000"},
      {"COHORT_REDUCER_REJOIN_MS", "0"},
      {"UCX_TLS", "tcp"},
      {"UCX_WARN_UNUSED_ENV_VARS", "n"},
      {"AIP_MODEL_DIR", dir_ + "/model"},
      {"CLOUD_ML_HP_METRIC_FILE", dir_ + "/hp/metrics.jsonl"},
  };
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int r = 0; r < kWorkers; ++r) {
    auto env = job;
    env["RANK"] = std::to_string(r);
    logs.push_back(dir_ + "/rank" + std::to_string(r) + ".log");
    pids.push_back(
        Spawn({DIGITS_TRAINER_BINARY, "--epochs=2", "--batch_size=48"}, env, logs.back()));
    ASSERT_GT(pids.back(), 0);
  }
  for (int i = 0; i < kReducers; ++i) {
    auto env = job;
    env["COHORT_REDUCER_INDEX"] = std::to_string(i);
    logs.push_back(dir_ + "/reducer" + std::to_string(i) + ".log");
    pids.push_back(Spawn({COHORT_REDUCER_BINARY}, env, logs.back()));
    ASSERT_GT(pids.back(), 0);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t i = 0; i < pids.size(); ++i) {
    EXPECT_EQ(WaitExit(pids[i], deadline), 0) << logs[i] << ":\n"
                                              << cohort::testing::ReadFile(logs[i]);
  }
  const std::string chief_line = ModelLine(cohort::testing::ReadFile(logs[0]));
  ASSERT_FALSE(chief_line.empty()) << cohort::testing::ReadFile(logs[0]);
  for (int r = 1; r < kWorkers; ++r)
    EXPECT_EQ(ModelLine(cohort::testing::ReadFile(logs[r])), chief_line);
  EXPECT_NE(cohort::testing::ReadFile(logs[0]).find("final test accuracy: 0.9"), std::string::npos)
      << cohort::testing::ReadFile(logs[0]);
  // Only the chief writes the model and the metric lines (one per epoch).
  EXPECT_TRUE(fs::exists(dir_ + "/model/model.bin"));
  EXPECT_TRUE(fs::exists(dir_ + "/model/metrics.json"));
  std::ifstream metric_lines(dir_ + "/hp/metrics.jsonl");
  int lines = 0;
  for (std::string line; std::getline(metric_lines, line);) ++lines;
  EXPECT_EQ(lines, 2);
}

}  // namespace
}  // namespace cohort::examples
