// KvCacheManager: which KV blocks each sequence owns, with automatic prefix
// caching shared by all sequences.
//
// A sequence's block table covers its tokens in order: token p lives in block
// table[p / block_size] at slot p % block_size. Once a block is full and
// computed it is registered in the prefix cache under HashBlock(parent, its
// tokens, extra key); a later sequence whose prompt starts with the same
// tokens reuses those blocks and computes only the rest. Freed blocks keep
// their contents until the pool reuses them (LRU, a sequence's tail first).
// Pure: no I/O, no threads, no clock.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/strong_id.h"
#include "kv/block_pool.h"

namespace tachyon {

struct KvCacheOptions {
  int num_blocks = 0;
  int block_size = 16;
  bool enable_prefix_caching = true;
};

struct CachedPrefix {
  std::vector<BlockId> blocks;  // cached full blocks, in order
  int64_t num_tokens = 0;       // blocks.size() * block_size
};

class KvCacheManager {
 public:
  explicit KvCacheManager(KvCacheOptions options);

  int block_size() const { return options_.block_size; }
  int num_blocks() const { return pool_.num_blocks(); }
  int num_free_blocks() const { return pool_.num_free_blocks(); }
  // Fraction of blocks held by sequences, 0..1.
  double Usage() const { return 1.0 - static_cast<double>(num_free_blocks()) / num_blocks(); }

  // The longest run of cached full blocks that starts `tokens`, never all of
  // them: the last token is always computed (its logits are needed).
  CachedPrefix FindCachedPrefix(std::span<const TokenId> tokens, uint64_t extra_key) const;
  // The hash chain of the full blocks of `tokens`: element i identifies blocks 0..i.
  std::vector<BlockHash> HashFullBlocks(std::span<const TokenId> tokens, uint64_t extra_key) const;
  // Counts one prompt's lookup for the prefix-cache metrics (once per
  // admitted prompt, not per attempt).
  void CountPrefixQuery(int64_t query_tokens, int64_t hit_tokens) {
    prefix_query_tokens_ += query_tokens;
    prefix_hit_tokens_ += hit_tokens;
  }

  // Makes the block table of `seq` cover its first num_tokens tokens. The
  // first call for a sequence may pass the prefix FindCachedPrefix returned,
  // whose blocks then start the table. Returns false, changing nothing, when
  // the pool has too few free blocks.
  bool Allocate(SeqId seq, int64_t num_tokens, const CachedPrefix& prefix = {});

  // Registers the full blocks that hold tokens[0, num_computed) of `seq`.
  void CacheComputedBlocks(SeqId seq, std::span<const TokenId> tokens, int64_t num_computed,
                           uint64_t extra_key);

  // Returns the sequence's blocks to the pool, tail first.
  void Free(SeqId seq);
  // Returns the blocks past those that hold tokens [0, num_tokens) to the pool
  // (speculative positions that were not accepted). Cached blocks are never
  // past num_tokens: only computed tokens' blocks are cached.
  void Shrink(SeqId seq, int64_t num_tokens);

  bool Has(SeqId seq) const { return seqs_.count(seq) > 0; }
  const std::vector<BlockId>& BlockTable(SeqId seq) const;

  // Prompt tokens looked up in the prefix cache, and of those, found.
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

  const BlockPool& pool() const { return pool_; }

 private:
  struct SeqState {
    std::vector<BlockId> blocks;
    std::vector<BlockHash> hashes;  // of blocks[0 .. hashes.size()), the cached full ones
  };

  KvCacheOptions options_;
  BlockPool pool_;
  std::unordered_map<SeqId, SeqState> seqs_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace tachyon
