#include "gateway/route/hedge.h"

#include <gtest/gtest.h>

#include "base/clock.h"

namespace tachyon {
namespace {

TEST(LatencyWindowTest, QuantileNeedsEnoughSamplesAndForgetsOldOnes) {
  ManualClock clock;
  LatencyWindow w;
  for (int i = 1; i < static_cast<int>(LatencyWindow::kMinSamples); ++i) w.Add(clock.Now(), i / 100.0);
  EXPECT_FALSE(w.Quantile(0.9, clock.Now()).has_value());
  w.Add(clock.Now(), 0.20);  // 20 samples: 0.01 .. 0.20
  ASSERT_TRUE(w.Quantile(0.9, clock.Now()).has_value());
  EXPECT_DOUBLE_EQ(*w.Quantile(0.9, clock.Now()), 0.19);  // nearest rank: the 19th of 20
  EXPECT_DOUBLE_EQ(*w.Quantile(0.5, clock.Now()), 0.11);
  EXPECT_DOUBLE_EQ(*w.Quantile(0.999, clock.Now()), 0.20);
  clock.AdvanceSeconds(LatencyWindow::kWindowSeconds + 1);
  EXPECT_FALSE(w.Quantile(0.9, clock.Now()).has_value()) << "older than the window";
  EXPECT_EQ(w.size(), 0u);
}

TEST(LatencyWindowTest, KeepsTheNewestSamplesUpToItsCapacity) {
  ManualClock clock;
  LatencyWindow w;
  for (size_t i = 0; i < LatencyWindow::kCapacity; ++i) w.Add(clock.Now(), 5.0);
  for (size_t i = 0; i < LatencyWindow::kCapacity; ++i) w.Add(clock.Now(), 1.0);
  EXPECT_EQ(w.size(), LatencyWindow::kCapacity);
  EXPECT_DOUBLE_EQ(*w.Quantile(0.99, clock.Now()), 1.0);
}

TEST(HedgeDelayTest, FixedOrTheFirstBackendsQuantileWithinItsBounds) {
  ManualClock clock;
  LatencyWindow w;
  HedgeOptions fixed{.after_seconds = 0.25};
  EXPECT_DOUBLE_EQ(HedgeDelay(fixed, w, clock.Now()), 0.25);
  HedgeOptions p90{.quantile = 0.9, .min_seconds = 0.05, .max_seconds = 2};
  EXPECT_DOUBLE_EQ(HedgeDelay(p90, w, clock.Now()), 2) << "no samples yet: the upper bound";
  for (int i = 0; i < 100; ++i) w.Add(clock.Now(), i < 90 ? 0.1 : 1.5);
  EXPECT_DOUBLE_EQ(HedgeDelay(p90, w, clock.Now()), 1.5);
  HedgeOptions p50 = p90;
  p50.quantile = 0.5;
  EXPECT_DOUBLE_EQ(HedgeDelay(p50, w, clock.Now()), 0.1);
  p50.min_seconds = 0.3;
  EXPECT_DOUBLE_EQ(HedgeDelay(p50, w, clock.Now()), 0.3) << "the lower bound";
  p90.max_seconds = 1;
  EXPECT_DOUBLE_EQ(HedgeDelay(p90, w, clock.Now()), 1) << "the upper bound";
}

TEST(HedgeBudgetTest, EachRequestEarnsItsShareAndABurstIsHeld) {
  HedgeBudget budget(0.25);
  int taken = 0;
  while (budget.Take()) ++taken;
  EXPECT_EQ(taken, static_cast<int>(HedgeBudget::kBurst)) << "it starts full";
  for (int i = 0; i < 3; ++i) budget.Earn();
  EXPECT_FALSE(budget.Take()) << "0.75 of a hedge";
  budget.Earn();
  EXPECT_TRUE(budget.Take());
  EXPECT_FALSE(budget.Take());
  budget.Refund();
  EXPECT_TRUE(budget.Take());
  for (int i = 0; i < 1000; ++i) budget.Earn();
  taken = 0;
  while (budget.Take()) ++taken;
  EXPECT_EQ(taken, static_cast<int>(HedgeBudget::kBurst)) << "never more than the burst";
  // Over N requests, at most max_rate * N hedges beyond the burst.
  HedgeBudget steady(0.2);
  while (steady.Take()) {
  }
  int hedges = 0;
  for (int i = 0; i < 1000; ++i) {
    steady.Earn();
    if (steady.Take()) ++hedges;
  }
  EXPECT_EQ(hedges, 200);
}

}  // namespace
}  // namespace tachyon
