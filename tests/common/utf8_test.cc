#include "common/utf8.h"

#include <gtest/gtest.h>

namespace cohort {
namespace {

TEST(Utf8Test, WellFormedTextComesBackUnchanged) {
  const std::string text = "plain, caf\xC3\xA9, \xE2\x82\xAC, \xF0\x9F\x98\x80, tab\there";
  EXPECT_EQ(ValidUtf8(text), text);
}

TEST(Utf8Test, EachIllFormedByteBecomesTheReplacementCharacter) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(ValidUtf8(std::string("a\xFF") + "b"), "a" + r + "b");
  EXPECT_EQ(ValidUtf8("\xC3"), r);                                   // cut short
  EXPECT_EQ(ValidUtf8("\xC0\xAF"), r + r);                           // overlong '/'
  EXPECT_EQ(ValidUtf8("\xE0\x80\xAF"), r + r + r);                   // overlong, 3 bytes
  EXPECT_EQ(ValidUtf8("\xED\xA0\x80"), r + r + r);                   // a surrogate
  EXPECT_EQ(ValidUtf8("\xF4\x90\x80\x80"), r + r + r + r);           // past U+10FFFF
  EXPECT_EQ(ValidUtf8(std::string("\xE2\x82") + "x"), r + r + "x");  // a lead, no tail
}

TEST(Utf8Test, PrintableTurnsControlCharactersIntoSpaces) {
  EXPECT_EQ(ValidUtf8("red \x1B[31mtext\x7F\tend\n", /*printable=*/true), "red  [31mtext  end ");
  EXPECT_EQ(ValidUtf8("keeps \xC3\xA9", /*printable=*/true), "keeps \xC3\xA9");
}

TEST(Utf8Test, TruncationEndsOnACharacterBoundary) {
  EXPECT_EQ(TruncateUtf8("short", 10), "short");
  EXPECT_EQ(TruncateUtf8("abcdefghij", 8), "abcde...");
  // "ab" + a 4-byte character: a cut inside it drops the whole character.
  const std::string text = std::string("ab\xF0\x9F\x98\x80") + "cdef";
  EXPECT_EQ(TruncateUtf8(text, 8), "ab...");
  EXPECT_LE(TruncateUtf8(text, 9).size(), 9u);
  EXPECT_EQ(TruncateUtf8(text, 9), "ab\xF0\x9F\x98\x80...");
}

// Names a peer sends (a node id, a claimed user): printable UTF-8 of a bounded size, or an error
// naming the field and showing the text made printable.
TEST(Utf8Test, CheckPrintableTextNamesWhatIsWrong) {
  EXPECT_TRUE(CheckPrintableText("", 4, "x").ok());
  EXPECT_TRUE(CheckPrintableText("n\xC3\xA9", 3, "x").ok());
  EXPECT_EQ(CheckPrintableText("abcde", 4, "node").message(), "node: 5 bytes; at most 4");
  const Status latin1 = CheckPrintableText("caf\xE9", 10, "node");
  EXPECT_EQ(latin1.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(latin1.message(), "node: 'caf\xEF\xBF\xBD' is not printable UTF-8");
  EXPECT_EQ(CheckPrintableText("a\tb", 10, "node").message(), "node: 'a b' is not printable UTF-8");
}

}  // namespace
}  // namespace cohort
