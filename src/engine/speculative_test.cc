// Speculative decoding's parts: the n-gram proposer, the exact verification
// rule (greedy and sampled: a chi-square test against the target's
// distribution, with a deliberately wrong rule shown to fail it) and the
// control of how many tokens a sequence proposes.
#include "engine/speculative.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <map>

#include "engine/proposer.h"

namespace tachyon {
namespace {

std::vector<TokenId> Ids(std::initializer_list<int> v) {
  std::vector<TokenId> out;
  for (int x : v) out.push_back(TokenId(x));
  return out;
}

std::vector<TokenId> Propose(const NgramProposer& p, std::initializer_list<int> tokens, int k) {
  std::vector<TokenId> t = Ids(tokens), draft;
  p.ProposeOne(t, k, &draft);
  return draft;
}

TEST(NgramProposerTest, ProposesWhatFollowedTheLongestMostRecentMatch) {
  NgramProposer p(1, 3);
  // Suffix "2 3" occurred at 1..2 and 5..6: the most recent one's continuation.
  EXPECT_EQ(Propose(p, {1, 2, 3, 4, 9, 2, 3, 7, 8, 2, 3}, 3), Ids({7, 8, 2}));
  EXPECT_EQ(Propose(p, {1, 2, 3, 4, 9, 2, 3, 7, 8, 2, 3}, 5), Ids({7, 8, 2, 3, 7})) << "then the loop it makes";
  // The 3-gram "5 2 3" beats the more recent 2-gram "2 3".
  EXPECT_EQ(Propose(p, {5, 2, 3, 4, 4, 6, 2, 3, 8, 5, 2, 3}, 2), Ids({4, 4}));
  // A loop: the continuation runs into the suffix and on into the proposal.
  EXPECT_EQ(Propose(p, {1, 2, 1, 2}, 4), Ids({1, 2, 1, 2}));
  EXPECT_EQ(Propose(p, {7, 7, 7}, 5), Ids({7, 7, 7, 7, 7}));
  EXPECT_EQ(Propose(p, {4, 1, 2, 3, 1, 2, 3, 1, 2}, 5), Ids({3, 1, 2, 3, 1}));
  // Nothing matches, nothing is proposed; k caps it.
  EXPECT_TRUE(Propose(p, {1, 2, 3, 4}, 4).empty());
  EXPECT_EQ(Propose(p, {1, 2, 3, 4, 5, 1}, 2), Ids({2, 3}));
  EXPECT_TRUE(Propose(p, {1, 2, 1}, 0).empty());
  NgramProposer two(2, 3);  // a single repeated token is not enough
  EXPECT_TRUE(Propose(two, {1, 2, 3, 4, 5, 1}, 2).empty());
}

std::vector<float> Rows(std::initializer_list<std::vector<float>> rows) {
  std::vector<float> out;
  for (const auto& r : rows) out.insert(out.end(), r.begin(), r.end());
  return out;
}

TEST(VerifyDraftTest, GreedyAcceptsWhileTheArgmaxAgrees) {
  Sampler greedy({.temperature = 0.0f});
  const auto rows = Rows({{0, 5, 1, 0}, {3, 0, 1, 0}, {0, 0, 1, 4}, {2, 0, 0, 0}});
  int64_t accepted = -1;
  std::vector<float> r = rows;
  EXPECT_EQ(VerifyDraft(greedy, r, 4, {}, Ids({1, 0, 2}), &accepted), Ids({1, 0, 3}));
  EXPECT_EQ(accepted, 2);
  r = rows;
  EXPECT_EQ(VerifyDraft(greedy, r, 4, {}, Ids({1, 0, 3}), &accepted), Ids({1, 0, 3, 0}));
  EXPECT_EQ(accepted, 3);
  r = rows;
  EXPECT_EQ(VerifyDraft(greedy, r, 4, {}, Ids({2, 0, 3}), &accepted), Ids({1}));
  EXPECT_EQ(accepted, 0);
  // Penalties see the accepted tokens: token 1 accepted, then penalised in row 1.
  Sampler penalised({.temperature = 0.0f, .presence_penalty = 10.0f});
  std::vector<float> p = Rows({{0, 5, 1, 0}, {0, 6, 1, 0}});
  EXPECT_EQ(VerifyDraft(penalised, p, 4, {}, Ids({1}), &accepted), Ids({1, 2}));
}

// Sampled tokens of one verification: (first emitted token, second emitted
// token or -1) for `trials` draws.
using Rule = std::function<std::vector<TokenId>(Sampler&, std::span<float>, std::span<const TokenId>)>;

std::map<std::pair<int, int>, int> Draws(const Rule& rule, const SamplingParams& params,
                                         const std::vector<float>& rows, const std::vector<TokenId>& draft,
                                         int trials) {
  std::map<std::pair<int, int>, int> counts;
  Sampler sampler(params);
  for (int t = 0; t < trials; ++t) {
    std::vector<float> r = rows;
    std::vector<TokenId> out = rule(sampler, r, draft);
    counts[{out[0].value(), out.size() > 1 ? out[1].value() : -1}]++;
  }
  return counts;
}

// Pearson's chi-square of observed counts against expected probabilities
// (categories with expected count < 5 merged into one).
double ChiSquare(const std::map<int, int>& observed, const std::map<int, double>& expected, int n, int* dof) {
  double chi = 0, small_expected = 0, small_observed = 0;
  int categories = 0;
  for (const auto& [token, p] : expected) {
    const double e = p * n;
    const int o = observed.count(token) ? observed.at(token) : 0;
    if (e < 5) {
      small_expected += e;
      small_observed += o;
      continue;
    }
    chi += (o - e) * (o - e) / e;
    ++categories;
  }
  for (const auto& [token, o] : observed) {
    if (!expected.count(token)) small_observed += o;  // a token the target never gives
  }
  if (small_expected > 0 || small_observed > 0) {
    chi += (small_observed - small_expected) * (small_observed - small_expected) / std::max(small_expected, 1e-9);
    ++categories;
  }
  *dof = categories - 1;
  return chi;
}

// Critical values of chi-square at p = 0.001 by degrees of freedom.
double Critical(int dof) {
  static const double table[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59};
  return table[std::min(dof, 10)];
}

std::map<int, double> Expected(const SamplingParams& params, std::vector<float> row,
                               const std::vector<TokenId>& generated) {
  Sampler s(params);
  const Sampler::Distribution& dist = s.ProcessedDistribution(row, generated);
  const double total = Sampler::Total(dist);
  std::map<int, double> out;
  for (const auto& [w, id] : dist) out[id] = w / total;
  return out;
}

struct ChiResult {
  double first = 0, second = 0;
  int first_dof = 0, second_dof = 0;
  // Zero degrees of freedom: one category (a proposal never accepted has no second token).
  bool ok() const {
    return (first_dof <= 0 || first < Critical(first_dof)) && (second_dof <= 0 || second < Critical(second_dof));
  }
};

// The first emitted token must follow the target's distribution at row 0
// whatever was proposed; the second (emitted only after the proposal was
// accepted) must follow row 1's, given the accepted token.
ChiResult Check(const Rule& rule, const SamplingParams& params, const std::vector<float>& row0,
                const std::vector<float>& row1, int proposed) {
  constexpr int kTrials = 20000;
  const auto counts = Draws(rule, params, Rows({row0, row1}), Ids({proposed}), kTrials);
  std::map<int, int> first, second;
  int accepted = 0;
  for (const auto& [pair, n] : counts) {
    first[pair.first] += n;
    if (pair.second >= 0) {
      second[pair.second] += n;
      accepted += n;
    }
  }
  ChiResult r;
  r.first = ChiSquare(first, Expected(params, row0, {}), kTrials, &r.first_dof);
  if (accepted > 0) r.second = ChiSquare(second, Expected(params, row1, Ids({proposed})), accepted, &r.second_dof);
  return r;
}

const Rule kRule = [](Sampler& s, std::span<float> rows, std::span<const TokenId> draft) {
  int64_t accepted = 0;
  return VerifyDraft(s, rows, static_cast<int64_t>(rows.size() / (draft.size() + 1)), {}, draft, &accepted);
};

TEST(VerifyDraftTest, SampledTokensFollowTheTargetsDistribution) {
  const std::vector<float> row0 = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -3.0f};
  const std::vector<float> row1 = {0.0f, 1.0f, 2.0f, 0.5f, 1.5f, -1.0f, 0.2f};
  const std::vector<SamplingParams> settings = {
      {.temperature = 1.0f},
      {.temperature = 0.7f, .top_k = 5, .top_p = 0.9f},
      {.temperature = 1.3f, .min_p = 0.1f, .presence_penalty = 1.0f, .seed = 7},
      {.temperature = 1.0f, .repetition_penalty = 1.5f, .seed = 3,
       .logit_bias = {{TokenId(5), 2.0f}}},
  };
  for (size_t i = 0; i < settings.size(); ++i) {
    for (int proposed : {0, 2, 4, 6}) {  // the likeliest, middling, unlikely, and (mostly) cut tokens
      const ChiResult r = Check(kRule, settings[i], row0, row1, proposed);
      EXPECT_TRUE(r.ok()) << "setting " << i << ", proposed " << proposed << ": chi-square " << r.first << " ("
                          << r.first_dof << " dof), then " << r.second << " (" << r.second_dof << " dof)";
    }
  }
}

// The harness catches wrong rules: drawing the correction from p with the
// rejected token left in, or accepting with probability sqrt(p).
TEST(VerifyDraftTest, TheChiSquareCheckCatchesWrongRules) {
  const Rule keeps_rejected = [](Sampler& s, std::span<float> rows, std::span<const TokenId> draft) {
    const int64_t n_vocab = static_cast<int64_t>(rows.size() / 2);
    const Sampler::Distribution& dist = s.ProcessedDistribution(rows.subspan(0, n_vocab), {});
    if (s.Uniform() < ProbabilityOf(dist, draft[0].value())) {
      std::vector<TokenId> out = {draft[0]};
      out.push_back(s.Draw(s.ProcessedDistribution(rows.subspan(n_vocab), draft)));
      return out;
    }
    return std::vector<TokenId>{s.Draw(dist)};
  };
  const Rule too_eager = [](Sampler& s, std::span<float> rows, std::span<const TokenId> draft) {
    const int64_t n_vocab = static_cast<int64_t>(rows.size() / 2);
    const Sampler::Distribution& dist = s.ProcessedDistribution(rows.subspan(0, n_vocab), {});
    const double p = ProbabilityOf(dist, draft[0].value());
    if (s.Uniform() < std::sqrt(p)) {
      std::vector<TokenId> out = {draft[0]};
      out.push_back(s.Draw(s.ProcessedDistribution(rows.subspan(n_vocab), draft)));
      return out;
    }
    return std::vector<TokenId>{DrawExcluding(dist, draft[0].value(), s.Uniform())};
  };
  const std::vector<float> row0 = {2.0f, 1.5f, 1.0f, 0.5f, 0.0f, -0.5f, -3.0f};
  const std::vector<float> row1 = {0.0f, 1.0f, 2.0f, 0.5f, 1.5f, -1.0f, 0.2f};
  EXPECT_FALSE(Check(keeps_rejected, {.temperature = 1.0f}, row0, row1, 1).ok());
  EXPECT_FALSE(Check(too_eager, {.temperature = 1.0f}, row0, row1, 3).ok());
  EXPECT_TRUE(Check(kRule, {.temperature = 1.0f}, row0, row1, 1).ok());
}

TEST(SpeculationControlTest, GrowsShrinksAndPauses) {
  SpeculationControl fixed(3, /*adaptive=*/false);
  fixed.Record(3, 0);
  EXPECT_EQ(fixed.Budget(), 3);
  SpeculationControl c(4, /*adaptive=*/true);
  EXPECT_EQ(c.Budget(), 4);
  c.Record(4, 0);
  EXPECT_EQ(c.Budget(), 2);
  c.Record(2, 2);
  EXPECT_EQ(c.Budget(), 3);
  // Acceptance that stays low pauses proposing, then it tries again.
  for (int i = 0; i < 4; ++i) c.Record(1, 0);
  auto pause = [&] {
    int steps = 0;
    while (c.Budget() == 0 && steps < 10000) ++steps;
    return steps;
  };
  EXPECT_EQ(pause(), SpeculationControl::kPauseSteps);
  EXPECT_GT(c.Budget(), 0) << "proposing resumes after a pause";
  // Failed tries pause twice as long each time, up to the cap.
  int last = SpeculationControl::kPauseSteps;
  for (int round = 0; round < 8; ++round) {
    while (c.Budget() > 0) c.Record(1, 0);
    const int steps = pause() + 1;  // the Budget() call that ended the loop above was a paused step
    EXPECT_EQ(steps, std::min(2 * last, SpeculationControl::kMaxPauseSteps)) << "round " << round;
    last = steps;
  }
  // A free proposer's pauses do not grow.
  SpeculationControl free(4, /*adaptive=*/true, SpeculationControl::kPauseSteps);
  for (int round = 0; round < 3; ++round) {
    while (free.Budget() > 0) free.Record(1, 0);
    int steps = 1;
    while (free.Budget() == 0 && steps < 10000) ++steps;
    EXPECT_EQ(steps, SpeculationControl::kPauseSteps) << "round " << round;
  }
  // A try that pays resets the pause.
  while (c.Budget() > 0) c.Record(1, 0);
  pause();
  c.Record(2, 2);
  for (int i = 0; i < 6; ++i) c.Record(1, 0);
  EXPECT_EQ(pause(), SpeculationControl::kPauseSteps);
}

TEST(SpeculativeOptionsTest, ParsesModes) {
  EXPECT_EQ(ParseSpeculativeMode("ngram")->mode, SpeculativeMode::kNgram);
  EXPECT_EQ(ParseSpeculativeMode("off")->mode, SpeculativeMode::kOff);
  auto draft = ParseSpeculativeMode("draft:/m/small.gguf");
  ASSERT_TRUE(draft.ok());
  EXPECT_EQ(draft->mode, SpeculativeMode::kDraft);
  EXPECT_EQ(draft->draft_model, "/m/small.gguf");
  EXPECT_FALSE(ParseSpeculativeMode("draft:").ok());
  EXPECT_FALSE(ParseSpeculativeMode("eagle").ok());
}

}  // namespace
}  // namespace tachyon
