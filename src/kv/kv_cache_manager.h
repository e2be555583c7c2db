// KvCacheManager: which KV blocks each sequence owns, with automatic prefix
// caching shared by all sequences.
//
// A sequence's block table covers its tokens in order: token p lives in block
// table[p / block_size] at slot p % block_size. Once a block is full and
// computed it is registered in the prefix cache under HashBlock(parent, its
// tokens, extra key); a later sequence whose prompt starts with the same
// tokens reuses those blocks and computes only the rest. Freed blocks keep
// their contents until the pool reuses them (LRU, a sequence's tail first).
//
// Sliding-window layers (Gemma 2/3) keep their K/V in a second pool with a
// block table of its own when KvCacheOptions::window is set: a query at
// position p of those layers sees positions (p - window, p], so once a
// sequence has computed P tokens its window blocks wholly before position
// P - window + 1 go back to that pool (their table entries become kNoBlock),
// and a long conversation holds only the full-attention layers' K/V for every
// token. Both tables share one hash chain; a cached prefix is one whose full
// blocks are all cached and whose window blocks are cached as far back as the
// next query can see.
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
  // Sliding-window layers' K/V in a pool of their own: both > 0, or both 0 (off:
  // every layer's K/V in the main pool).
  int64_t window = 0;         // tokens a query sees, its own included
  int window_num_blocks = 0;  // blocks of the window pool
};

// The most window blocks one sequence holds at once while it computes chunks
// of up to max_chunk tokens: positions from the first block a query at P sees
// (P - window + 1) to P + max_chunk - 1.
inline int64_t WindowBlocksPerSequence(int64_t window, int block_size, int64_t max_chunk) {
  return (window + max_chunk - 2) / block_size + 2;
}

// A table entry whose block was released (before the window) or never held.
inline constexpr BlockId kNoBlock{-1};

struct CachedPrefix {
  std::vector<BlockId> blocks;  // cached full blocks, in order
  // With a window pool: one entry per block too, kNoBlock before the window of
  // the token after the prefix.
  std::vector<BlockId> window_blocks;
  int64_t num_tokens = 0;  // blocks.size() * block_size
};

class KvCacheManager {
 public:
  explicit KvCacheManager(KvCacheOptions options);

  int block_size() const { return options_.block_size; }
  int num_blocks() const { return pool_.num_blocks(); }
  int num_free_blocks() const { return pool_.num_free_blocks(); }
  bool has_window() const { return options_.window > 0; }
  int64_t window() const { return options_.window; }
  int window_num_blocks() const { return window_pool_.num_blocks(); }
  int window_num_free_blocks() const { return window_pool_.num_free_blocks(); }
  // Fraction of blocks held by sequences, 0..1; with a window pool, that of the fuller pool.
  double Usage() const;
  // WindowBlocksPerSequence of this cache's window (0 without a window pool).
  int64_t WindowBlocksPerSequence(int64_t max_chunk) const {
    return has_window() ? tachyon::WindowBlocksPerSequence(options_.window, options_.block_size, max_chunk) : 0;
  }

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

  // With a window pool: returns the window blocks that no query from position
  // num_computed on can see (wholly before num_computed - window + 1).
  void ReleaseOutsideWindow(SeqId seq, int64_t num_computed);

  // Returns the sequence's blocks to the pool, tail first.
  void Free(SeqId seq);
  // Returns the blocks past those that hold tokens [0, num_tokens) to the pool
  // (speculative positions that were not accepted). Cached blocks are never
  // past num_tokens: only computed tokens' blocks are cached.
  void Shrink(SeqId seq, int64_t num_tokens);

  bool Has(SeqId seq) const { return seqs_.count(seq) > 0; }
  const std::vector<BlockId>& BlockTable(SeqId seq) const;
  // The window pool's table: as long as BlockTable, kNoBlock where released.
  const std::vector<BlockId>& WindowBlockTable(SeqId seq) const;

  // Prompt tokens looked up in the prefix cache, and of those, found.
  int64_t prefix_query_tokens() const { return prefix_query_tokens_; }
  int64_t prefix_hit_tokens() const { return prefix_hit_tokens_; }

  const BlockPool& pool() const { return pool_; }
  const BlockPool& window_pool() const { return window_pool_; }

 private:
  struct SeqState {
    std::vector<BlockId> blocks;
    std::vector<BlockId> window_blocks;  // with a window pool
    std::vector<BlockHash> hashes;  // of blocks[0 .. hashes.size()), the cached full ones
  };
  // The first block a query at `position` reads in the window layers.
  int64_t FirstWindowBlock(int64_t position) const;
  // Releases `ids` (kNoBlock entries skipped) to `pool`, in the order given.
  static void ReleaseHeld(BlockPool& pool, const std::vector<BlockId>& ids);

  KvCacheOptions options_;
  BlockPool pool_;
  BlockPool window_pool_;
  std::unordered_map<SeqId, SeqState> seqs_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace tachyon
