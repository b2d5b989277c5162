// Bootstrap is how the ranks of a communicator find each other: a key-value rendezvous where each
// rank publishes its transport address and reads its peers'. Collective never knows who serves it
// (gloo's Store, UCC's OOB callbacks): tests use InMemoryBootstrap, processes use StoreBootstrap
// (store_bootstrap.h), and other hosts may implement it over their own channels.
//
// Contract: Put never blocks for long; Get blocks until the key exists or the deadline passes
// (kDeadlineExceeded naming the key), so ranks may start in any order; Lookup answers whether a
// key exists now without waiting for it. Values are opaque bytes.
// Thread safety: implementations are thread-safe.
#pragma once

#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <string>

#include "collective/transport/transport.h"
#include "common/status.h"

namespace cohort::collective {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  virtual Status Put(const std::string& key, const std::string& value) = 0;
  virtual StatusOr<std::string> Get(const std::string& key, Deadline deadline) = 0;
  // The value of `key`, or nullopt when the store says it is missing; waits only for the store's
  // answer, until `deadline` (then kDeadlineExceeded). The default asks Get with a deadline of
  // now, which suits stores that look once before giving up.
  virtual StatusOr<std::optional<std::string>> Lookup(const std::string& key, Deadline deadline);
};

// A map in memory shared by threads: for tests and in-process benchmarks.
class InMemoryBootstrap final : public Bootstrap {
 public:
  Status Put(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key, Deadline deadline) override;
  StatusOr<std::optional<std::string>> Lookup(const std::string& key, Deadline deadline) override;

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::string> values_;  // guarded by mu_
};

// Renders a deadline overshoot for messages: "60s", "1.5s", "250ms".
std::string FormatDuration(std::chrono::milliseconds d);

}  // namespace cohort::collective
