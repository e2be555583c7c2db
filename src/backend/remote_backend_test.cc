// RemoteBackend against a real HTTP upstream on loopback (tests/support/upstream_server.h).
#include "backend/remote_backend.h"

#include <gtest/gtest.h>

#include <mutex>

#include "tests/support/backend_recorder.h"
#include "tests/support/upstream_server.h"

namespace tachyon {
namespace {

using testing::UpstreamServer;

// Collects a call's output; Wait() blocks until OnDone.
using Collector = testing::BackendRecorder;

BackendRequest Chat(const std::string& body) {
  auto parsed = ParseCompletionRequest(body, Endpoint::kChatCompletions);
  return BackendRequest{.request = std::make_shared<CompletionRequest>(std::get<CompletionRequest>(parsed)),
                        .id = "chatcmpl-1",
                        .created = 1,
                        .model_name = "chat",
                        .arrival = std::chrono::steady_clock::now()};
}

std::unique_ptr<RemoteBackend> Make(const UpstreamServer& up, RemoteBackendOptions o = {}) {
  o.name = "up";
  o.base_url = up.base_url();
  auto b = RemoteBackend::Create(o);
  EXPECT_TRUE(b.ok()) << b.status().ToString();
  return std::move(b).value();
}

TEST(RemoteBackendTest, StreamsEveryEventAsItArrivesAndSendsTheBodyUnchanged) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  up.num_chunks = 4;
  up.gap_ms = 30;
  auto backend = Make(up, {.api_key = "sk-test", .upstream_model = "gpt-up"});
  auto sink = std::make_shared<Collector>();
  backend->Start(Chat(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"stream":true,
                          "tools":[{"type":"function","function":{"name":"f"}}],"x_vendor":7})"),
                 sink);
  ASSERT_TRUE(sink->Wait());
  EXPECT_EQ(sink->result.kind, BackendResult::Kind::kOk) << sink->result.error.message;
  ASSERT_EQ(sink->chunks.size(), 5u) << "4 content chunks and the usage chunk; [DONE] is the server's";
  for (int i = 0; i < 4; ++i) EXPECT_EQ(sink->chunks[i].text, "tok");
  EXPECT_EQ(sink->chunks[3].finish_reason, "stop");
  EXPECT_EQ(sink->result.finish_reason, "stop");
  EXPECT_TRUE(sink->result.has_usage);
  EXPECT_EQ(sink->result.usage.completion_tokens, 4);
  EXPECT_NE(sink->chunks[0].event.find("\"id\":\"up-1\""), std::string::npos) << "the upstream's JSON, unchanged";
  // Not buffered: the chunks arrived about 30 ms apart, not all at the end.
  const double spread = std::chrono::duration<double>(sink->times[3] - sink->times[0]).count();
  EXPECT_GT(spread, 0.080);
  ASSERT_EQ(up.bodies().size(), 1u);
  const nlohmann::json sent = up.bodies()[0];
  EXPECT_EQ(sent["model"], "gpt-up");
  EXPECT_EQ(sent["tools"][0]["function"]["name"], "f") << "fields Tachyon does not read pass through";
  EXPECT_EQ(sent["x_vendor"], 7);
  EXPECT_EQ(up.authorizations()[0], "Bearer sk-test");
}

// The client's bytes go upstream as they came (spacing, key order, escapes), unless an
// object repeats a key: an upstream that keeps the first would then read a field the
// gateway (which keeps the last) never saw, so the parsed body is written again.
TEST(RemoteBackendTest, SendsTheClientsBytesUnlessAKeyRepeats) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  auto backend = Make(up);
  const std::string plain =
      R"({ "messages" : [{"role":"user","content":"hé \/ 1.50"}],  "zeta":1.50, "alpha":[ ] })";
  const std::string repeated =
      R"({"messages":[{"role":"user","content":"first","content":"second"}],"model":"a","model":"chat"})";
  for (const std::string& body : {plain, repeated}) {
    auto sink = std::make_shared<Collector>();
    backend->Start(Chat(body), sink);
    ASSERT_TRUE(sink->Wait());
    EXPECT_EQ(sink->result.kind, BackendResult::Kind::kOk) << sink->result.error.message;
  }
  const std::vector<std::string> sent = up.raw_bodies();
  ASSERT_EQ(sent.size(), 2u);
  EXPECT_EQ(sent[0], plain);
  EXPECT_EQ(sent[1], R"({"messages":[{"content":"second","role":"user"}],"model":"chat"})")
      << "only the values the gateway read";
}

// prompt_cache = "auto" on an OpenAI upstream: canonical bytes (the same content
// is the same prefix whatever the key order) and a prompt_cache_key unless the client set one.
TEST(RemoteBackendTest, AutoPromptCacheSendsCanonicalBytesAndAKey) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  auto backend = Make(up);
  const std::vector<std::string> bodies = {
      R"({"model":"chat","messages":[{"role":"system","content":"S"},{"role":"user","content":"a"}]})",
      R"({ "messages": [{"content":"S", "role":"system"},{"role":"user","content":"b"}], "model":"chat" })",
      R"({"model":"chat","prompt_cache_key":"mine","messages":[{"role":"user","content":"c"}]})"};
  for (const std::string& body : bodies) {
    BackendRequest request = Chat(body);
    request.prompt_cache = {.automatic = true, .scope = "chat"};
    auto sink = std::make_shared<Collector>();
    backend->Start(std::move(request), sink);
    ASSERT_TRUE(sink->Wait());
  }
  const std::vector<std::string> sent = up.raw_bodies();
  ASSERT_EQ(sent.size(), 3u);
  const std::string key = up.bodies()[0]["prompt_cache_key"];
  EXPECT_EQ(key, up.bodies()[1]["prompt_cache_key"]) << "same system prompt, same key";
  EXPECT_EQ(sent[0].substr(0, sent[0].find("\"a\"")), sent[1].substr(0, sent[1].find("\"b\"")))
      << sent[0] << "\n" << sent[1];
  EXPECT_EQ(up.bodies()[2]["prompt_cache_key"], "mine");
}

TEST(RemoteBackendTest, WholeAnswersPassThroughAndFourHundredsAreRejectionsAsTheyAre) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  auto backend = Make(up);
  auto ok = std::make_shared<Collector>();
  backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}]})"), ok);
  ASSERT_TRUE(ok->Wait());
  EXPECT_EQ(ok->result.kind, BackendResult::Kind::kOk);
  EXPECT_EQ(nlohmann::json::parse(ok->result.body)["choices"][0]["message"]["content"], "toktoktok");
  EXPECT_EQ(ok->result.usage.prompt_tokens, 5);
  EXPECT_GE(ok->result.first_byte_seconds, 0);

  up.mode = UpstreamServer::Mode::kStatus;
  up.status = 422;
  auto rejected = std::make_shared<Collector>();
  backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}]})"), rejected);
  ASSERT_TRUE(rejected->Wait());
  EXPECT_EQ(rejected->result.kind, BackendResult::Kind::kRejected);
  EXPECT_EQ(rejected->result.http_status, 422);
  EXPECT_NE(rejected->result.body.find("scripted failure 422"), std::string::npos);

  // A status no client could be given (no body, informational): a bad gateway, not relayed
  // (found by upstream_response_fuzz: a "000" was relayed as it was).
  for (int status : {204, 101}) {
    up.status = status;
    auto odd = std::make_shared<Collector>();
    backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}]})"), odd);
    ASSERT_TRUE(odd->Wait());
    EXPECT_NE(odd->result.kind, BackendResult::Kind::kOk) << status;
    EXPECT_NE(odd->result.kind, BackendResult::Kind::kRejected) << status;
    EXPECT_EQ(odd->result.error.http_status, 502) << status;
    EXPECT_EQ(odd->result.error_kind, "upstream_bad_status") << status << " " << odd->result.error.message;
  }
}

TEST(RemoteBackendTest, FailuresBeforeTheFirstByteMayBeRetriedAfterItNot) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  auto backend = Make(up, {.first_byte_timeout_seconds = 0.2});
  up.mode = UpstreamServer::Mode::kStatus;
  up.status = 503;
  auto five = std::make_shared<Collector>();
  backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}],"stream":true})"), five);
  ASSERT_TRUE(five->Wait());
  EXPECT_EQ(five->result.kind, BackendResult::Kind::kFailed);
  EXPECT_EQ(five->result.error_kind, "upstream_5xx");
  EXPECT_EQ(five->result.http_status, 502);
  EXPECT_NE(five->result.error.message.find("backend 'up'"), std::string::npos) << five->result.error.message;

  up.mode = UpstreamServer::Mode::kHang;
  auto hang = std::make_shared<Collector>();
  backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}],"stream":true})"), hang);
  ASSERT_TRUE(hang->Wait());
  EXPECT_EQ(hang->result.kind, BackendResult::Kind::kFailed);
  EXPECT_EQ(hang->result.error_kind, "first_byte_timeout");
  EXPECT_EQ(hang->result.http_status, 504);

  up.mode = UpstreamServer::Mode::kCutAfter;
  up.num_chunks = 5;
  up.cut_after = 2;
  auto cut = std::make_shared<Collector>();
  backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}],"stream":true})"), cut);
  ASSERT_TRUE(cut->Wait());
  EXPECT_EQ(cut->chunks.size(), 2u);
  EXPECT_EQ(cut->result.kind, BackendResult::Kind::kBroken) << "chunks already went out";
  EXPECT_EQ(cut->result.error_kind, "truncated");

  up.Stop();  // nobody listens there now
  auto dead = std::make_shared<Collector>();
  backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}]})"), dead);
  ASSERT_TRUE(dead->Wait());
  EXPECT_EQ(dead->result.kind, BackendResult::Kind::kFailed);
  EXPECT_EQ(dead->result.error_kind, "connect");
}

TEST(RemoteBackendTest, CancelClosesTheUpstreamConnectionAndSilencesTheCall) {
  UpstreamServer up;
  ASSERT_TRUE(up.ok());
  up.num_chunks = 100;
  up.gap_ms = 20;
  auto backend = Make(up);
  auto sink = std::make_shared<Collector>();
  CancelFn cancel = backend->Start(Chat(R"({"messages":[{"role":"user","content":"hi"}],"stream":true})"), sink);
  ASSERT_TRUE(sink->WaitForChunks(2));
  cancel();
  EXPECT_TRUE(up.WaitClientClosed(1));
  EXPECT_EQ(up.num_client_closed(), 1) << "the upstream saw its client go";
  const size_t seen = sink->num_chunks();
  // The upstream writes a chunk every 20 ms: 100 ms would bring several.
  EXPECT_FALSE(sink->WaitForChunks(seen + 1, 0.1)) << "nothing after the cancel";
  EXPECT_FALSE(sink->Wait(0.05)) << "and no OnDone";
  cancel();  // twice is harmless
}

}  // namespace
}  // namespace tachyon
