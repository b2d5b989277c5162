#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "collective/cohort_collective.h"
#include "common/flight_recorder.h"

namespace {

// A communicator of a job of one from the environment an agent injects (no bootstrap: it is built
// at once); null after a failure.
cohort_comm_t* SingleWorkerComm() {
  setenv("RANK", "0", 1);
  setenv("WORLD_SIZE", "1", 1);
  unsetenv("COHORT_BOOTSTRAP_ADDR");
  unsetenv("COHORT_NUM_REDUCERS");
  cohort_comm_t* comm = nullptr;
  EXPECT_EQ(cohort_comm_from_env(&comm), COHORT_OK) << cohort_last_error();
  return comm;
}

// Destroys it and clears the environment it was built from.
void DestroySingleWorkerComm(cohort_comm_t* comm) {
  cohort_comm_destroy(comm);
  unsetenv("RANK");
  unsetenv("WORLD_SIZE");
}

TEST(CApiTest, SingleWorkerFromEnvironment) {
  cohort_comm_t* comm = SingleWorkerComm();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(cohort_comm_rank(comm), 0);
  EXPECT_EQ(cohort_comm_size(comm), 1);
  float v[3] = {1, 2, 3};
  EXPECT_EQ(cohort_allreduce(comm, v, 3, COHORT_F32, COHORT_AVG, COHORT_ALGO_AUTO), COHORT_OK);
  EXPECT_EQ(v[2], 3.0f);
  EXPECT_EQ(cohort_allreduce(comm, v, 3, 17, COHORT_SUM, COHORT_ALGO_AUTO),
            COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cohort_last_error()).find("dtype"), std::string::npos);
  EXPECT_EQ(cohort_allreduce(comm, v, 3, COHORT_F32, COHORT_SUM, COHORT_ALGO_REDUCTION_SERVER),
            COHORT_ERR_INVALID_ARGUMENT);
  // A job of one runs in process (no UCX, no segments): shared memory is refused by name.
  EXPECT_EQ(cohort_allreduce(comm, v, 3, COHORT_F32, COHORT_SUM, COHORT_ALGO_SHARED_MEMORY),
            COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cohort_last_error()).find("shared memory"), std::string::npos)
      << cohort_last_error();
  EXPECT_EQ(cohort_allreduce(comm, v, 3, COHORT_F32, COHORT_SUM, COHORT_ALGO_RECURSIVE_DOUBLING),
            COHORT_OK);
  EXPECT_EQ(v[2], 3.0f);
  EXPECT_EQ(
      cohort_allreduce(comm, v, 3, COHORT_F32, COHORT_SUM, COHORT_ALGO_RECURSIVE_DOUBLING + 1),
      COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cohort_last_error()).find("unknown algorithm"), std::string::npos)
      << cohort_last_error();
  DestroySingleWorkerComm(comm);
}

TEST(CApiTest, CollectivesOnASingleWorker) {
  cohort_comm_t* comm = SingleWorkerComm();
  ASSERT_NE(comm, nullptr);
  double v[3] = {1, 2, 3};
  double out[3] = {0, 0, 0};
  EXPECT_EQ(cohort_broadcast(comm, v, 3, COHORT_F64, 0), COHORT_OK) << cohort_last_error();
  EXPECT_EQ(cohort_allgather(comm, v, out, 3, COHORT_F64), COHORT_OK) << cohort_last_error();
  EXPECT_EQ(out[2], 3.0);
  out[0] = 0;
  EXPECT_EQ(cohort_reduce_scatter(comm, v, out, 3, COHORT_F64, COHORT_MAX), COHORT_OK)
      << cohort_last_error();
  EXPECT_EQ(out[0], 1.0);
  EXPECT_EQ(cohort_barrier(comm), COHORT_OK) << cohort_last_error();
  EXPECT_EQ(cohort_broadcast(comm, v, 3, COHORT_F64, 1), COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cohort_last_error()).find("root 1"), std::string::npos)
      << cohort_last_error();
  EXPECT_EQ(cohort_allgather(comm, v, out, 3, 6), COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cohort_last_error()).find("unknown dtype 6"), std::string::npos)
      << cohort_last_error();
  EXPECT_EQ(cohort_reduce_scatter(comm, v, out, 3, COHORT_F64, 99), COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cohort_last_error()).find("unknown op 99"), std::string::npos)
      << cohort_last_error();
  EXPECT_EQ(cohort_barrier(nullptr), COHORT_ERR_INVALID_ARGUMENT);
  // A receive from any worker, where there is none other: refused at once, naming why.
  EXPECT_EQ(cohort_recv(comm, v, 3, COHORT_F64, COHORT_ANY_WORKER, 0), COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(cohort_last_error()).find("no other worker"), std::string::npos)
      << cohort_last_error();
  cohort_request_t* request = reinterpret_cast<cohort_request_t*>(0x1);
  EXPECT_EQ(cohort_irecv(comm, v, 3, COHORT_F64, COHORT_ANY_WORKER, 0, &request),
            COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(request, nullptr);
  int source = 7;
  EXPECT_EQ(cohort_wait_source(nullptr, &source), COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(source, -1);
  DestroySingleWorkerComm(comm);
}

TEST(CApiTest, MissingEnvironmentIsAnError) {
  unsetenv("RANK");
  cohort_comm_t* comm = reinterpret_cast<cohort_comm_t*>(0x1);
  EXPECT_EQ(cohort_comm_from_env(&comm), COHORT_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(comm, nullptr);
  EXPECT_NE(std::string(cohort_last_error()).find("RANK"), std::string::npos);
  EXPECT_EQ(cohort_allreduce(nullptr, nullptr, 0, COHORT_F32, COHORT_SUM, 0),
            COHORT_ERR_INVALID_ARGUMENT);
}

// Calls through the C API (and so the Python binding over it) are recorded once each, in the file
// COHORT_FLIGHT_RECORDER names. The process recorder reads the environment once per process, and
// this one made it already: the calls run in a fresh process, this binary running the next test.
TEST(CApiTest, DISABLED_RecordingChild) {
  if (std::getenv("COHORT_CAPI_RECORDING_CHILD") == nullptr) GTEST_SKIP() << "run by the next test";
  cohort_comm_t* comm = nullptr;
  ASSERT_EQ(cohort_comm_from_env(&comm), COHORT_OK) << cohort_last_error();
  float v[4] = {1, 2, 3, 4};
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cohort_allreduce(comm, v, 4, COHORT_F32, COHORT_SUM, COHORT_ALGO_AUTO), COHORT_OK);
  }
  ASSERT_EQ(cohort_barrier(comm), COHORT_OK);
  cohort_comm_destroy(comm);
}

TEST(CApiTest, EveryCallIsInTheFlightRecorderOnce) {
  char dir[] = "/tmp/cohort-capi-flight-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  const std::string path = std::string(dir) + "/recorder";
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    setenv("RANK", "0", 1);
    setenv("WORLD_SIZE", "1", 1);
    unsetenv("COHORT_BOOTSTRAP_ADDR");
    unsetenv("COHORT_NUM_REDUCERS");
    setenv("COHORT_FLIGHT_RECORDER", path.c_str(), 1);
    setenv("COHORT_CAPI_RECORDING_CHILD", "1", 1);
    execl("/proc/self/exe", "c_api_recording_child",
          "--gtest_filter=CApiTest.DISABLED_RecordingChild", "--gtest_also_run_disabled_tests",
          static_cast<char*>(nullptr));
    _exit(127);
  }
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  auto reader = cohort::FlightRecorderFileReader::Open(path);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  auto snap = (*reader)->Snapshot();
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  const cohort::FlightRecorderSnapshot& s = *snap;
  ASSERT_EQ(s.recent.size(), 4u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(s.recent[i].record.op, cohort::FlightOp::kAllreduce);
    EXPECT_EQ(s.recent[i].record.op_seq, static_cast<uint32_t>(i));
    EXPECT_EQ(s.recent[i].record.bytes, 16u);
    EXPECT_EQ(s.recent[i].record.outcome, cohort::FlightOutcome::kOk);
  }
  EXPECT_EQ(s.recent[3].record.op, cohort::FlightOp::kBarrier);
  EXPECT_EQ(s.recent[3].record.op_seq, 3u);
  std::filesystem::remove_all(dir);
}

}  // namespace
