#include "agent/runtime_commands.h"

#include "common/logging.h"

namespace cohort::agent {

bool RuntimeSaysGone(const std::string& output) {
  for (const char* gone : {"not exist", "No such", "not running", "no such"}) {
    if (output.find(gone) != std::string::npos) return true;
  }
  return false;
}

bool RuntimeCommands::Enqueue(const std::string& lane_name, std::vector<std::string> argv,
                              Done done, bool coalesce) {
  std::lock_guard<std::mutex> lock(mu_);
  if (closed_) return false;
  // Lanes with nothing to do are forgotten; their threads have ended (or are returning: the
  // joins below wait for no command).
  for (auto it = lanes_.begin(); it != lanes_.end();) {
    if (it->first != lane_name && !it->second.busy && it->second.jobs.empty()) {
      if (it->second.thread.joinable()) it->second.thread.join();
      it = lanes_.erase(it);
    } else {
      ++it;
    }
  }
  Lane& lane = lanes_[lane_name];
  for (const Job& job : lane.jobs) {
    if (coalesce && job.argv == argv) return false;
  }
  lane.jobs.push_back(Job{std::move(argv), std::move(done)});
  if (!lane.busy) {
    if (lane.thread.joinable()) lane.thread.join();
    lane.busy = true;
    lane.thread = std::thread(&RuntimeCommands::RunLane, this, lane_name);
  }
  return true;
}

void RuntimeCommands::RunLane(const std::string& name) {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    Lane& lane = lanes_[name];  // not erased while busy
    if (lane.jobs.empty()) {
      lane.busy = false;
      break;
    }
    Job job = std::move(lane.jobs.front());
    lane.jobs.pop_front();
    CapturedCommand result;
    if (cancel_) {
      result.cancelled = true;
      result.output = "not run: the agent is shutting down";
    } else {
      ++running_;
      lock.unlock();
      CaptureOptions options;
      options.timeout = timeout_;
      options.hidden_from_reaper = true;  // the agent loop reaps every child
      options.cancel = &cancel_;
      result = RunCaptured(job.argv, options);
      lock.lock();
      --running_;
    }
    lock.unlock();
    if (job.done) job.done(result);
    lock.lock();
  }
  lock.unlock();
  idle_.notify_all();
}

void RuntimeCommands::Shutdown(std::chrono::milliseconds drain) {
  std::unique_lock<std::mutex> lock(mu_);
  closed_ = true;
  auto idle = [this] {
    for (const auto& [name, lane] : lanes_) {
      if (lane.busy) return false;
    }
    return true;
  };
  if (!idle_.wait_for(lock, drain, idle)) {
    size_t queued = 0;
    for (const auto& [name, lane] : lanes_) queued += lane.jobs.size();
    spdlog::warn(
        "container runtime: {} command(s) still running and {} queued after {} ms of shutdown: "
        "killing and dropping them",
        running_, queued, drain.count());
    cancel_ = true;
  }
  std::vector<std::thread> threads;
  for (auto& [name, lane] : lanes_) {
    if (lane.thread.joinable()) threads.push_back(std::move(lane.thread));
  }
  lock.unlock();
  for (auto& thread : threads) thread.join();
  lock.lock();
  lanes_.clear();
}

size_t RuntimeCommands::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  size_t pending = running_;
  for (const auto& [name, lane] : lanes_) pending += lane.jobs.size();
  return pending;
}

}  // namespace cohort::agent
