// The agent's side of the hang watchdog: the progress a ProgressProbe reads from a replica's log
// and metric file, and the stack dumps of real processes (a native one, and a Python one that
// registered cohort's faulthandler hook).
#include "agent/progress.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <string>
#include <thread>

#include "agent/metric_file_reader.h"
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
  ProgressProbe probe(log, reader, dir.Join("flight-recorder"), 1000);
  // The metric file is stat'ed on the reader's thread: a reading takes the newest finished stat
  // and asks for the next. Here each reading's stat finishes before the next reading.
  wire::ReplicaProgressT p;
  auto sample = [&](int64_t now_ms) {
    probe.Sample(now_ms, &p);
    ASSERT_TRUE(ct::WaitUntil([&] { return reader->Latest().done >= reader->asked(); }, 30s));
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
  ct::HeldMetricReads held(metrics);
  auto reader = std::make_shared<MetricFileReader>(metrics, /*tail=*/false);
  ProgressProbe probe("", reader, "", 1000);
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

TEST(ProgressProbeTest, ReadsTheFlightRecorder) {
  ct::TempDir dir;
  std::string path = dir.Join("flight-recorder");
  ProgressProbe probe("", nullptr, path, 1000);
  wire::ReplicaProgressT p;
  probe.Sample(1100, &p);
  EXPECT_FALSE(p.has_recorder);  // the replica has not created it yet

  auto recorder = FlightRecorder::CreateFile(path, 64, 2, 4);
  ASSERT_TRUE(recorder.ok()) << recorder.status().ToString();
  uint32_t comm = (*recorder)->RegisterCommunicator();
  for (uint32_t seq = 0; seq < 3; ++seq) {
    FlightRecord r;
    r.op_seq = seq;
    r.comm_id = comm;
    r.op = FlightOp::kAllreduce;
    r.bytes = 64 << 20;
    r.algorithm = 2;  // ring
    uint64_t index = (*recorder)->Begin(r);
    (*recorder)->End(index, r, Status::Ok());
  }
  FlightRecord stuck;
  stuck.op_seq = 3;
  stuck.comm_id = comm;
  stuck.op = FlightOp::kAllreduce;
  stuck.bytes = 1 << 20;
  stuck.algorithm = 2;
  (*recorder)->Begin(stuck);

  wire::ReplicaProgressT q;
  probe.Sample(1200, &q);
  EXPECT_TRUE(q.has_recorder);
  EXPECT_EQ(q.completed_seq, 2);
  EXPECT_EQ(q.current_seq, 3);
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
  probe.Sample(1300, &r);
  EXPECT_TRUE(r.starts.empty());
  EXPECT_EQ(r.current_seq, 3);
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
