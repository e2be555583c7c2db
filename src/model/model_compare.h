// CompareModels: how far one model's next-token distributions are from a
// reference's (the same model at more bits), perplexity-free: the KL divergence
// KL(P_ref || P_model) at every position of a token sequence, and how often the
// two agree on the most likely token. `tachyon model compare` prints it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "model/model.h"

namespace tachyon {

struct ModelComparison {
  int64_t positions = 0;
  double mean_kl = 0, median_kl = 0, p99_kl = 0, max_kl = 0;  // nats
  double top1_agreement = 0;    // share of positions with the same argmax
  double rms_logit_error = 0;   // RMS of the logit differences over the reference's RMS
};

// Both models run `tokens` (one sequence from position 0) with every position's
// logits; they must share the vocabulary size, and tokens must fit both contexts.
StatusOr<ModelComparison> CompareModels(const Model& reference, const Model& model, const std::vector<TokenId>& tokens,
                                        int num_threads);

}  // namespace tachyon
