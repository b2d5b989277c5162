// PsWorker is the training side of the parameter server (ps-lite's KVWorker shape): Push sends
// gradients for a sorted list of keys, Pull reads their parameters; both return a request id at
// once, and Wait(id) returns the request's Status. The values of a request are the keys' values
// concatenated in key order; each server gets its own contiguous part of that buffer, sent from
// and received into the caller's memory without a copy when large (UCX rendezvous). Small
// requests travel inside the request message: one message per server, however many keys.
//
//   auto ps = PsWorker::FromEnvironment();               // or Create(bootstrap, ...) / Attach
//   (*ps)->InitModel(layout, initial_values, optimizer); // the chief; others pass nullptr
//   for (...) {
//     auto pull = (*ps)->PullAll(params);  (*ps)->Wait(*pull);
//     ... gradient ...
//     auto push = (*ps)->PushAll(grads);   (*ps)->Wait(*push);
//     (*ps)->Clock();                      // one iteration done (bounded staleness)
//   }
//   (*ps)->Shutdown();                     // the chief, when training is over
//
// Consistency is the servers' (ps_server.h): asynchronous by default; with staleness s >= 0 a
// pull waits until the slowest worker is at most s clocks behind, and s = 0 is synchronous.
// Requests of one worker reach each server in the order they were issued.
//
// Environment (FromEnvironment; rendered by the agent): COHORT_BOOTSTRAP_ADDR (the chief, worker
// 0, serves the bootstrap store there), RANK, COHORT_NUM_WORKERS (or WORLD_SIZE), COHORT_PS_ADDRS
// (comma-separated; its length is the number of servers) or COHORT_NUM_PS, COHORT_COMM_TIMEOUT_MS.
//
// Errors: a bad request (unknown key, wrong size or type, a push after shutdown) fails that
// request with the server's message and nothing else. A server or worker that is gone fails the
// request with kUnavailable (or kDeadlineExceeded) and poisons the worker: rebuild it (a new
// generation; the servers keep their state).
// Thread safety: one thread uses a PsWorker. Buffers passed to Push/Pull must stay valid and
// untouched until Wait returns.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "collective/bootstrap.h"
#include "collective/ps/ps_layout.h"
#include "collective/ps/ps_optimizer.h"
#include "collective/ps/ps_protocol.h"
#include "collective/store_bootstrap.h"
#include "collective/transport/transport.h"
#include "common/flight_recorder.h"

namespace cohort::collective::ps {

using RequestId = uint64_t;

struct PsWorkerOptions {
  // Bound on each Wait and on connecting.
  std::chrono::milliseconds timeout{60000};
  // Bootstrap key namespace (UCX only).
  std::string key_prefix = "cohort-ps";
  // Where pushes and pulls are recorded, from Push/Pull to Wait (common/flight_recorder.h;
  // op_seq: the request id); nullptr: FlightRecorder::ForProcess().
  FlightRecorder* flight_recorder = nullptr;
};

class PsWorker {
 public:
  // Over UCX: worker `rank` of `num_workers` and `num_servers` servers find each other through
  // `bootstrap` (worker 0 publishes a new generation). `bootstrap` must outlive the worker.
  static StatusOr<std::unique_ptr<PsWorker>> Create(Bootstrap& bootstrap, int rank, int num_workers,
                                                    int num_servers, PsWorkerOptions options);
  // Over an existing transport (loopback tests, benchmarks): ranks 0..num_workers-1 are workers.
  static StatusOr<std::unique_ptr<PsWorker>> Attach(std::unique_ptr<Transport> transport,
                                                    int num_workers, int num_servers,
                                                    PsWorkerOptions options);
  // From the environment the agent injects (see above). Worker 0 also serves the bootstrap store.
  static StatusOr<std::unique_ptr<PsWorker>> FromEnvironment();
  // Says goodbye to every server (a barrier across workers, bounded by the timeout) and closes.
  ~PsWorker();

  // Registers the model with every server. The chief passes `values` (the whole flattened model)
  // and the optimizer; the servers adopt them unless they already hold the model (restored from
  // a checkpoint or initialized earlier). Other workers pass nullptr and wait until the model
  // exists. Returns the clock the servers resume from (0 on a fresh start); the worker's clock
  // starts there.
  // reset (with values): replace the model the servers hold even if they have one; sound only
  // while no other worker has a request in flight (benchmarks switch models behind a Barrier).
  StatusOr<int64_t> InitModel(const ModelLayout& layout, const void* values,
                              const OptimizerConfig& optimizer, bool reset = false);

  // `keys` strictly increasing; `bytes` = the keys' total size; all keys of `type`.
  StatusOr<RequestId> Push(std::span<const uint64_t> keys, const void* data, size_t bytes,
                           DataType type);
  StatusOr<RequestId> Pull(std::span<const uint64_t> keys, void* data, size_t bytes, DataType type);
  // The whole model (every key; all keys must share one type).
  StatusOr<RequestId> PushAll(const void* data);
  StatusOr<RequestId> PullAll(void* data);
  Status Wait(RequestId id);

  // Ends this worker's iteration on every server (bounded staleness); blocks until they took it.
  Status Clock();
  // Tells every server that training is over: later pushes are refused.
  Status Shutdown();
  // Returns once every worker has called Barrier as often (through every server).
  Status Barrier();

  int rank() const { return transport_->rank(); }
  int num_workers() const { return num_workers_; }
  int num_servers() const { return num_servers_; }
  int64_t clock() const { return clock_; }
  const ModelLayout& layout() const { return layout_; }
  Transport& transport() { return *transport_; }

  // Lower level, for tools and tests: sends one request to server `server` (0-based) with the
  // given header fields and messages, and returns its reply header (values of a pull land in
  // `pull_into`). The header's id is assigned here.
  StatusOr<ReplyHeader> RawRequest(int server, RequestHeader header, std::span<const uint64_t> keys,
                                   ConstBytes payload, MutableBytes pull_into);

 private:
  struct Pending;
  PsWorker() = default;
  StatusOr<RequestId> Issue(PsOp op, std::span<const uint64_t> keys, const void* send, void* recv,
                            size_t bytes, DataType type);
  // Posts one request to one server (header, key list, values, reply receives) into `p`.
  Status Post(Pending* p, int server, RequestHeader h, std::span<const uint64_t> keys,
              ConstBytes payload, MutableBytes pull_into, const std::string* layout);
  Status WaitPending(Pending* p, std::vector<ReplyHeader>* replies);
  Status Broadcast(PsOp op, std::vector<ReplyHeader>* replies);
  uint32_t NextId();

  int num_workers_ = 0;
  int num_servers_ = 0;
  PsWorkerOptions options_;
  ModelLayout layout_;
  std::vector<uint64_t> boundaries_;
  bool all_keys_one_type_ = false;
  std::vector<uint64_t> all_keys_;
  int64_t clock_ = 0;
  uint32_t next_id_ = 1;
  RequestId next_request_ = 1;
  bool poisoned_ = false;
  FlightRecorder* recorder_ = nullptr;  // nullptr: not recording
  uint32_t flight_comm_id_ = 0;
  std::map<RequestId, std::unique_ptr<Pending>> pending_;
  JobBootstrap job_;  // FromEnvironment only: the job's store (served by worker 0) and its client
  std::unique_ptr<Transport> transport_;
};

}  // namespace cohort::collective::ps
