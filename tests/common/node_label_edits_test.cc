// ParseNodeLabelEdits and friends: kubectl label's KEY=VALUE and KEY- items, their stored text,
// and how they apply over an agent's labels.
#include "common/node_label_edits.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace cohort {
namespace {

TEST(NodeLabelEditsTest, SetsAndRemovalsParseAndRoundTripThroughTheirText) {
  auto edits = ParseNodeLabelEdits({"gpu=h100", "zone-", "a-b-", "empty=", "gpu=h200"});
  ASSERT_TRUE(edits.ok()) << edits.status().ToString();
  const NodeLabelEdits want = {
      {"a-b", std::nullopt}, {"empty", ""}, {"gpu", "h200"}, {"zone", std::nullopt}};
  EXPECT_EQ(*edits, want);  // the later item of a key wins
  EXPECT_EQ(FormatNodeLabelEdits(*edits), "a-b-,empty=,gpu=h200,zone-");
  auto read = ParseNodeLabelEditsText(FormatNodeLabelEdits(*edits));
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  EXPECT_EQ(*read, want);
  EXPECT_EQ(FormatNodeLabelEdits({}), "");
  ASSERT_TRUE(ParseNodeLabelEditsText("").ok());
  EXPECT_TRUE(ParseNodeLabelEditsText("")->empty());
}

TEST(NodeLabelEditsTest, ApplyOverTheAgentsLabels) {
  const NodeLabels agent = {{"gpu", "a100"}, {"zone", "east"}};
  EXPECT_EQ(ApplyNodeLabelEdits(agent, {{"gpu", "h100"}, {"zone", std::nullopt}, {"rack", "r1"}}),
            (NodeLabels{{"gpu", "h100"}, {"rack", "r1"}}));
  EXPECT_EQ(ApplyNodeLabelEdits(agent, {{"ssd", std::nullopt}}), agent);
}

TEST(NodeLabelEditsTest, AnythingElseIsRefusedNamingTheItem) {
  auto refused = [](const std::vector<std::string>& items) {
    auto edits = ParseNodeLabelEdits(items);
    EXPECT_FALSE(edits.ok());
    return edits.ok() ? std::string() : edits.status().message();
  };
  EXPECT_EQ(refused({"gpu"}), "expected KEY=VALUE (set a label) or KEY- (remove one), got 'gpu'");
  EXPECT_NE(refused({"-"}).find("got '-'"), std::string::npos);
  EXPECT_NE(refused({"gpu=h 100"}).find("label value 'h 100' is not valid"), std::string::npos);
  EXPECT_NE(refused({"_x-"}).find("label key '_x' is not valid"), std::string::npos);
  EXPECT_NE(refused({"=v"}).find("label key '' is not valid"), std::string::npos);
  EXPECT_NE(refused(std::vector<std::string>(33, "a=b")).find("at most 32 label edits, got 33"),
            std::string::npos);
  EXPECT_FALSE(ParseNodeLabelEditsText("gpu=h100,bad").ok());
}

}  // namespace
}  // namespace cohort
