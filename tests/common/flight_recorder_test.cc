#include "common/flight_recorder.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/flight_recorder_stress.h"

namespace cohort {
namespace {

class FlightRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/cohort-flight-XXXXXX";
    ASSERT_NE(mkdtemp(dir), nullptr);
    dir_ = dir;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }

  std::string dir_;
};

FlightRecord Allreduce(uint32_t seq, uint64_t bytes) {
  FlightRecord r;
  r.op = FlightOp::kAllreduce;
  r.op_seq = seq;
  r.bytes = bytes;
  r.algorithm = 2;  // ring
  r.dtype = 1;      // f32
  r.group_size = 4;
  return r;
}

// A file reader's snapshot; the test fails when it cannot be taken.
FlightRecorderSnapshot SnapshotOf(const FlightRecorderFileReader& reader) {
  auto s = reader.Snapshot();
  EXPECT_TRUE(s.ok()) << reader.path() << ": " << s.status().ToString();
  return s.ok() ? *s : FlightRecorderSnapshot{};
}

TEST_F(FlightRecorderTest, RecordsBeginAndEndAndTheReaderSeesProgress) {
  auto recorder = FlightRecorder::CreateInMemory(8, 3, 4);
  ASSERT_TRUE(recorder.ok()) << recorder.status().ToString();
  FlightRecorder& rec = **recorder;
  const uint32_t comm = rec.RegisterCommunicator();
  EXPECT_EQ(comm, 0u);
  EXPECT_EQ(rec.RegisterCommunicator(), 1u);

  FlightRecord first = Allreduce(0, 4096);
  first.comm_id = comm;
  const uint64_t i0 = rec.Begin(first);
  rec.End(i0, first, Status::Ok());
  FlightRecord second = Allreduce(1, 65536);
  second.comm_id = comm;
  second.enqueue_ns = FlightClockNs() - 5'000'000;  // queued 5 ms before it ran
  const uint64_t i1 = rec.Begin(second);
  EXPECT_EQ(i1, i0 + 1);

  auto reader = FlightRecorderReader::Attach(rec);
  FlightRecorderSnapshot s = reader->Snapshot();
  EXPECT_EQ(s.rank, 3);
  EXPECT_EQ(s.world_size, 4);
  EXPECT_EQ(s.pid, getpid());
  EXPECT_EQ(s.entries, 2u);
  ASSERT_EQ(s.recent.size(), 2u);
  EXPECT_EQ(s.recent[0].record.outcome, FlightOutcome::kOk);
  EXPECT_EQ(s.recent[0].record.bytes, 4096u);
  EXPECT_GE(s.recent[0].record.end_ns, s.recent[0].record.start_ns);
  EXPECT_EQ(s.recent[0].record.enqueue_ns, s.recent[0].record.start_ns);
  EXPECT_EQ(s.recent[1].record.outcome, FlightOutcome::kRunning);
  EXPECT_EQ(s.recent[1].record.end_ns, 0);
  EXPECT_LT(s.recent[1].record.enqueue_ns, s.recent[1].record.start_ns);
  ASSERT_EQ(s.communicators.size(), 1u);
  EXPECT_EQ(s.communicators[0].comm_id, comm);
  ASSERT_TRUE(s.communicators[0].last_completed_seq.has_value());
  EXPECT_EQ(*s.communicators[0].last_completed_seq, 0u);
  ASSERT_TRUE(s.communicators[0].current.has_value());
  EXPECT_EQ(s.communicators[0].current->record.op_seq, 1u);
  EXPECT_GE(s.communicators[0].current_elapsed_ns, 0);
  EXPECT_EQ(DescribeFlightEntry(*s.communicators[0].current, s.taken_ns)
                .rfind("allreduce #1 (64.0 KiB f32, ring) running for ", 0),
            0u)
      << DescribeFlightEntry(*s.communicators[0].current, s.taken_ns);

  rec.End(i1, second, Unavailable("worker 2 is gone"));
  s = reader->Snapshot();
  ASSERT_EQ(s.recent.size(), 2u);
  EXPECT_EQ(s.recent[1].record.outcome, FlightOutcome::kFailed);
  EXPECT_EQ(s.recent[1].record.status_code, static_cast<uint8_t>(StatusCode::kUnavailable));
  EXPECT_FALSE(s.communicators[0].current.has_value());
  EXPECT_EQ(*s.communicators[0].last_completed_seq, 1u);
}

// Callers hand Begin a steady_clock reading as the start time (the Communicator shares its
// deadline's): it must be the recorder's clock, between two readings of it.
TEST_F(FlightRecorderTest, ASteadyClockReadingIsOnTheRecordersClock) {
  for (int i = 0; i < 100; ++i) {
    const int64_t before = FlightClockNs();
    const int64_t steady = FlightClockNs(std::chrono::steady_clock::now());
    const int64_t after = FlightClockNs();
    EXPECT_LE(before, steady);
    EXPECT_LE(steady, after);
  }
}

TEST_F(FlightRecorderTest, AStartTimeGivenToBeginIsKept) {
  auto recorder = FlightRecorder::CreateInMemory(8, 0, 1);
  ASSERT_TRUE(recorder.ok()) << recorder.status().ToString();
  FlightRecord record;
  record.op = FlightOp::kAllreduce;
  record.start_ns = 12345;
  FlightRecording recording(recorder->get(), record);
  recording.Finish(Status::Ok());
  auto entry = FlightRecorderReader::Attach(**recorder)->Read(0);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->record.start_ns, 12345);
  EXPECT_EQ(entry->record.enqueue_ns, 12345);
  EXPECT_GT(entry->record.end_ns, 12345);
}

TEST_F(FlightRecorderTest, TheRingKeepsTheLastCapacityEntriesInOrder) {
  auto recorder = FlightRecorder::CreateInMemory(8, 0, 1);
  ASSERT_TRUE(recorder.ok());
  for (uint32_t seq = 0; seq < 20; ++seq) {
    FlightRecord r = Allreduce(seq, seq);
    (*recorder)->End((*recorder)->Begin(r), r, Status::Ok());
  }
  auto reader = FlightRecorderReader::Attach(**recorder);
  FlightRecorderSnapshot s = reader->Snapshot();
  EXPECT_EQ(s.entries, 20u);
  ASSERT_EQ(s.recent.size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(s.recent[i].index, 12 + i);
    EXPECT_EQ(s.recent[i].record.op_seq, 12 + i);
  }
  EXPECT_EQ(*s.communicators[0].last_completed_seq, 19u);
  EXPECT_EQ(reader->Snapshot(3).recent.size(), 3u);
  EXPECT_FALSE(reader->Read(3).has_value()) << "entry 3 was overwritten by entry 11";
  ASSERT_TRUE(reader->Read(19).has_value());
}

TEST_F(FlightRecorderTest, AnEndAfterItsSlotWasReusedIsDropped) {
  auto recorder = FlightRecorder::CreateInMemory(2, 0, 1);
  ASSERT_TRUE(recorder.ok());
  FlightRecorder& rec = **recorder;
  FlightRecord slow = Allreduce(0, 1);
  const uint64_t slow_index = rec.Begin(slow);
  for (uint32_t seq = 1; seq < 4; ++seq) {
    FlightRecord r = Allreduce(seq, 1);
    rec.End(rec.Begin(r), r, Status::Ok());
  }
  rec.End(slow_index, slow, Status::Ok());  // its slot holds entry 2 now
  auto reader = FlightRecorderReader::Attach(rec);
  FlightRecorderSnapshot s = reader->Snapshot();
  ASSERT_EQ(s.recent.size(), 2u);
  EXPECT_EQ(s.recent[0].record.op_seq, 2u);
  EXPECT_EQ(s.recent[1].record.op_seq, 3u);
}

TEST_F(FlightRecorderTest, ARecordingEndsOnceAndAnAbandonedOneAsCancelled) {
  auto recorder = FlightRecorder::CreateInMemory(8, 0, 1);
  ASSERT_TRUE(recorder.ok());
  {
    FlightRecording finished(recorder->get(), Allreduce(0, 1));
    FlightRecording moved = std::move(finished);
    moved.Finish(Status::Ok());
    moved.Finish(Internal("a second Finish is ignored"));
    FlightRecording abandoned(recorder->get(), Allreduce(1, 1));
    FlightRecording off(nullptr, Allreduce(2, 1));  // records nothing
    off.Finish(Status::Ok());
  }
  FlightRecorderSnapshot s = FlightRecorderReader::Attach(**recorder)->Snapshot();
  ASSERT_EQ(s.recent.size(), 2u);
  EXPECT_EQ(s.recent[0].record.outcome, FlightOutcome::kOk);
  EXPECT_EQ(s.recent[1].record.outcome, FlightOutcome::kFailed);
  EXPECT_EQ(s.recent[1].record.status_code, static_cast<uint8_t>(StatusCode::kCancelled));
}

TEST_F(FlightRecorderTest, ConcurrentReadersNeverSeeATornEntry) {
  // Writers on an 8-slot ring lap the three readers constantly: one writer (a Communicator), then
  // two (requests completing on other threads).
  for (int writers : {1, 2}) {
    auto recorder = FlightRecorder::CreateInMemory(8, 0, 1);
    ASSERT_TRUE(recorder.ok());
    testing::StressResult r = testing::RunFlightRecorderStress(**recorder, writers, 3, 100000);
    EXPECT_EQ(r.error, "") << writers << " writer(s)";
    EXPECT_GT(r.snapshots, 0u);
    EXPECT_GT(r.entries_read, 0u);
    EXPECT_EQ((*recorder)->header().next_entry, 100000u * writers);
  }
}

TEST_F(FlightRecorderTest, AnotherProcessReadsTheFileWhileTheWriterIsInAnOperation) {
  const std::string path = Path("recorder");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(ready[0]);
    auto recorder = FlightRecorder::CreateFile(path, 16, 2, 4);
    if (!recorder.ok()) _exit(1);
    FlightRecord done = Allreduce(41, 1024);
    (*recorder)->End((*recorder)->Begin(done), done, Status::Ok());
    FlightRecord stuck = Allreduce(42, 67108864);
    (void)(*recorder)->Begin(stuck);
    const char byte = 1;
    if (write(ready[1], &byte, 1) != 1) _exit(1);
    pause();  // "stuck" in all-reduce #42 until the parent ends it
    _exit(0);
  }
  close(ready[1]);
  char byte = 0;
  ASSERT_EQ(read(ready[0], &byte, 1), 1);
  close(ready[0]);

  auto reader = FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  FlightRecorderSnapshot s = SnapshotOf(**reader);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);

  EXPECT_EQ(s.pid, child);
  EXPECT_EQ(s.rank, 2);
  EXPECT_EQ(s.world_size, 4);
  ASSERT_EQ(s.communicators.size(), 1u);
  EXPECT_EQ(*s.communicators[0].last_completed_seq, 41u);
  ASSERT_TRUE(s.communicators[0].current.has_value());
  EXPECT_EQ(s.communicators[0].current->record.op_seq, 42u);
  EXPECT_EQ(s.communicators[0].current->record.bytes, 67108864u);
  EXPECT_GT(s.communicators[0].current_elapsed_ns, 0);
  // The wall-clock anchor turns monotonic times into dates: the child started this minute.
  const int64_t started_wall =
      s.anchor_wall_ns + (s.communicators[0].current->record.start_ns - s.anchor_monotonic_ns);
  const int64_t now_wall = std::chrono::duration_cast<std::chrono::nanoseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
  EXPECT_LE(started_wall, now_wall);
  EXPECT_GT(started_wall, now_wall - int64_t{60'000'000'000});
}

TEST_F(FlightRecorderTest, TwoCopiesInOneProcessShareTheFileAndANewProcessStartsItAfresh) {
  const std::string path = Path("shared");
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a previous attempt's process left entries behind
    auto old = FlightRecorder::CreateFile(path, 16, 0, 1);
    if (!old.ok()) _exit(1);
    FlightRecord r = Allreduce(99, 1);
    (*old)->End((*old)->Begin(r), r, Status::Ok());
    _exit(0);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_EQ(status, 0);

  auto first = FlightRecorder::CreateFile(path, 16, 1, 2);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  FlightRecord a = Allreduce(0, 1);
  (*first)->End((*first)->Begin(a), a, Status::Ok());
  // A second copy of the library (the torch extension beside the C API) opens the same path.
  auto second = FlightRecorder::CreateFile(path, 16, 1, 2);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->RegisterCommunicator(), 0u);
  EXPECT_EQ((*first)->RegisterCommunicator(), 1u) << "one counter for both";
  FlightRecord b = Allreduce(1, 1);
  (*second)->End((*second)->Begin(b), b, Status::Ok());

  auto reader = FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok());
  FlightRecorderSnapshot s = SnapshotOf(**reader);
  EXPECT_EQ(s.pid, getpid());
  ASSERT_EQ(s.recent.size(), 2u) << "the old process's entry is gone, both copies' are there";
  EXPECT_EQ(s.recent[0].index, 0u);
  EXPECT_EQ(s.recent[0].record.op_seq, 0u);
  EXPECT_EQ(s.recent[1].index, 1u);
  EXPECT_EQ(s.recent[1].record.op_seq, 1u);
}

// Pids repeat: a replica's process restarted in a PID namespace of its own often gets the pid its
// killed predecessor had, which left its file with no exit mark. Only a file of this very process
// (same pid, same start time) is joined; that one is started afresh, so the agent sees a new
// writer rather than a stale ring.
TEST_F(FlightRecorderTest, AFileOfAnEarlierProcessWithThisPidIsStartedAfresh) {
  const std::string path = Path("same-pid");
  {
    auto killed = FlightRecorder::CreateFile(path, 16, 0, 1);
    ASSERT_TRUE(killed.ok()) << killed.status().ToString();
    EXPECT_NE((*killed)->header().start_ticks, 0u) << "this process's start time is known";
    FlightRecord r = Allreduce(7, 1);
    (*killed)->End((*killed)->Begin(r), r, Status::Ok());
  }
  // The predecessor: this pid, no exit mark, another start time.
  const int fd = open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  FlightRecorderHeader h{};
  ASSERT_EQ(pread(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  const int64_t old_anchor = h.anchor_monotonic_ns;
  h.start_ticks -= 1;
  ASSERT_EQ(pwrite(fd, &h, sizeof(h), 0), static_cast<ssize_t>(sizeof(h)));
  close(fd);

  auto next = FlightRecorder::CreateFile(path, 16, 0, 1);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_GT((*next)->header().anchor_monotonic_ns, old_anchor) << "set up anew";
  auto reader = FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_TRUE(SnapshotOf(**reader).recent.empty()) << "the predecessor's entry is gone";
}

// A file another live process set up (a sibling given the same path: torchrun's workers inside
// one replica) is never emptied under it: CreateFile refuses it, naming the process, and the
// owner's entries stay.
TEST_F(FlightRecorderTest, AFileOfAnotherLiveProcessIsLeftAlone) {
  const std::string path = Path("sibling");
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // the sibling: records one entry and stays alive until told
    auto own = FlightRecorder::CreateFile(path, 16, 1, 4);
    if (!own.ok()) _exit(1);
    FlightRecord r = Allreduce(42, 1);
    (*own)->End((*own)->Begin(r), r, Status::Ok());
    char c = 1;
    if (write(ready[1], &c, 1) != 1) _exit(2);
    if (read(done[0], &c, 1) != 1) _exit(3);
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  auto mine = FlightRecorder::CreateFile(path, 16, 0, 4);
  EXPECT_EQ(mine.status().code(), StatusCode::kAlreadyExists) << mine.status().ToString();
  EXPECT_NE(mine.status().message().find(std::to_string(child)), std::string::npos)
      << mine.status().ToString();
  auto reader = FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  FlightRecorderSnapshot s = SnapshotOf(**reader);
  EXPECT_EQ(s.pid, child);
  ASSERT_EQ(s.recent.size(), 1u);
  EXPECT_EQ(s.recent[0].record.op_seq, 42u);
  ASSERT_EQ(write(done[1], &c, 1), 1);
  int status = 0;
  waitpid(child, &status, 0);
  EXPECT_EQ(status, 0);
  // Once it has exited, its file is started afresh.
  auto after = FlightRecorder::CreateFile(path, 16, 0, 4);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  EXPECT_EQ((*after)->header().pid, getpid());
}

// ForProcess reads the environment once per process: each case runs in a child of its own.
int InChild(const std::function<int()>& body) {
  const pid_t child = fork();
  if (child == 0) _exit(body());
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

TEST_F(FlightRecorderTest, ForProcessRecordsIntoTheFileTheEnvironmentNames) {
  const std::string path = Path("from-env");
  ASSERT_EQ(InChild([&] {
              setenv(kFlightRecorderEnv, path.c_str(), 1);
              setenv("RANK", "5", 1);
              setenv("WORLD_SIZE", "8", 1);
              FlightRecorder* rec = FlightRecorder::ForProcess();
              if (rec == nullptr || rec != FlightRecorder::ForProcess()) return 1;
              if (rec->path() != path) return 2;
              FlightRecord r = Allreduce(7, 8);
              rec->End(rec->Begin(r), r, Status::Ok());
              return 0;
            }),
            0);
  auto reader = FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  FlightRecorderSnapshot s = SnapshotOf(**reader);
  EXPECT_EQ(s.rank, 5);
  EXPECT_EQ(s.world_size, 8);
  EXPECT_EQ((*reader)->capacity(), kFlightRecorderDefaultCapacity);
  ASSERT_EQ(s.recent.size(), 1u);
  EXPECT_EQ(s.recent[0].record.op_seq, 7u);
}

// Processes that inherit one path (torchrun's workers in a replica) each get a file of their own:
// the first the path, the others "<path>.1", "<path>.2" while the first is alive.
TEST_F(FlightRecorderTest, ForProcessOfSiblingsSharingAPathTakesTheNextFreeFile) {
  const std::string path = Path("torchrun");
  int ready[2], done[2];
  ASSERT_EQ(pipe(ready), 0);
  ASSERT_EQ(pipe(done), 0);
  std::vector<pid_t> children;
  for (int rank = 0; rank < 3; ++rank) {
    const pid_t child = fork();
    ASSERT_GE(child, 0);
    if (child == 0) {
      setenv(kFlightRecorderEnv, path.c_str(), 1);
      setenv("RANK", std::to_string(rank).c_str(), 1);
      FlightRecorder* rec = FlightRecorder::ForProcess();
      if (rec == nullptr || rec->path().rfind(path, 0) != 0) _exit(1);
      FlightRecord r = Allreduce(100 + rank, 1);
      rec->End(rec->Begin(r), r, Status::Ok());
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(2);
      if (read(done[0], &c, 1) != 1) _exit(3);  // alive until every sibling has its file
      _exit(0);
    }
    children.push_back(child);
    char c = 0;
    ASSERT_EQ(read(ready[0], &c, 1), 1);  // one at a time: rank r takes the r-th file
  }
  for (int k = 0; k < 3; ++k) {
    const std::string file = k == 0 ? path : path + "." + std::to_string(k);
    auto reader = FlightRecorderFileReader::Open(file);
    ASSERT_TRUE(reader.ok()) << file << ": " << reader.status().ToString();
    FlightRecorderSnapshot s = SnapshotOf(**reader);
    EXPECT_EQ(s.pid, children[k]) << file;
    EXPECT_EQ(s.rank, k) << file;
    ASSERT_EQ(s.recent.size(), 1u) << file;
    EXPECT_EQ(s.recent[0].record.op_seq, 100u + k) << file;
  }
  char c = 1;
  for (size_t i = 0; i < children.size(); ++i) ASSERT_EQ(write(done[1], &c, 1), 1);
  for (pid_t child : children) {
    int status = 0;
    waitpid(child, &status, 0);
    EXPECT_EQ(status, 0);
  }
}

// A process's recorder says when the process exited normally (a rank that is done, not stuck);
// one ended by _exit (or killed) does not, nor does a forked child's exit mark its parent's file.
TEST_F(FlightRecorderTest, ForProcessSaysWhenItsProcessExited) {
  const auto run = [&](const std::string& path, bool normally) {
    const pid_t child = fork();
    if (child == 0) {
      setenv(kFlightRecorderEnv, path.c_str(), 1);
      FlightRecorder* rec = FlightRecorder::ForProcess();
      if (rec == nullptr || rec->path() != path) _exit(1);
      FlightRecord r = Allreduce(3, 8);
      rec->End(rec->Begin(r), r, Status::Ok());
      // A forked child exiting normally is not the recorder's process.
      const pid_t grandchild = fork();
      if (grandchild == 0) std::exit(0);
      int status = 0;
      if (waitpid(grandchild, &status, 0) != grandchild || status != 0) _exit(2);
      auto reader = FlightRecorderFileReader::Open(path);
      if (!reader.ok() || !(*reader)->Snapshot().ok() || (*reader)->Snapshot()->exited) _exit(3);
      if (normally) std::exit(0);
      _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
  };
  ASSERT_EQ(run(Path("exits"), true), 0);
  ASSERT_EQ(run(Path("ends"), false), 0);
  for (const auto& [name, exited] : {std::pair{"exits", true}, std::pair{"ends", false}}) {
    auto reader = FlightRecorderFileReader::Open(Path(name));
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    const FlightRecorderSnapshot s = SnapshotOf(**reader);
    EXPECT_EQ(s.exited, exited) << name;
    EXPECT_EQ(s.recent.size(), 1u) << name;
  }
  // A file whose process exited is taken afresh by the next one.
  auto next = FlightRecorder::CreateFile(Path("exits"), kFlightRecorderDefaultCapacity, 0, 1);
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ((*next)->header().exited, 0u);
  EXPECT_EQ((*next)->header().pid, getpid());
}

TEST_F(FlightRecorderTest, ForProcessIsOffOrInMemoryByTheEnvironment) {
  EXPECT_EQ(InChild([] {
              setenv(kFlightRecorderEnv, "off", 1);
              return FlightRecorder::ForProcess() == nullptr ? 0 : 1;
            }),
            0);
  EXPECT_EQ(InChild([] {
              unsetenv(kFlightRecorderEnv);
              FlightRecorder* rec = FlightRecorder::ForProcess();
              return rec != nullptr && rec->path().empty() ? 0 : 1;
            }),
            0);
  // A path that cannot be created falls back to memory rather than failing the job.
  const std::string bad = Path("no-such-dir/recorder");
  EXPECT_EQ(InChild([&] {
              setenv(kFlightRecorderEnv, bad.c_str(), 1);
              FlightRecorder* rec = FlightRecorder::ForProcess();
              return rec != nullptr && rec->path().empty() ? 0 : 1;
            }),
            0);
}

TEST_F(FlightRecorderTest, TheReaderRefusesWhatIsNotARecorderFile) {
  auto missing = FlightRecorderFileReader::Open(Path("missing"));
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound) << missing.status().ToString();

  const std::string empty = Path("empty");
  std::ofstream(empty).close();
  auto not_ready = FlightRecorderFileReader::Open(empty);
  EXPECT_EQ(not_ready.status().code(), StatusCode::kUnavailable) << not_ready.status().ToString();

  const std::string junk = Path("junk");
  std::ofstream(junk) << std::string(4096, 'x');
  auto bad = FlightRecorderFileReader::Open(junk);
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("not a recorder file"), std::string::npos);

  // A real file cut short, and one of another layout version.
  const std::string good = Path("good");
  ASSERT_TRUE(FlightRecorder::CreateFile(good, 16, 0, 1).ok());
  std::filesystem::resize_file(good, FlightRecorderFileBytes(8));
  auto short_file = FlightRecorderFileReader::Open(good);
  EXPECT_EQ(short_file.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(short_file.status().message().find("fewer than its 16 slots"), std::string::npos)
      << short_file.status().ToString();
  {
    std::fstream f(good, std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t version = 99;
    f.seekp(offsetof(FlightRecorderHeader, version));
    f.write(reinterpret_cast<const char*>(&version), sizeof(version));
  }
  auto other_version = FlightRecorderFileReader::Open(good);
  EXPECT_EQ(other_version.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(other_version.status().message().find("layout version 99"), std::string::npos);

  EXPECT_EQ(FlightRecorder::CreateInMemory(12, 0, 1).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(FlightRecorder::CreateInMemory(kFlightRecorderMaxCapacity * 2, 0, 1).status().code(),
            StatusCode::kInvalidArgument);
  // A header claiming more slots than a recorder may have (a reader copies them all, at every
  // snapshot), with a sparse file that size behind it, is refused before any slot is read.
  const std::string huge = Path("huge");
  ASSERT_TRUE(FlightRecorder::CreateFile(huge, 16, 0, 1).ok());
  {
    std::fstream f(huge, std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t capacity = 1u << 30;
    f.seekp(offsetof(FlightRecorderHeader, capacity));
    f.write(reinterpret_cast<const char*>(&capacity), sizeof(capacity));
  }
  std::filesystem::resize_file(huge, FlightRecorderFileBytes(1u << 30));
  auto too_big = FlightRecorderFileReader::Open(huge);
  EXPECT_EQ(too_big.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(too_big.status().message().find("1073741824 slots"), std::string::npos)
      << too_big.status().ToString();

  // The file is the replica's and the agent reads it: a link (even to a good recorder) and a FIFO
  // (whose open would wait for a writer) are refused at once.
  const std::string link = Path("link"), fifo = Path("fifo");
  ASSERT_TRUE(FlightRecorder::CreateFile(Path("real"), 16, 0, 1).ok());
  std::filesystem::create_symlink(Path("real"), link);
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  for (const std::string& path : {link, fifo}) {
    auto refused = FlightRecorderFileReader::Open(path);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  }
}

// The agent reads files its replicas write, and a replica may empty or rewrite its file while
// the agent has it open (its own code truncating it; a process that exited leaving the path to a
// new one, which empties it). A mapping of a file that shrank faults its reader (SIGBUS), which
// would take the agent down: the file reader never maps. Its snapshots of a shrunk file fail,
// naming the file; once the file is a recorder again, it is read as it is then.
TEST_F(FlightRecorderTest, AFileEmptiedOrRewrittenUnderItsReaderIsAnErrorNeverAFault) {
  const std::string path = Path("replica");
  auto writer = FlightRecorder::CreateFile(path, 16, 0, 2);
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  FlightRecord r = Allreduce(5, 64);
  (*writer)->End((*writer)->Begin(r), r, Status::Ok());
  auto reader = FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ(SnapshotOf(**reader).recent.size(), 1u);

  ASSERT_EQ(::truncate(path.c_str(), 0), 0);  // emptied: a header read finds nothing
  auto emptied = (*reader)->Snapshot();
  EXPECT_EQ(emptied.status().code(), StatusCode::kDataLoss) << emptied.status().ToString();
  EXPECT_NE(emptied.status().message().find(path), std::string::npos);
  EXPECT_NE(emptied.status().message().find("truncated"), std::string::npos);

  // Cut in the middle of its slots: the header reads, the slots do not.
  writer->reset();
  ASSERT_TRUE(FlightRecorder::CreateFile(path, 16, 0, 2).ok());
  ASSERT_EQ(::truncate(path.c_str(), FlightRecorderFileBytes(8)), 0);
  auto cut = (*reader)->Snapshot();
  EXPECT_EQ(cut.status().code(), StatusCode::kDataLoss) << cut.status().ToString();

  // Set up anew with another capacity: the reader says so rather than misreading its slots.
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    const uint32_t capacity = 32;
    f.seekp(offsetof(FlightRecorderHeader, capacity));
    f.write(reinterpret_cast<const char*>(&capacity), sizeof(capacity));
  }
  std::filesystem::resize_file(path, FlightRecorderFileBytes(32));
  auto rewritten = (*reader)->Snapshot();
  EXPECT_EQ(rewritten.status().code(), StatusCode::kDataLoss) << rewritten.status().ToString();
  EXPECT_NE(rewritten.status().message().find("rewritten"), std::string::npos)
      << rewritten.status().ToString();

  // Its writer setting it up again (header not yet published): try again, not an error of data.
  const std::string again = Path("again");
  auto writer2 = FlightRecorder::CreateFile(again, 16, 0, 2);
  ASSERT_TRUE(writer2.ok());
  auto reader2 = FlightRecorderFileReader::Open(again);
  ASSERT_TRUE(reader2.ok());
  {
    std::fstream f(again, std::ios::in | std::ios::out | std::ios::binary);
    const uint64_t zero = 0;
    f.write(reinterpret_cast<const char*>(&zero), sizeof(zero));  // the magic, written last
  }
  EXPECT_EQ((*reader2)->Snapshot().status().code(), StatusCode::kUnavailable);
  // A new process of the same capacity takes the file over: the reader sees its entries.
  writer2->reset();
  auto taken = FlightRecorder::CreateFile(again, 16, 1, 2);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  FlightRecord r2 = Allreduce(9, 64);
  (*taken)->End((*taken)->Begin(r2), r2, Status::Ok());
  const FlightRecorderSnapshot s = SnapshotOf(**reader2);
  EXPECT_EQ(s.rank, 1);
  ASSERT_EQ(s.recent.size(), 1u);
  EXPECT_EQ(s.recent[0].record.op_seq, 9u);
}

// The file reader's seqlock across system calls: while a writer in another thread runs through
// the ring many times over, every entry a snapshot keeps is whole (its fields agree with its index,
// as the writer set them).
TEST_F(FlightRecorderTest, AFileReaderKeepsOnlyWholeEntriesWhileTheWriterLapsIt) {
  const std::string path = Path("busy");
  auto writer = FlightRecorder::CreateFile(path, 8, 0, 1);
  ASSERT_TRUE(writer.ok());
  auto reader = FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok());
  std::atomic<bool> stop{false};
  std::thread writing([&] {
    for (uint32_t i = 0; !stop.load(std::memory_order_relaxed); ++i) {
      FlightRecord r = Allreduce(i, uint64_t{i} * 3 + 1);
      (*writer)->End((*writer)->Begin(r), r, Status::Ok());
    }
  });
  size_t kept = 0;
  for (int n = 0; n < 20000; ++n) {
    const FlightRecorderSnapshot s = SnapshotOf(**reader);
    for (const FlightEntry& e : s.recent) {
      ++kept;
      ASSERT_EQ(e.record.op_seq, static_cast<uint32_t>(e.index)) << "a torn entry";
      ASSERT_EQ(e.record.bytes, e.index * 3 + 1) << "a torn entry";
    }
  }
  stop = true;
  writing.join();
  EXPECT_GT(kept, 0u) << "no snapshot kept an entry: the check above checked nothing";
}

}  // namespace
}  // namespace cohort
