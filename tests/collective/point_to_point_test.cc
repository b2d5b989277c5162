// Point-to-point send/recv between workers over the in-process loopback transport (a rendezvous
// transport: a send completes only once matched, the strictest case for ordering), and the
// kProduct reduction through every algorithm that reduces.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "collective/algorithms/halving_doubling.h"
#include "collective/communicator.h"
#include "collective/kernels/reduce.h"
#include "collective/reducer.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/loopback_job.h"
#include "tests/collective/test_util.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// A job of `workers` and `reducers` over loopback, 4 KiB pieces, each call bounded by `timeout`.
void RunJob(int workers, int reducers, milliseconds timeout, const testing::WorkerBody& body,
            std::vector<std::string>* failures) {
  testing::RunLoopbackJob(workers, reducers, testing::LoopbackOptions(timeout, 4096), body,
                          failures);
}

// Every worker sends to its right and receives from its left at once (both post before either
// waits), every type, counts 0 to several pieces; then a run of messages on one tag arrives in
// order, and tags are matched independently of the order they were sent in.
TEST(PointToPointTest, RingExchangeOrderedTagsAndEveryType) {
  for (int n : {2, 3, 5}) {
    std::vector<std::string> failures;
    RunJob(
        n, 0, milliseconds(30000),
        [&](Communicator& comm, std::vector<std::string>* f) {
          const int me = comm.rank();
          const int right = (me + 1) % n, left = (me - 1 + n) % n;
          for (DataType type : testing::kAllTypes) {
            for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{200003}}) {
              const size_t bytes = count * DataTypeSize(type);
              const std::vector<char> out = testing::MakeInput(type, me, count);
              std::vector<char> in(bytes + 1, 0x5a);
              auto send = comm.Isend(out.data(), count, type, right, 7);
              auto recv = comm.Irecv(in.data(), count, type, left, 7);
              if (!send.ok() || !recv.ok()) return f->push_back("post failed");
              Status s = recv->Wait();
              if (s.ok()) s = send->Wait();
              if (!s.ok()) return f->push_back(s.ToString());
              const std::vector<char> want = testing::MakeInput(type, left, count);
              if (!std::equal(want.begin(), want.begin() + bytes, in.begin())) {
                f->push_back(std::string(DataTypeName(type)) + "/" + std::to_string(count) +
                             ": wrong bytes");
              }
            }
          }
          // Ten messages on tag 3, then one on tag 1: the receiver takes tag 1 first, then tag 3's
          // in order.
          std::vector<PointToPointRequest> sends;
          std::vector<int32_t> values(11);
          for (int k = 0; k < 11; ++k) {
            values[k] = me * 100 + k;
            auto r = comm.Isend(&values[k], 1, DataType::kI32, right, k < 10 ? 3 : 1);
            if (!r.ok()) return f->push_back(r.status().ToString());
            sends.push_back(std::move(*r));
          }
          int32_t got = -1;
          Status s = comm.Recv(&got, 1, DataType::kI32, left, 1);
          if (!s.ok() || got != left * 100 + 10)
            f->push_back("tag 1: " + std::to_string(got) + " " + s.ToString());
          for (int k = 0; k < 10; ++k) {
            s = comm.Recv(&got, 1, DataType::kI32, left, 3);
            if (!s.ok() || got != left * 100 + k) {
              return f->push_back("tag 3 message " + std::to_string(k) + ": " +
                                  std::to_string(got) + " " + s.ToString());
            }
          }
          for (auto& r : sends) {
            if (Status w = r.Wait(); !w.ok()) f->push_back(w.ToString());
          }
          // Point-to-point traffic and a collective in flight together.
          float token = static_cast<float>(me);
          auto pending = comm.Irecv(&token, 1, DataType::kF32, left, 9);
          if (!pending.ok()) return f->push_back(pending.status().ToString());
          float x = 1;
          s = comm.Allreduce(&x, 1, DataType::kF32, ReduceOp::kSum);
          if (s.ok()) s = comm.Send(&x, 1, DataType::kF32, right, 9);
          if (s.ok()) s = pending->Wait();
          if (!s.ok() || token != static_cast<float>(n))
            f->push_back("with a collective: " + s.ToString());
        },
        &failures);
    for (const auto& f : failures) ADD_FAILURE() << n << " workers: " << f;
  }
}

TEST(PointToPointTest, MismatchedCountOrTypeNamesTheSenderAndPoisons) {
  std::vector<std::string> failures;
  RunJob(
      2, 0, milliseconds(1500),
      [&](Communicator& comm, std::vector<std::string>* f) {
        std::vector<float> v(16);
        if (comm.rank() == 0) {
          Status s = comm.Send(v.data(), 16, DataType::kF32, 1, 4);
          // The receiver refuses the message: the send times out (loopback) or completes (eager).
          if (!s.ok() && s.code() != StatusCode::kDeadlineExceeded)
            f->push_back("sender: " + s.ToString());
          return;
        }
        Status s = comm.Recv(v.data(), 12, DataType::kF32, 0, 4);
        if (s.code() != StatusCode::kInvalidArgument ||
            s.message().find("worker 0 sent 16 f32 (64 bytes)") == std::string::npos ||
            s.message().find("expects 12 f32 (48 bytes)") == std::string::npos) {
          f->push_back("receiver: " + s.ToString());
        }
        if (comm.Barrier().code() != StatusCode::kAborted) f->push_back("receiver not poisoned");
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

TEST(PointToPointTest, BadArgumentsAreRefusedWithoutPoisoning) {
  std::vector<std::string> failures;
  RunJob(
      2, 0, milliseconds(5000),
      [&](Communicator& comm, std::vector<std::string>* f) {
        float v[2] = {0, 0};
        const int other = 1 - comm.rank();
        auto expect_invalid = [&](const std::string& what, Status s, const std::string& text) {
          if (s.code() != StatusCode::kInvalidArgument ||
              s.message().find(text) == std::string::npos) {
            f->push_back(what + ": " + s.ToString());
          }
        };
        expect_invalid("self", comm.Send(v, 2, DataType::kF32, comm.rank(), 0),
                       "not another worker");
        expect_invalid("peer", comm.Recv(v, 2, DataType::kF32, 2, 0), "peer 2");
        expect_invalid("tag", comm.Send(v, 2, DataType::kF32, other, kPointToPointTagLimit), "tag");
        expect_invalid("negative tag", comm.Send(v, 2, DataType::kF32, other, -1), "tag -1");
        expect_invalid("null", comm.Recv(nullptr, 2, DataType::kF32, other, 0), "null");
        Status s = comm.rank() == 0 ? comm.Send(v, 2, DataType::kF32, 1, 0)
                                    : comm.Recv(v, 2, DataType::kF32, 0, 0);
        if (!s.ok()) f->push_back("after bad arguments: " + s.ToString());
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// Worker 0 of `workers` on a loopback fabric posts a one-float receive with `post` (five seconds
// to its deadline), and worker `killed` dies 50 ms into its wait: the receive fails with
// kUnavailable, its message holding `named`, within seconds.
void ExpectKilledPeerFailsTheReceive(
    int workers, int killed,
    const std::function<StatusOr<PointToPointRequest>(Transport&, const PointToPointOptions&)>&
        post,
    const std::string& named) {
  LoopbackFabric fabric(workers);
  std::vector<std::unique_ptr<Transport>> transports;
  for (int r = 0; r < workers; ++r) transports.push_back(fabric.CreateTransport(r));
  PointToPointOptions o;
  float v = 0;
  o.count = 1;
  o.data = &v;
  o.num_workers = workers;
  o.deadline = DeadlineAfter(milliseconds(5000));
  auto r = post(*transports[0], o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  std::thread killer([&] {
    std::this_thread::sleep_for(milliseconds(50));
    fabric.Kill(killed);
  });
  const auto start = SteadyClock::now();
  Status s = r->Wait();
  killer.join();
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find(named), std::string::npos) << s.ToString();
  EXPECT_LT(SteadyClock::now() - start, milliseconds(3000));
}

// A receive from a worker that is gone, or that never sends: an error naming it by the deadline.
TEST(PointToPointTest, DeadOrSilentPeerFailsInTime) {
  constexpr auto kTimeout = milliseconds(800);
  std::vector<std::string> failures;
  RunJob(
      3, 0, kTimeout,
      [&](Communicator& comm, std::vector<std::string>* f) {
        if (comm.rank() != 0) return;  // workers 1 and 2 say nothing
        float v = 0;
        const auto start = SteadyClock::now();
        Status s = comm.Recv(&v, 1, DataType::kF32, 2, 0);
        if (s.code() != StatusCode::kDeadlineExceeded ||
            s.message().find("worker 2") == std::string::npos) {
          f->push_back("silent: " + s.ToString());
        }
        if (SteadyClock::now() - start > kTimeout + milliseconds(2000))
          f->push_back("silent: took too long");
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;

  ExpectKilledPeerFailsTheReceive(
      2, 1,
      [](Transport& t, PointToPointOptions o) {
        o.peer = 1;
        return PostRecv(t, o);
      },
      "worker 1");
}

// Receives from any worker: every worker's messages on one tag reach worker 0 in each sender's
// order, each named by its sender; a receive from a named worker posted meanwhile keeps its
// message; tags stay apart.
TEST(PointToPointTest, ReceiveFromAnyWorkerNamesTheSender) {
  constexpr int kWorkers = 4;
  constexpr int kEach = 3;
  std::vector<std::string> failures;
  RunJob(
      kWorkers, 0, milliseconds(30000),
      [&](Communicator& comm, std::vector<std::string>* f) {
        const int me = comm.rank();
        if (me != 0) {
          for (int k = 0; k < kEach; ++k) {
            std::vector<int64_t> v(1001, me * 100 + k);
            if (Status s = comm.Send(v.data(), v.size(), DataType::kI64, 0, 5); !s.ok())
              return f->push_back(s.ToString());
          }
          const int32_t x = me;
          if (me <= 2) {
            if (Status s = comm.Send(&x, 1, DataType::kI32, 0, 6); !s.ok())
              f->push_back(s.ToString());
          }
          return;
        }
        std::map<int, std::vector<int64_t>> seen;  // sender: its values, in arrival order
        for (int i = 0; i < (kWorkers - 1) * kEach; ++i) {
          std::vector<int64_t> v(1001, -1);
          int source = -1;
          Status s = comm.RecvAny(v.data(), v.size(), DataType::kI64, 5, &source);
          if (!s.ok()) return f->push_back("recv " + std::to_string(i) + ": " + s.ToString());
          if (source < 1 || source >= kWorkers) return f->push_back("bad source");
          seen[source].push_back(v[0]);
          if (v.back() != v[0]) f->push_back("recv " + std::to_string(i) + ": torn message");
        }
        for (int w = 1; w < kWorkers; ++w) {
          std::vector<int64_t> want;
          for (int k = 0; k < kEach; ++k) want.push_back(w * 100 + k);
          if (seen[w] != want) f->push_back("worker " + std::to_string(w) + ": out of order");
        }
        // Tag 6: a receive from any worker posted first, then one from worker 2: worker 2's
        // message goes to the named receive, the other to the one from any worker.
        int32_t any = -1, named = -1;
        auto from_any = comm.IrecvAny(&any, 1, DataType::kI32, 6);
        auto from_two = comm.Irecv(&named, 1, DataType::kI32, 2, 6);
        if (!from_any.ok() || !from_two.ok()) return f->push_back("tag 6: post failed");
        Status s = from_two->Wait();
        if (s.ok()) s = from_any->Wait();
        if (!s.ok() || named != 2 || any != 1 || from_any->peer() != 1 || from_two->peer() != 2) {
          f->push_back("tag 6: " + s.ToString() + " named " + std::to_string(named) + " any " +
                       std::to_string(any) + " from " + std::to_string(from_any->peer()));
        }
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// A receive from any worker when none sends: kDeadlineExceeded by the deadline; when one sends
// another count: kInvalidArgument naming it; when a worker dies: kUnavailable naming it.
TEST(PointToPointTest, ReceiveFromAnyWorkerFailsInTimeAndNamesAMismatchedSender) {
  // Worker 2 sends 4 floats with tag 2; worker 0 receives `count` floats with `tag` from any
  // worker, each call bounded by `timeout`.
  struct Outcome {
    Status status;
    int source = -1;
    SteadyClock::duration took{};
  };
  auto receive_any = [](milliseconds timeout, size_t count, int tag) {
    Outcome outcome;
    std::vector<std::string> failures;
    RunJob(
        3, 0, timeout,
        [&](Communicator& comm, std::vector<std::string>*) {
          float v[4] = {};
          if (comm.rank() == 2) {
            (void)comm.Send(v, 4, DataType::kF32, 0, 2);  // refused or timed out: not checked
            return;
          }
          if (comm.rank() != 0) return;
          const auto start = SteadyClock::now();
          outcome.status = comm.RecvAny(v, count, DataType::kF32, tag, &outcome.source);
          outcome.took = SteadyClock::now() - start;
        },
        &failures);
    for (const auto& f : failures) ADD_FAILURE() << f;
    return outcome;
  };
  constexpr auto kTimeout = milliseconds(800);
  const Outcome silent = receive_any(kTimeout, 1, 1);
  EXPECT_EQ(silent.status.code(), StatusCode::kDeadlineExceeded) << silent.status.ToString();
  EXPECT_NE(silent.status.message().find("any worker with tag 1"), std::string::npos)
      << silent.status.ToString();
  EXPECT_GT(silent.took, kTimeout - milliseconds(50));
  EXPECT_LT(silent.took, kTimeout + milliseconds(2000));

  const Outcome mismatch = receive_any(milliseconds(5000), 3, 2);
  EXPECT_EQ(mismatch.status.code(), StatusCode::kInvalidArgument) << mismatch.status.ToString();
  EXPECT_NE(mismatch.status.message().find("worker 2 sent 4 f32"), std::string::npos)
      << mismatch.status.ToString();
  EXPECT_EQ(mismatch.source, -1);

  std::mutex posting;
  ExpectKilledPeerFailsTheReceive(
      3, 2, [&](Transport& t, const PointToPointOptions& o) { return PostRecvAny(t, o, &posting); },
      "peer 2 is gone");
}

// kProduct: the kernel on every type, then through the ring, halving-doubling, recursive doubling,
// the Reduction Server, reduce-scatter and reduce, exact (the inputs are powers of two) and
// bit-identical on every worker.
TEST(ProductTest, KernelMultipliesEveryTypeExactly) {
  for (DataType type : testing::kAllTypes) {
    const int n = 9;
    const size_t count = 1003;
    std::vector<char> acc = testing::MakeProductInput(type, 0, count);
    for (int r = 1; r < n; ++r) {
      std::vector<char> in = testing::MakeProductInput(type, r, count);
      ReduceInto(type, ReduceOp::kProduct, acc.data(), in.data(), count);
    }
    for (size_t i = 0; i < count; ++i) {
      ASSERT_EQ(testing::Load(type, acc.data(), i), testing::ProductReference(type, n, i))
          << DataTypeName(type) << " element " << i;
    }
  }
  // Integers wrap modulo 2^bits.
  int32_t a[1] = {1 << 30};
  const int32_t four[1] = {4};
  ReduceInto(DataType::kI32, ReduceOp::kProduct, a, four, 1);
  EXPECT_EQ(a[0], 0);
  EXPECT_EQ(ParseReduceOp("product"), ReduceOp::kProduct);
  EXPECT_EQ(ParseReduceOp("prod"), ReduceOp::kProduct);
}

TEST(ProductTest, EveryReducingAlgorithmMultipliesExactly) {
  for (auto [workers, reducers] :
       {std::pair{1, 0}, std::pair{3, 0}, std::pair{4, 2}, std::pair{5, 3}}) {
    std::vector<std::string> failures;
    std::mutex mu;
    std::map<std::string, std::vector<char>> first;
    RunJob(
        workers, reducers, milliseconds(30000),
        [&](Communicator& comm, std::vector<std::string>* f) {
          const int n = comm.size();
          std::vector<Algorithm> algos = {Algorithm::kRing, Algorithm::kRecursiveDoubling};
          if (HalvingDoublingFits(n)) algos.push_back(Algorithm::kHalvingDoubling);
          if (comm.num_reducers() > 0) algos.push_back(Algorithm::kReductionServer);
          for (DataType type : testing::kAllTypes) {
            for (size_t count : {size_t{0}, size_t{1}, size_t{1001}, size_t{20011}}) {
              const std::string name =
                  std::string(DataTypeName(type)) + "/" + std::to_string(count);
              auto check = [&](const std::string& what, const char* data, size_t elems,
                               size_t first_index) {
                for (size_t i = 0; i < elems; ++i) {
                  if (testing::Load(type, data, i) !=
                      testing::ProductReference(type, n, first_index + i)) {
                    f->push_back(what + " " + name + ": element " + std::to_string(i));
                    return;
                  }
                }
              };
              for (Algorithm algo : algos) {
                std::vector<char> v = testing::MakeProductInput(type, comm.rank(), count);
                Status s = comm.Allreduce(v.data(), count, type, ReduceOp::kProduct, algo);
                if (!s.ok())
                  return f->push_back(std::string(AlgorithmName(algo)) + ": " + s.ToString());
                check(std::string(AlgorithmName(algo)), v.data(), count, 0);
                std::lock_guard<std::mutex> lock(mu);
                auto [it, inserted] = first.emplace(std::string(AlgorithmName(algo)) + name, v);
                if (!inserted && it->second != v)
                  f->push_back(std::string(AlgorithmName(algo)) + " " + name + ": workers differ");
              }
              const std::vector<char> in = testing::MakeProductInput(type, comm.rank(), n * count);
              std::vector<char> block(count * DataTypeSize(type) + 1);
              Status s =
                  comm.ReduceScatter(in.data(), block.data(), count, type, ReduceOp::kProduct);
              if (!s.ok()) return f->push_back("reduce-scatter: " + s.ToString());
              check("reduce-scatter", block.data(), count, comm.rank() * count);
              std::vector<char> mine = testing::MakeProductInput(type, comm.rank(), count),
                                out = mine;
              s = comm.Reduce(mine.data(), out.data(), count, type, ReduceOp::kProduct, n - 1);
              if (!s.ok()) return f->push_back("reduce: " + s.ToString());
              if (comm.rank() == n - 1) check("reduce", out.data(), count, 0);
            }
          }
        },
        &failures);
    for (const auto& f : failures)
      ADD_FAILURE() << workers << " workers, " << reducers << " reducers: " << f;
  }
}

}  // namespace
}  // namespace cohort::collective
