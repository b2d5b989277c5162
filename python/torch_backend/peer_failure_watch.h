// PeerFailureWatch tells the ranks of one process group, through the group's store, that one of
// them gave up, so that a rank left waiting for a peer that will make no more calls (in a ring,
// the neighbour of a rank that failed) learns it before its own timeout, and learns why.
//
// - Publish(why): this rank gave up. Its reason is written under the watch's key, on the watch's
//   own thread (a store that is gone holds up nobody), also when the watch is being destroyed.
//   Later reasons (of this rank or another) overwrite it: any one of them is the news.
// - Started(op, deadline) / Ended(op): the operations in flight. While one of them has run for
//   `patience` and its deadline is more than `margin` away, the watch reads the key every
//   `interval`; when it holds another rank's reason, on_remote(rank, why) runs, once, on the
//   watch's thread. An operation that ends sooner, or is about to fail by its own deadline, never
//   costs a store access: in a healthy group the store is not touched.
//
// Thread safety: every method from any thread. Lifetime: Close (and the destructor) writes a
// pending reason, then stops the thread; a store call in progress ends by its own deadline.
// on_remote may run until Close returns; after it, the other methods do nothing.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "collective/bootstrap.h"

namespace cohort::torch_backend {

class PeerFailureWatch {
 public:
  using Clock = std::chrono::steady_clock;
  using OnRemote = std::function<void(int rank, const std::string& why)>;
  struct Timing {
    std::chrono::milliseconds interval{1000};
    std::chrono::milliseconds patience{5000};
    std::chrono::milliseconds margin{2000};
  };

  // `store` must be safe to use from the watch's thread while others use it.
  PeerFailureWatch(std::shared_ptr<collective::Bootstrap> store, std::string key, int rank,
                   Timing timing, OnRemote on_remote);
  ~PeerFailureWatch();
  PeerFailureWatch(const PeerFailureWatch&) = delete;
  PeerFailureWatch& operator=(const PeerFailureWatch&) = delete;

  void Close();
  void Publish(const std::string& why);
  void Started(const void* op, Clock::time_point deadline);
  void Ended(const void* op);

  // The key's value for `rank` and `why`, and back (false when `value` is not one).
  static std::string Encode(int rank, const std::string& why);
  static bool Decode(const std::string& value, int* rank, std::string* why);

 private:
  struct InFlight {
    Clock::time_point started;
    Clock::time_point deadline;
  };
  void Run();
  // An operation has waited `patience` and has more than `margin` left. Caller holds mu_.
  bool WorthALookLocked(Clock::time_point now) const;

  const std::shared_ptr<collective::Bootstrap> store_;
  const std::string key_;
  const int rank_;
  const Timing timing_;
  const OnRemote on_remote_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<const void*, InFlight> in_flight_;  // guarded by mu_
  std::string pending_;                        // guarded by mu_: a reason not yet written
  bool stop_ = false;                          // guarded by mu_
  bool fired_ = false;                         // guarded by mu_: on_remote ran
  std::mutex close_mu_;                        // Close's join
  std::thread thread_;
};

}  // namespace cohort::torch_backend
