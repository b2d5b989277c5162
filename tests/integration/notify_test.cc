// Job notices (`cohort-coordinator --notify-url`, coordinator/notifier.h): a real coordinator
// and agent on loopback POST to a real HTTP receiver in this process, which turns the first
// notice away (503): it comes again. A job that succeeds, an array whose odd task fails, a job
// cancelled while queued and a study's two trial jobs each give a notice once their ends are
// stored (with --notify-on tasks); the array and the study one more, after their last job's.
// /metrics counts them. By default an array and a study are told as a whole, and --notify-on
// start,restart tells a job's (an array's) first run and each restart a job spends. A
// --notify-url that is no URL, or an unknown --notify-on, stops the coordinator at start.
#include <gtest/gtest.h>
#include <httplib.h>

#include <chrono>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "tests/testing/cluster_test.h"
#include "tests/testing/specs.h"

namespace cohort {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;
namespace ct = ::cohort::testing;

// Answers 503 to the first POST, then 200; keeps the notices it took, in order.
class Receiver {
 public:
  Receiver() {
    server_.Post("/hooks/cohort", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      if (posts_++ == 0) {
        res.status = 503;
        return;
      }
      notices_.push_back(json::parse(req.body, nullptr, false));
      res.status = 200;
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only reaches a server already listening.
    for (int i = 0; i < 5000 && !server_.is_running(); ++i) std::this_thread::sleep_for(1ms);
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/hooks/cohort?channel=ml";
  }
  std::vector<json> notices() {
    std::lock_guard<std::mutex> lock(mu_);
    return notices_;
  }
  // The notices taken once there are `count` (or after 60 s).
  std::vector<json> WaitFor(size_t count) {
    std::vector<json> taken = notices();
    for (int i = 0; i < 600 && taken.size() < count; ++i) {
      std::this_thread::sleep_for(100ms);
      taken = notices();
    }
    return taken;
  }

 private:
  httplib::Server server_;
  std::mutex mu_;
  int posts_ = 0;
  std::vector<json> notices_;
  int port_ = 0;
  std::thread thread_;
};

class NotifyTest : public ct::ClusterTest {
 protected:
  // The coordinator's /metrics once it counts `delivered` notices delivered (or after 5 s).
  std::string MetricsOnceDelivered(int delivered) {
    httplib::Client http("127.0.0.1", cluster_->coordinator_http_port());
    const std::string line =
        "cohort_notices_total{result=\"delivered\"} " + std::to_string(delivered) + "\n";
    std::string metrics;
    for (int i = 0; i < 50; ++i) {  // the snapshot behind /metrics is published every 0.5 s
      auto r = http.Get("/metrics");
      if (r && r->status == 200) metrics = r->body;
      if (metrics.find(line) != std::string::npos) break;
      std::this_thread::sleep_for(100ms);
    }
    EXPECT_NE(metrics.find(line), std::string::npos) << metrics;
    return metrics;
  }
};

// A job file of one chief running `command`, and `scheduling` (no restarts by default).
std::string Chief(const std::string& command, const std::string& scheduling = "max_restarts: 0") {
  return "worker_pools:\n  - role: chief\n    resources: {cpus: 1}\n    process: {command: "
         "[/bin/sh, -c, '" +
         command + "']}\nscheduling: {" + scheduling + "}\n";
}

// A study of two trials, one at a time; trial x reports the score x.
std::string TwoTrialStudy(ct::LocalCluster& cluster, const std::string& name) {
  const std::string trial = cluster.scratch("trial.sh");
  ct::WriteFile(trial,
                "x=${1#--x=}\n"
                "printf '{\"score\": %s, \"global_step\": 1}\\n' \"$x\" >> "
                "\"$CLOUD_ML_HP_METRIC_FILE\"\n");
  return ct::GridStudyYaml(name, 2, 1, cluster.scratch(name + "-out"),
                           "      resources: {cpus: 1}\n"
                           "      process: {command: [/bin/sh, " +
                               trial + "]}\n");
}

TEST_F(NotifyTest, EachJobArrayAndStudyThatEndsIsPostedOnceStoredAndARefusalIsSentAgain) {
  if (!NeedBinaries()) return;
  Receiver receiver;
  ct::ClusterOptions options;
  options.coordinator_args = {"--notify-url", receiver.url(), "--notify-on", "end,tasks"};
  ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("notify")}, options));
  auto client = cluster_->Client();
  ASSERT_TRUE(client.Submit("name: fine\n" + Chief("exit 0")).ok());
  ct::WaitForJobEnd(client, "fine", 60s);
  ASSERT_TRUE(client
                  .Submit("name: odd\n" + Chief("exit $((COHORT_ARRAY_INDEX % 2))",
                                                "max_restarts: 0, array: 0-1%1"))
                  .ok());
  for (const char* task : {"odd-0", "odd-1"}) ct::WaitForJobEnd(client, task, 60s);
  ASSERT_TRUE(client.Submit("name: held\n" + Chief("exit 0", "max_restarts: 0, hold: true")).ok());
  ASSERT_TRUE(client.Cancel("held").ok());
  ct::WaitForJobEnd(client, "held", 30s);
  ASSERT_TRUE(client.SubmitStudy(TwoTrialStudy(*cluster_, "tune")).ok());

  std::vector<json> notices = receiver.WaitFor(8);
  ASSERT_EQ(notices.size(), 8u) << json(notices).dump(1);
  // In the order the ends were stored; the first came again after the 503.
  EXPECT_EQ(notices[0]["kind"], "job_ended");
  EXPECT_EQ(notices[0]["job"], "fine");
  EXPECT_EQ(notices[0]["state"], "SUCCEEDED");
  EXPECT_EQ(notices[0]["user"], "unknown");  // --insecure: no owner
  EXPECT_EQ(notices[0]["restarts"], 0);
  EXPECT_GT(notices[0]["start_time_ms"].get<int64_t>(), 0);
  EXPECT_EQ(notices[0]["text"].get<std::string>().rfind("job fine SUCCEEDED after ", 0), 0u)
      << notices[0];
  EXPECT_EQ(notices[1]["job"], "odd-0");
  EXPECT_EQ(notices[1]["array"], "odd");
  EXPECT_EQ(notices[1]["array_index"], 0);
  EXPECT_EQ(notices[2]["job"], "odd-1");
  EXPECT_EQ(notices[2]["state"], "FAILED");
  EXPECT_NE(notices[2]["text"].get<std::string>().find(": chief-0 attempt 0 exited with code 1"),
            std::string::npos)
      << notices[2];
  EXPECT_EQ(notices[3]["kind"], "array_ended");
  EXPECT_EQ(notices[3]["name"], "odd");
  EXPECT_EQ(notices[3]["state"], "FAILED");
  EXPECT_EQ(notices[3]["text"], "array odd FAILED: 1 SUCCEEDED, 1 FAILED (2 tasks)");
  EXPECT_EQ(notices[4]["job"], "held");
  EXPECT_EQ(notices[4]["state"], "CANCELLED");
  EXPECT_EQ(notices[4]["text"].get<std::string>().rfind("job held CANCELLED before it started", 0),
            0u)
      << notices[4];
  EXPECT_EQ(notices[5]["job"], "tune_trial_1");
  EXPECT_EQ(notices[5]["study"], "tune");
  EXPECT_EQ(notices[5]["trial_id"], "1");
  EXPECT_EQ(notices[6]["job"], "tune_trial_2");
  EXPECT_EQ(notices[7]["kind"], "study_ended");
  EXPECT_EQ(notices[7]["name"], "tune");
  EXPECT_EQ(notices[7]["state"], "SUCCEEDED");
  EXPECT_EQ(notices[7]["trials_total"], 2);
  EXPECT_EQ(notices[7]["best"]["id"], "2");
  EXPECT_EQ(notices[7]["best"]["parameters"], json({{"x", "2"}}));
  EXPECT_EQ(notices[7]["text"], "study tune SUCCEEDED: 2 trials, best trial 2 (score 2 with x=2)");

  // /metrics: 8 delivered, the first send retried, none waiting.
  const std::string metrics = MetricsOnceDelivered(8);
  EXPECT_NE(metrics.find("cohort_notices_total{result=\"retried\"} 1\n"), std::string::npos);
  EXPECT_NE(metrics.find("cohort_notices_total{result=\"dropped\"} 0\n"), std::string::npos);
  EXPECT_NE(metrics.find("cohort_notices_queued 0\n"), std::string::npos);
}

// --notify-on start,restart: a job's first run and the restart it spends are told, its end is not
// (nor its second run, after the restart). Attempt 0 runs a second, then is SIGKILLed; attempt 1
// succeeds.
TEST_F(NotifyTest, AJobsStartAndRestartsAreToldWhenAskedFor) {
  if (!NeedBinaries()) return;
  Receiver receiver;
  ct::ClusterOptions options;
  options.coordinator_args = {"--notify-url", receiver.url(), "--notify-on", "start,restart"};
  ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("notify-on")}, options));
  auto client = cluster_->Client();
  ASSERT_TRUE(client
                  .Submit("name: flaky\n" +
                          Chief("sleep 1; [ \"$COHORT_RESTART_COUNT\" = 0 ] && kill -9 $$; exit 0",
                                "max_restarts: 1"))
                  .ok());
  wire::JobInfoT done = ct::WaitForJobEnd(client, "flaky", 60s);
  ASSERT_EQ(done.state, wire::JobState::SUCCEEDED) << done.message;
  // The end was stored before the reply above: any notice of it is queued by now.
  const std::string metrics = MetricsOnceDelivered(2);
  EXPECT_NE(metrics.find("cohort_notices_queued 0\n"), std::string::npos) << metrics;
  std::vector<json> notices = receiver.notices();
  ASSERT_EQ(notices.size(), 2u) << json(notices).dump(1);
  EXPECT_EQ(notices[0]["kind"], "job_started");
  EXPECT_EQ(notices[0]["job"], "flaky");
  EXPECT_GE(notices[0]["waited_ms"].get<int64_t>(), 0);
  EXPECT_EQ(notices[0]["text"].get<std::string>().rfind(
                "job flaky running: its one replica running, ", 0),
            0u)
      << notices[0];
  EXPECT_EQ(notices[1]["kind"], "job_restarted");
  EXPECT_EQ(notices[1]["restarts"], 1);
  EXPECT_EQ(notices[1]["max_restarts"], 1);
  EXPECT_EQ(notices[1]["text"], "job flaky " + notices[1]["event"].get<std::string>());
  const std::string event = notices[1]["event"].get<std::string>();
  EXPECT_EQ(event.rfind("restart 1/1: chief-0 as attempt 1 because chief-0 attempt 0 was killed "
                        "by signal 9 (SIGKILL)",
                        0),
            0u)
      << event;
}

// Without --notify-on tasks (Slurm's default for arrays): a 3-task array, two at a time, is one
// array_started (its first tasks ran in one pass or two) and one array_ended; a study of two
// trials is its study_ended alone. No task or trial is told as a job.
TEST_F(NotifyTest, AnArrayAndAStudyAreToldAsAWholeUnlessTasksAreAskedFor) {
  if (!NeedBinaries()) return;
  Receiver receiver;
  ct::ClusterOptions options;
  options.coordinator_args = {"--notify-url", receiver.url(), "--notify-on", "end,start"};
  ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("notify-whole")}, options));
  auto client = cluster_->Client();
  ASSERT_TRUE(
      client.Submit("name: sweep\n" + Chief("sleep 0.5", "max_restarts: 0, array: 0-2%2")).ok());
  for (const char* task : {"sweep-0", "sweep-1", "sweep-2"}) ct::WaitForJobEnd(client, task, 60s);
  ASSERT_TRUE(client.SubmitStudy(TwoTrialStudy(*cluster_, "tune")).ok());
  std::vector<json> notices = receiver.WaitFor(3);
  ASSERT_EQ(notices.size(), 3u) << json(notices).dump(1);
  EXPECT_EQ(notices[0]["kind"], "array_started");
  EXPECT_EQ(notices[0]["name"], "sweep");
  EXPECT_EQ(notices[0]["tasks"], 3);
  EXPECT_GE(notices[0]["waited_ms"].get<int64_t>(), 0);
  EXPECT_EQ(notices[0]["text"].get<std::string>().rfind("array sweep started: task ", 0), 0u)
      << notices[0];
  EXPECT_EQ(notices[1]["kind"], "array_ended");
  EXPECT_EQ(notices[1]["text"], "array sweep SUCCEEDED: 3 SUCCEEDED (3 tasks)");
  EXPECT_EQ(notices[2]["kind"], "study_ended");
  EXPECT_EQ(notices[2]["name"], "tune");
  // Nothing more comes: the study's end was the last thing stored.
  const std::string metrics = MetricsOnceDelivered(3);
  EXPECT_NE(metrics.find("cohort_notices_queued 0\n"), std::string::npos) << metrics;
  EXPECT_EQ(receiver.notices().size(), 3u) << json(receiver.notices()).dump(1);
}

// An array started once is told so once, though the tasks that ran were deleted before the next
// one ran: task 1 (one task at a time) is held suspended while task 0 runs, ends and is deleted.
TEST_F(NotifyTest, AnArrayIsToldStartedOnceThoughTheTasksThatRanWereDeleted) {
  if (!NeedBinaries()) return;
  Receiver receiver;
  ct::ClusterOptions options;
  options.coordinator_args = {"--notify-url", receiver.url(), "--notify-on", "start"};
  ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({UniqueNodeId("notify-deleted")}, options));
  auto client = cluster_->Client();
  ASSERT_TRUE(
      client.Submit("name: turns\n" + Chief("sleep 2", "max_restarts: 0, array: 0-1%1")).ok());
  auto held = client.Suspend("turns-1", /*resume=*/false);
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ASSERT_EQ(ct::WaitForJobEnd(client, "turns-0", 60s).state, wire::JobState::SUCCEEDED);
  ASSERT_TRUE(client.DeleteJob("turns-0").ok());
  auto resumed = client.Suspend("turns-1", /*resume=*/true);
  ASSERT_TRUE(resumed.ok()) << resumed.status().ToString();
  ASSERT_EQ(ct::WaitForJobEnd(client, "turns-1", 60s).state, wire::JobState::SUCCEEDED);
  const std::string metrics = MetricsOnceDelivered(1);
  EXPECT_NE(metrics.find("cohort_notices_queued 0\n"), std::string::npos) << metrics;
  std::vector<json> notices = receiver.notices();
  ASSERT_EQ(notices.size(), 1u) << json(notices).dump(1);
  EXPECT_EQ(notices[0]["kind"], "array_started");
  EXPECT_EQ(notices[0]["name"], "turns");
}

// --notify-on nodes: each node event is told once stored, in order: the node's registration,
// an admin's cordon with its reason, the node LOST when its agent is SIGKILLed; no job notice.
TEST_F(NotifyTest, EachNodeEventIsToldWhenAskedFor) {
  if (!NeedBinaries()) return;
  Receiver receiver;
  ct::ClusterOptions options;
  options.coordinator_args = {"--notify-url", receiver.url(), "--notify-on", "nodes"};
  options.heartbeat_timeout = "2s";
  const std::string node = UniqueNodeId("notify-node");
  ASSERT_NO_FATAL_FAILURE(StartOneNodeCluster({node}, options));
  auto client = cluster_->Client();
  ASSERT_TRUE(client.AdminNode(node, "cordon", {}, {}, "disk swap").ok());
  cluster_->agent(node).Kill();
  std::vector<json> notices = receiver.WaitFor(3);
  ASSERT_EQ(notices.size(), 3u) << json(notices).dump(1);
  for (const json& n : notices) {
    EXPECT_EQ(n["kind"], "node_event") << n;
    EXPECT_EQ(n["node"], node) << n;
    EXPECT_EQ(n["text"], "node " + node + " " + n["event"].get<std::string>()) << n;
  }
  EXPECT_EQ(notices[0]["seq"], 1);
  EXPECT_TRUE(notices[0]["event"].get<std::string>().starts_with("registered: cohort-agent "))
      << notices[0];
  EXPECT_TRUE(notices[1]["event"].get<std::string>().starts_with("cordoned by "));
  EXPECT_TRUE(notices[1]["event"].get<std::string>().ends_with(": disk swap")) << notices[1];
  EXPECT_TRUE(notices[2]["event"].get<std::string>().starts_with("LOST: no heartbeat for "))
      << notices[2];
  EXPECT_LT(notices[1]["time_ms"].get<int64_t>(), notices[2]["time_ms"].get<int64_t>());
}

TEST_F(NotifyTest, ANotifyUrlThatIsNoUrlStopsTheCoordinatorNamingTheFlag) {
  if (!NeedBinaries()) return;
  ct::RunResult bad = ct::RunProcess(
      COHORT_COORDINATOR_BIN, {"--insecure", "--notify-url", "hooks.example.com/x"}, {}, 30s);
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("--notify-url: 'hooks.example.com/x' is not an http:// or https:// URL"),
            std::string::npos)
      << bad.err;
  ct::RunResult orphan = ct::RunProcess(
      COHORT_COORDINATOR_BIN, {"--insecure", "--notify-ca-file", "/etc/hostname"}, {}, 30s);
  EXPECT_NE(orphan.exit_code, 0);
  EXPECT_NE(orphan.err.find("--notify-ca-file: without --notify-url"), std::string::npos)
      << orphan.err;
  ct::RunResult unknown = ct::RunProcess(
      COHORT_COORDINATOR_BIN,
      {"--insecure", "--notify-url", "http://127.0.0.1:9/x", "--notify-on", "end,begin"}, {}, 30s);
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(
      unknown.err.find("--notify-on: 'begin' is none of end, start, restart, all, tasks, nodes"),
      std::string::npos)
      << unknown.err;
}

}  // namespace
}  // namespace cohort
