#include "embed/calibration.h"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>
#include <sstream>

#include "embed/sts_eval.h"

namespace tachyon {
namespace {

// The lowest cosine among those at which precision >= target (with enough hits),
// scanning from the highest cosine down; `order` sorts the pairs by cosine, highest first.
bool LowestThreshold(const std::vector<float>& cosines, const std::vector<char>& labels,
                     const std::vector<size_t>& order, double target, int min_hits, double* threshold,
                     double* best_precision = nullptr, double* best_threshold = nullptr) {
  int64_t hits = 0, good = 0;
  bool found = false;
  for (size_t i = 0; i < order.size(); ++i) {
    ++hits;
    good += labels[order[i]];
    // Only at the last of equal cosines: a threshold takes all pairs at that cosine.
    if (i + 1 < order.size() && cosines[order[i + 1]] == cosines[order[i]]) continue;
    const double precision = static_cast<double>(good) / static_cast<double>(hits);
    if (hits >= min_hits && best_precision != nullptr && precision > *best_precision) {
      *best_precision = precision;
      *best_threshold = cosines[order[i]];
    }
    if (hits >= min_hits && precision >= target) {
      *threshold = cosines[order[i]];
      found = true;
    }
  }
  return found;
}

std::vector<size_t> ByCosineDescending(const std::vector<float>& cosines, const std::vector<size_t>& rows) {
  std::vector<size_t> order = rows;
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return cosines[x] > cosines[y]; });
  return order;
}

}  // namespace

StatusOr<std::vector<LabeledPair>> ReadLabeledPairs(const std::string& path, double positive_score) {
  std::ifstream in(path);
  if (!in) return NotFoundError(path + ": cannot open");
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first == std::string::npos) return InvalidArgumentError(path + ": no pairs");
  std::vector<LabeledPair> pairs;
  if (text[first] == '[') {  // GPTCache: [{"origin", "similar"}]
    nlohmann::json all = nlohmann::json::parse(text, nullptr, false);
    if (all.is_discarded() || !all.is_array()) return InvalidArgumentError(path + ": not a JSON array");
    for (size_t i = 0; i < all.size(); ++i) {
      const nlohmann::json& p = all[i];
      if (!p.is_object() || !p.contains("origin") || !p.contains("similar") || !p["origin"].is_string() ||
          !p["similar"].is_string()) {
        return InvalidArgumentError(path + ": item " + std::to_string(i) + " is not {\"origin\", \"similar\"}");
      }
      pairs.push_back({p["origin"], p["similar"], true});
    }
  } else if (text[first] == '{') {  // JSON lines
    std::istringstream lines(text);
    int line_number = 0;
    for (std::string line; std::getline(lines, line);) {
      ++line_number;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const std::string where = path + ":" + std::to_string(line_number);
      nlohmann::json p = nlohmann::json::parse(line, nullptr, false);
      if (p.is_discarded() || !p.is_object() || !p.contains("a") || !p.contains("b") || !p["a"].is_string() ||
          !p["b"].is_string()) {
        return InvalidArgumentError(where + ": expected {\"a\": ..., \"b\": ..., \"label\": 0|1 or \"score\": N}");
      }
      LabeledPair pair{p["a"], p["b"], false};
      if (p.contains("label") && p["label"].is_number()) {
        pair.paraphrase = p["label"].get<double>() >= 0.5;
      } else if (p.contains("score") && p["score"].is_number()) {
        pair.paraphrase = p["score"].get<double>() >= positive_score;
      } else {
        return InvalidArgumentError(where + ": no numeric \"label\" or \"score\"");
      }
      pairs.push_back(std::move(pair));
    }
  } else {  // STS Benchmark TSV
    ASSIGN_OR_RETURN(std::vector<StsPair> sts, ReadStsPairs(path));
    for (const StsPair& p : sts) pairs.push_back({p.a, p.b, p.score >= positive_score});
  }
  if (pairs.empty()) return InvalidArgumentError(path + ": no pairs");
  return pairs;
}

StatusOr<std::vector<float>> PairCosines(Embedder& embedder, const std::vector<LabeledPair>& pairs) {
  constexpr size_t kBatch = 64;
  std::vector<float> cosines;
  cosines.reserve(pairs.size());
  for (size_t start = 0; start < pairs.size(); start += kBatch) {
    const size_t end = std::min(pairs.size(), start + kBatch);
    std::vector<std::string> texts;
    for (size_t i = start; i < end; ++i) {
      texts.push_back(pairs[i].a);
      texts.push_back(pairs[i].b);
    }
    ASSIGN_OR_RETURN(std::vector<float> v, embedder.Embed(texts));
    const int dim = embedder.dimension();
    for (size_t k = 0; k < texts.size(); k += 2) cosines.push_back(Dot(&v[k * dim], &v[(k + 1) * dim], dim));
  }
  return cosines;
}

ThresholdQuality EvaluateThreshold(const std::vector<float>& cosines, const std::vector<LabeledPair>& pairs,
                                   double threshold) {
  ThresholdQuality q{.threshold = threshold};
  for (size_t i = 0; i < pairs.size(); ++i) {
    const bool hit = cosines[i] >= threshold;
    if (pairs[i].paraphrase) {
      ++q.paraphrases;
      q.paraphrase_hits += hit;
    } else {
      ++q.others;
    }
    q.hits += hit;
  }
  const int64_t false_hits = q.hits - q.paraphrase_hits;
  q.precision = q.hits > 0 ? static_cast<double>(q.paraphrase_hits) / static_cast<double>(q.hits) : 0.0;
  q.recall = q.paraphrases > 0 ? static_cast<double>(q.paraphrase_hits) / static_cast<double>(q.paraphrases) : 0.0;
  q.false_hit_rate = q.others > 0 ? static_cast<double>(false_hits) / static_cast<double>(q.others) : 0.0;
  return q;
}

Calibration CalibrateThreshold(const std::vector<float>& cosines, const std::vector<LabeledPair>& pairs,
                               double target_precision, int min_hits, int runs, uint64_t seed) {
  std::vector<char> labels(pairs.size());
  for (size_t i = 0; i < pairs.size(); ++i) labels[i] = pairs[i].paraphrase;
  std::vector<size_t> all(pairs.size());
  std::iota(all.begin(), all.end(), 0);
  Calibration c;
  double threshold = 0;
  c.reached = LowestThreshold(cosines, labels, ByCosineDescending(cosines, all), target_precision, min_hits, &threshold,
                              &c.best_precision, &c.best_threshold);
  if (!c.reached) return c;
  c.quality = EvaluateThreshold(cosines, pairs, threshold);
  // Bootstrap: the calibration redone on resamples of the pairs.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, pairs.size() - 1);
  std::vector<double> thresholds;
  std::vector<size_t> sample(pairs.size());
  for (int run = 0; run < runs; ++run) {
    for (size_t& s : sample) s = pick(rng);
    double t = 0;
    if (LowestThreshold(cosines, labels, ByCosineDescending(cosines, sample), target_precision, min_hits, &t)) {
      thresholds.push_back(t);
    }
  }
  c.bootstrap_runs = static_cast<int>(thresholds.size());
  if (!thresholds.empty()) {
    std::sort(thresholds.begin(), thresholds.end());
    c.threshold_low = thresholds[static_cast<size_t>(0.025 * (thresholds.size() - 1))];
    c.threshold_high = thresholds[static_cast<size_t>(0.975 * (thresholds.size() - 1))];
  }
  return c;
}

}  // namespace tachyon
