#include "python/torch_backend/process_group_cohort.h"

#include <Python.h>

#include <algorithm>
#include <cstdlib>
#include <optional>
#include <stdexcept>

#include "collective/store_bootstrap.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "common/env.h"
#include "python/torch_backend/completion_pool.h"
#include "python/torch_backend/tensor_staging.h"
#include "python/torch_backend/torch_store_bootstrap.h"

namespace cohort::torch_backend {
namespace {

using collective::Algorithm;
using collective::Communicator;
using collective::CommunicatorOptions;
using collective::DataType;
using collective::ReduceOp;

// How long past the timeout wait() lets the library's own deadline report first (its error names
// the peer; wait()'s own can only say that the operation is late).
constexpr auto kWaitGrace = std::chrono::seconds(5);
constexpr const char* kAllreduceOps = "SUM, AVG, PRODUCT, MIN, MAX";
// Completion threads: one is enough unless callbacks block on further collectives.
constexpr int kMaxCompletionThreads = 8;

[[noreturn]] void Fail(const Status& s) { throw std::runtime_error("cohort: " + s.ToString()); }

template <typename T>
T OrFail(StatusOr<T> v, const std::string& context) {
  if (!v.ok()) Fail(v.status().WithContext(context));
  return std::move(v).value();
}

const char* ReduceOpName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM:
      return "SUM";
    case c10d::ReduceOp::AVG:
      return "AVG";
    case c10d::ReduceOp::PRODUCT:
      return "PRODUCT";
    case c10d::ReduceOp::MIN:
      return "MIN";
    case c10d::ReduceOp::MAX:
      return "MAX";
    case c10d::ReduceOp::BAND:
      return "BAND";
    case c10d::ReduceOp::BOR:
      return "BOR";
    case c10d::ReduceOp::BXOR:
      return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM:
      return "PREMUL_SUM";
    default:
      return "UNUSED";
  }
}

// The library's operator for a torch one; raises naming the op where the library has none.
ReduceOp LibraryOp(const c10d::ReduceOp& op, const char* what,
                   const char* supported = "SUM, AVG, MIN, MAX") {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
    case c10d::ReduceOp::SUM:
      return ReduceOp::kSum;
    case c10d::ReduceOp::AVG:
      return ReduceOp::kAvg;
    case c10d::ReduceOp::MIN:
      return ReduceOp::kMin;
    case c10d::ReduceOp::MAX:
      return ReduceOp::kMax;
    default:
      break;
  }
  TORCH_CHECK(false, "cohort: ", what, " does not support ReduceOp.", ReduceOpName(op),
              " (supported: ", supported, ")");
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

c10::intrusive_ptr<c10::ivalue::Future> CohortWork::getFuture() { return future_; }

std::vector<at::Tensor> CohortWork::result() { return outputs_; }

// ---------------------------------------------------------------------------------------------
// ProcessGroupCohort: set-up

ProcessGroupCohort::ProcessGroupCohort(PassKey, int rank, int size,
                                       std::chrono::milliseconds timeout)
    : c10d::ProcessGroup(rank, size), timeout_(timeout) {}

c10::intrusive_ptr<ProcessGroupCohort> ProcessGroupCohort::Create(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
    std::chrono::milliseconds timeout, bool default_group, const Config& config) {
  auto pg = c10::make_intrusive<ProcessGroupCohort>(PassKey(), rank, size, timeout);
  CommunicatorOptions options;
  if (Status s = collective::CommunicatorOptionsFromEnvironment(&options); !s.ok()) Fail(s);
  // torch's timeout is the group's: it bounds the rendezvous and every operation, as with gloo.
  options.timeout = timeout;
  if (!config.algorithm.empty()) {
    const auto algorithm = collective::ParseAlgorithm(config.algorithm);
    TORCH_CHECK(
        algorithm.has_value(), "cohort: Options.algorithm '", config.algorithm,
        "' is not auto, ring, reduction-server, halving-doubling, shared-memory or hierarchical");
    options.algorithm = *algorithm;
  }
  if (config.chunk_bytes != 0) options.chunk_bytes = config.chunk_bytes;
  pg->check_calls_ = config.check_calls >= 0 ? config.check_calls != 0
                                             : EnvInt("COHORT_TORCH_CHECK_CALLS", 1) != 0;

  const char* cohort_addr = std::getenv("COHORT_BOOTSTRAP_ADDR");
  int num_reducers = 0;
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
  } else {
    // torchrun, env:// or an explicit store: a fresh session per process group (see
    // torch_store_bootstrap.h). The default group works on the store beneath torch's prefixes,
    // where `python3 -m cohort.torch.reducer --store HOST:PORT` finds it.
    num_reducers = default_group ? (config.num_reducers >= 0 ? config.num_reducers
                                                             : EnvInt("COHORT_NUM_REDUCERS", 0))
                                 : 0;
    TorchStoreBootstrap group_store(store);
    const collective::Deadline deadline = collective::DeadlineAfter(timeout);
    const std::string session =
        OrFail(JoinSession(group_store, rank, deadline), "joining the process group");
    auto bootstrap =
        std::make_unique<TorchStoreBootstrap>(default_group ? InnermostStore(store) : store);
    options.key_prefix = SessionPrefix(session);
    if (rank == 0 && num_reducers > 0) {
      if (Status s = PublishSession(*bootstrap, session, size, num_reducers); !s.ok()) Fail(s);
    }
    pg->bootstrap_ = std::move(bootstrap);
    pg->rendezvous_ = std::string(default_group ? "torch store" : "torch store (subgroup)") +
                      ", session " + session;
  }
  if (size == 1 && num_reducers == 0) {
    // Nothing to find: one rank on an in-process transport.
    pg->loopback_ = std::make_unique<collective::LoopbackFabric>(1);
    options.transport = CommunicatorOptions::TransportKind::kLoopback;
    options.loopback_fabric = pg->loopback_.get();
  }
  pg->comm_ = OrFail(Communicator::Create(*pg->bootstrap_, rank, size, num_reducers, options),
                     "rank " + std::to_string(rank) + " of " + std::to_string(size) +
                         " joining through the " + pg->rendezvous_);
  pg->completions_ = std::make_unique<CompletionPool>(kMaxCompletionThreads);
  pg->thread_ = std::thread([raw = pg.get()] { raw->RunQueue(); });
  return pg;
}

ProcessGroupCohort::~ProcessGroupCohort() { Shutdown(); }

void ProcessGroupCohort::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  cv_.notify_all();
  // Queued operations and completion callbacks may need the GIL (Python callbacks on futures):
  // never hold it while waiting for them.
  std::optional<PyThreadState*> released;
  if (Py_IsInitialized() && PyGILState_Check()) released = PyEval_SaveThread();
  if (thread_.joinable()) thread_.join();
  completions_.reset();
  comm_.reset();  // tells the reducers this worker is done
  bootstrap_.reset();
  store_server_.reset();
  if (released) PyEval_RestoreThread(*released);
}

std::string ProcessGroupCohort::Describe() const {
  return "cohort process group: rank " + std::to_string(getRank()) + " of " +
         std::to_string(getSize()) + ", " + std::to_string(comm_ ? comm_->num_reducers() : 0) +
         " reducers, rendezvous through the " + rendezvous_ + ", all-reduce " +
         std::string(comm_ ? collective::AlgorithmName(comm_->AutoAlgorithm()) : "closed") +
         " for large buffers, timeout " + collective::FormatDuration(timeout_);
}

// ---------------------------------------------------------------------------------------------
// The queue

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::Enqueue(c10d::OpType type, std::string name,
                                                           std::vector<at::Tensor> outputs,
                                                           std::function<Status()> run) {
  std::unique_lock<std::mutex> lock(mu_);
  TORCH_CHECK(!stopping_, "cohort: ", name, " on a process group that was shut down");
  auto work = c10::make_intrusive<CohortWork>(getRank(), type, name + " #" + std::to_string(++ops_),
                                              std::move(outputs), timeout_);
  queue_.push_back(Op{work, std::move(run)});
  lock.unlock();
  cv_.notify_all();
  return work;
}

void ProcessGroupCohort::RunQueue() {
  while (true) {
    Op op;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything issued has run
      op = std::move(queue_.front());
      queue_.pop_front();
    }
    op.work->MarkStarted();
    Status s;
    if (!first_error_.ok()) {
      s = Aborted("the process group failed earlier and cannot run more operations (" +
                  first_error_.ToString() + ")");
    } else {
      try {
        s = op.run();
      } catch (const std::exception& e) {
        s = Internal(e.what());
      }
      if (!s.ok()) first_error_ = s.WithContext(op.work->name());
    }
    std::exception_ptr error;
    if (!s.ok()) {
      error = std::make_exception_ptr(
          std::runtime_error("cohort: " + op.work->name() + " failed: " + s.ToString()));
    }
    op.work->Finish(error);
    completions_->Submit([work = op.work, error] { work->CompleteFuture(error); });
  }
}

// ---------------------------------------------------------------------------------------------
// Operations

Status ProcessGroupCohort::Allreduce(const StagedTensor& t, ReduceOp op) {
  return comm_->Allreduce(t.data(), t.numel(), t.type(), op);
}

Status ProcessGroupCohort::AllgatherBytes(const void* send, const ByteCarrier& carrier,
                                          void* recv) {
  return comm_->Allgather(send, recv, carrier.count, carrier.type);
}

Status ProcessGroupCohort::AllreduceProduct(const at::Tensor& host) {
  const size_t bytes = static_cast<size_t>(host.numel()) * host.element_size();
  const ByteCarrier carrier = CarrierFor(bytes);
  at::Tensor send = at::zeros({static_cast<int64_t>(carrier.padded_bytes)}, at::kByte);
  send.narrow(0, 0, static_cast<int64_t>(bytes)).copy_(host.view({-1}).view(at::kByte));
  at::Tensor all = at::empty({static_cast<int64_t>(carrier.padded_bytes) * getSize()}, at::kByte);
  COHORT_RETURN_IF_ERROR(AllgatherBytes(send.data_ptr(), carrier, all.data_ptr()));
  auto block = [&](int r) {
    return all
        .narrow(0, static_cast<int64_t>(r * carrier.padded_bytes), static_cast<int64_t>(bytes))
        .view(host.scalar_type());
  };
  at::Tensor product = block(0).clone();
  for (int r = 1; r < getSize(); ++r) product.mul_(block(r));
  host.view({-1}).copy_(product);
  return Status::Ok();
}

Status ProcessGroupCohort::CheckAgreement(
    const std::vector<int64_t>& descriptor,
    const std::function<std::string(const std::vector<int64_t>&)>& what) {
  if (!check_calls_ || getSize() == 1) return Status::Ok();
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

namespace {

// Descriptors of an all-reduce for CheckAgreement: {elements, dtype, op, tensors, shape hash}.
std::vector<int64_t> AllreduceDescriptor(const std::vector<at::Tensor>& tensors,
                                         c10d::ReduceOp::RedOpType op) {
  int64_t elements = 0;
  uint64_t hash = 1469598103934665603ull;  // FNV-1a over (dtype, elements) of each tensor
  for (const at::Tensor& t : tensors) {
    elements += t.numel();
    for (uint64_t v : {static_cast<uint64_t>(t.scalar_type()), static_cast<uint64_t>(t.numel())}) {
      hash = (hash ^ v) * 1099511628211ull;
    }
  }
  return {elements, tensors.empty() ? -1 : static_cast<int64_t>(tensors[0].scalar_type()),
          static_cast<int64_t>(op), static_cast<int64_t>(tensors.size()),
          static_cast<int64_t>(hash)};
}

std::string RenderAllreduce(const std::vector<int64_t>& d) {
  std::string s = std::to_string(d[0]) + " elements of " +
                  DtypeName(static_cast<at::ScalarType>(d[1])) + " with " +
                  ReduceOpName(static_cast<c10d::ReduceOp::RedOpType>(d[2]));
  if (d[3] != 1)
    s += " in " + std::to_string(d[3]) + " tensors (shapes hash " + std::to_string(d[4]) + ")";
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

void CheckLike(const at::Tensor& t, const at::Tensor& like, int64_t numel, const char* what,
               const std::string& role) {
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "cohort: ", what, ": ", role, " is ",
              DtypeName(t.scalar_type()), " but the input is ", DtypeName(like.scalar_type()));
  TORCH_CHECK(t.numel() == numel, "cohort: ", what, ": ", role, " has ", t.numel(), " elements, ",
              numel, " expected");
}

bool AnyCuda(const std::vector<at::Tensor>& tensors) {
  return std::any_of(tensors.begin(), tensors.end(),
                     [](const at::Tensor& t) { return t.is_cuda(); });
}

at::Tensor HostBytes(size_t bytes, bool pinned) {
  return at::empty({static_cast<int64_t>(bytes)},
                   at::TensorOptions().dtype(at::kByte).pinned_memory(pinned));
}

}  // namespace

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allreduce(std::vector<at::Tensor>& tensors,
                                                             const c10d::AllreduceOptions& opts) {
  CheckOneTensor(tensors, "allreduce");
  const auto red = static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp);
  const bool product = red == c10d::ReduceOp::PRODUCT;
  const ReduceOp op =
      product ? ReduceOp::kSum : LibraryOp(opts.reduceOp, "allreduce", kAllreduceOps);
  auto staged = std::make_shared<StagedTensor>(tensors[0], "allreduce", StagedTensor::kReduce);
  auto descriptor = AllreduceDescriptor(tensors, red);
  return Enqueue(
      c10d::OpType::ALLREDUCE, "allreduce", tensors, [this, staged, op, product, descriptor] {
        COHORT_RETURN_IF_ERROR(CheckAgreement(descriptor, RenderAllreduce));
        COHORT_RETURN_IF_ERROR(product ? AllreduceProduct(staged->host()) : Allreduce(*staged, op));
        staged->CopyBack();
        return Status::Ok();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  TORCH_CHECK(!tensors.empty(), "cohort: allreduce_coalesced needs at least one tensor");
  const auto red = static_cast<c10d::ReduceOp::RedOpType>(opts.reduceOp);
  const bool product = red == c10d::ReduceOp::PRODUCT;
  const ReduceOp op =
      product ? ReduceOp::kSum : LibraryOp(opts.reduceOp, "allreduce_coalesced", kAllreduceOps);
  // One all-reduce per run of tensors of one dtype, over a flat copy of the run.
  auto runs =
      std::make_shared<std::vector<CoalescedRun>>(CoalesceByType(tensors, "allreduce_coalesced"));
  auto descriptor = AllreduceDescriptor(tensors, red);
  return Enqueue(c10d::OpType::ALLREDUCE_COALESCED, "allreduce_coalesced", tensors,
                 [this, runs, op, product, descriptor] {
                   COHORT_RETURN_IF_ERROR(CheckAgreement(descriptor, RenderAllreduce));
                   for (CoalescedRun& run : *runs) {
                     COHORT_RETURN_IF_ERROR(product ? AllreduceProduct(run.flat.host())
                                                    : Allreduce(run.flat, op));
                   }
                   for (CoalescedRun& run : *runs) run.CopyBack();
                   return Status::Ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::barrier(const c10d::BarrierOptions& /*opts*/) {
  return Enqueue(c10d::OpType::BARRIER, "barrier", {}, [this] { return comm_->Barrier(); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::broadcast(std::vector<at::Tensor>& tensors,
                                                             const c10d::BroadcastOptions& opts) {
  CheckOneTensor(tensors, "broadcast");
  CheckRoot(opts.rootRank, getSize(), "broadcast");
  TORCH_CHECK(opts.rootTensor == 0,
              "cohort: broadcast: rootTensor must be 0 (one tensor per process)");
  const int root = static_cast<int>(opts.rootRank);
  auto staged = std::make_shared<StagedTensor>(
      tensors[0], "broadcast", StagedTensor::kBytes,
      getRank() == root ? StagedTensor::kCopyIn : StagedTensor::kNoCopyIn);
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
  }
  auto send = std::make_shared<StagedTensor>(input, "allgather", StagedTensor::kBytes);
  const ByteCarrier carrier = send->carrier();
  at::Tensor recv = HostBytes(carrier.padded_bytes * getSize(), AnyCuda(outputs));
  return Enqueue(c10d::OpType::ALLGATHER, "allgather", outputs,
                 [this, send, carrier, recv, outputs] {
                   COHORT_RETURN_IF_ERROR(AllgatherBytes(send->data(), carrier, recv.data_ptr())
                                              .WithContext("allgather of " + Moving(*send)));
                   for (size_t r = 0; r < outputs.size(); ++r) {
                     CopyBytesInto(recv.narrow(0, static_cast<int64_t>(r * carrier.padded_bytes),
                                               static_cast<int64_t>(carrier.padded_bytes)),
                                   outputs[r]);
                   }
                   return Status::Ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& /*opts*/) {
  CheckLike(output, input, input.numel() * getSize(), "_allgather_base", "the output");
  TORCH_CHECK(output.is_contiguous(), "cohort: _allgather_base needs a contiguous output tensor");
  auto send = std::make_shared<StagedTensor>(input, "_allgather_base", StagedTensor::kBytes);
  const ByteCarrier carrier = send->carrier();
  const size_t bytes = send->bytes();
  if (carrier.padded_bytes == bytes) {
    // Rank blocks lie end to end in the output just as the library writes them.
    auto recv = std::make_shared<StagedTensor>(output, "_allgather_base", StagedTensor::kBytes,
                                               StagedTensor::kNoCopyIn);
    return Enqueue(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output},
                   [this, send, carrier, recv] {
                     COHORT_RETURN_IF_ERROR(AllgatherBytes(send->data(), carrier, recv->data())
                                                .WithContext("allgather of " + Moving(*send)));
                     recv->CopyBack();
                     return Status::Ok();
                   });
  }
  at::Tensor recv = HostBytes(carrier.padded_bytes * getSize(), output.is_cuda());
  return Enqueue(c10d::OpType::_ALLGATHER_BASE, "_allgather_base", {output},
                 [this, send, carrier, recv, output, bytes, numel = input.numel()] {
                   COHORT_RETURN_IF_ERROR(AllgatherBytes(send->data(), carrier, recv.data_ptr())
                                              .WithContext("allgather of " + Moving(*send)));
                   at::Tensor flat = output.view({-1});
                   for (int r = 0; r < getSize(); ++r) {
                     CopyBytesInto(recv.narrow(0, static_cast<int64_t>(r * carrier.padded_bytes),
                                               static_cast<int64_t>(bytes)),
                                   flat.narrow(0, r * numel, numel));
                   }
                   return Status::Ok();
                 });
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
  const ReduceOp op = LibraryOp(opts.reduceOp, "reduce_scatter");
  std::vector<at::Tensor> flats;
  for (const at::Tensor& t : inputs) flats.push_back(t.reshape({-1}).to(at::kCPU));
  auto send =
      std::make_shared<StagedTensor>(at::cat(flats), "reduce_scatter", StagedTensor::kReduce);
  auto recv = std::make_shared<StagedTensor>(output, "reduce_scatter", StagedTensor::kReduce,
                                             StagedTensor::kNoCopyIn);
  return Enqueue(
      c10d::OpType::REDUCE_SCATTER, "reduce_scatter", output_tensors, [this, send, recv, op] {
        COHORT_RETURN_IF_ERROR(
            comm_->ReduceScatter(send->data(), recv->data(), recv->numel(), recv->type(), op));
        recv->CopyBack();
        return Status::Ok();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupCohort::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckLike(input, output, output.numel() * getSize(), "_reduce_scatter_base", "the input");
  const ReduceOp op = LibraryOp(opts.reduceOp, "_reduce_scatter_base");
  auto send = std::make_shared<StagedTensor>(input, "_reduce_scatter_base", StagedTensor::kReduce);
  auto recv = std::make_shared<StagedTensor>(output, "_reduce_scatter_base", StagedTensor::kReduce,
                                             StagedTensor::kNoCopyIn);
  return Enqueue(
      c10d::OpType::_REDUCE_SCATTER_BASE, "_reduce_scatter_base", {output}, [this, send, recv, op] {
        COHORT_RETURN_IF_ERROR(
            comm_->ReduceScatter(send->data(), recv->data(), recv->numel(), recv->type(), op));
        recv->CopyBack();
        return Status::Ok();
      });
}

}  // namespace cohort::torch_backend
