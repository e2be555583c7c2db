#include "engine/scheduler.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

Sequence Seq(int64_t id, int num_prompt, int first_token = 0, int priority = 0) {
  Sequence s;
  s.id = SeqId(id);
  for (int i = 0; i < num_prompt; ++i) s.tokens.push_back(TokenId(first_token + i));
  s.num_prompt_tokens = num_prompt;
  s.priority = priority;
  return s;
}

struct Step {
  int64_t id, first, n;
  bool samples;
};

std::vector<Step> Steps(const SchedulerOutput& out) {
  std::vector<Step> steps;
  for (const auto& s : out.scheduled) steps.push_back({s.id.value(), s.first_position, s.num_new_tokens, s.samples});
  return steps;
}

bool operator==(const Step& a, const Step& b) {
  return a.id == b.id && a.first == b.first && a.n == b.n && a.samples == b.samples;
}
std::ostream& operator<<(std::ostream& os, const Step& s) {
  return os << "{seq " << s.id << " from " << s.first << " +" << s.n << (s.samples ? " samples" : "") << "}";
}

// Runs one step: the scheduled chunks are computed; each sampling sequence gets token 1000 + step.
SchedulerOutput RunStep(Scheduler& scheduler, int step) {
  SchedulerOutput out = scheduler.Schedule();
  scheduler.OnStepDone(out);
  for (const auto& s : out.scheduled) {
    if (s.samples) scheduler.AppendToken(s.id, TokenId(1000 + step));
  }
  return out;
}

TEST(SchedulerTest, ChunkedPrefillThenDecodeFirst) {
  KvCacheManager kv({.num_blocks = 32, .block_size = 4});
  Scheduler scheduler({.max_num_batched_tokens = 8, .max_num_seqs = 4, .max_model_len = 64}, &kv);
  ASSERT_TRUE(scheduler.Add(Seq(1, 10)).ok());
  // 10 prompt tokens with a budget of 8: a chunk of 8, then 2 (which samples).
  EXPECT_EQ(Steps(RunStep(scheduler, 0)), (std::vector<Step>{{1, 0, 8, false}}));
  ASSERT_TRUE(scheduler.Add(Seq(2, 12, 100)).ok());
  EXPECT_EQ(Steps(RunStep(scheduler, 1)), (std::vector<Step>{{1, 8, 2, true}, {2, 0, 6, false}}));
  // Seq 1 now decodes one token per step, before seq 2's next prompt chunk.
  EXPECT_EQ(Steps(RunStep(scheduler, 2)), (std::vector<Step>{{1, 10, 1, true}, {2, 6, 6, true}}));
  EXPECT_EQ(Steps(RunStep(scheduler, 3)), (std::vector<Step>{{1, 11, 1, true}, {2, 12, 1, true}}));
  EXPECT_EQ(scheduler.Find(SeqId(1))->num_tokens(), 13);
  EXPECT_EQ(scheduler.Find(SeqId(2))->num_computed_tokens, 13);
}

TEST(SchedulerTest, SequenceCapAndPriority) {
  KvCacheManager kv({.num_blocks = 32, .block_size = 4});
  Scheduler scheduler({.max_num_batched_tokens = 100, .max_num_seqs = 2, .max_model_len = 64}, &kv);
  ASSERT_TRUE(scheduler.Add(Seq(1, 3)).ok());
  ASSERT_TRUE(scheduler.Add(Seq(2, 3, 10, /*priority=*/1)).ok());
  ASSERT_TRUE(scheduler.Add(Seq(3, 3, 20, /*priority=*/0)).ok());
  // Priority 0 first (1 and 3, in arrival order); 2 waits for a slot.
  EXPECT_EQ(Steps(RunStep(scheduler, 0)), (std::vector<Step>{{1, 0, 3, true}, {3, 0, 3, true}}));
  EXPECT_EQ(scheduler.num_waiting(), 1);
  scheduler.Remove(SeqId(1));
  EXPECT_EQ(Steps(RunStep(scheduler, 1)), (std::vector<Step>{{3, 3, 1, true}, {2, 0, 3, true}}));
}

TEST(SchedulerTest, ReusesCachedPrefixAcrossRequests) {
  KvCacheManager kv({.num_blocks = 32, .block_size = 4});
  Scheduler scheduler({.max_num_batched_tokens = 100, .max_num_seqs = 4, .max_model_len = 64}, &kv);
  ASSERT_TRUE(scheduler.Add(Seq(1, 10)).ok());
  RunStep(scheduler, 0);
  Sequence second = Seq(2, 10);  // same prompt
  ASSERT_TRUE(scheduler.Add(second).ok());
  // Two full blocks (8 tokens) are cached; only tokens 8 and 9 are computed.
  EXPECT_EQ(Steps(RunStep(scheduler, 1)), (std::vector<Step>{{1, 10, 1, true}, {2, 8, 2, true}}));
  EXPECT_EQ(kv.prefix_hit_tokens(), 8);
  EXPECT_EQ(kv.prefix_query_tokens(), 20);
  EXPECT_EQ(kv.BlockTable(SeqId(2))[0].value(), kv.BlockTable(SeqId(1))[0].value()) << "shared block";
}

TEST(SchedulerTest, PreemptsTheNewestWhenBlocksRunOut) {
  // 4 blocks of 4 tokens; two 7-token prompts take 2 blocks each.
  KvCacheManager kv({.num_blocks = 4, .block_size = 4, .enable_prefix_caching = false});
  Scheduler scheduler({.max_num_batched_tokens = 100, .max_num_seqs = 4, .max_model_len = 64}, &kv);
  ASSERT_TRUE(scheduler.Add(Seq(1, 7)).ok());
  ASSERT_TRUE(scheduler.Add(Seq(2, 7, 50)).ok());
  EXPECT_EQ(Steps(RunStep(scheduler, 0)), (std::vector<Step>{{1, 0, 7, true}, {2, 0, 7, true}}));
  // Position 7 still fits in each sequence's 2 blocks.
  EXPECT_EQ(Steps(RunStep(scheduler, 1)), (std::vector<Step>{{1, 7, 1, true}, {2, 7, 1, true}}));
  // Position 8 needs a third block each: seq 1 gets the blocks of seq 2, which
  // is preempted and recomputed later.
  SchedulerOutput out = RunStep(scheduler, 2);
  EXPECT_EQ(Steps(out), (std::vector<Step>{{1, 8, 1, true}}));
  EXPECT_EQ(out.preempted, (std::vector<SeqId>{SeqId(2)}));
  EXPECT_EQ(scheduler.Find(SeqId(2))->num_computed_tokens, 0);
  EXPECT_EQ(scheduler.Find(SeqId(2))->num_tokens(), 9) << "its generated tokens are kept";
  EXPECT_EQ(kv.num_free_blocks(), 1);
  scheduler.Remove(SeqId(1));
  // Seq 2 recomputes all 9 of its tokens (prompt + the 2 it generated) in one chunk.
  EXPECT_EQ(Steps(RunStep(scheduler, 3)), (std::vector<Step>{{2, 0, 9, true}}));
  EXPECT_EQ(scheduler.Find(SeqId(2))->num_preemptions, 1);
}

TEST(SchedulerTest, SharedPrefixInFlightIsComputedOnce) {
  for (bool dedup : {true, false}) {
    KvCacheManager kv({.num_blocks = 32, .block_size = 4});
    Scheduler scheduler({.max_num_batched_tokens = 20, .max_num_seqs = 4, .max_model_len = 64,
                         .deduplicate_in_flight_prefixes = dedup},
                        &kv);
    // Both prompts: the same 16 tokens (4 blocks), then one token of their own.
    Sequence a = Seq(1, 16), b = Seq(2, 16);
    a.tokens.push_back(TokenId(500));
    b.tokens.push_back(TokenId(600));
    a.num_prompt_tokens = b.num_prompt_tokens = 17;
    ASSERT_TRUE(scheduler.Add(a).ok());
    ASSERT_TRUE(scheduler.Add(b).ok());
    SchedulerOutput first = RunStep(scheduler, 0);
    SchedulerOutput second = RunStep(scheduler, 1);
    if (dedup) {
      // b waits while a computes the shared blocks, then reuses all four.
      EXPECT_EQ(Steps(first), (std::vector<Step>{{1, 0, 17, true}}));
      EXPECT_EQ(Steps(second), (std::vector<Step>{{1, 17, 1, true}, {2, 16, 1, true}}));
      EXPECT_EQ(scheduler.num_prompt_tokens_computed(), 17 + 1);
    } else {
      // b computes the same prefix again, alongside.
      EXPECT_EQ(Steps(first), (std::vector<Step>{{1, 0, 17, true}, {2, 0, 3, false}}));
      EXPECT_EQ(Steps(second), (std::vector<Step>{{1, 17, 1, true}, {2, 3, 14, true}}));
      EXPECT_EQ(scheduler.num_prompt_tokens_computed(), 17 + 17);
    }
  }
}

TEST(SchedulerTest, WaitingForAnInFlightPrefixDoesNotBlockOthers) {
  auto longer = [](int64_t id) {
    Sequence s = Seq(id, 16);  // the 16 tokens of seq 1, then 4 of its own
    for (int i = 0; i < 4; ++i) s.tokens.push_back(TokenId(700 + i));
    s.num_prompt_tokens = 20;
    return s;
  };
  KvCacheManager kv({.num_blocks = 32, .block_size = 4});
  Scheduler scheduler({.max_num_batched_tokens = 12, .max_num_seqs = 4, .max_model_len = 64}, &kv);
  ASSERT_TRUE(scheduler.Add(Seq(1, 16)).ok());
  ASSERT_TRUE(scheduler.Add(longer(2)).ok());       // shares seq 1's blocks: waits
  ASSERT_TRUE(scheduler.Add(Seq(3, 3, 900)).ok());  // unrelated: runs with the leftover budget
  EXPECT_EQ(Steps(RunStep(scheduler, 0)), (std::vector<Step>{{1, 0, 12, false}}));
  EXPECT_EQ(Steps(RunStep(scheduler, 1)), (std::vector<Step>{{1, 12, 4, true}, {3, 0, 3, true}}));
  EXPECT_EQ(scheduler.num_waiting(), 1);
  // Seq 1 computed block 3 at step 1: seq 2 now reuses all four blocks.
  SchedulerOutput out = RunStep(scheduler, 2);
  EXPECT_EQ(Steps(out), (std::vector<Step>{{1, 16, 1, true}, {3, 3, 1, true}, {2, 16, 4, true}}));

  // If the sequence being waited for goes away, the waiting one computes the rest itself.
  KvCacheManager kv2({.num_blocks = 32, .block_size = 4});
  Scheduler other({.max_num_batched_tokens = 12, .max_num_seqs = 4, .max_model_len = 64}, &kv2);
  ASSERT_TRUE(other.Add(Seq(1, 16)).ok());
  ASSERT_TRUE(other.Add(longer(2)).ok());
  RunStep(other, 0);
  other.Remove(SeqId(1));
  EXPECT_EQ(Steps(RunStep(other, 1)), (std::vector<Step>{{2, 12, 8, true}}))
      << "the three blocks seq 1 finished are reused";
}

TEST(SchedulerTest, RejectsPromptsThatCanNeverRun) {
  KvCacheManager kv({.num_blocks = 2, .block_size = 4});
  Scheduler scheduler({.max_num_batched_tokens = 100, .max_num_seqs = 4, .max_model_len = 16}, &kv);
  Status too_long = scheduler.Add(Seq(1, 16));
  EXPECT_EQ(too_long.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("maximum model length of 16"), std::string::npos);
  Status too_big = scheduler.Add(Seq(2, 8));
  EXPECT_EQ(too_big.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(too_big.message().find("needs 3 KV blocks; the cache has 2"), std::string::npos);
  EXPECT_FALSE(scheduler.Add(Seq(3, 0)).ok());
  EXPECT_TRUE(scheduler.empty());
}

// With a window pool (window 6, blocks of 4), a long sequence decodes in a
// few window blocks; a prompt whose chunk cannot fit the window pool is refused.
TEST(SchedulerTest, WindowPoolHoldsOnlyTheWindow) {
  KvCacheManager kv({.num_blocks = 32, .block_size = 4, .window = 6, .window_num_blocks = 6});
  Scheduler scheduler({.max_num_batched_tokens = 8, .max_num_seqs = 4, .max_model_len = 128}, &kv);
  ASSERT_TRUE(scheduler.Add(Seq(1, 20)).ok());
  for (int step = 0; step < 30; ++step) {
    RunStep(scheduler, step);
    const Sequence& seq = *scheduler.Find(SeqId(1));
    // Positions computed - 5 .. computed - 1 (the next query's window), in their blocks.
    const int64_t first = std::max<int64_t>(0, seq.num_computed_tokens - 5) / 4;
    EXPECT_EQ(6 - kv.window_num_free_blocks(), (seq.num_computed_tokens + 3) / 4 - first) << "step " << step;
    EXPECT_EQ(32 - kv.num_free_blocks(), (seq.num_computed_tokens + 3) / 4);
  }
  scheduler.Remove(SeqId(1));
  EXPECT_EQ(kv.window_num_free_blocks(), 6);

  Scheduler wide({.max_num_batched_tokens = 64, .max_num_seqs = 4, .max_model_len = 128}, &kv);
  Status refused = wide.Add(Seq(2, 40));
  EXPECT_EQ(refused.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("needs 11 sliding-window KV blocks; the window cache has 6"), std::string::npos)
      << refused.message();
}

}  // namespace
}  // namespace tachyon
