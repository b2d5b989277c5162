// Fault tests over the loopback transport with FaultyTransport: a dead worker or reducer, or lost
// messages, make every survivor return an error no later than its deadline; nothing hangs.
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "collective/algorithms/recursive_doubling.h"
#include "collective/algorithms/reduction_server.h"
#include "collective/algorithms/ring_allreduce.h"
#include "collective/transport/faulty_transport.h"
#include "collective/transport/loopback/loopback_transport.h"
#include "tests/collective/test_util.h"
#include "tests/testing/process.h"

namespace cohort::collective {
namespace {

using std::chrono::milliseconds;

constexpr auto kDeadline = milliseconds(3000);
constexpr auto kSlack = milliseconds(2000);

struct Outcome {
  Status status;
  SteadyClock::duration elapsed{};
};

// The options of a reducer of `workers` workers and `reducers` reducers in these tests.
ReductionServerOptions ReducerOptions(int workers, int reducers) {
  ReductionServerOptions so;
  so.num_workers = workers;
  so.num_reducers = reducers;
  so.round_timeout = kDeadline;
  so.poll_interval = milliseconds(20);
  return so;
}

using AllreduceFunction = Status (*)(Transport&, const AllreduceOptions&);

// Runs `rounds` all-reduces on each worker (by `allreduce`; by default the Reduction Server with
// reducers, else the ring); worker/reducer `victim` gets `plan`. Returns each rank's first error
// (or OK) and when it came, relative to its round's start.
std::vector<Outcome> RunWithFault(int workers, int reducers, int victim, FaultPlan plan, int rounds,
                                  AllreduceFunction allreduce = nullptr) {
  if (allreduce == nullptr) allreduce = reducers > 0 ? ReductionServerAllreduce : RingAllreduce;
  LoopbackFabric fabric(workers + reducers);
  std::vector<std::unique_ptr<Transport>> base;
  for (int r = 0; r < workers + reducers; ++r) base.push_back(fabric.CreateTransport(r));
  if (!plan.on_death) plan.on_death = [&fabric, victim] { fabric.Kill(victim); };
  FaultyTransport faulty(*base[victim], plan);
  auto transport = [&](int r) -> Transport& { return r == victim ? faulty : *base[r]; };
  std::vector<Outcome> out(workers + reducers);
  std::atomic<bool> stop{false};
  std::atomic<int> workers_done{0};
  testing::RunRanks(workers + reducers, [&](int r) {
    if (r >= workers) {
      ReductionServer server(transport(r), ReducerOptions(workers, reducers));
      const auto start = SteadyClock::now();
      out[r].status = server.Serve(stop);
      out[r].elapsed = SteadyClock::now() - start;
      return;
    }
    struct Done {
      std::atomic<int>& n;
      std::atomic<bool>& stop;
      int workers;
      ~Done() {
        if (n.fetch_add(1) + 1 == workers) stop.store(true);  // reducers may idle for a header
      }
    } done{workers_done, stop, workers};
    std::vector<char> data = testing::MakeInput(DataType::kF32, r, 50000);
    for (int i = 0; i < rounds; ++i) {
      AllreduceOptions o;
      o.data = data.data();
      o.count = 50000;
      o.seq = i;
      o.deadline = SteadyClock::now() + kDeadline;
      o.chunk_bytes = 8192;
      o.num_workers = workers;
      o.num_reducers = reducers;
      const auto start = SteadyClock::now();
      Status s = allreduce(transport(r), o);
      if (!s.ok()) {
        out[r].status = s;
        out[r].elapsed = SteadyClock::now() - start;
        return;
      }
    }
    if (reducers > 0)
      (void)SendStopToReducers(transport(r), workers, reducers, SteadyClock::now() + kDeadline);
  });
  return out;
}

void ExpectSurvivorsFailInTime(const std::vector<Outcome>& out, int workers, int victim) {
  for (int r = 0; r < workers; ++r) {
    if (r == victim) continue;
    EXPECT_FALSE(out[r].status.ok()) << "worker " << r << " finished although a peer died";
    EXPECT_LT(out[r].elapsed, kDeadline + kSlack)
        << "worker " << r << ": " << out[r].status.ToString();
  }
}

TEST(FaultTest, DeadReducerFailsEveryWorker) {
  FaultPlan plan;
  plan.die_after_ops = 40;  // mid-way through the first or second round
  auto out = RunWithFault(3, 2, 3, plan, 5);
  ExpectSurvivorsFailInTime(out, 3, 3);
  // The workers whose chunks went to the dead reducer see it as gone, not as a timeout.
  int unavailable = 0;
  for (int r = 0; r < 3; ++r) unavailable += out[r].status.code() == StatusCode::kUnavailable;
  EXPECT_GT(unavailable, 0);
}

TEST(FaultTest, DeadWorkerFailsTheRing) {
  FaultPlan plan;
  plan.die_after_ops = 30;
  auto out = RunWithFault(5, 0, 2, plan, 5);
  ExpectSurvivorsFailInTime(out, 5, 2);
  EXPECT_EQ(out[3].status.code(), StatusCode::kUnavailable) << out[3].status.ToString();
}

// Five workers: worker 0 folds into worker 1 and waits for the result; 1-4 exchange. Whichever
// dies, every survivor fails by its deadline, and a partner of the dead one sees it gone.
TEST(FaultTest, DeadWorkerFailsRecursiveDoubling) {
  for (int victim : {0, 1, 3}) {
    FaultPlan plan;
    plan.die_after_ops = 5;  // round 3 for worker 0 (2 calls a round), 1 for 1 (6), 2 for 3 (4)
    auto out = RunWithFault(5, 0, victim, plan, 5, RecursiveDoublingAllreduce);
    ExpectSurvivorsFailInTime(out, 5, victim);
    const int partner = victim == 0 ? 1 : victim == 1 ? 0 : 4;  // 3 <-> 4 at distance 1
    EXPECT_EQ(out[partner].status.code(), StatusCode::kUnavailable)
        << "victim " << victim << ": " << out[partner].status.ToString();
    EXPECT_NE(out[partner].status.message().find("worker " + std::to_string(victim)),
              std::string::npos)
        << out[partner].status.ToString();
  }
}

TEST(FaultTest, DeadWorkerFailsTheReductionServer) {
  FaultPlan plan;
  plan.die_after_ops = 25;
  auto out = RunWithFault(4, 2, 1, plan, 5);
  ExpectSurvivorsFailInTime(out, 4, 1);
  // The reducers name the dead worker to the others (reduction_server.h, "Failures"): they do not
  // blame the reducers, which stop serving.
  for (int r : {0, 2, 3}) {
    EXPECT_EQ(out[r].status.code(), StatusCode::kUnavailable) << out[r].status.ToString();
    EXPECT_NE(out[r].status.message().find("worker 1 is gone"), std::string::npos)
        << out[r].status.ToString();
  }
  for (int r = 4; r < 6; ++r) {
    EXPECT_FALSE(out[r].status.ok()) << "reducer " << r - 4;
    EXPECT_LT(out[r].elapsed, 5 * (kDeadline + kSlack));
  }
}

// A worker's transport that never reports a gone peer (a test double): the worker then learns of
// a dead peer only from the reducers.
class BlindTransport final : public testing::ForwardingTransport {
 public:
  using ForwardingTransport::ForwardingTransport;
  int gone_peer() const override { return -1; }
  bool peer_gone(int) const override { return false; }
};

// 3 workers and 2 reducers make one all-reduce; then worker 1 dies and the others, after a pause
// well past the reducers' old 2 s notice window, make the next (deadline 60 s). Returns each
// rank's status of that call (reducers: Serve's). `blind`: the survivors' transports do not
// report the dead worker; `linger`: the reducers' failure_linger.
std::vector<Status> DieBetweenRounds(bool blind, milliseconds linger) {
  constexpr int kWorkers = 3, kReducers = 2, kVictim = 1;
  LoopbackFabric fabric(kWorkers + kReducers);
  std::vector<std::unique_ptr<Transport>> base, blinded;
  for (int r = 0; r < kWorkers + kReducers; ++r) {
    base.push_back(fabric.CreateTransport(r));
    blinded.push_back(std::make_unique<BlindTransport>(*base.back()));
  }
  std::vector<Status> out(kWorkers + kReducers);
  std::atomic<bool> stop{false};
  std::atomic<int> first_done{0}, workers_done{0};
  testing::RunRanks(kWorkers + kReducers, [&](int r) {
    if (r >= kWorkers) {
      ReductionServerOptions so = ReducerOptions(kWorkers, kReducers);
      so.failure_linger = linger;
      out[r] = ReductionServer(*base[r], so).Serve(stop);
      return;
    }
    Transport& t = blind && r != kVictim ? *blinded[r] : *base[r];
    std::vector<char> data = testing::MakeInput(DataType::kF32, r, 50000);
    AllreduceOptions o;
    o.data = data.data();
    o.count = 50000;
    o.chunk_bytes = 8192;
    o.num_workers = kWorkers;
    o.num_reducers = kReducers;
    o.deadline = SteadyClock::now() + milliseconds(60000);
    out[r] = ReductionServerAllreduce(t, o);
    ++first_done;
    if (r == kVictim) {
      // Dies once every worker has its result (its last act).
      (void)cohort::testing::WaitUntil([&] { return first_done.load() == kWorkers; },
                                       milliseconds(60000));
      fabric.Kill(kVictim);
    } else if (out[r].ok()) {
      std::this_thread::sleep_for(milliseconds(4000));
      o.seq = 1;
      o.deadline = SteadyClock::now() + milliseconds(60000);
      out[r] = ReductionServerAllreduce(t, o);
    }
    if (++workers_done == kWorkers) stop.store(true);  // a reducer may still linger
  });
  return out;
}

// Each survivor's (workers 0 and 2) status is kUnavailable with `fragment` in its message.
void ExpectSurvivorsGot(const std::vector<Status>& out, const std::string& fragment) {
  for (int r : {0, 2}) {
    EXPECT_EQ(out[r].code(), StatusCode::kUnavailable)
        << "worker " << r << ": " << out[r].ToString();
    EXPECT_NE(out[r].message().find(fragment), std::string::npos)
        << "worker " << r << ": " << out[r].ToString();
  }
}

// The reducers keep telling: a survivor's next call, made long after the death, fails naming the
// dead worker, as the reducers told it (its own transport is blind), not blaming a reducer.
TEST(FaultTest, WorkerDeadBetweenRoundsIsNamedByTheLingeringReducers) {
  auto out = DieBetweenRounds(/*blind=*/true, milliseconds(30000));
  ExpectSurvivorsGot(out, "worker 1 is gone (reducer");
  for (int r : {3, 4}) {
    EXPECT_EQ(out[r].code(), StatusCode::kUnavailable)
        << "reducer " << r - 3 << ": " << out[r].ToString();
  }
}

// Past failure_linger the reducers are gone, and a survivor's next call fails at once naming the
// dead worker its own transport saw go (RoundVerdicts::Post).
TEST(FaultTest, WorkerDeadBetweenRoundsIsNamedPastTheLinger) {
  ExpectSurvivorsGot(DieBetweenRounds(/*blind=*/false, milliseconds(100)),
                     "worker 1 is gone (this worker's transport");
}

// Two workers die between rounds, worker 2 first, while the reducer waits on worker 0's header
// (a long poll interval keeps it there): worker 0's receive fails first, yet worker 2 went first
// and is the one named, to the survivor too (told by the reducer: its own transport is blind).
// Worker 0, whose receive that was, is gone as well: the reducer does not linger for it (it
// lingered out failure_linger, 60 s here, before) and ends once the survivor has been told.
TEST(FaultTest, AReducerNamesTheWorkerGoneFirstAndLingersForNoDeadWorker) {
  constexpr int kWorkers = 3, kReducers = 1;
  LoopbackFabric fabric(kWorkers + kReducers);
  std::vector<std::unique_ptr<Transport>> base;
  for (int r = 0; r < kWorkers + kReducers; ++r) base.push_back(fabric.CreateTransport(r));
  std::vector<Status> out(kWorkers + kReducers);
  SteadyClock::duration served{};
  const std::atomic<bool> stop{false};  // never set: the reducer ends on its own
  std::atomic<int> first_done{0};
  testing::RunRanks(kWorkers + kReducers, [&](int r) {
    if (r >= kWorkers) {
      ReductionServerOptions so = ReducerOptions(kWorkers, kReducers);
      so.poll_interval = milliseconds(20000);
      so.failure_linger = milliseconds(60000);
      const auto start = SteadyClock::now();
      out[r] = ReductionServer(*base[r], so).Serve(stop);
      served = SteadyClock::now() - start;
      return;
    }
    std::vector<char> data = testing::MakeInput(DataType::kF32, r, 5000);
    AllreduceOptions o;
    o.data = data.data();
    o.count = 5000;
    o.num_workers = kWorkers;
    o.num_reducers = kReducers;
    o.deadline = SteadyClock::now() + milliseconds(60000);
    out[r] = ReductionServerAllreduce(*base[r], o);
    ++first_done;
    (void)cohort::testing::WaitUntil([&] { return first_done.load() == kWorkers; },
                                     milliseconds(60000));
    if (r == 0) {
      std::this_thread::sleep_for(milliseconds(300));  // the reducer waits on worker 0 by now
      fabric.Kill(2);
      fabric.Kill(0);
    } else if (r == 1 && out[r].ok()) {
      // Its own transport does not see them go: the reducer tells it.
      std::this_thread::sleep_for(milliseconds(1000));
      BlindTransport blind(*base[r]);
      o.seq = 1;
      o.deadline = SteadyClock::now() + milliseconds(60000);
      out[r] = ReductionServerAllreduce(blind, o);
    }
  });
  EXPECT_EQ(out[1].code(), StatusCode::kUnavailable) << out[1].ToString();
  EXPECT_NE(out[1].message().find("worker 2 is gone"), std::string::npos) << out[1].ToString();
  EXPECT_EQ(out[3].code(), StatusCode::kUnavailable) << out[3].ToString();
  EXPECT_NE(out[3].message().find("worker 2 is gone"), std::string::npos) << out[3].ToString();
  EXPECT_LT(served, milliseconds(30000)) << "the reducer lingered for a worker that was gone";
}

TEST(FaultTest, LostMessagesBecomeDeadlineErrors) {
  FaultPlan plan;
  plan.drop_sends_to = {3};  // worker 0 never reaches reducer 0
  plan.on_death = [] {};
  auto out = RunWithFault(3, 1, 0, plan, 2);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(out[r].status.code(), StatusCode::kDeadlineExceeded)
        << "worker " << r << ": " << out[r].status.ToString();
    EXPECT_LT(out[r].elapsed, kDeadline + kSlack);
  }
}

TEST(FaultTest, SlowPeerStillFinishes) {
  FaultPlan plan;
  plan.send_delay = milliseconds(1);
  plan.on_death = [] {};
  auto out = RunWithFault(3, 0, 1, plan, 2);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(out[r].status.ok()) << out[r].status.ToString();
}

// The round header a worker makes for call `o` (f32, sum, as the tests' are), for a test to spoil
// and send by hand.
RoundHeader HeaderLike(const AllreduceOptions& o) {
  RoundHeader h;
  h.type = static_cast<uint8_t>(DataType::kF32);
  h.op = static_cast<uint8_t>(ReduceOp::kSum);
  h.wire_type = h.type;
  h.window = static_cast<uint8_t>(o.window);
  h.count = o.count;
  h.chunk_bytes = o.chunk_bytes;
  return h;
}

// A round header that no worker makes (another build's, or garbage) fails the reducer at once with
// an error naming the worker and what is wrong, before the reducer allocates or waits for
// anything by it; a header whose count or chunk would have it allocate more than it may fails
// with kResourceExhausted. Either way the workers whose headers are in hear it in their verdict
// and fail saying so. (Before 2026-12-07 these were served: a kind that only reducers send as a
// round, a window past 64, chunks of parts of elements, chunks whose tags reach the verdicts',
// and buffers sized by the header alone.) Worker 0 is a real worker; worker 1 sends the header.
TEST(FaultTest, AMalformedRoundHeaderFailsTheReducerNamingTheWorkerAndTheField) {
  constexpr size_t kCount = size_t{4} << 20;  // 16 MiB of f32: 128 KiB chunks, 4 in flight
  struct Case {
    std::string name;
    std::function<void(RoundHeader&)> spoil;  // of a header like worker 0's
    StatusCode code;
    std::string quoted;  // as the reducer's error quotes what is wrong
  };
  const std::vector<Case> cases = {
      {"a verdict's kind", [](RoundHeader& h) { h.kind = RoundHeader::kAccept; },
       StatusCode::kDataLoss, "kind 3 is not one a worker sends"},
      {"no type", [](RoundHeader& h) { h.type = 77; }, StatusCode::kDataLoss, "round header"},
      {"an i32 wire", [](RoundHeader& h) { h.wire_type = static_cast<uint8_t>(DataType::kI32); },
       StatusCode::kDataLoss, "wire type 4 for f32"},
      {"window 0", [](RoundHeader& h) { h.window = 0; }, StatusCode::kDataLoss,
       "window 0 (1 to 64)"},
      {"window 200", [](RoundHeader& h) { h.window = 200; }, StatusCode::kDataLoss, "window 200"},
      {"parts of elements", [](RoundHeader& h) { h.chunk_bytes = 6; }, StatusCode::kDataLoss,
       "chunks of 6 bytes for 4194304 elements of 4 bytes"},
      {"a chunk larger than the call", [](RoundHeader& h) { h.chunk_bytes = uint64_t{1} << 40; },
       StatusCode::kDataLoss, "chunks of 1099511627776 bytes"},
      {"a count past the address space", [](RoundHeader& h) { h.count = uint64_t{1} << 63; },
       StatusCode::kDataLoss, "count 9223372036854775808"},
      {"chunks past the tags' steps",
       [](RoundHeader& h) {
         h.count = uint64_t{1} << 40;
         h.chunk_bytes = 4096;
       },
       StatusCode::kDataLoss, "1073741824 chunks"},
      // The same call as worker 0's; 2 workers x 4 chunks of 128 KiB in flight is 1 MiB.
      {"buffers past the limit", [](RoundHeader&) {}, StatusCode::kResourceExhausted,
       "needs more than the 524288 bytes"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    LoopbackFabric fabric(3);
    std::vector<std::unique_ptr<Transport>> t;
    for (int r = 0; r < 3; ++r) t.push_back(fabric.CreateTransport(r));
    AllreduceOptions o;
    std::vector<char> data = testing::MakeInput(DataType::kF32, 0, kCount);
    o.data = data.data();
    o.count = kCount;
    o.deadline = SteadyClock::now() + kDeadline;
    o.num_workers = 2;
    o.num_reducers = 1;
    Status worker0;
    std::thread real([&] { worker0 = ReductionServerAllreduce(*t[0], o); });
    // Worker 1's header: worker 0's call, spoiled. Its verdict receive is posted first, as a
    // worker's is; the reducer's refusal reaches it where its header is a round's.
    RoundHeader verdict;
    auto verdict_recv =
        t[1]->Irecv(2, MakeTag(0, kVerdictStep), MutableBytes{&verdict, sizeof(verdict)});
    ASSERT_TRUE(verdict_recv.ok()) << verdict_recv.status().ToString();
    RoundHeader h = HeaderLike(o);
    c.spoil(h);
    auto sent = t[1]->Isend(2, MakeTag(0, kHeaderStep), ConstBytes{&h, sizeof(h)});
    ASSERT_TRUE(sent.ok()) << sent.status().ToString();
    ReductionServerOptions so = ReducerOptions(2, 1);
    so.max_round_bytes = size_t{512} << 10;
    so.poll_interval = milliseconds(2000);  // worker 0's header is taken first, whenever it comes
    std::atomic<bool> stop{false};
    const Status s = ReductionServer(*t[2], so).Serve(stop);
    real.join();
    EXPECT_EQ(s.code(), c.code) << s.ToString();
    EXPECT_NE(s.message().find(c.quoted), std::string::npos) << s.ToString();
    EXPECT_EQ(worker0.code(), c.code) << worker0.ToString();
    if (h.kind == RoundHeader::kRound) {
      ASSERT_TRUE(verdict_recv->Wait(SteadyClock::now() + kDeadline).ok());
      EXPECT_EQ(verdict.kind, RoundHeader::kAbort);
      EXPECT_EQ(verdict.op, static_cast<uint8_t>(c.code));
    }
    if (c.code == StatusCode::kDataLoss) {
      EXPECT_NE(s.message().find("reducer: worker 1: "), std::string::npos) << s.ToString();
      EXPECT_NE(worker0.message().find("reducer 0 could not take worker 1's round header"),
                std::string::npos)
          << worker0.ToString();
    } else {
      EXPECT_NE(worker0.message().find("reducer 0 refused the round"), std::string::npos)
          << worker0.ToString();
    }
  }
}

// Worker 1's round header is refused (window 0) while worker 2 is still computing: its header comes
// 300 ms after the refusal. The reducer lingers as after a failure and answers it with the same
// kAbort verdict, so worker 2 fails saying why (before 2026-12-08 the reducer had ended its service
// and worker 2 found it gone, or here, with the reducer's transport still open, waited out its
// deadline). The reducer ends once every other worker has heard.
TEST(FaultTest, AWorkerWhoseHeaderComesAfterARefusalHearsWhy) {
  constexpr size_t kCount = size_t{1} << 20;
  LoopbackFabric fabric(4);
  std::vector<std::unique_ptr<Transport>> t;
  for (int r = 0; r < 4; ++r) t.push_back(fabric.CreateTransport(r));
  std::vector<std::vector<char>> data(3);
  std::vector<AllreduceOptions> o(3);
  std::vector<Status> out(3);
  for (int w : {0, 2}) {
    data[w] = testing::MakeInput(DataType::kF32, w, kCount);
    o[w].data = data[w].data();
    o[w].count = kCount;
    o[w].deadline = SteadyClock::now() + kDeadline;
    o[w].num_workers = 3;
    o[w].num_reducers = 1;
  }
  std::thread first([&] { out[0] = ReductionServerAllreduce(*t[0], o[0]); });
  std::thread late([&] {
    std::this_thread::sleep_for(milliseconds(300));
    out[2] = ReductionServerAllreduce(*t[2], o[2]);
  });
  RoundHeader verdict;
  auto verdict_recv =
      t[1]->Irecv(3, MakeTag(0, kVerdictStep), MutableBytes{&verdict, sizeof(verdict)});
  ASSERT_TRUE(verdict_recv.ok()) << verdict_recv.status().ToString();
  RoundHeader h = HeaderLike(o[0]);
  h.window = 0;  // no worker sends that
  auto sent = t[1]->Isend(3, MakeTag(0, kHeaderStep), ConstBytes{&h, sizeof(h)});
  ASSERT_TRUE(sent.ok()) << sent.status().ToString();
  std::atomic<bool> stop{false};
  const auto started = SteadyClock::now();
  const Status s = ReductionServer(*t[3], ReducerOptions(3, 1)).Serve(stop);
  const auto served = SteadyClock::now() - started;
  first.join();
  late.join();
  EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
  EXPECT_NE(s.message().find("reducer: worker 1: "), std::string::npos) << s.ToString();
  for (int w : {0, 2}) {
    EXPECT_EQ(out[w].code(), StatusCode::kDataLoss) << "worker " << w << ": " << out[w].ToString();
    EXPECT_NE(out[w].message().find("reducer 0 could not take worker 1's round header"),
              std::string::npos)
        << "worker " << w << ": " << out[w].ToString();
  }
  EXPECT_LT(served, milliseconds(30000)) << "the reducer lingered after every worker had heard";
}

}  // namespace
}  // namespace cohort::collective
