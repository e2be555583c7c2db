#include "engine/draft_proposer.h"

#include <algorithm>

#include "engine/sampler.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {

StatusOr<std::unique_ptr<DraftProposer>> DraftProposer::Create(const std::string& path, const Vocab& target_vocab,
                                                               int block_size, int num_blocks, int64_t max_tokens) {
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load(path));
  StatusOr<Vocab> vocab = Vocab::FromGguf(model->file());
  if (!vocab.ok()) return InvalidArgumentError("draft model " + path + ": " + vocab.status().message());
  if (vocab->size() != target_vocab.size() || model->config().n_vocab != target_vocab.size()) {
    return InvalidArgumentError("draft model " + path + " has " + std::to_string(vocab->size()) +
                                " tokens; the target has " + std::to_string(target_vocab.size()) +
                                ": a draft needs the same vocabulary");
  }
  for (int32_t i = 0; i < vocab->size(); ++i) {
    if (vocab->token(TokenId(i)).text != target_vocab.token(TokenId(i)).text) {
      return InvalidArgumentError("draft model " + path + ": token " + std::to_string(i) + " is '" +
                                  vocab->token(TokenId(i)).text + "', the target's is '" +
                                  target_vocab.token(TokenId(i)).text + "': a draft needs the same vocabulary");
    }
  }
  if (model->config().context_length < max_tokens) {
    return InvalidArgumentError("draft model " + path + " has a context of " +
                                std::to_string(model->config().context_length) + " tokens; the server's maximum "
                                "model length is " + std::to_string(max_tokens));
  }
  return std::unique_ptr<DraftProposer>(new DraftProposer(std::move(model), block_size, num_blocks));
}

DraftProposer::DraftProposer(std::unique_ptr<Model> model, int block_size, int num_blocks)
    : model_(std::move(model)),
      kv_({.num_blocks = num_blocks, .block_size = block_size, .enable_prefix_caching = true}),
      kv_buffer_(model_->config(), block_size, num_blocks, KvType::kF16) {}

void DraftProposer::Forget(SeqId id) {
  kv_.Free(id);
  computed_.erase(id);
}

void DraftProposer::Propose(std::span<const Query> queries, ThreadPool& pool) {
  struct Work {
    const Query* query;
    int64_t first;  // first position of this step's tokens
    std::vector<TokenId> pending;  // tokens to compute this step
  };
  std::vector<Work> work;
  std::vector<const Query*> computing;
  for (const Query& q : queries) {
    q.draft->clear();
    const int64_t len = static_cast<int64_t>(q.tokens.size());
    if (len == 0 || q.max_tokens <= 0) continue;
    // Room for the sequence and every proposed token but the last (never computed).
    const int64_t need = len + q.max_tokens - 1;
    int64_t reuse = 0;
    if (!kv_.Has(q.id)) {
      CachedPrefix prefix = kv_.FindCachedPrefix(q.tokens, 0);
      if (!kv_.Allocate(q.id, need, prefix)) continue;
      reuse = prefix.num_tokens;
    } else {
      const std::vector<TokenId>& have = computed_[q.id];
      const auto [a, b] = std::mismatch(have.begin(), have.end(), q.tokens.begin(), q.tokens.end() - 1);
      reuse = a - have.begin();
      if (!kv_.Allocate(q.id, need)) {
        Forget(q.id);  // its blocks go back; it starts over next time
        continue;
      }
    }
    std::vector<TokenId>& have = computed_[q.id];
    have.assign(q.tokens.begin(), q.tokens.begin() + reuse);
    work.push_back({&q, reuse, std::vector<TokenId>(q.tokens.begin() + reuse, q.tokens.end())});
    computing.push_back(&q);
  }
  // k steps: the first catches up and proposes one token; each later one feeds the last guess.
  while (!work.empty()) {
    ForwardBatch batch;
    std::vector<std::vector<int32_t>> tables;
    for (size_t i = 0; i < work.size(); ++i) {
      const Work& w = work[i];
      std::vector<int32_t> table;
      for (BlockId b : kv_.BlockTable(w.query->id)) table.push_back(b.value());
      tables.push_back(std::move(table));
      for (size_t t = 0; t < w.pending.size(); ++t) {
        batch.tokens.push_back(w.pending[t]);
        batch.positions.push_back(w.first + static_cast<int64_t>(t));
        batch.sequence_index.push_back(static_cast<int32_t>(i));
      }
      batch.logit_tokens.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
    }
    for (const auto& table : tables) batch.sequences.push_back({table.data(), static_cast<int64_t>(table.size())});
    const std::vector<float> logits = model_->Forward(batch, kv_buffer_, pool);
    const int64_t n_vocab = model_->config().n_vocab;
    std::vector<Work> next;
    for (size_t i = 0; i < work.size(); ++i) {
      Work& w = work[i];
      std::vector<TokenId>& have = computed_[w.query->id];
      have.insert(have.end(), w.pending.begin(), w.pending.end());
      const TokenId guess = Sampler::Argmax(std::span<const float>(logits.data() + i * n_vocab, n_vocab));
      w.query->draft->push_back(guess);
      if (static_cast<int>(w.query->draft->size()) < w.query->max_tokens) {
        next.push_back({w.query, w.first + static_cast<int64_t>(w.pending.size()), {guess}});
      }
    }
    work = std::move(next);
  }
  // Only the target's tokens enter the draft's prefix cache, never its guesses.
  for (const Query* q : computing) {
    kv_.CacheComputedBlocks(q->id, q->tokens, static_cast<int64_t>(q->tokens.size()), 0);
  }
}

}  // namespace tachyon
