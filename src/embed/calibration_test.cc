#include "embed/calibration.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace tachyon {
namespace {

namespace fs = std::filesystem;

std::vector<LabeledPair> Labels(const std::vector<int>& labels) {
  std::vector<LabeledPair> pairs;
  for (int l : labels) pairs.push_back({"a", "b", l == 1});
  return pairs;
}

// Cosines from high to low with labels: the precision of "cosine >= t" at each t.
TEST(CalibrationTest, LowestThresholdThatReachesThePrecision) {
  const std::vector<float> cosines = {0.99f, 0.98f, 0.97f, 0.96f, 0.95f, 0.90f, 0.85f, 0.80f, 0.70f, 0.60f};
  const std::vector<LabeledPair> pairs = Labels({1, 1, 1, 0, 1, 1, 0, 1, 0, 0});
  // Precision at 0.95: 4/5; at 0.90: 5/6; at 0.80: 6/8; at 0.97: 3/3.
  const Calibration c = CalibrateThreshold(cosines, pairs, 0.8, /*min_hits=*/1, /*runs=*/200);
  ASSERT_TRUE(c.reached);
  EXPECT_FLOAT_EQ(c.quality.threshold, 0.90f);
  EXPECT_NEAR(c.quality.precision, 5.0 / 6.0, 1e-12);
  EXPECT_NEAR(c.quality.recall, 5.0 / 6.0, 1e-12);   // 5 of the 6 paraphrases
  EXPECT_NEAR(c.quality.false_hit_rate, 1.0 / 4.0, 1e-12);  // 1 of the 4 others
  EXPECT_EQ(c.quality.hits, 6);
  EXPECT_LE(c.threshold_low, c.threshold_high);
  EXPECT_GT(c.bootstrap_runs, 150);
  // Exact precision 1 is reached only at the top three.
  EXPECT_FLOAT_EQ(CalibrateThreshold(cosines, pairs, 1.0, 1, 0).quality.threshold, 0.97f);
  // min_hits: a single top pair cannot calibrate on its own.
  const Calibration unreached = CalibrateThreshold({0.9f, 0.1f}, Labels({1, 0}), 0.9, /*min_hits=*/2, 0);
  EXPECT_FALSE(unreached.reached);
  EXPECT_NEAR(unreached.best_precision, 0.5, 1e-12);  // both pairs: 1 of 2
  EXPECT_FLOAT_EQ(unreached.best_threshold, 0.1f);
  // Ties: a threshold takes every pair at that cosine.
  const ThresholdQuality tie = EvaluateThreshold({0.5f, 0.5f, 0.1f}, Labels({1, 0, 1}), 0.5);
  EXPECT_EQ(tie.hits, 2);
  EXPECT_NEAR(tie.precision, 0.5, 1e-12);
}

TEST(CalibrationTest, ReadsEveryPairFormat) {
  const fs::path dir = fs::temp_directory_path() / ("tachyon_pairs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto write = [&](const std::string& name, const std::string& text) {
    std::ofstream((dir / name).string()) << text;
    return (dir / name).string();
  };
  StatusOr<std::vector<LabeledPair>> jsonl = ReadLabeledPairs(
      write("p.jsonl", "{\"a\":\"x\",\"b\":\"y\",\"label\":1}\n\n{\"a\":\"x\",\"b\":\"z\",\"score\":3.5}\n"), 4.0);
  ASSERT_TRUE(jsonl.ok()) << jsonl.status().message();
  ASSERT_EQ(jsonl->size(), 2u);
  EXPECT_TRUE((*jsonl)[0].paraphrase);
  EXPECT_FALSE((*jsonl)[1].paraphrase);
  EXPECT_TRUE((*ReadLabeledPairs(write("p2.jsonl", "{\"a\":\"x\",\"b\":\"z\",\"score\":3.5}\n"), 3.0))[0].paraphrase);
  StatusOr<std::vector<LabeledPair>> gptcache =
      ReadLabeledPairs(write("g.json", "[{\"origin\":\"q\",\"similar\":\"r\"}]"));
  ASSERT_TRUE(gptcache.ok());
  EXPECT_EQ((*gptcache)[0].a, "q");
  EXPECT_TRUE((*gptcache)[0].paraphrase);
  StatusOr<std::vector<LabeledPair>> tsv = ReadLabeledPairs(write("s.tsv", "g\tf\t2012\t1\t4.2\tone\ttwo\n"));
  ASSERT_TRUE(tsv.ok());
  EXPECT_EQ((*tsv)[0].b, "two");
  EXPECT_TRUE((*tsv)[0].paraphrase);
  StatusOr<std::vector<LabeledPair>> bad = ReadLabeledPairs(write("bad.jsonl", "{\"a\":\"x\",\"b\":\"y\"}\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("bad.jsonl:1: no numeric"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(ReadLabeledPairs((dir / "missing").string()).ok());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace tachyon
