// Calibrating a semantic cache's similarity threshold on labelled pairs: which
// cosine makes a cached answer safe to serve for a new question.
//
// A pair "hits" when the cosine of its two embeddings is at least the threshold.
// precision = paraphrase hits / all hits, recall = paraphrase hits / paraphrases,
// false-hit rate = non-paraphrase hits / non-paraphrases.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "embed/embedder.h"

namespace tachyon {

struct LabeledPair {
  std::string a, b;
  bool paraphrase = false;
};

// Labelled pairs from any of:
//  - JSON lines {"a", "b", "label": 0|1} or {"a", "b", "score": 0..5} (a paraphrase
//    when score >= positive_score);
//  - a JSON array of {"origin", "similar"} (GPTCache's paraphrase set: all positives);
//  - STS Benchmark's TSV (score in the fifth column, paraphrase when >= positive_score).
StatusOr<std::vector<LabeledPair>> ReadLabeledPairs(const std::string& path, double positive_score = 4.0);

// The cosine of each pair's two embeddings (texts embedded in batches).
StatusOr<std::vector<float>> PairCosines(Embedder& embedder, const std::vector<LabeledPair>& pairs);

struct ThresholdQuality {
  double threshold = 0;
  double precision = 0;  // 0 when nothing hits
  double recall = 0;
  double false_hit_rate = 0;
  int64_t hits = 0, paraphrase_hits = 0;
  int64_t paraphrases = 0, others = 0;
};

ThresholdQuality EvaluateThreshold(const std::vector<float>& cosines, const std::vector<LabeledPair>& pairs,
                                   double threshold);

struct Calibration {
  bool reached = false;       // some threshold reaches the target precision
  double best_precision = 0;  // the highest precision of any threshold with min_hits hits
  double best_threshold = 0;  // and its threshold
  ThresholdQuality quality;   // at the calibrated threshold
  double threshold_low = 0, threshold_high = 0;  // bootstrap 95% interval of the threshold
  int bootstrap_runs = 0;
};

// The lowest threshold (one of the pairs' cosines) whose precision reaches
// target_precision with at least min_hits hits, and a bootstrap interval of that
// threshold over `runs` resamples of the pairs (seeded: the same answer each time).
Calibration CalibrateThreshold(const std::vector<float>& cosines, const std::vector<LabeledPair>& pairs,
                               double target_precision, int min_hits = 10, int runs = 1000, uint64_t seed = 1);

}  // namespace tachyon
