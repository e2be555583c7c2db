#include "kv/kv_cache_manager.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

std::vector<TokenId> Tokens(int n, int offset = 0) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) t.push_back(TokenId(offset + i));
  return t;
}

std::vector<int> Ids(const std::vector<BlockId>& blocks) {
  std::vector<int> out;
  for (BlockId b : blocks) out.push_back(b.value());
  return out;
}

TEST(KvCacheManagerTest, SecondRequestReusesTheCachedPrefix) {
  KvCacheManager kv({.num_blocks = 8, .block_size = 4});
  const SeqId a(1), b(2);
  std::vector<TokenId> prompt_a = Tokens(10);  // blocks [0..3] [4..7] [8, 9]
  CachedPrefix none = kv.FindCachedPrefix(prompt_a, 0);
  EXPECT_EQ(none.num_tokens, 0);
  ASSERT_TRUE(kv.Allocate(a, 10, none));
  EXPECT_EQ(Ids(kv.BlockTable(a)), (std::vector<int>{0, 1, 2}));
  kv.CacheComputedBlocks(a, prompt_a, 10, 0);  // two full blocks cached

  // b shares the first 8 tokens, then differs.
  std::vector<TokenId> prompt_b = Tokens(8);
  for (int i = 0; i < 5; ++i) prompt_b.push_back(TokenId(100 + i));
  CachedPrefix hit = kv.FindCachedPrefix(prompt_b, 0);
  EXPECT_EQ(Ids(hit.blocks), (std::vector<int>{0, 1}));
  EXPECT_EQ(hit.num_tokens, 8);
  ASSERT_TRUE(kv.Allocate(b, 13, hit));
  EXPECT_EQ(Ids(kv.BlockTable(b)), (std::vector<int>{0, 1, 3, 4}));
  EXPECT_EQ(kv.pool().ref_count(BlockId(0)), 2);
  kv.CountPrefixQuery(13, hit.num_tokens);
  EXPECT_EQ(kv.prefix_query_tokens(), 13);
  EXPECT_EQ(kv.prefix_hit_tokens(), 8);

  // A different extra key (another tenant) does not share.
  EXPECT_EQ(kv.FindCachedPrefix(prompt_b, 42).num_tokens, 0);
}

TEST(KvCacheManagerTest, TheLastTokenIsAlwaysComputed) {
  KvCacheManager kv({.num_blocks = 4, .block_size = 4});
  std::vector<TokenId> prompt = Tokens(8);
  ASSERT_TRUE(kv.Allocate(SeqId(1), 8));
  kv.CacheComputedBlocks(SeqId(1), prompt, 8, 0);
  CachedPrefix again = kv.FindCachedPrefix(prompt, 0);
  EXPECT_EQ(again.num_tokens, 4) << "8 cached tokens, but token 7 must be recomputed for its logits";
}

TEST(KvCacheManagerTest, FreedBlocksStayCachedTailFirstEviction) {
  KvCacheManager kv({.num_blocks = 4, .block_size = 4});
  std::vector<TokenId> prompt = Tokens(12);
  ASSERT_TRUE(kv.Allocate(SeqId(1), 12));  // blocks 0, 1, 2
  kv.CacheComputedBlocks(SeqId(1), prompt, 12, 0);
  kv.Free(SeqId(1));
  // Tail first: block 2 joins the queue before 1 and 0, after the never-used 3.
  EXPECT_EQ(Ids(kv.pool().FreeQueue()), (std::vector<int>{3, 2, 1, 0}));
  EXPECT_EQ(kv.FindCachedPrefix(Tokens(13), 0).num_tokens, 12);

  // A request for 2 unrelated blocks takes 3 and then evicts 2 (the old tail).
  ASSERT_TRUE(kv.Allocate(SeqId(2), 8));
  EXPECT_EQ(Ids(kv.BlockTable(SeqId(2))), (std::vector<int>{3, 2}));
  EXPECT_EQ(kv.FindCachedPrefix(Tokens(13), 0).num_tokens, 8) << "the first two blocks survive";
}

TEST(KvCacheManagerTest, AllocationThatDoesNotFitChangesNothing) {
  KvCacheManager kv({.num_blocks = 3, .block_size = 4});
  ASSERT_TRUE(kv.Allocate(SeqId(1), 8));
  EXPECT_FALSE(kv.Allocate(SeqId(2), 8)) << "needs 2 blocks, 1 is free";
  EXPECT_FALSE(kv.Has(SeqId(2)));
  EXPECT_EQ(kv.num_free_blocks(), 1);
  // Growing a sequence one block at a time.
  EXPECT_TRUE(kv.Allocate(SeqId(1), 9));
  EXPECT_EQ(Ids(kv.BlockTable(SeqId(1))), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(kv.Allocate(SeqId(1), 12)) << "still 3 blocks";
  EXPECT_FALSE(kv.Allocate(SeqId(1), 13));
  EXPECT_DOUBLE_EQ(kv.Usage(), 1.0);
  kv.Free(SeqId(1));
  EXPECT_DOUBLE_EQ(kv.Usage(), 0.0);
}

TEST(KvCacheManagerTest, ReusingFreeCachedBlocksCountsAgainstFreeSpace) {
  KvCacheManager kv({.num_blocks = 3, .block_size = 4});
  std::vector<TokenId> prompt = Tokens(9);
  ASSERT_TRUE(kv.Allocate(SeqId(1), 9));
  kv.CacheComputedBlocks(SeqId(1), prompt, 9, 0);
  kv.Free(SeqId(1));  // 3 free, 2 of them cached
  CachedPrefix prefix = kv.FindCachedPrefix(Tokens(13), 0);
  ASSERT_EQ(prefix.num_tokens, 8);
  // 13 tokens = 4 blocks: 2 cached + 2 new, but only 1 block is free besides the cached ones.
  EXPECT_FALSE(kv.Allocate(SeqId(2), 13, prefix));
  EXPECT_TRUE(kv.Allocate(SeqId(2), 12, prefix));
  EXPECT_EQ(kv.num_free_blocks(), 0);
}

TEST(KvCacheManagerTest, DisabledPrefixCachingNeverHits) {
  KvCacheManager kv({.num_blocks = 4, .block_size = 4, .enable_prefix_caching = false});
  std::vector<TokenId> prompt = Tokens(9);
  ASSERT_TRUE(kv.Allocate(SeqId(1), 9));
  kv.CacheComputedBlocks(SeqId(1), prompt, 9, 0);
  kv.Free(SeqId(1));
  EXPECT_EQ(kv.FindCachedPrefix(prompt, 0).num_tokens, 0);
}

// Window 6, blocks of 4: a query at position p sees p - 5 .. p.
TEST(KvCacheManagerTest, WindowBlocksBehindTheWindowGoBack) {
  KvCacheManager kv({.num_blocks = 16, .block_size = 4, .window = 6, .window_num_blocks = 8});
  ASSERT_TRUE(kv.Allocate(SeqId(1), 8));
  kv.ReleaseOutsideWindow(SeqId(1), 8);  // position 8 sees 3..8: block 0 still
  EXPECT_EQ(kv.window_num_free_blocks(), 6);
  ASSERT_TRUE(kv.Allocate(SeqId(1), 12));
  kv.ReleaseOutsideWindow(SeqId(1), 9);  // 9 sees 4..9: blocks 1, 2
  EXPECT_EQ(Ids(kv.WindowBlockTable(SeqId(1))), (std::vector<int>{-1, 1, 2}));
  EXPECT_EQ(Ids(kv.BlockTable(SeqId(1))), (std::vector<int>{0, 1, 2})) << "the main table keeps everything";
  EXPECT_EQ(kv.window_num_free_blocks(), 6);
  EXPECT_EQ(kv.num_free_blocks(), 13);
  EXPECT_DOUBLE_EQ(kv.Usage(), 2.0 / 8) << "the fuller pool";
  kv.Shrink(SeqId(1), 6);  // positions 6..11 were never kept
  EXPECT_EQ(Ids(kv.WindowBlockTable(SeqId(1))), (std::vector<int>{-1, 1}));
  kv.Free(SeqId(1));
  EXPECT_EQ(kv.window_num_free_blocks(), 8);
  EXPECT_EQ(kv.num_free_blocks(), 16);
  EXPECT_EQ(kv.WindowBlocksPerSequence(1), 3) << "positions 3..8 from p = 8";
}

// A cached prefix needs its full blocks and the window blocks the next
// token's query sees: the window blocks before them may be gone.
TEST(KvCacheManagerTest, ACachedPrefixNeedsOnlyTheWindowItsNextTokenSees) {
  KvCacheManager kv({.num_blocks = 32, .block_size = 4, .window = 6, .window_num_blocks = 8});
  const std::vector<TokenId> a = Tokens(24);
  ASSERT_TRUE(kv.Allocate(SeqId(1), 24));
  kv.CacheComputedBlocks(SeqId(1), a, 24, 0);
  kv.ReleaseOutsideWindow(SeqId(1), 24);  // 24 sees 19..24: window blocks 0..3 released, still cached
  EXPECT_EQ(Ids(kv.WindowBlockTable(SeqId(1))), (std::vector<int>{-1, -1, -1, -1, 4, 5}));
  kv.Free(SeqId(1));
  // Evict window blocks 0..3 (and the two never used): six blocks for a sequence never cached.
  ASSERT_TRUE(kv.Allocate(SeqId(2), 24));
  kv.Free(SeqId(2));

  // a plus more: the next token, at 24, needs window blocks 4 and 5, cached still.
  std::vector<TokenId> longer = Tokens(30);
  CachedPrefix hit = kv.FindCachedPrefix(longer, 0);
  EXPECT_EQ(hit.num_tokens, 24);
  EXPECT_EQ(hit.blocks.size(), 6u);
  EXPECT_EQ(Ids(hit.window_blocks), (std::vector<int>{-1, -1, -1, -1, 4, 5}));
  ASSERT_TRUE(kv.Allocate(SeqId(3), 30, hit));
  EXPECT_EQ(kv.window_pool().ref_count(BlockId(4)), 1);
  EXPECT_EQ(kv.WindowBlockTable(SeqId(3)).size(), 8u);
  kv.Free(SeqId(3));

  // The first 20 tokens of a, then others: a token at 20, 16, 12 or 8 would
  // need an evicted window block, so nothing of the prefix is usable (4 would
  // need block 0 too).
  std::vector<TokenId> shorter = Tokens(20);
  shorter.push_back(TokenId(999));
  EXPECT_EQ(kv.FindCachedPrefix(shorter, 0).num_tokens, 0);
}

TEST(KvCacheManagerTest, AWindowPoolTooSmallRefusesTheAllocation) {
  KvCacheManager kv({.num_blocks = 32, .block_size = 4, .window = 6, .window_num_blocks = 3});
  EXPECT_FALSE(kv.Allocate(SeqId(1), 16)) << "4 window blocks for the chunk, 3 in the pool";
  EXPECT_EQ(kv.num_free_blocks(), 32) << "nothing taken from either pool";
  EXPECT_TRUE(kv.Allocate(SeqId(1), 12));
}

}  // namespace
}  // namespace tachyon
