// Traces, server-timing and TTFT through the real binary: `tachyon serve
// --config` with [telemetry] exports to a collector in this test (an HTTP
// server that decodes every OTLP/JSON export), in front of an upstream in this
// test (which records the traceparent it is sent) and a local engine.
#include <gtest/gtest.h>
#include <strings.h>

#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gateway_config_files.h"
#include "http/http_server.h"
#include "run_command.h"
#include "server_process.h"
#include "tests/support/eventually.h"

namespace tachyon::e2e {
namespace {

using nlohmann::json;

// An OTLP/HTTP collector: every span it was sent, decoded.
class Collector {
 public:
  Collector() {
    server_ = std::move(HttpServer::Start({}, [this](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
                          json body = json::parse(r.body, nullptr, false);
                          if (r.target != "/v1/traces" || body.is_discarded()) {
                            w->Respond(400, "application/json", "{}");
                            return;
                          }
                          {
                            std::lock_guard<std::mutex> lock(mutex_);
                            for (const auto& rs : body["resourceSpans"]) {
                              service_ = rs["resource"]["attributes"][0]["value"]["stringValue"];
                              for (const auto& ss : rs["scopeSpans"]) {
                                for (const auto& s : ss["spans"]) spans_.push_back(s);
                              }
                            }
                          }
                          cv_.notify_all();
                          w->Respond(200, "application/json", "{}");
                        }).value());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  // The spans of one trace, once `n` of them arrived (fewer after 10 s).
  std::vector<json> Trace(const std::string& trace_id, size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    std::vector<json> out;
    cv_.wait_for(lock, std::chrono::seconds(10), [&] {
      out.clear();
      for (const json& s : spans_) {
        if (s["traceId"] == trace_id) out.push_back(s);
      }
      return out.size() >= n;
    });
    return out;
  }
  std::string service() {
    std::lock_guard<std::mutex> lock(mutex_);
    return service_;
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<json> spans_;
  std::string service_;
  std::unique_ptr<HttpServer> server_;
};

// An OpenAI upstream: a whole chat answer, after `delay_ms`; it keeps the traceparent of each request.
class Upstream {
 public:
  Upstream() {
    server_ = std::move(HttpServer::Start({}, [this](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
                          {
                            std::lock_guard<std::mutex> lock(mutex_);
                            traceparents_.push_back(r.headers.count("traceparent") ? r.headers["traceparent"] : "");
                          }
                          std::this_thread::sleep_for(std::chrono::milliseconds(30));  // time to first byte
                          w->Respond(200, "application/json",
                                     json({{"id", "c1"}, {"object", "chat.completion"}, {"created", 1},
                                           {"model", "up-model"},
                                           {"choices", {{{"index", 0}, {"finish_reason", "stop"},
                                                         {"message", {{"role", "assistant"}, {"content", "hi there"}}}}}},
                                           {"usage", {{"prompt_tokens", 7}, {"completion_tokens", 2}, {"total_tokens", 9}}}})
                                         .dump());
                        }).value());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  std::vector<std::string> traceparents() {
    std::lock_guard<std::mutex> lock(mutex_);
    return traceparents_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> traceparents_;
  std::unique_ptr<HttpServer> server_;
};

const json* Find(const std::vector<json>& spans, const std::string& name) {
  for (const json& s : spans) {
    if (s["name"] == name) return &s;
  }
  return nullptr;
}

// An attribute's value as JSON ({"stringValue": ...}), or null.
json Attr(const json& span, const std::string& key) {
  for (const json& a : span["attributes"]) {
    if (a["key"] == key) return a["value"];
  }
  return nullptr;
}

std::string Header(const std::string& response, const std::string& name) {
  std::istringstream in(response);
  for (std::string line; std::getline(in, line);) {
    if (line.size() > name.size() + 1 && strncasecmp(line.c_str(), (name + ":").c_str(), name.size() + 1) == 0) {
      std::string v = line.substr(name.size() + 1);
      v.erase(0, v.find_first_not_of(' '));
      while (!v.empty() && (v.back() == '\r' || v.back() == '\n')) v.pop_back();
      return v;
    }
  }
  return "";
}

class ObservabilityE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v curl > /dev/null 2>&1") != 0) GTEST_SKIP() << "curl is not installed";
    model_ = TempFile("observability_tiny.gguf");
    ASSERT_EQ(RunTachyon("model gen --shape tiny --type q8_0 --out " + model_).exit_code, 0);
  }
  void TearDown() override { std::filesystem::remove(model_); }

  std::string Config(const std::string& upstream, const std::string& collector, const std::string& telemetry = "") {
    return WriteConfig("observability.toml",
                       "[[backend]]\nname = \"up\"\nkind = \"openai\"\nbase_url = \"" + upstream +
                           "/v1\"\nupstream_model = \"up-model\"\n"
                           "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model_ +
                           "\"\nthreads = 1\nchat_template = \"chatml\"\n"
                           "[[route]]\nmodel = \"remote\"\nbackends = [\"up\"]\nexact_cache = true\n"
                           "[[route]]\nmodel = \"local\"\nbackends = [\"engine\"]\n"
                           "[cache]\nstore = \"memory\"\n"  // nothing kept from another run
                           "[telemetry]\notlp_endpoint = \"" + collector + "\"\nservice_name = \"gw-test\"\n" +
                           telemetry);
  }
  std::string Post(const std::string& url, const std::string& body, const std::string& flags = "") {
    const std::string file = TempFile("observability_body.json");
    { std::ofstream(file) << body; }
    return Curl("-i " + flags + " -X POST -H 'Content-Type: application/json' --data-binary @" + file + " " + url);
  }

  std::string model_;
};

TEST_F(ObservabilityE2eTest, ARequestsTraceShowsWhereItsTimeWent) {
  Collector collector;
  Upstream upstream;
  ServerProcess gateway({"--config", Config(upstream.url(), collector.url())});
  ASSERT_TRUE(gateway.started());
  const std::string trace_id = "4bf92f3577b34da6a3ce929d0e0e4736", parent = "00f067aa0ba902b7";
  const std::string chat = R"({"model":"remote","messages":[{"role":"user","content":"hello"}],"max_tokens":5,)"
                           R"("temperature":0})";
  const std::string answer = Post(gateway.url() + "/v1/chat/completions", chat,
                                  "-H 'traceparent: 00-" + trace_id + "-" + parent + "-01' -H 'tracestate: team=a'");
  ASSERT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  // server-timing names the stages that ran and the upstream's time.
  const std::string timing = Header(answer, "server-timing");
  EXPECT_NE(timing.find("cache;dur="), std::string::npos) << answer;
  EXPECT_NE(timing.find("upstream;dur="), std::string::npos) << answer;
  const std::string traceparent = Header(answer, "traceparent");
  EXPECT_EQ(traceparent.substr(0, 36), "00-" + trace_id + "-") << answer;

  // server span, exact-cache stage, the attempt, the cache write.
  std::vector<json> spans = collector.Trace(trace_id, 4);
  ASSERT_GE(spans.size(), 4u);
  EXPECT_EQ(collector.service(), "gw-test");
  const json* server = Find(spans, "POST /v1/chat/completions");
  ASSERT_NE(server, nullptr);
  EXPECT_EQ((*server)["parentSpanId"], parent);  // the caller's span is our parent
  EXPECT_EQ((*server)["kind"], 2);
  EXPECT_EQ((*server)["traceState"], "team=a");
  EXPECT_EQ(traceparent.substr(36, 16), (*server)["spanId"]);
  EXPECT_EQ(Attr(*server, "gen_ai.operation.name")["stringValue"], "chat");
  EXPECT_EQ(Attr(*server, "gen_ai.request.model")["stringValue"], "remote");
  EXPECT_EQ(Attr(*server, "gen_ai.response.model")["stringValue"], "up-model");
  EXPECT_EQ(Attr(*server, "gen_ai.request.max_tokens")["intValue"], "5");
  EXPECT_EQ(Attr(*server, "gen_ai.request.temperature")["doubleValue"], 0.0);
  EXPECT_EQ(Attr(*server, "gen_ai.usage.input_tokens")["intValue"], "7");
  EXPECT_EQ(Attr(*server, "gen_ai.usage.output_tokens")["intValue"], "2");
  EXPECT_EQ(Attr(*server, "tachyon.route")["stringValue"], "remote");
  EXPECT_EQ(Attr(*server, "tachyon.backend")["stringValue"], "up");
  EXPECT_EQ(Attr(*server, "tachyon.cache")["stringValue"], "miss");
  EXPECT_EQ(Attr(*server, "http.response.status_code")["intValue"], "200");
  // A whole answer's first token is the upstream body's first byte: after its 30 ms, before the end.
  ASSERT_TRUE(Attr(*server, "tachyon.ttft_ms").is_object());
  EXPECT_GE(Attr(*server, "tachyon.ttft_ms")["doubleValue"].get<double>(), 30.0);
  EXPECT_TRUE(Attr(*server, "gen_ai.input.messages").is_null());  // no content unless capture_content

  const json* stage = Find(spans, "gateway.exact-cache");
  ASSERT_NE(stage, nullptr);
  EXPECT_EQ((*stage)["parentSpanId"], (*server)["spanId"]);
  EXPECT_EQ(Attr(*stage, "tachyon.cache")["stringValue"], "miss");
  const json* attempt = Find(spans, "chat up-model");
  ASSERT_NE(attempt, nullptr);
  EXPECT_EQ((*attempt)["parentSpanId"], (*server)["spanId"]);
  EXPECT_EQ((*attempt)["kind"], 3);
  EXPECT_EQ(Attr(*attempt, "server.address")["stringValue"], "127.0.0.1");
  EXPECT_EQ(Attr(*attempt, "tachyon.backend")["stringValue"], "up");
  std::vector<std::string> events;
  for (const json& e : (*attempt)["events"]) events.push_back(e["name"]);
  EXPECT_EQ(events, (std::vector<std::string>{"first_byte", "first_token", "end"}));
  ASSERT_NE(Find(spans, "gateway.cache_write"), nullptr);
  // The upstream was sent the attempt's span as its parent: its own trace joins ours.
  ASSERT_EQ(upstream.traceparents().size(), 1u);
  EXPECT_EQ(upstream.traceparents()[0], "00-" + trace_id + "-" + (*attempt)["spanId"].get<std::string>() + "-01");

  // The same request again: a hit, traced, with no attempt; the caller said not sampled: no trace.
  const std::string hit = Post(gateway.url() + "/v1/chat/completions", chat,
                               "-H 'traceparent: 00-5bf92f3577b34da6a3ce929d0e0e4736-" + parent + "-00'");
  EXPECT_EQ(Header(hit, "x-tachyon-cache"), "hit") << hit;
  EXPECT_EQ(Header(hit, "traceparent"), "");
  EXPECT_EQ(upstream.traceparents().size(), 1u);
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(ObservabilityE2eTest, ALocalEnginesTraceHasItsQueuePrefillAndDecode) {
  Collector collector;
  Upstream upstream;
  ServerProcess gateway({"--config", Config(upstream.url(), collector.url(), "capture_content = true\n")});
  ASSERT_TRUE(gateway.started());
  const std::string answer = Post(gateway.url() + "/v1/chat/completions",
                                  R"({"model":"local","messages":[{"role":"user","content":"hello"}],)"
                                  R"("max_tokens":4,"ignore_eos":true,"stream":true})",
                                  "-N");
  ASSERT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  const std::string traceparent = Header(answer, "traceparent");
  ASSERT_EQ(traceparent.size(), 55u) << answer;
  std::vector<json> spans = collector.Trace(traceparent.substr(3, 32), 5);
  const json* server = Find(spans, "POST /v1/chat/completions");
  ASSERT_NE(server, nullptr);
  EXPECT_FALSE(server->contains("parentSpanId"));  // a trace of its own
  EXPECT_EQ(Attr(*server, "gen_ai.input.messages")["stringValue"], R"([{"content":"hello","role":"user"}])");
  EXPECT_TRUE(Attr(*server, "gen_ai.output.messages").is_object());
  const json* attempt = nullptr;
  for (const json& s : spans) {
    if (s["name"].get<std::string>().rfind("chat ", 0) == 0) attempt = &s;
  }
  ASSERT_NE(attempt, nullptr);
  EXPECT_EQ((*attempt)["kind"], 1);  // in this process
  for (const char* phase : {"engine.queue", "engine.prefill", "engine.decode"}) {
    const json* s = Find(spans, phase);
    ASSERT_NE(s, nullptr) << phase;
    EXPECT_EQ((*s)["parentSpanId"], (*attempt)["spanId"]) << phase;
    EXPECT_LE(std::stoll((*s)["startTimeUnixNano"].get<std::string>()),
              std::stoll((*s)["endTimeUnixNano"].get<std::string>()));
  }
  EXPECT_EQ(Attr(*Find(spans, "engine.decode"), "gen_ai.usage.output_tokens")["intValue"], "4");
  EXPECT_EQ(gateway.Stop(), 0);
}

// A non-streamed request has a first token too: the histogram counts it, below its end.
TEST_F(ObservabilityE2eTest, WholeAnswersHaveATimeToFirstToken) {
  Collector collector;
  Upstream upstream;
  ServerProcess gateway({"--config", Config(upstream.url(), collector.url(), "sample_ratio = 0\n")});
  ASSERT_TRUE(gateway.started());
  for (int i = 0; i < 3; ++i) {
    const std::string answer = Post(gateway.url() + "/v1/completions",
                                    R"({"model":"local","prompt":"Hello","max_tokens":24,"ignore_eos":true})");
    ASSERT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
    EXPECT_EQ(Header(answer, "traceparent"), "");  // sample_ratio 0: not traced
    EXPECT_NE(Header(answer, "server-timing").find("upstream;dur="), std::string::npos) << answer;
  }
  const std::string metrics = Curl(gateway.url() + "/metrics");
  auto value = [&](const std::string& series) {
    const size_t at = metrics.find(series + " ");
    return at == std::string::npos ? -1.0 : std::stod(metrics.substr(at + series.size() + 1));
  };
  const std::string labels = "{model_name=\"" + std::filesystem::path(model_).stem().string() +
                             "\",route=\"local\",backend=\"engine\"}";
  EXPECT_EQ(value("tachyon:time_to_first_token_seconds_count" + labels), 3) << metrics;
  EXPECT_EQ(value("tachyon:e2e_request_latency_seconds_count" + labels), 3);
  // 24 tokens each: the first comes well before the last.
  EXPECT_LT(value("tachyon:time_to_first_token_seconds_sum" + labels),
            value("tachyon:e2e_request_latency_seconds_sum" + labels));
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(ObservabilityE2eTest, ADeadCollectorCostsRequestsNothingButCountedDrops) {
  Upstream upstream;
  std::string dead;
  {
    Collector gone;
    dead = gone.url();
  }
  ServerProcess gateway({"--config", Config(upstream.url(), dead)});
  ASSERT_TRUE(gateway.started());
  for (int i = 0; i < 5; ++i) {
    const std::string answer = Post(gateway.url() + "/v1/chat/completions",
                                    R"({"model":"remote","messages":[{"role":"user","content":"q)" +
                                        std::to_string(i) + R"("}]})");
    EXPECT_NE(answer.find("HTTP/1.1 200"), std::string::npos) << answer;
  }
  EXPECT_TRUE(testing::Eventually([&] {
    return Curl(gateway.url() + "/metrics").find("tachyon:otel_spans_dropped_total 0") == std::string::npos;
  }, 20));
  EXPECT_EQ(gateway.Stop(), 0);
}

TEST_F(ObservabilityE2eTest, ABrokenTelemetryTableIsRefusedAtStart) {
  const std::string config = WriteConfig(
      "observability_bad.toml",
      "[[backend]]\nname = \"engine\"\nkind = \"local\"\nmodel = \"" + model_ +
          "\"\n[[route]]\nmodel = \"local\"\nbackends = [\"engine\"]\n"
          "[telemetry]\notlp_endpoint = \"http://127.0.0.1:4318\"\notlp_protocol = \"grpc\"\n");
  CommandResult r = RunTachyon("serve --port 0 --config " + config);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("otlp_protocol"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("http/json"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace tachyon::e2e
