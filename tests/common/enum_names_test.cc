// Enum name tables (common/enum_names.h) and the names built on them in common/: both directions,
// the fallback for a value or a name the table lacks.
#include "common/enum_names.h"

#include <gtest/gtest.h>

#include "common/flight_recorder.h"
#include "common/status.h"

namespace cohort {
namespace {

enum class Color { kRed = 1, kGreen = 2, kBlue = 3 };
constexpr EnumName<Color> kColorNames[] = {{Color::kRed, "red"}, {Color::kGreen, "green"}};

TEST(EnumNamesTest, ReadBothWaysWithAFallbackForWhatIsNotListed) {
  static_assert(NameIn(kColorNames, Color::kGreen, "?") == "green");
  EXPECT_EQ(NameIn(kColorNames, Color::kRed, "?"), "red");
  EXPECT_EQ(NameIn(kColorNames, Color::kBlue, "no color"), "no color");
  EXPECT_EQ(ValueIn(kColorNames, "green"), Color::kGreen);
  EXPECT_FALSE(ValueIn(kColorNames, "blue").has_value());
  EXPECT_FALSE(ValueIn(kColorNames, "").has_value());
  EXPECT_FALSE(ValueIn(kColorNames, "Red").has_value());
}

TEST(EnumNamesTest, ChoiceOfListsTheNamesInTableOrderForAMessage) {
  EXPECT_EQ(ChoiceOf(kColorNames), "red or green");
  constexpr EnumName<Color> kOne[] = {{Color::kBlue, "blue"}};
  EXPECT_EQ(ChoiceOf(kOne), "blue");
  constexpr EnumName<Color> kThree[] = {
      {Color::kBlue, "blue"}, {Color::kRed, "red"}, {Color::kGreen, "green"}};
  EXPECT_EQ(ChoiceOf(kThree), "blue, red or green");
}

TEST(EnumNamesTest, StatusCodesAndFlightRecorderNames) {
  EXPECT_EQ(StatusCodeName(StatusCode::kOk), "OK");
  EXPECT_EQ(StatusCodeName(StatusCode::kUnauthenticated), "UNAUTHENTICATED");
  EXPECT_EQ(StatusCodeName(static_cast<StatusCode>(200)), "UNKNOWN");
  for (uint8_t v = 1; v <= static_cast<uint8_t>(FlightOp::kPsPull); ++v) {
    const auto op = static_cast<FlightOp>(v);
    EXPECT_NE(FlightOpName(op), "unknown") << int{v};
    EXPECT_EQ(ParseFlightOp(FlightOpName(op)), op) << int{v};
  }
  EXPECT_EQ(FlightOpName(FlightOp::kNone), "unknown");
  EXPECT_EQ(ParseFlightOp("unknown"), FlightOp::kNone);
  EXPECT_EQ(FlightAlgorithmName(0), "");
  EXPECT_EQ(FlightAlgorithmName(5), "hierarchical");
  EXPECT_EQ(FlightAlgorithmName(6), "recursive-doubling");
  EXPECT_EQ(FlightAlgorithmName(7), "");
  EXPECT_EQ(FlightOutcomeName(FlightOutcome::kFailed), "failed");
  EXPECT_EQ(FlightOutcomeName(FlightOutcome::kNone), "none");
}

}  // namespace
}  // namespace cohort
