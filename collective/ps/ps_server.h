// PsServer holds one shard of a model for the parameter server (DESIGN.md "Collective",
// Parameter server): the key ranges ps_layout.h assigns to server `server_index`, their optimizer
// state, and the workers' clocks. Workers push gradients and pull parameters with PsWorker
// (ps_worker.h) over the protocol of ps_protocol.h.
//
// Serving: Serve() runs one thread per worker for one transport generation; each thread takes
// that worker's requests in order and answers every one. Updates of one key part happen under
// that part's mutex, so each key's update is atomic and concurrent pushes lose nothing.
//   - Asynchronous (staleness < 0): a push is applied at once as its own optimizer update
//     (gradient times rescale, default 1/num_workers); a pull returns the current values.
//   - Bounded staleness s >= 0 (SSP): the pushes a worker makes during its clock c are summed
//     per key; once every worker has finished clock c (kClock), the sum is applied as one update.
//     A pull by a worker at clock c waits until every worker has finished clock c - s, so it sees
//     every update of clocks < c - s. s = 0 is synchronous and equals a single-process optimizer
//     on the mean gradient (up to the order of the float sum).
// Bad requests (unknown key, wrong size or type, a push before init or after shutdown) get an
// error reply naming the problem; the server goes on serving. Transport errors end the
// generation (the workers rebuild and the server joins the next one, keeping its state).
//
// Checkpoints (common/checkpoint.h): every `checkpoint_every` steps (SSP: applied clocks; async:
// pushes / num_workers) the shard is written as checkpoint `step` under checkpoint_dir: files
// "meta" (layout, optimizer, clocks) and "shard" (values and optimizer state). Restore() reads
// the newest valid one, so a restarted server resumes from its last checkpoint; updates after
// it are lost, and workers learn the restored clock from InitModel's reply.
//
// Thread safety: Serve is called by one thread at a time; stats() and Snapshot() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "collective/bootstrap.h"
#include "collective/ps/ps_layout.h"
#include "collective/ps/ps_optimizer.h"
#include "collective/ps/ps_protocol.h"
#include "collective/transport/transport.h"

namespace cohort::collective::ps {

struct PsServerOptions {
  int num_workers = 1;
  int num_servers = 1;
  int server_index = 0;
  // When set, used instead of the optimizer the chief's InitModel carries (cohort-ps flags).
  std::optional<OptimizerConfig> optimizer_override;
  std::string checkpoint_dir;     // empty: no checkpoints
  int64_t checkpoint_every = 0;   // steps between checkpoints; 0: none
  int keep_checkpoints = 3;
  // Bound on each wait inside a request: a pushed payload, an SSP read, an init waiting for the
  // chief.
  std::chrono::milliseconds timeout{60000};
  // How often idle threads check `stop`.
  std::chrono::milliseconds poll_interval{100};
};

struct PsServerStats {
  uint64_t pushes = 0;
  uint64_t pulls = 0;
  uint64_t clocks = 0;
  uint64_t errors = 0;          // requests answered with an error
  uint64_t bytes_pushed = 0;
  uint64_t bytes_pulled = 0;
  uint64_t checkpoints = 0;
  int64_t applied_clock = 0;    // SSP: every clock below this is applied
  int64_t step = 0;             // checkpoint step (see above)
  int64_t max_read_gap = 0;     // SSP: largest (reader's clock - slowest worker's clock) at a served pull
  int64_t restored_step = -1;   // step of the checkpoint restored at start, else -1
};

class PsServer {
 public:
  explicit PsServer(PsServerOptions options);
  ~PsServer();
  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  // Restores the shard from checkpoint `path` (a ckpt-<step> directory) or, when `path` is a
  // directory of checkpoints, from the newest valid one in it. kNotFound when there is none.
  Status Restore(const std::string& path);

  // Serves one generation on `transport` (rank num_workers + server_index). Returns OK when every
  // worker said goodbye, kCancelled when `stop` became true, or the transport error that ended it.
  Status Serve(Transport& transport, const std::atomic<bool>& stop);

  // Writes a checkpoint of the current state now (no-op without checkpoint_dir).
  Status Checkpoint();

  bool initialized() const;
  bool shut_down() const { return shutdown_.load(); }
  PsServerStats stats() const;
  const PsServerOptions& options() const { return options_; }
  // This server's bytes of the flattened model, in order (tests, debugging).
  std::vector<char> Snapshot() const;

 private:
  struct Part;
  struct Request;

  // One worker's request loop for one generation: OK after its goodbye.
  Status ServeWorker(Transport& transport, int worker, const std::atomic<bool>& stop);
  // Receives the messages that follow a request header (key list, values) into `r`.
  Status ReceiveRequest(Transport& transport, int worker, const char* message, Request* r);
  Status Reply(Transport& transport, int worker, const Request& r, const Status& status,
               std::vector<char>* pulled);

  Status InitShard(const ModelLayout& layout, const OptimizerConfig& optimizer, const char* values, size_t bytes);
  Status HandleInit(const Request& r, int64_t* clock);
  Status HandlePush(const Request& r, int worker);
  Status HandlePull(const Request& r, int worker, char* out, const std::atomic<bool>& stop);
  Status HandleClock(int worker);
  Status HandleBye(int worker, const std::atomic<bool>& stop);
  Status HandleBarrier(int worker, const std::atomic<bool>& stop);
  int64_t MinClockLocked() const;  // clock_mu_ held
  // Resolves a request's keys against the layout: the parts it touches, in order.
  Status ResolveParts(const Request& r, std::vector<Part*>* parts, uint64_t* owned_bytes) const;
  // Applies the summed pushes of every finished clock (SSP). Takes apply_mu_.
  void ApplyFinishedClocks();
  void MaybeCheckpointLocked(int64_t step);  // apply_mu_ held
  Status CheckpointLocked();                 // apply_mu_ held
  double Scale() const;

  PsServerOptions options_;
  mutable std::mutex state_mu_;             // guards init
  std::condition_variable init_cv_;
  bool initialized_ = false;                // guarded by state_mu_; parts_ fixed once true
  ModelLayout layout_;
  OptimizerConfig optimizer_;
  std::vector<uint64_t> boundaries_;
  std::vector<std::unique_ptr<Part>> parts_;  // in key order
  std::vector<int> part_of_key_;              // layout index -> parts_ index or -1
  std::atomic<uint64_t> owned_bytes_{0};

  mutable std::mutex clock_mu_;
  std::condition_variable clock_cv_;
  std::vector<int64_t> clocks_;   // guarded by clock_mu_
  std::vector<bool> left_;        // guarded by clock_mu_
  std::vector<int64_t> barriers_; // guarded by clock_mu_
  int64_t applied_clock_ = 0;     // guarded by clock_mu_
  int64_t max_read_gap_ = 0;      // guarded by clock_mu_

  std::mutex apply_mu_;           // serializes SSP applies and checkpoints
  int64_t last_checkpoint_step_ = 0;  // guarded by apply_mu_
  std::atomic<uint64_t> async_pushes_{0};
  std::atomic<bool> shutdown_{false};
  std::atomic<bool> failed_{false};
  int64_t restored_step_ = -1;

  std::atomic<uint64_t> pushes_{0}, pulls_{0}, clock_count_{0}, errors_{0}, bytes_pushed_{0}, bytes_pulled_{0},
      checkpoints_{0};
};

struct PsRunOptions {
  std::string key_prefix = "cohort-ps";
  // Transport connect timeout.
  std::chrono::milliseconds connect_timeout{60000};
  // After a generation ends (workers gone or rebuilt) without a shutdown, how long to wait for
  // the next one before returning.
  std::chrono::milliseconds rejoin_timeout{60000};
};

// Runs `server` over UCX: joins each generation the chief (worker 0) publishes under
// key_prefix, serves it, and returns OK once training is over (a shutdown, then every worker
// gone), when `stop` becomes true, or when no generation comes within rejoin_timeout (the status
// of the last one).
Status RunParameterServer(Bootstrap& bootstrap, PsServer& server, const PsRunOptions& options,
                          const std::atomic<bool>& stop);

}  // namespace cohort::collective::ps
