// Sampler: picks the next token from a row of logits.
//
// Order of operations: logit bias; repetition penalty (CTRL-style: positive
// logits divided, negative multiplied) and OpenAI presence / frequency
// penalties over the tokens generated so far; then greedy argmax when
// temperature is 0, else temperature, top-k, softmax, top-p, min-p and a draw
// from a seeded generator, with no sort of the whole vocabulary (a heap of
// the k, probability buckets for top-p, a threshold pass for min-p). The same seed and
// inputs give the same tokens within a version (the draw's order over the
// candidates changed in 2026-12: a seed may now map to another token).
// Pure: no I/O, no clock, no global state.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include "base/strong_id.h"

namespace tachyon {

struct SamplingParams {
  float temperature = 1.0f;        // 0: greedy
  int top_k = 0;                   // 0: all tokens
  float top_p = 1.0f;              // nucleus; 1: off
  float min_p = 0.0f;              // drop tokens below min_p * p(most likely); 0: off
  float repetition_penalty = 1.0f; // 1: off
  float presence_penalty = 0.0f;   // subtracted once from every token already generated
  float frequency_penalty = 0.0f;  // subtracted per occurrence
  uint64_t seed = 0;
  std::vector<std::pair<TokenId, float>> logit_bias;  // added to the logits first
};

class Sampler {
 public:
  explicit Sampler(SamplingParams params) : params_(std::move(params)), rng_(params_.seed) {}

  const SamplingParams& params() const { return params_; }

  // logits [n_vocab] (modified in place); generated: tokens produced so far.
  // The same as Draw(Distribution(logits, generated)).
  TokenId Sample(std::span<float> logits, std::span<const TokenId> generated);

  // The distribution Sample draws from, after every option: (weight, id) pairs
  // in an order that is a function of the inputs (token id order for a
  // full-vocabulary draw, most likely first after top-k; it fixes which
  // token a random number maps to); weights need not sum to 1 (`Total`).
  // Greedy: the argmax alone. Valid until the next call on this sampler.
  using Distribution = std::vector<std::pair<float, int32_t>>;
  const Distribution& ProcessedDistribution(std::span<float> logits, std::span<const TokenId> generated);
  static double Total(const Distribution& dist);
  // A token drawn from `dist` with the sampler's generator.
  TokenId Draw(const Distribution& dist);
  // A uniform number in [0, 1) from the sampler's generator.
  double Uniform() { return std::uniform_real_distribution<double>(0.0, 1.0)(rng_); }

  // The index of the largest logit, lowest on ties.
  static TokenId Argmax(std::span<const float> logits);

 private:
  void ApplyPenalties(std::span<float> logits, std::span<const TokenId> generated) const;
  // Cuts candidates_ (weights of at most 1) to the most likely ones whose weights
  // sum to `target` (top_p times the total), without sorting them all.
  void KeepTopP(double target);
  // The first non-empty bucket of mass_ at which *above (the mass of the buckets
  // before it, added up here) plus its own reaches `target`; the last bucket if none.
  uint32_t BoundaryBucket(double target, double* above) const;
  // The end of top-p: candidates_ holds buckets 0..boundary (weights `above` in the
  // buckets before it); keeps those and the boundary's most likely until `target`.
  void TakeBoundary(uint32_t boundary, double above, double target);

  SamplingParams params_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> candidates_;  // scratch: (logit or prob, id)
  std::vector<double> mass_;                           // scratch: KeepTopP's buckets
  std::vector<float> weights_;                         // scratch: [n_vocab] softmax weights
  double total_ = 0;                                   // Total(candidates_) after ProcessedDistribution
};

}  // namespace tachyon
