// The tail-latency levers through `tachyon serve --config`: hedged requests
// (an upstream late on its first byte, hedged to another upstream and to a
// local engine), single flight for identical cache misses, and the semantic
// cache's live audit.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "gateway_config_files.h"
#include "run_command.h"
#include "server_process.h"
#include "tests/support/eventually.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;
using testing::Eventually;

class TailLatencyE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  }
  static std::string Post(const std::string& url, const std::string& body, const std::string& flags = "") {
    const std::string file = TempFile("tail_body_" + std::to_string(std::hash<std::string>()(body + flags)) + ".json");
    { std::ofstream(file) << body; }
    return Curl(flags + " -i -X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + url);
  }
  static std::string Header(const std::string& response, const std::string& name) {
    const size_t at = response.find("\n" + name + ": ");
    if (at == std::string::npos) return "";
    const size_t start = at + name.size() + 3;
    return response.substr(start, response.find_first_of("\r\n", start) - start);
  }
  static double Metric(const std::string& url, const std::string& series) {
    const std::string text = Curl(url + "/metrics");
    const size_t at = text.find(series + " ");
    return at == std::string::npos ? 0 : std::strtod(text.c_str() + at + series.size() + 1, nullptr);
  }
};

std::string Chat(const std::string& model, const std::string& question, bool stream = true) {
  return nlohmann::json({{"model", model},
                         {"temperature", 0},
                         {"max_tokens", 4},
                         {"stream", stream},
                         {"messages", {{{"role", "user"}, {"content", question}}}}})
      .dump();
}

TEST_F(TailLatencyE2eTest, ALateUpstreamIsHedgedToAnotherUpstreamAndToALocalEngine) {
  auto slow = Upstream({"--first-byte-ms", "1500"});
  auto fast = Upstream({});
  ASSERT_TRUE(slow->started() && fast->started());
  const std::string model = TempFile("tail_tiny.gguf");
  ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model).exit_code, 0);
  const std::string config = WriteConfig(
      "hedge.toml", Backend("slow", *slow, "first_byte_timeout = 10") + Backend("fast", *fast) +
                        "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model +
                        "\"\nthreads = 1\nchat_template = \"chatml\"\n"
                        "[[route]]\nmodel = \"remote\"\nbackends = [\"slow\", \"fast\"]\nhedge = { after_ms = 100 }\n"
                        "[[route]]\nmodel = \"local\"\nbackends = [\"slow\", \"engine\"]\nhedge = { after_ms = 100 }\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  for (bool stream : {true, false}) {
    const std::string remote = Post(gateway.url() + "/v1/chat/completions", Chat("remote", "hi", stream));
    EXPECT_EQ(Header(remote, "x-tachyon-backend"), "fast") << remote;
    EXPECT_NE(remote.find(" tok"), std::string::npos) << remote;
    const std::string local = Post(gateway.url() + "/v1/chat/completions", Chat("local", "hi", stream));
    EXPECT_EQ(Header(local, "x-tachyon-backend"), "engine") << local;
    EXPECT_NE(local.find("HTTP/1.1 200"), std::string::npos) << local;
  }
  // The client's header turns it off: the late upstream answers, late.
  const std::string off = Post(gateway.url() + "/v1/chat/completions", Chat("remote", "hi"), "-H 'x-tachyon-hedge: off'");
  EXPECT_EQ(Header(off, "x-tachyon-backend"), "slow") << off;
  EXPECT_EQ(Metric(gateway.url(), R"(tachyon:hedges_total{route="remote",outcome="won"})"), 2);
  EXPECT_EQ(Metric(gateway.url(), R"(tachyon:hedges_total{route="local",outcome="won"})"), 2);
  // Every loser was cancelled: nothing is left in flight.
  EXPECT_TRUE(Eventually([&] {
    return Metric(gateway.url(), R"(tachyon:backend_requests_in_flight{backend="slow"})") == 0 &&
           Metric(gateway.url(), R"(tachyon:backend_requests_in_flight{backend="engine"})") == 0;
  }));
  EXPECT_EQ(gateway.Stop(), 0);
  fs::remove(model);
}

TEST_F(TailLatencyE2eTest, IdenticalMissesInFlightShareOneUpstreamCall) {
  // The leader's first byte is late enough that the other clients, started at once,
  // arrive while it is in flight even on a loaded machine; one that does not (it
  // finds the stored answer) is told so, and nothing goes upstream a second time.
  auto up = Upstream({"--first-byte-ms", "1500"});
  ASSERT_TRUE(up->started());
  const std::string config =
      WriteConfig("single_flight.toml", "[cache]\nstore = \"memory\"\n" + Backend("up", *up) +
                                            "[[route]]\nmodel = \"chat\"\nbackends = [\"up\"]\nexact_cache = true\n");
  ServerProcess gateway({"--config", config});
  ASSERT_TRUE(gateway.started());
  std::vector<std::string> answers(8);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < answers.size(); ++i) {
    clients.emplace_back([&, i] {
      answers[i] = Post(gateway.url() + "/v1/chat/completions", Chat("chat", "the same question", i % 2 == 0));
    });
  }
  for (auto& c : clients) c.join();
  int leaders = 0, followers = 0, late = 0;
  for (const std::string& a : answers) {
    EXPECT_NE(a.find("HTTP/1.1 200"), std::string::npos) << a;
    // The whole answer's content, or a stream's four pieces.
    int pieces = 0;
    for (size_t at = a.find("\" tok"); at != std::string::npos; at = a.find("\" tok", at + 1)) ++pieces;
    EXPECT_TRUE(a.find("\" tok tok tok tok\"") != std::string::npos || pieces == 4) << a;
    leaders += Header(a, "x-tachyon-cache") == "miss";
    followers += Header(a, "x-tachyon-cache") == "coalesced";
    late += Header(a, "x-tachyon-cache") == "hit";
  }
  EXPECT_EQ(leaders, 1);
  EXPECT_GE(followers, 1);
  EXPECT_EQ(followers + late, 7);
  EXPECT_EQ(Metric(gateway.url(), R"(tachyon:cache_coalesced_total{route="chat"})"), followers);
  EXPECT_EQ(Metric(gateway.url(), R"(tachyon:upstream_first_byte_seconds_count{backend="up"})"), 1)
      << "one call upstream for all eight";
  EXPECT_EQ(Header(Post(gateway.url() + "/v1/chat/completions", Chat("chat", "the same question")), "x-tachyon-cache"),
            "hit");
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(TailLatencyE2eTest, ASemanticHitIsAuditedInTheBackground) {
  auto up = Upstream({});
  ASSERT_TRUE(up->started());
  const std::string config = WriteConfig(
      "audit.toml", "[cache]\nstore = \"memory\"\n" + Backend("up", *up) +
                        "[[route]]\nmodel = \"chat\"\nbackends = [\"up\"]\n"
                        "semantic_cache = { embedder = \"hash\", threshold = 0.6, guards = \"off\", audit_sample = 1.0 }\n");
  ServerProcess gateway({"--config", config, "--admin-key", "admin-k"});
  ASSERT_TRUE(gateway.started());
  EXPECT_EQ(Header(Post(gateway.url() + "/v1/chat/completions", Chat("chat", "how do I reset my password")),
                   "x-tachyon-cache"),
            "miss");
  EXPECT_TRUE(Eventually([&] {
    return Header(Post(gateway.url() + "/v1/chat/completions", Chat("chat", "how do I reset my password please")),
                  "x-tachyon-cache") == "hit";
  }));
  EXPECT_TRUE(Eventually(
      [&] { return Metric(gateway.url(), R"(tachyon:cache_semantic_audits_total{route="chat",result="agree"})") >= 1; }));
  const nlohmann::json stats =
      nlohmann::json::parse(Curl("-H 'Authorization: Bearer admin-k' " + gateway.url() + "/v1/cache"));
  EXPECT_GE(stats["semantic"]["audits"]["chat"]["audits"].get<int>(), 1) << stats.dump();
  EXPECT_EQ(stats["semantic"]["audits"]["chat"]["disagreements"], 0);
  EXPECT_DOUBLE_EQ(stats["semantic"]["audits"]["chat"]["threshold"].get<double>(), 0.6);
  EXPECT_EQ(gateway.Stop(), 0);
}

}  // namespace
}  // namespace tachyon::e2e
