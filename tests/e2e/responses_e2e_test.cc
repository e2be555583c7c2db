// /v1/responses through the real binary (the official openai client's tests are
// tests/sdk/responses_client.mjs): stored responses kept in the [cache] store, so
// that a conversation continues after a restart (SQLite) and on another replica
// (Redis), under its tenant only; store false keeps nothing; a 400 names what is
// not served.
#include <gtest/gtest.h>

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

using json = nlohmann::json;

class ResponsesE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    model_ = TempFile("responses_tiny.gguf");
    ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model_).exit_code, 0);
    ::setenv("RESPONSES_E2E_A", "sk-resp-a", 1);
    ::setenv("RESPONSES_E2E_B", "sk-resp-b", 1);
  }
  void TearDown() override { std::filesystem::remove(model_); }

  std::string Config(const std::string& store) const {
    return WriteConfig("responses.toml", "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model_ +
                                             "\"\nthreads = 1\nchat_template = \"chatml\"\n"
                                             "[[route]]\nmodel = \"chat\"\nbackends = [\"engine\"]\n"
                                             "[[key]]\nname = \"a\"\nkey_env = \"RESPONSES_E2E_A\"\n"
                                             "[[key]]\nname = \"b\"\nkey_env = \"RESPONSES_E2E_B\"\n"
                                             "[cache]\nstore = \"" + store + "\"\n");
  }
  static std::unique_ptr<ServerProcess> Serve(const std::string& config) {
    auto s = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config, "--no-access-log"});
    EXPECT_TRUE(s->started());
    return s;
  }
  // The status line's code and the body.
  static int Post(const ServerProcess& s, const std::string& key, const json& body, json* out) {
    const std::string file = TempFile("responses_body.json");
    std::ofstream(file) << body.dump();
    const std::string reply = Curl("-w '\\n%{http_code}' -H 'Authorization: Bearer " + key +
                                   "' -H 'Content-Type: application/json' --data-binary @" + file + " " + s.url() +
                                   "/v1/responses");
    const size_t nl = reply.rfind('\n');
    *out = json::parse(reply.substr(0, nl), nullptr, false);
    return std::atoi(reply.substr(nl + 1).c_str());
  }
  static int Get(const ServerProcess& s, const std::string& key, const std::string& path, json* out,
                 const std::string& method = "GET") {
    const std::string reply = Curl("-X " + method + " -w '\\n%{http_code}' -H 'Authorization: Bearer " + key + "' " +
                                   s.url() + path);
    const size_t nl = reply.rfind('\n');
    *out = json::parse(reply.substr(0, nl), nullptr, false);
    return std::atoi(reply.substr(nl + 1).c_str());
  }

  std::string model_;
};

TEST_F(ResponsesE2eTest, AConversationContinuesAfterARestartUnderItsTenantOnly) {
  const std::string db = TempFile("responses.db");
  std::filesystem::remove(db);
  const std::string config = Config("sqlite:" + db);
  std::string first_id;
  {
    std::unique_ptr<ServerProcess> server = Serve(config);
    json r;
    ASSERT_EQ(Post(*server, "sk-resp-a", {{"model", "chat"}, {"input", "Remember 42"}, {"max_output_tokens", 16}}, &r),
              200)
        << r.dump();
    EXPECT_EQ(r["object"], "response");
    first_id = r["id"];
    json none;
    ASSERT_EQ(Post(*server, "sk-resp-a",
                   {{"model", "chat"}, {"input", "x"}, {"max_output_tokens", 16}, {"store", false}}, &none),
              200);
    EXPECT_EQ(Get(*server, "sk-resp-a", "/v1/responses/" + none["id"].get<std::string>(), &r), 404)
        << "store false keeps nothing";
    json bad;
    EXPECT_EQ(Post(*server, "sk-resp-a", {{"model", "chat"}, {"input", "x"}, {"tools", {{{"type", "web_search"}}}}},
                   &bad),
              400);
    EXPECT_NE(bad["error"]["message"].get<std::string>().find("web_search"), std::string::npos) << bad.dump();
    server->Stop();  // SIGTERM: the store's queue is written out
  }
  std::unique_ptr<ServerProcess> server = Serve(config);
  json r;
  ASSERT_EQ(Get(*server, "sk-resp-a", "/v1/responses/" + first_id, &r), 200) << "kept across the restart";
  EXPECT_EQ(r["id"], first_id);
  json other;
  EXPECT_EQ(Get(*server, "sk-resp-b", "/v1/responses/" + first_id, &other), 404) << "another tenant's";
  json next;
  ASSERT_EQ(Post(*server, "sk-resp-a",
                 {{"model", "chat"}, {"input", "What did I say?"}, {"previous_response_id", first_id},
                  {"max_output_tokens", 16}},
                 &next),
            200)
      << next.dump();
  EXPECT_EQ(next["previous_response_id"], first_id);
  EXPECT_GT(next["usage"]["input_tokens"].get<int>(), r["usage"]["input_tokens"].get<int>())
      << "the earlier turn is in the prompt";
  json items;
  ASSERT_EQ(Get(*server, "sk-resp-a", "/v1/responses/" + next["id"].get<std::string>() + "/input_items?order=asc",
                &items),
            200);
  ASSERT_EQ(items["data"].size(), 3u) << items.dump();  // the first input, its answer, the new input
  EXPECT_EQ(items["data"][1]["role"], "assistant");
  EXPECT_EQ(items["has_more"], false);
  EXPECT_EQ(Post(*server, "sk-resp-b",
                 {{"model", "chat"}, {"input", "x"}, {"previous_response_id", first_id}}, &r),
            404);
  EXPECT_EQ(r["error"]["code"], "previous_response_not_found");
  EXPECT_EQ(Get(*server, "sk-resp-a", "/v1/responses/" + first_id, &r, "DELETE"), 200);
  EXPECT_EQ(r["deleted"], true);
  EXPECT_EQ(Get(*server, "sk-resp-a", "/v1/responses/" + first_id, &r), 404);
  std::filesystem::remove(db);
}

TEST_F(ResponsesE2eTest, AReplicaContinuesAConversationStartedOnAnother) {
  if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
  testing_util::RedisServer redis(testing_util::FreePort());
  const std::string config = Config(redis.url());
  std::unique_ptr<ServerProcess> a = Serve(config), b = Serve(config);
  json r;
  ASSERT_EQ(Post(*a, "sk-resp-a", {{"model", "chat"}, {"input", "Hello"}, {"max_output_tokens", 16}}, &r), 200);
  const std::string id = r["id"];
  ASSERT_TRUE(testing::Eventually([&] {
    json got;
    return Get(*b, "sk-resp-a", "/v1/responses/" + id, &got) == 200;
  })) << "the response reaches the other replica";
  json next;
  EXPECT_EQ(Post(*b, "sk-resp-a", {{"model", "chat"}, {"input", "More"}, {"previous_response_id", id},
                                    {"max_output_tokens", 16}},
                 &next),
            200)
      << next.dump();
  EXPECT_EQ(Get(*b, "sk-resp-b", "/v1/responses/" + id, &r), 404);
}

}  // namespace
}  // namespace tachyon::e2e
