#include "base/json_depth.h"

#include <gtest/gtest.h>

#include <string>

namespace tachyon {
namespace {

std::string Nested(int depth, char open, char close) {
  return std::string(depth, open) + std::string(depth, close);
}

TEST(JsonDepthTest, CountsArraysAndObjectsTogether) {
  EXPECT_FALSE(JsonNestsDeeperThan("{}", 1));
  EXPECT_TRUE(JsonNestsDeeperThan("[{}]", 1));
  EXPECT_FALSE(JsonNestsDeeperThan(R"({"a":[1,{"b":2}],"c":[]})", 3));
  EXPECT_TRUE(JsonNestsDeeperThan(R"({"a":[1,{"b":2}],"c":[]})", 2));
  EXPECT_FALSE(JsonNestsDeeperThan("42", 0));
  EXPECT_TRUE(JsonNestsDeeperThan("[]", 0));
  // Siblings do not add up: only nesting does.
  EXPECT_FALSE(JsonNestsDeeperThan("[[],[],[],[],[]]", 2));
}

TEST(JsonDepthTest, TheBoundIsInclusive) {
  EXPECT_FALSE(JsonNestsDeeperThan(Nested(kMaxJsonDepth, '[', ']')));
  EXPECT_TRUE(JsonNestsDeeperThan(Nested(kMaxJsonDepth + 1, '[', ']')));
  EXPECT_TRUE(JsonNestsDeeperThan(Nested(1000000, '[', ']')));
}

TEST(JsonDepthTest, BracketsInStringsDoNotCount) {
  const std::string deep_string = "\"" + Nested(1000, '[', ']') + "\"";
  EXPECT_FALSE(JsonNestsDeeperThan("{\"a\":" + deep_string + "}", 1));
  // An escaped quote does not end the string; an escaped backslash before a quote does.
  EXPECT_FALSE(JsonNestsDeeperThan(R"(["\"[[[[", 1])", 1));
  EXPECT_TRUE(JsonNestsDeeperThan(R"(["\\", [[1]]])", 2));
}

TEST(JsonDepthTest, ClosersFirstGiveNoCredit) {
  // 10 stray closers do not buy 10 extra levels afterwards.
  EXPECT_TRUE(JsonNestsDeeperThan(std::string(10, ']') + Nested(5, '[', ']'), 4));
}

}  // namespace
}  // namespace tachyon
