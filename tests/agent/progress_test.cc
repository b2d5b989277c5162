// The agent's side of the hang watchdog: the progress a ProgressProbe reads from a replica's log,
// metric file and flight recorder (the latter two on their readers' threads, whose readings a
// test seam holds to stand in for a hung storage), and the stack dumps of real processes (a native
// one, and a Python one that registered cohort's faulthandler hook).
#include "agent/progress.h"

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
#include "agent/stack_dump.h"
#include "common/flight_recorder.h"
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
  auto recorder = std::make_shared<FlightRecorderPoller>(dir.Join("flight-recorder"));
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
  explicit TestRecorder(const std::string& path) {
    auto created = FlightRecorder::CreateFile(path, 64, 2, 4);
    EXPECT_TRUE(created.ok()) << created.status().ToString();
    if (created.ok()) recorder = std::move(*created);
  }
  // Completes the operation entered (if any), then enters the next.
  void Step(uint64_t bytes = 64 << 20) {
    if (!recorder) return;
    if (comm < 0) comm = static_cast<int32_t>(recorder->RegisterCommunicator());
    if (entered) recorder->End(*entered, current, Status::Ok());
    current = FlightRecord();
    current.op_seq = next_seq++;
    current.comm_id = static_cast<uint32_t>(comm);
    current.op = FlightOp::kAllreduce;
    current.bytes = bytes;
    current.algorithm = 2;  // ring
    entered = recorder->Begin(current);
  }

  std::unique_ptr<FlightRecorder> recorder;
  int32_t comm = -1;
  uint32_t next_seq = 0;
  FlightRecord current;
  std::optional<uint64_t> entered;
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
  auto poller = std::make_shared<FlightRecorderPoller>(path);
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
  auto poller = std::make_shared<FlightRecorderPoller>(path);
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

}  // namespace
}  // namespace cohort::agent
