// `tachyon serve` end to end: the real binary on a free port, driven by curl.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "run_command.h"
#include "server_process.h"
#include "tests/support/eventually.h"
#include "tests/support/json_schema_validator.h"
#include "tests/support/test_schemas.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;

std::vector<nlohmann::json> SseEvents(const std::string& body, bool* done) {
  std::vector<nlohmann::json> events;
  *done = false;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    size_t end = body.find("\n\n", pos);
    std::string data = body.substr(pos + 6, end - pos - 6);
    if (data == "[DONE]") {
      *done = true;
    } else {
      events.push_back(nlohmann::json::parse(data));
    }
    pos = end;
  }
  return events;
}

class ServeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    if (!fs::exists(StoriesModel())) GTEST_SKIP() << StoriesModel() << " is absent (needs ../shared)";
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{
        "--model", StoriesModel(), "--chat-template", "llama2", "--max-body-bytes", "20000"});
    ASSERT_TRUE(server_->started()) << "no 'listening on' line";
  }
  std::string Post(const std::string& path, const std::string& body) {
    std::string file = ::testing::TempDir() + "/serve_body_" + std::to_string(::getpid()) + ".json";
    { std::ofstream(file) << body; }
    return Curl("-X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + server_->url() + path);
  }
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(ServeTest, CompletionMatchesTachyonRun) {
  // Greedy through the server = greedy through `tachyon run` (llama2.c's text).
  auto body = nlohmann::json::parse(Post("/v1/completions",
                                         R"({"prompt":"Once upon a time","max_tokens":40,"temperature":0})"));
  ASSERT_TRUE(body.contains("choices")) << body.dump();
  std::string text = body["choices"][0]["text"];
  CommandResult run = RunTachyon("run --model " + StoriesModel() + " -p 'Once upon a time' -n 40 --temp 0");
  EXPECT_EQ("Once upon a time" + text + "\n", run.out);
  EXPECT_EQ(body["usage"]["completion_tokens"], 40);
  EXPECT_EQ(body["usage"]["prompt_tokens"], 5);
  EXPECT_EQ(body["object"], "text_completion");
}

TEST_F(ServeTest, StreamingChatWithUsageAndDone) {
  std::string out = Post("/v1/chat/completions",
                         R"({"messages":[{"role":"user","content":"Tell a story"}],"max_tokens":12,
                             "temperature":0,"stream":true,"stream_options":{"include_usage":true}})");
  bool done = false;
  std::vector<nlohmann::json> events = SseEvents(out, &done);
  ASSERT_GE(events.size(), 3u) << out;
  EXPECT_TRUE(done) << "ends with data: [DONE]";
  EXPECT_EQ(events.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(events.back()["usage"]["completion_tokens"], 12);
  EXPECT_TRUE(events.back()["choices"].empty());
  EXPECT_EQ(events[events.size() - 2]["choices"][0]["finish_reason"], "length");
}

TEST_F(ServeTest, StopStringsAreNeverEmitted) {
  auto full = nlohmann::json::parse(Post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":30,"temperature":0})"));
  std::string text = full["choices"][0]["text"];
  ASSERT_GT(text.size(), 20u);
  std::string stop = text.substr(10, 4);  // a piece from the middle
  nlohmann::json request = {{"prompt", "Once upon a time"}, {"max_tokens", 30}, {"temperature", 0}, {"stop", stop}};
  auto stopped = nlohmann::json::parse(Post("/v1/completions", request.dump()));
  EXPECT_EQ(stopped["choices"][0]["text"], text.substr(0, text.find(stop)));
  EXPECT_EQ(stopped["choices"][0]["finish_reason"], "stop");
}

TEST_F(ServeTest, Logprobs) {
  auto body = nlohmann::json::parse(
      Post("/v1/completions", R"({"prompt":"Once upon a time","max_tokens":5,"temperature":0,"logprobs":3})"));
  const auto& lp = body["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 5u) << body.dump();
  std::string joined;
  for (const auto& t : lp["tokens"]) joined += t.get<std::string>();
  EXPECT_EQ(joined, body["choices"][0]["text"]);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_LE(lp["token_logprobs"][i].get<double>(), 0.0);
    EXPECT_EQ(lp["top_logprobs"][i].size(), 3u);
  }
  auto chat = nlohmann::json::parse(Post("/v1/chat/completions",
      R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":3,"temperature":0,"logprobs":true,"top_logprobs":2})"));
  ASSERT_EQ(chat["choices"][0]["logprobs"]["content"].size(), 3u) << chat.dump();
  EXPECT_EQ(chat["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size(), 2u);
}

TEST_F(ServeTest, ErrorsHaveOpenAiShapes) {
  auto bad_json = nlohmann::json::parse(Post("/v1/completions", "{oops"));
  EXPECT_EQ(bad_json["error"]["type"], "invalid_request_error");
  auto wrong_type = nlohmann::json::parse(Post("/v1/completions", R"({"prompt":"x","max_tokens":"9"})"));
  EXPECT_EQ(wrong_type["error"]["param"], "max_tokens");
  auto unknown_model = nlohmann::json::parse(Post("/v1/completions", R"({"model":"gpt-9","prompt":"x"})"));
  EXPECT_EQ(unknown_model["error"]["code"], "model_not_found");
  std::string big = "{\"prompt\":\"" + std::string(30000, 'a') + "\"}";
  std::string too_big = Post("/v1/completions", big);
  EXPECT_NE(too_big.find("body_too_large"), std::string::npos) << too_big.substr(0, 200);
  auto too_long = nlohmann::json::parse(Post("/v1/completions", R"({"prompt":"x","max_tokens":100000})"));
  EXPECT_EQ(too_long["error"]["code"], "context_length_exceeded");
  std::string status = Curl("-o /dev/null -w '%{http_code}' " + server_->url() + "/v1/nothing");
  EXPECT_EQ(status, "404");
  auto models = nlohmann::json::parse(Curl(server_->url() + "/v1/models"));
  EXPECT_EQ(models["data"][0]["id"], "stories260K");
  auto health = nlohmann::json::parse(Curl(server_->url() + "/health"));
  EXPECT_EQ(health["status"], "ok");
  EXPECT_EQ(health["routes"]["stories260K"], "ok");
  EXPECT_EQ(health["backends"]["local"]["state"], "closed");
  auto parts = nlohmann::json::parse(Post("/v1/chat/completions",
      R"({"messages":[{"role":"user","content":[{"type":1,"text":"x"}]}]})"));
  EXPECT_EQ(parts["error"]["param"], "messages[0].content[0]") << "a wrong type inside a part is a 400, not silence";
}

TEST_F(ServeTest, ConcurrentStreamsAndMetricsAgree) {
  std::vector<std::thread> clients;
  std::vector<std::string> outs(16);
  for (int i = 0; i < 16; ++i) {
    clients.emplace_back([&, i] {
      std::string body = "{\"prompt\":\"Once upon a time\",\"max_tokens\":8,\"temperature\":0,\"stream\":true}";
      outs[i] = Curl("-N -X POST --data '" + body + "' " + server_->url() + "/v1/completions");
    });
  }
  for (auto& t : clients) t.join();
  std::vector<std::string> texts;
  for (const std::string& out : outs) {
    bool done = false;
    std::string text;
    for (const auto& e : SseEvents(out, &done)) text += e["choices"][0]["text"].get<std::string>();
    EXPECT_TRUE(done) << out.substr(0, 300);
    texts.push_back(text);
  }
  for (const std::string& t : texts) EXPECT_EQ(t, texts[0]) << "greedy: every stream the same text";
  EXPECT_FALSE(texts[0].empty());
  std::string metrics = Curl(server_->url() + "/metrics");
  const std::string engine = "{model_name=\"stories260K\",backend=\"local\"}";
  const std::string route = "{model_name=\"stories260K\",route=\"stories260K\",backend=\"local\"}";
  EXPECT_NE(metrics.find("tachyon:generation_tokens_total" + engine + " 128\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tachyon:time_to_first_token_seconds_count" + route + " 16\n"), std::string::npos);
  EXPECT_NE(metrics.find("tachyon:prefix_cache_hits_total"), std::string::npos);
  EXPECT_NE(metrics.find("tachyon:request_queue_time_seconds_count" + engine + " 16\n"), std::string::npos);
  EXPECT_NE(metrics.find("tachyon:inter_token_latency_seconds_count" + route + " 112\n"), std::string::npos)
      << "7 gaps per 8-token stream";
  EXPECT_NE(metrics.find("# HELP tachyon:time_to_first_token_seconds "), std::string::npos);
  EXPECT_EQ(server_->Stop(), 0) << "graceful shutdown exits 0";
}

TEST(ServeDemoTest, DisconnectCancelsTheRequestAndFreesItsBlocks) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  // The built-in demo model (no --model), slow enough to cut a 1900-token stream short.
  ServerProcess server({});
  ASSERT_TRUE(server.started());
  std::string body = "{\"prompt\":\"Once\",\"max_tokens\":1900,\"stream\":true,\"ignore_eos\":true}";
  std::string partial = Curl("-N --max-time 0.3 -X POST --data '" + body + "' " + server.url() + "/v1/completions");
  EXPECT_EQ(partial.find("[DONE]"), std::string::npos) << "the stream was cut before its end";
  const std::string demo = "tachyon-demo (random weights)";
  const std::string engine = "{model_name=\"" + demo + "\",backend=\"local\"}";
  const std::string route = "{model_name=\"" + demo + "\",route=\"" + demo + "\",backend=\"local\"}";
  std::string metrics;
  testing::Eventually([&] {
    metrics = Curl(server.url() + "/metrics");
    return metrics.find("request_cancelled_total" + route + " 1\n") != std::string::npos &&
           metrics.find("kv_cache_usage_perc" + engine + " 0\n") != std::string::npos;
  }, 5);
  EXPECT_NE(metrics.find("request_cancelled_total" + route + " 1\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("kv_cache_usage_perc" + engine + " 0\n"), std::string::npos) << "blocks in use back to 0";
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeDemoTest, RequestTimeoutGives504) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  ServerProcess server({"--request-timeout", "0.2"});
  ASSERT_TRUE(server.started());
  std::string out = Curl("-w ' %{http_code}' -X POST --data '{\"prompt\":\"Once\",\"max_tokens\":1900,"
                         "\"ignore_eos\":true}' " + server.url() + "/v1/completions");
  EXPECT_NE(out.find("request_timeout"), std::string::npos) << out.substr(0, 300);
  EXPECT_EQ(out.substr(out.size() - 3), "504");
  EXPECT_EQ(server.Stop(), 0);
}

// The clients' key from a file or the environment, never only from argv; compared in constant time.
TEST(ServeKeyTest, ApiKeyFromAFileOrTheEnvironment) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  const std::string key_file = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "_key.txt";
  std::ofstream(key_file) << "sk-from-file\n";
  auto status_of = [](const ServerProcess& server, const std::string& auth) {
    return Curl("-o /dev/null -w '%{http_code}' " + auth + " " + server.url() + "/v1/models");
  };
  {
    ServerProcess server({"--api-key-file", key_file});
    ASSERT_TRUE(server.started());
    EXPECT_EQ(status_of(server, ""), "401");
    EXPECT_EQ(status_of(server, "-H 'Authorization: Bearer sk-from-filex'"), "401");
    EXPECT_EQ(status_of(server, "-H 'Authorization: Bearer sk-from-fil'"), "401");
    EXPECT_EQ(status_of(server, "-H 'Authorization: Bearer sk-from-file'"), "200");
    EXPECT_EQ(server.Stop(), 0);
  }
  ::setenv("TACHYON_API_KEY", "sk-from-env", 1);
  {
    ServerProcess server({});
    ASSERT_TRUE(server.started());
    EXPECT_EQ(status_of(server, "-H 'Authorization: Bearer sk-from-file'"), "401");
    EXPECT_EQ(status_of(server, "-H 'Authorization: Bearer sk-from-env'"), "200");
    EXPECT_EQ(server.Stop(), 0);
  }
  ::unsetenv("TACHYON_API_KEY");
  CommandResult both = RunTachyon("serve --api-key a --api-key-file " + key_file);
  EXPECT_EQ(both.exit_code, 1);
  EXPECT_NE(both.err.find("exclusive"), std::string::npos) << both.err;
  std::ofstream(key_file) << "\n";
  CommandResult empty = RunTachyon("serve --api-key-file " + key_file);
  EXPECT_EQ(empty.exit_code, 1);
  EXPECT_NE(empty.err.find("is empty"), std::string::npos) << empty.err;
  std::remove(key_file.c_str());
}

// A scraper's key reads /metrics and nothing else; /ready and /health need no key (probes).
TEST(ServeKeyTest, AMetricsKeyReadsOnlyTheMetrics) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  ::setenv("TACHYON_METRICS_KEY", "scrape-k", 1);
  ServerProcess server({"--api-key", "client-k"});
  ::unsetenv("TACHYON_METRICS_KEY");
  ASSERT_TRUE(server.started());
  auto status_of = [&](const std::string& path, const std::string& key) {
    return Curl("-o /dev/null -w '%{http_code}' " + (key.empty() ? "" : "-H 'Authorization: Bearer " + key + "' ") +
                server.url() + path);
  };
  EXPECT_EQ(status_of("/metrics", "scrape-k"), "200");
  EXPECT_EQ(status_of("/metrics", "client-k"), "200");
  EXPECT_EQ(status_of("/metrics", ""), "401");
  EXPECT_EQ(status_of("/metrics", "scrape-kk"), "401");
  EXPECT_EQ(status_of("/v1/models", "scrape-k"), "401") << "the scraper's key is not a client's";
  EXPECT_EQ(status_of("/ready", ""), "200");
  EXPECT_EQ(status_of("/health", ""), "200");
  ServerProcess open({"--api-key", "client-k", "--public-metrics"});
  ASSERT_TRUE(open.started());
  EXPECT_EQ(Curl("-o /dev/null -w '%{http_code}' " + open.url() + "/metrics"), "200");
  EXPECT_EQ(Curl("-o /dev/null -w '%{http_code}' " + open.url() + "/v1/models"), "401") << "only the metrics";
}

// A server on a port with no key: no CORS by default, other origins and foreign Host names refused.
TEST(ServeKeyTest, OriginsHostsAndCors) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  ServerProcess server({"--allowed-origins", "https://app.example.com", "--allowed-hosts", "tachyon.internal"});
  ASSERT_TRUE(server.started());
  const std::string models = server.url() + "/v1/models";
  std::string out = Curl("-i " + models);
  EXPECT_NE(out.find("HTTP/1.1 200"), std::string::npos);
  EXPECT_EQ(out.find("Access-Control-Allow-Origin"), std::string::npos) << "no CORS by default";
  out = Curl("-i -H 'Host: evil.example' " + models);
  EXPECT_NE(out.find("HTTP/1.1 403"), std::string::npos) << out;
  EXPECT_NE(out.find("host_not_allowed"), std::string::npos);
  EXPECT_NE(Curl("-i -H 'Host: tachyon.internal:8000' " + models).find("HTTP/1.1 200"), std::string::npos);
  out = Curl("-i -H 'Origin: https://evil.example' " + models);
  EXPECT_NE(out.find("HTTP/1.1 403"), std::string::npos) << out;
  EXPECT_NE(out.find("origin_not_allowed"), std::string::npos);
  out = Curl("-i -H 'Origin: https://app.example.com' " + models);
  EXPECT_NE(out.find("HTTP/1.1 200"), std::string::npos) << out;
  EXPECT_NE(out.find("Access-Control-Allow-Origin: https://app.example.com"), std::string::npos) << out;
  out = Curl("-i -X OPTIONS -H 'Origin: https://app.example.com' -H 'Access-Control-Request-Method: POST' " +
             server.url() + "/v1/chat/completions");
  EXPECT_NE(out.find("HTTP/1.1 204"), std::string::npos) << out;
  EXPECT_NE(out.find("Access-Control-Allow-Headers: authorization, content-type"), std::string::npos) << out;
  EXPECT_EQ(server.Stop(), 0);
}

// Speculative decoding through the real binary: the same text as without it
// (`tachyon run`, whole and streamed), its counters on /metrics, and a request
// that opts out proposes nothing.
TEST(ServeSpeculativeTest, NgramGivesTheSameTextAndCountsItsWork) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  if (!fs::exists(StoriesModel())) GTEST_SKIP() << StoriesModel() << " is absent (needs ../shared)";
  ServerProcess server({"--model", StoriesModel(), "--speculative", "ngram", "--num-speculative-tokens", "5"});
  ASSERT_TRUE(server.started());
  auto post = [&](const nlohmann::json& body) {
    std::string file = ::testing::TempDir() + "/spec_body_" + std::to_string(::getpid()) + ".json";
    { std::ofstream(file) << body.dump(); }
    return Curl("-N -X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + server.url() +
                "/v1/completions");
  };
  auto counter = [&](const std::string& name) {
    const std::string metrics = Curl(server.url() + "/metrics");
    const std::string key = name + "{model_name=\"stories260K\",backend=\"local\"} ";
    const size_t at = metrics.find(key);
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + key.size()));
  };
  EXPECT_EQ(counter("tachyon:spec_decode_num_draft_tokens_total"), 0);
  const nlohmann::json request = {{"prompt", "Once upon a time"}, {"max_tokens", 150}, {"temperature", 0}};
  auto whole = nlohmann::json::parse(post(request));
  ASSERT_TRUE(whole.contains("choices")) << whole.dump();
  const std::string text = whole["choices"][0]["text"];
  CommandResult run = RunTachyon("run --model " + StoriesModel() + " -p 'Once upon a time' -n 150 --temp 0");
  EXPECT_EQ("Once upon a time" + text + "\n", run.out);
  EXPECT_EQ(whole["usage"]["completion_tokens"], 150);

  nlohmann::json streamed_request = request;
  streamed_request["stream"] = true;
  bool done = false;
  std::string streamed;
  for (const auto& e : SseEvents(post(streamed_request), &done)) streamed += e["choices"][0]["text"].get<std::string>();
  EXPECT_TRUE(done);
  EXPECT_EQ(streamed, text);

  const double drafts = counter("tachyon:spec_decode_num_drafts_total");
  const double proposed = counter("tachyon:spec_decode_num_draft_tokens_total");
  const double accepted = counter("tachyon:spec_decode_num_accepted_tokens_total");
  const double emitted = counter("tachyon:spec_decode_num_emitted_tokens_total");
  EXPECT_GT(accepted, 0);
  EXPECT_GE(proposed, accepted);
  EXPECT_EQ(emitted, accepted + drafts);
  EXPECT_NE(Curl(server.url() + "/metrics").find("tachyon:spec_decode_num_accepted_tokens_per_pos{model_name="
                                                 "\"stories260K\",backend=\"local\",position=\"4\"}"),
            std::string::npos);

  nlohmann::json opted_out = request;
  opted_out["speculative"] = false;
  auto plain = nlohmann::json::parse(post(opted_out));
  EXPECT_EQ(plain["choices"][0]["text"], text);
  EXPECT_EQ(counter("tachyon:spec_decode_num_draft_tokens_total"), proposed) << "an opted-out request proposes nothing";
  nlohmann::json bad = request;
  bad["speculative"] = "no";
  EXPECT_NE(post(bad).find("\"param\":\"speculative\""), std::string::npos);
  EXPECT_EQ(server.Stop(), 0);
}

TEST(ServeSpeculativeTest, BadSpeculativeFlagsAreClearErrors) {
  CommandResult bad = RunTachyon("serve --speculative eagle --port 0");
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("'eagle' is not one of ngram, draft:FILE, off"), std::string::npos) << bad.err;
  CommandResult missing = RunTachyon("serve --speculative draft:/nonexistent/draft.gguf --port 0");
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("/nonexistent/draft.gguf"), std::string::npos) << missing.err;
  CommandResult too_many = RunTachyon("run --model /nonexistent.gguf -p hi --num-speculative-tokens 99");
  EXPECT_EQ(too_many.exit_code, 1);
}

// --chat-template FILE.jinja: chat prompts come from the template file, and its
// refusal is a 400 carrying the template's own message.
TEST(ServeJinjaTest, TemplateFileRendersAndItsRefusalIsA400) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  const std::string gemma = std::string(env != nullptr ? env : TACHYON_SHARED_DIR) +
                            "/fixtures/chat-templates/templates/google-gemma-2-2b-it.jinja";
  if (!fs::exists(StoriesModel()) || !fs::exists(gemma)) GTEST_SKIP() << "needs ../shared";
  ServerProcess server({"--model", StoriesModel(), "--chat-template", gemma});
  ASSERT_TRUE(server.started());
  auto post = [&](const std::string& body) {
    std::string file = ::testing::TempDir() + "/jinja_body_" + std::to_string(::getpid()) + ".json";
    { std::ofstream(file) << body; }
    return Curl("-s -w '\\n%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @" + file + " " +
                server.url() + "/v1/chat/completions");
  };
  const std::string ok = post(R"({"messages":[{"role":"user","content":"Tell a story"}],"max_tokens":4,"temperature":0})");
  EXPECT_EQ(ok.substr(ok.size() - 3), "200") << ok;
  const std::string refused =
      post(R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":4})");
  EXPECT_EQ(refused.substr(refused.size() - 3), "400") << refused;
  EXPECT_NE(refused.find("TemplateError: System role not supported"), std::string::npos) << refused;
  EXPECT_EQ(server.Stop(), 0);
}

// The newer architectures (model gen's tiny shapes) served through the binary,
// each with its family's template (tests/golden/chat-templates): qwen3 and
// qwen3moe with Qwen3's, gemma2 and gemma3 with Gemma 3's (Gemma 2's refuses a
// system turn), phi3 with Phi-4-mini's, a Mixtral-style llama with the chatml
// renderer; chat answers whole and streamed.
TEST(ServeArchitectureTest, NewerArchitecturesServeChat) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  const std::string templates = std::string(TACHYON_SOURCE_DIR) + "/tests/golden/chat-templates/templates/";
  const std::string qwen3 = templates + "Qwen-Qwen3-0.6B.jinja", gemma = templates + "google-gemma-3-1b-it.jinja",
                    phi = templates + "microsoft-Phi-4-mini-instruct.jinja";
  for (const auto& [shape, chat_template] : std::vector<std::pair<std::string, std::string>>{
           {"qwen3-tiny", qwen3}, {"qwen3moe-tiny", qwen3}, {"mixtral-tiny", "chatml"}, {"gemma2-tiny", gemma},
           {"gemma3-tiny", gemma}, {"phi3-tiny", phi}}) {
    const std::string model = ::testing::TempDir() + "/serve_" + shape + "_" + std::to_string(::getpid()) + ".gguf";
    CommandResult gen = RunTachyon("model gen --shape " + shape + " --type q8_0 --seed 3 --out " + model);
    ASSERT_EQ(gen.exit_code, 0) << gen.err;
    ServerProcess server({"--model", model, "--chat-template", chat_template});
    ASSERT_TRUE(server.started()) << shape;
    auto post = [&](const std::string& body) {
      std::string file = ::testing::TempDir() + "/arch_body_" + std::to_string(::getpid()) + ".json";
      { std::ofstream(file) << body; }
      return Curl("-s -N -w '\\n%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @" + file +
                  " " + server.url() + "/v1/chat/completions");
    };
    auto post_completion = [&](const ServerProcess& to, const std::string& body) {
      std::string file = ::testing::TempDir() + "/arch_completion_" + std::to_string(::getpid()) + ".json";
      { std::ofstream(file) << body; }
      return Curl("-s -w '\\n%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @" + file +
                  " " + to.url() + "/v1/completions");
    };
    const std::string whole = post(
        R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0})");
    EXPECT_EQ(whole.substr(whole.size() - 3), "200") << shape << ": " << whole;
    EXPECT_NE(whole.find(R"("completion_tokens":8)"), std::string::npos) << shape << ": " << whole;
    const std::string streamed =
        post(R"({"messages":[{"role":"user","content":"Hi"}],"max_tokens":8,"temperature":0,"stream":true})");
    EXPECT_EQ(streamed.substr(streamed.size() - 3), "200") << shape << ": " << streamed;
    EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos) << shape << ": " << streamed;
    if (shape.rfind("gemma", 0) == 0) {
      // The sliding-window layers (window 8) keep only their windows: a
      // completion well past the window, with its logprobs, is the one a server
      // keeping every token's K/V in every layer gives.
      const std::string request =
          R"({"prompt":"Once upon a time there was a little girl who lived in a house by the sea.",)"
          R"("max_tokens":48,"temperature":0,"ignore_eos":true,"logprobs":2})";
      const std::string windowed = post_completion(server, request);
      ServerProcess whole_server({"--model", model, "--chat-template", chat_template, "--no-window-pool"});
      ASSERT_TRUE(whole_server.started()) << shape;
      const std::string whole_kv = post_completion(whole_server, request);
      auto choice = [](const std::string& reply) {
        const nlohmann::json j = nlohmann::json::parse(reply.substr(0, reply.rfind('\n')), nullptr, false);
        return j.is_discarded() ? nlohmann::json() : j["choices"][0];
      };
      ASSERT_EQ(windowed.substr(windowed.size() - 3), "200") << shape << ": " << windowed;
      EXPECT_EQ(choice(windowed), choice(whole_kv)) << shape;
      EXPECT_EQ(choice(windowed)["logprobs"]["tokens"].size(), 48u) << shape;
      EXPECT_EQ(whole_server.Stop(), 0);
    }
    EXPECT_EQ(server.Stop(), 0);
    fs::remove(model);
  }
}

// response_format through the binary: answers under every test schema (whole
// and streamed) parse and validate; json_object gives an object; a schema the
// compiler cannot honour and a forced tool call are 400s that say why.
TEST(ServeStructuredOutputTest, AnswersFollowTheSchema) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  if (!fs::exists(StoriesModel())) GTEST_SKIP() << StoriesModel() << " is absent (needs ../shared)";
  ServerProcess server({"--model", StoriesModel()});
  ASSERT_TRUE(server.started());
  auto post = [&](const nlohmann::json& body) {
    std::string file = ::testing::TempDir() + "/structured_body_" + std::to_string(::getpid()) + ".json";
    { std::ofstream(file) << body.dump(); }
    return Curl("-s -N -w '\\n%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @" + file +
                " " + server.url() + "/v1/completions");
  };
  auto split = [](const std::string& reply, std::string* body) {
    const size_t nl = reply.rfind('\n');
    *body = reply.substr(0, nl);
    return reply.substr(nl + 1);
  };
  for (const std::string& text : testing::TestSchemas()) {
    const nlohmann::json schema = nlohmann::json::parse(text);
    testing::SchemaValidator validator(schema);
    for (int seed = 0; seed < 3; ++seed) {
      nlohmann::json request = {{"prompt", "Once upon a time"}, {"max_tokens", 200}, {"temperature", 1},
                                {"seed", seed},
                                {"response_format", {{"type", "json_schema"},
                                                     {"json_schema", {{"name", "t"}, {"schema", schema}}}}}};
      std::string body;
      ASSERT_EQ(split(post(request), &body), "200") << body;
      const nlohmann::json reply = nlohmann::json::parse(body);
      const std::string answer = reply["choices"][0]["text"];
      const nlohmann::json value = nlohmann::json::parse(answer, nullptr, false);
      ASSERT_FALSE(value.is_discarded()) << answer;
      EXPECT_EQ(validator.Check(value), "") << answer;
      request["stream"] = true;
      ASSERT_EQ(split(post(request), &body), "200");
      bool done = false;
      std::string streamed;
      for (const auto& e : SseEvents(body, &done)) {
        if (!e["choices"].empty()) streamed += e["choices"][0]["text"].get<std::string>();
      }
      EXPECT_TRUE(done);
      EXPECT_EQ(streamed, answer) << "the same seed streams the same answer";
    }
  }
  std::string body;
  ASSERT_EQ(split(post({{"prompt", "Once"}, {"max_tokens", 100}, {"response_format", {{"type", "json_object"}}}}), &body),
            "200");
  EXPECT_TRUE(nlohmann::json::parse(nlohmann::json::parse(body)["choices"][0]["text"].get<std::string>()).is_object());
  const nlohmann::json bad_schema = {
      {"prompt", "Once"},
      {"response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "t"}, {"schema", {{"type", "string"}, {"pattern", "^a"}}}}}}}};
  EXPECT_EQ(split(post(bad_schema), &body), "400");
  EXPECT_NE(body.find("'pattern' is not supported"), std::string::npos) << body;
  EXPECT_NE(body.find("\"param\":\"response_format\""), std::string::npos) << body;
  EXPECT_EQ(split(post({{"prompt", "Once"}, {"response_format", {{"type", "xml"}}}}), &body), "400");
  EXPECT_EQ(server.Stop(), 0);
}

// Tools through the binary (stories260K, 512 tokens of context, with a small
// ChatML template that writes calls Hermes-style): a forced call (required, or a named function) is always a
// valid call whose arguments validate against the tool's parameters, whole and
// streamed as delta.tool_calls; tool calls and results in the history render.
TEST(ServeToolsTest, ForcedCallsAreValidCalls) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  if (!fs::exists(StoriesModel())) GTEST_SKIP() << StoriesModel() << " is absent (needs ../shared)";
  const std::string chatml = ::testing::TempDir() + "/tools_chatml_" + std::to_string(::getpid()) + ".jinja";
  {
    std::ofstream(chatml) << "{%- for m in messages %}<|im_start|>{{ m.role }}\n"
                             "{% if m.content %}{{ m.content }}{% endif %}"
                             "{% for c in m.tool_calls or [] %}<tool_call>{{ c.function|tojson }}</tool_call>{% endfor %}"
                             "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";
  }
  ServerProcess server({"--model", StoriesModel(), "--chat-template", chatml});
  ASSERT_TRUE(server.started());
  auto post = [&](const nlohmann::json& body) {
    std::string file = ::testing::TempDir() + "/tools_body_" + std::to_string(::getpid()) + ".json";
    { std::ofstream(file) << body.dump(); }
    const std::string reply = Curl("-s -N -w '\\n%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary @" +
                                   file + " " + server.url() + "/v1/chat/completions");
    const size_t nl = reply.rfind('\n');
    return std::make_pair(reply.substr(nl + 1), reply.substr(0, nl));
  };
  const nlohmann::json weather = nlohmann::json::parse(R"({"type":"object","properties":{"city":{"type":"string","maxLength":10},
      "unit":{"enum":["celsius","fahrenheit"]}},"required":["city"],"additionalProperties":false})");
  const nlohmann::json search = nlohmann::json::parse(R"({"type":"object","properties":{"query":{"type":"string","maxLength":8},
      "top_k":{"type":"integer","minimum":1,"maximum":5}},"required":["query","top_k"]})");
  const nlohmann::json tools = {{{"type", "function"}, {"function", {{"name", "get_weather"}, {"parameters", weather}}}},
                                {{"type", "function"}, {"function", {{"name", "search_docs"}, {"parameters", search}}}}};
  const std::map<std::string, testing::SchemaValidator> validators = {{"get_weather", testing::SchemaValidator(weather)},
                                                                      {"search_docs", testing::SchemaValidator(search)}};
  nlohmann::json request = {{"messages", {{{"role", "user"}, {"content", "Weather in Oslo?"}}}},
                            {"tools", tools}, {"max_tokens", 120}, {"temperature", 1}};
  int calls = 0;
  for (int seed = 0; seed < 200; ++seed) {
    request["seed"] = seed;
    request["tool_choice"] = seed % 2 == 0 ? nlohmann::json("required")
                                           : nlohmann::json({{"type", "function"}, {"function", {{"name", "search_docs"}}}});
    request["parallel_tool_calls"] = seed % 4 != 1;
    auto [status, body] = post(request);
    ASSERT_EQ(status, "200") << body;
    const nlohmann::json reply = nlohmann::json::parse(body);
    const nlohmann::json& message = reply["choices"][0]["message"];
    EXPECT_EQ(reply["choices"][0]["finish_reason"], "tool_calls") << body;
    ASSERT_TRUE(message.contains("tool_calls")) << body;
    EXPECT_TRUE(message["content"].is_null());
    for (const auto& call : message["tool_calls"]) {
      const std::string name = call["function"]["name"];
      ASSERT_TRUE(validators.count(name)) << body;
      if (seed % 2 == 1) {
        EXPECT_EQ(name, "search_docs");
      }
      const nlohmann::json args = nlohmann::json::parse(call["function"]["arguments"].get<std::string>());
      EXPECT_EQ(validators.at(name).Check(args), "") << body;
      EXPECT_EQ(call["type"], "function");
      EXPECT_FALSE(call["id"].get<std::string>().empty());
      ++calls;
    }
  }
  EXPECT_GE(calls, 200);
  request["stream"] = true;
  request["tool_choice"] = {{"type", "function"}, {"function", {{"name", "get_weather"}}}};
  auto [status, body] = post(request);
  ASSERT_EQ(status, "200");
  bool done = false;
  int deltas = 0;
  std::string reason;
  for (const auto& e : SseEvents(body, &done)) {
    const nlohmann::json& choice = e["choices"][0];
    if (choice["delta"].contains("tool_calls")) {
      const nlohmann::json& call = choice["delta"]["tool_calls"][0];
      EXPECT_EQ(call["index"], 0);
      EXPECT_EQ(call["function"]["name"], "get_weather");
      EXPECT_EQ(validators.at("get_weather").Check(nlohmann::json::parse(call["function"]["arguments"].get<std::string>())), "");
      ++deltas;
    }
    if (!choice["finish_reason"].is_null()) reason = choice["finish_reason"];
  }
  EXPECT_TRUE(done);
  EXPECT_EQ(deltas, 1);
  EXPECT_EQ(reason, "tool_calls");
  // A history with a call and its result renders through the template.
  nlohmann::json history = {{"messages", nlohmann::json::parse(R"([{"role":"user","content":"Weather in Oslo?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{\"city\": \"Oslo\"}"}}]},
      {"role":"tool","tool_call_id":"c1","content":"-3 C"}])")},
                            {"tools", tools}, {"max_tokens", 8}, {"tool_choice", "none"}};
  auto [history_status, history_body] = post(history);
  EXPECT_EQ(history_status, "200") << history_body;
  EXPECT_EQ(post({{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"tool_choice", "required"}}).first, "400");
  EXPECT_EQ(server.Stop(), 0);
  fs::remove(chatml);
}

// Without --no-warmup: the engine gets one one-token request at start, and /ready
// says so (503 "warming" until it has run, then 200); /health is not it.
TEST(ReadyTest, TheEngineWarmsUpBeforeReady) {
  if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  if (!fs::exists(StoriesModel())) GTEST_SKIP() << StoriesModel() << " is absent (needs ../shared)";
  ServerProcess server(TACHYON_BINARY, {"serve", "--port", "0", "--threads", "1", "--model", StoriesModel()});
  ASSERT_TRUE(server.started());
  std::string ready;
  EXPECT_TRUE(testing::Eventually([&] {
    ready = Curl("-w ' %{http_code}' " + server.url() + "/ready");
    return ready.find(" 200") != std::string::npos;
  })) << ready;
  EXPECT_NE(ready.find(R"("status":"ready")"), std::string::npos) << ready;
  const std::string metrics = Curl(server.url() + "/metrics");
  const std::string engine = "{model_name=\"stories260K\",backend=\"local\"}";
  EXPECT_NE(metrics.find("tachyon:generation_tokens_total" + engine + " 1\n"), std::string::npos)
      << "the warm-up's one token";
  EXPECT_NE(Curl("-o /dev/null -w '%{http_code}' " + server.url() + "/nope/ready"), "200");
}

}  // namespace
}  // namespace tachyon::e2e
