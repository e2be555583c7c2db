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

#include <unistd.h>

#include "model/model_gen.h"

namespace tachyon {
namespace {

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
std::map<int64_t, std::vector<int32_t>> RunAll(const Model& model, EngineOptions options,
                                               const std::vector<std::vector<TokenId>>& prompts,
                                               int max_tokens, int* num_preemptions = nullptr,
                                               int64_t* prefix_hit_tokens = nullptr) {
  Engine engine(model, nullptr, options);
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
  EXPECT_EQ(engine.kv().num_free_blocks(), engine.kv().num_blocks()) << "every block returned";
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

// The same differential checks on a real trained model, stories260K (greedy text is not flat).
TEST(EngineTest, Stories260KBatchedCachedChunkedPreemptedAllAgree) {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  std::string path = std::string(env != nullptr ? env : TACHYON_SHARED_DIR) + "/fixtures/models/stories260K.gguf";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto model = std::move(Model::Load(path)).value();
  std::vector<std::vector<TokenId>> prompts;
  for (int i = 0; i < 8; ++i) {
    std::vector<TokenId> p = {TokenId(1)};  // BOS, then a shared 40-token start and 5 of its own
    for (int k = 0; k < 45; ++k) p.push_back(TokenId(3 + (k < 40 ? k * 11 : k * 7 + i * 31) % 500));
    prompts.push_back(p);
  }
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

}  // namespace
}  // namespace tachyon
