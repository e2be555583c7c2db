#include "kv/block_pool.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

std::vector<int> Ids(const std::vector<BlockId>& blocks) {
  std::vector<int> out;
  for (BlockId b : blocks) out.push_back(b.value());
  return out;
}

TEST(BlockPoolTest, AllocatesOldestFreeFirstAndQueuesReleasedInOrder) {
  BlockPool pool(4);
  EXPECT_EQ(pool.num_free_blocks(), 4);
  EXPECT_EQ(pool.Allocate()->value(), 0);
  EXPECT_EQ(pool.Allocate()->value(), 1);
  EXPECT_EQ(pool.Allocate()->value(), 2);
  EXPECT_EQ(Ids(pool.FreeQueue()), (std::vector<int>{3}));
  pool.Release({BlockId(2), BlockId(0), BlockId(1)});
  EXPECT_EQ(Ids(pool.FreeQueue()), (std::vector<int>{3, 2, 0, 1}));
  EXPECT_EQ(pool.Allocate()->value(), 3);
  EXPECT_EQ(pool.Allocate()->value(), 2);
  EXPECT_EQ(pool.Allocate()->value(), 0);
  EXPECT_EQ(pool.Allocate()->value(), 1);
  EXPECT_FALSE(pool.Allocate().has_value()) << "all four in use";
}

TEST(BlockPoolTest, CachedBlocksSurviveUntilEvictedAndCanBeReacquired) {
  BlockPool pool(3);
  BlockId a = *pool.Allocate(), b = *pool.Allocate();
  pool.Cache(a, BlockHash{11});
  pool.Cache(b, BlockHash{22});
  pool.Release({b, a});  // free queue: 2, b, a
  EXPECT_EQ(pool.Lookup(BlockHash{11})->value(), a.value()) << "freed, still cached";
  // Reusing a cached free block takes it out of the free queue.
  pool.Acquire(a);
  EXPECT_EQ(pool.ref_count(a), 1);
  EXPECT_EQ(Ids(pool.FreeQueue()), (std::vector<int>{2, b.value()}));
  // Allocation takes block 2 (uncached), then evicts b.
  EXPECT_EQ(pool.Allocate()->value(), 2);
  EXPECT_EQ(pool.Allocate()->value(), b.value());
  EXPECT_FALSE(pool.Lookup(BlockHash{22}).has_value()) << "evicted";
  EXPECT_FALSE(pool.hash(b).has_value());
  EXPECT_TRUE(pool.Lookup(BlockHash{11}).has_value()) << "a is in use, never evicted";
}

TEST(BlockPoolTest, SameContentsInTwoBlocksKeepsTheFirst) {
  BlockPool pool(2);
  BlockId a = *pool.Allocate(), b = *pool.Allocate();
  pool.Cache(a, BlockHash{5});
  pool.Cache(b, BlockHash{5});
  EXPECT_EQ(pool.Lookup(BlockHash{5})->value(), a.value());
  EXPECT_FALSE(pool.hash(b).has_value());
}

TEST(BlockPoolTest, SharedBlocksFreeOnlyWithTheLastUser) {
  BlockPool pool(2);
  BlockId a = *pool.Allocate();
  pool.Acquire(a);
  EXPECT_EQ(pool.ref_count(a), 2);
  pool.Release({a});
  EXPECT_EQ(pool.num_free_blocks(), 1);
  pool.Release({a});
  EXPECT_EQ(pool.num_free_blocks(), 2);
}

TEST(BlockPoolDeathTest, ReleasingAFreeBlockIsABug) {
  BlockPool pool(1);
  EXPECT_DEATH(pool.Release({BlockId(0)}), "released more often");
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

// Block hashes are 128 bits and both halves count: two blocks whose hashes
// share 64 bits (what a 64-bit collision looks like) are never confused.
TEST(BlockPoolTest, HashesThatShareSixtyFourBitsAreDifferentBlocks) {
  BlockPool pool(2);
  BlockId a = *pool.Allocate();
  pool.Cache(a, BlockHash{.low = 7, .high = 1});
  EXPECT_FALSE(pool.Lookup(BlockHash{.low = 7, .high = 2}).has_value());
  EXPECT_TRUE(pool.Lookup(BlockHash{.low = 7, .high = 1}).has_value());
  const TokenId tokens[] = {TokenId(1), TokenId(2)};
  const BlockHash h = HashBlock(kRootBlockHash, tokens, 0);
  EXPECT_NE(h.high, 0u);
  EXPECT_NE(h, HashBlock(kRootBlockHash, tokens, 1)) << "the extra key separates caches";
}

}  // namespace
}  // namespace tachyon
