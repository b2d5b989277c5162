// TrainerClusterTest is the ClusterTest of the integration tests whose jobs run this tree's
// digits-trainer (chief + one worker, gradients averaged over the collective ring) and check what
// a fault leaves of the training: the resumed model against an uninterrupted run's, the chief's
// log, no trainer left behind. It skips when the trainer is not built; it marks this test's
// trainers with an argument of their own (--split-seed=<base + pid>, which changes nothing between
// the runs of one test) to find them in /proc, and kills any left when the test ends.
//
// Use from SetUp(): ASSERT_NO_FATAL_FAILURE(StartTrainerCluster(1000, options));
//
// Thread safety: none; one test thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <utility>

#include "common/client.h"
#include "tests/testing/cluster_test.h"

namespace cohort::testing {

class TrainerClusterTest : public ClusterTest {
 protected:
  // Skips the test when the trainer is not built; else starts the coordinator with `options`
  // (a fatal failure when it does not start) and makes the marker from `marker_base`.
  void StartTrainerCluster(int marker_base, ClusterOptions options = {}) {
    if (!NeedBinaries({COHORT_TRAINER_BIN})) return;
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(std::move(options)));
    marker_ = "--split-seed=" + std::to_string(marker_base + ::getpid() % 100000);
  }

  void TearDown() override {
    ClusterTest::TearDown();
    if (!marker_.empty()) KillProcessesWithArg(marker_);
  }

  std::string OutputDir(const std::string& job) const { return cluster_->scratch(job); }

  // A trainer job: a chief and one worker, each with `resources` (a YAML flow mapping) running
  // the trainer with `args` (a YAML list's items) and the marker, and the job's `scheduling`.
  std::string TrainerJob(const std::string& name, const std::string& resources,
                         const std::string& args, const std::string& scheduling) const {
    const std::string replica = "    replicas: 1\n    resources: " + resources +
                                "\n    process:\n      command: [" + COHORT_TRAINER_BIN +
                                "]\n      args: [" + args + ", " + marker_ + "]\n";
    return "name: " + name + "\noutput_dir: " + OutputDir(name) +
           "\nworker_pools:\n  - role: chief\n" + replica + "  - role: worker\n" + replica +
           "scheduling: " + scheduling + "\n";
  }

  // Runs `yaml` (the job `job`) to its end, which must be a success: the model it wrote, "" (and
  // a failure) otherwise.
  std::string ReferenceModel(CoordinatorClient& client, const std::string& job,
                             const std::string& yaml) {
    auto submitted = client.Submit(yaml);
    EXPECT_TRUE(submitted.ok()) << submitted.status().ToString();
    const wire::JobInfoT reference = WaitForJobEnd(client, job, std::chrono::seconds(120));
    EXPECT_EQ(reference.state, wire::JobState::SUCCEEDED) << reference.message;
    return Model(job);
  }
  std::string Model(const std::string& job) const {
    return ReadFile(OutputDir(job) + "/model/model.bin");
  }

  // What `job`'s chief-0 logged in all its attempts; "" when it cannot be read.
  static std::string ChiefLog(CoordinatorClient& client, const std::string& job) {
    auto logs = client.ReadLogs(job, "chief-0", 0);
    return logs.ok() ? std::string(logs->data.begin(), logs->data.end()) : "";
  }

  // Waits up to 60 s until `job` is RUNNING (with its chief-0 placed, whose node goes to
  // *chief_node when given) and `ready()` holds.
  bool WaitForRunning(CoordinatorClient& client, const std::string& job,
                      const std::function<bool()>& ready, std::string* chief_node = nullptr) {
    return WaitUntil(
        [&] {
          auto info = client.GetJob(job);
          if (!info.ok() || info->state != wire::JobState::RUNNING) return false;
          std::string node;
          for (const auto& r : info->replicas) {
            if (r->replica == "chief-0") node = r->node_id;
          }
          if (chief_node != nullptr) *chief_node = node;
          return !node.empty() && ready();
        },
        std::chrono::seconds(60));
  }

  // Waits up to 10 s for this test's trainers to be gone; the number left.
  size_t TrainersLeft() const {
    WaitUntil([&] { return FindProcessesWithArg(marker_).empty(); }, std::chrono::seconds(10));
    return FindProcessesWithArg(marker_).size();
  }

  std::string marker_;
};

}  // namespace cohort::testing
