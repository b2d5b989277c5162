#include "common/env_references.h"

#include <gtest/gtest.h>

#include <utility>

namespace cohort {
namespace {

const std::map<std::string, std::string> kEnv = {{"COHORT_ARRAY_INDEX", "7"},
                                                 {"AIP_MODEL_DIR", "/out/7/model/"},
                                                 {"EMPTY", ""},
                                                 {"SELF", "$(COHORT_ARRAY_INDEX)"}};

// References are replaced by their values (once: a value is not expanded again); what is no
// known reference stays as written, an escaped one is text, and a shell's `$$` is left alone
// (unlike Kubernetes, which would make it one `$`).
TEST(EnvReferencesTest, KnownReferencesAreExpandedAndTheRestStaysAsWritten) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--seed=$(COHORT_ARRAY_INDEX)", "--seed=7"},
      {"$(AIP_MODEL_DIR)best.pt", "/out/7/model/best.pt"},
      {"$(COHORT_ARRAY_INDEX)-$(COHORT_ARRAY_INDEX)", "7-7"},
      {"[$(EMPTY)]", "[]"},
      {"plain text", "plain text"},
      {"", ""},
      {"$(SELF)", "$(COHORT_ARRAY_INDEX)"},
      {"$(date) $(NOT_SET)", "$(date) $(NOT_SET)"},
      {"$$(COHORT_ARRAY_INDEX)", "$(COHORT_ARRAY_INDEX)"},
      {"$$$(COHORT_ARRAY_INDEX)", "$$(COHORT_ARRAY_INDEX)"},
      {"kill -9 $$; echo $$ > pid", "kill -9 $$; echo $$ > pid"},
      {"$HOME ${HOME} $", "$HOME ${HOME} $"},
      {"$(COHORT_ARRAY_INDEX", "$(COHORT_ARRAY_INDEX"},
      {"$()", "$()"},
      {"$(COHORT_ARRAY_INDEX) $(", "7 $("},
      {")$(COHORT_ARRAY_INDEX", ")$(COHORT_ARRAY_INDEX"},
      {"$$($(COHORT_ARRAY_INDEX)", "$(7"},
  };
  for (const auto& [text, expanded] : cases) {
    EXPECT_EQ(ExpandEnvReferences(text, kEnv), expanded) << text;
  }
  std::vector<std::string> args = {"--i=$(COHORT_ARRAY_INDEX)", "$(NOT_SET)"};
  ExpandEnvReferences(args, kEnv);
  EXPECT_EQ(args, (std::vector<std::string>{"--i=7", "$(NOT_SET)"}));
}

}  // namespace
}  // namespace cohort
