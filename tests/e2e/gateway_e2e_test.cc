// `tachyon serve --config` end to end: the real binary in front of mock upstreams
// (tests/support/mock_upstream) and a local engine, driven by curl and tachyon bench.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway_config_files.h"
#include "run_command.h"
#include "server_process.h"
#include "tests/support/eventually.h"
#include "tests/support/redis_server.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;
using testing::Eventually;

// A greedy chat request to route "chat", 5 tokens: the question, after a system prompt when one is given.
std::string ChatBody(const std::string& question, const std::string& system = "") {
  nlohmann::json messages = nlohmann::json::array();
  if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
  messages.push_back({{"role", "user"}, {"content", question}});
  return nlohmann::json({{"model", "chat"}, {"temperature", 0}, {"max_tokens", 5}, {"messages", messages}}).dump();
}

class GatewayE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  }
  std::string Post(const std::string& url, const std::string& body, const std::string& flags = "") {
    const std::string file = TempFile("body.json");
    { std::ofstream(file) << body; }
    return Curl(flags + " -X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + url);
  }
};

TEST_F(GatewayE2eTest, FallbackPassthroughHeadersModelsAndMetrics) {
  auto failing = Upstream({"--status", "500"});
  auto good = Upstream({});
  ASSERT_TRUE(failing->started() && good->started());
  const std::string config = WriteConfig(
      "fallback.toml", Backend("failing", *failing) + Backend("good", *good, "upstream_model = \"m\"") +
                           "[[route]]\nmodel = \"chat\"\nbackends = [\"failing\", \"good\"]\npolicy = \"fallback\"\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  const std::string chat = R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"max_tokens":5)";
  std::string streamed = Post(gateway.url() + "/v1/chat/completions", chat + R"(,"stream":true})", "-i -N");
  EXPECT_NE(streamed.find("HTTP/1.1 200"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("x-tachyon-backend: good"), std::string::npos);
  EXPECT_NE(streamed.find("X-Accel-Buffering: no"), std::string::npos);
  EXPECT_NE(streamed.find("x-request-id: "), std::string::npos);
  size_t n = 0;
  for (size_t at = 0; (at = streamed.find("\"content\":\" tok\"", at)) != std::string::npos; ++at) ++n;
  EXPECT_EQ(n, 5u);
  EXPECT_NE(streamed.find("data: [DONE]"), std::string::npos);
  EXPECT_EQ(streamed.find("[DONE]"), streamed.rfind("[DONE]")) << "one [DONE]: the upstream's is not forwarded";

  auto whole = nlohmann::json::parse(Post(gateway.url() + "/v1/chat/completions", chat + "}"));
  EXPECT_EQ(whole["choices"][0]["message"]["content"], " tok tok tok tok tok") << whole.dump();
  auto unknown = nlohmann::json::parse(Post(gateway.url() + "/v1/chat/completions",
                                            R"({"model":"gpt-9","messages":[{"role":"user","content":"hi"}]})"));
  EXPECT_EQ(unknown["error"]["code"], "model_not_found");

  auto models = nlohmann::json::parse(Curl(gateway.url() + "/v1/models"));
  ASSERT_EQ(models["data"].size(), 1u);
  EXPECT_EQ(models["data"][0]["id"], "chat");
  EXPECT_EQ(models["data"][0]["backends"][0]["name"], "failing");
  const std::string metrics = Curl(gateway.url() + "/metrics");
  EXPECT_NE(metrics.find("tachyon:route_retries_total{route=\"chat\"} 2\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("tachyon:backend_errors_total{backend=\"failing\",kind=\"upstream_5xx\"} 2\n"),
            std::string::npos);
  // The streamed answer and the whole one: a whole answer has a first token too (its body's first byte).
  EXPECT_NE(metrics.find("tachyon:time_to_first_token_seconds_count{model_name=\"m\",route=\"chat\",backend=\"good\"} 2\n"),
            std::string::npos);
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(GatewayE2eTest, AStuckUpstreamIsAFirstByteTimeoutAndADeadOneA502) {
  auto stuck = Upstream({"--hang"});
  ASSERT_TRUE(stuck->started());
  const std::string config = WriteConfig(
      "stuck.toml", Backend("stuck", *stuck, "first_byte_timeout = 0.3") +
                        "[[backend]]\nname = \"dead\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:1/v1\"\n"
                        "[[route]]\nmodel = \"s\"\nbackends = [\"stuck\"]\n"
                        "[[route]]\nmodel = \"d\"\nbackends = [\"dead\"]\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  std::string s = Post(gateway.url() + "/v1/completions", R"({"model":"s","prompt":"x"})", "-w ' %{http_code}'");
  EXPECT_EQ(s.substr(s.size() - 3), "504") << s;
  EXPECT_EQ(nlohmann::json::parse(s.substr(0, s.size() - 4))["error"]["code"], "first_byte_timeout");
  std::string d = Post(gateway.url() + "/v1/completions", R"({"model":"d","prompt":"x"})", "-w ' %{http_code}'");
  EXPECT_EQ(d.substr(d.size() - 3), "502") << d;
  EXPECT_NE(d.find("backend 'dead'"), std::string::npos);
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(GatewayE2eTest, ChunksAreForwardedAsTheyArriveNotBuffered) {
  auto slow = Upstream({"--gap-ms", "20"});
  ASSERT_TRUE(slow->started());
  const std::string config =
      WriteConfig("stream.toml", Backend("slow", *slow) + "[[route]]\nmodel = \"m\"\nbackends = [\"slow\"]\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  const std::string out = TempFile("stream_run.json");
  CommandResult run = RunTachyon("bench --url " + gateway.url() + " --model m --input-len 8 --output-len 20 "
                                 "--num-requests 2 --concurrency 1 --no-progress --out " + out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::ifstream in(out);
  nlohmann::json records = nlohmann::json::parse(in)["records"];
  ASSERT_EQ(records.size(), 2u);
  for (const auto& r : records) {
    const auto& chunks = r["chunks_s"];
    ASSERT_EQ(chunks.size(), 20u) << "20 chunks reach the client as 20 chunks";
    // The upstream sends the last chunk 380 ms after the first: a gateway that
    // buffered would deliver them together at the end. (Each gap is measured,
    // within 2 ms, by benchmarks/gateway_overhead.sh; a loaded test machine may
    // merge two reads, so only the median is asserted here.)
    EXPECT_GT(chunks[19].get<double>() - chunks[0].get<double>(), 0.3);
    std::vector<double> gaps;
    for (size_t i = 1; i < chunks.size(); ++i) gaps.push_back(chunks[i].get<double>() - chunks[i - 1].get<double>());
    std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
    EXPECT_GT(gaps[gaps.size() / 2], 0.010) << "the median gap";
  }
  fs::remove(out);
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(GatewayE2eTest, SighupReloadsAValidConfigAndKeepsTheOldOnErrors) {
  auto up = Upstream({});
  ASSERT_TRUE(up->started());
  const std::string path = TempFile("reload.toml");
  std::ofstream(path) << Backend("a", *up) << "[[route]]\nmodel = \"first\"\nbackends = [\"a\"]\n";
  ServerProcess gateway({"--config", path});
  ASSERT_TRUE(gateway.started());
  EXPECT_EQ(nlohmann::json::parse(Curl(gateway.url() + "/v1/models"))["data"][0]["id"], "first");
  auto models_after = [&](const std::string& expect) {
    std::string id;
    Eventually([&] {
      id = nlohmann::json::parse(Curl(gateway.url() + "/v1/models"))["data"][0]["id"];
      return id == expect;
    });
    return id;
  };
  std::ofstream(path) << Backend("a", *up) << "[[route]]\nmodel = \"second\"\nbackends = [\"a\"]\n";
  gateway.Signal(SIGHUP);
  EXPECT_EQ(models_after("second"), "second");
  std::ofstream(path) << "[[route]]\nmodel = \"third\"\nbackends = [\"nope\"]\n";  // invalid
  gateway.Signal(SIGHUP);
  EXPECT_TRUE(Eventually([&] {
    return Curl(gateway.url() + "/metrics").find("tachyon:config_reloads_total{result=\"refused\"} 1\n") !=
           std::string::npos;
  })) << "the invalid config was not refused";
  EXPECT_EQ(nlohmann::json::parse(Curl(gateway.url() + "/v1/models"))["data"][0]["id"], "second")
      << "an invalid config is not applied";
  auto ok = nlohmann::json::parse(Post(gateway.url() + "/v1/completions", R"({"model":"second","prompt":"x"})"));
  EXPECT_EQ(ok["choices"][0]["text"], " tok tok tok tok tok tok tok tok tok tok tok tok tok tok tok tok");
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(GatewayE2eTest, ALocalEngineAndAnUpstreamBehindOneFrontDoor) {
  auto up = Upstream({});
  ASSERT_TRUE(up->started());
  const std::string model = TempFile("gateway_tiny.gguf");
  ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model).exit_code, 0);
  const std::string config = WriteConfig(
      "mixed.toml", Backend("remote", *up) + "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model +
                        "\"\nthreads = 1\nchat_template = \"chatml\"\n"
                        "[[route]]\nmodel = \"remote\"\nbackends = [\"remote\"]\n"
                        "[[route]]\nmodel = \"local\"\nbackends = [\"engine\"]\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  auto local = nlohmann::json::parse(
      Post(gateway.url() + "/v1/completions", R"({"model":"local","prompt":"Hello","max_tokens":4,"ignore_eos":true})"));
  EXPECT_EQ(local["usage"]["completion_tokens"], 4) << local.dump();
  EXPECT_EQ(local["model"], "local");
  auto remote = nlohmann::json::parse(Post(gateway.url() + "/v1/completions", R"({"model":"remote","prompt":"x","max_tokens":2})"));
  EXPECT_EQ(remote["choices"][0]["text"], " tok tok");
  const std::string metrics = Curl(gateway.url() + "/metrics");
  EXPECT_NE(metrics.find("tachyon:kv_cache_usage_perc{model_name=\"" + fs::path(model).stem().string() +
                         "\",backend=\"engine\"}"),
            std::string::npos)
      << metrics;
  EXPECT_EQ(gateway.Stop(), 0);
  fs::remove(model);
}

// A classify route over two local engines, with the trimmer in front: the
// headers name the class, why, and the tokens trimmed.
TEST_F(GatewayE2eTest, AClassifyRouteAndTheTrimmerThroughTheBinary) {
  const std::string model = TempFile("classify_tiny.gguf");
  ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model).exit_code, 0);
  std::string backends;
  for (const char* name : {"small", "large"}) {
    backends += "[[backend]]\nname = \"" + std::string(name) + "\"\nkind = \"local\"\nmodel = \"" + model +
                "\"\nthreads = 1\nchat_template = \"chatml\"\n";
  }
  const std::string config = WriteConfig("classify.toml", backends + R"(
[[route]]
model = "auto"
policy = "classify"
default = "large"
trim = { whitespace = true, duplicates = true }
[[route.class]]
name = "small"
backends = ["small"]
fallback = ["large"]
[[route.class]]
name = "large"
backends = ["large"]
[[route.rule]]
name = "extraction"
class = "small"
user_regex = "(?i)^(extract|classify)\\b"
)");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  auto ask = [&](const std::string& user) {
    const nlohmann::json body = {
        {"model", "auto"}, {"max_tokens", 2}, {"ignore_eos", true},
        {"messages", {{{"role", "system"}, {"content", "Answer in one short line, please and thanks.\n\n\n\n"
                                                        "Answer in one short line, please and thanks."}},
                      {{"role", "user"}, {"content", user}}}}};
    return Post(gateway.url() + "/v1/chat/completions", body.dump(), "-i");
  };
  std::string r = ask("Extract the dates: May 1 and June 2");
  EXPECT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
  EXPECT_NE(r.find("x-tachyon-route: auto; class=small; rule=extraction"), std::string::npos) << r;
  EXPECT_NE(r.find("x-tachyon-backend: small"), std::string::npos);
  // 2 blank lines, then the copy (44 bytes) and the blank line before it: the byte-level count of a
  // model whose vocabulary is the built-in one.
  EXPECT_NE(r.find("x-tachyon-trimmed-tokens: 48; whitespace=2; duplicates=46"), std::string::npos) << r;
  r = ask("Write a poem about the sea");
  EXPECT_NE(r.find("x-tachyon-route: auto; class=large; default"), std::string::npos) << r;
  EXPECT_NE(r.find("x-tachyon-backend: large"), std::string::npos);
  const std::string metrics = Curl(gateway.url() + "/metrics");
  EXPECT_NE(metrics.find(R"(tachyon:router_decisions_total{route="auto",class="small",by="rule"} 1)"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find(R"(tachyon:trimmed_tokens_total{route="auto",step="duplicates"} 92)"), std::string::npos);
  EXPECT_NE(metrics.find("tachyon:router_decision_seconds_count{route=\"auto\"} 2"), std::string::npos);
  EXPECT_EQ(gateway.Stop(), 0);
  fs::remove(model);
}

// The exact cache through the real binary: a repeat is answered without the
// upstream in both shapes, Cache-Control is honoured, errors are never stored.
TEST_F(GatewayE2eTest, ExactCacheAnswersRepeatsInBothShapes) {
  auto good = Upstream({});
  auto failing = Upstream({"--status", "500"});
  ASSERT_TRUE(good->started() && failing->started());
  const std::string config = WriteConfig(
      "cache.toml", Backend("good", *good) + Backend("failing", *failing, "breaker_failures = 1000") +
                        "[[route]]\nmodel = \"chat\"\nbackends = [\"good\"]\nexact_cache = true\n"
                        "[[route]]\nmodel = \"broken\"\nbackends = [\"failing\"]\nexact_cache = true\n"
                        "[cache]\nmax_entries = 100\nstore = \"sqlite:" + TempFile("cache/exact.db") + "\"\n");
  fs::remove_all(TempFile("cache"));
  auto gateway_process =
      std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config, "--admin-key", "admin-k"});
  ServerProcess& gateway = *gateway_process;
  ASSERT_TRUE(gateway.started());
  const std::string chat = R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0)";
  const std::string url = gateway.url() + "/v1/chat/completions";
  const std::string miss = Post(url, chat + "}", "-i");
  EXPECT_NE(miss.find("x-tachyon-cache: miss"), std::string::npos) << miss;
  EXPECT_NE(miss.find("x-tachyon-backend: good"), std::string::npos);
  const std::string hit = Post(url, chat + "}", "-i");
  EXPECT_NE(hit.find("x-tachyon-cache: hit"), std::string::npos) << hit;
  EXPECT_NE(hit.find("x-tachyon-backend: exact-cache"), std::string::npos);
  EXPECT_NE(hit.find("\nage: "), std::string::npos);
  auto body = nlohmann::json::parse(hit.substr(hit.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["choices"][0]["message"]["content"], " tok tok tok tok tok");
  // The same request streamed: the stored answer as SSE, with usage and one [DONE].
  const std::string streamed =
      Post(url, chat + R"(,"stream":true,"stream_options":{"include_usage":true}})", "-i -N");
  EXPECT_NE(streamed.find("x-tachyon-cache: hit"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find(" tok tok tok tok tok"), std::string::npos);
  EXPECT_NE(streamed.find("\"usage\""), std::string::npos);
  EXPECT_EQ(streamed.find("[DONE]"), streamed.rfind("[DONE]"));
  // no-store and sampled requests pass by; no-cache asks the upstream again.
  EXPECT_NE(Post(url, chat + "}", "-i -H 'Cache-Control: no-store'").find("x-tachyon-cache: bypass"), std::string::npos);
  EXPECT_NE(Post(url, chat + "}", "-i -H 'Cache-Control: no-cache'").find("x-tachyon-backend: good"), std::string::npos);
  EXPECT_NE(Post(url, R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"max_tokens":5})", "-i")
                .find("x-tachyon-cache: bypass"),
            std::string::npos);
  // An upstream error is never stored: the second request reaches the upstream too.
  const std::string broken = R"({"model":"broken","messages":[{"role":"user","content":"hi"}],"temperature":0})";
  for (int i = 0; i < 2; ++i) {
    const std::string r = Post(url, broken, "-i");
    EXPECT_NE(r.find("x-tachyon-cache: miss"), std::string::npos) << r;
  }
  const std::string metrics = Curl(gateway.url() + "/metrics");
  EXPECT_NE(metrics.find("tachyon:cache_lookups_total{kind=\"exact\",result=\"hit\",route=\"chat\"} 2"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tachyon:cache_entries{kind=\"exact\"} 1"), std::string::npos);
  // The admin routes: their own key; stats and purge from the CLI.
  EXPECT_NE(Curl("-i " + gateway.url() + "/v1/cache").find("401"), std::string::npos);
  EXPECT_NE(Curl("-i -H 'Authorization: Bearer wrong' " + gateway.url() + "/v1/cache").find("401"), std::string::npos);
  ::setenv("TACHYON_TEST_ADMIN_KEY", "admin-k", 1);
  CommandResult stats = RunTachyon("cache stats --url " + gateway.url() + " --admin-key-env TACHYON_TEST_ADMIN_KEY");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["routes"]["chat"], 1) << stats.out;
  CommandResult purge_other =
      RunTachyon("cache purge --url " + gateway.url() + " --admin-key-env TACHYON_TEST_ADMIN_KEY --route broken");
  EXPECT_EQ(nlohmann::json::parse(purge_other.out)["purged"], 0) << purge_other.out << purge_other.err;
  EXPECT_NE(Post(url, chat + "}", "-i").find("x-tachyon-cache: hit"), std::string::npos);
  CommandResult purge = RunTachyon("cache purge --url " + gateway.url() + " --admin-key-env TACHYON_TEST_ADMIN_KEY");
  EXPECT_EQ(nlohmann::json::parse(purge.out)["purged"], 1) << purge.out << purge.err;
  EXPECT_NE(Post(url, chat + "}", "-i").find("x-tachyon-cache: miss"), std::string::npos) << "purged";
  EXPECT_EQ(gateway.Stop(), 0);
  // The SQLite store keeps the answer across a restart.
  gateway_process = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config});
  ASSERT_TRUE(gateway_process->started());
  const std::string after = Post(gateway_process->url() + "/v1/chat/completions", chat + "}", "-i");
  EXPECT_NE(after.find("x-tachyon-cache: hit"), std::string::npos) << after;
  EXPECT_NE(after.find(" tok tok tok tok tok"), std::string::npos);
  EXPECT_EQ(gateway_process->Stop(), 0);
  fs::remove_all(TempFile("cache"));
}

// The semantic cache behind the exact one: a reworded question is answered from
// the cache in both shapes, another system prompt is not, and the entry (with
// its vector) survives a restart.
TEST_F(GatewayE2eTest, SemanticCacheAnswersRewordedQuestionsInScope) {
  auto good = Upstream({});
  ASSERT_TRUE(good->started());
  const std::string config = WriteConfig(
      "semantic.toml", Backend("good", *good) +
                           "[[route]]\nmodel = \"chat\"\nbackends = [\"good\"]\nexact_cache = true\n"
                           "semantic_cache = { embedder = \"hash\", threshold = 0.8 }\n"
                           "[cache]\nstore = \"sqlite:" + TempFile("semantic/cache.db") + "\"\n");
  fs::remove_all(TempFile("semantic"));
  auto gateway_process =
      std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config, "--admin-key", "admin-k"});
  ASSERT_TRUE(gateway_process->started());
  const std::string url = gateway_process->url() + "/v1/chat/completions";
  auto with = [](std::string body, const std::string& extra) { return body.substr(0, body.size() - 1) + extra + "}"; };
  const std::string first = Post(url, ChatBody("Who are you?", "You are helpful."), "-i");
  EXPECT_NE(first.find("x-tachyon-cache: miss"), std::string::npos) << first;
  EXPECT_NE(first.find("x-tachyon-backend: good"), std::string::npos);
  const std::string reworded = Post(url, ChatBody("who are you", "You are helpful."), "-i");
  EXPECT_NE(reworded.find("x-tachyon-cache: hit"), std::string::npos) << reworded;
  EXPECT_NE(reworded.find("x-tachyon-backend: semantic-cache"), std::string::npos);
  EXPECT_NE(reworded.find("x-tachyon-cache-similarity: 1.0000"), std::string::npos) << "case and punctuation are folded";
  auto body = nlohmann::json::parse(reworded.substr(reworded.find("\r\n\r\n") + 4));
  EXPECT_EQ(body["choices"][0]["message"]["content"], " tok tok tok tok tok");
  const std::string streamed =
      Post(url,
           with(ChatBody("Who are you ?", "You are helpful."), R"(,"stream":true,"stream_options":{"include_usage":true})"),
           "-i -N");
  EXPECT_NE(streamed.find("x-tachyon-backend: semantic-cache"), std::string::npos) << streamed;
  EXPECT_NE(streamed.find("\"usage\""), std::string::npos);
  EXPECT_EQ(streamed.find("[DONE]"), streamed.rfind("[DONE]"));
  // Another system prompt is another scope; an unrelated question is a miss.
  EXPECT_NE(Post(url, ChatBody("who are you", "Talk like a pirate."), "-i").find("x-tachyon-backend: good"),
            std::string::npos);
  EXPECT_NE(Post(url, ChatBody("What is the capital of France?", "You are helpful."), "-i").find("x-tachyon-backend: good"),
            std::string::npos);
  const std::string metrics = Curl(gateway_process->url() + "/metrics");
  EXPECT_NE(metrics.find("tachyon:cache_lookups_total{kind=\"semantic\",result=\"hit\",route=\"chat\"} 2"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tachyon:cache_similarity_count{result=\"hit\"} 2"), std::string::npos);
  EXPECT_NE(metrics.find("tachyon:cache_entries{kind=\"semantic\"} 3"), std::string::npos);
  ::setenv("TACHYON_TEST_ADMIN_KEY", "admin-k", 1);
  CommandResult stats =
      RunTachyon("cache stats --url " + gateway_process->url() + " --admin-key-env TACHYON_TEST_ADMIN_KEY");
  ASSERT_EQ(stats.exit_code, 0) << stats.err;
  EXPECT_EQ(nlohmann::json::parse(stats.out)["semantic"]["entries"], 3) << stats.out;
  EXPECT_EQ(gateway_process->Stop(), 0);
  // Restarted: the vectors are read back and indexed.
  gateway_process = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config});
  ASSERT_TRUE(gateway_process->started());
  const std::string after =
      Post(gateway_process->url() + "/v1/chat/completions", ChatBody("WHO are you??", "You are helpful."), "-i");
  EXPECT_NE(after.find("x-tachyon-backend: semantic-cache"), std::string::npos) << after;
  EXPECT_EQ(gateway_process->Stop(), 0);
  fs::remove_all(TempFile("semantic"));
}

// Two gateways on one Redis: an answer one of them stored is served by the
// other (exact and semantic); with Redis gone every request is still answered,
// by the upstream.
TEST_F(GatewayE2eTest, ReplicasShareTheCacheThroughRedis) {
  if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
  testing_util::RedisServer redis(testing_util::FreePort());
  auto good = Upstream({});
  ASSERT_TRUE(good->started());
  const std::string config = WriteConfig(
      "redis.toml", Backend("good", *good) +
                        "[[route]]\nmodel = \"chat\"\nbackends = [\"good\"]\nexact_cache = true\n"
                        "semantic_cache = { embedder = \"hash\", threshold = 0.8 }\n"
                        "[cache]\nstore = \"" + redis.url() + "\"\n");
  ServerProcess a({"--config", config}), b({"--config", config});
  ASSERT_TRUE(a.started() && b.started());
  EXPECT_NE(Post(a.url() + "/v1/chat/completions", ChatBody("Who are you?"), "-i").find("x-tachyon-backend: good"),
            std::string::npos);
  bool exact = false, semantic = false;
  Eventually([&] {  // the log reaches b within milliseconds
    exact = Post(b.url() + "/v1/chat/completions", ChatBody("Who are you?"), "-i").find("x-tachyon-backend: exact-cache") !=
            std::string::npos;
    semantic = Post(b.url() + "/v1/chat/completions", ChatBody("who are you"), "-i")
                   .find("x-tachyon-backend: semantic-cache") != std::string::npos;
    return exact && semantic;
  });
  EXPECT_TRUE(exact) << "b serves a's answer from the exact cache";
  EXPECT_TRUE(semantic) << "b serves a's answer from the semantic cache";
  redis.Stop();
  std::string down;
  Eventually([&] {  // the stores notice Redis is gone: their entries are no longer trusted
    down = Post(b.url() + "/v1/chat/completions", ChatBody("Who are you?"), "-i");
    return down.find("x-tachyon-backend: good") != std::string::npos;
  });
  EXPECT_NE(down.find("HTTP/1.1 200"), std::string::npos) << down;
  EXPECT_NE(down.find("x-tachyon-backend: good"), std::string::npos) << "Redis down: a miss, answered upstream";
  EXPECT_NE(Curl(b.url() + "/metrics").find("tachyon:cache_store_errors_total{store=\"redis\",reason=\""), std::string::npos);
  EXPECT_EQ(a.Stop(), 0);
  EXPECT_EQ(b.Stop(), 0);
}

// kill -9 while answers are being written: after a restart every entry that is
// served is whole (the upstream's exact answer), never a partial one.
// Both caches' rows (the semantic ones with their vectors) are whole after a kill -9.
TEST_F(GatewayE2eTest, CachesSurviveKillNineWithoutPartialEntries) {
  auto good = Upstream({});
  ASSERT_TRUE(good->started());
  const std::string db = TempFile("kill/exact.db");
  fs::remove_all(TempFile("kill"));
  const std::string config = WriteConfig(
      "kill.toml", Backend("good", *good) +
                       "[[route]]\nmodel = \"chat\"\nbackends = [\"good\"]\nexact_cache = true\n"
                       "semantic_cache = { embedder = \"hash\", threshold = 0.95 }\n"
                       "[cache]\nstore = \"sqlite:" + db + "\"\n");
  auto gateway = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config});
  ASSERT_TRUE(gateway->started());
  const std::string url = gateway->url() + "/v1/chat/completions";
  auto body = [](int i, const char* word = "question") {
    return R"({"model":"chat","messages":[{"role":"user","content":")" + std::string(word) + " " + std::to_string(i) +
           R"("}],"max_tokens":)" + std::to_string(1 + i % 7) + R"(,"temperature":0})";
  };
  constexpr int kRequests = 200;
  int answered = 0;
  std::mutex answered_mutex;
  std::condition_variable answered_cv;
  std::vector<std::thread> clients;
  for (int c = 0; c < 4; ++c) {
    clients.emplace_back([&, c] {
      for (int i = c; i < kRequests; i += 4) {
        const std::string file = TempFile("kill_body_" + std::to_string(c) + ".json");
        { std::ofstream(file) << body(i); }
        Curl("-X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + url);
        std::lock_guard<std::mutex> lock(answered_mutex);
        ++answered;
        answered_cv.notify_all();
      }
    });
  }
  // Killed once some answers are in and the store has written to its file (the
  // WAL) while the clients keep sending: the kill lands among writes.
  {
    std::unique_lock<std::mutex> lock(answered_mutex);
    answered_cv.wait_for(lock, std::chrono::seconds(30), [&] { return answered >= 20; });
  }
  EXPECT_TRUE(Eventually([&] {
    std::error_code error;
    return fs::file_size(db + "-wal", error) > 0 && !error;
  })) << "the store wrote nothing";
  gateway->Kill();
  for (std::thread& t : clients) t.join();
  good->Stop();  // from here on only the restored store can answer: nothing new is stored
  gateway = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config});
  ASSERT_TRUE(gateway->started()) << "the store must open after a kill -9";
  int hits = 0, semantic_hits = 0;
  // Each question as sent, and reworded (upper case: an exact miss, a semantic hit at cosine 1).
  for (int k = 0; k < 2 * kRequests; ++k) {
    const int i = k / 2;
    const std::string r = Post(gateway->url() + "/v1/chat/completions", body(i, k % 2 ? "QUESTION" : "question"), "-i");
    if (r.find("x-tachyon-cache: hit") == std::string::npos) continue;
    ++hits;
    // A semantic hit may be another restored question's answer of the same
    // scope (same max_tokens, so the same expected text): whole either way.
    semantic_hits += r.find("x-tachyon-backend: semantic-cache") != std::string::npos;
    auto answer = nlohmann::json::parse(r.substr(r.find("\r\n\r\n") + 4));
    std::string expected;
    for (int k = 0; k < 1 + i % 7; ++k) expected += " tok";
    EXPECT_EQ(answer["choices"][0]["message"]["content"], expected) << "request " << i;
  }
  std::printf("after kill -9: %d of %d requests answered from the restored store (%d semantic)\n", hits,
              2 * kRequests, semantic_hits);
  EXPECT_GT(semantic_hits, 0) << "the semantic rows written before the kill are kept";
  EXPECT_GT(hits, 0) << "the answers written before the kill are kept";
  EXPECT_EQ(gateway->Stop(), 0);
  fs::remove_all(TempFile("kill"));
}

TEST_F(GatewayE2eTest, ConfigErrorsNameTheFileLineAndKey) {
  const std::string config = WriteConfig("bad.toml", "[[backend]]\nname = \"a\"\nkind = \"grpc\"\n");
  CommandResult run = RunTachyon("serve --config " + config + " --port 0");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find(config + ":3: backend #1: key 'kind'"), std::string::npos) << run.err;
  CommandResult both = RunTachyon("serve --config " + config + " --model x.gguf --port 0");
  EXPECT_NE(both.err.find("exclusive"), std::string::npos);
  const std::string good = WriteConfig("good.toml", "[[backend]]\nname = \"a\"\nkind = \"openai\"\n"
                                                    "base_url = \"http://127.0.0.1:1/v1\"\n"
                                                    "[[route]]\nmodel = \"m\"\nbackends = [\"a\"]\n");
  CommandResult engine_flag = RunTachyon("serve --config " + good + " --threads 4 --port 0");
  EXPECT_EQ(engine_flag.exit_code, 1);
  EXPECT_NE(engine_flag.err.find("--threads is an engine flag of --model"), std::string::npos) << engine_flag.err;
}

}  // namespace
}  // namespace tachyon::e2e
