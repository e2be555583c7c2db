// DraftProposer: a small model with the target's vocabulary proposes greedily.
//
// It keeps its own paged KV cache (with prefix caching) alongside the
// target's: per sequence, the tokens whose K/V it holds. Each step it first
// catches up on what the target accepted since (only the tokens that differ
// from what it computed, usually one or two), then proposes k tokens in k
// forward passes, every speculating sequence batched together. Only the
// target's verified tokens enter its prefix cache.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/proposer.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_buffer.h"
#include "model/model.h"
#include "tokenizer/vocab.h"

namespace tachyon {

class DraftProposer : public Proposer {
 public:
  // Loads the draft; refuses a model whose vocabulary differs from the target's.
  // max_tokens: the longest sequence (prompt + output + proposal) it must hold;
  // its cache has room for num_blocks blocks of block_size tokens.
  static StatusOr<std::unique_ptr<DraftProposer>> Create(const std::string& path, const Vocab& target_vocab,
                                                         int block_size, int num_blocks, int64_t max_tokens);

  void Propose(std::span<const Query> queries, ThreadPool& pool) override;
  void Forget(SeqId id) override;

  const Model& model() const { return *model_; }

 private:
  DraftProposer(std::unique_ptr<Model> model, int block_size, int num_blocks);

  std::unique_ptr<Model> model_;
  KvCacheManager kv_;
  KvBuffer kv_buffer_;
  std::unordered_map<SeqId, std::vector<TokenId>> computed_;  // tokens whose K/V the draft holds
};

}  // namespace tachyon
