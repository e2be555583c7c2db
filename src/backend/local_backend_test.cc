// LocalBackend on a generated tiny model: the same greedy text streamed and whole,
// usage, refusals, cancellation and timeouts.
#include "backend/local_backend.h"

#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <mutex>

#include "model/model_gen.h"
#include "tests/support/backend_recorder.h"

namespace tachyon {
namespace {

using Collector = testing::BackendRecorder;

BackendRequest Completion(const std::string& body) {
  auto parsed = ParseCompletionRequest(body, Endpoint::kCompletions);
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  return BackendRequest{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                        .id = "cmpl-1",
                        .created = 1,
                        .model_name = "tiny",
                        .arrival = std::chrono::steady_clock::now()};
}

class LocalBackendTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    path_ = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_local_backend.gguf";
    ASSERT_TRUE(GenerateRandomModel({.shape = FindModelShape("tiny"), .scheme = PureScheme(GgmlType::kQ8_0),
                                     .seed = 3, .out_path = path_}).ok());
  }
  static void TearDownTestSuite() { std::filesystem::remove(path_); }

  std::unique_ptr<LocalBackend> Make(LocalBackendOptions o = {}) {
    o.model_path = path_;
    o.chat_template = "chatml";
    auto b = LocalBackend::Create(o, &metrics_);
    EXPECT_TRUE(b.ok()) << b.status().ToString();
    return b.ok() ? std::move(b).value() : nullptr;
  }

  static std::string path_;
  MetricsRegistry metrics_;
};
std::string LocalBackendTest::path_;

TEST_F(LocalBackendTest, StreamedAndWholeAnswersCarryTheSameGreedyText) {
  auto backend = Make();
  ASSERT_NE(backend, nullptr);
  auto whole = std::make_shared<Collector>();
  backend->Start(Completion(R"({"prompt":"Hello","max_tokens":12,"temperature":0,"ignore_eos":true})"), whole);
  ASSERT_TRUE(whole->Wait());
  ASSERT_EQ(whole->result.kind, BackendResult::Kind::kOk);
  const nlohmann::json body = nlohmann::json::parse(whole->result.body);
  EXPECT_EQ(body["usage"]["completion_tokens"], 12);
  EXPECT_EQ(body["model"], "tiny");
  EXPECT_EQ(whole->result.finish_reason, "length");
  EXPECT_TRUE(whole->chunks.empty());

  auto streamed = std::make_shared<Collector>();
  backend->Start(Completion(R"({"prompt":"Hello","max_tokens":12,"temperature":0,"ignore_eos":true,
                               "stream":true,"stream_options":{"include_usage":true}})"),
                 streamed);
  ASSERT_TRUE(streamed->Wait());
  ASSERT_EQ(streamed->result.kind, BackendResult::Kind::kOk);
  EXPECT_EQ(streamed->Text(), body["choices"][0]["text"].get<std::string>());
  ASSERT_GE(streamed->chunks.size(), 2u);
  const nlohmann::json last = nlohmann::json::parse(streamed->chunks.back().event);
  EXPECT_EQ(last["usage"]["completion_tokens"], 12) << "the include_usage chunk comes last";
  EXPECT_EQ(streamed->result.usage.prompt_tokens, body["usage"]["prompt_tokens"].get<int64_t>());
  const std::string metrics = metrics_.Render();
  EXPECT_NE(metrics.find("tachyon:generation_tokens_total{model_name=\"" + backend->model_name() +
                         "\",backend=\"local\"} 24\n"),
            std::string::npos)
      << metrics;
}

TEST_F(LocalBackendTest, RefusalsAreRejectionsWithOpenAiErrors) {
  auto backend = Make({.max_model_len = 64});
  ASSERT_NE(backend, nullptr);
  auto n = std::make_shared<Collector>();
  backend->Start(Completion(R"({"prompt":"x","n":2})"), n);
  ASSERT_TRUE(n->done) << "refused before Start returns";
  EXPECT_EQ(n->result.kind, BackendResult::Kind::kRejected);
  EXPECT_EQ(nlohmann::json::parse(n->result.body)["error"]["param"], "n");
  auto longer = std::make_shared<Collector>();
  backend->Start(Completion(R"({"prompt":"x","max_tokens":100})"), longer);
  EXPECT_EQ(longer->result.http_status, 400);
  EXPECT_EQ(longer->result.error_kind, "context_length_exceeded");
  auto ids = std::make_shared<Collector>();
  backend->Start(Completion(R"({"prompt":[1,2,99999],"max_tokens":2})"), ids);
  ASSERT_TRUE(ids->Wait());
  EXPECT_EQ(ids->result.kind, BackendResult::Kind::kRejected) << "the engine refuses an id outside the vocabulary";
  EXPECT_NE(ids->result.body.find("outside the vocabulary"), std::string::npos);
}

// Prompts that cannot fit are refused by their size before they are rendered or
// encoded: an 8 MB single word, 100,000 tiny chat messages.
TEST_F(LocalBackendTest, OversizedPromptsAreRefusedBeforeEncoding) {
  auto backend = Make({.max_model_len = 64});
  ASSERT_NE(backend, nullptr);
  auto word = std::make_shared<Collector>();
  const std::string body = R"({"prompt":")" + std::string(8 << 20, 'a') + R"(","max_tokens":1})";
  backend->Start(Completion(body), word);
  ASSERT_TRUE(word->done) << "refused before Start returns";
  EXPECT_EQ(word->result.error_kind, "context_length_exceeded");
  EXPECT_NE(word->result.body.find("bytes of text, more than fit"), std::string::npos) << word->result.body;

  nlohmann::json chat = {{"messages", nlohmann::json::array()}, {"max_tokens", 1}};
  for (int i = 0; i < 100000; ++i) chat["messages"].push_back({{"role", "user"}, {"content", "x"}});
  auto parsed = ParseCompletionRequest(chat.dump(), Endpoint::kChatCompletions);
  ASSERT_TRUE(std::holds_alternative<CompletionRequest>(parsed));
  auto many = std::make_shared<Collector>();
  backend->Start(BackendRequest{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                                .id = "chatcmpl-1",
                                .created = 1,
                                .model_name = "tiny",
                                .arrival = std::chrono::steady_clock::now()},
                 many);
  ASSERT_TRUE(many->done);
  EXPECT_EQ(many->result.error_kind, "context_length_exceeded");
  EXPECT_NE(many->result.body.find("100000 messages cannot fit"), std::string::npos) << many->result.body;
}

TEST_F(LocalBackendTest, CancelFreesTheSequenceAndATimeoutMidStreamIsBroken) {
  auto backend = Make();
  ASSERT_NE(backend, nullptr);
  auto cancelled = std::make_shared<Collector>();
  CancelFn cancel = backend->Start(
      Completion(R"({"prompt":"Hello","max_tokens":1900,"ignore_eos":true,"stream":true})"), cancelled);
  ASSERT_TRUE(cancelled->WaitForChunks(2));
  cancel();
  EXPECT_TRUE(backend->WaitUntilIdle(30)) << "the cancelled sequence leaves the engine";
  const std::string metrics = metrics_.Render();
  EXPECT_NE(metrics.find("tachyon:num_requests_running{model_name=\"" + backend->model_name() +
                         "\",backend=\"local\"} 0\n"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tachyon:kv_cache_usage_perc{model_name=\"" + backend->model_name() +
                         "\",backend=\"local\"} 0\n"),
            std::string::npos)
      << metrics;
  EXPECT_FALSE(cancelled->done);

  auto timed = Make({.request_timeout_seconds = 0.3});
  ASSERT_NE(timed, nullptr);
  auto slow = std::make_shared<Collector>();
  timed->Start(Completion(R"({"prompt":"Hello","max_tokens":1900,"ignore_eos":true,"stream":true})"), slow);
  ASSERT_TRUE(slow->Wait());
  EXPECT_EQ(slow->result.kind, BackendResult::Kind::kBroken) << "chunks went out before the deadline";
  EXPECT_EQ(slow->result.http_status, 504);
  EXPECT_EQ(slow->result.error.code, "request_timeout");
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

// The stats sampler (and any scrape) runs the collectors on its own thread until
// the server is gone; after Shutdown they must not read the stopped engine (the
// EngineLoop was freed under the collector: a shutdown hung, or worse).
TEST_F(LocalBackendTest, ShutdownTakesItsCollectorAwayFirst) {
  auto backend = Make();
  ASSERT_NE(backend, nullptr);
  metrics_.RunCollectors();
  backend->Shutdown();
  metrics_.RunCollectors();  // the engine's collector is not run any more (ASan would see a freed loop)
  EXPECT_NE(metrics_.Render().find("tachyon:num_requests_running"), std::string::npos) << "the gauges stay";
  backend.reset();  // the destructor after Shutdown: nothing removed twice
  metrics_.RunCollectors();
}

}  // namespace
}  // namespace tachyon
