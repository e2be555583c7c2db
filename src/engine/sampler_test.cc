#include "engine/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>

namespace tachyon {
namespace {

std::vector<float> Logits() { return {1.0f, 3.0f, 2.0f, 3.0f, -1.0f}; }

TEST(SamplerTest, GreedyTakesLowestIdOfTheMaximum) {
  Sampler s({.temperature = 0.0f});
  std::vector<float> l = Logits();
  EXPECT_EQ(s.Sample(l, {}).value(), 1);
}

TEST(SamplerTest, LogitBiasAndPenalties) {
  std::vector<float> l = Logits();
  Sampler bias({.temperature = 0.0f, .logit_bias = {{TokenId(4), 10.0f}}});
  EXPECT_EQ(bias.Sample(l, {}).value(), 4);

  // Token 1 was generated twice: frequency 0.6 x 2 + presence 0.1 puts it below token 3.
  l = Logits();
  Sampler penalties({.temperature = 0.0f, .presence_penalty = 0.1f, .frequency_penalty = 0.6f});
  std::vector<TokenId> generated = {TokenId(1), TokenId(1)};
  EXPECT_EQ(penalties.Sample(l, generated).value(), 3);
  EXPECT_FLOAT_EQ(l[1], 3.0f - 0.1f - 1.2f);

  l = Logits();
  Sampler repetition({.temperature = 0.0f, .repetition_penalty = 2.0f});
  std::vector<TokenId> seen = {TokenId(1), TokenId(4)};
  repetition.Sample(l, seen);
  EXPECT_FLOAT_EQ(l[1], 1.5f) << "positive logits are divided";
  EXPECT_FLOAT_EQ(l[4], -2.0f) << "negative logits are multiplied";
}

TEST(SamplerTest, SameSeedSameTokensAndTheDistributionIsRight) {
  auto draw = [](uint64_t seed) {
    Sampler s({.temperature = 1.0f, .seed = seed});
    std::vector<int32_t> out;
    for (int i = 0; i < 200; ++i) {
      std::vector<float> l = Logits();
      out.push_back(s.Sample(l, {}).value());
    }
    return out;
  };
  EXPECT_EQ(draw(7), draw(7));
  EXPECT_NE(draw(7), draw(8));
  // Frequencies follow softmax(logits): p(1) = p(3) = e^3 / Z ~ 0.41, p(4) ~ 0.0075.
  Sampler s({.temperature = 1.0f, .seed = 1});
  std::map<int32_t, int> counts;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = Logits();
    counts[s.Sample(l, {}).value()]++;
  }
  double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0) + std::exp(-1.0);
  EXPECT_NEAR(counts[1] / double(n), std::exp(3.0) / z, 0.015);
  EXPECT_NEAR(counts[2] / double(n), std::exp(2.0) / z, 0.015);
  EXPECT_NEAR(counts[0] / double(n), std::exp(1.0) / z, 0.01);
}

TEST(SamplerTest, TopKTopPMinPRestrictTheCandidates) {
  for (uint64_t seed = 0; seed < 200; ++seed) {
    std::vector<float> l = Logits();
    Sampler top_k({.temperature = 1.0f, .top_k = 2, .seed = seed});
    int32_t t = top_k.Sample(l, {}).value();
    EXPECT_TRUE(t == 1 || t == 3) << "top-2 keeps the two 3.0 logits";

    l = Logits();
    Sampler top_p({.temperature = 1.0f, .top_p = 0.5f, .seed = seed});
    t = top_p.Sample(l, {}).value();
    EXPECT_TRUE(t == 1 || t == 3) << "the first two reach 0.83 >= 0.5";

    l = Logits();
    Sampler min_p({.temperature = 1.0f, .min_p = 0.5f, .seed = seed});
    t = min_p.Sample(l, {}).value();
    EXPECT_TRUE(t == 1 || t == 3) << "p(2)/p(1) = e^-1 < 0.5";
  }
  std::vector<float> l = Logits();
  Sampler cold({.temperature = 1e-3f, .seed = 3});
  EXPECT_EQ(cold.Sample(l, {}).value() % 2, 1) << "near-zero temperature is near-greedy";
}

// The selections (top-k by a heap, top-p by probability buckets, min-p by a
// threshold) keep exactly the tokens, with the same probabilities, that the
// definition by a full sort keeps: on a 50,000-token vocabulary with ties,
// masked (-inf) tokens and top-p sets from one token to thousands.
TEST(SamplerTest, SelectionsKeepWhatAFullSortWouldKeep) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 24; ++trial) {
    std::vector<float> logits(50000);
    for (float& x : logits) x = std::round(normal(rng) * 8) / 8;  // coarse: many ties
    for (int i = 0; i < 500; ++i) logits[rng() % logits.size()] = -INFINITY;
    const SamplingParams params{.temperature = trial % 3 == 0 ? 0.5f : 1.3f,
                                .top_k = trial % 4 == 1 ? 1000 : 0,
                                .top_p = trial % 2 == 0 ? 0.999f - 0.1f * (trial % 5) : 1.0f,
                                .min_p = trial % 6 == 5 ? 0.02f : 0.0f};
    // The definition: sort everything (descending, lower id first), cut to k, softmax,
    // the shortest prefix reaching top_p, then min-p against the first.
    // The weights are the sampler's own (its exp, without cuts), so only the
    // selections are under test.
    std::vector<float> l = logits;
    Sampler uncut({.temperature = params.temperature});
    std::vector<std::pair<float, int32_t>> ref = uncut.ProcessedDistribution(l, {});
    auto before = [](auto a, auto b) { return a.first > b.first || (a.first == b.first && a.second < b.second); };
    std::sort(ref.begin(), ref.end(), [&](auto a, auto b) {
      return logits[a.second] > logits[b.second] || (logits[a.second] == logits[b.second] && a.second < b.second);
    });
    if (params.top_k > 0) ref.resize(params.top_k);
    std::sort(ref.begin(), ref.end(), before);
    double sum = 0;
    for (const auto& c : ref) sum += c.first;
    for (auto& c : ref) c.first = static_cast<float>(c.first / sum);
    if (params.top_p < 1.0f) {
      double cumulative = 0;
      size_t n = 0;
      while (n < ref.size()) {
        cumulative += ref[n++].first;
        if (cumulative >= params.top_p) break;
      }
      ref.resize(n);
    }
    if (params.min_p > 0) {
      const float floor = params.min_p * ref[0].first;
      std::erase_if(ref, [&](auto c) { return c.first < floor; });
    }
    Sampler sampler(params);
    l = logits;
    Sampler::Distribution got = sampler.ProcessedDistribution(l, {});
    // Weights need not sum to 1: both sides as shares of what they keep.
    const double got_total = Sampler::Total(got);
    for (auto& c : got) c.first = static_cast<float>(c.first / got_total);
    double ref_total = 0;
    for (const auto& c : ref) ref_total += c.first;
    for (auto& c : ref) c.first = static_cast<float>(c.first / ref_total);
    auto by_id = [](auto a, auto b) { return a.second < b.second; };
    std::sort(ref.begin(), ref.end(), by_id);
    std::sort(got.begin(), got.end(), by_id);
    ASSERT_EQ(got.size(), ref.size()) << "trial " << trial;
    for (size_t i = 0; i < ref.size(); ++i) {
      ASSERT_EQ(got[i].second, ref[i].second) << "trial " << trial;
      ASSERT_NEAR(got[i].first, ref[i].first, 1e-6 * ref[i].first + 1e-12) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace tachyon
