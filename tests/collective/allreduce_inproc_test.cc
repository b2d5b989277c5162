// All-reduce over the in-process loopback transport: workers and reducers as threads, every data
// type and op, counts 0, 1, odd and larger-than-a-chunk, 1 to 8 workers, 0 to n reducers.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "collective/algorithms/halving_doubling.h"
#include "collective/algorithms/reduction_server.h"
#include "collective/algorithms/stalled_call_check.h"
#include "collective/communicator.h"
#include "collective/reducer.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/loopback_job.h"
#include "tests/collective/selection_cases.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// A job of `workers` and `reducers` over loopback, pipelined in `chunk_bytes` with window 3.
void RunJob(int workers, int reducers, size_t chunk_bytes, const testing::WorkerBody& body,
            std::vector<std::string>* failures) {
  testing::RunLoopbackJob(workers, reducers,
                          testing::LoopbackOptions(milliseconds(30000), chunk_bytes, 3), body,
                          failures);
}

// Runs one case twice on this rank's input; records in `f`, under `name`, a failed call, a result
// off the double-precision reference, or a repeat that differs. Returns the result, or nothing
// when a call failed.
std::optional<std::vector<char>> RunCase(Communicator& comm, Algorithm algo, DataType type,
                                         ReduceOp op, size_t count, const std::string& name,
                                         std::vector<std::string>* f) {
  std::vector<char> a = testing::MakeInput(type, comm.rank(), count);
  std::vector<char> b = a;
  Status s = comm.Allreduce(a.data(), count, type, op, algo);
  if (!s.ok()) {
    f->push_back(name + ": " + s.ToString());
    return std::nullopt;
  }
  s = comm.Allreduce(b.data(), count, type, op, algo);
  if (!s.ok()) {
    f->push_back(name + " (repeat): " + s.ToString());
    return std::nullopt;
  }
  const std::string bad = testing::CheckResult(type, op, comm.size(), a.data(), count);
  if (!bad.empty()) f->push_back(name + ": " + bad);
  if (a != b) f->push_back(name + ": repeated run differs");
  return a;
}

class InprocAllreduceTest : public ::testing::TestWithParam<std::tuple<int, int>> {};

TEST_P(InprocAllreduceTest, EveryTypeOpAndCountMatchesReferenceAndRepeatsBitIdentically) {
  const auto [workers, reducers] = GetParam();
  std::vector<std::string> failures;
  // Results of rank 0 per case, to compare every rank's bytes against.
  std::mutex mu;
  std::map<std::string, std::vector<char>> first_result;
  RunJob(
      workers, reducers, 4096,
      [&](Communicator& comm, std::vector<std::string>* f) {
        std::vector<Algorithm> algos = {Algorithm::kAuto, Algorithm::kRecursiveDoubling};
        if (reducers > 0) algos.push_back(Algorithm::kRing);
        if (HalvingDoublingFits(workers)) algos.push_back(Algorithm::kHalvingDoubling);
        for (Algorithm algo : algos) {
          for (DataType type : testing::kAllTypes) {
            for (ReduceOp op : testing::OpsFor(type)) {
              for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{20011}}) {
                const std::string name =
                    std::string(AlgorithmName(algo)) + "/" + std::string(DataTypeName(type)) + "/" +
                    std::string(ReduceOpName(op)) + "/" + std::to_string(count);
                std::optional<std::vector<char>> a = RunCase(comm, algo, type, op, count, name, f);
                if (!a) return;
                std::lock_guard<std::mutex> lock(mu);
                auto [it, inserted] = first_result.emplace(name, *a);
                if (!inserted && it->second != *a) f->push_back(name + ": ranks disagree bit-wise");
              }
            }
          }
        }
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(WorkersAndReducers, InprocAllreduceTest,
                         ::testing::Values(std::make_tuple(1, 0), std::make_tuple(2, 0),
                                           std::make_tuple(3, 0), std::make_tuple(5, 0),
                                           std::make_tuple(8, 0), std::make_tuple(1, 1),
                                           std::make_tuple(2, 1), std::make_tuple(3, 2),
                                           std::make_tuple(4, 4), std::make_tuple(5, 3),
                                           std::make_tuple(8, 2)),
                         [](const auto& info) {
                           return "w" + std::to_string(std::get<0>(info.param)) + "_r" +
                                  std::to_string(std::get<1>(info.param));
                         });

// min and max over a NaN depend on the operands' order (reduce_ops.h); recursive doubling puts the
// lower rank's value first at every step, so the partners of a step, and every worker, end with the
// same bytes even then. 3 workers (one folds in) and 4.
TEST(RecursiveDoublingTest, NaNsUnderMinAndMaxLeaveEveryWorkerWithTheSameBytes) {
  for (int workers : {3, 4}) {
    std::vector<std::string> failures;
    std::mutex mu;
    std::map<std::string, std::vector<float>> first;
    RunJob(
        workers, 0, 4096,
        [&](Communicator& comm, std::vector<std::string>* f) {
          for (ReduceOp op : {ReduceOp::kMin, ReduceOp::kMax}) {
            // Element i is NaN on worker i % workers, a number elsewhere.
            std::vector<float> v(8);
            for (size_t i = 0; i < v.size(); ++i) {
              v[i] = static_cast<int>(i) % comm.size() == comm.rank()
                         ? std::numeric_limits<float>::quiet_NaN()
                         : static_cast<float>(comm.rank() + 1);
            }
            Status s = comm.Allreduce(v.data(), v.size(), DataType::kF32, op,
                                      Algorithm::kRecursiveDoubling);
            if (!s.ok()) return f->push_back(s.ToString());
            std::lock_guard<std::mutex> lock(mu);
            auto [it, inserted] = first.emplace(std::string(ReduceOpName(op)), v);
            if (!inserted && std::memcmp(it->second.data(), v.data(), v.size() * sizeof(float)))
              f->push_back(std::string(ReduceOpName(op)) + ": worker " +
                           std::to_string(comm.rank()) + " holds other bytes");
          }
        },
        &failures);
    for (const auto& f : failures) ADD_FAILURE() << workers << " workers: " << f;
  }
}

// Workers whose calls differ (count, type, op, or an empty call against a full one) under
// recursive doubling, halving-doubling and the ring: every worker, the odd one out included, fails
// with kInvalidArgument naming a worker whose call differs from its own and quoting both calls
// (not a deadline, nor a result), and is poisoned. The odd one out is a worker that folds in
// (worker 0 where the count is not a power of two), its partner (1), or the last. The ring runs
// 1000-element calls in one piece a step, and 100000-element ones in 64 KiB pieces (the first
// piece's rest and the later pieces drained behind the header).
TEST(AllreduceAgreementTest, WorkersThatDisagreeAllFailNamingOneWhoseCallDiffers) {
  struct Setup {
    Algorithm algo;
    int workers;
    size_t count = 1000;
    size_t chunk_bytes = 4096;
  };
  const std::vector<Setup> setups = {{Algorithm::kRecursiveDoubling, 2},
                                     {Algorithm::kRecursiveDoubling, 3},
                                     {Algorithm::kRecursiveDoubling, 5},
                                     {Algorithm::kRecursiveDoubling, 6},
                                     {Algorithm::kRecursiveDoubling, 8},
                                     {Algorithm::kHalvingDoubling, 2},
                                     {Algorithm::kHalvingDoubling, 4},
                                     {Algorithm::kHalvingDoubling, 8},
                                     {Algorithm::kRing, 2},
                                     {Algorithm::kRing, 3},
                                     {Algorithm::kRing, 5},
                                     {Algorithm::kRing, 3, 100000, 65536},
                                     {Algorithm::kRing, 4, 100000, 65536}};
  for (const Setup& setup : setups) {
    const int workers = setup.workers;
    const testing::AllreduceCall common = {"", setup.count};
    for (int odd : {0, 1, workers - 1}) {
      if (odd == 1 && workers == 2) continue;  // the last already
      for (const testing::AllreduceCall& variant : testing::OddCalls(setup.count, true)) {
        const std::string name = std::string(AlgorithmName(setup.algo)) + ", " +
                                 std::to_string(workers) + " workers, " +
                                 std::to_string(setup.count) + " elements, worker " +
                                 std::to_string(odd) + "'s " + variant.name;
        std::vector<std::string> failures;
        RunJob(
            workers, 0, setup.chunk_bytes,
            [&](Communicator& comm, std::vector<std::string>* f) {
              const testing::AllreduceCall& call = comm.rank() == odd ? variant : common;
              std::vector<char> data(call.count * DataTypeSize(call.type) + 1);
              const Status s =
                  comm.Allreduce(data.data(), call.count, call.type, call.op, setup.algo);
              const std::string problem =
                  testing::DisagreementProblem(s, comm.rank(), odd, common, variant);
              if (!problem.empty()) f->push_back(problem);
              const Status after = comm.Barrier();
              if (after.code() != StatusCode::kAborted)
                f->push_back("not poisoned: " + after.ToString());
            },
            &failures);
        for (const auto& f : failures) ADD_FAILURE() << name << ": " << f;
      }
    }
  }
}

// Runs `body` on each worker of a loopback job whose workers' calls disagree, under a 60 s deadline
// (10 s with reducers: they wait that long for a worker that never sends its chunks), and reports
// what the workers found under `name`.
void RunDisagreeingJob(const std::string& name, int workers, int reducers,
                       const testing::WorkerBody& body,
                       const testing::FabricOptions& fabric_options = {}) {
  std::vector<std::string> failures;
  std::vector<Status> reducer_status(static_cast<size_t>(reducers));
  testing::RunLoopbackJob(
      workers, reducers,
      testing::LoopbackOptions(milliseconds(reducers > 0 ? 10000 : 60000), 65536), body, &failures,
      &reducer_status, fabric_options);
  for (const auto& f : failures) ADD_FAILURE() << name << ": " << f;
}

// A fabric whose sends of up to 8 KiB complete as posted (as UCX's and TCP's small sends do), so a
// worker can end a call before its peers join. `hosts`: empty, every worker on a host of its own
// without shared memory; else each worker's host, a letter each, shared memory allowed ("aaa":
// one host, the shared-memory all-reduce; "aabb": two hosts of two, the hierarchical).
testing::FabricOptions EagerFabric(const std::string& hosts) {
  testing::FabricOptions fabric;
  fabric.eager_limit = 8192;
  if (!hosts.empty()) {
    fabric.placement = Placement{.shared_memory = true};
    for (char host : hosts) fabric.placement->hosts.emplace_back(1, host);
  }
  return fabric;
}

// Workers whose calls differ in size enough that kAuto runs different algorithms for them
// (recursive doubling against halving-doubling, the ring or the Reduction Server; halving-doubling
// against the ring or the Reduction Server) never meet in an algorithm's exchanges; the stall
// notices (stalled_call_check.h) still fail every worker, the odd one out included, with
// kInvalidArgument naming a worker whose call differs and quoting both calls, long before the 60 s
// deadline would (the error is not kDeadlineExceeded). With reducers the job runs under a 10 s
// deadline: the reducers wait that long for the worker that never sent its chunks.
TEST(AllreduceAgreementTest, WorkersWhoseSizesPickDifferentAlgorithmsAllFailNamingOne) {
  struct Setup {
    int workers;
    int reducers;
    size_t common;  // elements of float32: 1000 recursive doubling, 10000 halving-doubling
    size_t odd;
    std::vector<int> odd_workers;
  };
  const std::vector<Setup> setups = {
      {4, 0, 1000, 10000, {0, 1, 3}},  // recursive doubling, halving-doubling
      {4, 0, 1000, 100000, {0, 3}},    // recursive doubling, the ring
      {4, 0, 100000, 10000, {2}},      // the ring, halving-doubling
      {3, 0, 1000, 100000, {0, 2}},    // recursive doubling (3 workers), the ring
      {4, 2, 1000, 100000, {3}},       // recursive doubling, the Reduction Server
      {4, 2, 100000, 10000, {1}},      // the Reduction Server, halving-doubling
  };
  for (const Setup& setup : setups) {
    for (int odd : setup.odd_workers) {
      const testing::AllreduceCall common = {"", setup.common};
      const testing::AllreduceCall variant = {"size", setup.odd};
      const std::string name = std::to_string(setup.workers) + " workers, " +
                               std::to_string(setup.reducers) + " reducers, " +
                               std::to_string(setup.common) + " elements, worker " +
                               std::to_string(odd) + "'s " + std::to_string(setup.odd);
      RunDisagreeingJob(
          name, setup.workers, setup.reducers,
          [&](Communicator& comm, std::vector<std::string>* f) {
            const testing::AllreduceCall& call = comm.rank() == odd ? variant : common;
            std::vector<float> data(call.count, 1.0f);
            const Status s = comm.Allreduce(data.data(), call.count, call.type, call.op);
            const std::string problem =
                testing::DisagreementProblem(s, comm.rank(), odd, common, variant);
            if (!problem.empty()) f->push_back(problem);
          });
    }
  }
}

// Workers in calls of different collectives at the same point of their sequence (an all-reduce
// against a barrier, an allgather or an alltoall, as a script whose ranks took different paths
// makes them; a barrier against an allgather) never meet in one algorithm's exchanges, and none of
// these calls finishes without every worker. The stall notices fail every worker, the odd one out
// included, with kInvalidArgument quoting the other side's call, long before the deadline (the
// error is not kDeadlineExceeded), and poison the communicator.
TEST(CollectiveAgreementTest, WorkersInCallsOfDifferentCollectivesAllFailQuotingTheOther) {
  struct Call {
    std::string quoted;  // as the errors quote it
    std::function<Status(Communicator&)> make;
  };
  auto allreduce = [](size_t count) {
    return Call{"all-reduce of " + std::to_string(count) + " f32 (sum)", [count](Communicator& c) {
                  std::vector<float> data(count, 1.0f);
                  return c.Allreduce(data.data(), count, DataType::kF32, ReduceOp::kSum);
                }};
  };
  const Call barrier{"barrier", [](Communicator& c) { return c.Barrier(); }};
  const Call allgather{"allgather of 8 i64", [](Communicator& c) {
                         std::vector<int64_t> mine(8, c.rank()), all(8 * c.size());
                         return c.Allgather(mine.data(), all.data(), 8, DataType::kI64);
                       }};
  const Call alltoall{"alltoall of 2 f32", [](Communicator& c) {
                        std::vector<float> send(2 * c.size(), 1.0f), recv(2 * c.size());
                        return c.Alltoall(send.data(), recv.data(), 2, DataType::kF32);
                      }};
  struct Setup {
    int workers;
    int reducers;
    Call common;
    Call odd;
    std::vector<int> odd_workers;
  };
  const std::vector<Setup> setups = {
      {4, 0, allreduce(1000), barrier, {0, 3}},  // recursive doubling
      {4, 0, allreduce(10000), allgather, {1}},  // halving-doubling
      {3, 0, allreduce(100000), alltoall, {2}},  // the ring
      {4, 2, allreduce(100000), barrier, {1}},   // the Reduction Server
      {3, 0, barrier, allreduce(1000), {0}},     // the odd one all-reduces
      {4, 0, allgather, barrier, {2}},           // neither all-reduces
  };
  for (const Setup& setup : setups) {
    for (int odd : setup.odd_workers) {
      const std::string name = std::to_string(setup.workers) + " workers, " +
                               std::to_string(setup.reducers) + " reducers, " +
                               setup.common.quoted + ", worker " + std::to_string(odd) + "'s " +
                               setup.odd.quoted;
      RunDisagreeingJob(name, setup.workers, setup.reducers,
                        [&](Communicator& comm, std::vector<std::string>* f) {
                          const bool is_odd = comm.rank() == odd;
                          const Status s = (is_odd ? setup.odd : setup.common).make(comm);
                          const std::string& theirs = (is_odd ? setup.common : setup.odd).quoted;
                          if (s.code() != StatusCode::kInvalidArgument ||
                              s.message().find("called " + theirs) == std::string::npos) {
                            f->push_back("worker " + std::to_string(comm.rank()) +
                                         " did not fail quoting " + theirs + ": " + s.ToString());
                          }
                          const Status after = comm.Barrier();
                          if (after.code() != StatusCode::kAborted)
                            f->push_back("not poisoned: " + after.ToString());
                        });
    }
  }
}

// A worker whose part of a rooted collective ends without waiting for the others (a broadcast's
// root, a gather's non-roots: their sends leave eagerly, as on UCX and TCP) goes on to its next
// call while the others are still in that one: when their calls differ there, the workers wait at
// different points of their sequence and never meet. The stall notices still fail every worker
// with kInvalidArgument quoting the other side's call, long before the 60 s deadline (the error is
// not kDeadlineExceeded); the worker ahead names how many calls back the two differ, up to as many
// as the workers remember (StallNotices::kKeepBehind). On one host
// the shared-memory all-reduce, which keeps no calls apart by their place in the sequence, would
// let the worker ahead's all-reduce meet the others' (of the same size): it compares those places
// too, and fails the same way at once; in the hierarchical all-reduce (two hosts of two) the
// finding reaches the workers of the other stage too (the across-hosts peer of the worker that
// found it first waited for the deadline before).
TEST(CollectiveAgreementTest,
     AWorkerAheadOfTheOthersByEagerCallsFailsWithThemWhenTheirCallsDiffer) {
  auto allreduce = [](Communicator& c) {
    std::vector<float> data(1000, 1.0f);
    return c.Allreduce(data.data(), data.size(), DataType::kF32, ReduceOp::kSum);
  };
  auto large_allreduce = [](Communicator& c) {  // on the Reduction Server where there are reducers
    std::vector<float> data(100000, 1.0f);
    return c.Allreduce(data.data(), data.size(), DataType::kF32, ReduceOp::kSum);
  };
  auto broadcast = [](Communicator& c) {
    std::vector<float> data(8, 1.0f);
    return c.Broadcast(data.data(), data.size(), DataType::kF32, 0);
  };
  auto gather = [](Communicator& c) {
    std::vector<float> mine(4, 1.0f), all(4 * static_cast<size_t>(c.size()));
    return c.Gather(mine.data(), all.data(), mine.size(), DataType::kF32, 0);
  };
  struct Setup {
    std::string name;
    int workers;
    int ahead;        // the worker whose first calls end at once
    int calls_ahead;  // how many such calls it makes before the others' call
    std::function<Status(Communicator&)> eager;
    std::function<Status(Communicator&)> other;
    std::string eager_quoted;  // as the errors quote them
    std::string other_quoted;
    std::string hosts;  // where the workers run (EagerFabric)
    int reducers = 0;
  };
  const std::vector<Setup> setups = {
      {"broadcast's root", 3, 0, 1, broadcast, allreduce, "broadcast of 8 f32 from root 0",
       "all-reduce of 1000 f32 (sum)"},
      {"gather's non-root", 4, 2, 1, gather, [](Communicator& c) { return c.Barrier(); },
       "gather of 4 f32 to root 0", "barrier"},
      {"three broadcasts' root", 2, 0, 3, broadcast, allreduce, "broadcast of 8 f32 from root 0",
       "all-reduce of 1000 f32 (sum)"},
      // As far ahead as the workers remember (16 calls were, before 2026-12-07).
      {std::to_string(StallNotices::kKeepBehind) + " broadcasts' root", 3, 0,
       static_cast<int>(StallNotices::kKeepBehind), broadcast, allreduce,
       "broadcast of 8 f32 from root 0", "all-reduce of 1000 f32 (sum)"},
      {"40 broadcasts' root, shared memory", 3, 0, 40, broadcast, allreduce,
       "broadcast of 8 f32 from root 0", "all-reduce of 1000 f32 (sum)", "aaa"},
      {"broadcast's root, shared memory", 3, 0, 1, broadcast, allreduce,
       "broadcast of 8 f32 from root 0", "all-reduce of 1000 f32 (sum)", "aaa"},
      {"two gathers' non-root, shared memory", 4, 1, 2, gather, allreduce,
       "gather of 4 f32 to root 0", "all-reduce of 1000 f32 (sum)", "aaaa"},
      {"broadcast's root, hierarchical", 4, 0, 1, broadcast, allreduce,
       "broadcast of 8 f32 from root 0", "all-reduce of 1000 f32 (sum)", "aabb"},
      {"gather's non-root, hierarchical", 4, 3, 1, gather, allreduce, "gather of 4 f32 to root 0",
       "all-reduce of 1000 f32 (sum)", "aabb"},
      {"broadcast's root, the Reduction Server", 3, 0, 1, broadcast, large_allreduce,
       "broadcast of 8 f32 from root 0", "all-reduce of 100000 f32 (sum)", "", 2},
  };
  for (const Setup& setup : setups) {
    RunDisagreeingJob(
        setup.name, setup.workers, setup.reducers,
        [&](Communicator& comm, std::vector<std::string>* f) {
          const bool ahead = comm.rank() == setup.ahead;
          Status s;
          for (int i = 0; ahead && i < setup.calls_ahead && s.ok(); ++i) s = setup.eager(comm);
          if (s.ok()) s = setup.other(comm);
          const std::string theirs =
              "called " +
              (ahead ? setup.other_quoted + " where this worker called " : setup.eager_quoted);
          const std::string back = std::to_string(setup.calls_ahead) +
                                   (setup.calls_ahead == 1 ? " call" : " calls") +
                                   " before this one";
          if (s.code() != StatusCode::kInvalidArgument ||
              s.message().find(theirs) == std::string::npos ||
              (ahead && s.message().find(back) == std::string::npos)) {
            f->push_back("worker " + std::to_string(comm.rank()) + " did not fail quoting \"" +
                         theirs + "\"" + (ahead ? " and \"" + back + "\"" : "") + ": " +
                         s.ToString());
          }
        },
        EagerFabric(setup.hosts));
  }
}

// Workers 0 and 1 broadcast from worker 0, worker 2 from worker 1 (then each enters a barrier):
// worker 2 waits for worker 1, which got worker 0's data and went on, as worker 0 did. The calls
// differ only in their roots, and the stall notices compare those too: every worker fails quoting
// both roots before the deadline.
TEST(CollectiveAgreementTest, WorkersWhoseBroadcastsHaveDifferentRootsAllFailQuotingThem) {
  RunDisagreeingJob(
      "roots", 3, 0,
      [](Communicator& comm, std::vector<std::string>* f) {
        std::vector<float> data(8, 1.0f);
        const int root = comm.rank() < 2 ? 0 : 1;
        Status s = comm.Broadcast(data.data(), data.size(), DataType::kF32, root);
        if (s.ok()) s = comm.Barrier();
        const std::string want =
            comm.rank() < 2 ? "worker 2 called broadcast of 8 f32 from root 1 where this worker "
                              "called broadcast of 8 f32 from root 0, 1 call before this one"
                            : "called broadcast of 8 f32 from root 0, this worker broadcast of 8 "
                              "f32 from root 1";
        if (s.code() != StatusCode::kInvalidArgument || s.message().find(want) == std::string::npos)
          f->push_back("did not fail quoting \"" + want + "\": " + s.ToString());
      },
      {.eager_limit = 8192});
}

// Every worker broadcasts (or scatters) from itself as the root: every send leaves eagerly and no
// worker receives, so the call ends on every worker and nothing in it can tell. The next call that
// meets compares the digests of the calls before it (CallHistory): each all-reduce algorithm's
// headers, the shared-memory segment's call, the Reduction Server's round headers and the other
// collectives' call headers carry them, and every worker fails with kInvalidArgument quoting its
// own call before, where it returned the others' data as if nothing had happened before (the
// stock script's src=dist.get_rank()).
TEST(CollectiveAgreementTest, WorkersWhoseEagerCallsDifferFailAtTheNextCallThatMeets) {
  auto allreduce = [](size_t count) {
    return [count](Communicator& c) {
      std::vector<float> data(count, 1.0f);
      return c.Allreduce(data.data(), data.size(), DataType::kF32, ReduceOp::kSum);
    };
  };
  auto own_broadcast = [](Communicator& c) {
    std::vector<float> data(8, 1.0f);
    return c.Broadcast(data.data(), data.size(), DataType::kF32, c.rank());
  };
  auto own_scatter = [](Communicator& c) {
    std::vector<float> send(2 * static_cast<size_t>(c.size()), 1.0f), mine(2);
    return c.Scatter(send.data(), mine.data(), mine.size(), DataType::kF32, c.rank());
  };
  auto allgather = [](Communicator& c) {
    std::vector<int64_t> mine(8, c.rank()), all(8 * static_cast<size_t>(c.size()));
    return c.Allgather(mine.data(), all.data(), mine.size(), DataType::kI64);
  };
  struct Setup {
    std::string name;
    int workers;
    std::function<Status(Communicator&)> eager;
    std::string eager_quoted;  // with " from root <rank>" after it
    std::function<Status(Communicator&)> next;
    std::string hosts;  // where the workers run (EagerFabric)
    int reducers = 0;
  };
  const std::vector<Setup> setups = {
      {"recursive doubling", 4, own_broadcast, "broadcast of 8 f32", allreduce(1000)},
      {"recursive doubling, 3 workers", 3, own_broadcast, "broadcast of 8 f32", allreduce(1000)},
      {"halving-doubling", 4, own_scatter, "scatter of 2 f32", allreduce(10000)},
      {"the ring", 3, own_broadcast, "broadcast of 8 f32", allreduce(100000)},
      {"shared memory", 3, own_broadcast, "broadcast of 8 f32", allreduce(1000), "aaa"},
      {"hierarchical", 4, own_broadcast, "broadcast of 8 f32", allreduce(1000), "aabb"},
      {"the Reduction Server", 3, own_broadcast, "broadcast of 8 f32", allreduce(100000), "", 2},
      {"an allgather", 3, own_broadcast, "broadcast of 8 f32", allgather},
  };
  for (const Setup& setup : setups) {
    RunDisagreeingJob(
        setup.name, setup.workers, setup.reducers,
        [&](Communicator& comm, std::vector<std::string>* f) {
          const Status eager = setup.eager(comm);
          if (!eager.ok()) f->push_back("the eager call failed: " + eager.ToString());
          const Status s = setup.next(comm);
          const std::string before =
              " after " + setup.eager_quoted + " from root " + std::to_string(comm.rank());
          if (s.code() != StatusCode::kInvalidArgument ||
              s.message().find(" after other calls than this worker's") == std::string::npos ||
              s.message().find(before) == std::string::npos) {
            f->push_back("worker " + std::to_string(comm.rank()) +
                         " did not fail quoting its call before (\"" + before +
                         "\"): " + s.ToString());
          }
        },
        EagerFabric(setup.hosts));
  }
}

// Workers gather to worker 0 and then all-reduce; worker 3 enters its gather late. The others'
// gathers end at once (their sends leave eagerly) and they wait in the all-reduce, a call ahead
// of worker 0, which waits for worker 3: its notice of the gather reaches worker 1, whose gather
// was the same call, and fails nobody. Every result is exact; the same on one host with the
// shared-memory all-reduce.
TEST(CollectiveAgreementTest, WorkersAheadOfASlowOneInTheSameCallAreNotFailed) {
  for (bool shared_memory : {false, true}) {
    SCOPED_TRACE(shared_memory ? "shared memory" : "across hosts");
    testing::FabricOptions fabric;
    fabric.eager_limit = 8192;
    if (shared_memory) fabric.placement = Placement::OneHost(4, true);
    std::vector<std::string> failures;
    testing::RunLoopbackJob(
        4, 0, testing::LoopbackOptions(milliseconds(60000), 65536),
        [](Communicator& comm, std::vector<std::string>* f) {
          if (comm.rank() == 3) std::this_thread::sleep_for(3 * kStalledCallAfter);
          std::vector<float> mine(4, static_cast<float>(comm.rank())), all(16, -1.0f);
          Status s = comm.Gather(mine.data(), all.data(), mine.size(), DataType::kF32, 0);
          if (!s.ok()) f->push_back("gather: " + s.ToString());
          for (size_t i = 0; comm.rank() == 0 && i < all.size(); ++i) {
            if (all[i] != static_cast<float>(i / 4))
              f->push_back("gathered element " + std::to_string(i));
          }
          std::vector<float> data(1000, 1.0f);
          s = comm.Allreduce(data.data(), data.size(), DataType::kF32, ReduceOp::kSum);
          if (!s.ok()) f->push_back("all-reduce: " + s.ToString());
          if (s.ok() && data[999] != 4.0f) f->push_back("all-reduce: " + std::to_string(data[999]));
        },
        &failures, nullptr, fabric);
    for (const auto& f : failures) ADD_FAILURE() << f;
  }
}

// The Reduction Server's chunk size (ReductionServerChunkBytes), exactly: chunk_bytes for large
// calls; at least kPipelineChunksPerReducer per reducer (not below 16 KiB) below that; at least
// four per reducer (not below 4 KiB) for small calls.
TEST(ReductionServerChunkTest, ChunkSizeFollowsTheCallSize) {
  constexpr size_t K = 1024;
  constexpr size_t M = 1024 * K;
  constexpr size_t kChunk = 128 * K;
  auto chunk = [](size_t bytes, size_t es, int reducers,
                  int per_reducer = kPipelineChunksPerReducer) {
    return ReductionServerChunkBytes(bytes / es, es, reducers, kChunk, per_reducer);
  };
  // 4 reducers, f32: 64 chunks per reducer from 256 chunks of 128 KiB (32 MiB) down to 16 KiB ones.
  EXPECT_EQ(chunk(256 * M, 4, 4), kChunk);
  EXPECT_EQ(chunk(32 * M, 4, 4), kChunk);
  EXPECT_EQ(chunk(16 * M, 4, 4), 64 * K);
  EXPECT_EQ(chunk(8 * M, 4, 4), 32 * K);
  EXPECT_EQ(chunk(4 * M, 4, 4), 16 * K);
  EXPECT_EQ(chunk(1 * M, 4, 4), 16 * K);    // the floor: 16 per reducer
  EXPECT_EQ(chunk(256 * K, 4, 4), 16 * K);  // four per reducer, at the floor
  EXPECT_EQ(chunk(128 * K, 4, 4), 8 * K);   // four per reducer, below the floor
  EXPECT_EQ(chunk(16 * K, 4, 4), 4 * K);    // not below 4 KiB
  EXPECT_EQ(chunk(12, 4, 4), 4 * K);
  // Four per reducer asked for (one host): only the four-per-reducer rule.
  EXPECT_EQ(chunk(8 * M, 4, 4, 4), kChunk);
  EXPECT_EQ(chunk(1 * M, 4, 4, 4), 64 * K);
  // A whole number of elements, rounded up: 3 reducers, f64, 1 MiB + 8 bytes.
  EXPECT_EQ(chunk(M + 8, 8, 3), 16 * K);
  EXPECT_EQ(ReductionServerChunkBytes(1048577, 2, 1, kChunk, 64),
            32770u);  // ceil(1048577 / 64) elements
  // chunk_bytes below the floors is kept (tests use 4 KiB chunks).
  EXPECT_EQ(ReductionServerChunkBytes(M / 4, 4, 2, 4 * K, 64), 4 * K);
}

// Calls around the two limits where the Reduction Server's chunks shrink (kMinPipelineChunkBytes
// chunks at kPipelineChunksPerReducer per reducer, and 16 KiB chunks at four per reducer), plus one
// with a partial last chunk; 2-byte and 4-byte types; results against the reference and repeated
// bit-identically.
TEST(InprocAllreduceChunkTest, ChunksAroundTheShrinkLimitsMatchReferenceAndRepeatBitIdentically) {
  constexpr size_t kChunkBytes = 32768;
  for (int reducers : {1, 3}) {
    std::vector<std::string> failures;
    RunJob(
        3, reducers, kChunkBytes,
        [&](Communicator& comm, std::vector<std::string>* f) {
          for (DataType type : {DataType::kF32, DataType::kBF16}) {
            const size_t es = DataTypeSize(type);
            const size_t four = 4 * reducers * (kMinPipelineChunkBytes / es);
            const size_t pipeline = kPipelineChunksPerReducer * reducers * (kChunkBytes / es);
            for (size_t count :
                 {four - 1, four, four + 1, 3 * four + 777, pipeline - 1, pipeline, pipeline + 1}) {
              for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMax}) {
                const std::string name = std::string(DataTypeName(type)) + "/" +
                                         std::string(ReduceOpName(op)) + "/" +
                                         std::to_string(count);
                if (!RunCase(comm, Algorithm::kReductionServer, type, op, count, name, f)) return;
              }
            }
          }
        },
        &failures);
    for (const auto& f : failures) ADD_FAILURE() << reducers << " reducers: " << f;
  }
}

// The suite's one large case: 64 Mi f32 elements (256 MiB per worker) through the Reduction Server.
TEST(InprocAllreduceLargeTest, SixtyFourMiElements) {
  constexpr size_t kCount = size_t{64} << 20;
  std::vector<std::string> failures;
  RunJob(
      2, 2, size_t{1} << 20,
      [&](Communicator& comm, std::vector<std::string>* f) {
        std::vector<float> v(kCount);
        for (size_t i = 0; i < kCount; ++i) v[i] = static_cast<float>((i % 1024) + comm.rank());
        Status s = comm.Allreduce(v.data(), kCount, DataType::kF32, ReduceOp::kSum);
        if (!s.ok()) {
          f->push_back(s.ToString());
          return;
        }
        for (size_t i = 0; i < kCount; ++i) {
          const float want = static_cast<float>(2 * (i % 1024) + 1);
          if (v[i] != want) {
            f->push_back("element " + std::to_string(i) + " = " + std::to_string(v[i]));
            return;
          }
        }
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// Across hosts (the loopback transport is not one host's shared memory), kAuto sends small buffers
// by recursive doubling, then by halving-doubling when the worker count allows, large ones by the
// Reduction Server or the ring.
TEST(CommunicatorTest, AutoAlgorithmFollowsBufferSizeAcrossHosts) {
  for (const testing::AcrossHostsCase& c : testing::kAcrossHostsCases) {
    std::vector<std::string> failures;
    RunJob(
        c.workers, c.reducers, 4096,
        [&](Communicator& comm, std::vector<std::string>* f) {
          const Algorithm got = comm.AutoAlgorithm(c.bytes);
          if (got != c.want) {
            f->push_back(std::to_string(c.workers) + " workers, " + std::to_string(c.reducers) +
                         " reducers, " + std::to_string(c.bytes) +
                         " bytes: " + std::string(AlgorithmName(got)) + ", want " +
                         std::string(AlgorithmName(c.want)));
          }
        },
        &failures);
    for (const auto& f : failures) ADD_FAILURE() << f;
  }
}

TEST(CommunicatorTest, RejectsBadArguments) {
  InMemoryBootstrap bootstrap;
  CommunicatorOptions options;
  options.transport = CommunicatorOptions::TransportKind::kLoopback;
  EXPECT_EQ(Communicator::Create(bootstrap, 2, 2, 0, options).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Communicator::Create(bootstrap, 0, 1, 0, options).status().code(),
            StatusCode::kInvalidArgument)
      << "loopback without a fabric";
  LoopbackFabric fabric(1);
  options.loopback_fabric = &fabric;
  auto comm = Communicator::Create(bootstrap, 0, 1, 0, options);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  float x = 3;
  EXPECT_EQ(
      (*comm)->Allreduce(&x, 1, DataType::kF32, ReduceOp::kSum, Algorithm::kReductionServer).code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ((*comm)->Allreduce(nullptr, 4, DataType::kF32, ReduceOp::kSum).code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE((*comm)->Allreduce(&x, 1, DataType::kF32, ReduceOp::kAvg).ok());
  EXPECT_EQ(x, 3);
}

TEST(CommunicatorTest, FromEnvironmentNamesTheMissingVariable) {
  unsetenv("RANK");
  setenv("WORLD_SIZE", "2", 1);
  auto comm = Communicator::FromEnvironment();
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(comm.status().message().find("RANK"), std::string::npos) << comm.status().ToString();
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  unsetenv("COHORT_BOOTSTRAP_ADDR");
  unsetenv("COHORT_NUM_REDUCERS");
  auto single = Communicator::FromEnvironment();
  ASSERT_TRUE(single.ok()) << single.status().ToString();
  double d[2] = {1.5, 2.5};
  EXPECT_TRUE((*single)->Allreduce(d, 2, DataType::kF64, ReduceOp::kSum).ok());
  EXPECT_EQ(d[1], 2.5);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
}

}  // namespace
}  // namespace cohort::collective
