#include "common/env_references.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

const std::map<std::string, std::string> kEnv = {
    {"COHORT_ARRAY_INDEX", "7"}, {"AIP_MODEL_DIR", "/out/7/model/"}, {"EMPTY", ""},
    {"SELF", "$(COHORT_ARRAY_INDEX)"}};

TEST(EnvReferencesTest, ReferencesAreReplacedByTheirValues) {
  EXPECT_EQ(ExpandEnvReferences("--seed=$(COHORT_ARRAY_INDEX)", kEnv), "--seed=7");
  EXPECT_EQ(ExpandEnvReferences("$(AIP_MODEL_DIR)best.pt", kEnv), "/out/7/model/best.pt");
  EXPECT_EQ(ExpandEnvReferences("$(COHORT_ARRAY_INDEX)-$(COHORT_ARRAY_INDEX)", kEnv), "7-7");
  EXPECT_EQ(ExpandEnvReferences("[$(EMPTY)]", kEnv), "[]");
  EXPECT_EQ(ExpandEnvReferences("plain text", kEnv), "plain text");
  EXPECT_EQ(ExpandEnvReferences("", kEnv), "");
  // A value is not expanded again.
  EXPECT_EQ(ExpandEnvReferences("$(SELF)", kEnv), "$(COHORT_ARRAY_INDEX)");
}

TEST(EnvReferencesTest, WhatIsNoKnownReferenceStaysAsWrittenAndAnEscapedOneIsText) {
  EXPECT_EQ(ExpandEnvReferences("$(date) $(NOT_SET)", kEnv), "$(date) $(NOT_SET)");
  EXPECT_EQ(ExpandEnvReferences("$$(COHORT_ARRAY_INDEX)", kEnv), "$(COHORT_ARRAY_INDEX)");
  EXPECT_EQ(ExpandEnvReferences("$$$(COHORT_ARRAY_INDEX)", kEnv), "$$(COHORT_ARRAY_INDEX)");
  // A shell's pid, unlike Kubernetes, which would make it one `$`.
  EXPECT_EQ(ExpandEnvReferences("kill -9 $$; echo $$ > pid", kEnv), "kill -9 $$; echo $$ > pid");
  EXPECT_EQ(ExpandEnvReferences("$HOME ${HOME} $", kEnv), "$HOME ${HOME} $");
  EXPECT_EQ(ExpandEnvReferences("$(COHORT_ARRAY_INDEX", kEnv), "$(COHORT_ARRAY_INDEX");
  EXPECT_EQ(ExpandEnvReferences("$()", kEnv), "$()");
  std::vector<std::string> args = {"--i=$(COHORT_ARRAY_INDEX)", "$(NOT_SET)"};
  ExpandEnvReferences(args, kEnv);
  EXPECT_EQ(args, (std::vector<std::string>{"--i=7", "$(NOT_SET)"}));
}

}  // namespace
}  // namespace cohort
