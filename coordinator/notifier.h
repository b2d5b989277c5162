// Job notices (`--notify-url`; Slurm's --mail-type=END, Vertex AI's Pub/Sub notification of a
// job's state): once a job's end is stored, the coordinator POSTs one JSON object to the admin's
// webhook (coordinator/job_notice.h says what it holds), and one more when an array's last task
// ends, or a study does; with --notify-on, also when a job first runs and when it spends a
// restart. A chat webhook (Slack, Mattermost) shows its "text"; anything else can
// route on its fields (user, queue, labels).
//
// NoticeQueue is the delivery rule, a pure state machine: notices go out one at a time, in the
// order their ends were stored. A notice the receiver does not take (no connection, a timeout,
// 408, 429, 5xx) is tried again after 1 s, then 2, 4, ... at most 60 s apart, until it was first
// tried `give_up_ms` ago; one it refuses (any other 4xx: the receiver will not take it however
// often it is sent) is dropped at once, as is the oldest when `capacity` notices wait. Both are
// counted and logged: the job's end itself is in the state store whatever becomes of its notice.
//
// Notifier is the queue's sender: a thread of its own, so a slow or dead receiver never holds up
// the coordinator's loop. Delivery is at least once while the coordinator runs (a notice whose
// reply was lost is sent again); notices still queued when it stops are lost with it (it waits up
// to `stop_wait_ms` for them), as is mail Slurm had not sent.
//
// Thread safety: NoticeQueue none; Notifier's methods may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace cohort::coordinator {

class NoticeQueue {
 public:
  static constexpr int64_t kFirstRetryMs = 1'000;
  static constexpr int64_t kMaxRetryMs = 60'000;

  NoticeQueue(size_t capacity, int64_t give_up_ms) : capacity_(capacity), give_up_ms_(give_up_ms) {}

  // Queues a notice (a JSON body) last; drops the oldest when `capacity` wait already (true then).
  bool Add(std::string body, int64_t now_ms);

  // The notice to send now, or null with `*wait_ms` set to how long until one is due (-1: none
  // queued).
  const std::string* Due(int64_t now_ms, int64_t* wait_ms) const;

  // What became of the send of the notice Due gave.
  enum class Outcome {
    kDelivered,  // 2xx
    kRetry,      // no connection, a timeout, 408, 429, 5xx
    kRefused,    // any other status: dropped
  };
  static Outcome OutcomeOf(int http_status);  // 0: no reply
  // Settles the notice Due gave; true when it was dropped (refused, or tried for give_up_ms).
  bool Settle(Outcome outcome, int64_t now_ms);

  size_t size() const { return queue_.size(); }
  uint64_t delivered() const { return delivered_; }
  uint64_t retried() const { return retried_; }  // sends that failed and will be tried again
  uint64_t dropped() const { return dropped_; }  // refused, given up on, or pushed out when full

 private:
  struct Notice {
    std::string body;
    int64_t first_try_ms = -1;  // -1: not tried yet
    int64_t next_try_ms = 0;
    int64_t backoff_ms = kFirstRetryMs;
  };
  size_t capacity_;
  int64_t give_up_ms_;
  std::deque<Notice> queue_;
  uint64_t delivered_ = 0, retried_ = 0, dropped_ = 0;
};

// Where notices go: http:// or https://, HOST[:PORT], then a path ("/" when none).
struct WebhookUrl {
  std::string origin;  // scheme://host[:port], as httplib::Client takes it
  std::string path;    // with its query, if any
};
// kInvalidArgument naming what is wrong with `text`.
StatusOr<WebhookUrl> ParseWebhookUrl(const std::string& text);

struct NotifierOptions {
  WebhookUrl url;
  // CA certificates (PEM) an https receiver's certificate must chain to; empty: the system's.
  std::string ca_file;
  size_t capacity = 10'000;
  int64_t give_up_ms = 3'600'000;
  int64_t timeout_ms = 10'000;  // a send without a reply by then is tried again
  int64_t stop_wait_ms = 2'000;
};

class Notifier {
 public:
  explicit Notifier(NotifierOptions options);
  ~Notifier();  // waits up to stop_wait_ms for the notices queued, then drops the rest
  Notifier(const Notifier&) = delete;
  Notifier& operator=(const Notifier&) = delete;

  // Queues notices whose ends are stored (JSON bodies), in order.
  void Post(std::vector<std::string> bodies);

  struct Counters {
    uint64_t delivered = 0, retried = 0, dropped = 0;
    size_t queued = 0;
  };
  Counters counters() const;

 private:
  void Run();
  // One POST; the HTTP status, or 0 with no reply.
  int Send(const std::string& body);

  NotifierOptions options_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  NoticeQueue queue_;  // guarded by mu_
  bool stopping_ = false;
  std::string last_error_;  // the sender thread's: why its last send had no reply
  std::thread thread_;
};

}  // namespace cohort::coordinator
