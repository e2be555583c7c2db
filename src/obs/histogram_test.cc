#include "obs/histogram.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

TEST(HistogramTest, CountsSumAndQuantiles) {
  Histogram h({0.01, 0.1, 1.0});
  for (int i = 0; i < 90; ++i) h.Observe(0.005);  // bucket <= 0.01
  for (int i = 0; i < 10; ++i) h.Observe(0.5);    // bucket <= 1.0
  EXPECT_EQ(h.count(), 100u);
  EXPECT_NEAR(h.sum(), 90 * 0.005 + 10 * 0.5, 1e-9);
  EXPECT_LE(h.Quantile(0.5), 0.01);
  EXPECT_GT(h.Quantile(0.95), 0.1);
  EXPECT_LE(h.Quantile(0.95), 1.0);
  std::string text = h.RenderPrometheus("t:latency_seconds", "model=\"m\"");
  EXPECT_NE(text.find("t:latency_seconds_bucket{model=\"m\",le=\"0.01\"} 90\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t:latency_seconds_bucket{model=\"m\",le=\"0.1\"} 90\n"), std::string::npos);
  EXPECT_NE(text.find("t:latency_seconds_bucket{model=\"m\",le=\"+Inf\"} 100\n"), std::string::npos);
  EXPECT_NE(text.find("t:latency_seconds_count{model=\"m\"} 100\n"), std::string::npos);
  EXPECT_EQ(Histogram({1.0}).Quantile(0.5), 0.0) << "empty";
}

}  // namespace
}  // namespace tachyon
