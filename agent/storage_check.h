// StorageCheck is the agent's side of the storage check (common/storage_marker.h): it reads the
// coordinator's marker under the output root every `every`, in a thread of its own so that a hung
// mount never stalls the agent's loop, and says what it last found (Report), which the agent
// sends with its registration and every heartbeat. The root is the one the coordinator names in
// its RegisterAgentReply, unless the agent was given its own (--output-root); the coordinator
// counts a node as sharing only when it read the marker at the coordinator's own path.
//
// A read that has not returned after `hung_after` is reported as a hung mount (the reading thread
// stays blocked in it; Report says so until it returns).
//
// Thread safety: every method may be called from any thread. Lifetime: the destructor stops the
// reader without waiting for a read stuck in a hung mount (that thread ends on its own).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "common/schema/cohort_generated.h"

namespace cohort::agent {

class StorageCheck {
 public:
  // `own_root`: the root to read instead of the coordinator's (empty: the coordinator's).
  StorageCheck(std::string own_root, std::chrono::milliseconds every,
               std::chrono::milliseconds hung_after);
  ~StorageCheck();
  StorageCheck(const StorageCheck&) = delete;
  StorageCheck& operator=(const StorageCheck&) = delete;

  // The coordinator's output root (empty: it has none). A new root is read at once.
  void SetCoordinatorRoot(const std::string& root);
  // What the latest read found; nullopt while there is no root to read or before the first read
  // of it ended (unless that read hangs).
  std::optional<wire::StorageReportT> Report() const;

 private:
  struct Shared;
  static void ReadLoop(std::shared_ptr<Shared> s);
  std::shared_ptr<Shared> shared_;
};

}  // namespace cohort::agent
