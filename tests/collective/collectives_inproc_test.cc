// The collectives other than the all-reduce (broadcast, allgather, reduce-scatter, barrier, ...)
// over the in-process loopback transport: workers as threads, 1 to 8 of them, every data type,
// counts 0, 1, odd and many pieces; results exact (moves) or against the double-precision
// reference (reductions) and bit-identical on a repeat; callers that disagree get an error naming
// the peer; a dead or silent peer makes every call fail before its deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "collective/algorithms/allgather.h"
#include "collective/algorithms/alltoall.h"
#include "collective/algorithms/barrier.h"
#include "collective/algorithms/broadcast.h"
#include "collective/algorithms/gather.h"
#include "collective/algorithms/reduce.h"
#include "collective/algorithms/reduce_scatter.h"
#include "collective/algorithms/scatter.h"
#include "collective/communicator.h"
#include "collective/transport/faulty_transport.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

constexpr size_t kChunkBytes = 4096;
// 0, 1, odd, and (at 4 KiB pieces) many pieces per block for every type.
const std::vector<size_t> kCounts = {0, 1, 1001, 20011};
constexpr milliseconds kCallTimeout(30000);

// Runs `workers` communicators over one loopback fabric on threads; body(comm, failures) on each.
void RunWorkers(int workers, milliseconds timeout,
                const std::function<void(Communicator&, std::vector<std::string>*)>& body,
                std::vector<std::string>* failures) {
  LoopbackFabric fabric(workers);
  InMemoryBootstrap bootstrap;
  std::mutex mu;
  CommunicatorOptions options;
  options.transport = CommunicatorOptions::TransportKind::kLoopback;
  options.loopback_fabric = &fabric;
  options.timeout = timeout;
  options.chunk_bytes = kChunkBytes;
  testing::RunRanks(workers, [&](int r) {
    std::vector<std::string> local;
    auto comm = Communicator::Create(bootstrap, r, workers, 0, options);
    if (!comm.ok()) {
      local.push_back("create: " + comm.status().ToString());
    } else {
      body(**comm, &local);
    }
    std::lock_guard<std::mutex> lock(mu);
    for (auto& f : local) failures->push_back("worker " + std::to_string(r) + ": " + f);
  });
}

// RunWorkers, then every failure a worker reported fails the test.
void CheckOnWorkers(int workers, milliseconds timeout,
                    const std::function<void(Communicator&, std::vector<std::string>*)>& body) {
  std::vector<std::string> failures;
  RunWorkers(workers, timeout, body, &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

struct RootedCase {
  int root;
  DataType type;
  size_t count;
};
// Every type and count with each kind of root among n workers: the first, the last, the middle.
std::vector<RootedCase> RootedCases(int n) {
  std::vector<RootedCase> cases;
  for (int root : {0, n - 1, n / 2}) {
    for (DataType type : testing::kAllTypes) {
      for (size_t count : kCounts) cases.push_back({root, type, count});
    }
  }
  return cases;
}

std::string CaseName(DataType type, size_t count, const std::string& extra = "") {
  return std::string(DataTypeName(type)) + "/" + std::to_string(count) + extra;
}

// One collective called straight over a transport with the call's options, on two buffers.
using DirectCall = std::function<Status(Transport&, const CollectiveOptions&, float*, float*)>;

// `algorithm` over `count` elements from the first buffer into the second (to or from `root`
// where the collective has one).
template <typename Options>
DirectCall OverBuffers(Status (*algorithm)(Transport&, const Options&), size_t count,
                       int root = 0) {
  return [=](Transport& t, const CollectiveOptions& call, float* send, float* recv) {
    Options o;
    static_cast<CollectiveOptions&>(o) = call;
    o.send = send;
    o.recv = recv;
    o.count = count;
    if constexpr (requires { o.root; }) o.root = root;
    return algorithm(t, o);
  };
}

// Filler for buffers a call must overwrite, so a result never passes by luck.
std::vector<char> Garbage(size_t bytes) {
  return std::vector<char>(bytes + 1, static_cast<char>(0xa5));
}

class CollectivesTest : public ::testing::TestWithParam<int> {};

TEST_P(CollectivesTest, BroadcastFromEveryKindOfRootCopiesTheRootsBytes) {
  const int n = GetParam();
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    for (const auto& [root, type, count] : RootedCases(n)) {
      const std::vector<char> want = testing::MakeInput(type, root, count);
      std::vector<char> got = comm.rank() == root ? want : Garbage(count * DataTypeSize(type));
      Status s = comm.Broadcast(got.data(), count, type, root);
      if (!s.ok()) return f->push_back(CaseName(type, count) + ": " + s.ToString());
      if (!std::equal(want.begin(), want.begin() + count * DataTypeSize(type), got.begin())) {
        f->push_back(CaseName(type, count, " root " + std::to_string(root)) +
                     ": bytes differ from the root's");
      }
    }
  });
}

TEST_P(CollectivesTest, AllgatherPutsEveryWorkersBlockInPlace) {
  const int n = GetParam();
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    for (DataType type : testing::kAllTypes) {
      for (size_t count : kCounts) {
        const size_t bytes = count * DataTypeSize(type);
        const std::vector<char> mine = testing::MakeInput(type, comm.rank(), count);
        for (bool in_place : {false, true}) {
          std::vector<char> out = Garbage(n * bytes);
          if (in_place) std::memcpy(out.data() + comm.rank() * bytes, mine.data(), bytes);
          const void* send = in_place ? out.data() + comm.rank() * bytes : mine.data();
          Status s = comm.Allgather(send, out.data(), count, type);
          if (!s.ok()) return f->push_back(CaseName(type, count) + ": " + s.ToString());
          for (int r = 0; r < n; ++r) {
            const std::vector<char> want = testing::MakeInput(type, r, count);
            if (!std::equal(want.begin(), want.begin() + bytes, out.begin() + r * bytes)) {
              f->push_back(CaseName(type, count, in_place ? " in place" : "") + ": block " +
                           std::to_string(r) + " differs");
            }
          }
        }
      }
    }
  });
}

// Worker w's input is MakeInput(type, w, n * count): block r of the result is elements r*count..
// of the all-reduce, so the all-reduce's reference and tolerance apply.
TEST_P(CollectivesTest, ReduceScatterMatchesReferenceAndRepeatsBitIdentically) {
  const int n = GetParam();
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    for (DataType type : testing::kAllTypes) {
      for (ReduceOp op : testing::OpsFor(type)) {
        for (size_t count : kCounts) {
          const size_t es = DataTypeSize(type);
          const std::vector<char> in = testing::MakeInput(type, comm.rank(), n * count);
          const std::vector<char> before = in;
          std::vector<char> a = Garbage(count * es), b = Garbage(count * es);
          const std::string name = CaseName(type, count, "/" + std::string(ReduceOpName(op)));
          Status s = comm.ReduceScatter(in.data(), a.data(), count, type, op);
          if (s.ok()) s = comm.ReduceScatter(in.data(), b.data(), count, type, op);
          if (!s.ok()) return f->push_back(name + ": " + s.ToString());
          if (in != before) f->push_back(name + ": the input was modified");
          if (a != b) f->push_back(name + ": repeat differs");
          const double tol = testing::Tolerance(type, op, n);
          for (size_t i = 0; i < count; ++i) {
            const double want = testing::Reference(type, op, n, comm.rank() * count + i);
            const double got = testing::Load(type, a.data(), i);
            if (!(std::fabs(got - want) <= tol)) {
              f->push_back(name + ": element " + std::to_string(i) + " = " + std::to_string(got) +
                           ", want " + std::to_string(want));
              break;
            }
          }
        }
      }
    }
  });
}

TEST_P(CollectivesTest, ReduceScatterInPlaceOnItsOwnBlock) {
  const int n = GetParam();
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    const size_t count = 3001;
    std::vector<char> buf = testing::MakeInput(DataType::kI64, comm.rank(), n * count);
    char* own = buf.data() + comm.rank() * count * 8;
    Status s = comm.ReduceScatter(buf.data(), own, count, DataType::kI64, ReduceOp::kSum);
    if (!s.ok()) return f->push_back(s.ToString());
    for (size_t i = 0; i < count; ++i) {
      const double want =
          testing::Reference(DataType::kI64, ReduceOp::kSum, n, comm.rank() * count + i);
      if (testing::Load(DataType::kI64, own, i) != want)
        return f->push_back("element " + std::to_string(i));
    }
  });
}

// No worker leaves a barrier before the last one entered it; workers enter at different times.
TEST_P(CollectivesTest, BarrierHoldsEveryWorkerUntilAllHaveEntered) {
  const int n = GetParam();
  constexpr int kRounds = 5;
  std::atomic<int> entered[kRounds];
  for (auto& e : entered) e = 0;
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    for (int round = 0; round < kRounds; ++round) {
      // A different worker is last each round.
      if (comm.rank() == round % n) std::this_thread::sleep_for(milliseconds(20));
      entered[round].fetch_add(1);
      Status s = comm.Barrier();
      if (!s.ok()) return f->push_back(s.ToString());
      if (entered[round].load() != n) {
        f->push_back("round " + std::to_string(round) + ": left the barrier with " +
                     std::to_string(entered[round].load()) + " of " + std::to_string(n) +
                     " entered");
      }
    }
  });
}

TEST_P(CollectivesTest, ReduceToEveryKindOfRootMatchesReferenceAndLeavesInputs) {
  const int n = GetParam();
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    for (const auto& [root, type, count] : RootedCases(n)) {
      for (ReduceOp op : testing::OpsFor(type)) {
        const size_t es = DataTypeSize(type);
        const std::string name = CaseName(
            type, count, "/" + std::string(ReduceOpName(op)) + " root " + std::to_string(root));
        const std::vector<char> in = testing::MakeInput(type, comm.rank(), count);
        std::vector<char> a = Garbage(count * es), b = in;
        Status s = comm.Reduce(in.data(), a.data(), count, type, op, root);
        // The root in place the second time.
        if (s.ok()) s = comm.Reduce(b.data(), b.data(), count, type, op, root);
        if (!s.ok()) return f->push_back(name + ": " + s.ToString());
        if (in != testing::MakeInput(type, comm.rank(), count))
          f->push_back(name + ": input modified");
        if (comm.rank() != root) {
          if (b != in) f->push_back(name + ": a worker's buffer changed though it is not the root");
          continue;
        }
        const std::string bad = testing::CheckResult(type, op, n, a.data(), count);
        if (!bad.empty()) f->push_back(name + ": " + bad);
        if (!std::equal(a.begin(), a.begin() + count * es, b.begin()))
          f->push_back(name + ": repeat differs");
      }
    }
  });
}

TEST_P(CollectivesTest, GatherAndScatterMoveEveryBlock) {
  const int n = GetParam();
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    for (const auto& [root, type, count] : RootedCases(n)) {
      const size_t bytes = count * DataTypeSize(type);
      const std::string name = CaseName(type, count, " root " + std::to_string(root));
      // Gather: block r on the root is worker r's input.
      const std::vector<char> mine = testing::MakeInput(type, comm.rank(), count);
      std::vector<char> all = Garbage(n * bytes);
      Status s = comm.Gather(mine.data(), all.data(), count, type, root);
      if (!s.ok()) return f->push_back("gather " + name + ": " + s.ToString());
      for (int r = 0; comm.rank() == root && r < n; ++r) {
        const std::vector<char> want = testing::MakeInput(type, r, count);
        if (!std::equal(want.begin(), want.begin() + bytes, all.begin() + r * bytes)) {
          f->push_back("gather " + name + ": block " + std::to_string(r));
        }
      }
      // Scatter: the root's block r (input of "rank" 100 + r) lands on worker r.
      std::vector<char> blocks = Garbage(n * bytes);
      if (comm.rank() == root) {
        for (int r = 0; r < n; ++r) {
          const std::vector<char> b = testing::MakeInput(type, 100 + r, count);
          std::copy(b.begin(), b.begin() + bytes, blocks.begin() + r * bytes);
        }
      }
      std::vector<char> got = Garbage(bytes);
      s = comm.Scatter(blocks.data(), got.data(), count, type, root);
      if (!s.ok()) return f->push_back("scatter " + name + ": " + s.ToString());
      const std::vector<char> want = testing::MakeInput(type, 100 + comm.rank(), count);
      if (!std::equal(want.begin(), want.begin() + bytes, got.begin()))
        f->push_back("scatter " + name);
    }
  });
}

// Block j of worker i's input is MakeInput(type, i * n + j, count): worker j's block i must be it.
TEST_P(CollectivesTest, AlltoallSwapsEveryPairOfBlocks) {
  const int n = GetParam();
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    const int me = comm.rank();
    for (DataType type : testing::kAllTypes) {
      for (size_t count : kCounts) {
        const size_t bytes = count * DataTypeSize(type);
        std::vector<char> send(n * bytes + 1);
        for (int j = 0; j < n; ++j) {
          const std::vector<char> b = testing::MakeInput(type, me * n + j, count);
          std::copy(b.begin(), b.begin() + bytes, send.begin() + j * bytes);
        }
        for (bool in_place : {false, true}) {
          std::vector<char> recv = in_place ? send : Garbage(n * bytes);
          Status s = comm.Alltoall(in_place ? recv.data() : send.data(), recv.data(), count, type);
          if (!s.ok()) return f->push_back(CaseName(type, count) + ": " + s.ToString());
          for (int i = 0; i < n; ++i) {
            const std::vector<char> want = testing::MakeInput(type, i * n + me, count);
            if (!std::equal(want.begin(), want.begin() + bytes, recv.begin() + i * bytes)) {
              f->push_back(CaseName(type, count, in_place ? " in place" : "") + ": block " +
                           std::to_string(i));
            }
          }
        }
      }
    }
  });
}

// Worker i sends worker j Count(i, j) elements (zero for some pairs, several pieces for others).
TEST_P(CollectivesTest, AlltoallVMovesPerPeerCounts) {
  const int n = GetParam();
  auto count_of = [](int i, int j, size_t scale) { return ((i * 7 + j * 3) % 5) * scale; };
  CheckOnWorkers(n, kCallTimeout, [&](Communicator& comm, std::vector<std::string>* f) {
    const int me = comm.rank();
    for (DataType type : {DataType::kF32, DataType::kBF16, DataType::kI64}) {
      for (size_t scale : {size_t{1}, size_t{3001}}) {
        const size_t es = DataTypeSize(type);
        std::vector<size_t> send_counts(n), recv_counts(n);
        size_t sent = 0, received = 0;
        for (int j = 0; j < n; ++j) {
          send_counts[j] = count_of(me, j, scale);
          recv_counts[j] = count_of(j, me, scale);
          sent += send_counts[j];
          received += recv_counts[j];
        }
        std::vector<char> send(sent * es + 1), recv = Garbage(received * es);
        for (int j = 0, at = 0; j < n; at += send_counts[j++] * es) {
          const std::vector<char> b = testing::MakeInput(type, me * n + j, send_counts[j]);
          std::copy(b.begin(), b.begin() + send_counts[j] * es, send.begin() + at);
        }
        Status s =
            comm.AlltoallV(send.data(), send_counts.data(), recv.data(), recv_counts.data(), type);
        const std::string name = CaseName(type, scale);
        if (!s.ok()) return f->push_back(name + ": " + s.ToString());
        for (int i = 0, at = 0; i < n; at += recv_counts[i++] * es) {
          const std::vector<char> want = testing::MakeInput(type, i * n + me, recv_counts[i]);
          if (!std::equal(want.begin(), want.begin() + recv_counts[i] * es, recv.begin() + at)) {
            f->push_back(name + ": block from worker " + std::to_string(i));
          }
        }
      }
    }
  });
}

INSTANTIATE_TEST_SUITE_P(Workers, CollectivesTest, ::testing::Values(1, 2, 3, 4, 5, 8),
                         [](const auto& info) { return "w" + std::to_string(info.param); });

// Both allgather algorithms, called directly over the transport: the same blocks.
TEST(AllgatherAlgorithmTest, RingAndRecursiveDoublingAgree) {
  for (int n : {2, 4, 8}) {
    for (AllgatherAlgorithm algo :
         {AllgatherAlgorithm::kRing, AllgatherAlgorithm::kRecursiveDoubling}) {
      LoopbackFabric fabric(n);
      std::mutex mu;
      std::vector<std::string> failures;
      testing::RunRanks(n, [&](int r) {
        auto t = fabric.CreateTransport(r);
        uint32_t seq = 0;
        for (size_t count : kCounts) {
          const size_t bytes = count * 4;
          const std::vector<char> mine = testing::MakeInput(DataType::kF32, r, count);
          std::vector<char> out = Garbage(n * bytes);
          AllgatherOptions o;
          o.seq = seq++;
          o.deadline = DeadlineAfter(milliseconds(30000));
          o.num_workers = n;
          o.chunk_bytes = kChunkBytes;
          o.send = mine.data();
          o.recv = out.data();
          o.count = count;
          o.algorithm = algo;
          Status s = Allgather(*t, o);
          std::lock_guard<std::mutex> lock(mu);
          if (!s.ok()) return failures.push_back(s.ToString());
          for (int b = 0; b < n; ++b) {
            const std::vector<char> want = testing::MakeInput(DataType::kF32, b, count);
            if (!std::equal(want.begin(), want.begin() + bytes, out.begin() + b * bytes)) {
              failures.push_back("count " + std::to_string(count) + ": block " + std::to_string(b));
            }
          }
        }
      });
      for (const auto& f : failures) {
        ADD_FAILURE() << n << " workers, "
                      << (algo == AllgatherAlgorithm::kRing ? "ring" : "recursive doubling")
                      << ": worker " << f;
      }
    }
  }
  AllgatherOptions o;
  o.num_workers = 4;
  o.count = 16;
  EXPECT_EQ(ChooseAllgatherAlgorithm(o), AllgatherAlgorithm::kRecursiveDoubling);
  o.count = kRecursiveDoublingMaxBytes;
  EXPECT_EQ(ChooseAllgatherAlgorithm(o), AllgatherAlgorithm::kRing);
  o.num_workers = 3;
  o.count = 16;
  EXPECT_EQ(ChooseAllgatherAlgorithm(o), AllgatherAlgorithm::kRing);
}

// The suite's large case for the moves: 4 Mi f32 elements per worker gathered by 3 workers, and
// a 16 MiB broadcast, at the default 128 KiB pieces.
TEST(CollectivesLargeTest, AllgatherAndBroadcastOfMebibytes) {
  constexpr size_t kCount = size_t{4} << 20;
  constexpr int kWorkers = 3;
  LoopbackFabric fabric(kWorkers);
  InMemoryBootstrap bootstrap;
  std::mutex mu;
  std::vector<std::string> failures;
  testing::RunRanks(kWorkers, [&](int r) {
    CommunicatorOptions options;
    options.transport = CommunicatorOptions::TransportKind::kLoopback;
    options.loopback_fabric = &fabric;
    auto comm = Communicator::Create(bootstrap, r, kWorkers, 0, options);
    std::string bad;
    if (!comm.ok()) {
      bad = comm.status().ToString();
    } else {
      std::vector<float> mine(kCount), all(kWorkers * kCount);
      for (size_t i = 0; i < kCount; ++i) mine[i] = static_cast<float>(i % 4099) + 10000.0f * r;
      Status s = (*comm)->Allgather(mine.data(), all.data(), kCount, DataType::kF32);
      for (size_t i = 0; s.ok() && bad.empty() && i < all.size(); ++i) {
        if (all[i] != static_cast<float>((i % kCount) % 4099) + 10000.0f * (i / kCount))
          bad = "allgather element " + std::to_string(i);
      }
      // The root's own block goes to everyone; the others' copies are cleared first.
      if (r != 2) std::fill(mine.begin(), mine.end(), 0.0f);
      if (s.ok()) s = (*comm)->Broadcast(mine.data(), kCount, DataType::kF32, 2);
      for (size_t i = 0; s.ok() && bad.empty() && i < kCount; ++i) {
        if (mine[i] != static_cast<float>(i % 4099) + 20000.0f)
          bad = "broadcast element " + std::to_string(i);
      }
      if (!s.ok()) bad = s.ToString();
    }
    std::lock_guard<std::mutex> lock(mu);
    if (!bad.empty()) failures.push_back("worker " + std::to_string(r) + ": " + bad);
  });
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// Workers that disagree: nobody waits past the deadline, at least one call fails, and where a
// worker receives from the odd one out (every case here but the root) it names it and both calls. A
// worker whose call failed is poisoned.
TEST(CollectivesMismatchTest, DisagreeingCallsFailInTimeNamingThePeer) {
  constexpr int kWorkers = 3;
  constexpr auto kTimeout = milliseconds(1500);
  struct Case {
    std::string name;
    bool named;  // some worker receives from the one that disagrees
    std::function<Status(Communicator&)> call;
  };
  const std::vector<Case> cases = {
      {"allgather count", true,
       [](Communicator& c) {
         std::vector<float> in(64), out(3 * 64);
         return c.Allgather(in.data(), out.data(), c.rank() == 1 ? 63 : 64, DataType::kF32);
       }},
      {"allgather type", true,
       [](Communicator& c) {
         std::vector<float> in(64), out(3 * 64);
         return c.Allgather(in.data(), out.data(), 64,
                            c.rank() == 1 ? DataType::kI32 : DataType::kF32);
       }},
      {"reduce-scatter op", true,
       [](Communicator& c) {
         std::vector<float> in(3 * 64), out(64);
         return c.ReduceScatter(in.data(), out.data(), 64, DataType::kF32,
                                c.rank() == 1 ? ReduceOp::kMax : ReduceOp::kSum);
       }},
      {"barrier against allgather", true,
       [](Communicator& c) {
         std::vector<float> in(64), out(3 * 64);
         return c.rank() == 1 ? c.Barrier()
                              : c.Allgather(in.data(), out.data(), 64, DataType::kF32);
       }},
      {"alltoallv counts", true,
       [](Communicator& c) {
         std::vector<float> in(30), out(30);
         std::vector<size_t> send = {10, 10, 10}, recv = {10, 10, 10};
         if (c.rank() == 0) send[2] = 9;  // worker 2 expects 10 from worker 0
         return c.AlltoallV(in.data(), send.data(), out.data(), recv.data(), DataType::kF32);
       }},
      {"gather count", true,
       [](Communicator& c) {
         std::vector<float> in(64), out(3 * 64);
         return c.Gather(in.data(), out.data(), c.rank() == 2 ? 60 : 64, DataType::kF32, 0);
       }},
      // Two workers think they are the root: neither receives, so nobody can name anybody.
      {"broadcast root", false,
       [](Communicator& c) {
         std::vector<float> v(64);
         return c.Broadcast(v.data(), 64, DataType::kF32, c.rank() == 1 ? 1 : 0);
       }},
  };
  for (const Case& c : cases) {
    std::vector<Status> got(kWorkers);
    std::vector<SteadyClock::duration> took(kWorkers);
    std::vector<Status> after(kWorkers);
    std::vector<std::string> failures;
    RunWorkers(
        kWorkers, kTimeout,
        [&](Communicator& comm, std::vector<std::string>*) {
          const auto start = SteadyClock::now();
          got[comm.rank()] = c.call(comm);
          took[comm.rank()] = SteadyClock::now() - start;
          if (!got[comm.rank()].ok()) after[comm.rank()] = comm.Barrier();
        },
        &failures);
    for (const auto& f : failures) ADD_FAILURE() << c.name << ": " << f;
    int failed = 0, named = 0;
    for (int r = 0; r < kWorkers; ++r) {
      EXPECT_LT(took[r], kTimeout + milliseconds(2000)) << c.name << ": worker " << r;
      if (got[r].ok()) continue;
      ++failed;
      EXPECT_EQ(after[r].code(), StatusCode::kAborted)
          << c.name << ": worker " << r << " not poisoned";
      if (got[r].code() == StatusCode::kInvalidArgument) {
        EXPECT_NE(got[r].message().find("worker "), std::string::npos) << got[r].ToString();
        EXPECT_NE(got[r].message().find(" called "), std::string::npos) << got[r].ToString();
        ++named;
      } else {
        EXPECT_EQ(got[r].code(), StatusCode::kDeadlineExceeded)
            << c.name << ": " << got[r].ToString();
      }
    }
    EXPECT_GE(failed, 1) << c.name;
    if (c.named) {
      EXPECT_GE(named, 1) << c.name
                          << ": no worker named the one that disagreed: " << got[0].ToString()
                          << " | " << got[1].ToString() << " | " << got[2].ToString();
    }
  }
}

TEST(CollectivesMismatchTest, BadArgumentsAreRefusedWithoutPoisoning) {
  CheckOnWorkers(2, milliseconds(5000), [&](Communicator& comm, std::vector<std::string>* f) {
    float x[4] = {1, 2, 3, 4};
    float y[8];
    auto expect_invalid = [&](const std::string& what, Status s) {
      if (s.code() != StatusCode::kInvalidArgument) f->push_back(what + ": " + s.ToString());
    };
    expect_invalid("root out of range", comm.Broadcast(x, 4, DataType::kF32, 2));
    expect_invalid("negative root", comm.Broadcast(x, 4, DataType::kF32, -1));
    expect_invalid("null", comm.Allgather(nullptr, y, 4, DataType::kF32));
    expect_invalid("type", comm.Allgather(x, y, 4, static_cast<DataType>(9)));
    expect_invalid("op", comm.ReduceScatter(y, x, 4, DataType::kF32, static_cast<ReduceOp>(9)));
    // Still usable: nothing was sent.
    Status s = comm.Allgather(x, y, 4, DataType::kF32);
    if (!s.ok()) f->push_back("after bad arguments: " + s.ToString());
  });
}

// A worker that never makes the call: every worker that depends on it fails with kDeadlineExceeded
// by its deadline, and one that waited for it names it. (A broadcast's workers upstream of it in
// the chain finish: nothing flows back to them.)
TEST(CollectivesFaultTest, SilentWorkerTimesOutEveryCallThatNeedsIt) {
  constexpr int kWorkers = 4;
  constexpr int kSilent = 2;
  constexpr auto kTimeout = milliseconds(800);
  struct Call {
    std::string name;
    bool all_fail;
    std::function<Status(Communicator&)> run;
  };
  const std::vector<Call> calls = {
      {"broadcast", false,
       [](Communicator& c) {
         std::vector<float> v(5000);
         return c.Broadcast(v.data(), v.size(), DataType::kF32, 0);
       }},
      {"allgather", true,
       [](Communicator& c) {
         std::vector<float> v(100), all(400);
         return c.Allgather(v.data(), all.data(), 100, DataType::kF32);
       }},
      {"reduce-scatter", true,
       [](Communicator& c) {
         std::vector<float> v(400), out(100);
         return c.ReduceScatter(v.data(), out.data(), 100, DataType::kF32, ReduceOp::kSum);
       }},
      {"barrier", true, [](Communicator& c) { return c.Barrier(); }},
      // Root 3: the chain 0 -> 1 -> 2 -> 3 passes through the silent worker.
      {"reduce", false,
       [](Communicator& c) {
         std::vector<float> v(5000), out(5000);
         return c.Reduce(v.data(), out.data(), v.size(), DataType::kF32, ReduceOp::kSum, 3);
       }},
      {"gather", false,
       [](Communicator& c) {
         std::vector<float> v(100), all(400);
         return c.Gather(v.data(), all.data(), 100, DataType::kF32, 0);
       }},
      {"scatter", false,
       [](Communicator& c) {
         std::vector<float> all(400), v(100);
         return c.Scatter(all.data(), v.data(), 100, DataType::kF32, 0);
       }},
      {"alltoall", true,
       [](Communicator& c) {
         std::vector<float> in(400), out(400);
         return c.Alltoall(in.data(), out.data(), 100, DataType::kF32);
       }},
  };
  for (const Call& call : calls) {
    std::vector<std::string> failures;
    std::atomic<int> done{0}, failed{0}, named{0};
    RunWorkers(
        kWorkers, kTimeout,
        [&](Communicator& comm, std::vector<std::string>* f) {
          if (comm.rank() == kSilent) {
            while (done.load() < kWorkers - 1) std::this_thread::sleep_for(milliseconds(5));
            return;
          }
          const auto start = SteadyClock::now();
          Status s = call.run(comm);
          const auto took = SteadyClock::now() - start;
          done.fetch_add(1);
          if (took > kTimeout + milliseconds(2000)) f->push_back(call.name + ": took too long");
          if (s.ok()) {
            if (call.all_fail)
              f->push_back(call.name + ": finished without worker " + std::to_string(kSilent));
            return;
          }
          failed.fetch_add(1);
          if (s.code() != StatusCode::kDeadlineExceeded)
            f->push_back(call.name + ": " + s.ToString());
          if (s.message().find("worker ") == std::string::npos)
            f->push_back(call.name + ": no peer named: " + s.ToString());
          if (s.message().find("worker " + std::to_string(kSilent)) != std::string::npos)
            named.fetch_add(1);
        },
        &failures);
    for (const auto& f : failures) ADD_FAILURE() << f;
    EXPECT_GE(failed.load(), 1) << call.name;
    EXPECT_GE(named.load(), 1) << call.name << ": nobody named worker " << kSilent;
  }
}

// A worker that dies mid-call (FaultyTransport): every survivor's call fails before its deadline,
// and the survivors that receive from it straight name it as gone.
TEST(CollectivesFaultTest, DeadWorkerFailsEveryCallInTime) {
  constexpr int kWorkers = 5;
  constexpr int kVictim = 2;
  constexpr auto kTimeout = milliseconds(1500);
  const std::vector<std::pair<std::string, DirectCall>> calls = {
      {"broadcast",
       [](Transport& t, const CollectiveOptions& c, float* data, float*) {
         BroadcastOptions o;
         static_cast<CollectiveOptions&>(o) = c;
         o.data = data;
         o.count = 8000;
         return Broadcast(t, o);
       }},
      {"allgather", OverBuffers(&Allgather, 1000)},
      {"reduce-scatter", OverBuffers(&ReduceScatter, 1000)},
      {"barrier",
       [](Transport& t, const CollectiveOptions& c, float*, float*) { return Barrier(t, c); }},
      {"reduce", OverBuffers(&Reduce, 8000, 4)},
      {"gather", OverBuffers(&Gather, 1000)},
      {"scatter", OverBuffers(&Scatter, 1000)},
      {"alltoall", OverBuffers(&Alltoall, 1000)},
  };
  for (const auto& [name, run] : calls) {
    LoopbackFabric fabric(kWorkers);
    std::vector<std::unique_ptr<Transport>> base;
    for (int r = 0; r < kWorkers; ++r) base.push_back(fabric.CreateTransport(r));
    FaultPlan plan;
    plan.die_after_ops = 7;
    plan.on_death = [&fabric] { fabric.Kill(kVictim); };
    FaultyTransport faulty(*base[kVictim], plan);
    std::vector<Status> status(kWorkers);
    std::vector<SteadyClock::duration> took(kWorkers);
    testing::RunRanks(kWorkers, [&](int r) {
      Transport& t = r == kVictim ? faulty : *base[r];
      std::vector<float> data(8 * 1000, 1.0f), out(8 * 1000);
      const auto start = SteadyClock::now();
      for (uint32_t seq = 0; seq < 20 && status[r].ok(); ++seq) {
        CollectiveOptions c;
        c.seq = seq;
        c.deadline = DeadlineAfter(kTimeout);
        c.num_workers = kWorkers;
        c.chunk_bytes = 1024;
        status[r] = run(t, c, data.data(), out.data());
      }
      took[r] = SteadyClock::now() - start;
    });
    int named = 0;
    for (int r = 0; r < kWorkers; ++r) {
      if (r == kVictim) continue;
      EXPECT_FALSE(status[r].ok()) << name << ": worker " << r << " finished although a peer died";
      EXPECT_LT(took[r], kTimeout + milliseconds(2000)) << name << ": worker " << r;
      if (status[r].code() == StatusCode::kUnavailable &&
          status[r].message().find(std::to_string(kVictim)) != std::string::npos) {
        ++named;
      }
    }
    EXPECT_GE(named, 1) << name << ": nobody named worker " << kVictim << " as gone";
  }
}

}  // namespace
}  // namespace cohort::collective
