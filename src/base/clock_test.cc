#include "base/clock.h"

#include <gtest/gtest.h>

#include <thread>

namespace tachyon {
namespace {

TEST(ClockTest, AManualClockMovesOnlyWhenAdvancedBothReadingsTogether) {
  ManualClock clock;
  const Clock::time_point t0 = clock.Now();
  const double u0 = clock.UnixSeconds();
  std::this_thread::yield();
  EXPECT_EQ(clock.Now(), t0) << "no time passes by itself";
  clock.AdvanceSeconds(1.5);
  EXPECT_DOUBLE_EQ(SecondsBetween(t0, clock.Now()), 1.5);
  EXPECT_NEAR(clock.UnixSeconds() - u0, 1.5, 1e-6);
  clock.Advance(std::chrono::milliseconds(250));
  EXPECT_DOUBLE_EQ(SecondsBetween(t0, clock.Now()), 1.75);
}

TEST(ClockTest, ARealClockIsTheProcessClocks) {
  const Clock& real = Clock::Real();
  const auto before = std::chrono::steady_clock::now();
  const Clock::time_point now = real.Now();
  EXPECT_GE(now, before);
  EXPECT_LE(now, std::chrono::steady_clock::now());
  const double unix = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_NEAR(real.UnixSeconds(), unix, 5.0);
  EXPECT_EQ(&Clock::Or(nullptr), &real);
  ManualClock manual;
  EXPECT_EQ(&Clock::Or(&manual), &manual);
}

}  // namespace
}  // namespace tachyon
