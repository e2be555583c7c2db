#include "base/bounded_regex.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

std::shared_ptr<BoundedRegex> Regex(const std::string& pattern) {
  StatusOr<std::shared_ptr<BoundedRegex>> r = BoundedRegex::Compile(pattern);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return *r;
}

TEST(BoundedRegexTest, SearchFindsAMatchAnywhere) {
  EXPECT_TRUE(Regex("b+c")->Search("aabbbcd"));
  EXPECT_FALSE(Regex("^b")->Search("abc"));
  EXPECT_FALSE(BoundedRegex::Compile("(unclosed").ok());
}

TEST(BoundedRegexTest, ReplaceAllReplacesEveryMatchLiterally) {
  EXPECT_EQ(Regex("[0-9]{3}-[0-9]{4}")->ReplaceAll("call 555-1234 or 555-9876.", "[REDACTED]"),
            "call [REDACTED] or [REDACTED].");
  EXPECT_EQ(Regex("x")->ReplaceAll("no match here", "$1"), "no match here");
  EXPECT_EQ(Regex("a")->ReplaceAll("banana", "$1\\"), "b$1\\n$1\\n$1\\") << "the replacement is literal";
  // A result longer than the text grows the buffer.
  EXPECT_EQ(Regex(".")->ReplaceAll("abc", "[REDACTED]"), "[REDACTED][REDACTED][REDACTED]");
  EXPECT_EQ(Regex("é")->ReplaceAll("café é", "E"), "cafE E");
}

TEST(BoundedRegexTest, ACatastrophicPatternStopsAtItsLimit) {
  const std::string text = std::string(40, 'a') + "!";
  auto r = Regex("(a+)+$");
  EXPECT_FALSE(r->Search(text));
  EXPECT_EQ(r->ReplaceAll(text, "x"), std::nullopt) << "said, not silently left unreplaced";
  EXPECT_EQ(r->ReplaceAll(std::string("\xff\xfe", 2), "x"), std::nullopt) << "invalid UTF-8";
}

}  // namespace
}  // namespace tachyon
