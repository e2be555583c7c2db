// BlockPool: a fixed set of KV blocks with reference counts, a free queue in
// LRU order, and the PrefixCache of full blocks by content hash.
//
// Invariants:
// - a block is in the free queue iff its ref_count is 0;
// - the free queue is ordered by when blocks became free (oldest first), and
//   allocation takes the oldest; a freed block keeps its contents and hash, so
//   a later request can still find it, until allocation evicts it;
// - the prefix cache maps a hash to at most one block, and that block carries
//   the hash.
// Pure: no I/O, no threads, no clock.
#pragma once

#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/strong_id.h"
#include "kv/block_hash.h"

namespace tachyon {

using BlockId = StrongId<struct BlockIdTag>;

class BlockPool {
 public:
  explicit BlockPool(int num_blocks);

  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_free_blocks() const { return num_free_; }
  int ref_count(BlockId id) const { return blocks_[id.value()].ref_count; }
  std::optional<BlockHash> hash(BlockId id) const { return blocks_[id.value()].hash; }

  // Takes the oldest free block (evicting its cached contents), ref_count 1.
  std::optional<BlockId> Allocate();
  // A cached block reused by another sequence: leaves the free queue if it was there.
  void Acquire(BlockId id);
  // Drops one reference to each block, in order: blocks reaching 0 join the
  // free queue in that order (so pass a sequence's blocks tail first to have
  // its tail evicted before its shared prefix).
  void Release(const std::vector<BlockId>& ids);

  // The block registered for `hash`, if its contents are still there.
  std::optional<BlockId> Lookup(BlockHash hash) const;
  // Registers a full block under its content hash (no-op if another block
  // already holds the same contents).
  void Cache(BlockId id, BlockHash hash);

  // Free blocks from oldest to newest (for tests).
  std::vector<BlockId> FreeQueue() const;

 private:
  struct Block {
    int ref_count = 0;
    std::optional<BlockHash> hash;
    int prev = -1, next = -1;  // free queue links
  };
  void PushBack(int id);
  void Unlink(int id);

  std::vector<Block> blocks_;
  int head_ = -1, tail_ = -1;  // free queue: head is the oldest
  int num_free_ = 0;
  std::unordered_map<BlockHash, BlockId> cache_;  // the PrefixCache
};

}  // namespace tachyon
