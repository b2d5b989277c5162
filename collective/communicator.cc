#include "collective/communicator.h"

#include <algorithm>
#include <cstdlib>

#include "collective/algorithms/halving_doubling.h"
#include "collective/algorithms/hierarchical_allreduce.h"
#include "collective/algorithms/recursive_doubling.h"
#include "collective/algorithms/reduction_server.h"
#include "collective/algorithms/ring_allreduce.h"
#include "collective/generation.h"
#include "collective/store_bootstrap.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "common/env.h"
#include "common/logging.h"

#ifdef COHORT_HAVE_CUDA
#include "collective/kernels/device_staging.h"
#endif

namespace cohort::collective {
namespace {

// The flight recorder stores these as numbers (common/flight_recorder.h): they must agree.
static_assert(static_cast<uint8_t>(Algorithm::kReductionServer) == 1 &&
              static_cast<uint8_t>(Algorithm::kRing) == 2 &&
              static_cast<uint8_t>(Algorithm::kHalvingDoubling) == 3 &&
              static_cast<uint8_t>(Algorithm::kSharedMemory) == 4 &&
              static_cast<uint8_t>(Algorithm::kHierarchical) == 5 &&
              static_cast<uint8_t>(Algorithm::kRecursiveDoubling) == 6);
static_assert(static_cast<uint8_t>(DataType::kF32) + 1 == 1 &&
              static_cast<uint8_t>(DataType::kF64) + 1 == 2 &&
              static_cast<uint8_t>(DataType::kF16) + 1 == 3 &&
              static_cast<uint8_t>(DataType::kBF16) + 1 == 4 &&
              static_cast<uint8_t>(DataType::kI32) + 1 == 5 &&
              static_cast<uint8_t>(DataType::kI64) + 1 == 6);

std::function<std::string(int)> RankNamer(int num_workers) {
  return [num_workers](int r) {
    if (r < num_workers) return "worker " + std::to_string(r);
    return "reducer " + std::to_string(r - num_workers);
  };
}

}  // namespace

StatusOr<std::unique_ptr<Transport>> OpenCommunicatorTransport(Bootstrap& bootstrap,
                                                               int transport_rank, int num_workers,
                                                               int num_reducers,
                                                               const std::string& generation,
                                                               const CommunicatorOptions& options) {
  if (options.transport == CommunicatorOptions::TransportKind::kLoopback) {
    if (options.loopback_fabric == nullptr)
      return InvalidArgument("loopback transport needs a fabric");
    if (options.loopback_fabric->size() != num_workers + num_reducers) {
      return InvalidArgument("loopback fabric size differs from workers + reducers");
    }
    return options.loopback_fabric->CreateTransport(transport_rank);
  }
  // A job with reducers gets the Reduction Server's small TCP send buffers (see
  // kReductionServerTcpSendBufferBytes); its ring measured the same with them.
  return OpenGenerationTransport(bootstrap, options.key_prefix, generation, transport_rank,
                                 num_workers + num_reducers, options.timeout,
                                 RankNamer(num_workers),
                                 num_reducers > 0 ? kReductionServerTcpSendBufferBytes : 0);
}

Status CommunicatorOptionsFromEnvironment(CommunicatorOptions* options) {
  COHORT_ASSIGN_OR_RETURN(int timeout_ms, IntFromEnvironment("COHORT_COMM_TIMEOUT_MS", 60000));
  COHORT_ASSIGN_OR_RETURN(
      int chunk, IntFromEnvironment("COHORT_CHUNK_BYTES", static_cast<int>(options->chunk_bytes)));
  if (timeout_ms == 0) return InvalidArgument("COHORT_COMM_TIMEOUT_MS must be positive");
  if (chunk != 0 && chunk < 1024)
    return InvalidArgument("COHORT_CHUNK_BYTES must be at least 1024 (or 0: chosen by placement)");
  options->timeout = std::chrono::milliseconds(timeout_ms);
  options->chunk_bytes = static_cast<size_t>(chunk);
  COHORT_ASSIGN_OR_RETURN(options->max_flows,
                          IntFromEnvironment("COHORT_RS_MAX_FLOWS", options->max_flows));
  if (options->max_flows < -1) {
    return InvalidArgument("COHORT_RS_MAX_FLOWS must be 0 (no limit) or more, not " +
                           std::to_string(options->max_flows));
  }
  if (const char* algo = std::getenv("COHORT_ALLREDUCE_ALGORITHM"); algo != nullptr && *algo) {
    std::optional<Algorithm> parsed = ParseAlgorithm(algo);
    if (!parsed) {
      return InvalidArgument(std::string("COHORT_ALLREDUCE_ALGORITHM='") + algo + "' is not " +
                             AlgorithmChoice());
    }
    options->algorithm = *parsed;
  }
  if (const char* wire = std::getenv("COHORT_WIRE_DTYPE"); wire != nullptr) {
    const std::string_view w(wire);
    if (w == "bf16" || w == "f16") {
      options->wire_dtype = *ParseDataType(w);
    } else if (w.empty() || w == "f32" || w == "none") {
      options->wire_dtype = DataType::kF32;
    } else {
      return InvalidArgument("COHORT_WIRE_DTYPE='" + std::string(w) +
                             "' is not bf16, f16, f32 or none");
    }
  }
  return Status::Ok();
}

StatusOr<std::unique_ptr<Communicator>> Communicator::Create(Bootstrap& bootstrap, int rank,
                                                             int world_size, int num_reducers,
                                                             CommunicatorOptions options) {
  if (world_size < 1 || rank < 0 || rank >= world_size || num_reducers < 0) {
    return InvalidArgument("communicator: rank " + std::to_string(rank) + " of " +
                           std::to_string(world_size) + " workers and " +
                           std::to_string(num_reducers) + " reducers is not valid");
  }
  if (options.chunk_bytes != 0 && options.chunk_bytes < 64) {
    return InvalidArgument(
        "communicator: chunk_bytes must be at least 64 (or 0: chosen by placement)");
  }
  if (options.wire_dtype != DataType::kF32 && options.wire_dtype != DataType::kBF16 &&
      options.wire_dtype != DataType::kF16) {
    return InvalidArgument("communicator: wire_dtype must be bf16, f16 or f32 (off), not " +
                           std::string(DataTypeName(options.wire_dtype)));
  }
  if (options.wire_dtype != DataType::kF32 && num_reducers == 0 && rank == 0) {
    spdlog::info("wire compression ({}) applies to the Reduction Server; this job has no reducers",
                 DataTypeName(options.wire_dtype));
  }
  std::unique_ptr<Communicator> comm(new Communicator());
  comm->rank_ = rank;
  comm->world_size_ = world_size;
  comm->num_reducers_ = num_reducers;
  comm->options_ = options;
  comm->recorder_ =
      options.flight_recorder != nullptr ? options.flight_recorder : FlightRecorder::ForProcess();
  if (comm->recorder_ != nullptr) comm->flight_comm_id_ = comm->recorder_->RegisterCommunicator();
  const Deadline deadline = SteadyClock::now() + options.timeout;
  if (rank == 0) {
    COHORT_ASSIGN_OR_RETURN(comm->generation_,
                            PublishGeneration(bootstrap, options.key_prefix, world_size));
  } else {
    COHORT_ASSIGN_OR_RETURN(comm->generation_,
                            AwaitGeneration(bootstrap, options.key_prefix, rank, deadline));
  }
  COHORT_ASSIGN_OR_RETURN(comm->transport_,
                          OpenCommunicatorTransport(bootstrap, rank, world_size, num_reducers,
                                                    comm->generation_, options));
  comm->stall_notices_ = std::make_unique<StallNotices>(*comm->transport_, world_size);
  for (int w = 0; w < world_size; ++w) comm->all_workers_.push_back(w);
  // Every rank derives these from the same placement, so all workers agree.
  const Placement& placement = comm->transport_->placement();
  const bool shared_memory_allowed = placement.shared_memory;
  const bool workers_on_this_host = placement.AllOnHostOf(rank, 0, world_size);
  comm->one_host_shared_memory_ = shared_memory_allowed && workers_on_this_host &&
                                  placement.AllOnHostOf(rank, world_size, num_reducers);
  if (comm->options_.chunk_bytes == 0) {
    comm->options_.chunk_bytes =
        comm->one_host_shared_memory_ ? kSameHostChunkBytes : kDefaultChunkBytes;
  }
  if (comm->options_.max_flows < 0) {
    comm->options_.max_flows = comm->one_host_shared_memory_ ? 0 : kCrossHostMaxFlows;
  }
  // Slots are the one-host pipeline unit unless chunk_bytes was set.
  const size_t slot_bytes = options.chunk_bytes != 0 ? options.chunk_bytes : kSameHostChunkBytes;
  if (shared_memory_allowed && workers_on_this_host) {
    // Every worker on this host (reducers may run elsewhere): the workers need no network at all.
    COHORT_ASSIGN_OR_RETURN(comm->shared_memory_,
                            SharedMemoryGroup::Create(
                                bootstrap, GenerationPrefix(options.key_prefix, comm->generation_),
                                rank, world_size, slot_bytes, deadline));
  } else if (shared_memory_allowed) {
    COHORT_RETURN_IF_ERROR(comm->SetUpHierarchy(bootstrap, placement, slot_bytes, deadline));
  }
  return comm;
}

Status Communicator::SetUpHierarchy(Bootstrap& bootstrap, const Placement& placement,
                                    size_t slot_bytes, Deadline deadline) {
  const std::string prefix = GenerationPrefix(options_.key_prefix, generation_);
  // Hosts in the order of their first worker; on each, workers in rank order.
  const std::vector<std::vector<int>> members = placement.GroupByHost(world_size_);
  int my_host = -1;
  for (size_t h = 0; h < members.size(); ++h) {
    if (std::find(members[h].begin(), members[h].end(), rank_) != members[h].end()) {
      my_host = static_cast<int>(h);
    }
  }
  const size_t per_host = members[0].size();
  for (const auto& m : members) {
    if (m.size() != per_host) return Status::Ok();
  }
  if (members.size() < 2 || per_host < 2) return Status::Ok();
  const auto& local = members[my_host];
  const int local_rank =
      static_cast<int>(std::find(local.begin(), local.end(), rank_) - local.begin());
  COHORT_ASSIGN_OR_RETURN(
      auto group,
      SharedMemoryGroup::Create(bootstrap, prefix + "/host" + std::to_string(my_host), local_rank,
                                static_cast<int>(per_host), slot_bytes, deadline, local));
  // Every worker must agree: one host without shared memory means no hierarchy anywhere.
  COHORT_RETURN_IF_ERROR(
      bootstrap.Put(prefix + "/hierarchy/" + std::to_string(rank_), group ? "1" : "0"));
  bool everyone = group != nullptr;
  for (int r = 0; r < world_size_; ++r) {
    if (r == rank_) continue;
    auto got = bootstrap.Get(prefix + "/hierarchy/" + std::to_string(r), deadline);
    if (!got.ok())
      return got.status().WithContext("worker " + std::to_string(r) + "'s shared memory");
    everyone = everyone && *got == "1";
  }
  if (!everyone) return Status::Ok();
  host_memory_ = std::move(group);
  host_workers_ = local;
  for (const auto& m : members) across_hosts_.push_back(m[local_rank]);
  return Status::Ok();
}

StatusOr<std::unique_ptr<Communicator>> Communicator::FromEnvironment() {
  COHORT_ASSIGN_OR_RETURN(int rank, IntFromEnvironment("RANK", std::nullopt));
  COHORT_ASSIGN_OR_RETURN(int world, IntFromEnvironment("WORLD_SIZE", std::nullopt));
  COHORT_ASSIGN_OR_RETURN(int reducers, IntFromEnvironment("COHORT_NUM_REDUCERS", 0));
  CommunicatorOptions options;
  COHORT_RETURN_IF_ERROR(CommunicatorOptionsFromEnvironment(&options));
  const char* addr = std::getenv("COHORT_BOOTSTRAP_ADDR");
  if (addr == nullptr || *addr == '\0') {
    if (world == 1 && reducers == 0) {
      // A job of one: nothing to find. Loopback of size one.
      auto fabric = std::make_unique<LoopbackFabric>(1);
      InMemoryBootstrap local;
      options.transport = CommunicatorOptions::TransportKind::kLoopback;
      options.loopback_fabric = fabric.get();
      COHORT_ASSIGN_OR_RETURN(auto comm, Create(local, 0, 1, 0, options));
      comm->owned_fabric_ = std::move(fabric);
      return comm;
    }
    return InvalidArgument("environment variable COHORT_BOOTSTRAP_ADDR is not set");
  }
  COHORT_ASSIGN_OR_RETURN(JobBootstrap job, BootstrapFromEnvironment(rank == 0, options.timeout));
  COHORT_ASSIGN_OR_RETURN(auto comm, Create(*job.client, rank, world, reducers, options));
  comm->job_ = std::move(job);
  return comm;
}

Communicator::~Communicator() {
  if (transport_ != nullptr && num_reducers_ > 0 && !poisoned_) {
    (void)SendStopToReducers(*transport_, world_size_, num_reducers_,
                             SteadyClock::now() + std::chrono::milliseconds(2000));
  }
  stall_notices_.reset();
  transport_.reset();
  job_.client.reset();
  job_.server.reset();
}

Status Communicator::Allreduce(void* data, size_t count, DataType type, ReduceOp op,
                               Algorithm algorithm) {
  COHORT_ASSIGN_OR_RETURN(PendingAllreduce pending,
                          StartAllreduce(data, count, type, op, algorithm));
  return pending.Finish();
}

StatusOr<PendingAllreduce> Communicator::StartAllreduce(void* data, size_t count, DataType type,
                                                        ReduceOp op, Algorithm algorithm) {
  COHORT_RETURN_IF_ERROR(CheckReduction("all-reduce", type, op));
  if (count > 0 && data == nullptr) return InvalidArgument("all-reduce: null buffer");
  if (algorithm == Algorithm::kReductionServer && num_reducers_ == 0) {
    return InvalidArgument(
        "all-reduce: the Reduction Server needs reducers (COHORT_NUM_REDUCERS=0)");
  }
  if (algorithm == Algorithm::kAuto) algorithm = AutoAlgorithm(count * DataTypeSize(type));
  if (algorithm == Algorithm::kHalvingDoubling && !HalvingDoublingFits(world_size_)) {
    return InvalidArgument(
        "all-reduce: halving-doubling needs a power-of-two number of workers, not " +
        std::to_string(world_size_));
  }
  if (algorithm == Algorithm::kHierarchical && host_memory_ == nullptr) {
    return InvalidArgument(
        "all-reduce: hierarchical needs workers on two or more hosts with as many (at least two) "
        "on each, UCX shared memory allowed (UCX_TLS) and /dev/shm room for their segments");
  }
  if (algorithm == Algorithm::kSharedMemory && shared_memory_ == nullptr) {
    return InvalidArgument(
        "all-reduce: shared memory needs every rank on this host with UCX shared memory allowed "
        "(UCX_TLS), and /dev/shm room for each worker's segment");
  }
  if (pending_allreduces_.load() > (algorithm == Algorithm::kReductionServer ? 1 : 0)) {
    return FailedPrecondition(
        "all-reduce: earlier all-reduces are still pending (finish them first: at most one may be "
        "pending when the next Reduction Server all-reduce starts, none before another algorithm)");
  }
  COHORT_RETURN_IF_ERROR(CheckUsable());
#ifdef COHORT_HAVE_CUDA
  if (count > 0 && IsDevicePointer(data)) {
    // Staged whole: the pinned buffer is this thread's, and the next call reuses it.
    DeviceStaging staging;
    COHORT_RETURN_IF_ERROR(staging.CopyIn(data, count * DataTypeSize(type)));
    COHORT_ASSIGN_OR_RETURN(PendingAllreduce pending,
                            StartAllreduceHost(staging.host(), count, type, op, algorithm));
    COHORT_RETURN_IF_ERROR(pending.Finish());
    COHORT_RETURN_IF_ERROR(staging.CopyOut(data));
    return PendingAllreduce();
  }
#endif
  return StartAllreduceHost(data, count, type, op, algorithm);
}

StatusOr<PendingAllreduce> Communicator::StartAllreduceHost(void* data, size_t count, DataType type,
                                                            ReduceOp op, Algorithm algorithm) {
  AllreduceOptions o;
  o.data = data;
  o.count = count;
  o.type = type;
  o.op = op;
  o.seq = seq_++;
  // One clock reading serves the deadline and the recorder's start time.
  const auto now = SteadyClock::now();
  o.deadline = now + options_.timeout;
  FlightRecord record = CallRecord(FlightOp::kAllreduce, o.seq, type, count, -1);
  record.algorithm = static_cast<uint8_t>(algorithm);
  record.start_ns = FlightClockNs(now);
  FlightRecording recording(recorder_, record);
  o.chunk_bytes = options_.chunk_bytes;
  o.num_workers = world_size_;
  o.num_reducers = num_reducers_;
  o.window = options_.window;
  o.max_flows = options_.max_flows;
  o.wire_type = options_.wire_dtype;
  // Fill and drain matter on links; on one host smaller chunks only cost more messages.
  o.chunks_per_reducer = one_host_shared_memory_ ? 4 : kPipelineChunksPerReducer;
  // Workers whose calls never meet in one algorithm's exchanges (sizes that led kAuto to different
  // algorithms, or another collective on some worker) wait for each other: every call is watched
  // for that (stalled_call_check.h); in the hierarchical all-reduce, among the workers of its stage
  // across hosts. The Reduction Server's call owns its check (its second half may run on another
  // thread while the next call starts); any other call uses call_check_.
  std::unique_ptr<StalledCallCheck> stall;
  o.stall_check =
      WatchCall(o.seq,
                AgreementCall{.count = count,
                              .type = static_cast<uint8_t>(type),
                              .op = static_cast<uint8_t>(op),
                              .rank = rank_},
                algorithm == Algorithm::kHierarchical ? across_hosts_ : all_workers_, "all-reduce",
                now, &o.history, algorithm == Algorithm::kReductionServer ? &stall : nullptr);
  Status s;
  switch (algorithm) {
    case Algorithm::kReductionServer: {
      // Two calls in flight at most, of consecutive sequence numbers: each has its own staging.
      auto call = std::make_unique<ReductionServerCall>(*transport_, o, &wire_staging_[o.seq & 1],
                                                        std::move(stall));
      s = call->Send();
      if (!s.ok()) break;
      PendingAllreduce pending;
      pending.comm_ = this;
      pending.call_ = std::move(call);
      pending.recording_ = std::move(recording);
      ++pending_allreduces_;
      return pending;
    }
    case Algorithm::kHalvingDoubling:
      s = HalvingDoublingAllreduce(*transport_, o);
      break;
    case Algorithm::kRecursiveDoubling:
      s = RecursiveDoublingAllreduce(*transport_, o);
      break;
    case Algorithm::kSharedMemory:
      s = shared_memory_->Allreduce(o);
      break;
    case Algorithm::kHierarchical:
      s = HierarchicalAllreduce(*host_memory_, host_workers_, *transport_, across_hosts_, o);
      break;
    default:
      s = RingAllreduce(*transport_, o);
      break;
  }
  call_check_.reset();
  recording.Finish(s);
  if (s.ok()) return PendingAllreduce();
  poisoned_ = true;
  return NameCall(recording.record(), s);
}

StalledCallCheck* Communicator::WatchCall(uint32_t seq, AgreementCall mine,
                                          const std::vector<int>& workers, std::string what,
                                          SteadyClock::time_point started, CallHistory* before,
                                          std::unique_ptr<StalledCallCheck>* owned) {
  *before = history_;
  mine.history = history_.digest;
  history_ = history_.After(mine);
  if (started - last_drain_ >= kStallDrainInterval) {
    stall_notices_->Drain(seq);
    last_drain_ = started;
  }
  if (owned != nullptr) {
    *owned = std::make_unique<StalledCallCheck>(*stall_notices_, workers, mine, seq,
                                                std::move(what), started);
    return owned->get();
  }
  call_check_.emplace(*stall_notices_, workers, mine, seq, std::move(what), started);
  return &*call_check_;
}

void Communicator::Cancel() {
  cancelled_ = true;
  poisoned_ = true;
  transport_->Cancel();
  if (shared_memory_ != nullptr) shared_memory_->Cancel();
  if (host_memory_ != nullptr) host_memory_->Cancel();
}

Status Communicator::CheckUsable() const {
  if (cancelled_) return Cancelled("the communicator was cancelled (its process gave up on it)");
  if (poisoned_) return Aborted("communicator is poisoned by an earlier error; rebuild it");
  return Status::Ok();
}

PendingAllreduce::PendingAllreduce() = default;
PendingAllreduce::PendingAllreduce(PendingAllreduce&&) noexcept = default;

PendingAllreduce& PendingAllreduce::operator=(PendingAllreduce&& other) noexcept {
  if (this != &other) {
    Abandon();
    comm_ = other.comm_;
    call_ = std::move(other.call_);
    recording_ = std::move(other.recording_);
  }
  return *this;
}

PendingAllreduce::~PendingAllreduce() { Abandon(); }

void PendingAllreduce::Abandon() {
  if (call_ == nullptr) return;
  // Its requests go (each wait bounded), and the sequence of calls it belonged to is broken.
  call_.reset();
  recording_.Finish(Cancelled("all-reduce abandoned before it finished"));
  comm_->poisoned_ = true;
  comm_->pending_allreduces_.fetch_sub(1);
}

Status PendingAllreduce::Finish() {
  if (call_ == nullptr) return Status::Ok();
  Status s = call_->Finish();
  call_.reset();
  recording_.Finish(s);
  comm_->pending_allreduces_.fetch_sub(1);
  if (s.ok()) return s;
  comm_->poisoned_ = true;
  return Communicator::NameCall(recording_.record(), s);
}

FlightRecord Communicator::CallRecord(FlightOp op, uint32_t seq, DataType type, size_t count,
                                      int peer) const {
  FlightRecord r;
  r.op = op;
  r.op_seq = seq;
  r.comm_id = flight_comm_id_;
  r.bytes = count * DataTypeSize(type);
  r.dtype = count > 0 ? static_cast<uint8_t>(static_cast<uint8_t>(type) + 1) : 0;
  r.peer = peer;
  r.group_size = world_size_;
  r.enqueue_ns = enqueue_ns_;
  return r;
}

Status Communicator::NameCall(const FlightRecord& record, const Status& status) {
  return status.WithContext(DescribeFlightOp(record));
}

AllreduceSupport Communicator::allreduce_support() const {
  AllreduceSupport support;
  support.num_workers = world_size_;
  support.num_reducers = num_reducers_;
  support.one_host = one_host_shared_memory_;
  support.shared_memory = shared_memory_ != nullptr;
  support.host_groups = host_memory_ != nullptr;
  return support;
}

Algorithm Communicator::AutoAlgorithm(size_t bytes) const { return allreduce_choice().For(bytes); }
}  // namespace cohort::collective
