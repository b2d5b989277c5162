#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "collective/cohort_collective.h"

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
  EXPECT_EQ(cohort_allreduce(comm, v, 3, COHORT_F32, COHORT_SUM, COHORT_ALGO_HIERARCHICAL + 1),
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

}  // namespace
