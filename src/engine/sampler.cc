#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace tachyon {

TokenId Sampler::Argmax(std::span<const float> logits) {
  int32_t best = 0;
  for (size_t i = 1; i < logits.size(); ++i) {
    if (logits[i] > logits[best]) best = static_cast<int32_t>(i);
  }
  return TokenId(best);
}

void Sampler::ApplyPenalties(std::span<float> logits, std::span<const TokenId> generated) const {
  const SamplingParams& p = params_;
  if (p.repetition_penalty == 1.0f && p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f) return;
  std::unordered_map<int32_t, int> counts;
  for (TokenId id : generated) {
    if (id.value() >= 0 && static_cast<size_t>(id.value()) < logits.size()) counts[id.value()]++;
  }
  for (const auto& [id, count] : counts) {
    float& l = logits[id];
    if (p.repetition_penalty != 1.0f) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    l -= p.presence_penalty + p.frequency_penalty * static_cast<float>(count);
  }
}

TokenId Sampler::Sample(std::span<float> logits, std::span<const TokenId> generated) {
  return Draw(ProcessedDistribution(logits, generated));
}

double Sampler::Total(const Distribution& dist) {
  double total = 0;
  for (const auto& c : dist) total += c.first;
  return total;
}

TokenId Sampler::Draw(const Distribution& dist) {
  if (params_.temperature <= 0.0f) return TokenId(dist[0].second);  // greedy: no draw
  double r = std::uniform_real_distribution<double>(0.0, Total(dist))(rng_);
  for (const auto& c : dist) {
    r -= c.first;
    if (r < 0) return TokenId(c.second);
  }
  return TokenId(dist.back().second);
}

const Sampler::Distribution& Sampler::ProcessedDistribution(std::span<float> logits,
                                                            std::span<const TokenId> generated) {
  const SamplingParams& p = params_;
  for (const auto& [id, bias] : p.logit_bias) {
    if (id.value() >= 0 && static_cast<size_t>(id.value()) < logits.size()) logits[id.value()] += bias;
  }
  ApplyPenalties(logits, generated);
  candidates_.clear();
  auto argmax_only = [&]() -> const Distribution& {
    candidates_.assign(1, {1.0f, Argmax(logits).value()});
    return candidates_;
  };
  if (p.temperature <= 0.0f) return argmax_only();

  // Candidates by descending logit (ties: lower id first), cut to top-k.
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
  }
  if (candidates_.empty()) return argmax_only();
  auto by_logit = [](const auto& a, const auto& b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
  size_t keep = candidates_.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = p.top_k;
    std::partial_sort(candidates_.begin(), candidates_.begin() + keep, candidates_.end(), by_logit);
    candidates_.resize(keep);
  } else {
    std::sort(candidates_.begin(), candidates_.end(), by_logit);
  }
  // Softmax at the temperature.
  const float max = candidates_[0].first;
  double sum = 0;
  for (auto& c : candidates_) {
    c.first = std::exp((c.first - max) / p.temperature);
    sum += c.first;
  }
  for (auto& c : candidates_) c.first = static_cast<float>(c.first / sum);
  // Top-p: the smallest prefix whose probability reaches top_p.
  if (p.top_p < 1.0f) {
    double cumulative = 0;
    size_t n = 0;
    while (n < candidates_.size()) {
      cumulative += candidates_[n++].first;
      if (cumulative >= p.top_p) break;
    }
    candidates_.resize(std::max<size_t>(1, n));
  }
  // Min-p: relative to the most likely token.
  if (p.min_p > 0.0f) {
    const float floor = p.min_p * candidates_[0].first;
    size_t n = 1;
    while (n < candidates_.size() && candidates_[n].first >= floor) ++n;
    candidates_.resize(n);
  }
  return candidates_;
}

}  // namespace tachyon
