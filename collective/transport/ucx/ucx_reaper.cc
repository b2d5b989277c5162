#include "collective/transport/ucx/ucx_reaper.h"

#include <poll.h>
#include <pthread.h>

#include <cstdlib>
#include <mutex>
#include <thread>
#include <utility>

#include "collective/transport/transport.h"
#include "common/logging.h"

namespace cohort::collective {
namespace {

// Longest sleep on the held workers' event fds between two progress rounds.
constexpr int kReaperNapMs = 100;

struct Held {
  ucp_context_h context;
  ucp_worker_h worker;
  int efd;
  std::vector<void*> closes;  // pending close requests
  SteadyClock::time_point deadline;
};

struct Reaper {
  std::mutex mu;
  std::vector<Held> held;  // guarded by mu
  // The thread progressing `held`, while `running`. A forked child drops the pointer without
  // touching the object (the thread does not exist there).
  std::thread* thread = nullptr;  // guarded by mu
  bool running = false;           // guarded by mu
  int64_t completed = 0;          // guarded by mu
  int64_t forced = 0;             // guarded by mu
};

// Never destroyed: the exit handler and the fork handlers may run after static destructors.
Reaper& State() {
  static Reaper* reaper = new Reaper;
  return *reaper;
}

void Destroy(Held& h) {
  // A request freed while pending goes back to the worker's pool if it ever completes; the pool
  // goes with the worker either way.
  for (void* req : h.closes) ucp_request_free(req);
  h.closes.clear();
  ucp_worker_destroy(h.worker);
  ucp_cleanup(h.context);
}

// With mu held: progresses h's worker and frees its completed closes; true when none is left.
bool ProgressLocked(Held& h) {
  while (ucp_worker_progress(h.worker) != 0) {
  }
  std::erase_if(h.closes, [](void* req) {
    if (ucp_request_check_status(req) == UCS_INPROGRESS) return false;
    ucp_request_free(req);
    return true;
  });
  return h.closes.empty();
}

// With mu held: destroys everything held, its closes still pending.
void DestroyAllLocked(Reaper& r) {
  for (Held& h : r.held) {
    Destroy(h);
    ++r.forced;
  }
  r.held.clear();
}

void Loop() {
  Reaper& r = State();
  while (true) {
    std::vector<pollfd> fds;
    bool busy = false;
    {
      std::lock_guard<std::mutex> lock(r.mu);
      const auto now = SteadyClock::now();
      for (auto it = r.held.begin(); it != r.held.end();) {
        const bool done = ProgressLocked(*it);
        if (!done && now < it->deadline) {
          ++it;
          continue;
        }
        if (!done) {
          spdlog::warn(
              "ucx: a peer did not take in this side's last data within {}s; closing its "
              "endpoint by force",
              std::chrono::duration_cast<std::chrono::seconds>(kReaperLimit).count());
        }
        Destroy(*it);
        ++(done ? r.completed : r.forced);
        it = r.held.erase(it);
      }
      if (r.held.empty()) {
        r.running = false;
        return;
      }
      for (Held& h : r.held) {
        if (ucp_worker_arm(h.worker) == UCS_OK) {
          fds.push_back(pollfd{h.efd, POLLIN, 0});
        } else {
          busy = true;  // events pending: progress again at once
        }
      }
    }
    if (!busy) ::poll(fds.data(), fds.size(), kReaperNapMs);
  }
}

// pthread_atfork: the child must inherit no UCX worker or context (see the header), so whatever
// is held is destroyed before the fork; the parent's thread then finds nothing and ends.
void BeforeFork() {
  Reaper& r = State();
  r.mu.lock();
  DestroyAllLocked(r);
}
void AfterForkInParent() { State().mu.unlock(); }
void AfterForkInChild() {
  Reaper& r = State();
  r.thread = nullptr;  // the parent's thread; it does not exist here
  r.running = false;
  r.mu.unlock();
}

void AtExit() {
  Reaper& r = State();
  std::thread* thread = nullptr;
  {
    std::lock_guard<std::mutex> lock(r.mu);
    DestroyAllLocked(r);
    std::swap(thread, r.thread);
  }
  if (thread != nullptr) {
    thread->join();
    delete thread;
  }
}

}  // namespace

void ReapUcxWorker(ucp_context_h context, ucp_worker_h worker, std::vector<void*> closes) {
  static std::once_flag registered;
  std::call_once(registered, [] {
    pthread_atfork(&BeforeFork, &AfterForkInParent, &AfterForkInChild);
    std::atexit(&AtExit);
  });
  int efd = -1;
  (void)ucp_worker_get_efd(worker, &efd);
  Reaper& r = State();
  std::lock_guard<std::mutex> lock(r.mu);
  r.held.push_back(
      Held{context, worker, efd, std::move(closes), SteadyClock::now() + kReaperLimit});
  if (r.running) return;
  if (r.thread != nullptr) {
    r.thread->join();  // it has ended (running is false) or is about to
    delete r.thread;
  }
  r.thread = new std::thread(&Loop);
  r.running = true;
}

UcxReaperCounts GetUcxReaperCounts() {
  Reaper& r = State();
  std::lock_guard<std::mutex> lock(r.mu);
  return UcxReaperCounts{static_cast<int>(r.held.size()), r.completed, r.forced};
}

}  // namespace cohort::collective
