// PsServer holds one shard of a model for the parameter server (DESIGN.md "Collective",
// Parameter server) and serves it to the workers' PsWorker (ps_worker.h) over the protocol of
// ps_protocol.h. It is the serving loop and a handler per operation; the parts it drives have
// their own files, as ps-lite keeps its Van apart from KVServer's storage:
//   ps_framing.h      requests and replies to and from messages
//   ps_shard.h        the key ranges ps_layout.h assigns to server `server_index`, with their
//                     optimizer state
//   ps_clock_table.h  the workers' clocks (bounded staleness), barriers and goodbyes
//   ps_checkpoint.h   shard checkpoint files
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
// Checkpoints: every `checkpoint_every` steps (SSP: applied clocks; async: pushes / num_workers)
// the shard is written as checkpoint `step` under checkpoint_dir (ps_checkpoint.h). Restore()
// reads the newest valid one, so a restarted server resumes from its last checkpoint; updates
// after it are lost, and workers learn the restored clock from InitModel's reply.
//
// Thread safety: Serve is called by one thread at a time; stats() and Snapshot() from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "collective/bootstrap.h"
#include "collective/ps/ps_clock_table.h"
#include "collective/ps/ps_optimizer.h"
#include "collective/ps/ps_protocol.h"
#include "collective/ps/ps_shard.h"
#include "collective/transport/transport.h"
#include "common/mutex.h"

namespace cohort::collective::ps {

struct PsServerOptions {
  int num_workers = 1;
  int num_servers = 1;
  int server_index = 0;
  // When set, used instead of the optimizer the chief's InitModel carries (cohort-ps flags).
  std::optional<OptimizerConfig> optimizer_override;
  std::string checkpoint_dir;    // empty: no checkpoints
  int64_t checkpoint_every = 0;  // steps between checkpoints; 0: none
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
  uint64_t errors = 0;  // requests answered with an error
  uint64_t bytes_pushed = 0;
  uint64_t bytes_pulled = 0;
  uint64_t checkpoints = 0;
  int64_t applied_clock = 0;  // SSP: every clock below this is applied
  int64_t step = 0;           // checkpoint step (see above)
  int64_t max_read_gap =
      0;  // SSP: largest (reader's clock - slowest worker's clock) at a served pull
  int64_t restored_step = -1;  // step of the checkpoint restored at start, else -1
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
  struct Request;
  // One request being handled: what a handler gets.
  struct Call {
    const Request& request;
    int worker;
    const std::atomic<bool>& stop;
    std::vector<char>& pulled;  // a pull's values, sized by its handler
  };
  using Handler = Status (PsServer::*)(const Call&);
  // The handler of each operation; nullptr for an unknown one.
  static Handler HandlerFor(PsOp op);

  // One worker's request loop for one generation: OK after its goodbye.
  Status ServeWorker(Transport& transport, int worker, const std::atomic<bool>& stop);
  // Receives the messages that follow a request header (key list, values) into `r`.
  Status ReceiveRequest(Transport& transport, int worker, const char* message, Request* r);
  Status Reply(Transport& transport, int worker, const Request& r, const Status& status,
               const std::vector<char>& pulled);

  Status HandleInit(const Call& c);
  Status HandlePush(const Call& c);
  Status HandlePull(const Call& c);
  Status HandleClock(const Call& c);
  Status HandleShutdown(const Call& c);
  Status HandleBye(const Call& c);
  Status HandleBarrier(const Call& c);
  // True once this generation is over for a waiting handler.
  bool GenerationOver(const std::atomic<bool>& stop) const { return stop.load() || failed_.load(); }
  // Applies the summed pushes of every finished clock (SSP).
  void ApplyFinishedClocks() EXCLUDES(apply_mu_);
  void MaybeCheckpointLocked(int64_t step) REQUIRES(apply_mu_);
  Status CheckpointLocked() REQUIRES(apply_mu_);
  double Scale() const;

  PsServerOptions options_;
  // Lock order: state_mu_, then apply_mu_.
  mutable Mutex state_mu_;
  CondVar init_cv_;
  bool initialized_ GUARDED_BY(state_mu_) = false;
  // Replaced (Init, restore) only with both mutexes held and before initialized_ is set; read
  // freely once initialized.
  Shard shard_;
  ClockTable clocks_;

  Mutex apply_mu_;  // serializes SSP applies and checkpoints
  int64_t last_checkpoint_step_ GUARDED_BY(apply_mu_) = 0;
  std::atomic<uint64_t> async_pushes_{0};
  std::atomic<bool> shutdown_{false};
  std::atomic<bool> failed_{false};
  int64_t restored_step_ = -1;

  std::atomic<uint64_t> pushes_{0}, pulls_{0}, clock_count_{0}, errors_{0}, bytes_pushed_{0},
      bytes_pulled_{0}, checkpoints_{0};
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
