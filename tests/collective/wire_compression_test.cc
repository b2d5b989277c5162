// Wire compression (CommunicatorOptions::wire_dtype, COHORT_WIRE_DTYPE): float32 all-reduce
// buffers cross to the reducers and back as bf16 or f16, reduced in float32 there.
//
// Exactness: every worker ends with exactly widen(round(op over workers, in worker order, of
// widen(round(x_w)))) in float32, so every worker holds identical bytes; for sums that is within
// one wire rounding of the exact sum of the rounded inputs (plus float32 accumulation) and within
// the inputs' rounding of the exact float32 sum. Half the bytes: a worker sends 2 bytes per
// element, a reducer returns 2. Elsewhere (ring, halving-doubling, recursive doubling) float32
// moves as it is.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <mutex>

#include "collective/algorithms/reduction_server.h"
#include "collective/communicator.h"
#include "collective/kernels/half.h"
#include "collective/reducer.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/loopback_job.h"
#include "tests/collective/process_util.h"
#include "tests/collective/test_util.h"
#include "tests/testing/process.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

// A float32 with a full mantissa (so the wire rounding matters), in [-8, 8); near 1 for kProduct
// (a product over 5 workers stays in f16's range).
float WireInput(int rank, size_t i, ReduceOp op) {
  const uint64_t h = (static_cast<uint64_t>(i) * 0x9E3779B97F4A7C15ull) ^
                     (static_cast<uint64_t>(rank + 1) * 0xBF58476D1CE4E5B9ull);
  const double u =
      static_cast<double>((h >> 11) % (1ull << 40)) / static_cast<double>(1ull << 40);  // [0, 1)
  if (op == ReduceOp::kProduct) return static_cast<float>(0.75 + 0.5 * u);
  return static_cast<float>(16 * u - 8);
}

float Round(DataType wire, float v) {
  return wire == DataType::kBF16 ? BFloat16ToFloat(FloatToBFloat16(v))
                                 : HalfToFloat(FloatToHalf(v));
}

// The result every worker must hold, bit for bit.
float Model(DataType wire, ReduceOp op, int n, size_t i) {
  float acc = Round(wire, WireInput(0, i, op));
  for (int w = 1; w < n; ++w) {
    const float v = Round(wire, WireInput(w, i, op));
    switch (op) {
      case ReduceOp::kSum:
      case ReduceOp::kAvg:
        acc = acc + v;
        break;
      case ReduceOp::kMin:
        acc = v < acc ? v : acc;
        break;
      case ReduceOp::kMax:
        acc = acc < v ? v : acc;
        break;
      case ReduceOp::kProduct:
        acc = acc * v;
        break;
      default:  // the bitwise ops reduce integers only: never compressed
        ADD_FAILURE() << "no float model for " << ReduceOpName(op);
    }
  }
  if (op == ReduceOp::kAvg) acc = acc / static_cast<float>(n);
  return Round(wire, acc);
}

class WireCompressionTest : public ::testing::TestWithParam<std::tuple<int, int, DataType>> {};

TEST_P(WireCompressionTest, EveryWorkerHoldsTheModelsBytes) {
  const auto [workers, reducers, wire] = GetParam();
  CommunicatorOptions options;
  options.timeout = milliseconds(30000);
  options.chunk_bytes = 4096;
  options.wire_dtype = wire;
  std::vector<std::string> failures;
  std::mutex mu;
  std::map<std::string, std::vector<float>> first;
  testing::RunLoopbackJob(
      workers, reducers, options,
      [&](Communicator& comm, std::vector<std::string>* f) {
        for (ReduceOp op :
             {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct}) {
          for (size_t count : {size_t{1}, size_t{1001}, size_t{20011}, size_t{100003}}) {
            const std::string name = std::string(ReduceOpName(op)) + "/" + std::to_string(count);
            std::vector<float> v(count);
            for (size_t i = 0; i < count; ++i) v[i] = WireInput(comm.rank(), i, op);
            Status s =
                comm.Allreduce(v.data(), count, DataType::kF32, op, Algorithm::kReductionServer);
            if (!s.ok()) return f->push_back(name + ": " + s.ToString());
            for (size_t i = 0; i < count; ++i) {
              const float want = Model(wire, op, comm.size(), i);
              if (std::memcmp(&v[i], &want, 4) != 0) {
                f->push_back(name + ": element " + std::to_string(i) + " = " +
                             std::to_string(v[i]) + ", model " + std::to_string(want));
                break;
              }
            }
            std::lock_guard<std::mutex> lock(mu);
            auto [it, inserted] = first.emplace(name, v);
            if (!inserted && std::memcmp(it->second.data(), v.data(), count * 4) != 0) {
              f->push_back(name + ": workers hold different bytes");
            }
          }
        }
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// The sum's error: within one wire rounding of the result from the exact sum of the rounded inputs
// (plus float32 accumulation), and within the inputs' rounding of the exact float32 sum.
TEST_P(WireCompressionTest, SumIsWithinOneRoundingOfTheRoundedInputsSum) {
  const auto [workers, reducers, wire] = GetParam();
  const double u = wire == DataType::kBF16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  const double tiny =
      std::ldexp(1.0, -24);  // f16 subnormal spacing: the floor of its rounding error
  CommunicatorOptions options;
  options.timeout = milliseconds(30000);
  options.wire_dtype = wire;
  std::vector<std::string> failures;
  testing::RunLoopbackJob(
      workers, reducers, options,
      [&](Communicator& comm, std::vector<std::string>* f) {
        const size_t count = 50000;
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = WireInput(comm.rank(), i, ReduceOp::kSum);
        Status s = comm.Allreduce(v.data(), count, DataType::kF32, ReduceOp::kSum,
                                  Algorithm::kReductionServer);
        if (!s.ok()) return f->push_back(s.ToString());
        const int n = comm.size();
        for (size_t i = 0; i < count; ++i) {
          double exact = 0, rounded = 0, magnitude = 0;
          for (int w = 0; w < n; ++w) {
            exact += WireInput(w, i, ReduceOp::kSum);
            rounded += Round(wire, WireInput(w, i, ReduceOp::kSum));
            magnitude += std::fabs(WireInput(w, i, ReduceOp::kSum));
          }
          const double accumulation = n * std::ldexp(1.0, -24) * magnitude;
          if (std::fabs(v[i] - rounded) > u * std::fabs(rounded) + accumulation + tiny) {
            return f->push_back("element " + std::to_string(i) + ": " + std::to_string(v[i]) +
                                " is more than one rounding from the rounded inputs' sum " +
                                std::to_string(rounded));
          }
          if (std::fabs(v[i] - exact) >
              u * (magnitude + std::fabs(exact)) + accumulation + (n + 1) * tiny) {
            return f->push_back("element " + std::to_string(i) + ": " + std::to_string(v[i]) +
                                " vs exact " + std::to_string(exact));
          }
        }
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

INSTANTIATE_TEST_SUITE_P(WorkersReducersWire, WireCompressionTest,
                         ::testing::Values(std::make_tuple(1, 1, DataType::kBF16),
                                           std::make_tuple(2, 1, DataType::kBF16),
                                           std::make_tuple(3, 2, DataType::kBF16),
                                           std::make_tuple(4, 4, DataType::kBF16),
                                           std::make_tuple(5, 3, DataType::kBF16),
                                           std::make_tuple(3, 2, DataType::kF16),
                                           std::make_tuple(4, 1, DataType::kF16)),
                         [](const auto& info) {
                           return "w" + std::to_string(std::get<0>(info.param)) + "_r" +
                                  std::to_string(std::get<1>(info.param)) + "_" +
                                  std::string(DataTypeName(std::get<2>(info.param)));
                         });

// A Transport that counts the bytes of every send and forwards it.
class CountingTransport final : public testing::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  std::string name() const override { return "counting(" + ForwardingTransport::name() + ")"; }
  StatusOr<Request> Isend(int peer, Tag tag, ConstBytes data) override {
    sent_ += data.size;
    return ForwardingTransport::Isend(peer, tag, data);
  }
  size_t sent() const { return sent_; }

 private:
  std::atomic<size_t> sent_{0};
};

// Per element, a worker sends 2 bytes (4 without compression) and the reducers return 2 to each.
TEST(WireCompressionBytesTest, HalfTheBytesEachWay) {
  constexpr int kWorkers = 3, kReducers = 2;
  constexpr size_t kCount = 300001;
  for (DataType wire : {DataType::kF32, DataType::kBF16, DataType::kF16}) {
    LoopbackFabric fabric(kWorkers + kReducers);
    std::vector<std::unique_ptr<Transport>> base;
    std::vector<std::unique_ptr<CountingTransport>> counted;
    for (int r = 0; r < kWorkers + kReducers; ++r) {
      base.push_back(fabric.CreateTransport(r));
      counted.push_back(std::make_unique<CountingTransport>(*base.back()));
    }
    std::atomic<bool> stop{false};
    std::vector<Status> status(kWorkers + kReducers);
    testing::RunRanks(kWorkers + kReducers, [&](int r) {
      if (r >= kWorkers) {
        ReductionServerOptions so;
        so.num_workers = kWorkers;
        so.num_reducers = kReducers;
        ReductionServer server(*counted[r], so);
        status[r] = server.Serve(stop);
        return;
      }
      std::vector<float> v(kCount, 1.5f);
      AllreduceOptions o;
      o.data = v.data();
      o.count = kCount;
      o.deadline = DeadlineAfter(milliseconds(30000));
      o.num_workers = kWorkers;
      o.num_reducers = kReducers;
      o.wire_type = wire;
      status[r] = ReductionServerAllreduce(*counted[r], o);
      if (status[r].ok() && v[kCount - 1] != 4.5f) status[r] = Internal("wrong sum");
      const Status stopped =
          SendStopToReducers(*counted[r], kWorkers, kReducers, DeadlineAfter(milliseconds(5000)));
      if (status[r].ok()) status[r] = stopped;
    });
    const size_t wire_bytes = DataTypeSize(wire);
    const size_t header = sizeof(RoundHeader) * kReducers;
    for (int r = 0; r < kWorkers; ++r) {
      EXPECT_TRUE(status[r].ok()) << status[r].ToString();
      // The round's headers and the stop headers, then the chunks.
      EXPECT_EQ(counted[r]->sent(), kCount * wire_bytes + 2 * header)
          << DataTypeName(wire) << ", worker " << r;
    }
    size_t returned = 0;
    for (int r = kWorkers; r < kWorkers + kReducers; ++r) {
      EXPECT_TRUE(status[r].ok()) << status[r].ToString();
      returned += counted[r]->sent();
    }
    // The chunks, and each reducer's verdict on each worker's round and answer to its stop.
    EXPECT_EQ(returned,
              kCount * wire_bytes * kWorkers + 2 * sizeof(RoundHeader) * kWorkers * kReducers)
        << DataTypeName(wire);
  }
}

// The ring, halving-doubling and recursive doubling move float32 as it is: an input whose float32
// sum is exact but whose bf16 rounding is not comes back exact from them and rounded from the
// Reduction Server.
TEST(WireCompressionScopeTest, PeerToPeerAlgorithmsStayExactFloat32) {
  CommunicatorOptions options;
  options.timeout = milliseconds(30000);
  options.wire_dtype = DataType::kBF16;
  std::vector<std::string> failures;
  testing::RunLoopbackJob(
      4, 2, options,
      [&](Communicator& comm, std::vector<std::string>* f) {
        const float x = 1.0f + std::ldexp(1.0f, -20);  // needs 21 mantissa bits
        for (Algorithm algo : {Algorithm::kRing, Algorithm::kHalvingDoubling,
                               Algorithm::kRecursiveDoubling, Algorithm::kReductionServer}) {
          std::vector<float> v(1000, x);
          Status s = comm.Allreduce(v.data(), v.size(), DataType::kF32, ReduceOp::kSum, algo);
          if (!s.ok()) return f->push_back(s.ToString());
          const float want = algo == Algorithm::kReductionServer ? 4.0f : 4 * x;
          if (v[999] != want) {
            f->push_back(std::string(AlgorithmName(algo)) + ": " + std::to_string(v[999]) +
                         ", want " + std::to_string(want));
          }
        }
        // Other types cross as they are, even through the Reduction Server.
        std::vector<double> d(10, 1.0 + std::ldexp(1.0, -40));
        Status s = comm.Allreduce(d.data(), d.size(), DataType::kF64, ReduceOp::kSum,
                                  Algorithm::kReductionServer);
        if (!s.ok() || d[9] != 4 * (1.0 + std::ldexp(1.0, -40)))
          f->push_back("f64: " + s.ToString());
      },
      &failures);
  for (const auto& f : failures) ADD_FAILURE() << f;
}

// COHORT_RS_MAX_FLOWS: unset keeps "by placement" (-1), 0 means no limit, a negative count is
// refused naming the variable.
TEST(CommunicatorOptionsTest, ReductionServerMaxFlowsFromTheEnvironment) {
  unsetenv("COHORT_RS_MAX_FLOWS");
  CommunicatorOptions options;
  ASSERT_TRUE(CommunicatorOptionsFromEnvironment(&options).ok());
  EXPECT_EQ(options.max_flows, -1);
  setenv("COHORT_RS_MAX_FLOWS", "0", 1);
  ASSERT_TRUE(CommunicatorOptionsFromEnvironment(&options).ok());
  EXPECT_EQ(options.max_flows, 0);
  setenv("COHORT_RS_MAX_FLOWS", "-3", 1);
  Status s = CommunicatorOptionsFromEnvironment(&options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("COHORT_RS_MAX_FLOWS"), std::string::npos) << s.ToString();
  unsetenv("COHORT_RS_MAX_FLOWS");
}

TEST(WireCompressionOptionsTest, EnvironmentAndBadValues) {
  setenv("COHORT_WIRE_DTYPE", "bf16", 1);
  CommunicatorOptions options;
  ASSERT_TRUE(CommunicatorOptionsFromEnvironment(&options).ok());
  EXPECT_EQ(options.wire_dtype, DataType::kBF16);
  setenv("COHORT_WIRE_DTYPE", "f16", 1);
  ASSERT_TRUE(CommunicatorOptionsFromEnvironment(&options).ok());
  EXPECT_EQ(options.wire_dtype, DataType::kF16);
  setenv("COHORT_WIRE_DTYPE", "none", 1);
  ASSERT_TRUE(CommunicatorOptionsFromEnvironment(&options).ok());
  EXPECT_EQ(options.wire_dtype, DataType::kF32);
  setenv("COHORT_WIRE_DTYPE", "fp8", 1);
  Status s = CommunicatorOptionsFromEnvironment(&options);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("COHORT_WIRE_DTYPE='fp8'"), std::string::npos) << s.ToString();
  unsetenv("COHORT_WIRE_DTYPE");

  LoopbackFabric fabric(1);
  InMemoryBootstrap bootstrap;
  CommunicatorOptions bad;
  bad.transport = CommunicatorOptions::TransportKind::kLoopback;
  bad.loopback_fabric = &fabric;
  bad.wire_dtype = DataType::kI32;
  auto comm = Communicator::Create(bootstrap, 0, 1, 0, bad);
  ASSERT_FALSE(comm.ok());
  EXPECT_EQ(comm.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(comm.status().message().find("wire_dtype"), std::string::npos)
      << comm.status().ToString();
}

// Workers that disagree on compression: the reducer refuses the round and says what each sent,
// and its verdicts fail every worker's call with the same news (kInvalidArgument, not the
// deadline: the timeout is far longer than the test may take).
TEST(WireCompressionOptionsTest, WorkersThatDisagreeAreRefusedByTheReducer) {
  LoopbackFabric fabric(3);
  InMemoryBootstrap bootstrap;
  std::vector<Status> worker_status(2), reducer_status(1);
  testing::RunRanks(3, [&](int r) {
    CommunicatorOptions options;
    options.transport = CommunicatorOptions::TransportKind::kLoopback;
    options.loopback_fabric = &fabric;
    options.timeout = milliseconds(120000);
    if (r == 2) {
      ReducerOptions ro;
      ro.comm = options;
      ro.rejoin_timeout = milliseconds(0);
      ro.max_generations = 1;
      std::atomic<bool> stop{false};
      reducer_status[0] = RunReducer(bootstrap, 2, 1, 0, ro, stop);
      return;
    }
    options.wire_dtype = r == 1 ? DataType::kBF16 : DataType::kF32;
    auto comm = Communicator::Create(bootstrap, r, 2, 1, options);
    if (!comm.ok()) {
      worker_status[r] = comm.status();
      return;
    }
    std::vector<float> v(1000, 1.0f);
    worker_status[r] = (*comm)->Allreduce(v.data(), v.size(), DataType::kF32, ReduceOp::kSum,
                                          Algorithm::kReductionServer);
  });
  EXPECT_EQ(reducer_status[0].code(), StatusCode::kInvalidArgument) << reducer_status[0].ToString();
  EXPECT_NE(reducer_status[0].message().find("on the wire as bf16"), std::string::npos)
      << reducer_status[0].ToString();
  for (int w = 0; w < 2; ++w) {
    const Status& s = worker_status[w];
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    EXPECT_NE(s.message().find("worker " + std::to_string(1 - w) + " called 1000 f32"),
              std::string::npos)
        << s.ToString();
    EXPECT_NE(s.message().find("on the wire as bf16"), std::string::npos) << s.ToString();
  }
}

// Across processes over UCX (tcp): workers with COHORT_WIRE_DTYPE=bf16 and reducer processes; every
// worker checks its bytes against the model (so all hold the same bytes).
TEST(WireCompressionProcessTest, ReducerProcessesReduceInFloat32) {
  constexpr int kWorkers = 3, kReducers = 2;
  const int port = cohort::testing::PickFreePort();
  auto set_env = [&] {
    setenv("UCX_TLS", "tcp", 1);
    setenv("UCX_WARN_UNUSED_ENV_VARS", "n", 1);
    setenv("COHORT_BOOTSTRAP_ADDR", ("127.0.0.1:" + std::to_string(port)).c_str(), 1);
    setenv("WORLD_SIZE", std::to_string(kWorkers).c_str(), 1);
    setenv("COHORT_NUM_REDUCERS", std::to_string(kReducers).c_str(), 1);
    setenv("COHORT_COMM_TIMEOUT_MS", "30000", 1);
    setenv("COHORT_ALLREDUCE_ALGORITHM", "reduction-server", 1);
    setenv("COHORT_WIRE_DTYPE", "bf16", 1);
    unsetenv("COHORT_CHUNK_BYTES");
  };
  testing::ProcessGroup group;
  for (int i = 0; i < kReducers; ++i) {
    group.Spawn([&, i] {
      set_env();
      return testing::ReducerMain(i);
    });
  }
  for (int r = 0; r < kWorkers; ++r) {
    group.Spawn([&, r] {
      set_env();
      setenv("RANK", std::to_string(r).c_str(), 1);
      auto comm = Communicator::FromEnvironment();
      if (!comm.ok()) {
        std::fprintf(stderr, "worker %d: %s\n", r, comm.status().ToString().c_str());
        return 1;
      }
      for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kAvg, ReduceOp::kMax}) {
        const size_t count = size_t{1} << 20;
        std::vector<float> v(count);
        for (size_t i = 0; i < count; ++i) v[i] = WireInput(r, i, op);
        Status s = (*comm)->Allreduce(v.data(), count, DataType::kF32, op);
        if (!s.ok()) {
          std::fprintf(stderr, "worker %d: %s\n", r, s.ToString().c_str());
          return 2;
        }
        for (size_t i = 0; i < count; ++i) {
          const float want = Model(DataType::kBF16, op, kWorkers, i);
          if (std::memcmp(&v[i], &want, 4) != 0) {
            std::fprintf(stderr, "worker %d %s: element %zu = %g, model %g\n", r,
                         std::string(ReduceOpName(op)).c_str(), i, v[i], want);
            return 3;
          }
        }
      }
      return 0;
    });
  }
  ASSERT_TRUE(group.Wait(milliseconds(120000))) << "processes did not finish";
  for (int i = 0; i < kReducers + kWorkers; ++i) {
    EXPECT_EQ(group.code(i), 0) << (i < kReducers ? "reducer " + std::to_string(i)
                                                  : "worker " + std::to_string(i - kReducers));
  }
}

}  // namespace
}  // namespace cohort::collective
