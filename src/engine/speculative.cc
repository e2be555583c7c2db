#include "engine/speculative.h"

#include <algorithm>

#include "base/check.h"

namespace tachyon {

StatusOr<SpeculativeOptions> ParseSpeculativeMode(const std::string& text, SpeculativeOptions options) {
  if (text == "off" || text.empty()) {
    options.mode = SpeculativeMode::kOff;
  } else if (text == "ngram") {
    options.mode = SpeculativeMode::kNgram;
  } else if (text.rfind("draft:", 0) == 0 && text.size() > 6) {
    options.mode = SpeculativeMode::kDraft;
    options.draft_model = text.substr(6);
  } else {
    return InvalidArgumentError("--speculative: '" + text + "' is not one of ngram, draft:FILE, off");
  }
  return options;
}

double ProbabilityOf(const Sampler::Distribution& dist, int32_t token) {
  double total = 0, p = 0;
  for (const auto& [weight, id] : dist) {
    total += weight;
    if (id == token) p = weight;
  }
  return total > 0 ? p / total : 0;
}

TokenId DrawExcluding(const Sampler::Distribution& dist, int32_t token, double u) {
  double total = 0;
  for (const auto& [weight, id] : dist) total += id == token ? 0 : weight;
  CHECK(total > 0) << "nothing left to draw without token " << token;
  double r = u * total;
  int32_t last = -1;
  for (const auto& [weight, id] : dist) {
    if (id == token || weight <= 0) continue;
    last = id;
    r -= weight;
    if (r < 0) return TokenId(id);
  }
  return TokenId(last);
}

std::vector<TokenId> VerifyDraft(Sampler& sampler, std::span<float> rows, int64_t n_vocab,
                                 std::span<const TokenId> generated, std::span<const TokenId> draft,
                                 int64_t* num_accepted) {
  CHECK(static_cast<int64_t>(rows.size()) == (static_cast<int64_t>(draft.size()) + 1) * n_vocab);
  const bool greedy = sampler.params().temperature <= 0.0f;
  std::vector<TokenId> history(generated.begin(), generated.end());  // penalties see accepted tokens
  std::vector<TokenId> out;
  *num_accepted = 0;
  for (size_t i = 0; i <= draft.size(); ++i) {
    std::span<float> row = rows.subspan(i * n_vocab, n_vocab);
    const Sampler::Distribution& dist = sampler.ProcessedDistribution(row, history);
    if (i == draft.size()) {
      out.push_back(sampler.Draw(dist));
      break;
    }
    const int32_t d = draft[i].value();
    const double p = ProbabilityOf(dist, d);
    // Greedy: the distribution is the argmax alone, so p is 1 or 0 (no draw).
    const bool accept = greedy ? p > 0 : sampler.Uniform() < p;
    if (!accept) {
      out.push_back(greedy ? TokenId(dist[0].second) : DrawExcluding(dist, d, sampler.Uniform()));
      break;
    }
    out.push_back(draft[i]);
    history.push_back(draft[i]);
    ++*num_accepted;
  }
  return out;
}

int SpeculationControl::Budget() {
  if (paused_ > 0) {
    --paused_;
    return 0;
  }
  return k_;
}

void SpeculationControl::Record(int64_t proposed, int64_t accepted) {
  if (proposed <= 0 || !adaptive_) return;
  acceptance_ = 0.7 * acceptance_ + 0.3 * static_cast<double>(accepted) / static_cast<double>(proposed);
  if (accepted == proposed) {
    k_ = std::min(max_tokens_, k_ + 1);
  } else if (accepted == 0) {
    k_ = std::max(1, k_ / 2);
  }
  if (acceptance_ < kMinAcceptance) {
    paused_ = next_pause_;
    next_pause_ = std::min(2 * next_pause_, std::max(kPauseSteps, max_pause_));
    acceptance_ = 0.5;  // the next try starts from an even guess
    k_ = std::max(1, max_tokens_ / 2);
  } else if (2 * accepted >= proposed) {
    next_pause_ = kPauseSteps;  // it pays again: a later slump pauses briefly first
  }
}

}  // namespace tachyon
