#include "bench/workload.h"

#include "bench/bench_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "bench/arrivals.h"
#include "gguf/gguf_file.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {
namespace {

std::string Shared() {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  return env != nullptr ? env : TACHYON_SHARED_DIR;
}

std::vector<std::string> SplitWords(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string w; ss >> w;) out.push_back(w);
  return out;
}

std::unique_ptr<Workload> Make(WorkloadOptions o) {
  auto w = Workload::Create(o);
  EXPECT_TRUE(w.ok()) << w.status().ToString();
  return w.ok() ? std::move(w).value() : nullptr;
}

TEST(LengthDistTest, ParsesAndSamples) {
  std::mt19937_64 rng(1);
  auto fixed = LengthDist::Parse("64");
  ASSERT_TRUE(fixed.ok());
  EXPECT_EQ(fixed->Sample(rng), 64);
  auto uniform = LengthDist::Parse("uniform:10:20");
  ASSERT_TRUE(uniform.ok());
  std::set<int64_t> seen;
  for (int i = 0; i < 2000; ++i) {
    int64_t v = uniform->Sample(rng);
    ASSERT_GE(v, 10);
    ASSERT_LE(v, 20);
    seen.insert(v);
  }
  EXPECT_EQ(seen.size(), 11u);
  auto normal = LengthDist::Parse("normal:500:50");
  ASSERT_TRUE(normal.ok());
  double sum = 0;
  for (int i = 0; i < 4000; ++i) sum += static_cast<double>(normal->Sample(rng));
  EXPECT_NEAR(sum / 4000, 500, 5);
  auto lognormal = LengthDist::Parse("lognormal:300:0.8");
  ASSERT_TRUE(lognormal.ok());
  std::vector<double> v;
  for (int i = 0; i < 4001; ++i) v.push_back(static_cast<double>(lognormal->Sample(rng)));
  std::nth_element(v.begin(), v.begin() + 2000, v.end());
  EXPECT_NEAR(v[2000], 300, 20) << "the median of a lognormal:MEDIAN:SIGMA";
  EXPECT_EQ(lognormal->ToString(), "lognormal:300:0.8");
  // Never below one token, even far in a normal's left tail.
  auto wide = LengthDist::Parse("normal:2:50");
  for (int i = 0; i < 1000; ++i) ASSERT_GE(wide->Sample(rng), 1);
  for (const char* bad : {"0", "-3", "1.5", "uniform:5:2", "uniform:1", "gauss:1:2", "normal:x:1", ""}) {
    EXPECT_FALSE(LengthDist::Parse(bad).ok()) << bad;
  }
}

TEST(WorkloadTest, RandomIsRepeatableBySeedAndHasTheAskedLengths) {
  WorkloadOptions o{.kind = "random", .num_requests = 20, .seed = 7};
  o.input_len = *LengthDist::Parse("uniform:30:60");
  o.output_len = *LengthDist::Parse("16");
  auto a = Make(o), b = Make(o);
  o.seed = 8;
  auto c = Make(o);
  ASSERT_EQ(a->sessions().size(), 20u);
  EXPECT_EQ(a->num_requests(), 20);
  std::set<std::string> texts;
  for (size_t i = 0; i < 20; ++i) {
    BenchTurn t = a->Turn(i, 0);
    EXPECT_EQ(t.text, b->Turn(i, 0).text);
    EXPECT_NE(t.text, c->Turn(i, 0).text);
    EXPECT_EQ(static_cast<int64_t>(SplitWords(t.text).size()), t.input_tokens);
    EXPECT_GE(t.input_tokens, 30);
    EXPECT_LE(t.input_tokens, 60);
    EXPECT_EQ(t.max_tokens, 16);
    EXPECT_TRUE(t.ids.empty());
    texts.insert(t.text);
  }
  EXPECT_EQ(texts.size(), 20u);
  // Built on demand, in any order, with the same result.
  EXPECT_EQ(a->Turn(13, 0).text, b->Turn(13, 0).text);
}

TEST(WorkloadTest, SharedPrefixSharesExactlyThePrefix) {
  WorkloadOptions o{.kind = "shared-prefix", .num_prefixes = 3, .prefix_len = 40, .num_requests = 9};
  o.input_len = *LengthDist::Parse("10");
  auto w = Make(o);
  std::vector<std::vector<std::string>> words;
  for (size_t i = 0; i < 9; ++i) words.push_back(SplitWords(w->Turn(i, 0).text));
  for (size_t i = 0; i < 9; ++i) {
    ASSERT_EQ(words[i].size(), 50u);
    for (size_t j = i + 1; j < 9; ++j) {
      const bool same_prefix = i % 3 == j % 3;
      EXPECT_EQ(std::equal(words[i].begin(), words[i].begin() + 40, words[j].begin()), same_prefix) << i << " " << j;
      EXPECT_NE(std::vector<std::string>(words[i].begin() + 40, words[i].end()),
                std::vector<std::string>(words[j].begin() + 40, words[j].end()));
    }
  }
}

TEST(WorkloadTest, ErrorsNameTheFlag) {
  EXPECT_NE(Workload::Create({.kind = "nope"}).status().message().find("--workload"), std::string::npos);
  EXPECT_NE(Workload::Create({.kind = "trace"}).status().message().find("--trace"), std::string::npos);
  EXPECT_NE(Workload::Create({.kind = "prompts"}).status().message().find("--prompts"), std::string::npos);
  EXPECT_NE(Workload::Create({.kind = "random", .prompt_ids = true}).status().message().find("--tokenizer"),
            std::string::npos);
  EXPECT_FALSE(Workload::Create({.kind = "shared-prefix", .num_prefixes = 0}).ok());
  EXPECT_FALSE(Workload::Create({.kind = "trace", .trace_path = "/nonexistent.csv"}).ok());
}

class WorkloadFileTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& content) {
    path_ = std::filesystem::temp_directory_path() / ("workload_test_" + std::to_string(::getpid()) + ".jsonl");
    std::ofstream(path_) << content;
    return path_.string();
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }
  std::filesystem::path path_;
};

TEST_F(WorkloadFileTest, PromptsFileShapes) {
  std::string path = Write(
      R"({"prompt": "plain prompt", "max_tokens": 7})"
      "\n"
      R"({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]})"
      "\n\n"
      R"({"turns": ["first turn", "second turn"]})"
      "\n"
      R"({"instruction": "Classify this.", "instances": [{"input": "I love it", "output": "positive"}]})"
      "\n");
  WorkloadOptions o{.kind = "prompts", .prompts_path = path, .num_requests = 0};
  o.output_len = *LengthDist::Parse("32");
  auto w = Make(o);
  ASSERT_EQ(w->num_requests(), 4);
  EXPECT_EQ(w->Turn(0, 0).text, "plain prompt");
  EXPECT_EQ(w->Turn(0, 0).max_tokens, 7);
  EXPECT_EQ(w->Turn(1, 0).messages_json,
            R"([{"content":"be brief","role":"system"},{"content":"hi","role":"user"}])");
  EXPECT_EQ(w->Turn(1, 0).max_tokens, 32);
  EXPECT_EQ(w->Turn(2, 0).text, "first turn");
  EXPECT_EQ(w->Turn(3, 0).text, "Classify this.\nI love it");
  // Cycled to reach --num-requests.
  o.num_requests = 10;
  EXPECT_EQ(Make(o)->Turn(6, 0).text, "first turn");
  // Conversation: the turns of each line are one session.
  o.kind = "conversation";
  o.num_requests = 0;
  auto conv = Make(o);
  EXPECT_EQ(conv->num_requests(), 5);
  EXPECT_EQ(conv->sessions()[2].num_turns, 2);
  EXPECT_EQ(conv->Turn(2, 1).text, "second turn");
  EXPECT_TRUE(conv->Turn(2, 1).conversation);
}

TEST_F(WorkloadFileTest, BadPromptLinesNameTheLine) {
  std::string path = Write("{\"prompt\": \"ok\"}\n{\"prompt\": 3}\n");
  auto w = Workload::Create({.kind = "prompts", .prompts_path = path});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(":2: 'prompt' must be a string"), std::string::npos) << w.status().message();
  path = Write("not json\n");
  EXPECT_NE(Workload::Create({.kind = "prompts", .prompts_path = path}).status().message().find(":1: not a JSON"),
            std::string::npos);
  path = Write("{\"other\": 1}\n");
  EXPECT_NE(Workload::Create({.kind = "prompts", .prompts_path = path}).status().message().find("no prompt"),
            std::string::npos);
}

TEST(WorkloadSharedDataTest, MtBenchAsPromptsAndAsConversations) {
  const std::string path = Shared() + "/data/prompts/mt_bench/question.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto prompts = Make({.kind = "prompts", .prompts_path = path});
  EXPECT_EQ(prompts->num_requests(), 80);
  EXPECT_EQ(prompts->Turn(0, 0).text.rfind("Compose an engaging travel blog post", 0), 0u);
  auto conv = Make({.kind = "conversation", .prompts_path = path});
  EXPECT_EQ(conv->sessions().size(), 80u);
  EXPECT_EQ(conv->num_requests(), 160);
  EXPECT_EQ(conv->Turn(0, 1).text, "Rewrite your previous response. Start every sentence with the letter A.");
}

TEST_F(WorkloadFileTest, ShareGptConversationsOneRequestPerHumanTurn) {
  const std::string path = Write(R"([{"id": "a", "conversations": [{"from": "human", "value": "Who are you?"},
      {"from": "gpt", "value": "A model."}, {"from": "human", "value": "Bye"}]},
      {"conversations": [{"from": "system", "value": "be brief"}, {"from": "human", "value": "hi"}]}])");
  auto w = Make({.kind = "prompts", .prompts_path = path, .num_requests = 0});
  ASSERT_EQ(w->num_requests(), 3);
  EXPECT_EQ(w->Turn(0, 0).messages_json, R"([{"content":"Who are you?","role":"user"}])");
  EXPECT_EQ(w->Turn(1, 0).messages_json,
            R"([{"content":"Who are you?","role":"user"},{"content":"A model.","role":"assistant"},)"
            R"({"content":"Bye","role":"user"}])");
  EXPECT_EQ(w->Turn(2, 0).messages_json, R"([{"content":"be brief","role":"system"},{"content":"hi","role":"user"}])");
  EXPECT_NE(Workload::Create({.kind = "prompts", .prompts_path = Write(R"([{"conversations": [{"from": "bot", "value": "x"}]}])")})
                .status()
                .message()
                .find("unknown 'from': bot"),
            std::string::npos);
}

// A prompt file's tools and response_format go out with each request.
TEST_F(WorkloadFileTest, PromptFileRequestFieldsAreSent) {
  const std::string path = Write(
      R"({"messages": [{"role": "user", "content": "Weather?"}], "tool_choice": "required",)"
      R"( "tools": [{"type": "function", "function": {"name": "f"}}]})" "\n"
      R"({"prompt": "Extract", "response_format": {"type": "json_object"}, "max_tokens": 9})" "\n");
  auto w = Make({.kind = "prompts", .prompts_path = path, .num_requests = 2});
  const BenchTurn chat = w->Turn(0, 0), plain = w->Turn(1, 0);
  EXPECT_EQ(chat.request_fields, R"({"tool_choice":"required","tools":[{"function":{"name":"f"},"type":"function"}]})");
  const nlohmann::json body = nlohmann::json::parse(RequestBody({.endpoint = "chat"}, chat, {}));
  EXPECT_EQ(body["tool_choice"], "required");
  EXPECT_EQ(body["messages"][0]["content"], "Weather?");
  const nlohmann::json completion = nlohmann::json::parse(RequestBody({.endpoint = "completions"}, plain, {}));
  EXPECT_EQ(completion["response_format"]["type"], "json_object");
  EXPECT_EQ(completion["max_tokens"], 9);
}

TEST(WorkloadSharedDataTest, FastChatIdentityAsShareGpt) {
  const std::string path = Shared() + "/data/prompts/fastchat_identity/dummy_conversation.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto w = Make({.kind = "prompts", .prompts_path = path, .num_requests = 0});
  EXPECT_GT(w->num_requests(), 500);
  EXPECT_EQ(w->Turn(0, 0).messages_json, R"([{"content":"Who are you?","role":"user"}])");
}

TEST(WorkloadSharedDataTest, MooncakeEqualHashIdsGiveEqualText) {
  const std::string path = Shared() + "/data/traces/mooncake/conversation_trace.jsonl";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto trace = ReadMooncakeTrace(path);
  ASSERT_TRUE(trace.ok());
  WorkloadOptions o{.kind = "trace", .trace_path = path, .time_scale = 2, .num_requests = 300};
  auto w = Make(o);
  ASSERT_EQ(w->sessions().size(), 300u);
  EXPECT_TRUE(w->has_arrival_times());
  EXPECT_DOUBLE_EQ(w->sessions()[10].arrival_seconds, (*trace)[10].arrival_seconds / 2);
  // Find two requests whose first hash id is equal, and one whose first differs.
  int checked = 0;
  for (size_t i = 0; i < 300 && checked < 5; ++i) {
    for (size_t j = i + 1; j < 300; ++j) {
      const auto& a = (*trace)[i];
      const auto& b = (*trace)[j];
      if (a.hash_ids.size() < 2 || b.hash_ids.size() < 2 || a.hash_ids[0] != b.hash_ids[0]) continue;
      auto wa = SplitWords(w->Turn(i, 0).text), wb = SplitWords(w->Turn(j, 0).text);
      ASSERT_EQ(static_cast<int64_t>(wa.size()), a.input_tokens);
      ASSERT_EQ(static_cast<int64_t>(wb.size()), b.input_tokens);
      // Shared blocks are identical, block by block, as far as the ids agree.
      size_t common = 0;
      while (common < a.hash_ids.size() && common < b.hash_ids.size() && a.hash_ids[common] == b.hash_ids[common]) {
        ++common;
      }
      const size_t full = std::min<size_t>(common * kMooncakeBlockTokens, std::min(wa.size(), wb.size()));
      EXPECT_TRUE(std::equal(wa.begin(), wa.begin() + full, wb.begin())) << i << " " << j;
      if (common < a.hash_ids.size() && common < b.hash_ids.size() &&
          wa.size() > (common + 1) * kMooncakeBlockTokens && wb.size() > (common + 1) * kMooncakeBlockTokens) {
        EXPECT_FALSE(std::equal(wa.begin() + common * kMooncakeBlockTokens,
                                wa.begin() + (common + 1) * kMooncakeBlockTokens,
                                wb.begin() + common * kMooncakeBlockTokens));
      }
      EXPECT_EQ(w->Turn(i, 0).max_tokens, a.output_tokens);
      ++checked;
      break;
    }
  }
  EXPECT_GT(checked, 0) << "no shared first block in the first 300 requests";
}

TEST(WorkloadSharedDataTest, TraceCapsKeepLongTracesReplayable) {
  const std::string path = Shared() + "/data/traces/azure-llm-2023/AzureLLMInferenceTrace_conv.csv";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
  auto w = Make({.kind = "trace", .trace_path = path, .max_input_len = 300, .max_output_len = 20, .num_requests = 50});
  ASSERT_EQ(w->sessions().size(), 50u);
  bool capped = false;
  for (size_t i = 0; i < 50; ++i) {
    BenchTurn t = w->Turn(i, 0);
    EXPECT_LE(t.input_tokens, 300);
    EXPECT_EQ(static_cast<int64_t>(SplitWords(t.text).size()), t.input_tokens);
    EXPECT_LE(t.max_tokens, 20);
    capped = capped || t.input_tokens == 300;
  }
  EXPECT_TRUE(capped) << "the conv trace's median input is 1,020 tokens";
}

class WorkloadTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string path = Shared() + "/fixtures/tokenizer/ggml-vocab-llama-bpe.gguf";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " is absent (needs ../shared)";
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok());
    file_.emplace(std::move(file).value());
    auto t = Tokenizer::FromGguf(*file_);
    ASSERT_TRUE(t.ok());
    tokenizer_ = std::move(t).value();
  }
  std::optional<GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
};

TEST_F(WorkloadTokenizerTest, WordsAreAboutOneLlama3TokenEach) {
  WorkloadOptions o{.kind = "random", .num_requests = 5};
  o.input_len = *LengthDist::Parse("1000");
  auto w = Make(o);
  for (size_t i = 0; i < 5; ++i) {
    const size_t n = tokenizer_->Encode(w->Turn(i, 0).text, {.add_special = false}).size();
    EXPECT_GE(n, 1000u);
    EXPECT_LE(n, 1020u) << "the word list should be single tokens with a leading space";
  }
}

TEST_F(WorkloadTokenizerTest, WithATokenizerLengthsAreExactAndIdsSharePrefixes) {
  WorkloadOptions o{.kind = "shared-prefix", .num_prefixes = 2, .prefix_len = 100, .num_requests = 4,
                    .tokenizer = tokenizer_.get(), .prompt_ids = true};
  o.input_len = *LengthDist::Parse("uniform:20:30");
  auto w = Make(o);
  const std::vector<TokenId> bos = tokenizer_->Encode("", {});
  ASSERT_EQ(bos.size(), 1u);
  std::vector<std::vector<TokenId>> ids;
  for (size_t i = 0; i < 4; ++i) {
    BenchTurn t = w->Turn(i, 0);
    EXPECT_EQ(static_cast<int64_t>(t.ids.size()), t.input_tokens + 1) << "BOS + exactly the asked tokens";
    EXPECT_EQ(t.ids[0], bos[0]);
    ids.push_back(t.ids);
  }
  EXPECT_TRUE(std::equal(ids[0].begin(), ids[0].begin() + 101, ids[2].begin()));
  EXPECT_FALSE(std::equal(ids[0].begin(), ids[0].begin() + 101, ids[1].begin()));
}

TEST(ArrivalsTest, GammaGapsHaveTheRateAndTheBurstiness) {
  for (double burstiness : {1.0, 4.0, 0.25}) {
    std::vector<double> t = ArrivalTimes(20001, 50, burstiness, 1);
    ASSERT_DOUBLE_EQ(t[0], 0);
    std::vector<double> gaps;
    for (size_t i = 1; i < t.size(); ++i) {
      ASSERT_GE(t[i], t[i - 1]);
      gaps.push_back(t[i] - t[i - 1]);
    }
    double mean = 0, var = 0;
    for (double g : gaps) mean += g / gaps.size();
    for (double g : gaps) var += (g - mean) * (g - mean) / gaps.size();
    EXPECT_NEAR(mean, 1.0 / 50, 0.001) << burstiness;
    // A gamma of shape k has a coefficient of variation of 1 / sqrt(k).
    EXPECT_NEAR(std::sqrt(var) / mean, 1 / std::sqrt(burstiness), 0.06) << burstiness;
  }
  EXPECT_EQ(ArrivalTimes(3, INFINITY, 1, 0), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(ArrivalTimes(50, 10, 1, 9), ArrivalTimes(50, 10, 1, 9));
}

}  // namespace
}  // namespace tachyon
