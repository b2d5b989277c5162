// TestHook: a process-wide test seam that production code calls at one point (e.g. just before
// it touches the job's output storage), so that a test can hold that thread there, standing in
// for a hung mount. Unset (the default, and always outside tests) it does nothing.
//
// Thread safety: Set and Run may be called from any thread; Run calls the hook outside the lock,
// so a hook may block for as long as the test wants while Set goes on working.
#pragma once

#include <functional>
#include <mutex>
#include <utility>

namespace cohort::agent {

template <typename Arg>
class TestHook {
 public:
  using Hook = std::function<void(const Arg&)>;

  void Set(Hook hook) {
    std::lock_guard<std::mutex> lock(mu_);
    hook_ = std::move(hook);
  }
  void Run(const Arg& arg) const {
    Hook hook;
    {
      std::lock_guard<std::mutex> lock(mu_);
      hook = hook_;
    }
    if (hook) hook(arg);
  }

 private:
  mutable std::mutex mu_;
  Hook hook_;
};

}  // namespace cohort::agent
