#include "base/query_string.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

TEST(QueryStringTest, PairsPercentDecoded) {
  const auto q = ParseQuery("route=chat%20small&tenant=a%2Bb&flag&key=k+1&route=second");
  EXPECT_EQ(q.at("route"), "chat small") << "the first value stays";
  EXPECT_EQ(q.at("tenant"), "a+b");
  EXPECT_EQ(q.at("flag"), "");
  EXPECT_EQ(q.at("key"), "k+1") << "'+' is not a space";
  EXPECT_EQ(ParseQuery("a=%zz&b=1").count("a"), 0u) << "a broken escape is left out";
  EXPECT_EQ(ParseQuery("a=%zz&b=1").at("b"), "1");
  EXPECT_TRUE(ParseQuery("").empty());
  EXPECT_TRUE(ParseQuery("&&").empty());
  EXPECT_EQ(QueryOf("/v1/stats?window=60"), "window=60");
  EXPECT_EQ(QueryOf("/v1/stats"), "");
}

}  // namespace
}  // namespace tachyon
