// Observability end to end (issue 17): a real Prometheus (Debian's `prometheus`) scrapes a live
// cluster's coordinator and agent every second and its HTTP API must report what the test did;
// the expositions parse strictly (python3-prometheus-client, promtool); training metrics of an
// ordinary job reach `cohort metrics`; `cohort usage` sums what ran; the dashboard renders in
// headless Chromium (Debian's chromium) with its token enforced. Screenshots are kept in
// $COHORT_TEST_ARTIFACTS (default: the build's tests/integration/artifacts).
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "common/build_version.h"
#include "tests/testing/cluster_test.h"

namespace cohort {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;
using nlohmann::json;

// The agent's node id, unique on this host (the agents of tests run in parallel are told apart
// by their node ids alone).
const std::string& NodeA() {
  static const std::string id = "node-a-" + std::to_string(::getpid());
  return id;
}

constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kPromtool = "/usr/bin/promtool";
using ct::kPython;
constexpr const char* kChromium = "/usr/bin/chromium";

std::string JobYaml(const std::string& name, const std::string& script, int cpus = 1,
                    const std::string& labels = "", int max_restarts = 0) {
  return "name: " + name + "\n" + (labels.empty() ? "" : "labels: " + labels + "\n") +
         "worker_pools:\n  - role: chief\n    replicas: 1\n    resources: {cpus: " +
         std::to_string(cpus) + "}\n    process:\n      command: [/bin/sh, -c, '" + script +
         "']\nscheduling: {max_restarts: " + std::to_string(max_restarts) + "}\n";
}

// GET http://127.0.0.1:port/path; "" on failure.
std::string HttpGet(int port, const std::string& path, int* status = nullptr) {
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2, 0);
  c.set_read_timeout(5, 0);
  auto r = c.Get(path.c_str());
  if (status) *status = r ? r->status : -1;
  return r ? r->body : "";
}

class ObservabilityTest : public ct::ClusterTest {
 protected:
  void SetUp() override {
    if (!NeedBinaries()) return;
    // A configured queue besides the default one, for the dashboard's Queues page; state
    // backups, whose series are scraped and parsed with the others (the first is taken at start).
    ct::ClusterOptions options;
    options.coordinator_args = {
        "--queue",
        "notebooks gpus=2 weight=2 gpu-idle-limit=2h cpus-per-gpu=8 memory-mb-per-gpu=4096",
        "--backup-dir",
        backups_.Join("coordinator"),
        "--backup-every",
        "1h"};
    ASSERT_NO_FATAL_FAILURE(StartCoordinator(std::move(options)));
    // A health check that always passes: its series are scraped and parsed with the others.
    ASSERT_EQ(cluster_->StartAgent(
                  {.node_id = NodeA(), .cpus = 4, .extra_args = {"--health-check", "/bin/true"}}),
              "");
  }

  // Runs the cohort CLI with `args`; it finds this cluster through the environment
  // (COHORT_COORDINATOR, COHORT_INSECURE).
  ct::RunResult CliByEnv(const std::vector<std::string>& args) {
    return ct::RunProcess(
        COHORT_CLI_BIN, args,
        {"COHORT_COORDINATOR=" + cluster_->client_endpoint(), "COHORT_INSECURE=1"});
  }

  // Submits and waits for the end; returns the final state's name.
  std::string Run(const std::string& yaml, const std::string& name) {
    auto client = cluster_->Client();
    auto submitted = client.Submit(yaml);
    if (!submitted.ok()) return "submit: " + submitted.status().ToString();
    auto job = ct::WaitForJobEnd(client, name, 60s);
    return wire::EnumNameJobState(job.state);
  }

  // Three jobs, one failing; the first reports training metrics the way trials do, and has the
  // label team=vision.
  void RunThreeJobs() {
    const std::string report =
        "for i in 1 2 3; do echo \"{\\\"global_step\\\": \\\"$i\\\", \\\"loss\\\": \\\"0.$((9 - "
        "i))\\\", \\\"timestamp\\\": $i}\" >> \"$CLOUD_ML_HP_METRIC_FILE\"; done; sleep 1";
    ASSERT_EQ(Run(JobYaml("reports", report, 2, "{team: vision}", 2), "reports"), "SUCCEEDED")
        << cluster_->Logs();
    ASSERT_EQ(Run(JobYaml("plain", "echo hello; sleep 1"), "plain"), "SUCCEEDED");
    ASSERT_EQ(Run(JobYaml("broken", "echo failing >&2; exit 3"), "broken"), "FAILED");
  }
  ct::TempDir backups_{"cohort-observability-backups"};
};

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      char buf[4];
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// Asks Prometheus' HTTP API for an instant query's single value; nullopt when it has none yet.
std::optional<double> PromValue(int port, const std::string& query) {
  std::string body = HttpGet(port, "/api/v1/query?query=" + UrlEncode(query));
  if (body.empty()) return std::nullopt;
  json j = json::parse(body, nullptr, false);
  if (j.is_discarded() || j.value("status", "") != "success") return std::nullopt;
  const json& result = j["data"]["result"];
  if (!result.is_array() || result.size() != 1) return std::nullopt;
  return std::stod(result[0]["value"][1].get<std::string>());
}

TEST_F(ObservabilityTest, PrometheusScrapesCoordinatorAndAgent) {
  if (!ct::FileExists(kPrometheus)) GTEST_SKIP() << kPrometheus << " missing (apt prometheus)";
  RunThreeJobs();
  // And one held at submit: SUSPENDED, never run.
  auto held = cluster_->Client().Submit(
      "name: held\nworker_pools:\n  - role: chief\n    process: {command: [/bin/true]}\n"
      "scheduling: {hold: true}\n");
  ASSERT_TRUE(held.ok()) << held.status().ToString();
  ct::TempDir dir("cohort-prometheus");
  const int port = ct::PickFreePort();
  ct::WriteFile(dir.Join("prometheus.yml"),
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                "scrape_configs:\n"
                "  - job_name: cohort-coordinator\n    static_configs:\n"
                "      - targets: ['127.0.0.1:" +
                    std::to_string(cluster_->coordinator_http_port()) +
                    "']\n"
                    "  - job_name: cohort-agent\n    static_configs:\n"
                    "      - targets: ['127.0.0.1:" +
                    std::to_string(cluster_->agent_http_port(NodeA())) + "']\n");
  ct::DaemonProcess prometheus(
      kPrometheus,
      {"--config.file=" + dir.Join("prometheus.yml"), "--storage.tsdb.path=" + dir.Join("data"),
       "--web.listen-address=127.0.0.1:" + std::to_string(port)},
      dir.Join("prometheus.log"));
  ASSERT_TRUE(prometheus.Start());

  struct Expect {
    std::string query;
    double value;
  };
  const std::vector<Expect> expected = {
      {"up{job=\"cohort-coordinator\"}", 1},
      {"up{job=\"cohort-agent\"}", 1},
      {"cohort_jobs_submitted_total{queue=\"default\"}", 4},
      {"cohort_jobs_finished_total{state=\"SUCCEEDED\",queue=\"default\"}", 2},
      {"cohort_jobs_finished_total{state=\"FAILED\",queue=\"default\"}", 1},
      {"cohort_jobs{state=\"RUNNING\",queue=\"default\"}", 0},
      {"cohort_jobs{state=\"SUSPENDED\",queue=\"default\"}", 1},
      {"cohort_nodes{state=\"ready\"}", 1},
      {"cohort_nodes{state=\"unhealthy\"}", 0},
      {"cohort_queue_wait_seconds_count", 3},
      {"cohort_submit_to_running_seconds_count", 3},
      {"cohort_job_restarts_total", 0},
      {"cohort_elastic_resizes_total{direction=\"shrink\"}", 0},
      {"cohort_elastic_resizes_total{direction=\"grow\"}", 0},
      {"cohort_replicas_fence_held", 0},
      {"cohort_gpus{state=\"held_idle\"}", 0},  // no NVML here: nothing sampled idle
      {"sum(cohort_requests_total{endpoint=\"client\",type=\"SubmitJob\"})", 4},
      {"cohort_agent_attempts_started_total{node=\"" + NodeA() + "\"}", 3},
      {"cohort_agent_health_check_passing{node=\"" + NodeA() + "\"}", 1},
      {"cohort_state_backups_total{result=\"ok\"}", 1},
      {"cohort_state_backups_total{result=\"failed\"}", 0},
      {"cohort_state_backup_last_success_timestamp_seconds > bool 1.7e9", 1},
      // The builds: the coordinator's, each agent's, and the nodes up by their agents' build.
      {"cohort_coordinator_build_info{version=\"" + std::string(CohortBuildVersion()) + "\"}", 1},
      {"cohort_agent_build_info{node=\"" + NodeA() + "\",version=\"" +
           std::string(CohortBuildVersion()) + "\"}",
       1},
      {"cohort_agent_builds{version=\"" + std::string(CohortBuildVersion()) + "\"}", 1},
  };
  std::string last;
  bool all = ct::WaitUntil(
      [&] {
        for (const Expect& e : expected) {
          auto v = PromValue(port, e.query);
          if (!v || *v != e.value) {
            last = e.query + " = " + (v ? std::to_string(*v) : "(none)");
            return false;
          }
        }
        return true;
      },
      60s, 500ms);
  EXPECT_TRUE(all) << "Prometheus still says " << last << "\nprometheus log:\n" << prometheus.Log();
  // Log bytes shipped grow with what the jobs printed.
  auto shipped = PromValue(port, "cohort_agent_log_bytes_shipped_total");
  ASSERT_TRUE(shipped.has_value());
  EXPECT_GE(*shipped, std::string("hello\nfailing\n").size());
}

TEST_F(ObservabilityTest, ExpositionsParseStrictly) {
  RunThreeJobs();
  for (int port : {cluster_->coordinator_http_port(), cluster_->agent_http_port(NodeA())}) {
    int status = 0;
    std::string text = HttpGet(port, "/metrics", &status);
    ASSERT_EQ(status, 200) << text;
    ct::TempDir dir("cohort-exposition");
    ct::WriteFile(dir.Join("metrics.txt"), text);
    if (ct::FileExists(kPython)) {
      // Every line must parse; every sample's family must have been declared with HELP and TYPE.
      ct::WriteFile(dir.Join("check.py"),
                    "import sys\n"
                    "from prometheus_client.parser import text_string_to_metric_families\n"
                    "text = open(sys.argv[1]).read()\n"
                    "helps = {l.split()[2] for l in text.splitlines() if l.startswith('# HELP')}\n"
                    "types = {l.split()[2] for l in text.splitlines() if l.startswith('# TYPE')}\n"
                    "assert helps == types, (helps ^ types)\n"
                    "n = 0\n"
                    "for f in text_string_to_metric_families(text):\n"
                    "    assert f.name in helps or f.name + '_total' in helps, f.name\n"
                    "    assert f.documentation, f.name\n"
                    "    n += len(f.samples)\n"
                    "print(n)\n");
      auto r = ct::RunProcess(kPython, {dir.Join("check.py"), dir.Join("metrics.txt")});
      EXPECT_EQ(r.exit_code, 0) << r.err << "\n" << text;
      if (r.err.find("No module named 'prometheus_client'") != std::string::npos) {
        ADD_FAILURE() << "python3-prometheus-client is missing (scripts/install-deps.sh)";
      }
    }
    if (ct::FileExists(kPromtool)) {
      auto r = ct::RunProcess("/bin/sh", {"-c", std::string(kPromtool) + " check metrics < " +
                                                    dir.Join("metrics.txt")});
      EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    }
  }
  // The agent says plainly what it cannot measure here instead of inventing it.
  std::string agent = HttpGet(cluster_->agent_http_port(NodeA()), "/metrics");
  if (agent.find("cohort_gpu_utilization_percent{") == std::string::npos) {
    EXPECT_NE(agent.find("# HELP cohort_gpu_utilization_percent"), std::string::npos);
    EXPECT_NE(agent.find("No samples: "), std::string::npos) << agent;
  }
}

TEST_F(ObservabilityTest, AgentReportsCgroupUsageOfARunningReplica) {
  auto client = cluster_->Client();
  ASSERT_TRUE(
      client.Submit(JobYaml("busy", "i=0; while [ $i -lt 3000000 ]; do i=$((i+1)); done")).ok());
  std::string text;
  bool seen = ct::WaitUntil(
      [&] {
        text = HttpGet(cluster_->agent_http_port(NodeA()), "/metrics");
        return text.find("cohort_agent_replicas{node=\"" + NodeA() + "\"} 1") != std::string::npos;
      },
      30s, 200ms);
  ASSERT_TRUE(seen) << text;
  if (text.find("No samples: replicas on this node have no cgroup") != std::string::npos) {
    GTEST_SKIP() << "this agent has no cgroups, so no per-replica usage (its HELP says why):\n"
                 << text;
  }
  EXPECT_NE(text.find("cohort_replica_cpu_seconds_total{node=\"" + NodeA() +
                      "\",job=\"busy\","
                      "replica=\"chief-0\",attempt="),
            std::string::npos)
      << text;
  // Memory and I/O only where those controllers are enabled (HELP says so); CPU always.
}

TEST_F(ObservabilityTest, TrainingMetricsOfAnOrdinaryJobAreStoredAndShown) {
  if (!NeedBinaries({COHORT_CLI_BIN})) return;
  RunThreeJobs();
  // The agent forwards the lines while the job runs; its end waits for their acks.
  auto r = CliByEnv({"metrics", "reports"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("STEP"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("loss"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("0.6"), std::string::npos) << r.out;
  auto json_out = CliByEnv({"metrics", "reports", "--json"});
  ASSERT_EQ(json_out.exit_code, 0) << json_out.err;
  json j = json::parse(json_out.out);
  ASSERT_EQ(j["points"].size(), 3u) << json_out.out;
  EXPECT_EQ(j["points"][0]["step"], 1);
  EXPECT_EQ(j["points"][0]["tag"], "loss");
  EXPECT_DOUBLE_EQ(j["points"][0]["value"].get<double>(), 0.8);
  EXPECT_EQ(j["points"][2]["time_ms"], 3000);
  // An ordinary job's measurements are no longer "dropped: not a trial of any study".
  EXPECT_EQ(cluster_->coordinator().Log().find("not a trial of any study"), std::string::npos);
  auto none = CliByEnv({"metrics", "no_such_job"});
  EXPECT_NE(none.exit_code, 0);
  EXPECT_NE(none.err.find("no job named 'no_such_job'"), std::string::npos) << none.err;

  // Stored: a restarted coordinator still has them.
  ASSERT_EQ(cluster_->StartCoordinator(), "");
  auto again = CliByEnv({"metrics", "reports", "--json"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(json::parse(again.out)["points"].size(), 3u) << again.out;
}

TEST_F(ObservabilityTest, UsageSumsTheJobsRun) {
  if (!NeedBinaries({COHORT_CLI_BIN})) return;
  RunThreeJobs();
  // What the jobs held: each job's CPUs times its run time, from its own record.
  auto client = cluster_->Client();
  double cpu_hours = 0;
  for (const auto& [name, cpus] :
       std::vector<std::pair<std::string, int>>{{"reports", 2}, {"plain", 1}, {"broken", 1}}) {
    auto job = client.GetJob(name);
    ASSERT_TRUE(job.ok());
    ASSERT_GT(job->start_time_ms, 0);
    cpu_hours += cpus * (job->end_time_ms - job->start_time_ms) / 3.6e6;
  }
  auto r = CliByEnv({"usage", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  json rows = json::parse(r.out);
  ASSERT_EQ(rows.size(), 1u) << r.out;
  EXPECT_EQ(rows[0]["user"], "unknown");
  EXPECT_EQ(rows[0]["queue"], "default");
  EXPECT_EQ(rows[0]["jobs"], 3);
  EXPECT_EQ(rows[0]["failed"], 1);
  EXPECT_DOUBLE_EQ(rows[0]["gpu_hours"].get<double>(), 0.0);
  EXPECT_NEAR(rows[0]["cpu_hours"].get<double>(), cpu_hours, 1e-9);
  // Filters: nobody else, and nothing since a date to come.
  auto other = CliByEnv({"usage", "--user", "alice", "--json"});
  ASSERT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(json::parse(other.out).size(), 0u);
  auto later = CliByEnv({"usage", "--since", "2999-01-01", "--json"});
  ASSERT_EQ(later.exit_code, 0) << later.err;
  EXPECT_EQ(json::parse(later.out).size(), 0u) << later.out;
  auto table = CliByEnv({"usage", "--since", "1d"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("unknown  default  3     1"), std::string::npos) << table.out;
  auto bad = CliByEnv({"usage", "--since", "yesterday"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--since"), std::string::npos) << bad.err;
  // By the label team: reports is vision's (its two CPUs' hours), the other two have none.
  auto by_team = CliByEnv({"usage", "--by-label", "team", "--json"});
  ASSERT_EQ(by_team.exit_code, 0) << by_team.err;
  json teams = json::parse(by_team.out);
  ASSERT_EQ(teams.size(), 2u) << by_team.out;
  EXPECT_EQ(teams[0]["label"], "vision");
  EXPECT_EQ(teams[0]["jobs"], 1);
  auto reports = client.GetJob("reports");
  ASSERT_TRUE(reports.ok());
  EXPECT_NEAR(teams[0]["cpu_hours"].get<double>(),
              2 * (reports->end_time_ms - reports->start_time_ms) / 3.6e6, 1e-9);
  EXPECT_TRUE(teams[1]["label"].is_null()) << by_team.out;
  EXPECT_EQ(teams[1]["jobs"], 2);
  EXPECT_EQ(teams[1]["failed"], 1);
  auto vision = CliByEnv({"usage", "-l", "team=vision", "--json"});
  ASSERT_EQ(vision.exit_code, 0) << vision.err;
  EXPECT_EQ(json::parse(vision.out)[0]["jobs"], 1) << vision.out;

  // The dashboard's /api/usage: the same rows once the loop has published the jobs' ends (the
  // HTTP side reads a snapshot at most kSnapshotIntervalMs old), a period ago.
  const int port = cluster_->coordinator_http_port();
  json api;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        api = json::parse(HttpGet(port, "/api/usage?by_label=team"), nullptr, false);
        return api.is_object() && api["rows"] == teams;
      },
      10s, 100ms))
      << api << "\n"
      << teams;
  EXPECT_EQ(api["since_ms"], 0) << api;
  json day =
      json::parse(HttpGet(port, "/api/usage?since=1d&selector=team%3Dvision"), nullptr, false);
  EXPECT_GT(day["since_ms"].get<int64_t>(), 0) << day;
  EXPECT_EQ(day["rows"], json::parse(vision.out)) << day;
  for (const char* bad : {"/api/usage?since=yesterday", "/api/usage?by_label=no%20key",
                          "/api/usage?selector=team%20in%20x"}) {
    int status = 0;
    const std::string body = HttpGet(port, bad, &status);
    EXPECT_EQ(status, 400) << bad << ": " << body;
    EXPECT_NE(body.find("\"error\""), std::string::npos) << body;
  }
}

// ---- the dashboard in headless Chromium ----

std::string ArtifactsDir() {
  const char* env = std::getenv("COHORT_TEST_ARTIFACTS");
  std::string dir = env && *env ? env : COHORT_ARTIFACTS_DIR;
  std::filesystem::create_directories(dir);
  return dir;
}

// Loads `url` in headless Chromium and returns the DOM after its scripts ran; with `screenshot`,
// also saves a PNG there.
std::string RenderPage(const std::string& url, const std::string& screenshot = "") {
  ct::TempDir profile("cohort-chromium");
  std::vector<std::string> args = {"--headless=new",
                                   "--no-sandbox",
                                   "--disable-gpu",
                                   "--disable-dev-shm-usage",
                                   "--no-first-run",
                                   "--hide-scrollbars",
                                   "--window-size=1280,900",
                                   "--virtual-time-budget=8000",
                                   "--user-data-dir=" + profile.path()};
  if (!screenshot.empty()) {
    std::vector<std::string> shot = args;
    shot.push_back("--screenshot=" + screenshot);
    shot.push_back(url);
    ct::RunProcess(kChromium, shot, {}, 60s);
  }
  args.push_back("--dump-dom");
  args.push_back(url);
  return ct::RunProcess(kChromium, args, {}, 60s).out;
}

// Two trials of a grid study; trial x reports score = x * step for steps 1-4.
std::string StudyYaml() {
  return R"(name: tune_x
metric: {id: score, goal: maximize}
parameters:
  - {id: x, type: integer, min: 1, max: 2}
algorithm: grid
max_trials: 2
parallel_trials: 2
trial_job:
  worker_pools:
    - role: chief
      replicas: 1
      process:
        command: [/bin/sh, -c, 'x=${1#--x=}; for i in 1 2 3 4; do echo "{\"global_step\": \"$i\", \"score\": \"$((x * i))\", \"timestamp\": $i}" >> "$CLOUD_ML_HP_METRIC_FILE"; done; sleep 1', sh]
  scheduling: {max_restarts: 0}
)";
}

TEST_F(ObservabilityTest, DashboardRendersJobsReplicasAndStudyCurves) {
  if (!ct::FileExists(kChromium)) GTEST_SKIP() << kChromium << " missing (apt chromium)";
  RunThreeJobs();
  auto client = cluster_->Client();
  auto study = client.SubmitStudy(StudyYaml());
  ASSERT_TRUE(study.ok()) << study.status().ToString();
  wire::StudyInfoT info;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto s = client.GetStudy("tune_x");
        if (s.ok()) info = std::move(*s);
        return s.ok() && info.state != "ACTIVE";
      },
      90s, 250ms))
      << cluster_->Logs();
  ASSERT_EQ(info.state, "SUCCEEDED") << info.message;

  const std::string base = "http://127.0.0.1:" + std::to_string(cluster_->coordinator_http_port());
  const std::string artifacts = ArtifactsDir();
  std::string jobs = RenderPage(base + "/#/jobs", artifacts + "/dashboard-jobs.png");
  EXPECT_NE(jobs.find("id=\"jobs\""), std::string::npos) << jobs;
  for (const char* name : {"reports", "plain", "broken", "tune_x_trial_1"}) {
    EXPECT_NE(jobs.find(std::string(">") + name + "<"), std::string::npos) << name << "\n" << jobs;
  }
  EXPECT_NE(jobs.find("state-FAILED"), std::string::npos);
  // The Labels column, as `cohort list` has it; /api/jobs selects by them.
  EXPECT_NE(jobs.find("<th>Labels</th>"), std::string::npos) << jobs;
  EXPECT_NE(jobs.find("<td>team=vision</td>"), std::string::npos) << jobs;
  json vision =
      json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/jobs?selector=team%3Dvision"),
                  nullptr, false);
  ASSERT_EQ(vision["jobs"].size(), 1u) << vision;
  EXPECT_EQ(vision["jobs"][0]["name"], "reports");
  int bad_selector = 0;
  HttpGet(cluster_->coordinator_http_port(), "/api/jobs?selector=team%20in%20x", &bad_selector);
  EXPECT_EQ(bad_selector, 400);

  // Usage by the label team: vision's row and the unlabelled one (the two trials too), each
  // linking to its jobs; no GPU-hours here, so the bars are CPU-hours, one a row.
  std::string usage =
      RenderPage(base + "/#/usage?by_label=team", artifacts + "/dashboard-usage.png");
  EXPECT_NE(usage.find("id=\"usage\""), std::string::npos) << usage;
  EXPECT_NE(usage.find("<th>team</th><th>Jobs</th>"), std::string::npos) << usage;
  EXPECT_NE(
      usage.find("<a href=\"#/jobs?selector=team%3Dvision\">vision</a></td><td>1</td><td>0</td>"),
      std::string::npos)
      << usage;
  EXPECT_NE(
      usage.find("<a href=\"#/jobs?selector=!team\">&lt;none&gt;</a></td><td>4</td><td>1</td>"),
      std::string::npos)
      << usage;
  EXPECT_NE(usage.find("all time: 5 jobs, 0.0000 GPU-hours"), std::string::npos) << usage;
  EXPECT_NE(usage.find("data-drawn=\"2\""), std::string::npos) << usage;

  // The queues as `cohort queues` has them, in config order: the default one, which holds the
  // jobs run here, then notebooks with its quota, weight, defaults per GPU and GPU idle limit.
  std::string queues = RenderPage(base + "/#/queues", artifacts + "/dashboard-queues.png");
  EXPECT_NE(queues.find("<td><a href=\"#/jobs?queue=notebooks\">notebooks</a></td><td>2</td>"
                        "<td>0/2</td><td>0/-</td><td>8 CPUs, 4096 MB</td><td>2.0h</td><td></td>"
                        "<td>0</td>"),
            std::string::npos)
      << queues;
  EXPECT_NE(queues.find("<td><a href=\"#/jobs?queue=default\">default</a></td><td>1</td>"),
            std::string::npos)
      << queues;
  EXPECT_LT(queues.find(">default<"), queues.find(">notebooks<")) << queues;
  json api_queues =
      json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/queues"), nullptr, false);
  ASSERT_TRUE(api_queues.is_array()) << api_queues;
  ASSERT_EQ(api_queues.size(), 2u) << api_queues;
  EXPECT_EQ(api_queues[0]["jobs"]["SUCCEEDED"], 4) << api_queues;  // 2 jobs and 2 trials
  EXPECT_EQ(api_queues[1]["gpu_idle_limit_ms"], 7'200'000) << api_queues;
  EXPECT_EQ(api_queues[1]["cpus_per_gpu"], 8) << api_queues;
  EXPECT_EQ(api_queues[1]["memory_mb_per_gpu"], 4096) << api_queues;

  std::string job = RenderPage(base + "/#/job/reports", artifacts + "/dashboard-job.png");
  EXPECT_NE(job.find("id=\"job-name\""), std::string::npos) << job;
  EXPECT_NE(job.find("id=\"replicas\""), std::string::npos) << job;
  EXPECT_NE(job.find(">chief-0<"), std::string::npos) << job;
  EXPECT_NE(job.find(">" + NodeA() + "<"), std::string::npos) << job;
  EXPECT_NE(job.find(" · labels team=vision · "), std::string::npos) << job;
  // What a fall of its one replica would restart, and why.
  EXPECT_NE(job.find(" · restarts 0/2, each of the replica that fell "
                     "(restart_job_on_worker_restart unset) · "),
            std::string::npos)
      << job;
  EXPECT_EQ(json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/jobs/reports"), nullptr,
                        false)["restart_rule"],
            "the replica that fell (restart_job_on_worker_restart unset)");
  // Its training metrics are drawn: three points.
  EXPECT_NE(job.find("data-drawn=\"3\""), std::string::npos) << job;

  // A replica's log tail.
  std::string plain = RenderPage(base + "/#/job/plain");
  EXPECT_NE(plain.find("id=\"log\">hello\n"), std::string::npos) << plain;

  // /api/studies/NAME serves the CLI's form (common/wire_json.h): parameters as an object, the
  // final metric or null, the owner.
  json api = json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/studies/tune_x"), nullptr,
                         false);
  ASSERT_TRUE(api.is_object()) << api;
  EXPECT_TRUE(api.contains("owner")) << api;
  ASSERT_EQ(api["trials"].size(), 2u) << api;
  for (const json& t : api["trials"]) {
    ASSERT_TRUE(t["parameters"].is_object()) << t;
    EXPECT_DOUBLE_EQ(t["final_metric"].get<double>(),
                     4 * std::stod(t["parameters"].value("x", "0")))
        << t;
  }

  std::string studies = RenderPage(base + "/#/study/tune_x", artifacts + "/dashboard-study.png");
  EXPECT_NE(studies.find("id=\"trials\""), std::string::npos) << studies;
  EXPECT_NE(studies.find("id=\"best-trial\""), std::string::npos) << studies;
  // Each trial's parameters and final metric (x * 4) are in its row.
  EXPECT_NE(studies.find("<td>x=1</td>"), std::string::npos) << studies;
  EXPECT_NE(studies.find("<td>x=2</td><td>8</td>"), std::string::npos) << studies;
  // Both trials' curves (4 points each) are on the canvas.
  EXPECT_NE(studies.find("data-drawn=\"8\""), std::string::npos) << studies;

  // A second node whose health check fails once it has joined: the nodes page shows it UNHEALTHY
  // (in red) with the check's reason; its GPU 1, cordoned alone, shows so (held by nothing); its
  // GPU 0 is held by a job placed before the check failed (what runs there goes on).
  const std::string sick = "sick-" + std::to_string(::getpid());
  const std::string fault = cluster_->scratch("fault");
  const std::string check = cluster_->scratch("check");
  ct::WriteFile(check, "#!/bin/sh\n[ -e " + fault + " ] || exit 0\necho 'GPU 0: XID 48'\nexit 1\n",
                /*executable=*/true);
  ASSERT_EQ(cluster_->StartAgent({.node_id = sick,
                                  .gpus = 2,
                                  .extra_args = {"--health-check", check, "--health-check-interval",
                                                 "1s", "--label", "gpu=h100"}}),
            "");
  ASSERT_TRUE(client.AdminNode(sick, "cordon", {}, {1}, "GPU 1 <flaky> NVLink").ok());
  ASSERT_TRUE(client
                  .Submit("name: on-gpu\nworker_pools:\n  - role: chief\n    resources: {gpus: 1}\n"
                          "    process: {command: [/bin/sleep, '300']}\n")
                  .ok());
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto job = client.GetJob("on-gpu");
        return job.ok() && job->state == wire::JobState::RUNNING;
      },
      20s, 100ms));
  ct::WriteFile(fault, "");
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        return HttpGet(cluster_->coordinator_http_port(), "/api/nodes").find("UNHEALTHY") !=
               std::string::npos;
      },
      15s, 200ms));
  std::string nodes = RenderPage(base + "/#/nodes", artifacts + "/dashboard-nodes.png");
  EXPECT_NE(nodes.find(">" + NodeA() + "<"), std::string::npos) << nodes;
  EXPECT_NE(nodes.find("<span class=\"state-UNHEALTHY\">UNHEALTHY</span> <small>GPU 0: XID 48 "
                       "(health check exited with code 1)</small>"),
            std::string::npos)
      << nodes;
  EXPECT_NE(nodes.find("<small>GPU 1 cordoned</small>"), std::string::npos) << nodes;
  // The note kept with the cordon, its reason escaped, on both pages.
  const std::regex note(
      "<small class=\"cordon-note\">GPUs cordoned( by [^ <]+)? since [^<]+: GPU 1 &lt;flaky&gt; "
      "NVLink</small>");
  EXPECT_TRUE(std::regex_search(nodes, note)) << nodes;
  // The node's own page, linked from its name: each GPU's row says why nothing goes there.
  EXPECT_NE(nodes.find("<a href=\"#/node/" + sick + "\">" + sick + "</a>"), std::string::npos)
      << nodes;
  std::string node = RenderPage(base + "/#/node/" + sick, artifacts + "/dashboard-node.png");
  EXPECT_NE(node.find("id=\"node-name\""), std::string::npos) << node;
  EXPECT_NE(node.find("fails its health check: GPU 0: XID 48"), std::string::npos) << node;
  EXPECT_TRUE(std::regex_search(node, note)) << node;
  // Its history, newest first: the cordon after the registration; /api/nodes gives it only for
  // the node asked for.
  EXPECT_TRUE(std::regex_search(
      node, std::regex("<table id=\"node-events\">.*<td>GPU 1 cordoned by [^<]+: GPU 1 "
                       "&lt;flaky&gt; NVLink</td>.*<td>registered: cohort-agent [^<]+</td>")))
      << node;
  json asked =
      json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/nodes?events_of=" + sick));
  for (const json& n : asked) {
    EXPECT_EQ(n.contains("events"), n["node_id"] == sick) << n;
  }
  EXPECT_NE(node.find(" · labels gpu=h100 · "), std::string::npos) << node;
  // Its agent, and when that started (by the coordinator's clock, from its reported uptime).
  const std::string version(CohortBuildVersion());
  const size_t agent = node.find(" · cohort-agent " + version + ", started ");
  EXPECT_NE(agent, std::string::npos) << node;
  if (agent != std::string::npos) {
    EXPECT_TRUE(std::regex_search(node.substr(agent), std::regex("^ · cohort-agent [^,]+, started "
                                                                 "[0-9.]+[smh] ago · ")))
        << node;
  }
  EXPECT_NE(node.find("<td><a href=\"#/job/on-gpu\">on-gpu/chief-0</a></td></tr></tbody></table>"),
            std::string::npos)
      << node;
  ASSERT_TRUE(client.Cancel("on-gpu").ok());
  EXPECT_TRUE(std::regex_search(
      node, std::regex("<tr><td>0</td>(<td>[^<]*</td>){5}<td><a href=\"#/job/on-gpu\">on-gpu/"
                       "chief-0</a></td>")))
      << node;
  EXPECT_TRUE(
      std::regex_search(node, std::regex("<tr><td>1</td>(<td>[^<]*</td>){5}<td>cordoned</td>")))
      << node;
  json api_nodes = json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/nodes"));
  for (const json& n : api_nodes) {
    EXPECT_EQ(n["version"], version) << n;  // its agent's, this build's
    EXPECT_GT(n["agent_started_ms"].get<int64_t>(), 0) << n;
    EXPECT_GT(n["agent_up_ms"].get<int64_t>(), 0) << n;
    EXPECT_TRUE(n["gpus_used"].is_array()) << n;
    EXPECT_EQ(n["gpus_used"].size(), n["gpus_allocated"]) << n;
  }
  EXPECT_TRUE(ct::FileExists(artifacts + "/dashboard-jobs.png"));
  EXPECT_TRUE(ct::FileExists(artifacts + "/dashboard-study.png"));

  // A job array of three tasks, one at a time; the odd one fails. The Arrays page sums it up
  // (ended FAILED: 2 succeeded, 1 failed), its page lists the tasks by index, and the jobs page
  // links each task to it.
  ASSERT_TRUE(client
                  .Submit("name: odd\nworker_pools:\n  - role: chief\n    resources: {cpus: 1}\n"
                          "    process: {command: [/bin/sh, -c, 'exit $((COHORT_ARRAY_INDEX % "
                          "2))']}\nscheduling: {max_restarts: 0, array: '0-2%1'}\n")
                  .ok());
  for (const char* task : {"odd-0", "odd-1", "odd-2"}) ct::WaitForJobEnd(client, task, 60s);
  std::string arrays = RenderPage(base + "/#/arrays", artifacts + "/dashboard-arrays.png");
  EXPECT_NE(arrays.find("<td><a href=\"#/array/odd\">odd</a></td><td><span class=\"state-FAILED\">"
                        "FAILED</span></td><td>0-2%1</td><td>3</td>"),
            std::string::npos)
      << arrays;
  EXPECT_NE(arrays.find("<td>0/1</td><td>2 <span class=\"state-SUCCEEDED\">SUCCEEDED</span>, 1 "
                        "<span class=\"state-FAILED\">FAILED</span></td>"),
            std::string::npos)
      << arrays;
  // Submitted without an owner (no CURVE keys here): the user "unknown", as on the jobs page.
  EXPECT_NE(arrays.find("<td>default</td><td>unknown</td>"), std::string::npos) << arrays;
  json unknown =
      json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/arrays?user=unknown"));
  ASSERT_EQ(unknown.size(), 1u) << unknown;
  EXPECT_EQ(unknown[0]["name"], "odd");
  EXPECT_EQ(unknown[0]["owner"], "");
  std::string array = RenderPage(base + "/#/array/odd", artifacts + "/dashboard-array.png");
  EXPECT_NE(array.find("id=\"array-summary\">3 tasks (0-2%1): 2 "), std::string::npos) << array;
  EXPECT_NE(array.find(" · owner unknown · "), std::string::npos) << array;
  EXPECT_NE(array.find("<td>1</td><td><a href=\"#/job/odd-1\">odd-1</a></td><td><span "
                       "class=\"state-FAILED\">"),
            std::string::npos)
      << array;
  std::string tasks = RenderPage(base + "/#/jobs?selector=cohort%2Farray%3Dodd");
  EXPECT_NE(tasks.find("<p id=\"job-count\">3 jobs</p>"), std::string::npos) << tasks;
  EXPECT_NE(tasks.find(">odd-2</a> <small><a href=\"#/array/odd\">array odd</a></small>"),
            std::string::npos)
      << tasks;
  int missing = 0;
  HttpGet(cluster_->coordinator_http_port(), "/api/arrays/plain", &missing);
  EXPECT_EQ(missing, 404);
}

// `cohort top`, `cohort status` and the dashboard: what a running replica uses reaches the
// coordinator with its agent's heartbeats. A replica spinning on a CPU uses more of it than one
// asleep, both have memory where the agent's cgroups have the memory controller, and neither has
// a GPU here.
TEST_F(ObservabilityTest, TopShowsWhatEachRunningReplicaUses) {
  if (!NeedBinaries({COHORT_CLI_BIN})) return;
  auto client = cluster_->Client();
  ASSERT_TRUE(client.Submit(JobYaml("spinning", "while :; do :; done")).ok());
  ASSERT_TRUE(client.Submit(JobYaml("asleep", "exec sleep 600")).ok());
  const std::string metrics_of_cgroups = [&] {
    std::string text;
    ct::WaitUntil(
        [&] {
          text = HttpGet(cluster_->agent_http_port(NodeA()), "/metrics");
          return text.find("cohort_agent_replicas{node=\"" + NodeA() + "\"} 2") !=
                 std::string::npos;
        },
        30s, 200ms);
    return text;
  }();
  if (metrics_of_cgroups.find("No samples: replicas on this node have no cgroup") !=
      std::string::npos) {
    GTEST_SKIP() << "this agent has no cgroups, so no per-replica usage (its HELP says why):\n"
                 << metrics_of_cgroups;
  }
  const bool memory_controller =
      metrics_of_cgroups.find("cohort_replica_memory_bytes{") != std::string::npos;
  // Until both have a CPU figure: two heartbeats a second apart.
  json rows;
  std::map<std::string, json> usage;
  ASSERT_TRUE(ct::WaitUntil(
      [&] {
        auto r = CliByEnv({"top", "--json"});
        if (r.exit_code != 0) return false;
        rows = json::parse(r.out, nullptr, false);
        if (!rows.is_array()) return false;
        usage.clear();
        for (const json& row : rows) {
          if (row["usage"].is_object() && row["usage"]["cpu_cores"].get<double>() >= 0) {
            usage[row["job"].get<std::string>()] = row["usage"];
          }
        }
        return usage.size() == 2;
      },
      30s, 300ms))
      << rows.dump();
  EXPECT_GT(usage["spinning"]["cpu_cores"].get<double>(),
            usage["asleep"]["cpu_cores"].get<double>())
      << rows.dump();
  for (const auto& [job, u] : usage) {
    EXPECT_TRUE(u["gpus"].empty()) << job << ": " << u.dump();
    EXPECT_LE(u["age_ms"].get<int64_t>(), 15'000) << job;
    if (memory_controller) {
      EXPECT_GT(u["memory_bytes"].get<int64_t>(), 0) << job;
    }
  }
  // The same as tables: `cohort top` for every running job, `cohort status` for one.
  auto top = CliByEnv({"top"});
  ASSERT_EQ(top.exit_code, 0) << top.err;
  EXPECT_NE(top.out.find("JOB"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("spinning"), std::string::npos) << top.out;
  EXPECT_NE(top.out.find("asleep"), std::string::npos) << top.out;
  auto status = CliByEnv({"status", "spinning"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  const size_t section = status.out.find("\nUsage (");
  ASSERT_NE(section, std::string::npos) << status.out;
  EXPECT_NE(status.out.find("chief-0", section), std::string::npos) << status.out;
  // Per node (`cohort top --nodes`): both replicas run on NodeA, their usage summed there.
  auto nodes_top = CliByEnv({"top", "--nodes", "--json"});
  ASSERT_EQ(nodes_top.exit_code, 0) << nodes_top.err;
  json node_a;
  for (const json& n : json::parse(nodes_top.out)) {
    if (n["node_id"] == NodeA()) node_a = n;
  }
  ASSERT_TRUE(node_a.is_object() && node_a["usage"].is_object()) << nodes_top.out;
  EXPECT_EQ(node_a["replicas"], 2) << node_a;
  EXPECT_EQ(node_a["usage"]["replicas"], 2) << node_a;
  // The 10 s CPU windows move little between two reads: the sum holds the spinning one's.
  EXPECT_GE(node_a["usage"]["cpu_cores"].get<double>(),
            0.5 * usage["spinning"]["cpu_cores"].get<double>())
      << node_a << " " << rows.dump();
  if (memory_controller) {
    EXPECT_GT(node_a["usage"]["memory_bytes"].get<int64_t>(), 0) << node_a;
  }
  auto nodes_table = CliByEnv({"top", "--nodes"});
  ASSERT_EQ(nodes_table.exit_code, 0) << nodes_table.err;
  EXPECT_TRUE(
      std::regex_search(nodes_table.out, std::regex(NodeA() + " +READY +2 +[0-9]+\\.[0-9][0-9] ")))
      << nodes_table.out;
  // The dashboard's job page: its API (from the HTTP snapshot, up to half a second behind), and
  // the page in headless Chromium.
  json api;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        api = json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/jobs/spinning"), nullptr,
                          false);
        if (!api.is_object() || api["replica_list"].size() != 1) return false;
        const json& u = api["replica_list"][0]["usage"];
        return u.is_object() && u["cpu_cores"].get<double>() >= 0;
      },
      10s, 200ms))
      << api;
  if (ct::FileExists(kChromium)) {
    const std::string page = RenderPage(
        "http://127.0.0.1:" + std::to_string(cluster_->coordinator_http_port()) + "/#/job/spinning",
        ArtifactsDir() + "/dashboard-usage.png");
    EXPECT_NE(page.find("<th>GPU use</th>"), std::string::npos) << page;
    EXPECT_TRUE(std::regex_search(page, std::regex("<td>[0-9]+\\.[0-9][0-9]</td>"))) << page;
  }
  // Its nodes page: NodeA's CPU use, from /api/nodes.
  json api_nodes;
  EXPECT_TRUE(ct::WaitUntil(
      [&] {
        api_nodes =
            json::parse(HttpGet(cluster_->coordinator_http_port(), "/api/nodes"), nullptr, false);
        for (const json& n : api_nodes.is_array() ? api_nodes : json::array()) {
          if (n["node_id"] == NodeA() && n["usage"].is_object()) {
            return n["usage"]["replicas"] == 2 && n["usage"]["cpu_cores"].get<double>() >= 0;
          }
        }
        return false;
      },
      10s, 200ms))
      << api_nodes;
  if (ct::FileExists(kChromium)) {
    const std::string page = RenderPage(
        "http://127.0.0.1:" + std::to_string(cluster_->coordinator_http_port()) + "/#/nodes",
        ArtifactsDir() + "/dashboard-nodes-usage.png");
    EXPECT_NE(page.find("<th>CPU use</th>"), std::string::npos) << page;
    EXPECT_TRUE(std::regex_search(page, std::regex("<td>[0-9]+\\.[0-9][0-9]</td>"))) << page;
  }
  // Once a job has ended it uses nothing, and says nothing of it.
  ASSERT_TRUE(client.Cancel("asleep").ok());
  ASSERT_EQ(ct::WaitForJobEnd(client, "asleep", 30s).state, wire::JobState::CANCELLED);
  auto ended = client.GetJob("asleep");
  ASSERT_TRUE(ended.ok());
  for (const auto& r : ended->replicas) EXPECT_EQ(r->usage, nullptr) << r->replica;
  auto only = CliByEnv({"top", "--json", "asleep"});
  ASSERT_EQ(only.exit_code, 0) << only.err;
  EXPECT_EQ(json::parse(only.out), json::array()) << only.out;
  ASSERT_TRUE(client.Cancel("spinning").ok());
}

using ObservabilityAuth = ct::ClusterTest;

// /api/nodes?selector=: the nodes a Kubernetes label selector matches, as `cohort nodes -l` lists
// them; a malformed one is a 400 naming what is wrong.
TEST_F(ObservabilityTest, NodesApiTakesASelector) {
  if (!NeedBinaries()) return;
  const int port = cluster_->coordinator_http_port();
  auto client = cluster_->Client();
  auto labelled = client.AdminNode(NodeA(), "label", {"rack=r1"});
  ASSERT_TRUE(labelled.ok()) << labelled.status().ToString();
  auto ids = [&](const std::string& selector) {
    std::set<std::string> out;
    json nodes =
        json::parse(HttpGet(port, "/api/nodes?selector=" + UrlEncode(selector)), nullptr, false);
    if (nodes.is_array()) {
      for (const auto& n : nodes) out.insert(n.value("node_id", ""));
    }
    return out;
  };
  const std::set<std::string> a = {NodeA()};
  // The API reads the snapshot the loop publishes: the label shows at its next publication.
  ASSERT_TRUE(ct::WaitUntil([&] { return ids("rack=r1") == a; }, 10s)) << "no node in rack r1";
  EXPECT_EQ(ids("rack in (r1, r2),!maintenance"), a);
  EXPECT_EQ(ids("rack=r2"), std::set<std::string>{});
  EXPECT_EQ(ids(""), a);
  int status = 0;
  const std::string body =
      HttpGet(port, "/api/nodes?selector=" + UrlEncode("rack in (r1"), &status);
  EXPECT_EQ(status, 400);
  EXPECT_NE(body.find("without its ')'"), std::string::npos) << body;
}

TEST_F(ObservabilityAuth, BeyondLoopbackTheTokenIsRequired) {
  if (!NeedBinaries()) return;
  const int port = ct::PickFreePort();
  ct::ClusterOptions options;
  options.coordinator_args = {"--http-endpoint", "0.0.0.0:" + std::to_string(port), "--http-token",
                              "right-token"};
  ASSERT_NO_FATAL_FAILURE(StartCoordinator(options));
  int status = 0;
  HttpGet(port, "/metrics", &status);
  EXPECT_EQ(status, 401);
  std::string body = HttpGet(port, "/api/jobs?token=wrong-token", &status);
  EXPECT_EQ(status, 401);
  EXPECT_EQ(body, "wrong token\n");
  HttpGet(port, "/metrics?token=right-token", &status);
  EXPECT_EQ(status, 200);
  HttpGet(port, "/api/jobs", &status);
  EXPECT_EQ(status, 401);
  HttpGet(port, "/app.js", &status);  // the page's static files hold no data
  EXPECT_EQ(status, 200);
  if (ct::FileExists(kChromium)) {
    std::string refused = RenderPage("http://127.0.0.1:" + std::to_string(port) + "/#/jobs");
    EXPECT_EQ(refused.find("id=\"jobs\""), std::string::npos) << refused;
    std::string page =
        RenderPage("http://127.0.0.1:" + std::to_string(port) + "/?token=right-token#/jobs");
    EXPECT_NE(page.find("id=\"jobs\""), std::string::npos) << page;
  }
  // Without a token the coordinator refuses to bind beyond loopback.
  ct::ClusterOptions no_token;
  no_token.coordinator_args = {"--http-endpoint", "0.0.0.0:" + std::to_string(ct::PickFreePort())};
  ct::LocalCluster refused(ct::ClusterBinaries{COHORT_COORDINATOR_BIN, COHORT_AGENT_BIN}, no_token);
  std::string error = refused.StartCoordinator(5s);
  EXPECT_NE(error.find("a token is required"), std::string::npos) << error;
}

}  // namespace
}  // namespace cohort
