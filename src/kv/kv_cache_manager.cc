#include "kv/kv_cache_manager.h"

#include <algorithm>

#include "base/check.h"

namespace tachyon {

KvCacheManager::KvCacheManager(KvCacheOptions options)
    : options_(options), pool_(options.num_blocks), window_pool_(options.window > 0 ? options.window_num_blocks : 0) {
  CHECK_GT(options.block_size, 0);
  CHECK((options.window > 0) == (options.window_num_blocks > 0)) << "a window pool needs a window and blocks";
}

double KvCacheManager::Usage() const {
  double usage = 1.0 - static_cast<double>(num_free_blocks()) / num_blocks();
  if (has_window()) usage = std::max(usage, 1.0 - static_cast<double>(window_num_free_blocks()) / window_num_blocks());
  return usage;
}

int64_t KvCacheManager::FirstWindowBlock(int64_t position) const {
  return std::max<int64_t>(0, position - options_.window + 1) / options_.block_size;
}

void KvCacheManager::ReleaseHeld(BlockPool& pool, const std::vector<BlockId>& ids) {
  std::vector<BlockId> held;
  for (BlockId b : ids) {
    if (b != kNoBlock) held.push_back(b);
  }
  pool.Release(held);
}

CachedPrefix KvCacheManager::FindCachedPrefix(std::span<const TokenId> tokens, uint64_t extra_key) const {
  CachedPrefix prefix;
  if (!options_.enable_prefix_caching || tokens.empty()) return prefix;
  const int64_t bs = options_.block_size;
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / bs;
  BlockHash parent = kRootBlockHash;
  std::vector<std::optional<BlockId>> window_hits;
  for (int64_t i = 0; i < max_blocks; ++i) {
    parent = HashBlock(parent, tokens.subspan(i * bs, bs), extra_key);
    std::optional<BlockId> block = pool_.Lookup(parent);
    if (!block) break;
    prefix.blocks.push_back(*block);
    if (has_window()) window_hits.push_back(window_pool_.Lookup(parent));
  }
  if (has_window()) {
    // The longest prefix whose window blocks are cached from the first one the
    // next token's query sees (all of them for a prefix within one window).
    int64_t k = static_cast<int64_t>(prefix.blocks.size());
    // found_from[e]: the lowest i such that window_hits[i .. e) are all cached.
    std::vector<int64_t> found_from(k + 1, 0);
    for (int64_t e = 1; e <= k; ++e) found_from[e] = window_hits[e - 1] ? found_from[e - 1] : e;
    while (k > 0 && FirstWindowBlock(k * bs) < found_from[k]) --k;
    prefix.blocks.resize(k);
    const int64_t first = FirstWindowBlock(k * bs);
    prefix.window_blocks.assign(k, kNoBlock);
    for (int64_t i = first; i < k; ++i) prefix.window_blocks[i] = *window_hits[i];
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
  auto fits = [need](const BlockPool& pool, const std::vector<BlockId>& reused) {
    int64_t reused_in_free_queue = 0;
    for (BlockId b : reused) reused_in_free_queue += b != kNoBlock && pool.ref_count(b) == 0 ? 1 : 0;
    return need <= pool.num_free_blocks() - reused_in_free_queue;
  };
  if (!fits(pool_, prefix.blocks)) return false;
  // The window table grows with the main one: every new entry holds positions this step writes.
  if (has_window() && !fits(window_pool_, prefix.window_blocks)) return false;
  CHECK(!has_window() || prefix.window_blocks.size() == prefix.blocks.size()) << "a prefix without its window blocks";

  SeqState& state = seqs_[seq];
  if (is_new) {
    for (BlockId b : prefix.blocks) {
      pool_.Acquire(b);
      state.blocks.push_back(b);
      state.hashes.push_back(*pool_.hash(b));
    }
    for (BlockId b : prefix.window_blocks) {
      if (b != kNoBlock) window_pool_.Acquire(b);
      state.window_blocks.push_back(b);
    }
  }
  for (int64_t i = 0; i < need; ++i) {
    std::optional<BlockId> b = pool_.Allocate();
    CHECK(b.has_value()) << "free block count was checked above";
    state.blocks.push_back(*b);
    if (has_window()) {
      std::optional<BlockId> w = window_pool_.Allocate();
      CHECK(w.has_value()) << "free window block count was checked above";
      state.window_blocks.push_back(*w);
    }
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
    if (has_window() && state.window_blocks[i] != kNoBlock) window_pool_.Cache(state.window_blocks[i], hash);
    state.hashes.push_back(hash);
  }
}

void KvCacheManager::ReleaseOutsideWindow(SeqId seq, int64_t num_computed) {
  if (!has_window()) return;
  SeqState& state = seqs_.at(seq);
  const int64_t end = std::min<int64_t>(FirstWindowBlock(num_computed), state.window_blocks.size());
  std::vector<BlockId> released;  // oldest first: the first evicted
  for (int64_t i = 0; i < end; ++i) {
    if (state.window_blocks[i] == kNoBlock) continue;
    released.push_back(state.window_blocks[i]);
    state.window_blocks[i] = kNoBlock;
  }
  window_pool_.Release(released);
}

void KvCacheManager::Free(SeqId seq) {
  auto it = seqs_.find(seq);
  if (it == seqs_.end()) return;
  std::vector<BlockId> tail_first(it->second.blocks.rbegin(), it->second.blocks.rend());
  pool_.Release(tail_first);
  ReleaseHeld(window_pool_, {it->second.window_blocks.rbegin(), it->second.window_blocks.rend()});
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
  if (has_window()) {
    ReleaseHeld(window_pool_, {state.window_blocks.rbegin(), state.window_blocks.rend() - keep});
    state.window_blocks.resize(keep);
  }
}

const std::vector<BlockId>& KvCacheManager::BlockTable(SeqId seq) const { return seqs_.at(seq).blocks; }

const std::vector<BlockId>& KvCacheManager::WindowBlockTable(SeqId seq) const {
  CHECK(has_window()) << "no window pool";
  return seqs_.at(seq).window_blocks;
}

}  // namespace tachyon
