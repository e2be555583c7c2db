#include "kv/block_pool.h"

#include "base/check.h"

namespace tachyon {

BlockPool::BlockPool(int num_blocks) : blocks_(num_blocks) {
  CHECK_GE(num_blocks, 0);
  for (int i = 0; i < num_blocks; ++i) PushBack(i);
}

void BlockPool::PushBack(int id) {
  Block& b = blocks_[id];
  b.prev = tail_;
  b.next = -1;
  if (tail_ >= 0) {
    blocks_[tail_].next = id;
  } else {
    head_ = id;
  }
  tail_ = id;
  ++num_free_;
}

void BlockPool::Unlink(int id) {
  Block& b = blocks_[id];
  if (b.prev >= 0) {
    blocks_[b.prev].next = b.next;
  } else {
    head_ = b.next;
  }
  if (b.next >= 0) {
    blocks_[b.next].prev = b.prev;
  } else {
    tail_ = b.prev;
  }
  b.prev = b.next = -1;
  --num_free_;
}

std::optional<BlockId> BlockPool::Allocate() {
  if (head_ < 0) return std::nullopt;
  const int id = head_;
  Unlink(id);
  Block& b = blocks_[id];
  CHECK_EQ(b.ref_count, 0);
  if (b.hash) {  // evict: the contents are about to be overwritten
    auto it = cache_.find(*b.hash);
    if (it != cache_.end() && it->second.value() == id) cache_.erase(it);
    b.hash.reset();
  }
  b.ref_count = 1;
  return BlockId(id);
}

void BlockPool::Acquire(BlockId id) {
  Block& b = blocks_[id.value()];
  if (b.ref_count == 0) Unlink(id.value());
  ++b.ref_count;
}

void BlockPool::Release(const std::vector<BlockId>& ids) {
  for (BlockId id : ids) {
    Block& b = blocks_[id.value()];
    CHECK_GT(b.ref_count, 0) << "block " << id.value() << " released more often than acquired";
    if (--b.ref_count == 0) PushBack(id.value());
  }
}

std::optional<BlockId> BlockPool::Lookup(BlockHash hash) const {
  auto it = cache_.find(hash);
  if (it == cache_.end()) return std::nullopt;
  return it->second;
}

void BlockPool::Cache(BlockId id, BlockHash hash) {
  Block& b = blocks_[id.value()];
  if (b.hash) return;  // already cached
  if (cache_.count(hash)) return;  // the same contents live in another block
  b.hash = hash;
  cache_.emplace(hash, id);
}

std::vector<BlockId> BlockPool::FreeQueue() const {
  std::vector<BlockId> out;
  for (int id = head_; id >= 0; id = blocks_[id].next) out.push_back(BlockId(id));
  return out;
}

}  // namespace tachyon
