// Speculative decoding: options, the exact verification of a proposal, and the
// per-sequence control of how much to propose.
//
// Verification is exact. Proposals are point masses (the n-gram proposer's
// continuation, a draft model's greedy tokens), so Leviathan et al. 2023's
// rule (accept a proposed token d with probability min(1, p(d) / q(d)), on
// rejection draw from normalize(max(0, p - q))) becomes: accept d with
// probability p(d), else draw from p without d. p is the target's processed
// distribution (every sampling option applied), so a sampled token follows it
// exactly; greedy decoding accepts d only when it is the argmax, and its output
// equals decoding without speculation token for token.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/strong_id.h"
#include "engine/sampler.h"

namespace tachyon {

enum class SpeculativeMode { kOff, kNgram, kDraft };

struct SpeculativeOptions {
  SpeculativeMode mode = SpeculativeMode::kOff;
  std::string draft_model;  // kDraft: the draft model's GGUF file
  int num_tokens = 4;       // most tokens proposed for a sequence in one step
  int ngram_min = 1;        // kNgram: suffix lengths tried, longest first
  int ngram_max = 4;
  // A step with more decoding sequences than this proposes nothing: the batch
  // alone keeps the cores busy (decode is then compute-bound, and verifying
  // rejected tokens costs real time).
  int max_batch = 8;
  // Each sequence's proposal length follows its acceptance (SpeculationControl);
  // false: always num_tokens (for measurements and tests).
  bool adaptive = true;
};

// "ngram", "draft:FILE" or "off".
StatusOr<SpeculativeOptions> ParseSpeculativeMode(const std::string& text, SpeculativeOptions options = {});

// Verifies `draft` with the target's logit rows: rows[i * n_vocab ...] are the
// logits after the sequence and draft[0, i), for i in [0, draft.size()]
// (modified in place by the sampler). `generated`: the tokens generated before
// this step (for penalties). Returns the tokens to append: the accepted prefix
// of the draft, then one token of the target's (the correction at the first
// rejection, or the next token when every proposal was accepted).
std::vector<TokenId> VerifyDraft(Sampler& sampler, std::span<float> rows, int64_t n_vocab,
                                 std::span<const TokenId> generated, std::span<const TokenId> draft,
                                 int64_t* num_accepted);

// The probability of `token` under `dist` (0 when absent).
double ProbabilityOf(const Sampler::Distribution& dist, int32_t token);
// A token drawn from `dist` without `token`, renormalized; `u` uniform in [0, 1).
// `dist` must hold some other token with weight > 0.
TokenId DrawExcluding(const Sampler::Distribution& dist, int32_t token, double u);

// How many tokens a sequence proposes, from how many of its recent proposals
// were accepted: all accepted grows the proposal by one, none halves it, and
// an acceptance rate that stays low turns proposing off for a while, then it
// tries again (a creative continuation may fall into a loop or quote its
// prompt later); for a costly proposer (a draft model) each pause that follows
// a failed try is twice as long, up to kMaxPauseSteps, so one that never agrees
// costs little. The n-gram proposer is free and proposes only on a match, so its
// pauses stay short: a text that starts to loop late is caught.
class SpeculationControl {
 public:
  // adaptive false: always max_tokens. max_pause: the longest pause, in steps
  // (kPauseSteps: pauses never grow; kMaxPauseSteps for a costly proposer).
  SpeculationControl(int max_tokens, bool adaptive, int max_pause = kMaxPauseSteps)
      : max_tokens_(max_tokens), adaptive_(adaptive), max_pause_(max_pause), k_(max_tokens) {}
  // Tokens to propose this step (0: none).
  int Budget();
  void Record(int64_t proposed, int64_t accepted);

  static constexpr double kMinAcceptance = 0.15;  // below: pause
  static constexpr int kPauseSteps = 16;           // the first pause
  static constexpr int kMaxPauseSteps = 64;

 private:
  int max_tokens_;
  bool adaptive_;
  int max_pause_;
  int k_;
  double acceptance_ = 0.5;  // exponential moving average of accepted / proposed
  int paused_ = 0;
  int next_pause_ = kPauseSteps;
};

}  // namespace tachyon
