// [[key]] through the real binary: 401 without a known key, 403 on a route the
// key may not use, 429 past a limit with OpenAI's rate-limit headers, tenants
// kept apart in the exact cache, and GET /v1/keys (admin key).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "gateway_config_files.h"
#include "run_command.h"
#include "server_process.h"

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

}  // namespace
}  // namespace tachyon::e2e
