// TorchStoreBootstrap is the collective library's Bootstrap over a c10d Store: the key-value store
// that torch.distributed hands a backend (a TCPStore at MASTER_ADDR:MASTER_PORT under torchrun or
// init_method="env://", a FileStore, a HashStore). Workers outside a Cohort job find each other
// through it, and reducers started by `python3 -m cohort.torch.reducer` join through a client of
// the same TCPStore.
//
// Contract: as Bootstrap's. Get polls Store::check until the key exists or the deadline passes
// (a blocking Store::wait with a timeout leaves a TCPStore client out of step with its server
// when it expires), then reads it. A store that fails (server gone) turns into kUnavailable after
// a short pause, so callers that retry do not spin.
// Sessions: a c10d store outlives process groups (torchrun's agent store lives across restarts;
// a group re-created under the same name sees its predecessor's keys), so every process group
// starts a session: its rank 0 publishes a fresh session id under the group's own store
// ("cohort/session"), the other ranks take the first id this process has not joined before, and
// the communicator keeps its keys under "cohort/<session>/". With reducers, rank 0 of the default
// group also publishes the session's shape (num_workers, num_reducers) and then points
// "cohort/session" of the store beneath torch's prefixes at it, which reducers follow.
//
// Thread safety: calls are serialised by a mutex (c10d stores differ in what they allow).
// Lifetime: shares ownership of the store.
#pragma once

#include <mutex>
#include <optional>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "collective/bootstrap.h"

namespace cohort::torch_backend {

class TorchStoreBootstrap final : public collective::Bootstrap {
 public:
  explicit TorchStoreBootstrap(c10::intrusive_ptr<c10d::Store> store);
  Status Put(const std::string& key, const std::string& value) override;
  StatusOr<std::string> Get(const std::string& key, collective::Deadline deadline) override;
  // One Store::check, and a get when the key exists.
  StatusOr<std::optional<std::string>> Lookup(const std::string& key,
                                              collective::Deadline deadline) override;
  // Store::add: atomically adds `delta` to the integer at `key` (0 when absent), returns the sum.
  StatusOr<int64_t> Add(const std::string& key, int64_t delta);

 private:
  std::mutex mu_;
  c10::intrusive_ptr<c10d::Store> store_;  // guarded by mu_
};

// "cohort/<session>": the communicator's key prefix in a session.
std::string SessionPrefix(const std::string& session);
// The session pointer's key ("cohort/session").
std::string SessionKey();
// Rank 0: publishes a new session id and returns it; other ranks: waits until `group_store` holds
// one this process has not joined, and returns it. kDeadlineExceeded when rank 0 never does.
StatusOr<std::string> JoinSession(collective::Bootstrap& group_store, int rank,
                                  collective::Deadline deadline);
// Rank 0 of a default group with reducers: the session's shape, then the pointer reducers follow.
Status PublishSession(collective::Bootstrap& store, const std::string& session, int num_workers,
                      int num_reducers);

// The store beneath every PrefixStore around `store`: torch.distributed wraps the store of a
// process group in PrefixStores ("default_pg/0/"); reducers only know the TCPStore itself.
c10::intrusive_ptr<c10d::Store> InnermostStore(c10::intrusive_ptr<c10d::Store> store);

// How reducers find a default group whose store is `store`: "python3 -m cohort.torch.reducer
// --store HOST:PORT" with the TCPStore beneath it (or MASTER_ADDR:MASTER_PORT where it is a store
// of another kind). Under torchrun's c10d rendezvous (TORCHELASTIC_USE_AGENT_STORE=False) that
// store is rank 0's, at a port torchrun picks anew for each attempt, so the text also says that
// reducers which are to follow restarts need torchrun's static rendezvous, whose store is the
// agent's and stays. kInvalidArgument, saying what to use instead, where no reducer can join: a
// FileStore (init_method file://) or a HashStore (one process's memory).
StatusOr<std::string> WhereReducersJoin(const c10::intrusive_ptr<c10d::Store>& store);

}  // namespace cohort::torch_backend
