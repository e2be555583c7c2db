// `tachyon bench` end to end: the real binary against a real `tachyon serve` (the
// built-in demo model, so no ../shared is needed) on a free port.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "run_command.h"
#include "server_process.h"

namespace tachyon::e2e {
namespace {

namespace fs = std::filesystem;

std::string TempPath(const std::string& name) {
  return ::testing::TempDir() + "/bench_e2e_" + std::to_string(::getpid()) + "_" + name;
}

nlohmann::json ReadJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return nlohmann::json::parse(ss.str(), nullptr, false);
}

// The value of a counter or gauge in Prometheus text, or -1.
double MetricValue(const std::string& metrics, const std::string& name) {
  size_t at = metrics.find("\n" + name + "{");
  if (at == std::string::npos) return -1;
  at = metrics.find("} ", at);
  return std::stod(metrics.substr(at + 2));
}

class BenchE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
  }
  void TearDown() override {
    for (const std::string& f : files_) fs::remove(f);
  }
  std::string File(const std::string& name) {
    files_.push_back(TempPath(name));
    return files_.back();
  }
  std::vector<std::string> files_;
};

TEST_F(BenchE2eTest, CountsAgreeWithTheServersMetrics) {
  ServerProcess server({});
  ASSERT_TRUE(server.started());
  const std::string out = File("run.json"), html = File("run.html");
  CommandResult r = RunTachyon("bench --url " + server.url() +
                               " --workload shared-prefix --num-prefixes 2 --prefix-len 40 --input-len 8"
                               " --output-len 12 --num-requests 12 --concurrency 3 --ignore-eos --no-progress"
                               " --slo ttft=60000 --out " + out + " --html " + html);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("12 ok, 0 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(from the server's usage)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("goodput"), std::string::npos) << r.out;

  nlohmann::json run = ReadJson(out);
  ASSERT_TRUE(run.is_object()) << "no run file";
  const nlohmann::json& s = run["summary"];
  EXPECT_EQ(s["num_requests"], 12);
  EXPECT_EQ(s["num_ok"], 12);
  EXPECT_EQ(s["total_output_tokens"], 12 * 12) << "--ignore-eos: exactly max_tokens each";
  EXPECT_EQ(s["all_tokens_from_usage"], true);
  EXPECT_EQ(s["ttft"]["count"], 12);
  ASSERT_EQ(run["records"].size(), 12u);
  int64_t prompt_tokens = 0;
  for (const nlohmann::json& rec : run["records"]) {
    EXPECT_EQ(rec["ok"], true);
    EXPECT_EQ(rec["output_tokens"], 12);
    EXPECT_EQ(rec["max_tokens"], 12);
    EXPECT_GE(rec["chunks_s"].size(), 1u);
    EXPECT_LE(rec["chunks_s"].size(), 12u);
    prompt_tokens += rec["prompt_tokens"].get<int64_t>();
  }
  EXPECT_EQ(s["total_prompt_tokens"], prompt_tokens);
  EXPECT_EQ(run["info"]["model"], "tachyon-demo (random weights)") << "discovered from /v1/models";

  // The server saw exactly what the client counted.
  const std::string metrics = Curl(server.url() + "/metrics");
  EXPECT_EQ(MetricValue(metrics, "tachyon:request_success_total"), 12) << metrics;
  EXPECT_EQ(MetricValue(metrics, "tachyon:generation_tokens_total"), 144);
  EXPECT_EQ(MetricValue(metrics, "tachyon:prompt_tokens_total"), static_cast<double>(prompt_tokens));
  EXPECT_EQ(metrics.find("\ntachyon:request_error_total{"), std::string::npos) << "no error of any kind";
  EXPECT_GT(MetricValue(metrics, "tachyon:prefix_cache_hits_total"), 0) << "the prefixes are shared";

  std::ifstream h(html);
  std::stringstream page;
  page << h.rdbuf();
  EXPECT_EQ(page.str().rfind("<!DOCTYPE html>", 0), 0u);
  EXPECT_NE(page.str().find("CDF of TTFT"), std::string::npos);

  // A run compared with itself: every ratio 1, nothing outside the noise.
  CommandResult same = RunTachyon("bench compare " + out + " " + out);
  ASSERT_EQ(same.exit_code, 0) << same.err;
  EXPECT_NE(same.out.find("TTFT p95 (ms)"), std::string::npos) << same.out;
  EXPECT_EQ(same.out.find("B better\n"), std::string::npos) << same.out;
  EXPECT_EQ(same.out.find("B worse\n"), std::string::npos) << same.out;
}

TEST_F(BenchE2eTest, ChatEndpointAndConversation) {
  ServerProcess server({});
  ASSERT_TRUE(server.started());
  const std::string out = File("chat.json");
  CommandResult r = RunTachyon("bench --url " + server.url() +
                               "/v1 --endpoint chat --workload conversation --turns 2 --input-len 6 --output-len 5"
                               " --num-requests 6 --concurrency 2 --ignore-eos --no-progress --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  nlohmann::json run = ReadJson(out);
  EXPECT_EQ(run["summary"]["num_ok"], 6) << r.out;
  // The second turn of each conversation carries the first: a longer prompt.
  std::map<int64_t, std::vector<int64_t>> prompts;
  for (const nlohmann::json& rec : run["records"]) {
    prompts[rec["session"].get<int64_t>()].resize(2);
    prompts[rec["session"].get<int64_t>()][rec["turn"].get<int>()] = rec["prompt_tokens"].get<int64_t>();
  }
  EXPECT_EQ(prompts.size(), 3u);
  for (const auto& [session, p] : prompts) EXPECT_GT(p[1], p[0]) << session;
}

TEST_F(BenchE2eTest, DeadServerIsReportedNotHidden) {
  ServerProcess server({});
  ASSERT_TRUE(server.started());
  const std::string url = server.url();
  server.Stop();
  // Without --model the model list is asked first: a clear error.
  CommandResult discover = RunTachyon("bench --url " + url + " --num-requests 3 --no-progress");
  EXPECT_EQ(discover.exit_code, 2);
  EXPECT_NE(discover.err.find("is the server up?"), std::string::npos) << discover.err;
  // With --model every request is sent, fails, and is counted by kind.
  CommandResult r = RunTachyon("bench --url " + url + " --model m --num-requests 3 --no-progress");
  EXPECT_EQ(r.exit_code, 1) << "nothing succeeded";
  EXPECT_NE(r.out.find("0 ok, 3 failed"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("connect"), std::string::npos) << r.out;
}

TEST_F(BenchE2eTest, BadInputIsAClearError) {
  CommandResult r = RunTachyon("bench --workload nope --model m");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown --workload 'nope'"), std::string::npos) << r.err;
  r = RunTachyon("bench --input-len uniform:9:3 --model m");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--input-len"), std::string::npos) << r.err;
  r = RunTachyon("bench --url ftp://127.0.0.1 --model m");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("is not an http:// or https:// URL"), std::string::npos) << r.err;
  r = RunTachyon("bench --slo ttft=abc --model m");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--slo"), std::string::npos) << r.err;
  const std::string not_run = File("not_run.json");
  std::ofstream(not_run) << "{\"a\": 1}";
  r = RunTachyon("bench compare " + not_run + " " + not_run);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("not a run file"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tachyon::e2e
