// Differential tests of the engine, greedy: the tokens of a request must not
// depend on prefix caching, on the other requests in its batches, on the
// prefill chunk size, or on being preempted and recomputed.
#include "engine/engine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>
#include <random>

#include <unistd.h>

#include "engine/draft_proposer.h"
#include "grammar/json_grammar.h"
#include "grammar/token_mask.h"
#include "model/model_gen.h"
#include "model/model_quantize.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/vocab.h"
#include "tests/support/json_schema_validator.h"
#include "tests/support/test_schemas.h"

namespace tachyon {
namespace {

// Proposes k tokens drawn at random: nearly always rejected, so every step
// writes K/V for positions the sequence never keeps (a test of the rollback).
class RandomProposer : public Proposer {
 public:
  void Propose(std::span<const Query> queries, ThreadPool&) override {
    for (const Query& q : queries) {
      q.draft->clear();
      for (int i = 0; i < q.max_tokens; ++i) q.draft->push_back(TokenId(static_cast<int32_t>(rng_() % 256)));
    }
  }

 private:
  std::mt19937 rng_{5};
};

// One model per test process, generated once; the file is removed once mapped.
const Model& TinyModel() {
  static const std::unique_ptr<Model> model = [] {
    std::string path = ::testing::TempDir() + "/engine_tiny_q8_0_" + std::to_string(::getpid()) + ".gguf";
    const ModelShape& tiny = *FindModelShape("tiny");
    EXPECT_TRUE(GenerateRandomModel({.shape = &tiny, .scheme = PureScheme(GgmlType::kQ8_0), .seed = 3,
                                     .out_path = path, .num_threads = 2})
                    .ok());
    auto loaded = std::move(Model::Load(path)).value();
    std::filesystem::remove(path);
    return loaded;
  }();
  return *model;
}

std::vector<TokenId> Prompt(int n, int seed, int shared_prefix = 0) {
  std::vector<TokenId> t;
  for (int i = 0; i < n; ++i) {
    int source = i < shared_prefix ? 0 : seed;
    t.push_back(TokenId((i * 29 + source * 53 + 7) % 256));
  }
  return t;
}

// Runs the requests to completion; returns each request's generated tokens.
enum class Speculate { kOff, kNgram, kRandom };

// speculate: an n-gram proposer of up to 4 tokens (adaptive), or 3 random
// tokens every step; its counters go to *spec_stats.
std::map<int64_t, std::vector<int32_t>> RunAll(const Model& model, EngineOptions options,
                                               const std::vector<std::vector<TokenId>>& prompts,
                                               int max_tokens, int* num_preemptions = nullptr,
                                               int64_t* prefix_hit_tokens = nullptr,
                                               Speculate speculate = Speculate::kOff,
                                               SpeculativeStats* spec_stats = nullptr) {
  std::unique_ptr<Proposer> proposer;
  if (speculate == Speculate::kNgram) {
    options.speculative = {.mode = SpeculativeMode::kNgram, .num_tokens = 4, .max_batch = 64};
    proposer = std::make_unique<NgramProposer>(1, 4);
  } else if (speculate == Speculate::kRandom) {
    options.speculative = {.mode = SpeculativeMode::kNgram, .num_tokens = 3, .max_batch = 64, .adaptive = false};
    proposer = std::make_unique<RandomProposer>();
  }
  Engine engine(model, nullptr, options, std::move(proposer));
  for (size_t i = 0; i < prompts.size(); ++i) {
    Request r{.id = SeqId(static_cast<int64_t>(i)), .prompt = prompts[i],
              .sampling = {.temperature = 0.0f}, .max_tokens = max_tokens, .ignore_eos = true};
    Status s = engine.Add(std::move(r));
    EXPECT_TRUE(s.ok()) << s.ToString();
  }
  std::map<int64_t, std::vector<int32_t>> out;
  int finished = 0, steps = 0;
  while (engine.HasWork() && steps++ < 10000) {
    for (const RequestOutput& o : engine.Step()) {
      for (TokenId t : o.new_tokens) out[o.id.value()].push_back(t.value());
      if (o.finish_reason != FinishReason::kNone) {
        EXPECT_EQ(o.finish_reason, FinishReason::kLength);
        ++finished;
      }
    }
    if (num_preemptions) {
      // Count sequences that were ever preempted (the scheduler keeps the count per sequence).
      for (size_t i = 0; i < prompts.size(); ++i) {
        if (const Sequence* s = engine.scheduler().Find(SeqId(static_cast<int64_t>(i)))) {
          *num_preemptions = std::max(*num_preemptions, s->num_preemptions);
        }
      }
    }
  }
  EXPECT_EQ(finished, static_cast<int>(prompts.size()));
  if (prefix_hit_tokens) *prefix_hit_tokens = engine.kv().prefix_hit_tokens();
  if (spec_stats) *spec_stats = engine.speculative_stats();
  EXPECT_EQ(engine.kv().num_free_blocks(), engine.kv().num_blocks()) << "every block returned";
  EXPECT_EQ(engine.kv().window_num_free_blocks(), engine.kv().window_num_blocks()) << "every window block returned";
  return out;
}

EngineOptions Options(int num_blocks, int64_t budget, bool prefix_caching = true) {
  return {.kv = {.num_blocks = num_blocks, .block_size = 16, .enable_prefix_caching = prefix_caching},
          .scheduler = {.max_num_batched_tokens = budget, .max_num_seqs = 32, .max_model_len = 2048},
          .num_threads = 2};
}

TEST(EngineTest, OneRequestAloneEqualsAmongSixteen) {
  const Model* model = &TinyModel();
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 16; ++i) prompts.push_back(Prompt(20 + 3 * i, i + 1));
  auto together = RunAll(*model, Options(256, 512), prompts, 12);
  for (int i : {0, 7, 15}) {
    auto alone = RunAll(*model, Options(256, 512), {prompts[i]}, 12);
    EXPECT_EQ(alone[0], together[i]) << "request " << i;
  }
}

TEST(EngineTest, PrefixCachingOnAndOffGiveTheSameTokens) {
  const Model* model = &TinyModel();
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 6; ++i) prompts.push_back(Prompt(70, i + 1, /*shared_prefix=*/50));
  // A small budget staggers the requests, so later ones find the shared blocks cached.
  int64_t hits_on = 0, hits_off = 0;
  auto on = RunAll(*model, Options(256, 64, true), prompts, 10, nullptr, &hits_on);
  auto off = RunAll(*model, Options(256, 64, false), prompts, 10, nullptr, &hits_off);
  EXPECT_EQ(on, off);
  EXPECT_GE(hits_on, 5 * 48) << "each later request reuses the 3 full blocks of the shared 50 tokens";
  EXPECT_EQ(hits_off, 0);
}

// The workload in small: 4 concurrent requests share a long prefix.
TEST(EngineTest, ConcurrentSharedPrefixIsComputedOnce) {
  const Model* model = &TinyModel();
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(Prompt(170, i + 1, /*shared_prefix=*/160));
  auto run = [&](bool dedup, int64_t* computed) {
    EngineOptions options = Options(256, 1024);  // room for all four prompts in one step
    options.scheduler.deduplicate_in_flight_prefixes = dedup;
    Engine engine(*model, nullptr, options);
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_TRUE(engine.Add({.id = SeqId(static_cast<int64_t>(i)), .prompt = prompts[i],
                              .sampling = {.temperature = 0.0f}, .max_tokens = 8, .ignore_eos = true})
                      .ok());
    }
    std::map<int64_t, std::vector<int32_t>> out;
    while (engine.HasWork()) {
      for (const RequestOutput& o : engine.Step()) {
        for (TokenId t : o.new_tokens) out[o.id.value()].push_back(t.value());
      }
    }
    *computed = engine.scheduler().num_prompt_tokens_computed();
    return out;
  };
  int64_t with_dedup = 0, without = 0;
  auto a = run(true, &with_dedup);
  auto b = run(false, &without);
  EXPECT_EQ(a, b);
  // 160 shared tokens = 10 full blocks computed once, then 10 tokens of each request.
  EXPECT_EQ(with_dedup, 160 + 4 * 10);
  EXPECT_EQ(without, 4 * 170) << "without deduplication all four compute the prefix in the same step";
  std::printf("prompt tokens computed, 4 x (160 shared + 10): %lld with deduplication, %lld without\n",
              static_cast<long long>(with_dedup), static_cast<long long>(without));
}

TEST(EngineTest, ChunkedPrefillEqualsOneChunk) {
  const Model* model = &TinyModel();
  std::vector<std::vector<TokenId>> prompts = {Prompt(100, 1), Prompt(37, 2)};
  auto small = RunAll(*model, Options(64, 7), prompts, 8);
  auto big = RunAll(*model, Options(64, 1024), prompts, 8);
  EXPECT_EQ(small, big);
}

TEST(EngineTest, PreemptedRequestsRecomputeToTheSameTokens) {
  const Model* model = &TinyModel();
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(Prompt(40, i + 1));
  int preemptions = 0;
  // 4 requests of 40 + 40 tokens need 5 blocks each; 12 blocks force preemption.
  auto tight = RunAll(*model, Options(12, 512, false), prompts, 40, &preemptions);
  auto roomy = RunAll(*model, Options(64, 512, false), prompts, 40);
  EXPECT_GT(preemptions, 0) << "the test must exercise preemption";
  EXPECT_EQ(tight, roomy);
}

std::string Stories260KPath() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/models/stories260K.gguf";
}

// 8 prompts: BOS, then a shared 40-token start and 5 tokens of each one's own.
std::vector<std::vector<TokenId>> Stories260KPrompts() {
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 8; ++i) {
    std::vector<TokenId> p = {TokenId(1)};
    for (int k = 0; k < 45; ++k) p.push_back(TokenId(3 + (k < 40 ? k * 11 : k * 7 + i * 31) % 500));
    prompts.push_back(p);
  }
  return prompts;
}

// The same differential checks on a real trained model, stories260K (greedy text is not flat).
TEST(EngineTest, Stories260KBatchedCachedChunkedPreemptedAllAgree) {
  const std::string path = Stories260KPath();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto model = std::move(Model::Load(path)).value();
  const std::vector<std::vector<TokenId>> prompts = Stories260KPrompts();
  auto reference = RunAll(*model, Options(256, 1024, false), {prompts[3]}, 40);
  auto batched = RunAll(*model, Options(256, 1024, true), prompts, 40);
  auto chunked = RunAll(*model, Options(256, 5, true), prompts, 40);
  int preemptions = 0;
  auto tight = RunAll(*model, Options(16, 1024, true), prompts, 40, &preemptions);
  EXPECT_EQ(batched[3], reference[0]);
  EXPECT_EQ(chunked, batched);
  EXPECT_EQ(tight, batched);
  EXPECT_GT(preemptions, 0);
}

TEST(EngineTest, StopsAtStopTokensAndRejectsBadRequests) {
  const Model* model = &TinyModel();
  Engine engine(*model, nullptr, Options(64, 512));
  auto greedy = RunAll(*model, Options(64, 512), {Prompt(10, 1)}, 5);
  ASSERT_EQ(greedy[0].size(), 5u);
  const int32_t stop = greedy[0][1];
  const size_t stop_at = std::find(greedy[0].begin(), greedy[0].end(), stop) - greedy[0].begin();
  ASSERT_TRUE(engine.Add({.id = SeqId(1), .prompt = Prompt(10, 1), .sampling = {.temperature = 0.0f},
                          .max_tokens = 5, .stop_token_ids = {TokenId(stop)}})
                  .ok());
  std::vector<int32_t> got;
  FinishReason reason = FinishReason::kNone;
  while (engine.HasWork()) {
    for (const RequestOutput& o : engine.Step()) {
      for (TokenId t : o.new_tokens) got.push_back(t.value());
      reason = o.finish_reason;
    }
  }
  EXPECT_EQ(reason, FinishReason::kStop);
  EXPECT_EQ(got, std::vector<int32_t>(greedy[0].begin(), greedy[0].begin() + stop_at + 1))
      << "generation ends with the stop token";
  EXPECT_FALSE(engine.Add({.id = SeqId(2), .prompt = {TokenId(99999)}}).ok());
  EXPECT_FALSE(engine.Add({.id = SeqId(3), .prompt = Prompt(4, 1), .max_tokens = 0}).ok());
  EXPECT_FALSE(engine.Add({.id = SeqId(4), .prompt = Prompt(3000, 1)}).ok()) << "longer than max_model_len";
}

TEST(EngineTest, ExpiredRequestsEndWithTimeout) {
  const Model* model = &TinyModel();
  Engine engine(*model, nullptr, Options(64, 512));
  const auto now = std::chrono::steady_clock::now();
  ASSERT_TRUE(engine.Add({.id = SeqId(1), .prompt = Prompt(20, 1), .max_tokens = 100, .deadline = now}).ok());
  ASSERT_TRUE(engine.Add({.id = SeqId(2), .prompt = Prompt(20, 2), .max_tokens = 3}).ok());
  engine.Step();
  std::vector<RequestOutput> expired = engine.Expire(now + std::chrono::seconds(1));
  ASSERT_EQ(expired.size(), 1u);
  EXPECT_EQ(expired[0].id, SeqId(1));
  EXPECT_EQ(expired[0].finish_reason, FinishReason::kTimeout);
  while (engine.HasWork()) engine.Step();  // request 2 still finishes
  EXPECT_EQ(engine.kv().num_free_blocks(), 64);
}

TEST(EngineTest, LogprobsAreLogSoftmaxOfTheRawLogits) {
  std::vector<float> logits = {1.0f, 3.0f, 2.0f, 3.0f};
  TokenLogprobs lp = Engine::LogprobsOf(logits, TokenId(2), 3);
  const double z = std::exp(1.0) + 2 * std::exp(3.0) + std::exp(2.0);
  EXPECT_NEAR(lp.logprob, 2.0 - std::log(z), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, TokenId(1)) << "ties: lowest id first";
  EXPECT_EQ(lp.top[1].first, TokenId(3));
  EXPECT_EQ(lp.top[2].first, TokenId(2));
  EXPECT_NEAR(lp.top[0].second, 3.0 - std::log(z), 1e-6);
  // Through the engine: greedy picks the top entry, and its logprob is that entry's.
  const Model* model = &TinyModel();
  Engine engine(*model, nullptr, Options(64, 512));
  ASSERT_TRUE(engine.Add({.id = SeqId(1), .prompt = Prompt(12, 1), .sampling = {.temperature = 0.0f},
                          .max_tokens = 4, .num_logprobs = 5})
                  .ok());
  int checked = 0;
  while (engine.HasWork()) {
    for (const RequestOutput& o : engine.Step()) {
      ASSERT_EQ(o.logprobs.size(), o.new_tokens.size());
      for (size_t i = 0; i < o.new_tokens.size(); ++i) {
        ASSERT_EQ(o.logprobs[i].top.size(), 5u);
        EXPECT_EQ(o.logprobs[i].top[0].first, o.new_tokens[i]);
        EXPECT_FLOAT_EQ(o.logprobs[i].top[0].second, o.logprobs[i].logprob);
        EXPECT_LE(o.logprobs[i].logprob, 0.0f);
        ++checked;
      }
    }
  }
  EXPECT_EQ(checked, 4);
}

TEST(EngineTest, EveryKvTypeKeepsTheDifferentialProperties) {
  const Model* model = &TinyModel();  // head_dim 32: Q8_0 rows are whole blocks
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(Prompt(40, i + 1, /*shared_prefix=*/32));
  for (KvType type : {KvType::kF32, KvType::kF16, KvType::kQ8_0}) {
    EngineOptions cached = Options(64, 16), uncached = Options(64, 1024, false);
    cached.kv_type = uncached.kv_type = type;
    EXPECT_EQ(RunAll(*model, cached, prompts, 8), RunAll(*model, uncached, prompts, 8))
        << "kv type " << static_cast<int>(type);
  }
}

const Model& Gemma2Tiny() {
  static const std::unique_ptr<Model> model = [] {
    std::string path = ::testing::TempDir() + "/engine_gemma2_tiny_" + std::to_string(::getpid()) + ".gguf";
    EXPECT_TRUE(GenerateRandomModel({.shape = FindModelShape("gemma2-tiny"), .scheme = PureScheme(GgmlType::kQ8_0),
                                     .seed = 4, .out_path = path, .num_threads = 2})
                    .ok());
    auto loaded = std::move(Model::Load(path)).value();
    std::filesystem::remove(path);
    return loaded;
  }();
  return *model;
}

// Gemma 2's sliding-window layers (window 8) with their K/V in a pool of their
// own whose blocks behind the window go back as a sequence advances: the
// tokens are those of one pool holding every layer, with prefix caching,
// chunked prefill, rejected speculative positions and preemption.
TEST(EngineTest, SlidingWindowPoolGivesTheSameTokens) {
  const Model& model = Gemma2Tiny();
  ASSERT_EQ(model.config().sliding_window, 8);
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(Prompt(45 + 7 * i, i + 1, /*shared_prefix=*/30));
  auto options = [](int num_blocks, int64_t budget, int window_blocks, bool prefix_caching = true) {
    EngineOptions o{.kv = {.num_blocks = num_blocks, .block_size = 4, .enable_prefix_caching = prefix_caching},
                    .scheduler = {.max_num_batched_tokens = budget, .max_num_seqs = 8, .max_model_len = 512},
                    .num_threads = 2};
    if (window_blocks > 0) o.kv.window = 8, o.kv.window_num_blocks = window_blocks;
    return o;
  };
  const auto one_pool = RunAll(model, options(256, 1024, 0, false), prompts, 30);
  int64_t hits = 0;
  EXPECT_EQ(RunAll(model, options(256, 1024, 64, false), prompts, 30), one_pool) << "one chunk each";
  EXPECT_EQ(RunAll(model, options(256, 6, 64), prompts, 30, nullptr, &hits), one_pool) << "chunks of 6, cached";
  EXPECT_GE(hits, 7 * 28) << "later requests reuse the shared prefix's blocks";
  EXPECT_EQ(RunAll(model, options(256, 64, 64), prompts, 30, nullptr, nullptr, Speculate::kRandom), one_pool)
      << "rejected draft positions";
  int preemptions = 0;
  // A sequence prefilling 16 tokens holds up to WindowBlocksPerSequence(8, 4, 16) = 7 window blocks,
  // one decoding 2 or 3: eight at once need more than 12.
  EXPECT_EQ(RunAll(model, options(256, 16, 12), prompts, 30, &preemptions), one_pool) << "a tight window pool";
  EXPECT_GT(preemptions, 0);
}

// A long sequence holds every position's K/V in the main pool and only its
// window's in the window pool.
TEST(EngineTest, SlidingWindowPoolHoldsOnlyTheWindow) {
  const Model& model = Gemma2Tiny();
  EngineOptions o{.kv = {.num_blocks = 128, .block_size = 4, .window = 8, .window_num_blocks = 16},
                  .scheduler = {.max_num_batched_tokens = 16, .max_num_seqs = 4, .max_model_len = 512},
                  .num_threads = 2};
  Engine engine(model, nullptr, o);
  ASSERT_TRUE(engine.Add({.id = SeqId(1), .prompt = Prompt(100, 1), .sampling = {.temperature = 0.0f},
                          .max_tokens = 200, .ignore_eos = true})
                  .ok());
  const int64_t bound = WindowBlocksPerSequence(8, 4, 16);
  int64_t most = 0;
  while (engine.HasWork()) {
    engine.Step();
    most = std::max<int64_t>(most, engine.kv().window_num_blocks() - engine.kv().window_num_free_blocks());
    if (const Sequence* seq = engine.scheduler().Find(SeqId(1))) {
      EXPECT_EQ(engine.kv().num_blocks() - engine.kv().num_free_blocks(), (seq->num_computed_tokens + 3) / 4);
      // After a step: the blocks from the one holding position computed - 7 on.
      const int64_t first = std::max<int64_t>(0, seq->num_computed_tokens - 7) / 4;
      EXPECT_EQ(engine.kv().window_num_blocks() - engine.kv().window_num_free_blocks(),
                (seq->num_computed_tokens + 3) / 4 - first);
    }
  }
  EXPECT_LE(most, bound);
  EXPECT_EQ(engine.kv().window_num_free_blocks(), 16);
  EXPECT_EQ(engine.kv().num_free_blocks(), 128);
}

// PlanKvCache: a model with sliding-window layers gets a window pool sized for
// max_num_seqs windows; one without gets one pool for every layer.
TEST(EngineTest, PlanKvCacheSplitsTheBytes) {
  const ModelConfig& gemma = Gemma2Tiny().config();
  SchedulerOptions s{.max_num_batched_tokens = 64, .max_num_seqs = 4, .max_model_len = 2048};
  auto plan = PlanKvCache(gemma, KvType::kF16, 16, true, true, 0, s);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->kv.window, 8);
  EXPECT_EQ(plan->kv.num_blocks, 4 * 128);
  // 4 x (WindowBlocksPerSequence(8, 16, 1) + 1) + 64 / 16.
  EXPECT_EQ(plan->kv.window_num_blocks, 4 * 3 + 4);
  EXPECT_EQ(plan->block_bytes, KvBuffer::GroupBlockBytes(gemma, 16, KvType::kF16, false));
  EXPECT_EQ(plan->block_bytes + plan->window_block_bytes, KvBuffer::BlockBytes(gemma, 16, KvType::kF16));
  // The same bytes given: split the same way.
  auto given = PlanKvCache(gemma, KvType::kF16, 16, true, true, plan->bytes(), s);
  ASSERT_TRUE(given.ok());
  EXPECT_EQ(given->kv.num_blocks, plan->kv.num_blocks);
  EXPECT_EQ(given->kv.window_num_blocks, plan->kv.window_num_blocks);
  // Too few bytes for the context.
  EXPECT_FALSE(PlanKvCache(gemma, KvType::kF16, 16, true, true, plan->bytes() / 8, s).ok());

  auto off = PlanKvCache(gemma, KvType::kF16, 16, true, /*window_pool=*/false, 0, s);
  ASSERT_TRUE(off.ok());
  EXPECT_EQ(off->kv.window, 0);
  EXPECT_EQ(off->kv.num_blocks, 4 * 128);
  EXPECT_EQ(off->block_bytes, KvBuffer::BlockBytes(gemma, 16, KvType::kF16));

  const ModelConfig& llama = TinyModel().config();
  auto whole = PlanKvCache(llama, KvType::kF16, 16, true, true, 0, s);
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->kv.window, 0);
  EXPECT_EQ(whole->kv.window_num_blocks, 0);
  EXPECT_EQ(whole->kv.num_blocks, 4 * 128);
  EXPECT_EQ(whole->block_bytes, KvBuffer::BlockBytes(llama, 16, KvType::kF16));
}

TEST(EngineTest, CancelFreesBlocks) {
  const Model* model = &TinyModel();
  Engine engine(*model, nullptr, Options(64, 512));
  ASSERT_TRUE(engine.Add({.id = SeqId(1), .prompt = Prompt(50, 1), .max_tokens = 100}).ok());
  engine.Step();
  EXPECT_LT(engine.kv().num_free_blocks(), 64);
  engine.Cancel(SeqId(1));
  EXPECT_EQ(engine.kv().num_free_blocks(), 64);
  EXPECT_FALSE(engine.HasWork());
}


// Speculative decoding never changes greedy output: n-gram proposals verified
// alone, among 16 sequences, with prefix caching, chunked prefill and
// preemption, all equal to decoding without them (random-weight models fall
// into loops, which the n-gram proposer catches: the test checks that
// proposals were accepted and rejected, so both paths run).
TEST(EngineTest, NgramSpeculationKeepsGreedyOutputEverywhere) {
  const Model* model = &TinyModel();
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 16; ++i) prompts.push_back(Prompt(20 + 3 * i, i + 1, /*shared_prefix=*/i % 2 ? 16 : 0));
  auto plain = RunAll(*model, Options(256, 512), prompts, 40);
  SpeculativeStats stats;
  auto together = RunAll(*model, Options(256, 512), prompts, 40, nullptr, nullptr, Speculate::kNgram, &stats);
  EXPECT_EQ(together, plain);
  EXPECT_GT(stats.num_accepted_tokens, 0);
  EXPECT_GT(stats.num_draft_tokens, stats.num_accepted_tokens) << "some proposals must be rejected";
  EXPECT_EQ(stats.num_emitted_tokens, stats.num_accepted_tokens + stats.num_drafts);
  std::printf("16 sequences: %lld drafts, %lld proposed, %lld accepted\n", static_cast<long long>(stats.num_drafts),
              static_cast<long long>(stats.num_draft_tokens), static_cast<long long>(stats.num_accepted_tokens));
  for (int i : {0, 5, 15}) {
    auto alone = RunAll(*model, Options(256, 512), {prompts[i]}, 40, nullptr, nullptr, Speculate::kNgram);
    EXPECT_EQ(alone[0], plain[i]) << "request " << i;
  }
  auto chunked = RunAll(*model, Options(256, 7), prompts, 40, nullptr, nullptr, Speculate::kNgram);
  EXPECT_EQ(chunked, plain);
  SpeculativeStats random_stats;
  auto rejected = RunAll(*model, Options(256, 512), prompts, 40, nullptr, nullptr, Speculate::kRandom, &random_stats);
  EXPECT_EQ(rejected, plain);
  EXPECT_GT(random_stats.num_draft_tokens, 1000) << "random proposals on every step";
  int preemptions = 0;
  std::vector<std::vector<TokenId>> four(prompts.begin(), prompts.begin() + 4);
  auto tight = RunAll(*model, Options(12, 512, false), four, 40, &preemptions, nullptr, Speculate::kNgram);
  EXPECT_GT(preemptions, 0) << "the test must exercise preemption";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tight[i], plain[i]) << "request " << i;
  preemptions = 0;
  auto tight_rejected = RunAll(*model, Options(12, 512, false), four, 40, &preemptions, nullptr, Speculate::kRandom);
  EXPECT_GT(preemptions, 0);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(tight_rejected[i], plain[i]) << "request " << i;
}

// Only verified tokens enter the prefix cache: after a request whose proposals
// were nearly all rejected (their K/V written, then overwritten), a request
// whose prompt is that request's prompt and output reuses the cached blocks
// and decodes exactly as a fresh engine without any cache does.
TEST(EngineTest, RejectedProposalsNeverReachThePrefixCache) {
  const Model* model = &TinyModel();
  EngineOptions options = Options(256, 512);
  options.speculative = {.mode = SpeculativeMode::kNgram, .num_tokens = 5, .max_batch = 64, .adaptive = false};
  Engine engine(*model, nullptr, options, std::make_unique<RandomProposer>());
  const std::vector<TokenId> first = Prompt(37, 4);
  ASSERT_TRUE(engine.Add({.id = SeqId(1), .prompt = first, .sampling = {.temperature = 0.0f}, .max_tokens = 60,
                          .ignore_eos = true})
                  .ok());
  std::vector<TokenId> second = first;
  while (engine.HasWork()) {
    for (const RequestOutput& o : engine.Step()) second.insert(second.end(), o.new_tokens.begin(), o.new_tokens.end());
  }
  const SpeculativeStats stats = engine.speculative_stats();
  ASSERT_GT(stats.num_draft_tokens - stats.num_accepted_tokens, 100) << "the test needs rejected proposals";
  second.push_back(TokenId(9));
  ASSERT_TRUE(engine.Add({.id = SeqId(2), .prompt = second, .sampling = {.temperature = 0.0f}, .max_tokens = 20,
                          .ignore_eos = true})
                  .ok());
  std::vector<int32_t> got;
  const int64_t hits_before = engine.kv().prefix_hit_tokens();
  while (engine.HasWork()) {
    for (const RequestOutput& o : engine.Step()) {
      for (TokenId t : o.new_tokens) got.push_back(t.value());
    }
  }
  EXPECT_EQ(engine.kv().prefix_hit_tokens() - hits_before, (static_cast<int64_t>(second.size()) - 1) / 16 * 16)
      << "every full block of the first request's prompt and verified output is reused";
  auto fresh = RunAll(*model, Options(256, 512, false), {second}, 20);
  EXPECT_EQ(got, fresh[0]);
  auto plain = RunAll(*model, Options(256, 512, false), {first}, 60);
  std::vector<int32_t> generated;
  for (size_t i = first.size(); i + 1 < second.size(); ++i) generated.push_back(second[i].value());
  EXPECT_EQ(generated, plain[0]);
  EXPECT_EQ(engine.kv().num_free_blocks(), engine.kv().num_blocks());
}

// A generated model file of the tiny shape (or its qwen2 variant) under a temporary name.
std::string GenerateTiny(const std::string& name, GgmlType type, uint64_t seed, bool qwen2 = false) {
  std::string path = ::testing::TempDir() + "/" + name + "_" + std::to_string(::getpid()) + ".gguf";
  static ModelShape qwen2_tiny = [] {
    ModelShape shape = *FindModelShape("tiny");
    shape.name = "tiny-qwen2";
    shape.architecture = "qwen2";
    shape.qkv_bias = true;
    return shape;
  }();
  const ModelShape* shape = qwen2 ? &qwen2_tiny : FindModelShape("tiny");
  EXPECT_TRUE(GenerateRandomModel({.shape = shape, .scheme = PureScheme(type), .seed = seed, .out_path = path,
                                   .num_threads = 2})
                  .ok());
  return path;
}

// Runs the prompts with a draft model proposing; returns the tokens and the counters.
std::map<int64_t, std::vector<int32_t>> RunWithDraft(const Model& target, const std::string& draft_path,
                                                     EngineOptions options,
                                                     const std::vector<std::vector<TokenId>>& prompts, int max_tokens,
                                                     SpeculativeStats* stats) {
  const Vocab vocab = std::move(Vocab::FromGguf(target.file())).value();
  options.speculative = {.mode = SpeculativeMode::kDraft, .draft_model = draft_path, .num_tokens = 4, .max_batch = 64};
  auto proposer = MakeProposer(options, vocab);
  EXPECT_TRUE(proposer.ok()) << proposer.status().ToString();
  Engine engine(target, nullptr, options, std::move(proposer).value());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_TRUE(engine.Add({.id = SeqId(static_cast<int64_t>(i)), .prompt = prompts[i],
                            .sampling = {.temperature = 0.0f}, .max_tokens = max_tokens, .ignore_eos = true})
                    .ok());
  }
  std::map<int64_t, std::vector<int32_t>> out;
  while (engine.HasWork()) {
    for (const RequestOutput& o : engine.Step()) {
      for (TokenId t : o.new_tokens) out[o.id.value()].push_back(t.value());
    }
  }
  *stats = engine.speculative_stats();
  EXPECT_EQ(engine.kv().num_free_blocks(), engine.kv().num_blocks());
  return out;
}

// Speculation on a trained model: n-gram proposals and a Q8_0 copy as draft.
TEST(EngineTest, Stories260KSpeculationKeepsGreedyOutput) {
  const std::string path = Stories260KPath();
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto model = std::move(Model::Load(path)).value();
  const std::vector<std::vector<TokenId>> prompts = Stories260KPrompts();
  auto plain = RunAll(*model, Options(256, 1024, true), prompts, 60);
  SpeculativeStats stats;
  auto spec = RunAll(*model, Options(256, 1024, true), prompts, 60, nullptr, nullptr, Speculate::kNgram, &stats);
  EXPECT_EQ(spec, plain);
  auto chunked = RunAll(*model, Options(256, 5, true), prompts, 60, nullptr, nullptr, Speculate::kNgram);
  EXPECT_EQ(chunked, plain);
  int preemptions = 0;
  auto tight = RunAll(*model, Options(16, 1024, true), prompts, 60, &preemptions, nullptr, Speculate::kNgram);
  EXPECT_EQ(tight, plain);
  EXPECT_GT(preemptions, 0);
  EXPECT_GT(stats.num_accepted_tokens, 0);
  std::printf("stories260K, 8 sequences: %lld proposed, %lld accepted\n",
              static_cast<long long>(stats.num_draft_tokens), static_cast<long long>(stats.num_accepted_tokens));
  // A draft: the same model in Q8_0.
  const std::string draft = ::testing::TempDir() + "/stories260K_q8_0_" + std::to_string(::getpid()) + ".gguf";
  ASSERT_TRUE(QuantizeModel(path, draft, PureScheme(GgmlType::kQ8_0), 2).ok());
  SpeculativeStats draft_stats;
  auto options = [](int num_blocks, int64_t budget) {
    EngineOptions o = Options(num_blocks, budget, true);
    o.scheduler.max_model_len = 512;  // stories260K's context (the draft's too)
    return o;
  };
  EXPECT_EQ(RunWithDraft(*model, draft, options(256, 1024), prompts, 60, &draft_stats), plain);
  EXPECT_EQ(RunWithDraft(*model, draft, options(256, 5), prompts, 60, &draft_stats), plain) << "chunked";
  EXPECT_EQ(RunWithDraft(*model, draft, options(16, 1024), prompts, 60, &draft_stats), plain) << "preempted";
  EXPECT_GT(draft_stats.num_accepted_tokens, draft_stats.num_draft_tokens / 2);
  std::filesystem::remove(draft);
}


// A draft model proposes; the output is the target's. The same random weights
// quantized to Q4_0 agree with the Q8_0 target often (random weights are
// flat: quantization flips many an argmax; 40-60% here); another
// seed's weights almost never: both give the target's tokens, alone and among
// 16 sequences, chunked and preempted, for the llama and qwen2 architectures.
TEST(EngineTest, DraftModelSpeculationKeepsGreedyOutput) {
  for (bool qwen2 : {false, true}) {
    SCOPED_TRACE(qwen2 ? "qwen2" : "llama");
    const std::string target_path = GenerateTiny("target", GgmlType::kQ8_0, 3, qwen2);
    auto target = std::move(Model::Load(target_path)).value();
    std::filesystem::remove(target_path);
    const std::string close = GenerateTiny("draft_close", GgmlType::kQ4_0, 3, qwen2);
    const std::string far = GenerateTiny("draft_far", GgmlType::kQ4_0, 11, qwen2);
    std::vector<std::vector<TokenId>> prompts;
    for (int i = 0; i < 16; ++i) prompts.push_back(Prompt(20 + 3 * i, i + 1, /*shared_prefix=*/i % 2 ? 16 : 0));
    auto plain = RunAll(*target, Options(256, 512), prompts, 30);
    SpeculativeStats close_stats, far_stats, tight_stats;
    EXPECT_EQ(RunWithDraft(*target, close, Options(256, 512), prompts, 30, &close_stats), plain);
    EXPECT_EQ(RunWithDraft(*target, far, Options(256, 512), prompts, 30, &far_stats), plain);
    EXPECT_EQ(RunWithDraft(*target, close, Options(256, 7), prompts, 30, &tight_stats), plain) << "chunked";
    std::vector<std::vector<TokenId>> four(prompts.begin(), prompts.begin() + 4);
    auto tight = RunWithDraft(*target, close, Options(12, 512, false), four, 40, &tight_stats);
    auto tight_plain = RunAll(*target, Options(64, 512, false), four, 40);
    EXPECT_EQ(tight, tight_plain) << "preempted";
    EXPECT_GT(close_stats.num_accepted_tokens, close_stats.num_draft_tokens / 4)
        << close_stats.num_accepted_tokens << " of " << close_stats.num_draft_tokens;
    EXPECT_GT(far_stats.num_draft_tokens, far_stats.num_accepted_tokens);
    std::printf("%s: Q4_0 draft of the same weights: %lld of %lld accepted; another seed's: %lld of %lld\n",
                qwen2 ? "qwen2" : "llama", static_cast<long long>(close_stats.num_accepted_tokens),
                static_cast<long long>(close_stats.num_draft_tokens),
                static_cast<long long>(far_stats.num_accepted_tokens),
                static_cast<long long>(far_stats.num_draft_tokens));
    std::filesystem::remove(close);
    std::filesystem::remove(far);
  }
}

TEST(EngineTest, DraftModelMustShareTheVocabulary) {
  const std::string other = Stories260KPath();
  if (!std::filesystem::exists(other)) GTEST_SKIP() << other << " is absent (needs ../shared)";
  const Vocab vocab = std::move(Vocab::FromGguf(TinyModel().file())).value();
  EngineOptions options = Options(64, 512);
  options.speculative = {.mode = SpeculativeMode::kDraft, .draft_model = other};
  auto refused = MakeProposer(options, vocab);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("a draft needs the same vocabulary"), std::string::npos)
      << refused.status().message();
  options.speculative.draft_model = "/nonexistent/draft.gguf";
  EXPECT_FALSE(MakeProposer(options, vocab).ok());
}


// Sampled output with speculation follows the target's distribution: the
// second, third and fourth tokens (the first comes from the prompt's pass, before any
// proposal) of 2,048 seeded requests at temperature 1 and top-k 4, with a
// draft model (the same weights in Q4_0, so that many proposals are accepted)
// and without, compared by a two-sample chi-square test at p = 0.001.
TEST(EngineTest, SpeculationKeepsTheSampledDistribution) {
  const std::string draft = GenerateTiny("draft_sampling", GgmlType::kQ4_0, 3);
  const Vocab vocab = std::move(Vocab::FromGguf(TinyModel().file())).value();
  auto sample = [&](bool speculate, SpeculativeStats* stats) {
    std::vector<std::map<int32_t, int>> counts(3);  // tokens 2, 3 and 4
    EngineOptions options = Options(1024, 4096);
    options.scheduler.max_num_seqs = 64;
    std::unique_ptr<Proposer> proposer;
    if (speculate) {
      options.speculative = {.mode = SpeculativeMode::kDraft, .draft_model = draft, .num_tokens = 3,
                             .max_batch = 64, .adaptive = false};
      proposer = std::move(MakeProposer(options, vocab)).value();
    }
    Engine engine(TinyModel(), nullptr, options, std::move(proposer));
    for (int round = 0; round < 32; ++round) {
      for (int i = 0; i < 64; ++i) {
        const uint64_t seed = 100000 * static_cast<uint64_t>(speculate) + round * 64 + i;
        EXPECT_TRUE(engine.Add({.id = SeqId(round * 64 + i), .prompt = Prompt(12, 1),
                                .sampling = {.temperature = 1.0f, .top_k = 4, .seed = seed}, .max_tokens = 4,
                                .ignore_eos = true})
                        .ok());
      }
      std::map<int64_t, std::vector<int32_t>> out;
      while (engine.HasWork()) {
        for (const RequestOutput& o : engine.Step()) {
          for (TokenId t : o.new_tokens) out[o.id.value()].push_back(t.value());
        }
      }
      for (const auto& [id, tokens] : out) {
        EXPECT_EQ(tokens.size(), 4u);
        for (int p = 0; p < 3; ++p) counts[p][tokens[p + 1]]++;
      }
    }
    if (stats) *stats = engine.speculative_stats();
    return counts;
  };
  SpeculativeStats stats;
  const auto with = sample(true, &stats);
  const auto without = sample(false, nullptr);
  std::filesystem::remove(draft);
  EXPECT_GT(stats.num_accepted_tokens, 500) << "the test needs accepted proposals";
  EXPECT_LT(stats.num_accepted_tokens, stats.num_draft_tokens) << "and rejected ones";
  static const double kCritical[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12, 27.88, 29.59,
                                     31.26, 32.91, 34.53, 36.12, 37.70, 39.25};
  for (int position = 0; position < 3; ++position) {
    // Equal sample sizes: sum over tokens of (a - b)^2 / (a + b), tokens seen fewer than 10 times pooled.
    std::map<int32_t, std::pair<int, int>> both;
    for (const auto& [t, n] : with[position]) both[t].first += n;
    for (const auto& [t, n] : without[position]) both[t].second += n;
    double chi = 0;
    int categories = 0, pooled_a = 0, pooled_b = 0;
    for (const auto& [t, ab] : both) {
      if (ab.first + ab.second < 10) {
        pooled_a += ab.first;
        pooled_b += ab.second;
        continue;
      }
      chi += static_cast<double>(ab.first - ab.second) * (ab.first - ab.second) / (ab.first + ab.second);
      ++categories;
    }
    if (pooled_a + pooled_b > 0) {
      chi += static_cast<double>(pooled_a - pooled_b) * (pooled_a - pooled_b) / (pooled_a + pooled_b);
      ++categories;
    }
    const int dof = std::min(categories - 1, 16);
    ASSERT_GE(dof, 1);
    EXPECT_LT(chi, kCritical[dof]) << "token " << position + 2 << ": chi-square " << chi << " with " << dof << " dof";
    std::printf("token %d: chi-square %.2f, %d dof (critical %.2f)\n", position + 2, chi, dof, kCritical[dof]);
  }
  std::printf("%lld of %lld proposals accepted\n", static_cast<long long>(stats.num_accepted_tokens),
              static_cast<long long>(stats.num_draft_tokens));
}


// Constrained decoding on the tiny random model: the token bytes come from its
// own tokenizer (a byte-level vocabulary with BOS/EOS).
std::shared_ptr<const TokenTrie> TinyTrie() {
  static const std::shared_ptr<const TokenTrie> trie = [] {
    auto tok = std::move(Tokenizer::FromGguf(TinyModel().file())).value();
    std::vector<std::string> bytes(tok->vocab().size());
    for (int32_t id = 0; id < tok->vocab().size(); ++id) bytes[id] = tok->TokenToPiece(TokenId(id));
    return std::make_shared<const TokenTrie>(bytes);
  }();
  return trie;
}

std::string Text(const std::vector<int32_t>& ids) {
  std::string out;
  for (int32_t id : ids) out += TinyTrie()->bytes(id);
  return out;
}

// Runs requests under a grammar to completion; returns their tokens, and
// counts the finish reasons.
std::map<int64_t, std::vector<int32_t>> RunGrammar(const std::shared_ptr<const JsonGrammar>& grammar,
                                                   int num_requests, SamplingParams sampling, int max_tokens,
                                                   std::map<FinishReason, int>* reasons,
                                                   Speculate speculate = Speculate::kOff) {
  const Vocab vocab = std::move(Vocab::FromGguf(TinyModel().file())).value();
  EngineOptions options = Options(2048, 1024);
  options.scheduler.max_num_seqs = 32;
  std::unique_ptr<Proposer> proposer;
  if (speculate == Speculate::kNgram) {
    options.speculative = {.mode = SpeculativeMode::kNgram, .num_tokens = 4, .max_batch = 64};
    proposer = std::make_unique<NgramProposer>(1, 4);
  }
  Engine engine(TinyModel(), &vocab, options, std::move(proposer));
  auto masker = std::make_shared<GrammarMasker>(grammar, TinyTrie());
  for (int i = 0; i < num_requests; ++i) {
    SamplingParams p = sampling;
    p.seed = sampling.seed + i;
    EXPECT_TRUE(engine.Add({.id = SeqId(i), .prompt = Prompt(8 + i % 5, i + 1), .sampling = p,
                            .max_tokens = max_tokens, .grammar = masker})
                    .ok());
  }
  std::map<int64_t, std::vector<int32_t>> out;
  while (engine.HasWork()) {
    for (const RequestOutput& o : engine.Step()) {
      for (TokenId t : o.new_tokens) out[o.id.value()].push_back(t.value());
      if (o.finish_reason != FinishReason::kNone) ++(*reasons)[o.finish_reason];
    }
  }
  EXPECT_EQ(engine.kv().num_free_blocks(), engine.kv().num_blocks()) << "every block returned";
  return out;
}

// 200 answers sampled at temperature 1 from random weights under each test
// schema: every one ends (by itself, or closed before max_tokens: random
// weights write long strings), parses, and validates under an independent
// validator.
TEST(EngineTest, GrammarSampledAnswersParseAndValidate) {
  for (const std::string& text : testing::TestSchemas()) {
    const nlohmann::json schema = nlohmann::json::parse(text);
    auto grammar = std::move(CompileJsonSchema(nlohmann::ordered_json::parse(text))).value();
    testing::SchemaValidator validator(schema);
    std::map<FinishReason, int> reasons;
    auto out = RunGrammar(grammar, 200, {.temperature = 1.0f, .seed = 1000}, 600, &reasons);
    ASSERT_EQ(out.size(), 200u);
    EXPECT_EQ(reasons[FinishReason::kStop] + reasons[FinishReason::kLength], 200) << text;
    EXPECT_GT(reasons[FinishReason::kStop], 0) << "some answers end by themselves";
    for (const auto& [id, tokens] : out) {
      const std::string answer = Text(tokens);
      nlohmann::json value = nlohmann::json::parse(answer, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << text << "\nanswer " << id << ": " << answer;
      EXPECT_EQ(validator.Check(value), "") << text << "\nanswer " << id << ": " << answer;
    }
  }
}

// A small max_tokens: answers are steered to fit (only tokens after which the
// shortest completion still fits), so they still parse and validate.
TEST(EngineTest, GrammarAnswersFitInASmallMaxTokens) {
  for (const int max_tokens : {30, 45, 80}) {
    for (size_t k : {0u, 2u}) {
      const std::string& text = testing::TestSchemas()[k];
      auto grammar = std::move(CompileJsonSchema(nlohmann::ordered_json::parse(text))).value();
      testing::SchemaValidator validator(nlohmann::json::parse(text));
      std::map<FinishReason, int> reasons;
      auto out = RunGrammar(grammar, 40, {.temperature = 1.0f, .seed = 77}, max_tokens, &reasons);
      for (const auto& [id, tokens] : out) {
        EXPECT_LE(static_cast<int>(tokens.size()), max_tokens);
        nlohmann::json value = nlohmann::json::parse(Text(tokens), nullptr, false);
        ASSERT_FALSE(value.is_discarded()) << max_tokens << ": " << Text(tokens);
        EXPECT_EQ(validator.Check(value), "") << Text(tokens);
      }
    }
  }
}

// json_object with every sampling option on.
TEST(EngineTest, GrammarJsonObjectWithEverySamplingOption) {
  std::map<FinishReason, int> reasons;
  auto out = RunGrammar(AnyJsonObjectGrammar(), 64,
                        {.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .min_p = 0.01f, .repetition_penalty = 1.2f,
                         .presence_penalty = 0.5f, .frequency_penalty = 0.3f, .seed = 7},
                        300, &reasons);
  EXPECT_EQ(reasons[FinishReason::kStop] + reasons[FinishReason::kLength], 64);
  for (const auto& [id, tokens] : out) {
    nlohmann::json value = nlohmann::json::parse(Text(tokens), nullptr, false);
    EXPECT_TRUE(value.is_object()) << Text(tokens);
  }
}

// Greedy under a grammar gives the same tokens with n-gram speculation (a
// proposal the grammar refuses is rejected) as without.
TEST(EngineTest, GrammarGreedyIdenticalWithSpeculation) {
  auto grammar = std::move(CompileJsonSchema(nlohmann::ordered_json::parse(testing::TestSchemas()[0]))).value();
  std::map<FinishReason, int> off_reasons, on_reasons;
  auto off = RunGrammar(grammar, 16, {.temperature = 0.0f}, 400, &off_reasons);
  auto on = RunGrammar(grammar, 16, {.temperature = 0.0f}, 400, &on_reasons, Speculate::kNgram);
  EXPECT_EQ(off, on);
  EXPECT_EQ(off_reasons, on_reasons);
}

}  // namespace
}  // namespace tachyon
