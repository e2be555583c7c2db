#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "base/check.h"

namespace tachyon {

KvCacheManager::KvCacheManager(KvCacheOptions options) : options_(options), pool_(options.num_blocks) {
  CHECK_GT(options.block_size, 0);
}

CachedPrefix KvCacheManager::FindCachedPrefix(std::span<const TokenId> tokens, uint64_t extra_key) const {
  CachedPrefix prefix;
  if (!options_.enable_prefix_caching || tokens.empty()) return prefix;
  const int64_t bs = options_.block_size;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / bs;
  BlockHash parent = kRootBlockHash;
  for (int64_t i = 0; i < max_blocks; ++i) {
    parent = HashBlock(parent, tokens.subspan(i * bs, bs), extra_key);
    std::optional<BlockId> block = pool_.Lookup(parent);
    if (!block) break;
    prefix.blocks.push_back(*block);
  }
  prefix.num_tokens = static_cast<int64_t>(prefix.blocks.size()) * bs;
  return prefix;
}

std::vector<BlockHash> KvCacheManager::HashFullBlocks(std::span<const TokenId> tokens, uint64_t extra_key) const {
  std::vector<BlockHash> hashes;
  const int64_t bs = options_.block_size;
  BlockHash parent = kRootBlockHash;
  for (int64_t i = 0; (i + 1) * bs <= static_cast<int64_t>(tokens.size()); ++i) {
    parent = HashBlock(parent, tokens.subspan(i * bs, bs), extra_key);
    hashes.push_back(parent);
  }
  return hashes;
}

bool KvCacheManager::Allocate(SeqId seq, int64_t num_tokens, const CachedPrefix& prefix) {
  const int64_t bs = options_.block_size;
  auto it = seqs_.find(seq);
  const bool is_new = it == seqs_.end();
  CHECK(is_new || prefix.blocks.empty()) << "a cached prefix can only start a new sequence";
  const int64_t have = is_new ? static_cast<int64_t>(prefix.blocks.size())
                              : static_cast<int64_t>(it->second.blocks.size());
  const int64_t need = std::max<int64_t>(0, (num_tokens + bs - 1) / bs - have);
  // Reusing a cached block that is free takes it out of the free queue too.
  int64_t prefix_blocks_in_free_queue = 0;
  for (BlockId b : prefix.blocks) prefix_blocks_in_free_queue += pool_.ref_count(b) == 0 ? 1 : 0;
  if (need > pool_.num_free_blocks() - prefix_blocks_in_free_queue) return false;

  SeqState& state = seqs_[seq];
  if (is_new) {
    for (BlockId b : prefix.blocks) {
      pool_.Acquire(b);
      state.blocks.push_back(b);
      state.hashes.push_back(*pool_.hash(b));
    }
  }
  for (int64_t i = 0; i < need; ++i) {
    std::optional<BlockId> b = pool_.Allocate();
    CHECK(b.has_value()) << "free block count was checked above";
    state.blocks.push_back(*b);
  }
  return true;
}

void KvCacheManager::CacheComputedBlocks(SeqId seq, std::span<const TokenId> tokens, int64_t num_computed,
                                         uint64_t extra_key) {
  if (!options_.enable_prefix_caching) return;
  SeqState& state = seqs_.at(seq);
  const int64_t bs = options_.block_size;
  const int64_t full = std::min<int64_t>(num_computed / bs, static_cast<int64_t>(state.blocks.size()));
  for (int64_t i = static_cast<int64_t>(state.hashes.size()); i < full; ++i) {
    BlockHash parent = i == 0 ? kRootBlockHash : state.hashes[i - 1];
    BlockHash hash = HashBlock(parent, tokens.subspan(i * bs, bs), extra_key);
    pool_.Cache(state.blocks[i], hash);
    state.hashes.push_back(hash);
  }
}

void KvCacheManager::Free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  std::vector<BlockId> tail_first(it->second.blocks.rbegin(), it->second.blocks.rend());
  pool_.Release(tail_first);
  seqs_.erase(it);
}

void KvCacheManager::Shrink(SeqId seq, int64_t num_tokens) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  SeqState& state = it->second;
  const int64_t bs = options_.block_size;
  const size_t keep = static_cast<size_t>(std::max<int64_t>(0, (num_tokens + bs - 1) / bs));
  if (state.blocks.size() <= keep) return;
  CHECK(state.hashes.size() <= keep) << "a cached block lies past the tokens kept";
  std::vector<BlockId> tail_first(state.blocks.rbegin(), state.blocks.rend() - keep);
  pool_.Release(tail_first);
  state.blocks.resize(keep);
}

const std::vector<BlockId>& KvCacheManager::BlockTable(SeqId seq) const { return seqs_.at(seq).blocks; }

}  // namespace tachyon
