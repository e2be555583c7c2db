#include "engine/proposer.h"

#include <algorithm>

#include "base/check.h"

namespace tachyon {

NgramProposer::NgramProposer(int min_n, int max_n) : min_n_(min_n), max_n_(max_n) {
  CHECK(min_n >= 1 && max_n >= min_n) << "n-gram sizes " << min_n << ".." << max_n;
}

void NgramProposer::Propose(std::span<const Query> queries, ThreadPool&) {
  for (const Query& q : queries) {
    q.draft->clear();
    ProposeOne(q.tokens, q.max_tokens, q.draft);
  }
}

void NgramProposer::ProposeOne(std::span<const TokenId> tokens, int max_tokens, std::vector<TokenId>* draft) const {
  const int64_t len = static_cast<int64_t>(tokens.size());
  if (max_tokens <= 0) return;
  for (int64_t n = std::min<int64_t>(max_n_, len - 1); n >= min_n_; --n) {
    const TokenId* suffix = tokens.data() + len - n;
    // Earlier occurrences start at j < len - n, the most recent first. What
    // follows one may run past the end into the proposal itself: a loop of
    // period len - n - j repeats (copying from the sequence extended by the
    // proposal continues it).
    for (int64_t j = len - n - 1; j >= 0; --j) {
      if (tokens[j + n - 1] != suffix[n - 1] || !std::equal(suffix, suffix + n - 1, tokens.data() + j)) continue;
      const size_t first = draft->size();
      for (int64_t i = j + n; i < j + n + max_tokens; ++i) {
        draft->push_back(i < len ? tokens[i] : (*draft)[first + (i - len)]);
      }
      return;
    }
  }
}

}  // namespace tachyon
