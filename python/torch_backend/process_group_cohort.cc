#include "python/torch_backend/process_group_cohort.h"

#include <Python.h>

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>

#include "collective/store_bootstrap.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "common/env.h"
#include "common/fnv.h"
#include "python/torch_backend/completion_pool.h"
#include "python/torch_backend/log_line.h"
#include "python/torch_backend/peer_failure_watch.h"
#include "python/torch_backend/sparse_allreduce.h"
#include "python/torch_backend/tensor_staging.h"
#include "python/torch_backend/torch_counterparts.h"
#include "python/torch_backend/torch_store_bootstrap.h"

namespace cohort::torch_backend {
namespace {

// Lets go of hooks that may hold Python callables, whose release needs the interpreter: one that
// is already finalized (a group destroyed at the process's very end) gets them leaked instead.
template <typename Hooks>
void DropHooks(Hooks&& hooks) {
  if (Py_IsInitialized()) return;  // `hooks`, the caller's, goes as usual
  new Hooks(std::move(hooks));     // NOLINT: leaked on purpose
}

using collective::Algorithm;
using collective::Communicator;
using collective::CommunicatorOptions;
using collective::DataType;
using collective::ReduceOp;

// How long past the timeout wait() lets the library's own deadline report first (its error names
// the peer; wait()'s own can only say that the operation is late).
constexpr auto kWaitGrace = std::chrono::seconds(5);
// Completion threads: one is enough unless callbacks block on further collectives.
constexpr int kMaxCompletionThreads = 8;
// Threads that wait for posted sends and receives: one per message in flight, up to this many.
constexpr int kMaxPointToPointThreads = 64;
// Releases the GIL for its lifetime when the calling thread holds it: a thread that waits for the
// group's threads must not hold what they may need (a Python hook or future callback).
class GilReleased {
 public:
  GilReleased() {
    if (Py_IsInitialized() && PyGILState_Check()) state_ = PyEval_SaveThread();
  }
  ~GilReleased() {
    if (state_ != nullptr) PyEval_RestoreThread(state_);
  }
  GilReleased(const GilReleased&) = delete;
  GilReleased& operator=(const GilReleased&) = delete;

 private:
  PyThreadState* state_ = nullptr;
};

// The point-to-point tag of monitoredBarrier's messages: the last one; users' tags are below it.
constexpr int kMonitoredBarrierTag = collective::kPointToPointTagLimit - 1;

[[noreturn]] void Fail(const Status& s) { throw std::runtime_error("cohort: " + s.ToString()); }

template <typename T>
T OrFail(StatusOr<T> v, const std::string& context) {
  if (!v.ok()) Fail(v.status().WithContext(context));
  return std::move(v).value();
}

// Torch's reduce ops; PREMUL_SUM is a sum of premultiplied inputs (Reduction).
constexpr Counterpart<c10d::ReduceOp::RedOpType, ReduceOp> kReduceOps[] = {
    {c10d::ReduceOp::SUM, "SUM", ReduceOp::kSum},
    {c10d::ReduceOp::AVG, "AVG", ReduceOp::kAvg},
    {c10d::ReduceOp::PRODUCT, "PRODUCT", ReduceOp::kProduct},
    {c10d::ReduceOp::MIN, "MIN", ReduceOp::kMin},
    {c10d::ReduceOp::MAX, "MAX", ReduceOp::kMax},
    {c10d::ReduceOp::BAND, "BAND", ReduceOp::kBitwiseAnd},
    {c10d::ReduceOp::BOR, "BOR", ReduceOp::kBitwiseOr},
    {c10d::ReduceOp::BXOR, "BXOR", ReduceOp::kBitwiseXor},
    {c10d::ReduceOp::PREMUL_SUM, "PREMUL_SUM", ReduceOp::kSum},
};

const char* ReduceOpName(c10d::ReduceOp::RedOpType op) {
  const auto* row = RowOf(kReduceOps, op);
  return row != nullptr ? row->name : "UNUSED";
}

// The reduction the library runs for a torch one of `tensors`; raises naming the op where the
// library has none, or where it does not reduce a tensor's dtype: the bitwise ops reduce integer
// and bool tensors only (as on gloo), PREMUL_SUM floating-point ones (as on NCCL).
Reduction LibraryReduction(const c10d::ReduceOp& op, const char* what,
                           at::ArrayRef<at::Tensor> tensors) {
  const auto type = static_cast<c10d::ReduceOp::RedOpType>(op);
  const auto* row = RowOf(kReduceOps, type);
  TORCH_CHECK(row != nullptr && row->library.has_value(), "cohort: ", what,
              " does not support ReduceOp.", ReduceOpName(op),
              " (supported: ", SupportedNames(kReduceOps), ")");
  Reduction reduction{*row->library, std::nullopt};
  if (type == c10d::ReduceOp::PREMUL_SUM) {
    TORCH_CHECK(op.supplement_.defined(), "cohort: ", what,
                ": ReduceOp.PREMUL_SUM without its factor (make it with "
                "torch.distributed._make_nccl_premul_sum)");
    reduction.premultiply =
        PreMulSumFactor(static_cast<const c10d::NCCLPreMulSumSupplement&>(*op.supplement_));
  }
  for (const at::Tensor& t : tensors) {
    TORCH_CHECK(!reduction.premultiply || at::isFloatingType(t.scalar_type()), "cohort: ", what,
                ": ReduceOp.PREMUL_SUM multiplies floating-point tensors, not ",
                DtypeName(t.scalar_type()));
    TORCH_CHECK(
        collective::CheckReduction(what, LibraryType(t.scalar_type(), what), reduction.op).ok(),
        "cohort: ", what, ": ReduceOp.", row->name, " reduces integer and bool tensors, not ",
        DtypeName(t.scalar_type()));
  }
  return reduction;
}

void CheckOneTensor(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "cohort: ", what, " takes one tensor per process (got ",
              tensors.size(), "); several tensors on one process are not supported");
}

int EnvInt(const char* name, int fallback) {
  auto v = IntFromEnvironment(name, fallback);
  if (!v.ok()) Fail(v.status());
  return *v;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// CohortWork

CohortWork::CohortWork(int rank, c10d::OpType type, std::string name,
                       std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout)
    : c10d::Work(rank, type),
      name_(std::move(name)),
      outputs_(std::move(outputs)),
      timeout_(timeout),
      future_(c10::make_intrusive<c10::ivalue::Future>(
          c10::ListType::create(c10::TensorType::get()), FutureDevices(outputs_))) {}

void CohortWork::MarkStarted() {
  std::lock_guard<std::mutex> lock(mutex_);
  started_ = true;
  started_at_ = std::chrono::steady_clock::now();
  cv_.notify_all();
}

void CohortWork::Finish(std::exception_ptr error) { finish(std::move(error)); }

void CohortWork::CompleteFuture(std::exception_ptr error) {
  if (error) {
    future_->setError(std::move(error));
  } else {
    future_->markCompleted(c10::IValue(outputs_));
  }
}

bool CohortWork::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (timeout != kNoTimeout) {
    if (!cv_.wait_for(lock, timeout, [&] { return completed_; })) {
      TORCH_CHECK(false, "cohort: ", name_, " did not finish within the ", timeout.count(),
                  " ms given to wait()");
    }
  } else {
    // Operations queued behind others wait for them: the timeout runs from this one's start.
    while (!completed_) {
      if (!started_) {
        cv_.wait(lock, [&] { return completed_ || started_; });
        continue;
      }
      if (!cv_.wait_until(lock, started_at_ + timeout_ + kWaitGrace, [&] { return completed_; })) {
        TORCH_CHECK(false, "cohort: ", name_, " did not finish within the process group timeout (",
                    collective::FormatDuration(timeout_), ")");
      }
    }
  }
  if (exception_) std::rethrow_exception(exception_);
  return true;
}

c10::intrusive_ptr<c10::ivalue::Future> CohortWork::getFuture() {
  std::lock_guard<std::mutex> lock(future_mu_);
  future_handed_out_ = true;
  return future_;
}

bool CohortWork::ConcludeUnlessFutureHandedOut(std::exception_ptr error) {
  std::lock_guard<std::mutex> lock(future_mu_);
  if (future_handed_out_) return false;
  CompleteFuture(error);
  Finish(error);
  return true;
}

std::vector<at::Tensor> CohortWork::result() { return outputs_; }

int CohortWork::sourceRank() const {
  if (source_rank_ == nullptr) return c10d::Work::sourceRank();  // raises: not a receive
  const int source = source_rank_->load();
  TORCH_CHECK(source >= 0, "cohort: ", name_,
              " has not received its message yet: its sender is known once wait() returned");
  return source;
}

// ---------------------------------------------------------------------------------------------
// ProcessGroupCohort: set-up

ProcessGroupCohort::ProcessGroupCohort(PassKey, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : BackendBase(rank, size), timeout_ms_(timeout.count()) {}

void ProcessGroupCohort::setTimeout(std::chrono::milliseconds timeout) {
  TORCH_CHECK(timeout.count() > 0, "cohort: set_timeout: the timeout must be positive, not ",
              timeout.count(), " ms");
  timeout_ms_.store(timeout.count());
}

c10::intrusive_ptr<ProcessGroupCohort> ProcessGroupCohort::Create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, bool default_group, const Config& config) {
  auto pg = c10::make_intrusive<ProcessGroupCohort>(PassKey(), rank, size, timeout);
  pg->store_ = store;
  pg->config_ = config;
  CommunicatorOptions options;
  if (Status s = collective::CommunicatorOptionsFromEnvironment(&options); !s.ok()) Fail(s);
  // torch's timeout is the group's: it bounds the rendezvous and every operation, as with gloo.
  options.timeout = timeout;
  if (!config.algorithm.empty()) {
    const auto algorithm = collective::ParseAlgorithm(config.algorithm);
    TORCH_CHECK(algorithm.has_value(), "cohort: Options.algorithm '", config.algorithm, "' is not ",
                collective::AlgorithmChoice());
    options.algorithm = *algorithm;
  }
  if (config.chunk_bytes != 0) options.chunk_bytes = config.chunk_bytes;
  if (!config.wire_dtype.empty()) {
    const std::string& w = config.wire_dtype;
    TORCH_CHECK(w == "bf16" || w == "f16" || w == "f32" || w == "none",
                "cohort: Options.wire_dtype '", w, "' is not bf16, f16, f32 or none");
    options.wire_dtype =
        (w == "f32" || w == "none") ? DataType::kF32 : *collective::ParseDataType(w);
  }
  pg->wire_dtype_ = options.wire_dtype;
  pg->check_calls_ = config.check_calls >= 0 ? config.check_calls != 0
                                             : EnvInt("COHORT_TORCH_CHECK_CALLS", 0) != 0;
  pg->overlap_ = config.overlap >= 0 ? config.overlap != 0 : EnvInt("COHORT_TORCH_OVERLAP", 1) != 0;

  const char* cohort_addr = std::getenv("COHORT_BOOTSTRAP_ADDR");
  int num_reducers = 0;
  // Where the ranks tell each other that one gave up (PeerFailureWatch), in the bootstrap store.
  std::string watch_key;
  std::string reducers_hint;  // outside a Cohort job: where the reducers are to join
  if (default_group && cohort_addr != nullptr && *cohort_addr != '\0') {
    // Inside a Cohort job: the agent's environment names the store, the reducers and the ranks.
    const int env_rank = EnvInt("RANK", rank);
    const int env_world = EnvInt("WORLD_SIZE", size);
    TORCH_CHECK(env_rank == rank && env_world == size, "cohort: the process group is rank ", rank,
                " of ", size, " but the Cohort job's environment says RANK=", env_rank,
                " WORLD_SIZE=", env_world);
    num_reducers = EnvInt("COHORT_NUM_REDUCERS", 0);
    TORCH_CHECK(config.num_reducers < 0 || config.num_reducers == num_reducers,
                "cohort: Options.num_reducers=", config.num_reducers, " but the Cohort job has ",
                num_reducers, " reducers (COHORT_NUM_REDUCERS); leave it unset inside a job");
    if (rank == 0) {
      pg->store_server_ =
          OrFail(collective::StoreServer::Start(cohort_addr), "starting the bootstrap store");
    }
    pg->bootstrap_ =
        OrFail(collective::StoreBootstrap::Connect(cohort_addr, timeout), "bootstrap store");
    pg->rendezvous_ = std::string("Cohort job store ") + cohort_addr;
    // Every rank makes its job's default groups in the same order: the n-th one's key.
    static std::atomic<int> job_groups{0};
    watch_key = "cohort/torch/gave-up/" + std::to_string(job_groups++);
  } else {
    // torchrun, env:// or an explicit store: a fresh session per process group (see
    // torch_store_bootstrap.h). The default group works on the store beneath torch's prefixes,
    // where `python3 -m cohort.torch.reducer --store HOST:PORT` finds it.
    num_reducers = default_group ? (config.num_reducers >= 0 ? config.num_reducers
                                                             : EnvInt("COHORT_NUM_REDUCERS", 0))
                                 : 0;
    if (num_reducers > 0) {  // refused before the rendezvous where no reducer could join
      StatusOr<std::string> where = WhereReducersJoin(store);
      if (!where.ok()) Fail(where.status());
      reducers_hint = "; " + *where;
    }
    TorchStoreBootstrap group_store(store);
    const collective::Deadline deadline = collective::DeadlineAfter(timeout);
    const std::string session =
        OrFail(JoinSession(group_store, rank, deadline), "joining the process group");
    auto bootstrap =
        std::make_unique<TorchStoreBootstrap>(default_group ? InnermostStore(store) : store);
    options.key_prefix = SessionPrefix(session);
    watch_key = SessionPrefix(session) + "/gave-up";
    if (rank == 0 && num_reducers > 0) {
      if (Status s = PublishSession(*bootstrap, session, size, num_reducers); !s.ok()) Fail(s);
    }
    pg->bootstrap_ = std::move(bootstrap);
    pg->rendezvous_ = std::string(default_group ? "torch store" : "torch store (subgroup)") +
                      ", session " + session;
    if (num_reducers > 0 && rank == 0) {
      LogInfo("cohort: the default group of " + std::to_string(size) + " ranks uses " +
              std::to_string(num_reducers) + " reducers" + reducers_hint);
    }
  }
  if (size == 1 && num_reducers == 0) {
    // Nothing to find: one rank on an in-process transport.
    pg->loopback_ = std::make_unique<collective::LoopbackFabric>(1);
    options.transport = CommunicatorOptions::TransportKind::kLoopback;
    options.loopback_fabric = pg->loopback_.get();
  }
  pg->comm_ = OrFail(Communicator::Create(*pg->bootstrap_, rank, size, num_reducers, options),
                     "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                         " joining through the " + pg->rendezvous_ + reducers_hint);
  pg->num_reducers_ = pg->comm_->num_reducers();
  pg->allreduce_choice_ = pg->comm_->allreduce_choice();
  pg->completions_ = std::make_unique<CompletionPool>(kMaxCompletionThreads);
  pg->point_to_point_ = std::make_unique<CompletionPool>(kMaxPointToPointThreads);
  pg->finisher_ = std::make_unique<CompletionPool>(1);
  if (size > 1 && EnvInt("COHORT_TORCH_WATCH_PEERS", 1) != 0) {
    pg->watch_ = std::make_unique<PeerFailureWatch>(
        pg->bootstrap_, watch_key, rank, PeerFailureWatch::Timing(),
        [raw = pg.get()](int peer, const std::string& why) { raw->GiveUpForPeer(peer, why); });
  }
  pg->thread_ = std::thread([raw = pg.get()] { raw->RunQueue(); });
  return pg;
}

ProcessGroupCohort::~ProcessGroupCohort() { Shutdown(); }

c10::intrusive_ptr<BackendBase> ProcessGroupCohort::shrink(
    const std::vector<int64_t>& ranks_to_exclude, int shrink_flags,
    const c10::intrusive_ptr<BackendBase::Options>& opts_override) {
  constexpr int kShrinkAbort = 1;  // torch's SHRINK_ABORT
  TORCH_CHECK((shrink_flags & ~kShrinkAbort) == 0, "cohort: shrink: unknown flags ", shrink_flags);
  std::vector<bool> excluded(getSize(), false);
  std::string which;
  for (const int64_t r : ranks_to_exclude) {
    TORCH_CHECK(r >= 0 && r < getSize() && !excluded[r], "cohort: shrink: rank ", r,
                " is not a rank of this group (size ", getSize(), ") or is named twice");
    excluded[r] = true;
  }
  TORCH_CHECK(!excluded[getRank()], "cohort: shrink: this rank (", getRank(),
              ") is among those excluded; only the others make the new group");
  int new_rank = 0, new_size = 0;
  for (int r = 0; r < getSize(); ++r) {
    if (excluded[r]) {
      which += (which.empty() ? "" : ",") + std::to_string(r);
      continue;
    }
    if (r < getRank()) ++new_rank;
    ++new_size;
  }
  TORCH_CHECK(new_size > 0 && !which.empty(), "cohort: shrink: no rank to exclude");
  int shrink_number;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shrink_number = ++shrinks_;
  }
  if ((shrink_flags & kShrinkAbort) != 0) Abort();
  std::chrono::milliseconds timeout(timeout_ms_.load());
  if (opts_override && opts_override->timeout.count() > 0) timeout = opts_override->timeout;
  // A session of its own on this group's store: the survivors' n-th shrink without these ranks.
  auto store = c10::make_intrusive<c10d::PrefixStore>(
      "cohort-shrink/" + std::to_string(shrink_number) + "/" + which + "/", store_);
  GilReleased released;  // the rendezvous waits for the other survivors
  return Create(store, new_rank, new_size, timeout, /*default_group=*/false, config_);
}

void ProcessGroupCohort::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    if (closing_) return;
    closing_ = true;
  }
  cv_.notify_all();
  // Queued operations and completion callbacks may need the GIL (Python callbacks on futures):
  // never hold it while waiting for them.
  GilReleased released;
  if (thread_.joinable()) thread_.join();
  finisher_.reset();        // started allreduces end by their deadline
  point_to_point_.reset();  // posted sends and receives end by their deadline
  completions_.reset();
  if (watch_ != nullptr) watch_->Close();  // writes this rank's reason, if one is still pending
  std::unique_ptr<Communicator> comm;
  {
    std::lock_guard<std::mutex> lock(mu_);  // Abort may be cancelling it
    comm = std::move(comm_);
  }
  comm.reset();  // tells the reducers this worker is done (unless aborted)
  bootstrap_.reset();
  store_server_.reset();
  DropHooks(TakeAbortHooks());
}

void ProcessGroupCohort::Abort() {
  if (watch_ != nullptr) watch_->Publish("it aborted its group");
  RunAbortHooks();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) {
      aborted_ = true;
      stopping_ = true;
      if (comm_ != nullptr) comm_->Cancel();  // the queue, finisher and point-to-point waits end
    }
  }
  cv_.notify_all();
  Shutdown();
}

void ProcessGroupCohort::registerAbortHook(int64_t hook_id, std::function<void()> hook) {
  TORCH_CHECK(hook, "cohort: register_abort_hook(", hook_id, "): the hook is empty");
  std::lock_guard<std::mutex> lock(mu_);
  if (!abort_hooks_done_) abort_hooks_[hook_id] = std::move(hook);
}

void ProcessGroupCohort::unregisterAbortHook(int64_t hook_id) {
  std::function<void()> hook;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = abort_hooks_.find(hook_id);
    if (it == abort_hooks_.end()) return;
    hook = std::move(it->second);
    abort_hooks_.erase(it);
  }
  DropHooks(std::move(hook));
}

std::map<int64_t, std::function<void()>> ProcessGroupCohort::TakeAbortHooks() {
  std::lock_guard<std::mutex> lock(mu_);
  abort_hooks_done_ = true;
  return std::exchange(abort_hooks_, {});
}

void ProcessGroupCohort::RunAbortHooks() {
  std::map<int64_t, std::function<void()>> hooks = TakeAbortHooks();  // empty once taken
  for (auto& [id, hook] : hooks) {
    try {
      hook();
    } catch (const std::exception& e) {
      LogWarn("cohort: rank " + std::to_string(getRank()) + ": abort hook " + std::to_string(id) +
              " raised: " + e.what());
    }
  }
  DropHooks(std::move(hooks));
}

void ProcessGroupCohort::GiveUpForPeer(int peer, const std::string& why) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!first_error_.ok() || aborted_ || comm_ == nullptr) return;
  first_error_ = Unavailable("worker " + std::to_string(peer) + " gave up: " + why);
  gave_up_for_peer_ = true;
  comm_->Cancel();  // the operations in flight end, and Conclude names the peer's reason
}

ProcessGroupCohort::GaveUp ProcessGroupCohort::WhyItGaveUp() const {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return GaveUp::kCommError;
  if (first_error_.ok()) return GaveUp::kNo;
  switch (first_error_.code()) {
    case StatusCode::kDeadlineExceeded:
      return GaveUp::kTimeout;
    case StatusCode::kUnavailable:
      return GaveUp::kRemoteError;
    default:
      return GaveUp::kCommError;
  }
}

std::string ProcessGroupCohort::ErrorTypeName() const {
  switch (WhyItGaveUp()) {
    case GaveUp::kNo:
      return "SUCCESS";
    case GaveUp::kTimeout:
      return "TIMEOUT";
    case GaveUp::kRemoteError:
      return "REMOTE_ERROR";
    case GaveUp::kCommError:
      break;
  }
  return "COMM_ERROR";
}

#if COHORT_TORCH_HAS_ERROR_TYPE
c10d::ErrorType ProcessGroupCohort::getError() {
  switch (WhyItGaveUp()) {
    case GaveUp::kNo:
      return c10d::ErrorType::SUCCESS;
    case GaveUp::kTimeout:
      return c10d::ErrorType::TIMEOUT;
    case GaveUp::kRemoteError:
      return c10d::ErrorType::REMOTE_ERROR;
    case GaveUp::kCommError:
      break;
  }
  return c10d::ErrorType::COMM_ERROR;
}
#endif

std::string ProcessGroupCohort::Describe() const {
  bool shut_down, aborted;
  {
    std::lock_guard<std::mutex> lock(mu_);
    shut_down = stopping_;
    aborted = aborted_;
  }
  return "cohort process group: rank " + std::to_string(getRank()) + " of " +
         std::to_string(getSize()) + ", " + std::to_string(num_reducers_) +
         " reducers, rendezvous through the " + rendezvous_ + ", all-reduce " +
         std::string(collective::AlgorithmName(allreduce_choice_.For())) + " for large buffers" +
         (wire_dtype_ != DataType::kF32
              ? std::string(", wire ") + std::string(collective::DataTypeName(wire_dtype_))
              : std::string()) +
         ", timeout " + collective::FormatDuration(std::chrono::milliseconds(timeout_ms_.load())) +
         (aborted     ? ", aborted"
          : shut_down ? ", shut down"
                      : "");
}

// ---------------------------------------------------------------------------------------------
// The queue

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::Enqueue(c10d::OpType type, std::string name,
                                                           std::vector<at::Tensor> outputs,
                                                           std::function<Status()> run) {
  return EnqueueDeferred(type, std::move(name), std::move(outputs),
                         [run = std::move(run)]() -> StatusOr<Deferred> {
                           COHORT_RETURN_IF_ERROR(run());
                           return Deferred();
                         });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::EnqueueDeferred(
    c10d::OpType type, std::string name, std::vector<at::Tensor> outputs,
    std::function<StatusOr<Deferred>()> run, bool overlaps,
    std::optional<std::chrono::milliseconds> own_timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  TORCH_CHECK(!stopping_, "cohort: ", name, " on a process group that was ",
              aborted_ ? "aborted" : "shut down");
  const std::chrono::milliseconds timeout =
      own_timeout.value_or(std::chrono::milliseconds(timeout_ms_.load()));
  auto work = c10::make_intrusive<CohortWork>(getRank(), type, name + " #" + std::to_string(++ops_),
                                              std::move(outputs), timeout);
  if (!c10d::isP2POp(type)) ++collectives_;
  if (!first_error_.ok()) {
    // The group gave up: refused now, not behind the queue, where it would wait for the queue
    // thread, which may be running the abort hooks that issued it (see registerAbortHook).
    const Status refused = RefusalLocked();
    lock.unlock();
    work->MarkStarted();
    Conclude(work, refused, /*complete_future_here=*/false);
    return work;
  }
  queue_.push_back(Op{work, std::move(run), FlightClockNs(), overlaps, timeout});
  lock.unlock();
  cv_.notify_all();
  return work;
}

uint64_t ProcessGroupCohort::getSequenceNumberForGroup() {
  std::lock_guard<std::mutex> lock(mu_);
  return collectives_;
}

Status ProcessGroupCohort::RefusalToRun() {
  std::lock_guard<std::mutex> lock(mu_);
  return RefusalLocked();
}

Status ProcessGroupCohort::RefusalLocked() const {
  if (aborted_) return Cancelled("not run");
  if (first_error_.ok()) return Status::Ok();
  return Aborted("the process group failed earlier and cannot run more operations (" +
                 first_error_.ToString() + ")");
}

void ProcessGroupCohort::Conclude(const c10::intrusive_ptr<CohortWork>& work, const Status& status,
                                  bool complete_future_here) {
  if (watch_ != nullptr) watch_->Ended(work.get());
  std::exception_ptr error;
  if (!status.ok()) {
    bool aborted, first;
    Status for_peer;  // the peer's reason, when this group gave up for it (GiveUpForPeer)
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = first_error_.ok();
      if (first) first_error_ = status.WithContext(work->name());
      aborted = aborted_;
      if (gave_up_for_peer_ && status.code() == StatusCode::kCancelled) for_peer = first_error_;
    }
    // The group gives up here (it runs no more operations): its abort hooks run before the
    // error reaches the Work, once (an abort ran them already; so did an earlier failure).
    if (!aborted) RunAbortHooks();
    if (first && !aborted && watch_ != nullptr) {
      watch_->Publish(status.WithContext(work->name()).ToString());
    }
    std::string why = for_peer.ok() ? status.ToString() : for_peer.ToString();
    if (aborted && status.code() == StatusCode::kCancelled)
      why += " (the process group was aborted)";
    error =
        std::make_exception_ptr(std::runtime_error("cohort: " + work->name() + " failed: " + why));
  }
  // The future first, then the Work, as gloo does: once wait() or is_completed() says the
  // operation is done, get_future().value() has its result (and the future's callbacks have run).
  auto conclude = [work, error] {
    work->CompleteFuture(error);
    work->Finish(error);
  };
  if (complete_future_here) {
    conclude();
    return;
  }
  // A future nobody was handed has no callbacks: completed here, the caller's wait() is one
  // thread hand-off nearer (a plain dist.all_reduce never asks for the future; DDP always does).
  if (work->ConcludeUnlessFutureHandedOut(error)) return;
  completions_->Submit(std::move(conclude));
}

void ProcessGroupCohort::RunQueue() {
  while (true) {
    Op op;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) {  // stopping, and everything issued has started
        cv_.wait(lock, [&] { return unfinished_ == 0; });
        return;
      }
      op = std::move(queue_.front());
      queue_.pop_front();
      // An overlapped allreduce may start while the one before it finishes; anything else waits.
      const int allowed = op.overlaps ? 1 : 0;
      cv_.wait(lock, [&] { return unfinished_ <= allowed; });
    }
    op.work->MarkStarted();
    if (watch_ != nullptr)
      watch_->Started(op.work.get(), std::chrono::steady_clock::now() + op.timeout);
    StatusOr<Deferred> posted = Deferred();
    if (Status refused = RefusalToRun(); !refused.ok()) {
      posted = refused;
    } else {
      // The Communicator records each call op.run makes (once: nothing here records them
      // again), with the time the op was queued.
      comm_->set_enqueue_time(op.enqueued_ns);
      comm_->set_timeout(op.timeout);
      try {
        posted = op.run();
      } catch (const std::exception& e) {
        posted = Internal(e.what());
      }
      comm_->set_enqueue_time(0);
    }
    if (posted.ok() && *posted) {
      // Started (an overlapped allreduce) or posted (point-to-point): another thread waits for
      // the rest while this one goes on. The finisher waits for allreduces in issue order and
      // leaves their futures to the completion pool, so that a callback that waits for another
      // allreduce cannot hold up the finisher that allreduce needs; point-to-point requests each
      // have a thread of their own, which completes the future.
      if (op.overlaps) {
        std::lock_guard<std::mutex> lock(mu_);
        ++unfinished_;
      }
      CompletionPool& pool = op.overlaps ? *finisher_ : *point_to_point_;
      pool.Submit([this, work = op.work, rest = std::move(*posted), overlaps = op.overlaps] {
        Status s;
        try {
          s = rest();
        } catch (const std::exception& e) {
          s = Internal(e.what());
        }
        if (overlaps) {
          {
            std::lock_guard<std::mutex> lock(mu_);
            --unfinished_;
          }
          cv_.notify_all();
        }
        Conclude(work, s, /*complete_future_here=*/!overlaps);
      });
      continue;
    }
    Conclude(op.work, posted.status(), /*complete_future_here=*/false);
  }
}

// ---------------------------------------------------------------------------------------------
// Operations

namespace {

// Descriptors of an all-reduce for CheckAgreement: {elements, dtype, op, tensors, shape hash}.
std::vector<int64_t> AllreduceDescriptor(const std::vector<at::Tensor>& tensors,
                                         c10d::ReduceOp::RedOpType op) {
  int64_t elements = 0;
  Fnv1a hash;  // over (dtype, elements) of each tensor
  for (const at::Tensor& t : tensors) {
    elements += t.numel();
    hash.Add(static_cast<uint64_t>(t.scalar_type())).Add(static_cast<uint64_t>(t.numel()));
  }
  return {elements, tensors.empty() ? -1 : static_cast<int64_t>(tensors[0].scalar_type()),
          static_cast<int64_t>(op), static_cast<int64_t>(tensors.size()),
          static_cast<int64_t>(hash.value())};
}

std::string RenderAllreduce(const std::vector<int64_t>& d) {
  std::string s = std::to_string(d[0]) + " elements of " +
                  DtypeName(static_cast<at::ScalarType>(d[1])) + " with " +
                  ReduceOpName(static_cast<c10d::ReduceOp::RedOpType>(d[2]));
  if (d[3] != 1) {
    s += " in " + std::to_string(d[3]) + " tensors (shapes hash " + std::to_string(d[4]) + ")";
  }
  return s;
}

// Context for errors of byte moves, whose library calls count carrier elements.
std::string Moving(const StagedTensor& t) {
  const ByteCarrier c = t.carrier();
  return std::to_string(t.user().numel()) + " x " + DtypeName(t.user().scalar_type()) + " (" +
         std::to_string(t.bytes()) + " bytes, moved as " + std::to_string(c.count) + " " +
         std::string(collective::DataTypeName(c.type)) + ")";
}

void CheckRoot(int64_t root, int size, const char* what) {
  TORCH_CHECK(root >= 0 && root < size, "cohort: ", what, ": root ", root,
              " is not a rank of this group (size ", size, ")");
}

// Broadcast and reduce: one tensor per process (rootTensor 0), rooted at a rank of this group of
// `size`. Returns that root.
int CheckRootedOne(const std::vector<at::Tensor>& tensors, int64_t root, int64_t root_tensor,
                   int size, const char* what) {
  CheckOneTensor(tensors, what);
  CheckRoot(root, size, what);
  TORCH_CHECK(root_tensor == 0, "cohort: ", what,
              ": rootTensor must be 0 (one tensor per process)");
  return static_cast<int>(root);
}

void CheckLike(const at::Tensor& t, const at::Tensor& like, int64_t numel, const char* what,
               const std::string& role) {
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "cohort: ", what, ": ", role, " is ",
              DtypeName(t.scalar_type()), " but the input is ", DtypeName(like.scalar_type()));
  TORCH_CHECK(t.numel() == numel, "cohort: ", what, ": ", role, " has ", t.numel(), " elements, ",
              numel, " expected");
}

#if COHORT_TORCH_HAS_TENSOR_COALESCED
// The coalesced tensor operations: one output per input, at least one pair.
void CheckPairs(const std::vector<at::Tensor>& outputs, const std::vector<at::Tensor>& inputs,
                const char* what) {
  TORCH_CHECK(!inputs.empty() && outputs.size() == inputs.size(), "cohort: ", what,
              " takes one output per input (got ", outputs.size(), " outputs for ", inputs.size(),
              " inputs)");
}

// One queued operation that runs `parts` in order, stopping at the first error.
std::function<Status()> RunInTurn(std::vector<std::function<Status()>> parts) {
  return [parts = std::move(parts)] {
    for (const auto& part : parts) COHORT_RETURN_IF_ERROR(part());
    return Status::Ok();
  };
}
#endif

bool AnyCuda(const std::vector<at::Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const at::Tensor& t) { return t.is_cuda(); });
}

at::Tensor HostBytes(size_t bytes, bool pinned) {
  return at::empty({static_cast<int64_t>(bytes)},
                   at::TensorOptions().dtype(at::kByte).pinned_memory(pinned));
}

// Block r (of `block_bytes` each) of a uint8 host buffer.
at::Tensor Block(const at::Tensor& buffer, size_t r, size_t block_bytes) {
  return buffer.narrow(0, static_cast<int64_t>(r * block_bytes), static_cast<int64_t>(block_bytes));
}

// `tensors` laid end to end, each in a block of carrier.padded_bytes (one carrier for all: they
// have one size), in a uint8 host buffer.
at::Tensor PackBlocks(const std::vector<at::Tensor>& tensors, const ByteCarrier& carrier) {
  at::Tensor buffer =
      at::zeros({static_cast<int64_t>(carrier.padded_bytes * tensors.size())},
                at::TensorOptions().dtype(at::kByte).pinned_memory(AnyCuda(tensors)));
  for (size_t r = 0; r < tensors.size(); ++r) {
    const at::Tensor& t = tensors[r];
    Block(buffer, r, carrier.padded_bytes)
        .narrow(0, 0, t.numel() * static_cast<int64_t>(t.element_size()))
        .view(t.scalar_type())
        .view(t.sizes())
        .copy_(t);
  }
  return buffer;
}

}  // namespace

Status ProcessGroupCohort::Allreduce(const StagedTensor& t, ReduceOp op) {
  return comm_->Allreduce(t.data(), t.numel(), t.type(), op);
}

StatusOr<ProcessGroupCohort::Deferred> ProcessGroupCohort::StartAllreduce(
    const std::shared_ptr<StagedTensor>& t, ReduceOp op) {
  const char* begin = static_cast<const char*>(t->data());
  const char* end = begin + t->numel() * collective::DataTypeSize(t->type());
  if (begin < overlap_end_ && overlap_begin_ < end) {
    // The same memory as the allreduce in flight: its results must be in first.
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return unfinished_ == 0; });
  }
  overlap_begin_ = begin;
  overlap_end_ = end;
  auto pending = std::make_shared<collective::PendingAllreduce>();
  COHORT_ASSIGN_OR_RETURN(*pending, comm_->StartAllreduce(t->data(), t->numel(), t->type(), op));
  return Deferred([pending, t] {
    COHORT_RETURN_IF_ERROR(pending->Finish());
    t->CopyBack();
    return Status::Ok();
  });
}

bool ProcessGroupCohort::OnReductionServer(const StagedTensor& t) const {
  return allreduce_choice_.For(t.numel() * collective::DataTypeSize(t.type())) ==
         collective::Algorithm::kReductionServer;
}

std::vector<int64_t> ProcessGroupCohort::AllreduceCall(const std::vector<at::Tensor>& tensors,
                                                       const c10d::ReduceOp& op) const {
  if (!ChecksCalls()) return {};
  return AllreduceDescriptor(tensors, static_cast<c10d::ReduceOp::RedOpType>(op));
}

Status ProcessGroupCohort::CheckAgreement(
    const std::vector<int64_t>& descriptor,
    const std::function<std::string(const std::vector<int64_t>&)>& what) {
  const size_t n = descriptor.size();
  std::vector<int64_t> all(n * static_cast<size_t>(getSize()));
  COHORT_RETURN_IF_ERROR(comm_->Allgather(descriptor.data(), all.data(), n, DataType::kI64));
  for (int r = 0; r < getSize(); ++r) {
    std::vector<int64_t> theirs(all.begin() + r * n, all.begin() + (r + 1) * n);
    if (theirs != descriptor) {
      return InvalidArgument("the ranks disagree: worker " + std::to_string(r) + " passes " +
                             what(theirs) + ", this worker (" + std::to_string(getRank()) + ") " +
                             what(descriptor));
    }
  }
  return Status::Ok();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  CheckOneTensor(tensors, "allreduce");
  if (tensors[0].is_sparse()) return SparseAllreduce(tensors, opts);
  const Reduction reduction = LibraryReduction(opts.reduceOp, "allreduce", tensors);
  const ReduceOp op = reduction.op;
  auto staged = std::make_shared<StagedTensor>(tensors[0], "allreduce", StagedTensor::kReduce,
                                               StagedTensor::kInOut);
  if (reduction.premultiply) staged->Premultiply(*reduction.premultiply);
  auto descriptor = AllreduceCall(tensors, opts.reduceOp);
  if (overlap_ && OnReductionServer(*staged) && !ChecksCalls()) {
    return EnqueueDeferred(
        c10d::OpType::ALLREDUCE, "allreduce", tensors,
        [this, staged, op]() -> StatusOr<Deferred> { return StartAllreduce(staged, op); },
        /*overlaps=*/true);
  }
  return Enqueue(c10d::OpType::ALLREDUCE, "allreduce", tensors, [this, staged, op, descriptor] {
    if (ChecksCalls()) COHORT_RETURN_IF_ERROR(CheckAgreement(descriptor, RenderAllreduce));
    COHORT_RETURN_IF_ERROR(Allreduce(*staged, op));
    staged->CopyBack();
    return Status::Ok();
  });
}

#if COHORT_TORCH_HAS_ALLREDUCE_SPARSE
c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allreduce_sparse(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  CheckOneTensor(tensors, "allreduce_sparse");
  TORCH_CHECK(tensors[0].is_sparse(), "cohort: allreduce_sparse takes a sparse COO tensor");
  return SparseAllreduce(tensors, opts);
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::SparseAllreduce(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceOptions& opts) {
  const at::Tensor& tensor = tensors[0];
  TORCH_CHECK(static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp) == c10d::ReduceOp::SUM,
              "cohort: allreduce of a sparse tensor supports ReduceOp.SUM only, not ReduceOp.",
              ReduceOpName(opts.reduceOp));
  TORCH_CHECK(tensor.dim() <= kMaxSparseDims, "cohort: allreduce of a sparse tensor of ",
              tensor.dim(), " dimensions is not supported (at most ", kMaxSparseDims, ")");
  TORCH_CHECK(tensor.is_cpu() || tensor.is_cuda(),
              "cohort: allreduce takes CPU or CUDA tensors, not ", tensor.device().str());
  // The values at the call, on the host, whatever the caller does with the tensor meanwhile:
  // coalescing an uncoalesced CPU tensor (DDP's sparse gradients) already makes that copy.
  at::Tensor mine = tensor.coalesce();
  if (mine.is_same(tensor) || !mine.is_cpu()) {
    mine = mine.to(at::kCPU, /*non_blocking=*/false, /*copy=*/true);
  }
  return Enqueue(c10d::OpType::ALLREDUCE, "allreduce", tensors, [this, mine, tensor] {
    StatusOr<at::Tensor> sum = SparseAllreduceSum(*comm_, mine);
    if (!sum.ok()) return sum.status().WithContext("sparse allreduce");
    at::Tensor result = tensor;  // the caller's tensor takes the sum's indices and values
    WriteResult(result, sum->to(tensor.device()));
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "cohort: allreduce_coalesced needs at least one tensor");
  const Reduction reduction = LibraryReduction(opts.reduceOp, "allreduce_coalesced", tensors);
  const ReduceOp op = reduction.op;
  // One all-reduce per run of tensors of one dtype, over a flat copy of the run.
  auto runs =
      std::make_shared<std::vector<CoalescedRun>>(CoalesceByType(tensors, "allreduce_coalesced"));
  for (CoalescedRun& run : *runs) {
    if (reduction.premultiply) run.flat.Premultiply(*reduction.premultiply);
  }
  auto descriptor = AllreduceCall(tensors, opts.reduceOp);
  return Enqueue(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
                 [this, runs, op, descriptor] {
                   if (ChecksCalls())
                     COHORT_RETURN_IF_ERROR(CheckAgreement(descriptor, RenderAllreduce));
                   for (CoalescedRun& run : *runs) COHORT_RETURN_IF_ERROR(Allreduce(run.flat, op));
                   for (CoalescedRun& run : *runs) run.CopyBack();
                   return Status::Ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::barrier(const c10d::BarrierOptions& /*opts*/) {
  return Enqueue(c10d::OpType::BARRIER, "barrier", {}, [this] { return comm_->Barrier(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  const int root = CheckRootedOne(tensors, opts.rootRank, opts.rootTensor, getSize(), "broadcast");
  auto staged =
      std::make_shared<StagedTensor>(tensors[0], "broadcast", StagedTensor::kBytes,
                                     getRank() == root ? StagedTensor::kIn : StagedTensor::kOut);
  return Enqueue(c10d::OpType::BROADCAST, "broadcast", tensors, [this, staged, root] {
    const ByteCarrier carrier = staged->carrier();
    COHORT_RETURN_IF_ERROR(comm_->Broadcast(staged->data(), carrier.count, carrier.type, root)
                               .WithContext("broadcast of " + Moving(*staged)));
    staged->CopyBack();
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allgather(
    std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors,
    const c10d::AllgatherOptions& /*opts*/) {
  CheckOneTensor(input_tensors, "allgather");
  TORCH_CHECK(output_tensors.size() == 1,
              "cohort: allgather takes one output list per process (got ", output_tensors.size(),
              ")");
  const at::Tensor& input = input_tensors[0];
  std::vector<at::Tensor> outputs = output_tensors[0];
  TORCH_CHECK(static_cast<int>(outputs.size()) == getSize(), "cohort: allgather needs ", getSize(),
              " output tensors (one per rank), got ", outputs.size());
  for (size_t r = 0; r < outputs.size(); ++r) {
    CheckLike(outputs[r], input, input.numel(), "allgather", "output tensor " + std::to_string(r));
    CheckTakesResult(outputs[r], "allgather");
  }
  auto send =
      std::make_shared<StagedTensor>(input, "allgather", StagedTensor::kBytes, StagedTensor::kIn);
  const ByteCarrier carrier = send->carrier();
  at::Tensor recv = HostBytes(carrier.padded_bytes * getSize(), AnyCuda(outputs));
  return Enqueue(c10d::OpType::ALLGATHER, "allgather", outputs,
                 [this, send, carrier, recv, outputs] {
                   COHORT_RETURN_IF_ERROR(
                       comm_->Allgather(send->data(), recv.data_ptr(), carrier.count, carrier.type)
                           .WithContext("allgather of " + Moving(*send)));
                   for (size_t r = 0; r < outputs.size(); ++r) {
                     CopyBytesInto(Block(recv, r, carrier.padded_bytes), outputs[r]);
                   }
                   return Status::Ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  return Enqueue(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output},
                 PrepareAllgatherBase(output, input, "_allgather_base"));
}

std::function<Status()> ProcessGroupCohort::PrepareAllgatherBase(const at::Tensor& output,
                                                                 const at::Tensor& input,
                                                                 const char* name) {
  CheckLike(output, input, input.numel() * getSize(), name, "the output");
  TORCH_CHECK(output.is_contiguous(), "cohort: ", name, " needs a contiguous output tensor");
  auto send = std::make_shared<StagedTensor>(input, name, StagedTensor::kBytes, StagedTensor::kIn);
  const ByteCarrier carrier = send->carrier();
  if (carrier.padded_bytes == send->bytes()) {
    // Rank blocks lie end to end in the output just as the library writes them.
    auto recv =
        std::make_shared<StagedTensor>(output, name, StagedTensor::kBytes, StagedTensor::kOut);
    return [this, send, carrier, recv] {
      COHORT_RETURN_IF_ERROR(
          comm_->Allgather(send->data(), recv->data(), carrier.count, carrier.type)
              .WithContext("allgather of " + Moving(*send)));
      recv->CopyBack();
      return Status::Ok();
    };
  }
  at::Tensor recv = HostBytes(carrier.padded_bytes * getSize(), output.is_cuda());
  return [this, send, carrier, recv, output, numel = input.numel()] {
    COHORT_RETURN_IF_ERROR(
        comm_->Allgather(send->data(), recv.data_ptr(), carrier.count, carrier.type)
            .WithContext("allgather of " + Moving(*send)));
    at::Tensor flat = output.view({-1});
    for (int r = 0; r < getSize(); ++r) {
      CopyBytesInto(Block(recv, r, carrier.padded_bytes), flat.narrow(0, r * numel, numel));
    }
    return Status::Ok();
  };
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::reduce_scatter(
    std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors,
    const c10d::ReduceScatterOptions& opts) {
  CheckOneTensor(output_tensors, "reduce_scatter");
  TORCH_CHECK(input_tensors.size() == 1,
              "cohort: reduce_scatter takes one input list per process (got ", input_tensors.size(),
              ")");
  const at::Tensor& output = output_tensors[0];
  const std::vector<at::Tensor>& inputs = input_tensors[0];
  TORCH_CHECK(static_cast<int>(inputs.size()) == getSize(), "cohort: reduce_scatter needs ",
              getSize(), " input tensors (one per rank), got ", inputs.size());
  for (size_t r = 0; r < inputs.size(); ++r) {
    CheckLike(inputs[r], output, output.numel(), "reduce_scatter",
              "input tensor " + std::to_string(r));
  }
  const Reduction reduction = LibraryReduction(opts.reduceOp, "reduce_scatter", {output});
  std::vector<at::Tensor> flats;
  for (const at::Tensor& t : inputs) flats.push_back(t.reshape({-1}).to(at::kCPU));
  return Enqueue(c10d::OpType::REDUCE_SCATTER, "reduce_scatter", output_tensors,
                 PrepareReduceScatter(at::cat(flats), output, reduction, "reduce_scatter"));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  const Reduction reduction = LibraryReduction(opts.reduceOp, "_reduce_scatter_base", {output});
  return Enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output},
                 PrepareReduceScatter(input, output, reduction, "_reduce_scatter_base"));
}

std::function<Status()> ProcessGroupCohort::PrepareReduceScatter(const at::Tensor& input,
                                                                 const at::Tensor& output,
                                                                 const Reduction& reduction,
                                                                 const char* name) {
  CheckLike(input, output, output.numel() * getSize(), name, "the input");
  auto send = std::make_shared<StagedTensor>(input, name, StagedTensor::kReduce, StagedTensor::kIn);
  if (reduction.premultiply) send->Premultiply(*reduction.premultiply);
  const ReduceOp op = reduction.op;
  auto recv =
      std::make_shared<StagedTensor>(output, name, StagedTensor::kReduce, StagedTensor::kOut);
  return [this, send, recv, op] {
    COHORT_RETURN_IF_ERROR(
        comm_->ReduceScatter(send->data(), recv->data(), recv->numel(), recv->type(), op));
    recv->CopyBack();
    return Status::Ok();
  };
}

#if COHORT_TORCH_HAS_TENSOR_COALESCED
c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allgather_into_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& /*opts*/) {
  const char* name = "allgather_into_tensor_coalesced";
  CheckPairs(outputs, inputs, name);
  std::vector<std::function<Status()>> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts.push_back(PrepareAllgatherBase(outputs[i], inputs[i], name));
  }
  return Enqueue(c10d::OpType::COALESCED, name, outputs, RunInTurn(std::move(parts)));
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::reduce_scatter_tensor_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const char* name = "reduce_scatter_tensor_coalesced";
  CheckPairs(outputs, inputs, name);
  const Reduction reduction = LibraryReduction(opts.reduceOp, name, outputs);
  std::vector<std::function<Status()>> parts;
  for (size_t i = 0; i < inputs.size(); ++i) {
    parts.push_back(PrepareReduceScatter(inputs[i], outputs[i], reduction, name));
  }
  return Enqueue(c10d::OpType::COALESCED, name, outputs, RunInTurn(std::move(parts)));
}
#endif

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::reduce(std::vector<at::Tensor>& tensors,
                                                          const c10d::ReduceOptions& opts) {
  const int root = CheckRootedOne(tensors, opts.rootRank, opts.rootTensor, getSize(), "reduce");
  const Reduction reduction = LibraryReduction(opts.reduceOp, "reduce", tensors);
  const ReduceOp op = reduction.op;
  auto staged =
      std::make_shared<StagedTensor>(tensors[0], "reduce", StagedTensor::kReduce,
                                     getRank() == root ? StagedTensor::kInOut : StagedTensor::kIn);
  if (reduction.premultiply) staged->Premultiply(*reduction.premultiply);
  return Enqueue(c10d::OpType::REDUCE, "reduce", tensors, [this, staged, op, root] {
    COHORT_RETURN_IF_ERROR(
        comm_->Reduce(staged->data(), staged->data(), staged->numel(), staged->type(), op, root));
    if (getRank() == root) staged->CopyBack();
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::gather(
    std::vector<std::vector<at::Tensor>>& output_tensors, std::vector<at::Tensor>& input_tensors,
    const c10d::GatherOptions& opts) {
  CheckOneTensor(input_tensors, "gather");
  CheckRoot(opts.rootRank, getSize(), "gather");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor& input = input_tensors[0];
  std::vector<at::Tensor> outputs;
  if (getRank() == root) {
    TORCH_CHECK(
        output_tensors.size() == 1 && static_cast<int>(output_tensors[0].size()) == getSize(),
        "cohort: gather: the root needs one list of ", getSize(), " output tensors (one per rank)");
    outputs = output_tensors[0];
    for (size_t r = 0; r < outputs.size(); ++r) {
      CheckLike(outputs[r], input, input.numel(), "gather", "output tensor " + std::to_string(r));
      CheckTakesResult(outputs[r], "gather");
    }
  } else {
    TORCH_CHECK(output_tensors.empty() || (output_tensors.size() == 1 && output_tensors[0].empty()),
                "cohort: gather: only the root (rank ", root, ") takes output tensors");
  }
  auto send =
      std::make_shared<StagedTensor>(input, "gather", StagedTensor::kBytes, StagedTensor::kIn);
  const ByteCarrier carrier = send->carrier();
  at::Tensor recv = getRank() == root
                        ? HostBytes(carrier.padded_bytes * getSize(), AnyCuda(outputs))
                        : at::Tensor();
  return Enqueue(c10d::OpType::GATHER, "gather", outputs,
                 [this, send, carrier, recv, outputs, root] {
                   COHORT_RETURN_IF_ERROR(comm_
                                              ->Gather(send->data(),
                                                       recv.defined() ? recv.data_ptr() : nullptr,
                                                       carrier.count, carrier.type, root)
                                              .WithContext("gather of " + Moving(*send)));
                   for (size_t r = 0; r < outputs.size(); ++r) {
                     CopyBytesInto(Block(recv, r, carrier.padded_bytes), outputs[r]);
                   }
                   return Status::Ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::scatter(
    std::vector<at::Tensor>& output_tensors, std::vector<std::vector<at::Tensor>>& input_tensors,
    const c10d::ScatterOptions& opts) {
  CheckOneTensor(output_tensors, "scatter");
  CheckRoot(opts.rootRank, getSize(), "scatter");
  const int root = static_cast<int>(opts.rootRank);
  const at::Tensor& output = output_tensors[0];
  at::Tensor packed;
  const ByteCarrier carrier = CarrierFor(output.numel() * output.element_size());
  if (getRank() == root) {
    TORCH_CHECK(input_tensors.size() == 1 && static_cast<int>(input_tensors[0].size()) == getSize(),
                "cohort: scatter: the root needs one list of ", getSize(),
                " input tensors (one per rank)");
    for (size_t r = 0; r < input_tensors[0].size(); ++r) {
      CheckLike(input_tensors[0][r], output, output.numel(), "scatter",
                "input tensor " + std::to_string(r));
    }
    packed = PackBlocks(input_tensors[0], carrier);
  } else {
    TORCH_CHECK(input_tensors.empty() || (input_tensors.size() == 1 && input_tensors[0].empty()),
                "cohort: scatter: only the root (rank ", root, ") takes input tensors");
  }
  auto recv =
      std::make_shared<StagedTensor>(output, "scatter", StagedTensor::kBytes, StagedTensor::kOut);
  return Enqueue(
      c10d::OpType::SCATTER, "scatter", output_tensors, [this, recv, carrier, packed, root] {
        COHORT_RETURN_IF_ERROR(comm_
                                   ->Scatter(packed.defined() ? packed.data_ptr() : nullptr,
                                             recv->data(), carrier.count, carrier.type, root)
                                   .WithContext("scatter of " + Moving(*recv)));
        recv->CopyBack();
        return Status::Ok();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_split_sizes,
    std::vector<int64_t>& input_split_sizes, const c10d::AllToAllOptions& /*opts*/) {
  TORCH_CHECK(output.scalar_type() == input.scalar_type(), "cohort: alltoall_base: the output is ",
              DtypeName(output.scalar_type()), " but the input is ",
              DtypeName(input.scalar_type()));
  const int n = getSize();
  // Splits along dim 0, in rows; none given: equal splits.
  auto splits = [&](const at::Tensor& t, const std::vector<int64_t>& given, const char* role) {
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    if (given.empty()) {
      TORCH_CHECK(rows % n == 0, "cohort: alltoall_base: the ", role, " has ", rows,
                  " rows, which do not split equally among ", n, " ranks");
      return std::vector<int64_t>(n, rows / n);
    }
    TORCH_CHECK(static_cast<int>(given.size()) == n, "cohort: alltoall_base: ", given.size(), " ",
                role, " split sizes for ", n, " ranks");
    int64_t sum = 0;
    for (int64_t v : given) {
      TORCH_CHECK(v >= 0, "cohort: alltoall_base: negative ", role, " split size ", v);
      sum += v;
    }
    TORCH_CHECK(sum == rows, "cohort: alltoall_base: the ", role, " split sizes add up to ", sum,
                " rows, the ", role, " has ", rows);
    return given;
  };
  const std::vector<int64_t> out_rows = splits(output, output_split_sizes, "output");
  const std::vector<int64_t> in_rows = splits(input, input_split_sizes, "input");
  const int64_t in_row_bytes =
      input.numel() == 0
          ? 0
          : input.numel() / std::max<int64_t>(1, input.dim() == 0 ? 1 : input.size(0)) *
                input.element_size();
  const int64_t out_row_bytes =
      output.numel() == 0
          ? 0
          : output.numel() / std::max<int64_t>(1, output.dim() == 0 ? 1 : output.size(0)) *
                output.element_size();
  // Every block travels padded to whole int32s (a copy only when some block needs padding).
  std::vector<size_t> send_bytes(n), recv_bytes(n), send_counts(n), recv_counts(n);
  for (int j = 0; j < n; ++j) {
    send_bytes[j] = static_cast<size_t>(in_rows[j] * in_row_bytes);
    recv_bytes[j] = static_cast<size_t>(out_rows[j] * out_row_bytes);
    send_counts[j] = CarrierFor(send_bytes[j]).padded_bytes / 4;
    recv_counts[j] = CarrierFor(recv_bytes[j]).padded_bytes / 4;
  }
  auto send = std::make_shared<StagedTensor>(input, "alltoall_base", StagedTensor::kBytes,
                                             StagedTensor::kIn);
  auto recv = std::make_shared<StagedTensor>(output, "alltoall_base", StagedTensor::kBytes,
                                             StagedTensor::kOut);
  const bool exact =
      std::all_of(send_bytes.begin(), send_bytes.end(), [](size_t b) { return b % 4 == 0; }) &&
      std::all_of(recv_bytes.begin(), recv_bytes.end(), [](size_t b) { return b % 4 == 0; });
  return Enqueue(
      c10d::OpType::ALLTOALL_BASE, "alltoall_base", {output},
      [this, send, recv, exact, send_bytes, recv_bytes, send_counts, recv_counts] {
        if (exact) {
          COHORT_RETURN_IF_ERROR(comm_->AlltoallV(send->data(), send_counts.data(), recv->data(),
                                                  recv_counts.data(), DataType::kI32));
          recv->CopyBack();
          return Status::Ok();
        }
        const size_t total_send =
            std::accumulate(send_counts.begin(), send_counts.end(), size_t{0});
        const size_t total_recv =
            std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0});
        at::Tensor packed = at::zeros({static_cast<int64_t>(total_send * 4)}, at::kByte);
        at::Tensor unpacked = at::empty({static_cast<int64_t>(total_recv * 4)}, at::kByte);
        at::Tensor src = send->user().is_cpu() && send->user().is_contiguous()
                             ? send->user().contiguous().view({-1}).view(at::kByte)
                             : send->user().to(at::kCPU).contiguous().view({-1}).view(at::kByte);
        int64_t from = 0, to = 0;
        for (size_t j = 0; j < send_bytes.size(); ++j) {
          packed.narrow(0, to, static_cast<int64_t>(send_bytes[j]))
              .copy_(src.narrow(0, from, static_cast<int64_t>(send_bytes[j])));
          from += static_cast<int64_t>(send_bytes[j]);
          to += static_cast<int64_t>(send_counts[j] * 4);
        }
        COHORT_RETURN_IF_ERROR(comm_->AlltoallV(packed.data_ptr(), send_counts.data(),
                                                unpacked.data_ptr(), recv_counts.data(),
                                                DataType::kI32));
        at::Tensor dst = at::empty({static_cast<int64_t>(recv->bytes())}, at::kByte);
        from = 0;
        to = 0;
        for (size_t j = 0; j < recv_bytes.size(); ++j) {
          dst.narrow(0, to, static_cast<int64_t>(recv_bytes[j]))
              .copy_(unpacked.narrow(0, from, static_cast<int64_t>(recv_bytes[j])));
          from += static_cast<int64_t>(recv_counts[j] * 4);
          to += static_cast<int64_t>(recv_bytes[j]);
        }
        CopyBytesInto(dst, recv->user());
        return Status::Ok();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::alltoall(std::vector<at::Tensor>& output_tensors,
                                                            std::vector<at::Tensor>& input_tensors,
                                                            const c10d::AllToAllOptions& opts) {
  const int n = getSize();
  TORCH_CHECK(
      static_cast<int>(output_tensors.size()) == n && static_cast<int>(input_tensors.size()) == n,
      "cohort: alltoall needs ", n, " input and ", n, " output tensors (one per rank), got ",
      input_tensors.size(), " and ", output_tensors.size());
  const at::ScalarType type = input_tensors[0].scalar_type();
  for (int j = 0; j < n; ++j) {
    TORCH_CHECK(input_tensors[j].scalar_type() == type && output_tensors[j].scalar_type() == type,
                "cohort: alltoall: every tensor must be ", DtypeName(type));
    CheckTakesResult(output_tensors[j], "alltoall");
  }
  // As alltoall_base over flat copies, one element per row.
  std::vector<at::Tensor> ins, outs;
  std::vector<int64_t> in_splits, out_splits;
  for (int j = 0; j < n; ++j) {
    ins.push_back(input_tensors[j].reshape({-1}).to(at::kCPU));
    in_splits.push_back(input_tensors[j].numel());
    out_splits.push_back(output_tensors[j].numel());
  }
  at::Tensor input = at::cat(ins);
  at::Tensor output = at::empty({std::accumulate(out_splits.begin(), out_splits.end(), int64_t{0})},
                                input.options());
  auto inner = alltoall_base(output, input, out_splits, in_splits, opts);
  // The scatter back into the caller's tensors rides on the queue too, right after.
  return Enqueue(c10d::OpType::ALLTOALL, "alltoall", output_tensors,
                 [inner, output, output_tensors, out_splits]() mutable {
                   if (!inner->isSuccess()) return Aborted("the all-to-all it rides on failed");
                   int64_t offset = 0;
                   for (size_t j = 0; j < output_tensors.size(); ++j) {
                     WriteResult(
                         output_tensors[j],
                         output.narrow(0, offset, out_splits[j]).view(output_tensors[j].sizes()));
                     offset += out_splits[j];
                   }
                   return Status::Ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::PointToPoint(bool is_send,
                                                                std::vector<at::Tensor>& tensors,
                                                                int peer, int tag) {
  const bool any = peer == kAnyRank;
  const char* what = is_send ? "send" : any ? "recvAnysource" : "recv";
  CheckOneTensor(tensors, what);
  TORCH_CHECK(any || (peer >= 0 && peer < getSize() && peer != getRank()), "cohort: ", what,
              ": rank ", peer, " is not another rank of this group (size ", getSize(),
              ", this rank ", getRank(), ")");
  TORCH_CHECK(!any || getSize() > 1, "cohort: ", what,
              ": this group has no other rank to receive from (size 1)");
  TORCH_CHECK(tag >= 0 && tag < kMonitoredBarrierTag, "cohort: ", what, ": tag ", tag,
              " is outside [0, ", kMonitoredBarrierTag, ")");
  auto staged = std::make_shared<StagedTensor>(tensors[0], what, StagedTensor::kBytes,
                                               is_send ? StagedTensor::kIn : StagedTensor::kOut);
  // A receive's sender, for its Work: known now, or (from any rank) once the message came.
  auto source = is_send ? nullptr : std::make_shared<std::atomic<int>>(any ? -1 : peer);
  auto work = EnqueueDeferred(
      is_send ? c10d::OpType::SEND
      : any   ? c10d::OpType::RECVANYSOURCE
              : c10d::OpType::RECV,
      what, tensors, [this, staged, is_send, any, peer, tag, source]() -> StatusOr<Deferred> {
        const ByteCarrier carrier = staged->carrier();
        auto request = is_send
                           ? comm_->Isend(staged->data(), carrier.count, carrier.type, peer, tag)
                       : any ? comm_->IrecvAny(staged->data(), carrier.count, carrier.type, tag)
                             : comm_->Irecv(staged->data(), carrier.count, carrier.type, peer, tag);
        if (!request.ok()) return request.status();
        auto shared = std::make_shared<collective::PointToPointRequest>(std::move(*request));
        return Deferred([staged, shared, is_send, any, source] {
          COHORT_RETURN_IF_ERROR(
              shared->Wait().WithContext(std::string(is_send ? "send of "
                                                     : any   ? "recv from any rank of "
                                                             : "recv of ") +
                                         Moving(*staged)));
          if (!is_send) {
            source->store(shared->peer());
            staged->CopyBack();
          }
          return Status::Ok();
        });
      });
  if (!is_send) static_cast<CohortWork&>(*work).set_source_rank(std::move(source));
  return work;
}

void ProcessGroupCohort::monitoredBarrier(const c10d::BarrierOptions& opts, bool wait_all_ranks) {
  const std::chrono::milliseconds timeout = opts.timeout == c10d::kUnsetTimeout
                                                ? std::chrono::milliseconds(timeout_ms_.load())
                                                : opts.timeout;
  TORCH_CHECK(timeout.count() > 0, "cohort: monitored_barrier: the timeout must be positive (got ",
              timeout.count(), " ms)");
  auto work = EnqueueDeferred(
      c10d::OpType::BARRIER, "monitored_barrier", {},
      [this, timeout, wait_all_ranks]() -> StatusOr<Deferred> {
        COHORT_RETURN_IF_ERROR(RunMonitoredBarrier(timeout, wait_all_ranks));
        return Deferred();
      },
      /*overlaps=*/false, timeout);
  // A failure runs the abort hooks on the queue thread, and Python ones need the GIL: torch's
  // binding releases it, a caller from C++ that holds it might not.
  GilReleased released;
  work->wait();  // raises the operation's error
}

Status ProcessGroupCohort::RunMonitoredBarrier(std::chrono::milliseconds timeout,
                                               bool wait_all_ranks) {
  const int rank = getRank();
  const int size = getSize();
  const std::string within = " within " + collective::FormatDuration(timeout);
  int32_t token = 1;
  if (rank != 0) {
    COHORT_ASSIGN_OR_RETURN(auto sent,
                            comm_->Isend(&token, 1, DataType::kI32, 0, kMonitoredBarrierTag));
    COHORT_RETURN_IF_ERROR(sent.Wait().WithContext("monitored_barrier: telling rank 0"));
    COHORT_ASSIGN_OR_RETURN(auto ack,
                            comm_->Irecv(&token, 1, DataType::kI32, 0, kMonitoredBarrierTag));
    Status acked = ack.Wait();
    if (acked.ok()) return acked;
    return Status(acked.code(),
                  "monitored_barrier: rank " + std::to_string(rank) +
                      " reached it, but rank 0's acknowledgement did not come" + within +
                      " (rank 0 names the ranks that did not arrive): " + acked.message());
  }
  std::vector<int32_t> tokens(size);
  std::vector<StatusOr<collective::PointToPointRequest>> arrivals;
  for (int r = 1; r < size; ++r) {
    arrivals.push_back(comm_->Irecv(&tokens[r], 1, DataType::kI32, r, kMonitoredBarrierTag));
  }
  std::vector<int> missing;
  Status first;
  for (int r = 1; r < size; ++r) {
    auto& arrival = arrivals[r - 1];
    Status s = arrival.ok() ? arrival->Wait() : arrival.status();
    if (s.ok()) continue;
    missing.push_back(r);
    if (first.ok()) first = s;
    if (!wait_all_ranks) break;
  }
  if (!missing.empty()) {
    std::string ranks;
    for (int r : missing) ranks += (ranks.empty() ? "" : ", ") + std::to_string(r);
    return Status(first.code(), std::string("monitored_barrier: ") +
                                    (missing.size() == 1 ? "rank " : "ranks ") + ranks +
                                    " did not reach it" + within + " (rank " +
                                    std::to_string(missing[0]) + ": " + first.message() + ")");
  }
  std::vector<collective::PointToPointRequest> acks;
  for (int r = 1; r < size; ++r) {
    COHORT_ASSIGN_OR_RETURN(auto ack,
                            comm_->Isend(&token, 1, DataType::kI32, r, kMonitoredBarrierTag));
    acks.push_back(std::move(ack));
  }
  for (auto& ack : acks) {
    COHORT_RETURN_IF_ERROR(ack.Wait().WithContext("monitored_barrier: acknowledging"));
  }
  return Status::Ok();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::send(std::vector<at::Tensor>& tensors,
                                                        int dst_rank, int tag) {
  return PointToPoint(true, tensors, dst_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::recv(std::vector<at::Tensor>& tensors,
                                                        int src_rank, int tag) {
  return PointToPoint(false, tensors, src_rank, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::recvAnysource(std::vector<at::Tensor>& tensors,
                                                                 int tag) {
  return PointToPoint(false, tensors, kAnyRank, tag);
}

}  // namespace cohort::torch_backend
