#include "python/torch_backend/torch_reducer.h"

#include <stdexcept>

#include "python/torch_backend/log_line.h"

namespace cohort::torch_backend {
namespace {

using collective::Deadline;
using collective::SteadyClock;

// After a failed store call the store is polled again this much later; this many failures in a
// row mean the store is gone (rank 0 hosted it and has exited), as reducer.py's watcher judges.
// Each failure costs a line in the log (torch's TCPStore client warns, in 2.x with a backtrace).
constexpr auto kStoreRetry = std::chrono::seconds(1);
constexpr int kStoreFailures = 3;

StatusOr<int> ReadCount(TorchStoreBootstrap& store, const std::string& key, Deadline deadline) {
  COHORT_ASSIGN_OR_RETURN(std::string text, store.Get(key, deadline));
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    return DataLoss(key + " holds '" + text + "', not a count");
  }
}

}  // namespace

TorchReducer::TorchReducer(c10::intrusive_ptr<c10d::Store> store, int index,
                           std::chrono::milliseconds timeout, std::chrono::milliseconds rejoin)
    : bootstrap_(std::move(store)), index_(index), timeout_(timeout), rejoin_(rejoin) {
  if (Status s = collective::CommunicatorOptionsFromEnvironment(&comm_options_); !s.ok()) {
    throw std::runtime_error("cohort reducer: " + s.ToString());
  }
  comm_options_.timeout = timeout;
  done_future_ = done_.get_future();
}

TorchReducer::~TorchReducer() {
  Stop();
  if (thread_.joinable()) thread_.join();
}

void TorchReducer::Start() {
  thread_ = std::thread([this] {
    status_ = Run();
    done_.set_value();
  });
}

bool TorchReducer::Join(std::chrono::milliseconds timeout) {
  if (!thread_.joinable()) return true;
  if (done_future_.wait_for(timeout) != std::future_status::ready) return false;
  thread_.join();
  return true;
}

Status TorchReducer::Run() {
  std::string last;
  Status ended = Status::Ok();
  while (!stop_.load()) {
    // The first session may take as long as the workers take to start; later ones `rejoin`.
    const Deadline deadline =
        SteadyClock::now() + (last.empty() ? std::max(timeout_, rejoin_) : rejoin_);
    std::string session;
    int failures = 0;
    Status store_error;
    while (!stop_.load() && SteadyClock::now() < deadline) {
      if (store_gone_.load()) {
        store_error = Unavailable("the caller's watch of the store failed");
        break;
      }
      auto s = bootstrap_.Get(
          SessionKey(), std::min(deadline, SteadyClock::now() + std::chrono::milliseconds(200)));
      if (s.ok() && *s != last) {
        session = *s;
        break;
      }
      if (s.ok() || s.status().code() != StatusCode::kUnavailable) {  // none new yet
        failures = 0;
        if (s.ok()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      if (++failures >= kStoreFailures) {
        store_error = s.status();
        break;
      }
      const Deadline retry = std::min(deadline, SteadyClock::now() + kStoreRetry);
      while (!stop_.load() && SteadyClock::now() < retry)
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (stop_.load()) return Status::Ok();
    if (!store_error.ok()) {
      if (last.empty()) {
        return store_error.WithContext(
            "the store went away before any workers published a session");
      }
      // The store's end is the workers' end: the last session's outcome is how they ended.
      LogInfo("cohort reducer: the store is gone (" + store_error.message() + "); exiting");
      return ended;
    }
    if (session.empty()) {
      if (last.empty()) {
        return DeadlineExceeded("no workers published a session (" + SessionKey() + ") within " +
                                collective::FormatDuration(std::max(timeout_, rejoin_)) +
                                ": their default process group needs COHORT_NUM_REDUCERS > 0");
      }
      LogInfo("cohort reducer: no new session within " + collective::FormatDuration(rejoin_) +
              "; exiting");
      return ended;
    }
    last = session;
    std::optional<Status> served = Serve(session);
    if (!served) continue;
    ended = std::move(*served);
    if (!ended.ok()) {
      ended = ended.WithContext("session " + session);
      LogWarn("cohort reducer: " + ended.ToString());
    }
  }
  return Status::Ok();
}

std::optional<Status> TorchReducer::Serve(const std::string& session) {
  const std::string prefix = SessionPrefix(session);
  const Deadline deadline = collective::DeadlineAfter(timeout_);
  COHORT_ASSIGN_OR_RETURN(int num_workers,
                          ReadCount(bootstrap_, prefix + "/num_workers", deadline));
  COHORT_ASSIGN_OR_RETURN(int num_reducers,
                          ReadCount(bootstrap_, prefix + "/num_reducers", deadline));
  int index = index_;
  if (index < 0) {
    COHORT_ASSIGN_OR_RETURN(int64_t slot, bootstrap_.Add(prefix + "/reducer_slots", 1));
    index = static_cast<int>(slot - 1);
  }
  if (index >= num_reducers) {
    LogInfo("cohort reducer: session " + session + " needs " + std::to_string(num_reducers) +
            " reducers; index " + std::to_string(index) + " sits it out");
    return std::nullopt;
  }
  LogInfo("cohort reducer: session " + session + ": reducer " + std::to_string(index) + " of " +
          std::to_string(num_reducers) + " for " + std::to_string(num_workers) + " workers");
  collective::ReducerOptions options;
  options.comm = comm_options_;
  options.comm.key_prefix = prefix;
  options.rejoin_timeout = std::chrono::milliseconds(0);  // a session has one generation
  options.max_generations = 1;
  ++sessions_;
  return collective::RunReducer(bootstrap_, num_workers, num_reducers, index, options, stop_);
}

}  // namespace cohort::torch_backend
