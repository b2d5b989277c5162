// The lists and counts of the daemons' messages (common/text_join.h).
#include "common/text_join.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(TextJoinTest, ListsAreJoinedAndLongOnesCut) {
  EXPECT_EQ(JoinWith({}, "; "), "");
  EXPECT_EQ(JoinWith({"a", "b"}, "; "), "a; b");
  EXPECT_EQ(JoinWithCommas({"a", "b", "c"}), "a, b, c");
  EXPECT_EQ(JoinFirst({"a", "b"}, 2), "a, b");
  EXPECT_EQ(JoinFirst({"a", "b", "c", "d"}, 2), "a, b and 2 more");
}

TEST(TextJoinTest, CountsArePluralUnlessOne) {
  EXPECT_EQ(Counted(0, "replica"), "0 replicas");
  EXPECT_EQ(Counted(1, "replica"), "1 replica");
  EXPECT_EQ(Counted(3, "GPU"), "3 GPUs");
}

}  // namespace
}  // namespace cohort
