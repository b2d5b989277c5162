// TorchReducer runs one Reduction Server reducer for workers that rendezvous through a c10d Store
// (outside a Cohort job): `python3 -m cohort.torch.reducer --store HOST:PORT` connects a TCPStore
// client to the workers' store and runs one of these. It follows the sessions of the workers'
// default process group (torch_store_bootstrap.h): for each session it reads the shape rank 0
// published, takes its index (a fixed one, or the next free one of that session:
// cohort/<session>/reducer_slots) and serves the session's rounds until the workers leave, then
// waits for the next session.
//
// How it ends is one rule, as cohort-reducer's (collective/reducer.h): with the outcome of the last
// session it served (OK when every worker said it was done; else the error that ended it, a worker
// gone say; a session it sat out, its index past the session's reducers, is not one it served: OK
// where it served none), however the end was noticed afterwards: no new session within `rejoin`, or
// the store gone (rank 0 hosted it and exited; 3 failed polls, 1 s apart, here or by the caller's
// own watch, StoreGone). A Stop (a signal) ends it OK. Before any session it ends with the error
// that kept sessions away (no session within `timeout`, the store gone).
//
// Thread safety: Start, Stop and Join from one thread; the reducer runs on its own thread.
// Errors: status() after Join says how the reducer ended.
#pragma once

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "collective/communicator.h"
#include "collective/reducer.h"
#include "python/torch_backend/torch_store_bootstrap.h"

namespace cohort::torch_backend {

class TorchReducer {
 public:
  // `index` -1: claim one per session. `timeout`: how long to wait for the first session, and
  // each round's and connection's deadline; `rejoin`: how long to wait for the next session once
  // the workers left.
  TorchReducer(c10::intrusive_ptr<c10d::Store> store, int index, std::chrono::milliseconds timeout,
               std::chrono::milliseconds rejoin);
  ~TorchReducer();

  void Start();
  // Asks the reducer to return (it answers within its poll interval); it ends OK.
  void Stop() { stop_.store(true); }
  // Tells the reducer that the workers' store is gone (the caller's own watch of it failed): it
  // ends once the session it serves, if any, has ended, with that session's outcome.
  void StoreGone() { store_gone_.store(true); }
  // Waits up to `timeout` for the reducer to return; true when it has.
  bool Join(std::chrono::milliseconds timeout);
  // How the reducer ended (see the rule above).
  const Status& status() const { return status_; }
  // Sessions served so far (readable after Join).
  int sessions() const { return sessions_; }

 private:
  Status Run();
  // Serves one session: reads its shape, takes an index, runs its rounds; its outcome. nullopt
  // where this reducer sits the session out (its index past the session's reducers): how that
  // session ends is not its to say, so the last one it served still decides its exit.
  std::optional<Status> Serve(const std::string& session);

  TorchStoreBootstrap bootstrap_;
  const int index_;
  const std::chrono::milliseconds timeout_;
  const std::chrono::milliseconds rejoin_;
  collective::CommunicatorOptions comm_options_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> store_gone_{false};
  std::thread thread_;
  std::promise<void> done_;
  std::future<void> done_future_;
  Status status_;
  int sessions_ = 0;
};

}  // namespace cohort::torch_backend
