// Anthropic upstreams end to end: `tachyon serve --config` with `kind = "anthropic"`
// backends in front of tests/support/anthropic_standin (a strict stand-in for
// the Messages API), driven by curl in OpenAI's dialect.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gateway_config_files.h"
#include "run_command.h"
#include "server_process.h"

namespace tachyon::e2e {
namespace {

using json = nlohmann::json;

std::unique_ptr<ServerProcess> Standin(std::vector<std::string> flags = {}) {
  std::vector<std::string> args = {"--port", "0", "--key", "sk-ant-test"};
  args.insert(args.end(), flags.begin(), flags.end());
  return std::make_unique<ServerProcess>(ANTHROPIC_STANDIN_BINARY, args);
}

std::string AnthropicBackend(const std::string& name, const ServerProcess& up, const std::string& extra = "") {
  return "[[backend]]\nname = \"" + name + "\"\nkind = \"anthropic\"\nbase_url = \"" + up.url() +
         "\"\napi_key_env = \"TACHYON_TEST_ANTHROPIC_KEY\"\nupstream_model = \"claude-test\"\n" + extra + "\n";
}

class AnthropicE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    ::setenv("TACHYON_TEST_ANTHROPIC_KEY", "sk-ant-test", 1);
  }
  std::string Post(const std::string& url, const std::string& body, const std::string& flags = "") {
    const std::string file = TempFile("anthropic_body.json");
    { std::ofstream(file) << body; }
    return Curl(flags + " -X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + url);
  }
  json Stats(const ServerProcess& standin) { return json::parse(Curl(standin.url() + "/stats")); }
};

TEST_F(AnthropicE2eTest, WholeStreamedToolRoundTripAndRefusals) {
  auto claude = Standin();
  ASSERT_TRUE(claude->started());
  ServerProcess gateway({"--config", WriteConfig("anthropic.toml", AnthropicBackend("claude", *claude) +
                                                                       "[[route]]\nmodel = \"c\"\nbackends = [\"claude\"]\n")});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";

  const json whole = json::parse(Post(url, R"({"model":"c","messages":[{"role":"system","content":"Be brief."},
      {"role":"user","content":"hi"}],"max_tokens":50})"));
  EXPECT_EQ(whole["object"], "chat.completion") << whole.dump();
  EXPECT_EQ(whole["model"], "c");
  EXPECT_EQ(whole["choices"][0]["message"]["content"], "Hello tok tok tok tok tok tok tok");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(whole["usage"]["completion_tokens"], 8);
  EXPECT_TRUE(whole["usage"]["prompt_tokens_details"].contains("cached_tokens"));
  const json sent = json::parse(Curl(claude->url() + "/last"));
  EXPECT_EQ(sent["model"], "claude-test");
  EXPECT_EQ(sent["system"][0]["text"], "Be brief.");
  EXPECT_EQ(sent["max_tokens"], 50);

  const std::string stream = Post(url, R"({"model":"c","stream":true,"stream_options":{"include_usage":true},
      "messages":[{"role":"user","content":"hi"}]})", "-N");
  EXPECT_NE(stream.find(R"("delta":{"role":"assistant","content":"Hello"})"), std::string::npos) << stream;
  EXPECT_NE(stream.find(R"("finish_reason":"stop")"), std::string::npos);
  EXPECT_NE(stream.find(R"("choices":[],"usage":{"prompt_tokens":)"), std::string::npos);
  EXPECT_EQ(stream.substr(stream.size() - 14), "data: [DONE]\n\n");

  // A tool call, then its result: the second request carries the assistant's
  // tool_calls and a tool message, which the stand-in checks pair up.
  const std::string tools =
      R"("tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
          "properties":{"city":{"type":"string"}},"required":["city"]}}}])";
  const json call = json::parse(Post(url, R"({"model":"c",)" + tools +
                                              R"(,"messages":[{"role":"user","content":"Weather in Oslo?"}]})"));
  ASSERT_EQ(call["choices"][0]["finish_reason"], "tool_calls") << call.dump();
  const json& tc = call["choices"][0]["message"]["tool_calls"][0];
  EXPECT_EQ(tc["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(tc["function"]["arguments"].get<std::string>())["city"], "Oslo");
  json next = {{"model", "c"},
               {"tools", json::parse("{" + tools + "}")["tools"]},
               {"messages", json::array({{{"role", "user"}, {"content", "Weather in Oslo?"}},
                                         call["choices"][0]["message"],
                                         {{"role", "tool"}, {"tool_call_id", tc["id"]}, {"content", "5C, rain"}}})}};
  const json answer = json::parse(Post(url, next.dump()));
  EXPECT_EQ(answer["choices"][0]["finish_reason"], "stop") << answer.dump();
  const std::string streamed_call = Post(url, R"({"model":"c","stream":true,)" + tools +
                                                  R"(,"messages":[{"role":"user","content":"Weather?"}]})", "-N");
  EXPECT_NE(streamed_call.find(R"("tool_calls":[{"index":0,"id":"toolu_01","type":"function")"), std::string::npos)
      << streamed_call;
  EXPECT_NE(streamed_call.find(R"("finish_reason":"tool_calls")"), std::string::npos);

  // Refused by name, never dropped; nothing reaches the upstream.
  const json before = Stats(*claude);
  const std::string seed = Post(url, R"({"model":"c","seed":7,"messages":[{"role":"user","content":"x"}]})",
                                "-w ' %{http_code}'");
  EXPECT_EQ(seed.substr(seed.size() - 3), "400") << seed;
  EXPECT_EQ(json::parse(seed.substr(0, seed.size() - 4))["error"]["param"], "seed");
  const std::string hot = Post(url, R"({"model":"c","temperature":1.7,"messages":[{"role":"user","content":"x"}]})",
                               "-w ' %{http_code}'");
  EXPECT_EQ(hot.substr(hot.size() - 3), "400") << hot;
  const json after = Stats(*claude);
  EXPECT_EQ(after["requests"], before["requests"]);
  EXPECT_EQ(after["invalid"], 0) << after["last_invalid"];
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(AnthropicE2eTest, OverloadedFallsBackAndItsRetryAfterHolds) {
  auto overloaded = Standin({"--status", "529", "--retry-after", "60"});
  auto good = Standin();
  ASSERT_TRUE(overloaded->started() && good->started());
  ServerProcess gateway({"--config", WriteConfig("anthropic_529.toml",
                                                 AnthropicBackend("busy", *overloaded) + AnthropicBackend("good", *good) +
                                                     "[[route]]\nmodel = \"c\"\nbackends = [\"busy\", \"good\"]\n"
                                                     "policy = \"fallback\"\n")});
  ASSERT_TRUE(gateway.started());
  for (int i = 0; i < 2; ++i) {
    const std::string r = Post(gateway.url() + "/v1/chat/completions",
                               R"({"model":"c","messages":[{"role":"user","content":"hi"}]})", "-i");
    EXPECT_NE(r.find("x-tachyon-backend: good"), std::string::npos) << r;
  }
  EXPECT_EQ(Stats(*overloaded)["requests"], 1) << "the breaker keeps the overloaded backend out for its Retry-After";
  const std::string metrics = Curl(gateway.url() + "/metrics");
  EXPECT_NE(metrics.find(R"(tachyon:backend_errors_total{backend="busy",kind="upstream_overloaded"} 1)"),
            std::string::npos) << metrics;

  // A 4xx of the upstream is the client's answer, in OpenAI's error shape.
  auto refusing = Standin({"--status", "404"});
  ASSERT_TRUE(refusing->started());
  ServerProcess second({"--config", WriteConfig("anthropic_404.toml", AnthropicBackend("nf", *refusing) +
                                                                          "[[route]]\nmodel = \"c\"\nbackends = [\"nf\"]\n")});
  ASSERT_TRUE(second.started());
  const std::string nf = Post(second.url() + "/v1/chat/completions",
                              R"({"model":"c","messages":[{"role":"user","content":"hi"}]})", "-w ' %{http_code}'");
  EXPECT_EQ(nf.substr(nf.size() - 3), "404") << nf;
  EXPECT_EQ(json::parse(nf.substr(0, nf.size() - 4))["error"]["message"], "stand-in status");
  EXPECT_EQ(gateway.Stop(), 0);
  EXPECT_EQ(second.Stop(), 0);
}

TEST_F(AnthropicE2eTest, BrokenStreamsEndInAnErrorAndLeaveNoCacheEntry) {
  auto cut = Standin({"--fault", "cut"});
  auto erroring = Standin({"--fault", "error_event"});
  ASSERT_TRUE(cut->started() && erroring->started());
  ServerProcess gateway({"--config", WriteConfig("anthropic_faults.toml",
                                                 "[cache]\nstore = \"memory\"\n" + AnthropicBackend("cut", *cut) +
                                                     AnthropicBackend("err", *erroring) +
                                                     "[[route]]\nmodel = \"cut\"\nbackends = [\"cut\"]\n"
                                                     "exact_cache = true\n"
                                                     "[[route]]\nmodel = \"err\"\nbackends = [\"err\"]\n")});
  ASSERT_TRUE(gateway.started());
  const std::string body = R"({"model":"cut","temperature":0,"stream":true,"messages":[{"role":"user","content":"hi"}]})";
  const std::string broken = Post(gateway.url() + "/v1/chat/completions", body, "-N");
  EXPECT_NE(broken.find(R"("content":" tok")"), std::string::npos) << broken;
  EXPECT_NE(broken.find(R"({"error":)"), std::string::npos) << broken;
  EXPECT_EQ(broken.substr(broken.size() - 14), "data: [DONE]\n\n");
  const std::string again = Post(gateway.url() + "/v1/chat/completions", body, "-i -N");
  EXPECT_EQ(again.find("x-tachyon-cache: hit"), std::string::npos) << "a cut stream must not be stored";
  EXPECT_EQ(Stats(*cut)["requests"], 2);

  // An error event before any content: nothing reached the client, so it gets the error as an answer.
  const std::string err = Post(gateway.url() + "/v1/chat/completions",
                               R"({"model":"err","stream":true,"messages":[{"role":"user","content":"hi"}]})",
                               "-w ' %{http_code}'");
  EXPECT_EQ(err.substr(err.size() - 3), "502") << err;
  EXPECT_NE(err.find("overloaded_error"), std::string::npos) << err;
  EXPECT_EQ(gateway.Stop(), 0);
}

}  // namespace
}  // namespace tachyon::e2e

namespace tachyon::e2e {
namespace {

// A conversation of two turns after a 2,000-token system prompt: with
// prompt_cache = "auto" the second turn reads the prefix the first wrote.
TEST_F(AnthropicE2eTest, AutoPromptCacheMakesTheSecondTurnACacheRead) {
  auto claude = Standin();
  ASSERT_TRUE(claude->started());
  ServerProcess gateway({"--config", WriteConfig("anthropic_prompt_cache.toml",
                                                 AnthropicBackend("claude", *claude) +
                                                     "[[route]]\nmodel = \"auto\"\nbackends = [\"claude\"]\n"
                                                     "prompt_cache = \"auto\"\n"
                                                     "[[route]]\nmodel = \"off\"\nbackends = [\"claude\"]\n")});
  ASSERT_TRUE(gateway.started());
  std::string system;
  for (int i = 0; system.size() < 8000; ++i) system += "Rule " + std::to_string(i) + ": answer precisely. ";
  for (const std::string route : {"off", "auto"}) {
    json body = {{"model", route},
                 {"messages", json::array({{{"role", "system"}, {"content", system + route}},
                                           {{"role", "user"}, {"content", "first question"}}})}};
    const json first = json::parse(Post(gateway.url() + "/v1/chat/completions", body.dump()));
    EXPECT_EQ(first["usage"]["prompt_tokens_details"]["cached_tokens"], 0) << first.dump();
    body["messages"].push_back(first["choices"][0]["message"]);
    body["messages"].push_back({{"role", "user"}, {"content", "second question"}});
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
    const std::string second = Post(gateway.url() + "/v1/chat/completions", body.dump(), "-N");
    const size_t at = second.find("\"usage\":");
    ASSERT_NE(at, std::string::npos) << second;
    const json usage = json::parse(second.substr(at + 8, second.find("}}", at) + 2 - at - 8));
    if (route == "off") {
      EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 0) << usage.dump();
    } else {
      EXPECT_GE(usage["prompt_tokens_details"]["cached_tokens"], 2000) << usage.dump();
      const json sent = json::parse(Curl(claude->url() + "/last"));
      EXPECT_EQ(sent["system"].back()["cache_control"]["type"], "ephemeral") << sent.dump();
    }
  }
  const json stats = Stats(*claude);
  EXPECT_EQ(stats["invalid"], 0) << stats["last_invalid"];
  const std::string metrics = Curl(gateway.url() + "/metrics");
  EXPECT_NE(metrics.find(R"(tachyon:prompt_cached_tokens_total{route="auto",backend="claude"} 2)"),
            std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"(tachyon:prompt_cache_write_tokens_total{route="auto",backend="claude"} 2)"),
            std::string::npos);
  EXPECT_NE(metrics.find(R"(tachyon:prompt_cached_tokens_total{route="off",backend="claude"} 0)"),
            std::string::npos);
  EXPECT_EQ(gateway.Stop(), 0);
}

}  // namespace
}  // namespace tachyon::e2e

namespace tachyon::e2e {
namespace {

// /v1/messages: Anthropic's key header, errors in Anthropic's shape, a stream cut
// short ending in an error event, count_tokens.
TEST_F(AnthropicE2eTest, MessagesFrontDoorSpeaksAnthropicsDialectIncludingErrors) {
  auto claude = Standin();
  auto cut = Standin({"--fault", "cut"});
  ASSERT_TRUE(claude->started() && cut->started());
  ::setenv("TACHYON_TEST_CLIENT_KEY", "client-key", 1);
  ServerProcess gateway({"--config", WriteConfig("messages_front.toml",
                                                 "[server]\napi_key_env = \"TACHYON_TEST_CLIENT_KEY\"\n"
                                                 "[cache]\nstore = \"memory\"\n" +
                                                     AnthropicBackend("claude", *claude) + AnthropicBackend("cut", *cut) +
                                                     "[[route]]\nmodel = \"c\"\nbackends = [\"claude\"]\n"
                                                     "[[route]]\nmodel = \"cut\"\nbackends = [\"cut\"]\n"
                                                     "exact_cache = true\n")});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/messages";
  const std::string key = "-H 'x-api-key: client-key' -H 'anthropic-version: 2023-06-01' ";
  const json ok = json::parse(Post(url, R"({"model":"c","max_tokens":20,"messages":[{"role":"user","content":"hi"}]})", key));
  EXPECT_EQ(ok["type"], "message") << ok.dump();
  EXPECT_EQ(ok["content"][0]["text"], "Hello tok tok tok tok tok tok tok");

  auto status_and_body = [&](const std::string& body, const std::string& flags) {
    const std::string r = Post(url, body, flags + "-w ' %{http_code}'");
    return std::make_pair(r.substr(r.size() - 3), json::parse(r.substr(0, r.size() - 4), nullptr, false));
  };
  auto [s401, e401] = status_and_body(R"({"model":"c","max_tokens":5,"messages":[{"role":"user","content":"hi"}]})",
                                      "-H 'x-api-key: wrong' ");
  EXPECT_EQ(s401, "401");
  EXPECT_EQ(e401["error"]["type"], "authentication_error") << e401.dump();
  auto [s400, e400] = status_and_body("{\"model\":", key);
  EXPECT_EQ(s400, "400");
  EXPECT_EQ(e400["type"], "error");
  EXPECT_EQ(e400["error"]["type"], "invalid_request_error");
  auto [s404, e404] = status_and_body(R"({"model":"nope","max_tokens":5,"messages":[{"role":"user","content":"hi"}]})",
                                      key);
  EXPECT_EQ(s404, "404");
  EXPECT_EQ(e404["error"]["type"], "not_found_error") << e404.dump();

  const std::string body = R"({"model":"cut","max_tokens":20,"stream":true,"temperature":0,
      "messages":[{"role":"user","content":"hi"}]})";
  const std::string broken = Post(url, body, key + "-N ");
  EXPECT_NE(broken.find("event: message_start"), std::string::npos) << broken;
  EXPECT_NE(broken.find("event: error"), std::string::npos) << broken;
  EXPECT_EQ(broken.find("message_stop"), std::string::npos);
  const std::string again = Post(url, body, key + "-i -N ");
  EXPECT_EQ(again.find("x-tachyon-cache: hit"), std::string::npos) << "a cut stream must not be stored";

  const json count = json::parse(Post(gateway.url() + "/v1/messages/count_tokens",
                                      R"({"model":"c","messages":[{"role":"user","content":"hello there"}]})",
                                      "-H 'Authorization: Bearer client-key' "));
  EXPECT_GT(count["input_tokens"], 0) << count.dump();
  EXPECT_EQ(gateway.Stop(), 0);
}

}  // namespace
}  // namespace tachyon::e2e
