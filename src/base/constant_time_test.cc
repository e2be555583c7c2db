#include "base/constant_time.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

TEST(ConstantTimeTest, EqualsAndBearer) {
  EXPECT_TRUE(ConstantTimeEquals("sk-abc", "sk-abc"));
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-abd"));
  EXPECT_FALSE(ConstantTimeEquals("sk-abc", "sk-ab"));
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(BearerMatches("Bearer sk-abc", "sk-abc"));
  EXPECT_FALSE(BearerMatches("Bearer sk-abcd", "sk-abc"));
  // The scheme is case-insensitive, and more than one space may follow it (RFC 7235).
  EXPECT_TRUE(BearerMatches("bearer sk-abc", "sk-abc"));
  EXPECT_TRUE(BearerMatches("BEARER  sk-abc", "sk-abc"));
  EXPECT_FALSE(BearerMatches("Bearersk-abc", "sk-abc"));
  EXPECT_FALSE(BearerMatches("Basic sk-abc", "sk-abc"));
  EXPECT_FALSE(BearerMatches("sk-abc", "sk-abc"));
  EXPECT_FALSE(BearerMatches("Bearer", ""));
  EXPECT_TRUE(BearerMatches("Bearer ", ""));
}

}  // namespace
}  // namespace tachyon
