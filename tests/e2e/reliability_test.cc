// What no request may do to the real binary (issue 31): take the process down or
// make a cache serve a wrong answer to everyone. Each test drives `tachyon serve`
// over loopback with the request that did it before the fix.
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <functional>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "gateway_config_files.h"
#include "run_command.h"
#include "server_process.h"
#include "tests/support/eventually.h"
#include "tests/support/redis_server.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;

// POSTs a body from a file (bodies of megabytes do not fit a command line); -i: with the head.
std::string Post(const std::string& url, const std::string& body, const std::string& flags = "-i") {
  const std::string file = TempFile("body.json");
  { std::ofstream(file) << body; }
  return Curl(flags + " -X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + url);
}

int StatusOf(const std::string& answer) {
  return answer.rfind("HTTP/1.1 ", 0) == 0 ? std::stoi(answer.substr(9, 3)) : 0;
}

nlohmann::json BodyOf(const std::string& answer) {
  const size_t at = answer.find("\r\n\r\n");
  return at == std::string::npos ? nlohmann::json() : nlohmann::json::parse(answer.substr(at + 4), nullptr, false);
}

// A JSON value nested `depth` arrays deep, as text (the value itself is never built here).
std::string Deep(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

// The same value as an object chain: {"a":{"a":...}}.
std::string DeepObject(size_t depth) {
  std::string out;
  out.reserve(depth * 6 + 8);
  for (size_t i = 0; i < depth; ++i) out += "{\"a\":";
  out += "1";
  out.append(depth, '}');
  return out;
}

constexpr size_t kMillion = 1000000;

// A stored answer reaches its cache just after the client has it (the store
// runs when the answer has been written, and the semantic index inserts on a
// thread): the tests ask again until it is there.
using testing::Eventually;

// A 400 json_too_deep, and the process still answers.
void ExpectRefusedAsTooDeep(const std::string& answer, const ServerProcess& server, const std::string& what) {
  EXPECT_EQ(StatusOf(answer), 400) << what << ": " << answer.substr(0, 400);
  const nlohmann::json body = BodyOf(answer);
  EXPECT_EQ(body["error"]["type"], "invalid_request_error") << what;
  EXPECT_EQ(body["error"]["code"], "json_too_deep") << what;
  EXPECT_NE(body["error"]["message"].get<std::string>().find("128"), std::string::npos) << what;
  EXPECT_EQ(StatusOf(Curl("-i " + server.url() + "/health")), 200) << what << ": the process went down";
}

class ReliabilityE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  }
};

// Finding 1, the gateway paths: an `openai` route (the body re-serialized upstream)
// and exact- and semantic-cached routes (the canonical form). 10^6 levels each.
TEST_F(ReliabilityE2eTest, AMillionLevelsDeepBodyIsRefusedOnGatewayRoutes) {
  auto up = Upstream();
  ASSERT_TRUE(up->started());
  const std::string config = WriteConfig(
      "deep.toml", Backend("up", *up) +
                       "[[route]]\nmodel = \"plain\"\nbackends = [\"up\"]\n"
                       "[[route]]\nmodel = \"exact\"\nbackends = [\"up\"]\nexact_cache = true\n"
                       "[[route]]\nmodel = \"semantic\"\nbackends = [\"up\"]\n"
                       "semantic_cache = { embedder = \"hash\", threshold = 0.93 }\n"
                       "[cache]\nstore = \"memory\"\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";
  for (const std::string route : {"plain", "exact", "semantic"}) {
    const std::string head = "{\"model\":\"" + route +
                             "\",\"temperature\":0,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],";
    ExpectRefusedAsTooDeep(Post(url, head + "\"metadata\":" + Deep(kMillion) + "}"), gateway, route + " array");
    ExpectRefusedAsTooDeep(Post(url, head + "\"metadata\":" + DeepObject(kMillion) + "}"), gateway, route + " object");
    // Exactly at the bound is read (the route answers; the field is passed on).
    const std::string at_bound = Post(url, head + "\"metadata\":" + Deep(127) + "}");
    EXPECT_EQ(StatusOf(at_bound), 200) << route << ": " << at_bound.substr(0, 400);
  }
  // /v1/completions too.
  ExpectRefusedAsTooDeep(
      Post(gateway.url() + "/v1/completions", "{\"model\":\"plain\",\"prompt\":" + Deep(kMillion, "\"x\"") + "}"),
      gateway, "completions prompt");
  EXPECT_EQ(gateway.Stop(), 0);
}

// Finding 1, the engine path: plain `tachyon serve --model` through a deep tool
// schema, a deep response_format schema, and a deep arguments string (a string in
// the body, so the body's own depth is small: the template reads it as JSON).
TEST_F(ReliabilityE2eTest, AMillionLevelsDeepSchemaIsRefusedByALocalEngine) {
  if (!fs::exists(StoriesModel())) GTEST_SKIP() << "../shared is absent: no " << StoriesModel();
  ServerProcess server({"--model", StoriesModel()});
  ASSERT_TRUE(server.started());
  const std::string url = server.url() + "/v1/chat/completions";
  const std::string user = "\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":4";
  ExpectRefusedAsTooDeep(
      Post(url, "{" + user + ",\"tools\":[{\"type\":\"function\",\"function\":{\"name\":\"f\",\"parameters\":" +
                    DeepObject(kMillion) + "}}]}"),
      server, "tools[0].function.parameters");
  ExpectRefusedAsTooDeep(
      Post(url, "{" + user + ",\"response_format\":{\"type\":\"json_schema\",\"json_schema\":{\"name\":\"s\","
                             "\"schema\":{\"type\":\"object\",\"properties\":{\"x\":" +
                    DeepObject(kMillion) + "}}}}}"),
      server, "response_format schema");
  // A deep arguments string in an assistant's tool call: text, whatever it holds.
  const std::string call =
      "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"},{\"role\":\"assistant\",\"content\":null,"
      "\"tool_calls\":[{\"id\":\"c1\",\"type\":\"function\",\"function\":{\"name\":\"f\",\"arguments\":\"" +
      Deep(kMillion) + "\"}}]},{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":\"ok\"}],\"max_tokens\":2}";
  const std::string answer = Post(url, call);
  EXPECT_TRUE(StatusOf(answer) == 200 || StatusOf(answer) == 400) << answer.substr(0, 400);
  EXPECT_EQ(StatusOf(Curl("-i " + server.url() + "/health")), 200) << "the process went down";
  EXPECT_EQ(server.Stop(), 0);
}


std::string CacheStatus(const std::string& answer) {
  const size_t at = answer.find("x-tachyon-cache: ");
  return at == std::string::npos ? "" : answer.substr(at + 17, answer.find("\r\n", at) - at - 17);
}

// Two routes over one upstream: one exact-cached, one semantic-cached, in memory
// (the default store is a file in the working directory, which other tests share).
std::string CachedRoutes(const ServerProcess& up, const std::string& extra_route_keys = "") {
  return Backend("up", up) + "[[route]]\nmodel = \"exact\"\nbackends = [\"up\"]\nexact_cache = true\n" +
         extra_route_keys + "[[route]]\nmodel = \"semantic\"\nbackends = [\"up\"]\n" +
         "semantic_cache = { embedder = \"hash\", threshold = 0.93 }\n" + extra_route_keys +
         "[cache]\nstore = \"memory\"\n";
}

std::string Question(const std::string& route, bool stream, const std::string& model = "",
                     const std::string& text = "Weather in Oslo?") {
  return "{\"model\":\"" + (model.empty() ? route : model) +
         "\",\"temperature\":0,\"max_tokens\":3,\"messages\":[{\"role\":\"user\",\"content\":\"" + text + "\"}]" +
         (stream ? ",\"stream\":true" : "") + "}";
}

// Finding 2: a streamed tool call ended with finish_reason "stop" was stored as an
// empty text answer, and every repeat got content "" and no tool_calls.
TEST_F(ReliabilityE2eTest, AStreamedToolCallIsNeverStoredAsText) {
  auto up = Upstream({"--answer", "tool_call"});
  ASSERT_TRUE(up->started());
  ServerProcess gateway({"--config", WriteConfig("tools.toml", CachedRoutes(*up))});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";
  for (const std::string route : {"exact", "semantic"}) {
    const std::string first = Post(url, Question(route, true), "-i -N");
    EXPECT_EQ(CacheStatus(first), "miss") << route << first;
    EXPECT_NE(first.find("get_weather"), std::string::npos) << first;
    for (bool stream : {false, true}) {
      const std::string again = Post(url, Question(route, stream), "-i -N");
      EXPECT_EQ(CacheStatus(again), "miss") << route << " stream=" << stream << ": a tool call was stored\n" << again;
      EXPECT_NE(again.find("get_weather"), std::string::npos) << route << " stream=" << stream << again;
    }
  }
  EXPECT_EQ(gateway.Stop(), 0);
}

// Finding 3: reasoning_content streamed before the answer was stored as content.
// It is not stored: a hit answers with the content alone.
TEST_F(ReliabilityE2eTest, ReasoningIsNeverServedAsCachedContent) {
  auto up = Upstream({"--answer", "reasoning"});
  ASSERT_TRUE(up->started());
  ServerProcess gateway({"--config", WriteConfig("reasoning.toml", CachedRoutes(*up))});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";
  for (const std::string route : {"exact", "semantic"}) {
    for (bool first_streamed : {true, false}) {
      // A question of each shape's own (the numbers differ: no semantic hit across them).
      const std::string text = first_streamed ? "Weather in Oslo on day 1?" : "Weather in Oslo on day 2?";
      ASSERT_EQ(StatusOf(Post(url, Question(route, first_streamed, "", text), "-i -N")), 200);
      ASSERT_TRUE(Eventually([&] { return CacheStatus(Post(url, Question(route, false, "", text))) == "hit"; }))
          << route << ": the answer was not stored";
      for (bool stream : {false, true}) {
        const std::string hit = Post(url, Question(route, stream, "", text), "-i -N");
        EXPECT_EQ(CacheStatus(hit), "hit") << route << hit;
        EXPECT_EQ(hit.find("SECRET-THOUGHT"), std::string::npos)
            << route << " first_streamed=" << first_streamed << " stream=" << stream << ": reasoning served\n" << hit;
        EXPECT_NE(hit.find(" tok tok tok"), std::string::npos) << hit;
        if (!stream) {
          EXPECT_EQ(BodyOf(hit)["choices"][0]["message"]["content"], " tok tok tok") << hit;
        }
      }
    }
  }
  EXPECT_EQ(gateway.Stop(), 0);
}

// Finding 4: with aliases and no upstream_model, gpt-4o-mini and o4-mini reach the
// upstream as asked but shared one cache entry.
TEST_F(ReliabilityE2eTest, AliasesThatReachTheUpstreamKeepTheirOwnEntries) {
  auto up = Upstream({"--answer", "echo_model"});
  ASSERT_TRUE(up->started());
  ServerProcess gateway({"--config", WriteConfig("aliases.toml", CachedRoutes(*up, "aliases = [\"*-mini\"]\n"))});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";
  // The exact route takes the aliases (the first route that names them).
  for (const std::string model : {"gpt-4o-mini", "o4-mini"}) {
    for (bool stream : {false, false, true}) {
      const std::string answer = Post(url, Question("exact", stream, model), "-i -N");
      EXPECT_NE(answer.find(" model=" + model), std::string::npos) << model << ": another model's answer\n" << answer;
    }
  }
  EXPECT_TRUE(Eventually([&] { return CacheStatus(Post(url, Question("exact", false, "o4-mini"))) == "hit"; }));
  EXPECT_EQ(gateway.Stop(), 0);
}


// Finding 5: with the documented config, other numbers and a negation were served
// the cached answer. The guards now check every hit by default.
TEST_F(ReliabilityE2eTest, TheDocumentedSemanticConfigRefusesOtherNumbersAndNegations) {
  auto up = Upstream();
  ASSERT_TRUE(up->started());
  ServerProcess gateway({"--config", WriteConfig("guards.toml", CachedRoutes(*up))});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";
  auto ask = [&](const std::string& question) {
    return CacheStatus(Post(url, nlohmann::json({{"model", "semantic"},
                                                  {"temperature", 0},
                                                  {"max_tokens", 3},
                                                  {"messages", {{{"role", "user"}, {"content", question}}}}})
                                     .dump()));
  };
  const std::pair<const char*, const char*> pairs[] = {
      {"How many days are in 3 weeks?", "How many days are in 4 weeks?"},
      {"Send the monthly statement to account 9921", "Send the monthly statement to account 9927"},
      {"Transfer 1500 dollars to my savings account", "Transfer 9500 dollars to my savings account"},
      {"Should I take ibuprofen with warfarin", "Should I not take ibuprofen with warfarin"},
  };
  for (const auto& [first, second] : pairs) {
    EXPECT_EQ(ask(first), "miss") << first;
    EXPECT_TRUE(Eventually([&] { return ask(first) == "hit"; })) << first << ": the exact repeat is a semantic hit";
    EXPECT_EQ(ask(second), "miss") << second << " was answered with the answer to: " << first;
  }
  EXPECT_EQ(gateway.Stop(), 0);
}


// Finding 8: SIGHUP said "reloaded" and kept the old keys and origins. Now the
// keys (a rotated key file), the origins and the hosts change at once; a [server]
// change that needs a restart refuses the whole reload.
TEST_F(ReliabilityE2eTest, SighupAppliesKeysAndOriginsOrRefusesTheReload) {
  auto up = Upstream();
  ASSERT_TRUE(up->started());
  const std::string key_file = TempFile("client.key"), admin_file = TempFile("admin.key");
  std::ofstream(key_file) << "key-one\n";
  std::ofstream(admin_file) << "admin-one\n";
  auto config_text = [&](const std::string& server_extra) {
    return Backend("up", *up) + "[[route]]\nmodel = \"chat\"\nbackends = [\"up\"]\n[server]\napi_key_file = \"" +
           key_file + "\"\nadmin_key_file = \"" + admin_file + "\"\n" + server_extra;
  };
  const std::string config = WriteConfig("sighup.toml", config_text(""));
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";
  const std::string body = Question("chat", false);
  auto status_with = [&](const std::string& key, const std::string& extra = "") {
    return StatusOf(Post(url, body, "-i -H 'Authorization: Bearer " + key + "' " + extra));
  };
  auto admin_with = [&](const std::string& key) {
    return StatusOf(Curl("-i -H 'Authorization: Bearer " + key + "' " + gateway.url() + "/v1/cache"));
  };
  ASSERT_EQ(status_with("key-one"), 200);
  EXPECT_EQ(status_with("key-two"), 401);
  EXPECT_EQ(status_with("key-one", "-H 'Origin: https://app.example.com'"), 200) << "a key is set: CORS is off, not refused";
  // Rotate both keys and allow an origin: one SIGHUP applies them all.
  std::ofstream(key_file) << "key-two\n";
  std::ofstream(admin_file) << "admin-two\n";
  WriteConfig("sighup.toml", config_text("allowed_origins = [\"https://app.example.com\"]\n"));
  gateway.Signal(SIGHUP);
  ASSERT_TRUE(Eventually([&] { return status_with("key-two") == 200; })) << "the rotated key was not taken";
  EXPECT_EQ(status_with("key-one"), 401) << "the revoked key still works";
  EXPECT_NE(admin_with("admin-two"), 401);
  EXPECT_EQ(admin_with("admin-one"), 401);
  std::string cors = Post(url, body, "-i -H 'Authorization: Bearer key-two' -H 'Origin: https://app.example.com'");
  for (char& c : cors) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  EXPECT_NE(cors.find("access-control-allow-origin: https://app.example.com"), std::string::npos) << cors;
  // A change that takes a restart (max_connections) refuses the reload whole: the
  // key in the same file is not taken either.
  std::ofstream(key_file) << "key-three\n";
  WriteConfig("sighup.toml", config_text("allowed_origins = [\"https://app.example.com\"]\nmax_connections = 7\n"));
  gateway.Signal(SIGHUP);
  EXPECT_TRUE(Eventually([&] {
    return Curl("-H 'Authorization: Bearer key-two' " + gateway.url() + "/metrics")
               .find("tachyon:config_reloads_total{result=\"refused\"} 1\n") != std::string::npos;
  })) << "the reload was not refused";
  EXPECT_NE(status_with("key-three"), 200) << "a refused reload was applied";
  EXPECT_EQ(status_with("key-two"), 200);
  // Restored, the next SIGHUP takes the new key.
  WriteConfig("sighup.toml", config_text("allowed_origins = [\"https://app.example.com\"]\n"));
  gateway.Signal(SIGHUP);
  EXPECT_TRUE(Eventually([&] { return status_with("key-three") == 200; }));
  EXPECT_EQ(gateway.Stop(), 0);
}


std::string HeaderOf(const std::string& answer, const std::string& name) {
  std::string lower = answer.substr(0, answer.find("\r\n\r\n"));
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const size_t at = lower.find("\r\n" + name + ": ");
  if (at == std::string::npos) return "";
  const size_t start = at + name.size() + 4;
  return answer.substr(start, answer.find("\r\n", start) - start);
}

// Finding 9: an upstream's 429 was relayed with no fallback, and its 401 body (the
// masked key, in OpenAI's text) reached the client.
TEST_F(ReliabilityE2eTest, UpstreamRateLimitsFallBackAndAuthFailuresAreTheGatewaysOwn) {
  auto limited = Upstream({"--status", "429", "--retry-after", "30"});
  auto denied = Upstream({"--status", "401"});
  auto good = Upstream();
  ASSERT_TRUE(limited->started() && denied->started() && good->started());
  const std::string config = WriteConfig(
      "statuses.toml",
      Backend("limited", *limited) + Backend("denied", *denied) + Backend("good", *good) +
          Backend("limited-alone", *limited) + Backend("denied-alone", *denied) +
          "[[route]]\nmodel = \"chat\"\nbackends = [\"limited\", \"good\"]\n"
          "[[route]]\nmodel = \"auth\"\nbackends = [\"denied\", \"good\"]\n"
          "[[route]]\nmodel = \"only-limited\"\nbackends = [\"limited-alone\"]\n"
          "[[route]]\nmodel = \"only-denied\"\nbackends = [\"denied-alone\"]\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  const std::string url = gateway.url() + "/v1/chat/completions";
  // 429 then the next backend; the limited one stays out for its Retry-After.
  for (int i = 0; i < 3; ++i) {
    const std::string answer = Post(url, Question("chat", false));
    EXPECT_EQ(StatusOf(answer), 200) << answer;
    EXPECT_EQ(HeaderOf(answer, "x-tachyon-backend"), "good") << answer;
  }
  const std::string health = Curl(gateway.url() + "/health");
  EXPECT_EQ(nlohmann::json::parse(health)["backends"]["limited"]["state"], "open") << health;
  // Alone on its route: the client gets the 429 and when to come back.
  const std::string alone = Post(url, Question("only-limited", false));
  EXPECT_EQ(StatusOf(alone), 429) << alone;
  EXPECT_EQ(HeaderOf(alone, "retry-after"), "30") << alone;
  EXPECT_EQ(BodyOf(alone)["error"]["type"], "rate_limit_error") << alone;
  // A 401 of the upstream is the gateway's: 502 upstream_auth_failed, its text not relayed;
  // a route with another backend answers from it.
  const std::string auth = Post(url, Question("only-denied", false));
  EXPECT_EQ(StatusOf(auth), 502) << auth;
  EXPECT_EQ(BodyOf(auth)["error"]["code"], "upstream_auth_failed") << auth;
  EXPECT_EQ(auth.find("mock upstream failure"), std::string::npos) << "the upstream's 401 text was relayed: " << auth;
  const std::string streamed = Post(url, Question("only-denied", true), "-i -N");
  EXPECT_EQ(streamed.find("mock upstream failure"), std::string::npos) << streamed;
  EXPECT_EQ(HeaderOf(Post(url, Question("auth", false)), "x-tachyon-backend"), "good");
  EXPECT_EQ(gateway.Stop(), 0);
}


// Finding 6 through the binary: a Redis that needs a password, given by
// password_env; with a wrong one the gateway starts and answers, every lookup a miss.
TEST_F(ReliabilityE2eTest, ARedisWithAPasswordSharesTheCacheAndAWrongOneOnlyMisses) {
  if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
  testing_util::RedisServer redis(testing_util::FreePort(), {"--requirepass", "s3cret"});
  auto up = Upstream();
  ASSERT_TRUE(up->started());
  auto config_with = [&](const std::string& name, const std::string& variable) {
    return WriteConfig(name, Backend("up", *up) + "[[route]]\nmodel = \"exact\"\nbackends = [\"up\"]\nexact_cache = true\n" +
                                 "[cache]\nstore = \"" + redis.url() + "\"\npassword_env = \"" + variable + "\"\n");
  };
  ::setenv("TACHYON_TEST_REDIS_PASSWORD", "s3cret", 1);
  ::setenv("TACHYON_TEST_REDIS_WRONG", "not-it", 1);
  ServerProcess a({"--config", config_with("redis-a.toml", "TACHYON_TEST_REDIS_PASSWORD")});
  ServerProcess b({"--config", config_with("redis-b.toml", "TACHYON_TEST_REDIS_PASSWORD")});
  ServerProcess wrong({"--config", config_with("redis-wrong.toml", "TACHYON_TEST_REDIS_WRONG")});
  ASSERT_TRUE(a.started() && b.started() && wrong.started());
  EXPECT_EQ(CacheStatus(Post(a.url() + "/v1/chat/completions", Question("exact", false))), "miss");
  // The other replica finds it through Redis.
  EXPECT_TRUE(Eventually([&] {
    return CacheStatus(Post(b.url() + "/v1/chat/completions", Question("exact", false))) == "hit";
  }));
  for (int i = 0; i < 3; ++i) {
    const std::string answer = Post(wrong.url() + "/v1/chat/completions", Question("exact", false));
    EXPECT_EQ(StatusOf(answer), 200) << answer;
    EXPECT_EQ(CacheStatus(answer), "miss");
  }
  const std::string metrics = Curl(wrong.url() + "/metrics");
  EXPECT_NE(metrics.find("tachyon:cache_store_errors_total{store=\"redis\",reason=\"wrongpass\"}"), std::string::npos)
      << metrics;
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
  EXPECT_EQ(wrong.Stop(), 0);
}

}  // namespace
}  // namespace tachyon::e2e
