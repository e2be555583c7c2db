// The runner against a real HttpServer whose handler streams in a controlled way:
// what the client measures and how it classifies failures.
#include "bench/bench_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include <signal.h>
#include <unistd.h>

#include "bench/arrivals.h"
#include "http/http_server.h"

namespace tachyon {
namespace {

class BenchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // A server that buffers whatever its handler writes (the "huge" answer is 17 MB).
    auto server = HttpServer::Start({.port = 0, .max_unsent_bytes = int64_t{1} << 30},
                                    [this](const HttpRequest& r, std::shared_ptr<ResponseWriter> w) {
      Handle(r, std::move(w));
    });
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }
  void TearDown() override {
    server_->Stop(2.0);
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto& t : threads_) t.join();
  }

  // "mode" in the request body picks the behaviour; max_tokens chunks of text "x".
  void Handle(const HttpRequest& r, std::shared_ptr<ResponseWriter> w) {
    nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      bodies_.push_back(body);
    }
    const std::string mode = body.value("mode", "ok");
    if (mode == "busy") {
      w->Respond(429, "application/json", R"({"error":{"message":"too many requests","type":"x"}})");
      return;
    }
    if (mode == "json") {  // a server that ignores "stream": true
      w->Respond(200, "application/json", R"({"choices":[{"index":0,"text":"x"}]})");
      return;
    }
    const int n = body.value("max_tokens", body.value("max_completion_tokens", 1));
    const bool chat = r.target == "/v1/chat/completions";
    w->StartStream(200, "text/event-stream");
    std::lock_guard<std::mutex> lock(mutex_);
    threads_.emplace_back([w, n, mode, chat] {
      if (mode == "endless") {  // small events that never stop (until the client goes)
        for (int i = 0; i < 2000000 && !w->closed(); ++i) {
          w->Write("data: {\"choices\":[{\"index\":0,\"text\":\"x\"}]}\n\n");
          if (i % 256 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
        w->End();
        return;
      }
      if (mode == "huge") {  // one event that never ends
        w->Write("data: ");
        for (int mb = 0; mb < 17; ++mb) w->Write(std::string(1 << 20, 'x'));
        w->End();
        return;
      }
      for (int i = 0; i < n; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        if (mode == "fail_midway" && i == 1) {
          w->Write("data: {\"error\":{\"message\":\"engine fell over\"}}\n\n");
          w->End();
          return;
        }
        w->Write(chat ? "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"x \"}}]}\n\n"
                      : "data: {\"choices\":[{\"index\":0,\"text\":\"x \"}]}\n\n");
      }
      if (mode != "no_usage") {
        w->Write("data: {\"choices\":[],\"usage\":{\"prompt_tokens\":7,\"completion_tokens\":" + std::to_string(n) +
                 "}}\n\n");
      }
      w->Write("data: [DONE]\n\n");
      w->End();
    });
  }

  BenchRunOptions Options(const std::string& extra_body, const std::string& endpoint = "completions") {
    BenchRunOptions o;
    o.target.url = {"127.0.0.1", server_->port(), ""};
    o.target.endpoint = endpoint;
    o.target.model = "m";
    if (!extra_body.empty()) o.target.extra_body = nlohmann::json::parse(extra_body);
    o.target.timeout_seconds = 10;
    return o;
  }

  std::unique_ptr<Workload> MakeWorkload(const std::string& kind, int64_t n, const std::string& output_len) {
    WorkloadOptions wo{.kind = kind, .num_turns = 3, .num_requests = n};
    wo.input_len = *LengthDist::Parse("5");
    wo.output_len = *LengthDist::Parse(output_len);
    auto w = Workload::Create(wo);
    EXPECT_TRUE(w.ok()) << w.status().ToString();
    return std::move(w).value();
  }

  std::unique_ptr<HttpServer> server_;
  std::mutex mutex_;
  std::vector<std::thread> threads_;
  std::vector<nlohmann::json> bodies_;
};

TEST_F(BenchRunnerTest, TimesEveryChunkAndTakesTokensFromUsage) {
  auto w = MakeWorkload("random", 6, "5");
  BenchRunOptions o = Options("");
  o.concurrency = 3;
  int progress_calls = 0;
  o.on_progress = [&](const BenchProgress&) { ++progress_calls; };
  o.progress_interval_seconds = 0.02;
  BenchRun run = RunBench(*w, o);
  ASSERT_EQ(run.records.size(), 6u);
  for (const RequestRecord& r : run.records) {
    ASSERT_TRUE(r.ok) << r.error_kind << ": " << r.error_message;
    ASSERT_EQ(r.chunk_seconds.size(), 5u);
    EXPECT_TRUE(r.tokens_from_usage);
    EXPECT_EQ(r.output_tokens, 5);
    EXPECT_EQ(r.prompt_tokens, 7);
    // Chunk i was written after (i + 1) sleeps of 20 ms, so it cannot arrive earlier
    // (sleeps never return early); and chunks were read one by one, not all at the end
    // (most gaps are long even on a loaded machine).
    int long_gaps = 0;
    for (size_t i = 0; i < r.chunk_seconds.size(); ++i) {
      EXPECT_GE(r.chunk_seconds[i], 0.0199 * static_cast<double>(i + 1)) << i;
      if (i > 0 && r.chunk_seconds[i] - r.chunk_seconds[i - 1] > 0.005) ++long_gaps;
    }
    EXPECT_GE(long_gaps, 3);
    EXPECT_GE(r.e2e_seconds, r.chunk_seconds.back());
  }
  // Closed loop of 3: requests 3..5 start after one of 0..2 ends.
  EXPECT_GE(run.records[3].start_seconds, run.records[0].e2e_seconds * 0.9);
  EXPECT_GT(progress_calls, 1);
  // The client measured its own load: some CPU, and lag samples from a ~0.25 s run.
  EXPECT_GT(run.load.cpu_seconds, 0);
  EXPECT_GT(run.load.cpu_share, 0);
  EXPECT_LE(run.load.lag_p50_seconds, run.load.lag_p99_seconds);
  EXPECT_LE(run.load.lag_p99_seconds, run.load.lag_max_seconds);
  EXPECT_GT(run.load.lag_max_seconds, 0);
  ASSERT_EQ(bodies_.size(), 6u);
  EXPECT_EQ(bodies_[0]["stream"], true);
  EXPECT_EQ(bodies_[0]["stream_options"]["include_usage"], true);
  EXPECT_EQ(bodies_[0]["model"], "m");
  EXPECT_EQ(bodies_[0]["max_tokens"], 5);
  EXPECT_EQ(bodies_[0]["temperature"], 0);
  EXPECT_FALSE(bodies_[0].contains("ignore_eos"));
  // Connections were kept alive and reused: 3 opened for 6 requests.
  EXPECT_EQ(run.client.connections_opened, 3);
  EXPECT_EQ(run.client.connections_reused, 3);
}

TEST_F(BenchRunnerTest, CountsTokensFromTheStreamWithoutUsageAndSaysSo) {
  auto w = MakeWorkload("random", 2, "4");
  BenchRun run = RunBench(*w, Options(R"({"mode":"no_usage"})"));
  ASSERT_EQ(run.records.size(), 2u);
  for (const RequestRecord& r : run.records) {
    EXPECT_TRUE(r.ok);
    EXPECT_FALSE(r.tokens_from_usage);
    EXPECT_EQ(r.output_tokens, 4);
    EXPECT_EQ(r.prompt_tokens, 5);  // the workload's own count (words)
  }
  EXPECT_FALSE(Summarize(run.records, run.duration_seconds, {}).all_tokens_from_usage);
}

TEST_F(BenchRunnerTest, FailuresAreCountedByKindWithTheServersMessage) {
  auto w = MakeWorkload("random", 3, "4");
  BenchRun busy = RunBench(*w, Options(R"({"mode":"busy"})"));
  ASSERT_EQ(busy.records.size(), 3u);
  for (const RequestRecord& r : busy.records) {
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error_kind, "http_429");
    EXPECT_EQ(r.error_message, "too many requests");
  }
  BenchRun midway = RunBench(*w, Options(R"({"mode":"fail_midway"})"));
  for (const RequestRecord& r : midway.records) {
    EXPECT_FALSE(r.ok);
    EXPECT_EQ(r.error_kind, "stream_error");
    EXPECT_EQ(r.error_message, "engine fell over");
  }
  BenchRun huge = RunBench(*w, Options(R"({"mode":"huge"})"));
  for (const RequestRecord& r : huge.records) EXPECT_EQ(r.error_kind, "oversized_event");
  BenchRun endless = RunBench(*w, Options(R"({"mode":"endless"})"));
  for (const RequestRecord& r : endless.records) {
    EXPECT_EQ(r.error_kind, "oversized_stream") << r.error_message;
    EXPECT_LE(r.chunk_seconds.size(), 4096u) << "memory bounded: no more than the cap is recorded";
  }
  BenchRun json = RunBench(*w, Options(R"({"mode":"json"})"));
  for (const RequestRecord& r : json.records) {
    EXPECT_EQ(r.error_kind, "not_streamed");
    EXPECT_EQ(r.error_message, "the server answered 'application/json', not an event stream");
  }
  BenchRunOptions dead = Options("");
  server_->Stop(1.0);
  BenchRun refused = RunBench(*w, dead);
  BenchSummary s = Summarize(refused.records, refused.duration_seconds, {});
  EXPECT_EQ(s.num_ok, 0);
  EXPECT_EQ(s.errors_by_kind["connect"], 3);
}

TEST_F(BenchRunnerTest, ConversationResendsTheHistoryWithTheRealReplies) {
  auto w = MakeWorkload("conversation", 6, "2");  // 2 sessions x 3 turns
  BenchRunOptions o = Options("", "chat");
  o.concurrency = 2;
  BenchRun run = RunBench(*w, o);
  ASSERT_EQ(run.records.size(), 6u);
  for (const RequestRecord& r : run.records) EXPECT_TRUE(r.ok) << r.error_message;
  ASSERT_EQ(bodies_.size(), 6u);
  size_t max_messages = 0;
  for (const nlohmann::json& b : bodies_) {
    const nlohmann::json& m = b["messages"];
    max_messages = std::max(max_messages, m.size());
    ASSERT_EQ(m.size() % 2, 1u);
    // Every assistant message is the reply streamed for the turn before: "x x ".
    for (size_t i = 1; i < m.size(); i += 2) {
      EXPECT_EQ(m[i]["role"], "assistant");
      EXPECT_EQ(m[i]["content"], "x x ");
    }
    EXPECT_EQ(b["max_completion_tokens"], 2);
  }
  EXPECT_EQ(max_messages, 5u);  // the third turn: user, assistant, user, assistant, user
}

TEST_F(BenchRunnerTest, DurationStopsNewRequests) {
  auto w = MakeWorkload("random", 1000, "3");
  BenchRunOptions o = Options("");
  o.concurrency = 2;
  o.duration_seconds = 0.3;
  BenchRun run = RunBench(*w, o);
  EXPECT_TRUE(run.stopped_by_duration);
  EXPECT_LT(run.records.size(), 100u);
  EXPECT_GT(run.records.size(), 0u);
  for (const RequestRecord& r : run.records) EXPECT_TRUE(r.ok);
}

TEST_F(BenchRunnerTest, RequestRateSpreadsArrivals) {
  auto w = MakeWorkload("random", 5, "1");
  BenchRunOptions o = Options("");
  o.request_rate = 20;  // mean gap 50 ms
  o.seed = 3;
  BenchRun run = RunBench(*w, o);
  ASSERT_EQ(run.records.size(), 5u);
  std::vector<double> expected = ArrivalTimes(5, 20, 1, 3);
  std::vector<double> starts;
  for (const RequestRecord& r : run.records) starts.push_back(r.start_seconds);
  std::sort(starts.begin(), starts.end());
  // Never before its time; late only by the loop's (and a loaded machine's) delay.
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_GE(starts[i], expected[i] - 1e-3) << i;
    EXPECT_LE(starts[i], expected[i] + 0.2) << i;
  }
}

TEST_F(BenchRunnerTest, ASharedClientKeepsItsConnectionsForTheNextRun) {
  auto w = MakeWorkload("random", 4, "2");
  BenchRunOptions o = Options("");
  o.concurrency = 2;
  HttpClient client;
  BenchRun warm = RunBench(*w, o, client);
  EXPECT_EQ(warm.client.connections_opened, 2);
  BenchRun measured = RunBench(*w, o, client);
  EXPECT_EQ(measured.client.connections_opened, 2) << "no new connection in the second run";
  EXPECT_EQ(measured.client.connections_reused, 2 + 4);
  for (const RequestRecord& r : measured.records) EXPECT_TRUE(r.ok);
}

TEST_F(BenchRunnerTest, CtrlCKeepsTheResultsSoFar) {
  auto w = MakeWorkload("random", 20, "uniform:1:40");
  BenchRunOptions o = Options("");
  o.concurrency = 2;
  o.stop_on_interrupt = true;
  std::thread interrupter([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
    ::kill(::getpid(), SIGINT);
  });
  BenchRun run = RunBench(*w, o);
  interrupter.join();
  EXPECT_TRUE(run.interrupted);
  int interrupted = 0;
  for (const RequestRecord& r : run.records) {
    if (!r.ok) {
      EXPECT_EQ(r.error_kind, "interrupted");
      ++interrupted;
    }
  }
  EXPECT_EQ(interrupted, 2) << "the two in flight";
  EXPECT_LT(run.records.size(), 20u);
  EXPECT_GT(run.duration_seconds, 0.3);
}

}  // namespace
}  // namespace tachyon
