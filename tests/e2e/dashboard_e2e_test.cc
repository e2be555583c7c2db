// /v1/stats and /dashboard through the real binary: a gateway with a local
// engine and an exact cache, a client key, a few requests; then the stats
// document, and the page loaded in headless Chromium (Debian's `chromium`;
// that part is skipped with a message when it is absent): it must have drawn
// its charts and show the figures /v1/stats gives.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway_config_files.h"
#include "run_command.h"
#include "server_process.h"
#include "tests/support/eventually.h"

namespace tachyon::e2e {
namespace {

using nlohmann::json;

constexpr char kKey[] = "dash-key-1";

class DashboardE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    model_ = TempFile("dashboard_tiny.gguf");
    ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model_).exit_code, 0);
    const std::string config = WriteConfig(
        "dashboard.toml", "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model_ +
                              "\"\nthreads = 1\nchat_template = \"chatml\"\n"
                              "[[route]]\nmodel = \"chat\"\nbackends = [\"engine\"]\nexact_cache = true\n"
                              "[cache]\nstore = \"memory\"\n");
    server_ = std::make_unique<ServerProcess>(std::vector<std::string>{"--config", config, "--api-key", kKey,
                                                                          "--no-access-log"});
    ASSERT_TRUE(server_->started());
  }
  void TearDown() override { std::filesystem::remove(model_); }

  std::string Get(const std::string& path, bool with_key = true) {
    return Curl(std::string(with_key ? "-H 'Authorization: Bearer " + std::string(kKey) + "' " : "") + "'" +
                server_->url() + path + "'");
  }
  void Chat(const std::string& text, bool stream) {
    const std::string body = R"({"model":"chat","messages":[{"role":"user","content":")" + text +
                             R"("}],"max_tokens":6,"temperature":0,"stream":)" + (stream ? "true" : "false") + "}";
    const std::string file = TempFile("dashboard_body.json");
    { std::ofstream(file) << body; }
    const std::string out = Curl("-H 'Authorization: Bearer " + std::string(kKey) +
                                 "' -H 'Content-Type: application/json' --data-binary @" + file + " " +
                                 server_->url() + "/v1/chat/completions");
    ASSERT_EQ(out.find("\"error\""), std::string::npos) << out;
  }

  std::string model_;
  std::unique_ptr<ServerProcess> server_;
};

TEST_F(DashboardE2eTest, StatsAndThePageAgree) {
  // Behind the client key, both.
  EXPECT_NE(Get("/v1/stats", false).find("invalid_api_key"), std::string::npos);
  EXPECT_NE(Get("/dashboard", false).find("/dashboard?key="), std::string::npos) << "the 401 says how to open it";
  EXPECT_NE(Get("/dashboard?key=wrong", false).find("/dashboard?key="), std::string::npos);
  const std::string page = Get(std::string("/dashboard?key=") + kKey, false);
  ASSERT_NE(page.find("<title>Tachyon dashboard</title>"), std::string::npos) << page.substr(0, 300);
  // Self-contained: no script, style, font or image fetched from anywhere (the SVG namespace is a name, not a fetch).
  for (const char* fetch : {"src=", "<link", "@import", "url(", "https://"}) {
    EXPECT_EQ(page.find(fetch), std::string::npos) << fetch;
  }
  EXPECT_NE(Get("/v1/stats?window=abc").find("must be a number"), std::string::npos);

  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // a sample before the traffic
  for (int i = 0; i < 4; ++i) Chat("question " + std::to_string(i % 2), i % 2 == 1);  // 2 misses, 2 hits
  Chat("another one", true);
  std::this_thread::sleep_for(std::chrono::milliseconds(2200));  // and one after it

  const json stats = json::parse(Get("/v1/stats?window=60"), nullptr, false);
  ASSERT_FALSE(stats.is_discarded());
  ASSERT_EQ(stats["object"], "tachyon.stats");
  ASSERT_EQ(stats["routes"].size(), 1u) << stats.dump();
  const json& chat = stats["routes"][0];
  EXPECT_EQ(chat["route"], "chat");
  EXPECT_EQ(chat["requests"], 5) << stats.dump();
  EXPECT_GT(chat["requests_per_second"].get<double>(), 0);
  EXPECT_GT(chat["ttft_ms"]["p95"].get<double>(), 0);
  EXPECT_GE(chat["e2e_ms"]["p95"].get<double>(), chat["ttft_ms"]["p50"].get<double>());
  EXPECT_EQ(chat["cache"]["exact"]["hit"], 2) << stats.dump();
  EXPECT_EQ(chat["cache"]["exact"]["miss"], 3);
  EXPECT_DOUBLE_EQ(chat["cache"]["exact"]["hit_rate"].get<double>(), 0.4);
  EXPECT_FALSE(chat["timeline"]["t"].empty());
  ASSERT_EQ(stats["backends"].size(), 1u);
  EXPECT_EQ(stats["backends"][0]["state"], "closed");
  EXPECT_GT(stats["backends"][0]["ttft_ewma_ms"].get<double>(), 0);
  ASSERT_EQ(stats["engines"].size(), 1u);
  EXPECT_GE(stats["engines"][0]["batch_size"].get<double>(), 1.0) << "3 requests ran in the engine";
  EXPECT_GT(stats["engines"][0]["generation_tokens_per_second"].get<double>(), 0);

  if (std::system("command -v chromium > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "chromium is not installed: the page was not loaded in a browser";
  }
  // The page asks for a 300 s window, in steps of 5 s: wait until its charts have a
  // whole step to draw (a young server has none yet).
  ASSERT_TRUE(testing::Eventually([&] {
    const json s = json::parse(Get("/v1/stats?window=300"), nullptr, false);
    return !s.is_discarded() && s["engines"].size() == 1 && !s["engines"][0]["timeline"]["t"].empty() &&
           !s["routes"][0]["timeline"]["t"].empty();
  }, 20, 0.2));
  const std::string dom =
      Shell("timeout 120 chromium --headless --no-sandbox --disable-gpu --virtual-time-budget=4000 --dump-dom '" +
            server_->url() + "/dashboard?key=" + kKey + "' 2>/dev/null");
  const json shown = json::parse(Get("/v1/stats?window=300"), nullptr, false);  // what the page asks for
  ASSERT_FALSE(shown.is_discarded());
  const size_t updates = dom.find("data-updates=\"");
  ASSERT_NE(updates, std::string::npos) << "the page never drew an update: " << dom.substr(0, 2000);
  EXPECT_GE(std::stoi(dom.substr(updates + 14)), 1);
  // Charts drew lines: an svg with points, and paths.
  size_t charts = 0, points = 0;
  for (size_t at = dom.find("data-points=\""); at != std::string::npos; at = dom.find("data-points=\"", at + 1)) {
    ++charts;
    points += std::stoul(dom.substr(at + 13));
  }
  EXPECT_EQ(charts, 3u) << "latency and requests/s of the route, the engine's";
  EXPECT_GT(points, 0u);
  EXPECT_NE(dom.find("<path d=\"M"), std::string::npos);
  // Every figure shown is the document's (rates aside: the window's length grows between the two reads).
  int compared = 0;
  for (size_t at = dom.find("data-stat=\""); at != std::string::npos; at = dom.find("data-stat=\"", at + 1)) {
    const size_t end = dom.find('"', at + 11);
    const std::string pointer = dom.substr(at + 11, end - at - 11);
    const size_t open = dom.find('>', end) + 1;
    std::string text = dom.substr(open, dom.find('<', open) - open);
    if (pointer.find("per_second") != std::string::npos) continue;
    const json value = shown.value(json::json_pointer(pointer), json());
    if (text.size() > 3 && text.compare(text.size() - 3, 3, " ms") == 0) text.resize(text.size() - 3);
    if (value.is_null()) {
      EXPECT_EQ(text, "-") << pointer;
    } else if (value.is_string()) {
      EXPECT_EQ(text, value.get<std::string>()) << pointer;
    } else {
      EXPECT_NEAR(std::stod(text), value.get<double>(), 5e-4 + 1e-6 * std::fabs(value.get<double>())) << pointer;
    }
    ++compared;
  }
  EXPECT_GT(compared, 15) << dom.substr(0, 2000);
  EXPECT_NE(dom.find("data-stat=\"/routes/0/ttft_ms/p95\""), std::string::npos);
  EXPECT_NE(dom.find("data-stat=\"/engines/0/kv_usage\""), std::string::npos);
}

}  // namespace
}  // namespace tachyon::e2e
