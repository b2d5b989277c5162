// ScopedEnv: sets (or unsets) an environment variable for one test and restores what it was when
// the scope ends, also when an assertion returns early. Not thread-safe: the environment is the
// process's.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace cohort::testing {

class ScopedEnv {
 public:
  // `value`: what the variable holds in the scope; nullopt: unset there.
  ScopedEnv(const char* name, std::optional<std::string> value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) {
      setenv(name, value->c_str(), 1);
    } else {
      unsetenv(name);
    }
  }
  ~ScopedEnv() {
    if (old_) {
      setenv(name_, old_->c_str(), 1);
    } else {
      unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

}  // namespace cohort::testing
