#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

#include "kernels/ops.h"

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
  // The total of this sampler's own last distribution is known (a pass saved).
  const double total = &dist == &candidates_ ? total_ : Total(dist);
  double r = std::uniform_real_distribution<double>(0.0, total)(rng_);
  for (const auto& c : dist) {
    r -= c.first;
    if (r < 0) return TokenId(c.second);
  }
  return TokenId(dist.back().second);
}

namespace {

constexpr int kBucketShift = 18;                 // 5 mantissa bits: 32 buckets per octave
constexpr uint32_t kOneBits = 0x3f800000u;       // 1.0f
constexpr uint32_t kNumBuckets = 32 * 40 + 1;    // 40 octaves below 1, then one for the rest

// Descending (logit or weight), the lower id first on ties: a total order, so a
// kept set is the one a full sort would keep.
constexpr auto Before = [](const std::pair<float, int32_t>& a, const std::pair<float, int32_t>& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
};

// A weight in [0, 1] as a key that grows as the weight falls (its float bits
// from 1.0's down), so that key >> shift buckets the weights in order.
uint32_t KeyOf(float p) {
  uint32_t bits;
  std::memcpy(&bits, &p, sizeof bits);
  return kOneBits - std::min(bits, kOneBits);
}

uint32_t BucketOf(float p) { return std::min(kNumBuckets - 1, KeyOf(p) >> kBucketShift); }

}  // namespace

// Top-p in linear time: the weights' float bits order them (all are at most 1),
// so buckets of 1/32 of an octave (bits >> 18) sum their mass in one pass; every
// bucket above the one where the running mass reaches the target is kept whole,
// and only that boundary bucket is sorted and taken token by token.
void Sampler::KeepTopP(double target) {
  mass_.assign(kNumBuckets, 0.0);
  for (const auto& c : candidates_) mass_[BucketOf(c.first)] += c.first;
  double above = 0;
  const uint32_t boundary = BoundaryBucket(target, &above);
  std::erase_if(candidates_, [&](const auto& c) { return BucketOf(c.first) > boundary; });
  TakeBoundary(boundary, above, target);
}

uint32_t Sampler::BoundaryBucket(double target, double* above) const {
  uint32_t boundary = 0;
  while (boundary + 1 < kNumBuckets && (mass_[boundary] == 0 || *above + mass_[boundary] < target)) {
    *above += mass_[boundary++];
  }
  return boundary;
}

void Sampler::TakeBoundary(uint32_t boundary, double above, double target) {
  // Kept whole: the candidates of the buckets above the boundary (in id order);
  // then the boundary's, most likely first, until the mass reaches the target
  // (at least one token in all). A crowded boundary bucket (a flat distribution)
  // is cut again by the next 5 bits of its keys, and so on, before the sort.
  auto boundary_begin = std::partition(candidates_.begin(), candidates_.end(),
                                       [&](const auto& c) { return BucketOf(c.first) < boundary; });
  if (boundary + 1 < kNumBuckets) {  // the last bucket's keys do not share their high bits
    for (int shift = kBucketShift - 5; shift >= 0 && candidates_.end() - boundary_begin > 256; shift -= 5) {
      double sub_mass[32] = {};
      for (auto it = boundary_begin; it != candidates_.end(); ++it) sub_mass[(KeyOf(it->first) >> shift) & 31] += it->first;
      uint32_t sub = 0;
      while (sub + 1 < 32 && (sub_mass[sub] == 0 || above + sub_mass[sub] < target)) above += sub_mass[sub++];
      auto sub_end = std::partition(boundary_begin, candidates_.end(),
                                    [&](const auto& c) { return ((KeyOf(c.first) >> shift) & 31) <= sub; });
      candidates_.erase(sub_end, candidates_.end());
      boundary_begin = std::partition(boundary_begin, candidates_.end(),
                                      [&](const auto& c) { return ((KeyOf(c.first) >> shift) & 31) < sub; });
    }
  }
  std::sort(boundary_begin, candidates_.end(), Before);
  auto end = boundary_begin;
  while (end != candidates_.end() && (end == candidates_.begin() || above < target)) above += (end++)->first;
  candidates_.erase(end, candidates_.end());
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
    total_ = 1.0;
    return candidates_;
  };
  if (p.temperature <= 0.0f) return argmax_only();

  // No sort of the whole vocabulary anywhere below. Top-k keeps a heap of the k
  // (partial_sort) and goes on with those; otherwise the weights of all tokens
  // are computed at once (ExpShifted: the vectorized exp) and only the tokens
  // that can be kept become candidates: min-p is a threshold on the weights, and
  // top-p sums the weights into buckets of their float bits to find the one
  // bucket that needs sorting (BucketOf). A draw needs no order.
  //
  // Weights are exp((l - max) / T), the most likely 1, never divided by their
  // sum (a draw and top-p use the total). Min-p keeps weights of at least min_p
  // times the most likely's, that is min_p; it commutes with top-p (both keep a
  // prefix of the tokens by probability), so both cut from the uncut total.
  const float inv_t = 1.0f / p.temperature, floor = p.min_p;
  const bool top_p = p.top_p < 1.0f;
  double sum = 0;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < logits.size()) {
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i])) candidates_.emplace_back(logits[i], static_cast<int32_t>(i));
    }
    if (candidates_.empty()) return argmax_only();
    if (static_cast<size_t>(p.top_k) < candidates_.size()) {
      // A heap of the k (most candidates fail one comparison with its top).
      std::partial_sort(candidates_.begin(), candidates_.begin() + p.top_k, candidates_.end(), Before);
      candidates_.resize(p.top_k);
    }
    const float max = std::max_element(candidates_.begin(), candidates_.end())->first;
    for (auto& c : candidates_) {
      ExpShifted(&c.first, 1, max, inv_t, &c.first);
      sum += c.first;
    }
    if (floor > 0) std::erase_if(candidates_, [&](const auto& c) { return c.first < floor; });
    if (top_p) KeepTopP(p.top_p * sum);
    total_ = top_p || floor > 0 ? Total(candidates_) : sum;
    return candidates_;
  }
  float max = -INFINITY;
  for (float l : logits) {
    if (std::isfinite(l)) max = std::max(max, l);
  }
  if (max == -INFINITY) return argmax_only();
  weights_.resize(logits.size());
  float* w = weights_.data();
  ExpShifted(logits.data(), static_cast<int64_t>(logits.size()), max, inv_t, w);
  if (top_p) {
    mass_.assign(kNumBuckets, 0.0);
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i])) {
        sum += w[i];
        mass_[BucketOf(w[i])] += w[i];
      }
    }
    const double target = p.top_p * sum;
    double above = 0;
    const uint32_t boundary = BoundaryBucket(target, &above);  // buckets past it are never kept
    for (size_t i = 0; i < logits.size(); ++i) {
      if (std::isfinite(logits[i]) && w[i] >= floor && BucketOf(w[i]) <= boundary) {
        candidates_.emplace_back(w[i], static_cast<int32_t>(i));
      }
    }
    TakeBoundary(boundary, above, target);
    total_ = Total(candidates_);
    return candidates_;
  }
  for (size_t i = 0; i < logits.size(); ++i) {
    if (std::isfinite(logits[i])) {
      sum += w[i];
      if (w[i] >= floor) candidates_.emplace_back(w[i], static_cast<int32_t>(i));
    }
  }
  total_ = floor > 0 ? Total(candidates_) : sum;
  return candidates_;
}

}  // namespace tachyon
