// The agent's side of the hang watchdog: the progress a ProgressProbe reads from a replica's log,
// metric file and flight recorder (the latter two on their readers' threads, whose readings a
// test seam holds to stand in for a hung storage), and the stack dumps of real processes (a native
// one, and a Python one that registered cohort's faulthandler hook).
#include "agent/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "agent/flight_recorder_poller.h"
#include "agent/metric_file_reader.h"
#include "agent/proc_scan.h"
#include "agent/python_site.h"
#include "agent/stack_dump.h"
#include "common/flight_recorder.h"
#include "common/stack_where.h"
#include "tests/agent/test_util.h"
#include "tests/testing/process.h"

#ifndef COHORT_PYTHON_DIR
#define COHORT_PYTHON_DIR ""
#endif

namespace cohort::agent {
namespace {

namespace ct = cohort::testing;
using namespace std::chrono_literals;

void Append(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::app) << text;
}

TEST(ProgressProbeTest, IdleTimesCountFromTheLastGrowthOrTheStart) {
  ct::TempDir dir;
  std::string log = dir.Join("attempt-0.log");
  std::string metrics = dir.Join("hp_metrics.jsonl");
  auto reader = std::make_shared<MetricFileReader>(metrics, /*tail=*/false);
  auto recorder = std::make_shared<FlightRecorderPoller>(dir.Join("flight-recorder"), 0);
  ProgressProbe probe(log, reader, recorder, 1000);
  // The metric file is stat'ed on the reader's thread: a reading takes the newest finished stat
  // and asks for the next. Here each reading's stat finishes before the next reading.
  wire::ReplicaProgressT p;
  auto sample = [&](int64_t now_ms) {
    probe.Sample(now_ms, &p);
    ASSERT_TRUE(ct::WaitUntil(
        [&] {
          return reader->Latest().done >= reader->asked() && recorder->done() >= recorder->asked();
        },
        30s));
  };
  ASSERT_NO_FATAL_FAILURE(sample(1500));
  EXPECT_EQ(p.log_idle_ms, 500);  // nothing yet: from the start
  EXPECT_EQ(p.metric_idle_ms, 500);
  EXPECT_FALSE(p.has_recorder);

  Append(log, "step 1\n");
  ASSERT_NO_FATAL_FAILURE(sample(2000));
  EXPECT_EQ(p.log_idle_ms, 0);
  EXPECT_EQ(p.metric_idle_ms, 1000);
  ASSERT_NO_FATAL_FAILURE(sample(3000));
  EXPECT_EQ(p.log_idle_ms, 1000);  // no growth since

  Append(metrics, "{\"loss\": 1}\n");
  Append(log, "step 2\n");
  ASSERT_NO_FATAL_FAILURE(sample(3500));
  EXPECT_EQ(p.log_idle_ms, 0);
  EXPECT_EQ(p.metric_idle_ms, 2500);  // the stat asked for at 3000 found no file
  ASSERT_NO_FATAL_FAILURE(sample(4000));
  EXPECT_EQ(p.log_idle_ms, 500);
  EXPECT_EQ(p.metric_idle_ms, 0);  // the one asked for at 3500 found it grown
  ASSERT_NO_FATAL_FAILURE(sample(5000));
  EXPECT_EQ(p.metric_idle_ms, 1000);
}

TEST(ProgressProbeTest, AMetricFileStatThatHangsShowsNoGrowthAndHoldsNoReading) {
  ct::TempDir dir;
  std::string metrics = dir.Join("hp_metrics.jsonl");
  Append(metrics, "{\"loss\": 1}\n");
  ct::HeldReads held(metrics);
  auto reader = std::make_shared<MetricFileReader>(metrics, /*tail=*/false);
  ProgressProbe probe("", reader, nullptr, 1000);
  wire::ReplicaProgressT p;
  probe.Sample(1000, &p);  // asks for the first stat, which hangs
  ASSERT_TRUE(ct::WaitUntil([&] { return held.entered() == 1; }, 30s));
  for (int64_t now = 2000; now <= 5000; now += 1000) {
    probe.Sample(now, &p);  // returns while the stat hangs
    EXPECT_EQ(p.metric_idle_ms, now - 1000);
  }
  held.Release();
  ASSERT_TRUE(ct::WaitUntil([&] { return reader->Latest().done >= reader->asked(); }, 30s));
  probe.Sample(6000, &p);
  EXPECT_EQ(p.metric_idle_ms, 0);  // the content is seen once the stat returned
}

// A recorder file with `completed` allreduces completed on its first communicator and the next
// one entered.
struct TestRecorder {
  explicit TestRecorder(const std::string& path, int rank = 2) {
    auto created = FlightRecorder::CreateFile(path, 64, rank, 4);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (created.ok()) recorder = std::move(*created);
  }
  // Completes the operation entered (if any), then enters the next (at `enqueue_ns`: 0, now).
  void Step(uint64_t bytes = 64 << 20, int64_t enqueue_ns = 0) {
    if (!recorder) return;
    if (comm < 0) comm = static_cast<int32_t>(recorder->RegisterCommunicator());
    Complete();
    current = FlightRecord();
    current.op_seq = next_seq++;
    current.comm_id = static_cast<uint32_t>(comm);
    current.op = FlightOp::kAllreduce;
    current.bytes = bytes;
    current.algorithm = 2;  // ring
    current.enqueue_ns = enqueue_ns;
    current.start_ns = enqueue_ns;
    entered = recorder->Begin(current);
  }
  // The rank's process exits normally (its recorder says so).
  void Exit() { recorder->MarkExited(); }
  // Completes the operation entered (if any) and enters none.
  void Complete() {
    if (entered) recorder->End(*entered, current, Status::Ok());
    entered.reset();
  }

  std::unique_ptr<FlightRecorder> recorder;
  int32_t comm = -1;
  uint32_t next_seq = 0;
  FlightRecord current;
  std::optional<uint64_t> entered;
};

// A probe of the recorder files at `path` (set up from `not_before_ns` on) alone, whose every
// reading waits for the snapshots it asked for, so that the next reading sees them.
struct RecorderProbe {
  RecorderProbe(const std::string& path, int64_t not_before_ns)
      : poller(std::make_shared<FlightRecorderPoller>(path, not_before_ns)),
        probe("", nullptr, poller, 1000) {}
  void Sample(int64_t now_ms, wire::ReplicaProgressT* out) {
    probe.Sample(now_ms, out);
    ASSERT_TRUE(ct::WaitUntil([&] { return poller->done() >= poller->asked(); }, 30s));
  }
  std::shared_ptr<FlightRecorderPoller> poller;
  ProgressProbe probe;
};

// `p` shows a recorder whose newest completed operation is `completed` and which is in `current`.
void ExpectRecorder(const wire::ReplicaProgressT& p, int64_t completed, int64_t current) {
  EXPECT_TRUE(p.has_recorder);
  EXPECT_EQ(p.completed_seq, completed);
  EXPECT_EQ(p.current_seq, current);
}

TEST(ProgressProbeTest, ReadsTheFlightRecorder) {
  ct::TempDir dir;
  std::string path = dir.Join("flight-recorder");
  auto poller = std::make_shared<FlightRecorderPoller>(path, 0);
  ProgressProbe probe("", nullptr, poller, 1000);
  // The recorder is snapshot on the poller's thread: a reading takes the newest finished
  // snapshot and asks for the next. Here each snapshot finishes before the next reading.
  auto sample = [&](int64_t now_ms, wire::ReplicaProgressT* out) {
    probe.Sample(now_ms, out);
    ASSERT_TRUE(ct::WaitUntil([&] { return poller->done() >= poller->asked(); }, 30s));
  };
  wire::ReplicaProgressT p;
  ASSERT_NO_FATAL_FAILURE(sample(1100, &p));
  EXPECT_FALSE(p.has_recorder);         // the replica has not created it yet
  EXPECT_EQ(p.completed_idle_ms, 100);  // from the start

  TestRecorder recorder(path);
  ASSERT_TRUE(recorder.recorder);
  for (int i = 0; i < 3; ++i) recorder.Step();
  recorder.Step(1 << 20);  // 0, 1 and 2 completed; stuck in 3

  wire::ReplicaProgressT o;
  ASSERT_NO_FATAL_FAILURE(sample(1200, &o));
  EXPECT_FALSE(o.has_recorder);  // the snapshot asked for at 1100 found no file
  wire::ReplicaProgressT q;
  ASSERT_NO_FATAL_FAILURE(sample(1300, &q));  // the one asked for at 1200 found it
  ExpectRecorder(q, 2, 3);
  EXPECT_EQ(q.rank, -1) << "a replica of one rank names none";
  EXPECT_EQ(q.current_op, "allreduce");
  EXPECT_EQ(q.current_algorithm, "ring");
  EXPECT_EQ(q.current_bytes, 1 << 20);
  EXPECT_GE(q.current_ms, 0);
  EXPECT_GE(q.completed_idle_ms, 0);
  EXPECT_LT(q.completed_idle_ms, 60'000);
  ASSERT_EQ(q.starts.size(), 4u);  // every operation entered, in order
  EXPECT_EQ(q.starts[0].seq(), 0);
  EXPECT_EQ(q.starts[3].seq(), 3);
  // Unix microseconds of about now.
  int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                       std::chrono::system_clock::now().time_since_epoch())
                       .count();
  EXPECT_LT(std::abs(q.starts[3].unix_us() - now_us), 60'000'000);

  // The next reading reports only the operations entered since.
  wire::ReplicaProgressT r;
  ASSERT_NO_FATAL_FAILURE(sample(1400, &r));
  EXPECT_TRUE(r.starts.empty());
  EXPECT_EQ(r.current_seq, 3);
  EXPECT_GE(r.current_ms, q.current_ms);  // counted to each reading
}

TEST(ProgressProbeTest, AFlightRecorderReadingThatHangsShowsNoProgressAndHoldsNoReading) {
  ct::TempDir dir;
  std::string path = dir.Join("flight-recorder");
  TestRecorder recorder(path);
  ASSERT_TRUE(recorder.recorder);
  recorder.Step();
  recorder.Step();  // 0 completed; in 1
  auto poller = std::make_shared<FlightRecorderPoller>(path, 0);
  ProgressProbe probe("", nullptr, poller, 1000);
  wire::ReplicaProgressT p;
  probe.Sample(1000, &p);
  ASSERT_TRUE(ct::WaitUntil([&] { return poller->done() >= poller->asked(); }, 30s));
  wire::ReplicaProgressT seen;
  probe.Sample(1100, &seen);
  ExpectRecorder(seen, 0, 1);
  ASSERT_TRUE(ct::WaitUntil([&] { return poller->done() >= poller->asked(); }, 30s));

  // From here every snapshot hangs.
  ct::HeldReads held(path);
  probe.Sample(1200, &p);  // asks for a snapshot, which hangs
  ASSERT_TRUE(ct::WaitUntil([&] { return held.entered() == 1; }, 30s));
  recorder.Step();  // the replica goes on: 1 completed; in 2; no reading sees it
  int64_t current_ms = 0;
  for (int64_t now = 2000; now <= 5000; now += 1000) {
    wire::ReplicaProgressT q;
    probe.Sample(now, &q);    // returns while the snapshot hangs
    ExpectRecorder(q, 0, 1);  // the newest snapshot's, its ages counted to now
    EXPECT_GE(q.current_ms, current_ms);
    EXPECT_GE(q.completed_idle_ms, 0);
    EXPECT_TRUE(q.starts.empty());
    current_ms = q.current_ms;
  }
  // Asked for: the held one and one behind it, which served every later reading's request.
  EXPECT_EQ(poller->asked(), poller->done() + 2);

  held.Release();  // the snapshot is taken now: progress shows at the next reading
  ASSERT_TRUE(ct::WaitUntil([&] { return poller->done() >= poller->asked(); }, 30s));
  wire::ReplicaProgressT r;
  probe.Sample(6000, &r);
  ExpectRecorder(r, 1, 2);
  ASSERT_EQ(r.starts.size(), 1u);  // the one entered while the reading hung, once
  EXPECT_EQ(r.starts[0].seq(), 2);
}

// Ranks that inherit one path (torchrun inside the replica) write "<path>", "<path>.1", ...: the
// replica is where its slowest rank is, and each operation's start is its latest rank's, reported
// once every rank has entered it.
TEST(ProgressProbeTest, AReplicaOfSeveralRanksIsWhereItsSlowestRankIs) {
  ct::TempDir dir;
  const std::string path = dir.Join("flight-recorder");
  TestRecorder first(path, 0), second(path + ".1", 1);
  ASSERT_TRUE(first.recorder && second.recorder);
  RecorderProbe probe(path, 0);
  auto sample = [&](int64_t now_ms, wire::ReplicaProgressT* out) { probe.Sample(now_ms, out); };
  // Each sample sees the snapshots the one before asked for. Operation s is entered at base + s
  // ms by the first rank, 50 ms later by the second.
  const int64_t base = FlightClockNs() - 1'000'000'000;
  const auto at = [&](int s, int64_t late_ms) { return base + (s + late_ms) * 1'000'000; };
  for (int s = 0; s < 4; ++s) first.Step(64, at(s, 0));  // 0-2 completed; in 3
  for (int s = 0; s < 3; ++s) second.Step(64, at(s, 50));
  second.Complete();  // 0-2 completed; outside any operation (stuck computing, say)

  wire::ReplicaProgressT p, q;
  ASSERT_NO_FATAL_FAILURE(sample(1100, &p));  // asks for the first snapshots
  ASSERT_NO_FATAL_FAILURE(sample(1200, &q));
  EXPECT_TRUE(q.has_recorder);
  EXPECT_EQ(q.completed_seq, 2);
  EXPECT_EQ(q.current_seq, -1) << "the second rank has not entered #3: nor has the replica";
  EXPECT_EQ(q.rank, 1) << "the replica's state is its second rank's";
  // Operations 0-2, which both ranks entered, at the second rank's starts; #3 waits for it.
  ASSERT_EQ(q.starts.size(), 3u);
  // Each file's own wall-clock anchor turns its start into Unix time: equal to a few microseconds.
  const int64_t wall_minus_mono_us = (std::chrono::duration_cast<std::chrono::nanoseconds>(
                                          std::chrono::system_clock::now().time_since_epoch())
                                          .count() -
                                      FlightClockNs()) /
                                     1000;
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(q.starts[s].seq(), s);
    EXPECT_NEAR(static_cast<double>(q.starts[s].unix_us()),
                static_cast<double>(at(s, 50) / 1000 + wall_minus_mono_us), 5'000)
        << "operation " << s << ": the later rank's start";
  }

  second.Step(64, at(3, 50));  // enters #3 too: both wait in it
  wire::ReplicaProgressT unseen, r;
  ASSERT_NO_FATAL_FAILURE(sample(1300, &unseen));  // the snapshots asked for before the step
  EXPECT_TRUE(unseen.starts.empty());
  ASSERT_NO_FATAL_FAILURE(sample(1400, &r));
  ExpectRecorder(r, 2, 3);
  ASSERT_EQ(r.starts.size(), 1u);
  EXPECT_EQ(r.starts[0].seq(), 3);
  EXPECT_NEAR(static_cast<double>(r.starts[0].unix_us()),
              static_cast<double>(at(3, 50) / 1000 + wall_minus_mono_us), 5'000);
  // Of two ranks in #3, the one in it longer (the first) says how long the replica has been.
  EXPECT_GE(r.current_ms, 900);

  first.Step(64);  // the first completes #3 and enters #4; the second is still in #3
  wire::ReplicaProgressT t;
  ASSERT_NO_FATAL_FAILURE(sample(1500, &unseen));
  ASSERT_NO_FATAL_FAILURE(sample(1600, &t));
  ExpectRecorder(t, 2, 3);
  EXPECT_TRUE(unseen.starts.empty() && t.starts.empty());
}

// A rank whose process exited normally is done: not the replica's slowest, nor waited for by the
// operations' starts. Once every rank has exited, the replica says so (ranks_exited): it is
// finishing (torchrun noticing up to its monitor interval later), not stuck.
TEST(ProgressProbeTest, RanksThatExitedAreDoneAndAReplicaAllOfWhoseRanksExitedSaysSo) {
  ct::TempDir dir;
  const std::string path = dir.Join("flight-recorder");
  TestRecorder first(path), second(path + ".1");
  ASSERT_TRUE(first.recorder && second.recorder);
  RecorderProbe probe(path, 0);
  auto sample = [&](int64_t now_ms, wire::ReplicaProgressT* out) { probe.Sample(now_ms, out); };
  for (int s = 0; s < 4; ++s) first.Step();  // in #3
  for (int s = 0; s < 3; ++s) second.Step();
  second.Complete();  // completed #2, and exits
  second.Exit();
  wire::ReplicaProgressT unseen, p;
  ASSERT_NO_FATAL_FAILURE(sample(1100, &unseen));
  ASSERT_NO_FATAL_FAILURE(sample(1200, &p));
  ExpectRecorder(p, 2, 3);  // the first rank's: the second is done, not behind
  EXPECT_FALSE(p.ranks_exited);
  ASSERT_EQ(p.starts.size(), 4u);  // #3 waits for no exited rank
  EXPECT_EQ(p.starts[3].seq(), 3);

  first.Complete();
  first.Exit();
  wire::ReplicaProgressT q;
  ASSERT_NO_FATAL_FAILURE(sample(1300, &unseen));
  ASSERT_NO_FATAL_FAILURE(sample(1400, &q));
  EXPECT_TRUE(q.has_recorder);
  EXPECT_TRUE(q.ranks_exited);
  EXPECT_EQ(q.current_seq, -1);
}

// A file an earlier attempt set up on another host (storage the attempts share): that host's
// monotonic clock, ahead of this one's, says "after the launch"; its wall clock says an hour
// before. Not a rank of this attempt.
TEST(ProgressProbeTest, ARecorderFileAnotherHostSetUpBeforeTheLaunchIsNotTakenForARank) {
  ct::TempDir dir;
  const std::string path = dir.Join("flight-recorder");
  const pid_t earlier = ::fork();
  ASSERT_GE(earlier, 0);
  if (earlier == 0) {
    TestRecorder old(path);
    for (int i = 0; i < 4; ++i) old.Step();
    ::_exit(old.recorder ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(earlier, &status, 0), earlier);
  ASSERT_EQ(status, 0);
  constexpr int64_t kHourNs = 3600LL * 1'000'000'000;
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  FlightRecorderHeader h{};
  ASSERT_EQ(::pread(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  h.anchor_monotonic_ns = FlightClockNs() + kHourNs;
  h.anchor_wall_ns -= kHourNs;
  ASSERT_EQ(::pwrite(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  ::close(fd);

  RecorderProbe probe(path, FlightClockNs());
  wire::ReplicaProgressT p, q;
  ASSERT_NO_FATAL_FAILURE(probe.Sample(1100, &p));
  ASSERT_NO_FATAL_FAILURE(probe.Sample(1200, &q));
  EXPECT_FALSE(q.has_recorder) << "the other host's stale ring was taken for a rank";
}

// A file of the path set up before the attempt (by an earlier attempt's process, on storage the
// attempts share) is not this replica's rank until a process of this attempt takes it over; a
// file emptied under the reader never faults it, and its rank keeps its last known state until a
// new writer sets the file up, whose operations count anew.
TEST(ProgressProbeTest, ARecorderFileOfAnEarlierAttemptOrEmptiedUnderTheReaderIsNotTakenForARank) {
  ct::TempDir dir;
  const std::string path = dir.Join("flight-recorder");
  const pid_t earlier = ::fork();
  ASSERT_GE(earlier, 0);
  if (earlier == 0) {  // an earlier attempt's rank: entered #7 and exited
    TestRecorder old(path + ".1");
    for (int i = 0; i < 8; ++i) old.Step();
    ::_exit(old.recorder ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(earlier, &status, 0), earlier);
  ASSERT_EQ(status, 0);

  RecorderProbe probe(path, FlightClockNs());
  auto sample = [&](int64_t now_ms, wire::ReplicaProgressT* out) { probe.Sample(now_ms, out); };
  auto rank0 = std::make_unique<TestRecorder>(path);
  for (int i = 0; i < 3; ++i) rank0->Step();  // 0, 1 completed; in 2
  wire::ReplicaProgressT p, q;
  ASSERT_NO_FATAL_FAILURE(sample(1100, &p));
  ASSERT_NO_FATAL_FAILURE(sample(1200, &q));
  ExpectRecorder(q, 1, 2);  // not the earlier attempt's #7
  EXPECT_EQ(q.starts.size(), 3u);

  // A rank of this attempt takes the earlier file over (its writer has exited): now a rank.
  TestRecorder rank1(path + ".1");
  ASSERT_TRUE(rank1.recorder);
  rank1.Step();  // in 0
  wire::ReplicaProgressT unseen, r;
  ASSERT_NO_FATAL_FAILURE(sample(1300, &unseen));  // each sample sees what the one before asked
  ASSERT_NO_FATAL_FAILURE(sample(1400, &r));
  ExpectRecorder(r, -1, 0);

  // Both files emptied under the reader (torchrun restarting the replica's ranks): no fault; the
  // ranks keep what was last seen.
  rank0.reset();
  ASSERT_EQ(::truncate(path.c_str(), 0), 0);
  ASSERT_EQ(::truncate((path + ".1").c_str(), 0), 0);
  wire::ReplicaProgressT t;
  ASSERT_NO_FATAL_FAILURE(sample(1500, &unseen));
  ASSERT_NO_FATAL_FAILURE(sample(1600, &t));
  ExpectRecorder(t, -1, 0);
  // New writers set them up, one reading apart: their operations count anew, from 0, their starts
  // reported again once both new ranks entered them.
  rank0 = std::make_unique<TestRecorder>(path);
  ASSERT_TRUE(rank0->recorder);
  rank0->Step();  // in 0
  wire::ReplicaProgressT u, v, w;
  ASSERT_NO_FATAL_FAILURE(sample(1700, &unseen));
  ASSERT_NO_FATAL_FAILURE(sample(1800, &u));
  EXPECT_TRUE(u.starts.empty()) << "the other rank has not entered the new #0";
  TestRecorder rank1_again(path + ".1");
  ASSERT_TRUE(rank1_again.recorder);
  rank1_again.Step();  // in 0
  ASSERT_NO_FATAL_FAILURE(sample(1900, &v));
  ASSERT_NO_FATAL_FAILURE(sample(2000, &w));
  ExpectRecorder(w, -1, 0);
  ASSERT_EQ(v.starts.size() + w.starts.size(), 1u);
  EXPECT_EQ((v.starts.empty() ? w : v).starts[0].seq(), 0);
}

// Starts argv in a process group of its own (Reap kills the group: an orphan left holding the
// test's output would keep ctest waiting for it).
pid_t Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env = {}) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    for (const auto& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  return pid;
}

void Reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
}

TEST(StackDumpTest, NativeStacksOfAProcessAndItsChildren) {
  if (!ct::FileExists("/usr/bin/eu-stack") && !ct::FileExists("/usr/bin/gdb")) {
    GTEST_SKIP() << "neither eu-stack (elfutils) nor gdb is installed (scripts/install-deps.sh)";
  }
  pid_t pid = Spawn({"/bin/sh", "-c", "sleep 60 & wait"});
  std::this_thread::sleep_for(300ms);  // the shell forks its child
  std::string text = TakeStackDump(pid, "", "a test");
  Reap(pid);
  EXPECT_NE(text.find("==== stacks taken"), std::string::npos) << text;
  EXPECT_NE(text.find(": a test"), std::string::npos) << text;
  EXPECT_NE(text.find("---- pid " + std::to_string(pid) + ": /bin/sh -c sleep 60 & wait"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(": sleep 60"), std::string::npos) << text;  // the child too
  EXPECT_NE(text.find("-- native stacks"), std::string::npos) << text;
  EXPECT_EQ(text.find("Python stacks"), std::string::npos) << text;  // none registered
}

// The stack dump dir is the replica's: a dump file that is a link (to /dev/zero, which the agent,
// root, would read without end) or a FIFO (whose read would never return) is neither signalled
// nor read.
TEST(StackDumpTest, ADumpFileThatIsALinkOrAFifoIsNeitherSignalledNorRead) {
  ct::TempDir dir;
  const std::string stacks = dir.Join("stacks");
  ASSERT_EQ(::mkdir(stacks.c_str(), 0755), 0);
  pid_t pid = Spawn({"/bin/sh", "-c", "sleep 60 & wait"});
  std::this_thread::sleep_for(300ms);  // the shell forks its child
  std::vector<pid_t> children = Descendants(pid);
  ASSERT_EQ(children.size(), 1u);
  const std::string link = stacks + "/python-" + std::to_string(pid) + ".txt";
  const std::string fifo = stacks + "/python-" + std::to_string(children[0]) + ".txt";
  ASSERT_EQ(::symlink("/dev/zero", link.c_str()), 0);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  StackDumpOptions options;
  options.python_wait = 500ms;
  options.native_timeout = 10s;
  std::string text = TakeStackDump(pid, stacks, "", options);
  // Not signalled: the dump signal's default action would have ended both.
  EXPECT_EQ(::kill(pid, 0), 0);
  EXPECT_EQ(::kill(children[0], 0), 0);
  Reap(pid);
  EXPECT_EQ(text.find("Python stacks"), std::string::npos) << text;
  EXPECT_NE(text.find("---- pid " + std::to_string(children[0])), std::string::npos) << text;
}

TEST(StackDumpTest, PythonStacksOfAProcessThatRegistered) {
  const std::string python = "/usr/bin/python3";
  if (!ct::FileExists(python) || std::string(COHORT_PYTHON_DIR).empty()) {
    GTEST_SKIP() << "needs /usr/bin/python3 and the cohort Python package in the build tree";
  }
  ct::TempDir dir;
  std::string stacks = dir.Join("stacks");
  std::string ready = dir.Join("ready");
  pid_t pid =
      Spawn({python, "-c",
             "import cohort._stack_dump as d, time\nd.register()\nopen('" + ready +
                 "', 'w').close()\ndef stuck_here():\n    time.sleep(60)\nstuck_here()\n"},
            {"PYTHONPATH=" + std::string(COHORT_PYTHON_DIR), "COHORT_STACK_DUMP_DIR=" + stacks,
             "COHORT_STACK_DUMP_SIGNAL=" + std::to_string(StackDumpSignal())});
  for (int i = 0; i < 200 && !ct::FileExists(ready); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(ct::FileExists(ready));
  std::string text = TakeStackDump(pid, stacks, "");
  // Signalled, the process is still there (the handler dumps and returns).
  EXPECT_EQ(::kill(pid, 0), 0);
  Reap(pid);
  EXPECT_NE(text.find("-- Python stacks (faulthandler):"), std::string::npos) << text;
  EXPECT_NE(text.find("stuck_here"), std::string::npos) << text;
}

// faulthandler writes a dump in many writes; one that comes in pieces (here 50 ms apart) is read
// whole, not on its first bytes.
TEST(StackDumpTest, APythonDumpWrittenInPiecesIsReadWhole) {
  const std::string python = "/usr/bin/python3";
  if (!ct::FileExists(python)) GTEST_SKIP() << "needs /usr/bin/python3";
  ct::TempDir dir;
  const std::string stacks = dir.Join("stacks");
  const std::string ready = dir.Join("ready");
  ASSERT_EQ(::mkdir(stacks.c_str(), 0755), 0);
  pid_t pid =
      Spawn({python, "-c",
             "import os, signal, time\n"
             "f = open('" +
                 stacks +
                 "/python-%d.txt' % os.getpid(), 'a')\n"
                 "def dump(*_):\n"
                 "    for part in ('Current thread 0x1 (most recent call first):\\n',\n"
                 "                 '  File \"/x/train.py\", line 7 in inner\\n',\n"
                 "                 '  File \"/x/train.py\", line 9 in <module>\\n', '\\n'):\n"
                 "        f.write(part); f.flush(); time.sleep(0.05)\n"
                 "signal.signal(" +
                 std::to_string(StackDumpSignal()) +
                 ", dump)\n"
                 "open('" +
                 ready +
                 "', 'w').close()\n"
                 "while True: time.sleep(1)\n"},
            {});
  for (int i = 0; i < 200 && !ct::FileExists(ready); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(ct::FileExists(ready));
  StackDumpOptions options;
  options.python_wait = 10s;
  options.python_quiet = 1s;  // well past the pieces' 50 ms, however loaded the machine
  options.native_timeout = 10s;
  const std::string text = TakeStackDump(pid, stacks, "", options);
  Reap(pid);
  EXPECT_NE(text.find("line 7 in inner\n  File \"/x/train.py\", line 9 in <module>\n"),
            std::string::npos)
      << text;
  EXPECT_EQ(StackWhere(text), "in inner (train.py:7)") << text;
}

// A stock script, which never imports cohort, through the agent's sitecustomize: registered at
// its start, its stacks taken; the sitecustomize it hides (Debian's own, say) still runs.
TEST(StackDumpTest, PythonStacksOfAStockScriptThroughTheAgentsSitecustomize) {
  const std::string python = "/usr/bin/python3";
  if (!ct::FileExists(python)) GTEST_SKIP() << "needs /usr/bin/python3";
  ct::TempDir dir;
  auto site = InstallPythonSite(dir.path());
  ASSERT_TRUE(site.ok()) << site.status().ToString();
  EXPECT_EQ(*site, dir.path() + "/.python-site");
  EXPECT_EQ(ct::ReadFile(*site + "/sitecustomize.py"), kSitecustomizePy);
  struct stat st {};
  ASSERT_EQ(::stat((*site + "/sitecustomize.py").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_TRUE(InstallPythonSite(dir.path()).ok());  // again: as it was
  const std::string hidden = dir.Join("hidden");
  const std::string marker = dir.Join("hidden-ran");
  ASSERT_EQ(::mkdir(hidden.c_str(), 0755), 0);
  ct::WriteFile(hidden + "/sitecustomize.py", "open('" + marker + "', 'w').close()\n");
  const std::string stacks = dir.Join("stacks");
  const std::string ready = dir.Join("ready");
  pid_t pid = Spawn({python, "-c",
                     "import time\nopen('" + ready +
                         "', 'w').close()\ndef stuck_here():\n    time.sleep(60)\nstuck_here()\n"},
                    {"PYTHONPATH=" + *site + ":" + hidden, "COHORT_STACK_DUMP_DIR=" + stacks,
                     "COHORT_STACK_DUMP_SIGNAL=" + std::to_string(StackDumpSignal())});
  for (int i = 0; i < 200 && !ct::FileExists(ready); ++i) std::this_thread::sleep_for(50ms);
  ASSERT_TRUE(ct::FileExists(ready));
  EXPECT_TRUE(ct::FileExists(marker)) << "the hidden sitecustomize did not run";
  EXPECT_TRUE(ct::FileExists(stacks + "/python-" + std::to_string(pid) + ".txt"));
  std::string text = TakeStackDump(pid, stacks, "");
  EXPECT_EQ(::kill(pid, 0), 0);
  Reap(pid);
  EXPECT_NE(text.find("-- Python stacks (faulthandler):"), std::string::npos) << text;
  EXPECT_NE(text.find("stuck_here"), std::string::npos) << text;
}

}  // namespace
}  // namespace cohort::agent
