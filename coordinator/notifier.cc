#include "coordinator/notifier.h"

#include <httplib.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <utility>

#include "common/rate_limited_log.h"
#include "common/version.h"

namespace cohort::coordinator {

bool NoticeQueue::Add(std::string body, int64_t now_ms) {
  bool pushed_out = false;
  if (queue_.size() >= capacity_ && !queue_.empty()) {
    queue_.pop_front();
    ++dropped_;
    pushed_out = true;
  }
  queue_.push_back(Notice{std::move(body), -1, now_ms, kFirstRetryMs});
  return pushed_out;
}

const std::string* NoticeQueue::Due(int64_t now_ms, int64_t* wait_ms) const {
  if (queue_.empty()) {
    *wait_ms = -1;
    return nullptr;
  }
  const Notice& head = queue_.front();
  if (head.next_try_ms > now_ms) {
    *wait_ms = head.next_try_ms - now_ms;
    return nullptr;
  }
  *wait_ms = 0;
  return &head.body;
}

NoticeQueue::Outcome NoticeQueue::OutcomeOf(int http_status) {
  if (http_status >= 200 && http_status < 300) return Outcome::kDelivered;
  if (http_status == 0 || http_status == 408 || http_status == 429 || http_status >= 500) {
    return Outcome::kRetry;
  }
  return Outcome::kRefused;
}

bool NoticeQueue::Settle(Outcome outcome, int64_t now_ms) {
  if (queue_.empty()) return false;
  Notice& head = queue_.front();
  if (head.first_try_ms < 0) head.first_try_ms = now_ms;
  switch (outcome) {
    case Outcome::kDelivered:
      ++delivered_;
      queue_.pop_front();
      return false;
    case Outcome::kRetry:
      if (now_ms - head.first_try_ms < give_up_ms_) {
        ++retried_;
        head.next_try_ms = now_ms + head.backoff_ms;
        head.backoff_ms = std::min(head.backoff_ms * 2, kMaxRetryMs);
        return false;
      }
      break;
    case Outcome::kRefused:
      break;
  }
  ++dropped_;
  queue_.pop_front();
  return true;
}

StatusOr<WebhookUrl> ParseWebhookUrl(const std::string& text) {
  const size_t scheme_end = text.find("://");
  const std::string scheme = scheme_end == std::string::npos ? "" : text.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("'" + text + "' is not an http:// or https:// URL");
  }
  const size_t host_start = scheme_end + 3;
  const size_t path_start = text.find_first_of("/?#", host_start);
  const std::string authority = text.substr(host_start, path_start - host_start);
  if (authority.empty() || authority.front() == ':') {
    return InvalidArgument("'" + text + "' names no host");
  }
  if (authority.find('@') != std::string::npos) {
    return InvalidArgument("'" + text + "': user information in the URL is not supported");
  }
  if (text.find('#', host_start) != std::string::npos) {
    return InvalidArgument("'" + text + "': a fragment (#...) is never sent; leave it out");
  }
  if (const size_t colon = authority.rfind(':');
      colon != std::string::npos && authority.back() != ']') {
    const std::string port = authority.substr(colon + 1);
    if (port.empty() || port.size() > 5 ||
        !std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        std::stoi(port) < 1 || std::stoi(port) > 65535) {
      return InvalidArgument("'" + text + "': '" + port + "' is not a port (1-65535)");
    }
  }
  WebhookUrl url;
  url.origin = scheme + "://" + authority;
  url.path = path_start == std::string::npos ? "/" : text.substr(path_start);
  if (url.path.front() == '?') url.path = "/" + url.path;
  return url;
}

namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// A notice in a log line: its start, enough to tell which job it was.
std::string Excerpt(const std::string& body) {
  return body.size() <= 160 ? body : body.substr(0, 160) + "...";
}

}  // namespace

Notifier::Notifier(NotifierOptions options)
    : options_(std::move(options)), queue_(options_.capacity, options_.give_up_ms) {
  thread_ = std::thread([this] { Run(); });
}

Notifier::~Notifier() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Notices already due go out while the wait lasts; one waiting for a retry is not tried again.
    const int64_t until = SteadyMs() + options_.stop_wait_ms;
    int64_t wait_ms = 0;
    while (queue_.size() > 0 && SteadyMs() < until) {
      if (queue_.Due(SteadyMs(), &wait_ms) == nullptr && wait_ms > 0) break;
      wake_.wait_for(lock, std::chrono::milliseconds(50));
    }
    stopping_ = true;
    if (queue_.size() > 0) {
      spdlog::warn("notify: {} notice(s) not delivered to {} before the coordinator stopped",
                   queue_.size(), options_.url.origin);
    }
  }
  wake_.notify_all();
  thread_.join();
}

void Notifier::Post(std::vector<std::string> bodies) {
  if (bodies.empty()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const int64_t now = SteadyMs();
    for (std::string& body : bodies) {
      if (queue_.Add(std::move(body), now)) {
        spdlog::warn("notify: {} notices wait for {}; the oldest was dropped", options_.capacity,
                     options_.url.origin);
      }
    }
  }
  wake_.notify_all();
}

Notifier::Counters Notifier::counters() const {
  std::lock_guard<std::mutex> lock(mu_);
  return Counters{queue_.delivered(), queue_.retried(), queue_.dropped(), queue_.size()};
}

int Notifier::Send(const std::string& body) {
  httplib::Client client(options_.url.origin);
  const auto timeout = std::chrono::milliseconds(options_.timeout_ms);
  client.set_connection_timeout(timeout);
  client.set_read_timeout(timeout);
  client.set_write_timeout(timeout);
  if (!options_.ca_file.empty()) client.set_ca_cert_path(options_.ca_file.c_str());
  client.enable_server_certificate_verification(true);
  httplib::Headers headers = {{"User-Agent", "cohort-coordinator/" COHORT_VERSION}};
  auto reply = client.Post(options_.url.path.c_str(), headers, body, "application/json");
  if (!reply) {
    last_error_ = httplib::to_string(reply.error());
    return 0;
  }
  return reply->status;
}

void Notifier::Run() {
  RateLimitedLog failures(spdlog::level::warn, "failed notices", 5, std::chrono::minutes(1));
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    int64_t wait_ms = 0;
    const std::string* due = queue_.Due(SteadyMs(), &wait_ms);
    if (due == nullptr) {
      if (wait_ms < 0) {
        wake_.wait(lock);
      } else {
        wake_.wait_for(lock, std::chrono::milliseconds(wait_ms));
      }
      continue;
    }
    const std::string body = *due;  // Post may grow the queue while the lock is let go
    lock.unlock();
    const int status = Send(body);
    lock.lock();
    const NoticeQueue::Outcome outcome = NoticeQueue::OutcomeOf(status);
    const std::string why =
        status == 0 ? "no reply (" + last_error_ + ")" : "HTTP " + std::to_string(status);
    if (queue_.Settle(outcome, SteadyMs())) {
      spdlog::warn("notify: a notice was dropped, {} {}: {}", options_.url.origin, why,
                   Excerpt(body));
    } else if (outcome == NoticeQueue::Outcome::kRetry) {
      failures.Log("notify: {} answered {}; the notice is tried again", options_.url.origin, why);
    }
    wake_.notify_all();  // a stop may wait for the queue to empty
  }
}

}  // namespace cohort::coordinator
