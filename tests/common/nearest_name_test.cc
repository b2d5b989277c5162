// The "did you mean" of unknown keys, flags, verbs and options (common/nearest_name.h).
#include "common/nearest_name.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(NearestNameTest, ATypoFindsTheNameItMissed) {
  const std::vector<std::string_view> keys = {"name", "worker_pools", "scheduling", "output_dir"};
  EXPECT_EQ(NearestName("worker_pool", keys), "worker_pools");  // one left out
  EXPECT_EQ(NearestName("sheduling", keys), "scheduling");
  EXPECT_EQ(NearestName("ouptut_dir", keys), "output_dir");  // two swapped: one edit
  EXPECT_EQ(NearestName("Name", keys), "name");              // case
  EXPECT_EQ(DidYouMean("worker_pool", keys), " (did you mean 'worker_pools'?)");
}

TEST(NearestNameTest, AShortNameForgivesOneEditAndALongOneThreeAtMost) {
  EXPECT_EQ(NearestName("jsn", {"--json"}), "");  // "--json" is 2 edits from "jsn"
  EXPECT_EQ(NearestName("--jsn", {"--json", "--spec"}), "--json");
  EXPECT_EQ(NearestName("cpu", {"cpus", "gpus"}), "cpus");  // the fewest edits
  EXPECT_EQ(NearestName("xyz", {"cpus", "gpus"}), "");
  EXPECT_EQ(NearestName("restart_job_on_worker_restrat", {"restart_job_on_worker_restart"}),
            "restart_job_on_worker_restart");
  EXPECT_EQ(NearestName("restart_on_worker_restart", {"restart_job_on_worker_restart"}),
            "");  // 4 edits: too many however long the name
  EXPECT_EQ(NearestName("max_wait_time", {"max_wait", "hang_timeout"}), "");
}

TEST(NearestNameTest, TheOpeningOfALongerNameCountsAfterEveryRealNearMiss) {
  EXPECT_EQ(NearestName("memory", {"gpus", "cpus", "memory_mb"}), "memory_mb");
  EXPECT_EQ(NearestName("job", {"job-retention", "jobs"}), "jobs");
  EXPECT_EQ(NearestName("me", {"memory_mb"}), "");  // too short to stand for anything
}

TEST(NearestNameTest, NothingIsSuggestedForNothing) {
  EXPECT_EQ(NearestName("", {"a"}), "");
  EXPECT_EQ(NearestName("abc", {}), "");
  EXPECT_EQ(DidYouMean("zzzz", {"name"}), "");
  EXPECT_EQ(NearestName(std::string(1000, 'a'), {"aaa"}), "");
}

}  // namespace
}  // namespace cohort
