#include "gateway/route/circuit_breaker.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

using State = CircuitBreaker::State;

TEST(CircuitBreakerTest, OpensAfterConsecutiveFailuresThenProbesOnceAndCloses) {
  CircuitBreaker b({.failure_threshold = 3, .cooldown_seconds = 10});
  const auto t0 = CircuitBreaker::Clock::time_point() + std::chrono::hours(1);
  EXPECT_TRUE(b.Allow(t0));
  b.OnFailure(t0);
  b.OnFailure(t0);
  b.OnSuccess();  // a success in between resets the count
  b.OnFailure(t0);
  b.OnFailure(t0);
  EXPECT_EQ(b.state(t0), State::kClosed);
  b.OnFailure(t0);
  EXPECT_EQ(b.state(t0), State::kOpen);
  EXPECT_FALSE(b.Allow(t0 + std::chrono::seconds(9)));
  const auto later = t0 + std::chrono::seconds(10);
  EXPECT_EQ(b.state(later), State::kHalfOpen);
  EXPECT_TRUE(b.Allow(later)) << "the probe";
  EXPECT_FALSE(b.Allow(later)) << "one probe at a time";
  b.OnFailure(later);
  EXPECT_EQ(b.state(later + std::chrono::seconds(5)), State::kOpen) << "a failed probe opens it again";
  const auto again = later + std::chrono::seconds(10);
  EXPECT_TRUE(b.Allow(again));
  b.OnSuccess();
  EXPECT_EQ(b.state(again), State::kClosed);
  EXPECT_TRUE(b.Allow(again));
  EXPECT_TRUE(b.Allow(again));
}

TEST(CircuitBreakerTest, AnAbandonedProbeLetsAnotherOneGo) {
  CircuitBreaker b({.failure_threshold = 1, .cooldown_seconds = 1});
  const auto t0 = CircuitBreaker::Clock::time_point() + std::chrono::hours(1);
  b.OnFailure(t0);
  const auto later = t0 + std::chrono::seconds(2);
  EXPECT_TRUE(b.Allow(later));
  EXPECT_FALSE(b.Allow(later));
  b.OnAbandoned();
  EXPECT_TRUE(b.Allow(later));
  EXPECT_STREQ(CircuitStateName(b.state(later)), "half_open");
}

}  // namespace
}  // namespace tachyon
