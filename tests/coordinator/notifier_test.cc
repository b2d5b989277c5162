// Job-, array- and study-end notices: the delivery rule (NoticeQueue), the webhook URL, what a
// notice says (coordinator/job_notice.h), and the Notifier's thread against a real HTTP receiver on
// loopback.
#include "coordinator/notifier.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "coordinator/job_notice.h"

namespace cohort::coordinator {
namespace {

using nlohmann::json;
using Outcome = NoticeQueue::Outcome;

TEST(NoticeQueue, SendsInOrderRetriesWithBackoffAndDropsWhatCannotBeDelivered) {
  NoticeQueue q(/*capacity=*/3, /*give_up_ms=*/10'000);
  int64_t wait = 0;
  EXPECT_EQ(q.Due(0, &wait), nullptr);
  EXPECT_EQ(wait, -1);  // nothing queued
  EXPECT_FALSE(q.Add("a", 0));
  EXPECT_FALSE(q.Add("b", 0));
  ASSERT_NE(q.Due(0, &wait), nullptr);
  EXPECT_EQ(*q.Due(0, &wait), "a");

  // "a" fails: tried again after 1 s, then 2 s; "b" waits behind it (the order is kept).
  EXPECT_FALSE(q.Settle(Outcome::kRetry, 100));
  EXPECT_EQ(q.Due(100, &wait), nullptr);
  EXPECT_EQ(wait, 1000);
  ASSERT_NE(q.Due(1100, &wait), nullptr);
  EXPECT_EQ(*q.Due(1100, &wait), "a");
  EXPECT_FALSE(q.Settle(Outcome::kRetry, 1100));
  EXPECT_EQ(q.Due(2000, &wait), nullptr);
  EXPECT_EQ(wait, 1100);  // 2 s after 1100
  EXPECT_FALSE(q.Settle(Outcome::kDelivered, 3100));
  EXPECT_EQ(*q.Due(3100, &wait), "b");
  EXPECT_EQ(q.delivered(), 1u);
  EXPECT_EQ(q.retried(), 2u);

  // A refusal (400) drops it at once.
  EXPECT_TRUE(q.Settle(Outcome::kRefused, 3200));
  EXPECT_EQ(q.dropped(), 1u);
  EXPECT_EQ(q.size(), 0u);

  // Full: the oldest is pushed out.
  for (const char* body : {"c", "d", "e"}) EXPECT_FALSE(q.Add(body, 4000));
  EXPECT_TRUE(q.Add("f", 4000));
  EXPECT_EQ(*q.Due(4000, &wait), "d");
  EXPECT_EQ(q.dropped(), 2u);

  // Given up on once first tried give_up_ms ago; the backoff stops growing at 60 s.
  EXPECT_FALSE(q.Settle(Outcome::kRetry, 5000));   // first tried: again at 6000
  EXPECT_FALSE(q.Settle(Outcome::kRetry, 6000));   // at 8000
  EXPECT_FALSE(q.Settle(Outcome::kRetry, 8000));   // at 12000
  EXPECT_FALSE(q.Settle(Outcome::kRetry, 12000));  // 7 s in: at 20000
  EXPECT_TRUE(q.Settle(Outcome::kRetry, 20000));   // 15 s in: given up
  EXPECT_EQ(q.dropped(), 3u);
  ASSERT_NE(q.Due(20000, &wait), nullptr);
  EXPECT_EQ(*q.Due(20000, &wait), "e");

  NoticeQueue slow(1, 24 * 3'600'000LL);
  slow.Add("x", 0);
  int64_t t = 0;
  for (int i = 0; i < 10; ++i) {
    slow.Settle(Outcome::kRetry, t);
    slow.Due(t, &wait);
    t += wait;
  }
  EXPECT_EQ(wait, NoticeQueue::kMaxRetryMs);
}

TEST(NoticeQueue, AnHttpStatusIsDeliveredRetriedOrRefused) {
  EXPECT_EQ(NoticeQueue::OutcomeOf(200), Outcome::kDelivered);
  EXPECT_EQ(NoticeQueue::OutcomeOf(204), Outcome::kDelivered);
  for (int status : {0, 408, 429, 500, 502, 503}) {
    EXPECT_EQ(NoticeQueue::OutcomeOf(status), Outcome::kRetry) << status;
  }
  for (int status : {301, 400, 401, 403, 404, 413}) {
    EXPECT_EQ(NoticeQueue::OutcomeOf(status), Outcome::kRefused) << status;
  }
}

TEST(WebhookUrl, TakesHttpAndHttpsAndNamesWhatIsWrong) {
  auto url = ParseWebhookUrl("https://hooks.example.com/services/T0/B0/x?y=1");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->origin, "https://hooks.example.com");
  EXPECT_EQ(url->path, "/services/T0/B0/x?y=1");
  url = ParseWebhookUrl("http://10.0.0.5:9093");
  ASSERT_TRUE(url.ok());
  EXPECT_EQ(url->origin, "http://10.0.0.5:9093");
  EXPECT_EQ(url->path, "/");
  url = ParseWebhookUrl("http://[::1]:8080/hook");
  ASSERT_TRUE(url.ok()) << url.status().ToString();
  EXPECT_EQ(url->origin, "http://[::1]:8080");
  const std::pair<const char*, const char*> bad[] = {
      {"hooks.example.com/x", "is not an http:// or https:// URL"},
      {"ftp://h/x", "is not an http:// or https:// URL"},
      {"http:///x", "names no host"},
      {"http://:80/x", "names no host"},
      {"http://h:99999/x", "'99999' is not a port"},
      {"http://h:x/", "'x' is not a port"},
      {"http://u:p@h/x", "user information"},
      {"http://h/x#top", "a fragment"},
  };
  for (const auto& [text, why] : bad) {
    auto parsed = ParseWebhookUrl(text);
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(parsed.status().message().find(why), std::string::npos)
        << text << ": " << parsed.status().ToString();
  }
}

JobRecord Ended(const std::string& spec_yaml, JobState state, const std::string& message) {
  JobRecord j;
  auto spec = ParseJobSpec(spec_yaml);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  j.spec = *spec;
  j.name = j.spec.name;
  j.owner = "alice";
  j.state = state;
  j.message = message;
  j.create_time_ms = 1'000;
  j.start_time_ms = 61'000;
  j.suspended_ms = 60'000;
  j.end_time_ms = 3'723'000 + 60'000 + 61'000;  // 1h02m03s placed, less 1 min suspended
  j.restarts = 2;
  j.output_dir = "/out/" + j.name;
  return j;
}

TEST(JobNotice, ANodeEventSaysWhichNodeAndWhatHappenedInFieldsAndInOneLine) {
  const json notice = json::parse(
      NodeEventNotice("gpu7", NodeEvent{12, 1'764'964'800'000, "cordoned by alice: PSU swap"}));
  EXPECT_EQ(notice, json({{"kind", "node_event"},
                          {"node", "gpu7"},
                          {"seq", 12},
                          {"time_ms", 1'764'964'800'000},
                          {"event", "cordoned by alice: PSU swap"},
                          {"text", "node gpu7 cordoned by alice: PSU swap"}}));
}

TEST(JobNotice, SaysWhatBecameOfAJobArrayOrStudyInFieldsAndInOneLine) {
  const std::string pools =
      "worker_pools:\n  - role: chief\n    process: {command: [/bin/train]}\n";
  JobRecord job = Ended("name: train\nlabels: {team: vision}\n" + pools, JobState::FAILED,
                        "worker-1 attempt 2 exited with code 1 (permanent failure)");
  json notice = json::parse(JobEndedNotice(job));
  EXPECT_EQ(notice["kind"], "job_ended");
  EXPECT_EQ(notice["job"], "train");
  EXPECT_EQ(notice["state"], "FAILED");
  EXPECT_EQ(notice["user"], "alice");
  EXPECT_EQ(notice["queue"], "default");
  EXPECT_EQ(notice["labels"], json({{"team", "vision"}}));
  EXPECT_EQ(notice["restarts"], 2);
  EXPECT_EQ(notice["start_time_ms"], 61'000);
  EXPECT_EQ(notice["output_dir"], "/out/train");
  EXPECT_FALSE(notice.contains("array"));
  EXPECT_EQ(notice["text"],
            "job train FAILED after 1h02m, 2 restarts: worker-1 attempt 2 exited with code 1 "
            "(permanent failure)");

  // Started: after 60 s queued; restarted: the incident's event.
  JobRecord running = Ended("name: train\n" + pools, JobState::RUNNING, "all replicas running");
  running.restarts = 0;
  running.events.push_back(JobEventRecord{61'000, "running: its one replica running"});
  notice = json::parse(JobStartedNotice(running, 61'000));
  EXPECT_EQ(notice["kind"], "job_started");
  EXPECT_EQ(notice["waited_ms"], 60'000);
  EXPECT_EQ(notice["text"],
            "job train running: its one replica running, 1m00s after submit (queue default)");
  running.restarts = 1;
  notice = json::parse(JobRestartedNotice(
      running, "restart 1/2: chief-0 as attempt 1 because chief-0 attempt 0 was preempted"));
  EXPECT_EQ(notice["kind"], "job_restarted");
  EXPECT_EQ(notice["restarts"], 1);
  EXPECT_EQ(notice["max_restarts"], 3);  // the default
  EXPECT_EQ(notice["labels"], json::object());
  EXPECT_EQ(notice["text"],
            "job train restart 1/2: chief-0 as attempt 1 because chief-0 attempt 0 was preempted");

  JobRecord never = Ended("name: never\n" + pools, JobState::CANCELLED, "cancelled by bob");
  never.start_time_ms = 0;
  never.restarts = 0;
  never.owner.clear();
  never.message = "cancelled by bob \xff";  // bytes that are not UTF-8 do not stop the notice
  notice = json::parse(JobEndedNotice(never));
  EXPECT_EQ(notice["user"], "unknown");
  EXPECT_EQ(notice["text"], "job never CANCELLED before it started: cancelled by bob \xef\xbf\xbd");

  std::vector<JobRecord> tasks;
  for (int i : {0, 1, 2}) {
    JobSpec array = *ParseJobSpec("name: sweep\n" + pools);
    array.scheduling.array.indexes = {0, 1, 2};
    JobRecord t = Ended(JobSpecToYaml(ArrayTask(array, i)),
                        i == 1 ? JobState::FAILED : JobState::SUCCEEDED, "");
    t.seq = static_cast<uint64_t>(i);
    tasks.push_back(std::move(t));
  }
  notice = json::parse(JobEndedNotice(tasks[2]));
  EXPECT_EQ(notice["array"], "sweep");
  EXPECT_EQ(notice["array_index"], 2);
  std::vector<const JobRecord*> all = {&tasks[0], &tasks[1], &tasks[2]};
  notice = json::parse(ArrayEndedNotice("sweep", all));
  EXPECT_EQ(notice["kind"], "array_ended");
  EXPECT_EQ(notice["name"], "sweep");
  EXPECT_EQ(notice["state"], "FAILED");
  EXPECT_EQ(notice["tasks"], 3);
  EXPECT_EQ(notice["user"], "alice");
  EXPECT_EQ(notice["text"], "array sweep FAILED: 2 SUCCEEDED, 1 FAILED (3 tasks)");
  notice =
      json::parse(ArrayStartedNotice("sweep", all, tasks[0], tasks[0].create_time_ms + 187'000));
  EXPECT_EQ(notice["kind"], "array_started");
  EXPECT_EQ(notice["name"], "sweep");
  EXPECT_EQ(notice["tasks"], 3);
  EXPECT_EQ(notice["user"], "alice");
  EXPECT_EQ(notice["waited_ms"], 187'000);
  EXPECT_EQ(notice["text"],
            "array sweep started: task 0 runs, 3m07s after submit (3 tasks, queue "
            "default)");

  wire::StudyInfoT study;
  study.name = "hp";
  study.state = "FAILED";
  study.metric = "accuracy";
  study.message = "3 trials failed in a row";
  study.owner = "alice";
  for (const char* id : {"1", "2"}) {
    auto t = std::make_unique<wire::TrialInfoT>();
    t->id = id;
    auto kv = std::make_unique<wire::KeyValueT>();
    kv->key = "lr";
    kv->value = id[0] == '1' ? "0.1" : "0.01";
    t->parameters.push_back(std::move(kv));
    t->has_final_metric = id[0] == '2';
    t->final_metric = 0.9731;
    study.trials.push_back(std::move(t));
  }
  notice = json::parse(StudyEndedNotice(study));
  EXPECT_EQ(notice["kind"], "study_ended");
  EXPECT_EQ(notice["best"], nullptr);  // no best_trial named
  EXPECT_EQ(notice["text"], "study hp FAILED: 2 trials: 3 trials failed in a row");
  study.best_trial = "2";
  study.state = "SUCCEEDED";
  notice = json::parse(StudyEndedNotice(study));
  EXPECT_EQ(notice["trials_total"], 2);
  EXPECT_FALSE(notice.contains("trials")) << notice;
  EXPECT_EQ(notice["best"],
            json({{"id", "2"}, {"parameters", {{"lr", "0.01"}}}, {"final_metric", 0.9731}}));
  EXPECT_EQ(notice["user"], "alice");
  EXPECT_EQ(notice["text"],
            "study hp SUCCEEDED: 2 trials, best trial 2 (accuracy 0.9731 with lr=0.01)");
}

// stop() only reaches a server already listening.
void WaitListening(httplib::Server& server) {
  for (int i = 0; i < 5000 && !server.is_running(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// A receiver on loopback: answers each POST with the next status of `statuses` (200 once they
// are spent), and keeps what it was sent.
class Receiver {
 public:
  explicit Receiver(std::vector<int> statuses) : statuses_(std::move(statuses)) {
    server_.Post("/hook", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      res.status = calls_ < statuses_.size() ? statuses_[calls_] : 200;
      ++calls_;
      if (res.status == 200) {
        bodies_.push_back(req.body);
        types_.push_back(req.get_header_value("Content-Type"));
      }
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    WaitListening(server_);
  }
  ~Receiver() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/hook"; }
  std::vector<std::string> bodies() {
    std::lock_guard<std::mutex> lock(mu_);
    return bodies_;
  }
  std::vector<std::string> types() {
    std::lock_guard<std::mutex> lock(mu_);
    return types_;
  }

 private:
  httplib::Server server_;
  std::mutex mu_;
  std::vector<int> statuses_;
  size_t calls_ = 0;
  std::vector<std::string> bodies_, types_;
  int port_ = 0;
  std::thread thread_;
};

template <typename F>
bool WaitFor(F done) {
  for (int i = 0; i < 1000 && !done(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

NotifierOptions To(const std::string& url) {
  NotifierOptions o;
  o.url = *ParseWebhookUrl(url);
  o.timeout_ms = 2'000;
  return o;
}

TEST(Notifier, PostsEachNoticeInOrderAndSendsAgainWhatTheReceiverCouldNotTake) {
  Receiver receiver({503, 400});  // the first send fails, the second is refused: dropped
  auto notifier = std::make_unique<Notifier>(To(receiver.url()));
  notifier->Post({R"({"n":1})", R"({"n":2})", R"({"n":3})"});
  ASSERT_TRUE(WaitFor([&] { return notifier->counters().queued == 0; }));
  EXPECT_EQ(receiver.bodies(), (std::vector<std::string>{R"({"n":2})", R"({"n":3})"}))
      << "{n:1} was sent again after the 503 and refused (400) the second time";
  EXPECT_EQ(receiver.types(), (std::vector<std::string>{"application/json", "application/json"}));
  Notifier::Counters c = notifier->counters();
  EXPECT_EQ(c.delivered, 2u);
  EXPECT_EQ(c.retried, 1u);
  EXPECT_EQ(c.dropped, 1u);
  notifier.reset();
}

// The sender posts without the queue's lock: notices are queued, and counted, while a send hangs.
TEST(Notifier, ASlowReceiverNeverHoldsUpThePoster) {
  std::atomic<bool> entered{false}, release{false};
  httplib::Server server;
  server.Post("/hook", [&](const httplib::Request&, httplib::Response& res) {
    entered = true;
    for (int i = 0; i < 500 && !release; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    res.status = 200;
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&] { server.listen_after_bind(); });
  WaitListening(server);
  NotifierOptions options = To("http://127.0.0.1:" + std::to_string(port) + "/hook");
  options.timeout_ms = 30'000;
  auto notifier = std::make_unique<Notifier>(options);
  notifier->Post({"{}"});
  ASSERT_TRUE(WaitFor([&] { return entered.load(); }));
  for (int i = 0; i < 100; ++i) notifier->Post({"{}"});
  EXPECT_EQ(notifier->counters().queued, 101u);  // the first is still being sent
  EXPECT_EQ(notifier->counters().delivered, 0u);
  release = true;
  ASSERT_TRUE(WaitFor([&] { return notifier->counters().delivered == 101; }));
  notifier.reset();
  server.stop();
  listener.join();
}

// No listener at all: each send fails at once and waits for its retry; a stop then drops what
// waits (after stop_wait_ms at most) rather than wait for the retries.
TEST(Notifier, ADeadReceiversNoticesWaitForTheirRetryAndAStopDropsThem) {
  int port = 0;
  {
    httplib::Server probe;
    port = probe.bind_to_any_port("127.0.0.1");
  }
  NotifierOptions options = To("http://127.0.0.1:" + std::to_string(port) + "/hook");
  options.stop_wait_ms = 200;
  auto notifier = std::make_unique<Notifier>(options);
  for (int i = 0; i < 3; ++i) notifier->Post({"{}"});
  ASSERT_TRUE(WaitFor([&] { return notifier->counters().retried >= 1; }));
  EXPECT_EQ(notifier->counters().queued, 3u);
  EXPECT_EQ(notifier->counters().delivered, 0u);
  notifier.reset();
}

// https: the receiver's certificate must chain to --notify-ca-file (or to the system's CAs, which
// do not know this self-signed one). The certificate is made here with the openssl CLI, for
// 127.0.0.1.
TEST(Notifier, AnHttpsReceiverIsTrustedThroughTheCaFileAlone) {
  const std::string dir = ::testing::TempDir() + "notifier-tls-" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  const std::string make =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      key + " -out " + cert + " >/dev/null 2>&1";
  if (std::system(make.c_str()) != 0) {
    GTEST_SKIP() << "the openssl CLI could not make a certificate (scripts/install-deps.sh "
                    "installs openssl)";
  }
  httplib::SSLServer server(cert.c_str(), key.c_str());
  ASSERT_TRUE(server.is_valid());
  std::mutex mu;
  std::vector<std::string> bodies;
  server.Post("/hook", [&](const httplib::Request& req, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu);
    bodies.push_back(req.body);
    res.status = 204;
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread listener([&] { server.listen_after_bind(); });
  WaitListening(server);
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/hook";

  NotifierOptions untrusted = To(url);
  untrusted.stop_wait_ms = 0;
  auto unknown_ca = std::make_unique<Notifier>(untrusted);
  unknown_ca->Post({R"({"to":"system CAs"})"});
  ASSERT_TRUE(WaitFor([&] { return unknown_ca->counters().retried >= 1; }));
  EXPECT_EQ(unknown_ca->counters().delivered, 0u);
  unknown_ca.reset();

  NotifierOptions trusted = To(url);
  trusted.ca_file = cert;
  auto notifier = std::make_unique<Notifier>(trusted);
  notifier->Post({R"({"to":"ca file"})"});
  ASSERT_TRUE(WaitFor([&] { return notifier->counters().delivered == 1; }));
  notifier.reset();
  {
    std::lock_guard<std::mutex> lock(mu);
    EXPECT_EQ(bodies, (std::vector<std::string>{R"({"to":"ca file"})"}));
  }
  server.stop();
  listener.join();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cohort::coordinator
