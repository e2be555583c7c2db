#include "model/model_compare.h"

#include <algorithm>
#include <cmath>

namespace tachyon {
namespace {

// Logits of every position: [tokens, n_vocab].
std::vector<float> AllLogits(const Model& model, const std::vector<TokenId>& tokens, ThreadPool& pool) {
  constexpr int kBlockSize = 16;
  const int64_t n = static_cast<int64_t>(tokens.size());
  KvBuffer kv(model.config(), kBlockSize, (n + kBlockSize - 1) / kBlockSize);
  std::vector<int32_t> table(kv.num_blocks());
  for (int32_t b = 0; b < kv.num_blocks(); ++b) table[b] = b;
  ForwardBatch batch = ForwardBatch::OneSequence(tokens, 0, table.data(), kv.num_blocks());
  batch.logit_tokens.clear();
  for (int32_t i = 0; i < n; ++i) batch.logit_tokens.push_back(i);
  return model.Forward(batch, kv, pool);
}

// log softmax of one row, in doubles.
void LogSoftmax(const float* logits, int64_t n, std::vector<double>* out) {
  out->resize(n);
  const double max = *std::max_element(logits, logits + n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += std::exp(logits[i] - max);
  const double log_sum = max + std::log(sum);
  for (int64_t i = 0; i < n; ++i) (*out)[i] = logits[i] - log_sum;
}

}  // namespace

StatusOr<ModelComparison> CompareModels(const Model& reference, const Model& model, const std::vector<TokenId>& tokens,
                                        int num_threads) {
  const int64_t n_vocab = reference.config().n_vocab;
  if (model.config().n_vocab != n_vocab) {
    return InvalidArgumentError("the models' vocabularies differ: " + std::to_string(n_vocab) + " vs " +
                                std::to_string(model.config().n_vocab) + " tokens");
  }
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (n == 0) return InvalidArgumentError("no tokens to compare on");
  if (n > reference.config().context_length || n > model.config().context_length) {
    return InvalidArgumentError(std::to_string(n) + " tokens exceed a model's context length");
  }
  for (TokenId t : tokens) {
    if (t.value() < 0 || t.value() >= n_vocab) return InvalidArgumentError("a token id is outside the vocabulary");
  }
  ThreadPool pool(num_threads);
  const std::vector<float> p_logits = AllLogits(reference, tokens, pool);
  const std::vector<float> q_logits = AllLogits(model, tokens, pool);
  std::vector<double> kl(n), log_p, log_q;
  int64_t agree = 0;
  double diff2 = 0, ref2 = 0;
  for (int64_t t = 0; t < n; ++t) {
    const float* p = p_logits.data() + t * n_vocab;
    const float* q = q_logits.data() + t * n_vocab;
    LogSoftmax(p, n_vocab, &log_p);
    LogSoftmax(q, n_vocab, &log_q);
    double sum = 0;
    for (int64_t i = 0; i < n_vocab; ++i) sum += std::exp(log_p[i]) * (log_p[i] - log_q[i]);
    kl[t] = std::max(0.0, sum);
    if (std::max_element(p, p + n_vocab) - p == std::max_element(q, q + n_vocab) - q) ++agree;
    for (int64_t i = 0; i < n_vocab; ++i) {
      diff2 += double(p[i] - q[i]) * (p[i] - q[i]);
      ref2 += double(p[i]) * p[i];
    }
  }
  ModelComparison out;
  out.positions = n;
  for (double v : kl) out.mean_kl += v / n;
  std::vector<double> sorted = kl;
  std::sort(sorted.begin(), sorted.end());
  out.median_kl = sorted[n / 2];
  out.p99_kl = sorted[std::min<int64_t>(n - 1, static_cast<int64_t>(std::ceil(0.99 * n)) - 1)];
  out.max_kl = sorted.back();
  out.top1_agreement = double(agree) / n;
  out.rms_logit_error = ref2 > 0 ? std::sqrt(diff2 / ref2) : 0;
  return out;
}

}  // namespace tachyon
