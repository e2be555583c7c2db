#include "base/status.h"

#include <gtest/gtest.h>

#include <memory>

namespace tachyon {
namespace {

StatusOr<int> ParsePositive(int x) {
  if (x <= 0) return InvalidArgumentError("expected a positive number, got " + std::to_string(x));
  return x;
}

StatusOr<int> Doubled(int x) {
  ASSIGN_OR_RETURN(int v, ParsePositive(x));
  return 2 * v;
}

Status CheckBoth(int a, int b) {
  RETURN_IF_ERROR(ParsePositive(a).status());
  RETURN_IF_ERROR(ParsePositive(b).status().WithContext("second"));
  return Status::Ok();
}

TEST(StatusTest, ToStringNamesCodeAndMessage) {
  EXPECT_EQ(Status::Ok().ToString(), "OK");
  EXPECT_EQ(DataLossError("file truncated").ToString(), "DATA_LOSS: file truncated");
}

TEST(StatusTest, MacrosPropagateErrorsAndValues) {
  EXPECT_EQ(*Doubled(21), 42);
  StatusOr<int> bad = Doubled(-1);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "expected a positive number, got -1");
  EXPECT_TRUE(CheckBoth(1, 2).ok());
  EXPECT_EQ(CheckBoth(1, 0).message(), "second: expected a positive number, got 0");
}

TEST(StatusTest, StatusOrHoldsMoveOnlyTypes) {
  StatusOr<std::unique_ptr<int>> p = std::make_unique<int>(7);
  ASSERT_TRUE(p.ok());
  std::unique_ptr<int> owned = std::move(p).value();
  EXPECT_EQ(*owned, 7);
}

TEST(StatusDeathTest, ValueOfErrorChecks) {
  StatusOr<int> bad = NotFoundError("no such model");
  EXPECT_DEATH((void)bad.value(), "no such model");
}

}  // namespace
}  // namespace tachyon
