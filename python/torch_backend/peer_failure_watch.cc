#include "python/torch_backend/peer_failure_watch.h"

#include <charconv>
#include <utility>

#include "python/torch_backend/log_line.h"

namespace cohort::torch_backend {

PeerFailureWatch::PeerFailureWatch(std::shared_ptr<collective::Bootstrap> store, std::string key,
                                   int rank, Timing timing, OnRemote on_remote)
    : store_(std::move(store)),
      key_(std::move(key)),
      rank_(rank),
      timing_(timing),
      on_remote_(std::move(on_remote)),
      thread_([this] { Run(); }) {}

PeerFailureWatch::~PeerFailureWatch() { Close(); }

void PeerFailureWatch::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  std::lock_guard<std::mutex> closing(close_mu_);  // one Close joins; a later one finds it done
  if (thread_.joinable()) thread_.join();
}

std::string PeerFailureWatch::Encode(int rank, const std::string& why) {
  return std::to_string(rank) + "\n" + why;
}

bool PeerFailureWatch::Decode(const std::string& value, int* rank, std::string* why) {
  const size_t newline = value.find('\n');
  if (newline == std::string::npos) return false;
  const char* end = value.data() + newline;
  const auto [stop, error] = std::from_chars(value.data(), end, *rank);
  if (error != std::errc() || stop != end || *rank < 0) return false;
  *why = value.substr(newline + 1);
  return true;
}

void PeerFailureWatch::Publish(const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    pending_ = Encode(rank_, why);
  }
  cv_.notify_all();
}

void PeerFailureWatch::Started(const void* op, Clock::time_point deadline) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_[op] = InFlight{Clock::now(), deadline};
}

void PeerFailureWatch::Ended(const void* op) {
  std::lock_guard<std::mutex> lock(mu_);
  in_flight_.erase(op);
}

bool PeerFailureWatch::WorthALookLocked(Clock::time_point now) const {
  for (const auto& [op, f] : in_flight_) {
    if (now - f.started >= timing_.patience && f.deadline - now > timing_.margin) return true;
  }
  return false;
}

void PeerFailureWatch::Run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    cv_.wait_for(lock, timing_.interval, [&] { return stop_ || !pending_.empty(); });
    if (!pending_.empty()) {
      const std::string value = std::exchange(pending_, std::string());
      lock.unlock();
      if (Status s = store_->Put(key_, value); !s.ok()) {
        LogWarn("cohort: rank " + std::to_string(rank_) +
                ": could not tell the other ranks that it gave up: " + s.ToString());
      }
      lock.lock();
      continue;
    }
    if (stop_) return;
    const auto now = Clock::now();
    if (fired_ || !WorthALookLocked(now)) continue;
    lock.unlock();
    StatusOr<std::optional<std::string>> value = store_->Lookup(key_, now + timing_.interval);
    int rank = -1;
    std::string why;
    const bool news =
        value.ok() && value->has_value() && Decode(**value, &rank, &why) && rank != rank_;
    lock.lock();
    if (!news || stop_ || fired_) continue;
    fired_ = true;
    lock.unlock();
    on_remote_(rank, why);
    lock.lock();
  }
}

}  // namespace cohort::torch_backend
