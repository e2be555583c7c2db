#include "gateway/cache/semantic_audit.h"

#include <gtest/gtest.h>

#include "embed/hash_embedder.h"

namespace tachyon {
namespace {

std::shared_ptr<Embedder> Hash() { return std::shared_ptr<Embedder>(*HashEmbedder::Create({})); }

double Metric(const MetricsRegistry& metrics, const std::string& series) {
  const std::string text = metrics.Render();
  const size_t at = text.find(series + " ");
  return at == std::string::npos ? -1 : std::strtod(text.c_str() + at + series.size() + 1, nullptr);
}

TEST(WilsonIntervalTest, KnownValues) {
  // 5 of 100: 0.0215 .. 0.1118 (Wilson 1927; z = 1.96).
  auto [lo, hi] = WilsonInterval(5, 100);
  EXPECT_NEAR(lo, 0.0215, 5e-4);
  EXPECT_NEAR(hi, 0.1118, 5e-4);
  auto [zlo, zhi] = WilsonInterval(0, 50);
  EXPECT_DOUBLE_EQ(zlo, 0);
  EXPECT_NEAR(zhi, 0.0714, 5e-4);
  auto [none_lo, none_hi] = WilsonInterval(0, 0);
  EXPECT_EQ(none_lo, 0);
  EXPECT_EQ(none_hi, 1);
}

TEST(SemanticAuditTest, ExactForADeterministicBackendSimilarOtherwise) {
  MetricsRegistry metrics;
  SemanticAudit audit("r", 0.9, {.sample = 1, .compare = "auto", .agree = 0.9}, Hash(), nullptr, 0, &metrics);
  EXPECT_TRUE(audit.Agree("Paris is the capital.", "  Paris is the capital.\n", true));
  EXPECT_FALSE(audit.Agree("Paris is the capital.", "Paris is the capital!", true)) << "deterministic: any change";
  EXPECT_TRUE(audit.Agree("Paris is the capital of France.", "Paris is the capital of France!", false));
  EXPECT_FALSE(audit.Agree("Paris is the capital of France.", "Bake the bread for forty minutes.", false));
  SemanticAudit exact("r", 0.9, {.sample = 1, .compare = "exact"}, Hash(), nullptr, 0, &metrics);
  EXPECT_FALSE(exact.Agree("Paris is the capital of France.", "Paris is the capital of France!", false));
}

TEST(SemanticAuditTest, SamplesBoundsItsConcurrencyAndCountsWhatItSkips) {
  MetricsRegistry metrics;
  SemanticAudit none("off", 0.9, {.sample = 0}, Hash(), nullptr, 0, &metrics);
  EXPECT_FALSE(none.Begin());
  SemanticAudit audit("r", 0.9, {.sample = 1, .concurrency = 2}, Hash(), nullptr, 0, &metrics);
  EXPECT_TRUE(audit.Begin());
  EXPECT_TRUE(audit.Begin());
  EXPECT_FALSE(audit.Begin()) << "two in flight";
  audit.End(0.95, "a", std::nullopt, false, "breaker");
  EXPECT_TRUE(audit.Begin());
  EXPECT_EQ(Metric(metrics, R"(tachyon:cache_semantic_audits_skipped_total{route="r",reason="busy"})"), 1);
  EXPECT_EQ(Metric(metrics, R"(tachyon:cache_semantic_audits_skipped_total{route="r",reason="breaker"})"), 1);
  SemanticAudit half("h", 0.9, {.sample = 0.5, .concurrency = 1000}, Hash(), nullptr, 0, &metrics);
  int begun = 0;
  for (int i = 0; i < 2000; ++i) begun += half.Begin();
  EXPECT_GT(begun, 850);
  EXPECT_LT(begun, 1150);
}

TEST(SemanticAuditTest, EstimatesTheFalseHitRateWithItsInterval) {
  MetricsRegistry metrics;
  SemanticAudit audit("r", 0.9, {.sample = 1}, Hash(), nullptr, 0, &metrics);
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(audit.Begin());
    audit.End(0.95, "same", std::string(i < 5 ? "other" : "same"), true, "");
  }
  const nlohmann::json s = audit.Stats();
  EXPECT_EQ(s["audits"], 100);
  EXPECT_EQ(s["disagreements"], 5);
  EXPECT_DOUBLE_EQ(s["false_hit_rate"].get<double>(), 0.05);
  EXPECT_NEAR(s["interval_95"][0].get<double>(), 0.0215, 5e-4);
  EXPECT_DOUBLE_EQ(audit.threshold(), 0.9) << "auto_threshold is off";
  EXPECT_EQ(Metric(metrics, R"(tachyon:cache_semantic_audits_total{route="r",result="disagree"})"), 5);
  EXPECT_NEAR(Metric(metrics, R"(tachyon:cache_semantic_false_hit_rate{route="r",estimate="upper"})"), 0.1118, 5e-4);
}

TEST(SemanticAuditTest, AutoThresholdRaisesItAboveTheWrongHitsAndNeverLowersIt) {
  MetricsRegistry metrics;
  SemanticAudit audit("r", 0.90, {.sample = 1, .max_false_hit_rate = 0.02, .auto_threshold = true}, Hash(), nullptr,
                      0, &metrics);
  // Hits under 0.93 are wrong a third of the time, hits above never; a hit
  // comes only at or above the threshold of the moment.
  for (int i = 0; i < 120; ++i) {
    const double similarity = i % 2 ? 0.91 + 0.0001 * (i % 40) : 0.95 + 0.0001 * (i % 40);
    if (similarity < audit.threshold()) continue;
    ASSERT_TRUE(audit.Begin());
    const bool wrong = i % 2 && i % 3 == 0;
    audit.End(similarity, "x", std::string(wrong ? "y" : "x"), true, "");
  }
  EXPECT_GT(audit.threshold(), 0.91);
  EXPECT_LE(audit.threshold(), 0.95);
  const double raised = audit.threshold();
  // Right answers from now on: it stays where it is.
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE(audit.Begin());
    audit.End(0.99, "x", std::string("x"), true, "");
  }
  EXPECT_DOUBLE_EQ(audit.threshold(), raised);
  EXPECT_GE(audit.Stats()["raises"].get<int>(), 1);
  EXPECT_NEAR(Metric(metrics, R"(tachyon:cache_semantic_threshold{route="r"})"), raised, 1e-9);
}

}  // namespace
}  // namespace tachyon
