// The semantic cache's second stage: is a cached question the same question as
// a new one, beyond their cosine? Cosine alone cannot tell "a man is playing a
// guitar" from "a woman is playing a guitar", nor "the 3 pm train" from "the
// 5 pm train". The verifier aligns the two questions word by word and scores
// the alignment with a logistic model fitted on labelled pairs; the guards are
// three hard rules (numbers, negation, named entities) for the band of pairs
// whose cosine is just under the route's threshold.
//
// Words: split at characters that are neither letters nor digits (bytes of
// multi-byte UTF-8 characters count as letters), ASCII case-folded for
// comparison; the original case is kept to spot names. Content words are the
// words that are not function words or negations. Two content words align when
// they are equal, equal after dropping one common suffix (s, es, ed, ing, ly),
// or one typo apart (edit distance 1, at least 5 letters, same first two).
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace tachyon {

// What the alignment of two texts found.
struct PairAlignment {
  int content_a = 0, content_b = 0;      // content words of each side
  int unmatched_a = 0, unmatched_b = 0;  // of those, the ones with no partner on the other side
  double inversions = 0;                 // matched words out of order: inverted pairs / all pairs, 0..1
  bool numbers_differ = false;           // the sets of numbers (digits or number words) differ
  bool negation_differs = false;         // one side is negated and the other is not
  bool entities_differ = false;          // the sets of capitalized words not first in the text differ
  int light_words_differ = 0;            // question words, pronouns, prepositions on one side only
};

PairAlignment AlignPair(std::string_view a, std::string_view b);

// The verifier's inputs, from an alignment (no cosine: the cosine gate is the cache's own).
constexpr int kVerifierFeatures = 12;
std::array<double, kVerifierFeatures> VerifierFeatures(const PairAlignment& alignment);
extern const std::array<const char*, kVerifierFeatures> kVerifierFeatureNames;

// Which guard rejects a pair ("numbers", "negation", "entities"), or "" when none does.
std::string_view GuardRejection(const PairAlignment& alignment);

// Logistic regression over the standardized features.
struct VerifierWeights {
  std::array<double, kVerifierFeatures> mean{}, scale{}, weight{};
  double bias = 0;
  std::string source;  // where the weights came from (printed by tachyon cache)
};

// The weights Tachyon ships: fitted on STS Benchmark train (paraphrase = score
// >= 4) by `tachyon cache fit-verifier`; see docs/cache.md.
const VerifierWeights& DefaultVerifierWeights();

// Reads weights written by WriteVerifierWeights (JSON).
StatusOr<VerifierWeights> ReadVerifierWeights(const std::string& path);
Status WriteVerifierWeights(const VerifierWeights& weights, const std::string& path);

// Fits the weights by Newton's method (L2 penalty `l2` on the standardized weights).
VerifierWeights FitVerifier(const std::vector<PairAlignment>& pairs, const std::vector<char>& labels,
                            double l2 = 1.0);

class PairVerifier {
 public:
  explicit PairVerifier(VerifierWeights weights = DefaultVerifierWeights()) : weights_(std::move(weights)) {}
  // The probability that the two texts ask the same thing, 0..1.
  double Score(const PairAlignment& alignment) const;
  double Score(std::string_view a, std::string_view b) const { return Score(AlignPair(a, b)); }
  const VerifierWeights& weights() const { return weights_; }

 private:
  VerifierWeights weights_;
};

// A semantic-cache decision on one candidate.
struct HitOptions {
  double threshold = 0.93;    // cosine a hit needs
  double verifier_min = 0;    // verifier score a hit needs (0: no verifier)
  double band = 0;            // cosines in [threshold - band, threshold) may hit when the guards pass
  bool guards_on_hits = false;  // the guards also check candidates at or above the threshold
};

struct HitDecision {
  bool hit = false;
  // Why not: "similarity", "verifier", or the guard that rejected ("numbers", "negation", "entities").
  std::string_view rejected_by;
  double verifier_score = -1;  // -1: not scored
};

HitDecision DecideHit(double cosine, std::string_view cached, std::string_view asked, const PairVerifier* verifier,
                      const HitOptions& options);

}  // namespace tachyon
