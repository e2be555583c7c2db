// [[key]] through the real binary: 401 without a known key, 403 on a route the
// key may not use, 429 past a limit with OpenAI's rate-limit headers, tenants
// kept apart in the exact cache, and GET /v1/keys (admin key). Then two replicas
// sharing one real redis-server: one limit across both, tenants apart in the
// shared exact and semantic caches, a key revoked by SIGHUP, and Redis killed
// mid-run (each replica takes its share, nothing hangs).
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gateway_config_files.h"
#include "run_command.h"
#include "server_process.h"
#include "tests/support/eventually.h"
#include "tests/support/redis_server.h"

namespace tachyon::e2e {
namespace {

class KeysE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    model_ = TempFile("keys_tiny.gguf");
    ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model_).exit_code, 0);
    ::setenv("KEYS_E2E_A", "sk-team-a", 1);
    ::setenv("KEYS_E2E_B", "sk-team-b", 1);
    const std::string config = WriteConfig(
        "keys.toml", "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model_ +
                         "\"\nthreads = 1\nchat_template = \"chatml\"\n"
                         "[[route]]\nmodel = \"chat\"\nbackends = [\"engine\"]\nexact_cache = true\n"
                         "[[route]]\nmodel = \"other\"\nbackends = [\"engine\"]\n"
                         "[[key]]\nname = \"team-a\"\nkey_env = \"KEYS_E2E_A\"\nroutes = [\"chat\"]\n"
                         "requests_per_minute = 3\n"
                         "[[key]]\nname = \"team-b\"\nkey_env = \"KEYS_E2E_B\"\ntokens_per_minute = 100000\n"
                         "[cache]\nstore = \"memory\"\n");
    server_ = std::make_unique<ServerProcess>(
        std::vector<std::string>{"--config", config, "--admin-key", "adm-1", "--no-access-log"});
    ASSERT_TRUE(server_->started());
  }
  void TearDown() override { std::filesystem::remove(model_); }

  std::string Chat(const std::string& key, const std::string& model, const std::string& text) {
    const std::string file = TempFile("keys_body.json");
    std::ofstream(file) << R"({"model":")" << model << R"(","messages":[{"role":"user","content":")" << text
                        << R"("}],"max_tokens":4,"temperature":0})";
    return Curl("-i " + (key.empty() ? std::string() : "-H 'Authorization: Bearer " + key + "' ") +
                "-H 'Content-Type: application/json' --data-binary @" + file + " " + server_->url() +
                "/v1/chat/completions");
  }

  std::string model_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(KeysE2eTest, AuthRoutesLimitsAndTenants) {
  EXPECT_NE(Chat("", "chat", "hi").find("HTTP/1.1 401"), std::string::npos);
  EXPECT_NE(Chat("sk-wrong", "chat", "hi").find("invalid_api_key"), std::string::npos);
  const std::string forbidden = Chat("sk-team-a", "other", "hi");
  EXPECT_NE(forbidden.find("HTTP/1.1 403"), std::string::npos) << forbidden;
  EXPECT_NE(forbidden.find("model_not_allowed"), std::string::npos);
  EXPECT_NE(forbidden.find("'other'"), std::string::npos) << "names the model";

  // team-a: 3 a minute (the 403 did not count); a miss, then hits of its own tenant.
  for (int i = 0; i < 3; ++i) {
    const std::string r = Chat("sk-team-a", "chat", "same question");
    ASSERT_NE(r.find("HTTP/1.1 200"), std::string::npos) << r;
    EXPECT_NE(r.find("x-ratelimit-limit-requests: 3"), std::string::npos) << r;
    EXPECT_NE(r.find("x-ratelimit-remaining-requests: " + std::to_string(2 - i)), std::string::npos) << r;
    EXPECT_NE(r.find(i == 0 ? "x-tachyon-cache: miss" : "x-tachyon-cache: hit"), std::string::npos) << r;
  }
  const std::string limited = Chat("sk-team-a", "chat", "same question");
  EXPECT_NE(limited.find("HTTP/1.1 429"), std::string::npos) << limited;
  EXPECT_NE(limited.find("rate_limit_exceeded"), std::string::npos);
  EXPECT_NE(limited.find("retry-after: "), std::string::npos);
  EXPECT_NE(limited.find("x-ratelimit-remaining-requests: 0"), std::string::npos);

  // team-b asks the same: another tenant, so the cache does not answer it.
  const std::string b = Chat("sk-team-b", "chat", "same question");
  ASSERT_NE(b.find("HTTP/1.1 200"), std::string::npos) << b;
  EXPECT_NE(b.find("x-tachyon-cache: miss"), std::string::npos) << b;
  EXPECT_NE(b.find("x-ratelimit-limit-tokens: 100000"), std::string::npos) << b;
  EXPECT_EQ(b.find("x-ratelimit-limit-requests"), std::string::npos) << "no request limit, no such header";

  const std::string keys = Curl("-H 'Authorization: Bearer adm-1' " + server_->url() + "/v1/keys");
  const nlohmann::json list = nlohmann::json::parse(keys, nullptr, false);
  ASSERT_FALSE(list.is_discarded()) << keys;
  ASSERT_EQ(list["data"].size(), 2u) << keys;
  EXPECT_EQ(list["data"][0]["name"], "team-a");
  EXPECT_EQ(list["data"][0]["usage"]["remaining_requests"], 0);
  EXPECT_EQ(keys.find("sk-team"), std::string::npos) << "never a secret";
  EXPECT_NE(Curl("-H 'Authorization: Bearer sk-team-a' " + server_->url() + "/v1/keys").find("invalid_api_key"),
            std::string::npos) << "a client's key is not the admin key";

  const std::string metrics = Curl("-H 'Authorization: Bearer sk-team-a' " + server_->url() + "/metrics");
  EXPECT_NE(metrics.find("tachyon:key_requests_total{key=\"team-a\",status=\"200\"} 3"), std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("tachyon:key_requests_total{key=\"team-a\",status=\"403\"} 1"), std::string::npos);
  EXPECT_NE(metrics.find("tachyon:key_limited_total{key=\"team-a\",limit=\"requests\"} 1"), std::string::npos);
}

// Two gateway processes, one redis-server: the [cache] store holds the entries
// and the keys' limits.
class SharedKeysE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
    redis_ = std::make_unique<testing_util::RedisServer>(testing_util::FreePort());
    model_ = TempFile("shared_keys_tiny.gguf");
    ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model_).exit_code, 0);
    ::setenv("SHARED_KEYS_A", "sk-a", 1);
    ::setenv("SHARED_KEYS_B", "sk-b", 1);
    ::setenv("SHARED_KEYS_C", "sk-c", 1);
    ::setenv("SHARED_KEYS_D", "sk-d", 1);
    ::setenv("SHARED_KEYS_E", "sk-e", 1);
    config_ = WriteConfig("shared_keys.toml", Config(true));
    for (auto* s : {&a_, &b_}) {
      *s = std::make_unique<ServerProcess>(
          std::vector<std::string>{"--config", config_, "--admin-key", "adm-1", "--no-access-log"});
      ASSERT_TRUE((*s)->started());
    }
  }
  void TearDown() override { std::filesystem::remove(model_); }

  std::string Config(bool with_d) const {
    std::string c = "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model_ +
                    "\"\nthreads = 1\nchat_template = \"chatml\"\n"
                    "[[route]]\nmodel = \"chat\"\nbackends = [\"engine\"]\nexact_cache = true\n"
                    "[[route]]\nmodel = \"sem\"\nbackends = [\"engine\"]\n"
                    "semantic_cache = { embedder = \"hash\", threshold = 0.9 }\n"
                    "[[route]]\nmodel = \"plain\"\nbackends = [\"engine\"]\n"
                    "[[key]]\nname = \"team-a\"\nkey_env = \"SHARED_KEYS_A\"\nroutes = [\"plain\"]\n"
                    "requests_per_minute = 5\n"
                    "[[key]]\nname = \"team-b\"\nkey_env = \"SHARED_KEYS_B\"\n"
                    "[[key]]\nname = \"team-c\"\nkey_env = \"SHARED_KEYS_C\"\n"
                    "[[key]]\nname = \"team-e\"\nkey_env = \"SHARED_KEYS_E\"\nrequests_per_minute = 4\n";
    if (with_d) c += "[[key]]\nname = \"team-d\"\nkey_env = \"SHARED_KEYS_D\"\n";
    return c + "[cache]\nstore = \"" + redis_->url() + "\"\n";
  }

  std::string Chat(const ServerProcess& s, const std::string& key, const std::string& model, const std::string& text) {
    const std::string file = TempFile("shared_keys_body.json");
    std::ofstream(file) << R"({"model":")" << model << R"(","messages":[{"role":"user","content":")" << text
                        << R"("}],"max_tokens":4,"temperature":0})";
    return Curl("-i --max-time 20 " + (key.empty() ? std::string() : "-H 'Authorization: Bearer " + key + "' ") +
                "-H 'Content-Type: application/json' --data-binary @" + file + " " + s.url() + "/v1/chat/completions");
  }
  static bool Is(const std::string& r, int status) {
    return r.find("HTTP/1.1 " + std::to_string(status)) != std::string::npos;
  }

  std::unique_ptr<testing_util::RedisServer> redis_;
  std::string model_, config_;
  std::unique_ptr<ServerProcess> a_, b_;
};

TEST_F(SharedKeysE2eTest, OneLimitTwoReplicasTenantsRevocationAndRedisDown) {
  EXPECT_TRUE(Is(Chat(*a_, "", "plain", "hi"), 401));
  EXPECT_TRUE(Is(Chat(*b_, "sk-wrong", "plain", "hi"), 401));
  EXPECT_TRUE(Is(Chat(*b_, "sk-a", "chat", "hi"), 403));

  // 5 a minute for team-a, 3 + 3 requests alternating between the replicas: the sixth is refused.
  for (int i = 0; i < 6; ++i) {
    const std::string r = Chat(i % 2 == 0 ? *a_ : *b_, "sk-a", "plain", "count me " + std::to_string(i));
    if (i < 5) {
      ASSERT_TRUE(Is(r, 200)) << i << r;
      EXPECT_NE(r.find("x-ratelimit-limit-requests: 5"), std::string::npos) << r;
      EXPECT_NE(r.find("x-ratelimit-remaining-requests: " + std::to_string(4 - i)), std::string::npos) << i << r;
    } else {
      EXPECT_TRUE(Is(r, 429)) << r;
      EXPECT_NE(r.find("rate_limit_exceeded"), std::string::npos) << r;
      EXPECT_NE(r.find("retry-after: "), std::string::npos) << r;
      EXPECT_NE(r.find("x-ratelimit-remaining-requests: 0"), std::string::npos) << r;
    }
  }
  EXPECT_TRUE(Is(Chat(*a_, "sk-a", "plain", "again"), 429)) << "the other replica agrees";

  // Tenants apart in the shared caches: team-b's entries answer team-b on the
  // other replica, never team-c.
  for (const char* route : {"chat", "sem"}) {
    const std::string question = std::string("what is tenancy on ") + route;
    const std::string miss = Chat(*a_, "sk-b", route, question);
    ASSERT_TRUE(Is(miss, 200)) << miss;
    EXPECT_NE(miss.find("x-tachyon-cache: miss"), std::string::npos) << route << miss;
    EXPECT_TRUE(testing::Eventually([&] {
      return Chat(*b_, "sk-b", route, question).find("x-tachyon-cache: hit") != std::string::npos;
    })) << route << ": team-b's entry reaches the other replica";
    const std::string other = Chat(*b_, "sk-c", route, question);
    ASSERT_TRUE(Is(other, 200)) << other;
    EXPECT_NE(other.find("x-tachyon-cache: miss"), std::string::npos) << route << ": another tenant\n" << other;
  }

  // team-d revoked: replica a reloads a config without it, and refuses it at once.
  ASSERT_TRUE(Is(Chat(*a_, "sk-d", "plain", "still here"), 200));
  std::ofstream(config_) << Config(false);
  a_->Signal(SIGHUP);
  EXPECT_TRUE(testing::Eventually([&] { return Is(Chat(*a_, "sk-d", "plain", "revoked?"), 401); }));
  EXPECT_TRUE(Is(Chat(*a_, "sk-b", "plain", "others stay"), 200));

  // Both replicas' heartbeats are in Redis; /v1/keys reads the usage there.
  EXPECT_TRUE(testing::Eventually([&] {
    const nlohmann::json k =
        nlohmann::json::parse(Curl("-H 'Authorization: Bearer adm-1' " + a_->url() + "/v1/keys"), nullptr, false);
    return !k.is_discarded() && k["limits"]["shared"] == true && k["limits"]["replicas"] == 2;
  }));
  const nlohmann::json keys =
      nlohmann::json::parse(Curl("-H 'Authorization: Bearer adm-1' " + b_->url() + "/v1/keys"), nullptr, false);
  ASSERT_FALSE(keys.is_discarded());
  EXPECT_EQ(keys["data"][0]["name"], "team-a");
  EXPECT_EQ(keys["data"][0]["usage"]["remaining_requests"], 0) << keys.dump();
  // Redis killed: each replica enforces its share of team-e's 4 a minute (2 of 2
  // replicas), and no request waits for the dead store.
  redis_->Stop();
  int admitted = 0;
  for (ServerProcess* s : {a_.get(), b_.get()}) {
    for (int i = 0; i < 3; ++i) {
      const auto start = std::chrono::steady_clock::now();
      const std::string r = Chat(*s, "sk-e", "plain", "down " + std::to_string(i));
      EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10)) << "nothing hangs";
      ASSERT_TRUE(Is(r, 200) || Is(r, 429)) << r;
      admitted += Is(r, 200);
      if (i == 2) {
        EXPECT_TRUE(Is(r, 429)) << "the share of a replica is 2\n" << r;
      }
    }
  }
  EXPECT_EQ(admitted, 4);
  EXPECT_NE(Curl("-H 'Authorization: Bearer sk-b' " + b_->url() + "/metrics").find("tachyon:key_limits_shared 0"),
            std::string::npos);
}

}  // namespace
}  // namespace tachyon::e2e
