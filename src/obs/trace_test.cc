#include "obs/trace.h"

#include <atomic>
#include <condition_variable>
#include <mutex>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "http/http_server.h"
#include "obs/otlp_exporter.h"

namespace tachyon {
namespace {

constexpr char kParent[] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

TEST(TraceparentTest, ReadsVersion00) {
  std::optional<TraceParent> p = ParseTraceparent(kParent);
  ASSERT_TRUE(p.has_value());
  EXPECT_EQ(p->trace_id.Hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(p->span_id.Hex(), "00f067aa0ba902b7");
  EXPECT_TRUE(p->sampled);
  EXPECT_FALSE(ParseTraceparent("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00")->sampled);
  EXPECT_EQ(FormatTraceparent(p->trace_id, p->span_id, true), kParent);
}

TEST(TraceparentTest, RefusesWhatTheSpecRefuses) {
  for (const char* bad : {
           "",
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  // zero span id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",  // 00 has exactly four fields
           "00-4bf92f3577b34da6a3ce929d0e0e473-600f067aa0ba902b7-01",  // a misplaced dash
           "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
           "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
       }) {
    EXPECT_FALSE(ParseTraceparent(bad).has_value()) << bad;
  }
}

TEST(TraceparentTest, ReadsALaterVersionByItsFirstFourFields) {
  std::optional<TraceParent> p = ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-abc");
  ASSERT_TRUE(p.has_value());
  EXPECT_TRUE(p->sampled);
  EXPECT_FALSE(ParseTraceparent("01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01abc").has_value());
}

TEST(TracerTest, FollowsTheCallersDecision) {
  Tracer never(TracerOptions{.sample_ratio = 0});
  std::shared_ptr<RequestTrace> t = never.Start(kParent, "vendor=1");
  ASSERT_NE(t, nullptr);  // a sampled parent is kept whatever the ratio
  EXPECT_EQ(t->trace_id().Hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(t->remote_parent().Hex(), "00f067aa0ba902b7");
  EXPECT_EQ(t->tracestate(), "vendor=1");
  EXPECT_NE(t->root(), t->remote_parent());
  Tracer always(TracerOptions{.sample_ratio = 1});
  EXPECT_EQ(always.Start("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", ""), nullptr);
  EXPECT_EQ(never.Start("", ""), nullptr);
  std::shared_ptr<RequestTrace> fresh = always.Start("not a traceparent", "vendor=1");
  ASSERT_NE(fresh, nullptr);  // a broken header is no header: a new trace, its state dropped
  EXPECT_FALSE(fresh->remote_parent().valid());
  EXPECT_EQ(fresh->tracestate(), "");
}

TEST(TracerTest, SamplesTheRatioOfNewTraces) {
  Tracer half(TracerOptions{.sample_ratio = 0.5});
  int kept = 0;
  for (int i = 0; i < 4000; ++i) kept += half.Start("", "") != nullptr;
  EXPECT_GT(kept, 1600);  // 2000 expected; the standard deviation is about 32
  EXPECT_LT(kept, 2400);
}

TEST(RequestTraceTest, FinishesWhenTheLastHolderLetsGo) {
  RequestTrace trace(NewTraceId(), SpanId{}, "", false);
  int finished = 0;
  size_t spans = 0;
  trace.OnFinish([&](RequestTrace& t) {
    ++finished;
    spans = t.Take().size();
  });
  trace.Hold();  // a cache write after the answer
  trace.Add(Span{.name = "server", .id = trace.root()});
  trace.Release();
  EXPECT_EQ(finished, 0);
  trace.Add(Span{.name = "cache write", .id = NewSpanId(), .parent = trace.root()});
  trace.Release();
  EXPECT_EQ(finished, 1);
  EXPECT_EQ(spans, 2u);
}

TEST(OtlpJsonTest, EncodesAsTheSpecificationSays) {
  const TraceId trace = ParseTraceparent(kParent)->trace_id;
  const auto t0 = std::chrono::steady_clock::now();
  Span root{.name = "POST /v1/chat/completions", .id = NewSpanId(), .kind = SpanKind::kServer, .start = t0,
            .end = t0 + std::chrono::milliseconds(20)};
  root.attributes = {{"gen_ai.request.model", std::string("chat")},
                     {"gen_ai.usage.input_tokens", int64_t{42}},
                     {"tachyon.ttft_ms", 3.5},
                     {"tachyon.stream", true}};
  root.events.push_back({.name = "first_token", .time = t0 + std::chrono::milliseconds(3)});
  Span child{.name = "gateway.exact-cache", .id = NewSpanId(), .parent = root.id, .start = t0,
             .end = t0 + std::chrono::microseconds(50), .error = true, .status_message = "boom"};
  const nlohmann::json body = nlohmann::json::parse(
      EncodeOtlpJson({{trace, "k=v", root}, {trace, "k=v", child}}, "svc", "1.2.3"));
  const nlohmann::json& rs = body["resourceSpans"][0];
  EXPECT_EQ(rs["resource"]["attributes"][0]["key"], "service.name");
  EXPECT_EQ(rs["resource"]["attributes"][0]["value"]["stringValue"], "svc");
  EXPECT_EQ(rs["scopeSpans"][0]["scope"]["version"], "1.2.3");
  const nlohmann::json& spans = rs["scopeSpans"][0]["spans"];
  ASSERT_EQ(spans.size(), 2u);
  const nlohmann::json& s = spans[0];
  EXPECT_EQ(s["traceId"], "4bf92f3577b34da6a3ce929d0e0e4736");
  EXPECT_EQ(s["spanId"], root.id.Hex());
  EXPECT_FALSE(s.contains("parentSpanId"));
  EXPECT_EQ(s["kind"], 2);
  EXPECT_EQ(s["traceState"], "k=v");
  ASSERT_TRUE(s["startTimeUnixNano"].is_string());
  const int64_t start = std::stoll(s["startTimeUnixNano"].get<std::string>());
  const int64_t end = std::stoll(s["endTimeUnixNano"].get<std::string>());
  EXPECT_NEAR(static_cast<double>(end - start), 20e6, 1e3);
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::system_clock::now().time_since_epoch()).count();
  EXPECT_LT(std::abs(now - start), int64_t{60} * 1000000000);  // Unix time, not the steady clock's
  EXPECT_EQ(s["attributes"][1]["value"]["intValue"], "42");  // int64 as a string
  EXPECT_EQ(s["attributes"][2]["value"]["doubleValue"], 3.5);
  EXPECT_EQ(s["attributes"][3]["value"]["boolValue"], true);
  EXPECT_EQ(s["events"][0]["name"], "first_token");
  EXPECT_FALSE(s.contains("status"));
  EXPECT_EQ(spans[1]["parentSpanId"], root.id.Hex());
  EXPECT_EQ(spans[1]["status"]["code"], 2);
  EXPECT_EQ(spans[1]["status"]["message"], "boom");
}

TEST(OtlpHeadersTest, ReadsTheEnvironmentVariablesFormat) {
  auto h = ParseOtlpHeaders(" api-key = secret%3D1 ,x-team=a,,");
  ASSERT_TRUE(h.ok()) << h.status().message();
  ASSERT_EQ(h->size(), 2u);
  EXPECT_EQ((*h)[0], (std::pair<std::string, std::string>{"api-key", "secret=1"}));
  EXPECT_EQ((*h)[1], (std::pair<std::string, std::string>{"x-team", "a"}));
  EXPECT_FALSE(ParseOtlpHeaders("novalue").ok());
  EXPECT_FALSE(ParseOtlpHeaders("=x").ok());
  EXPECT_FALSE(ParseOtlpHeaders("a=%zz").ok());
  EXPECT_FALSE(ParseOtlpHeaders("a=b%0Ac").ok());  // no line breaks into a header
}

// A collector in the test: it decodes every export and keeps its spans; the
// first `refuse` exports are answered with `refuse_status`.
class Collector {
 public:
  explicit Collector(int refuse = 0, int refuse_status = 503) : refuse_(refuse), refuse_status_(refuse_status) {
    server_ = std::move(HttpServer::Start({}, [this](HttpRequest r, std::shared_ptr<ResponseWriter> w) {
                          Handle(std::move(r), std::move(w));
                        }).value());
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(server_->port()); }
  // The spans received, once there are at least n (empty after 10 s without).
  std::vector<nlohmann::json> WaitForSpans(size_t n) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return spans_.size() >= n; });
    return spans_;
  }
  int requests() const { return requests_.load(); }
  std::unordered_map<std::string, std::string> last_headers() {
    std::lock_guard<std::mutex> lock(mutex_);
    return headers_;
  }

 private:
  void Handle(HttpRequest r, std::shared_ptr<ResponseWriter> w) {
    ++requests_;
    if (r.method != "POST" || r.target != "/v1/traces" || r.headers["content-type"] != "application/json") {
      w->Respond(404, "text/plain", "no");
      return;
    }
    if (refuse_-- > 0) {
      w->Respond(refuse_status_, "application/json", "{}");
      return;
    }
    nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    if (body.is_discarded()) {
      w->Respond(400, "application/json", "{}");
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      headers_ = r.headers;
      for (const auto& rs : body["resourceSpans"]) {
        for (const auto& ss : rs["scopeSpans"]) {
          for (const auto& s : ss["spans"]) spans_.push_back(s);
        }
      }
    }
    cv_.notify_all();
    w->Respond(200, "application/json", "{}");
  }

  std::atomic<int> refuse_;
  const int refuse_status_;
  std::atomic<int> requests_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  std::vector<nlohmann::json> spans_;
  std::unordered_map<std::string, std::string> headers_;
  std::unique_ptr<HttpServer> server_;
};

std::vector<ExportedSpan> Spans(size_t n) {
  std::vector<ExportedSpan> out;
  const TraceId trace = NewTraceId();
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < n; ++i) {
    out.push_back({trace, "", Span{.name = "s" + std::to_string(i), .id = NewSpanId(), .start = now, .end = now}});
  }
  return out;
}

TEST(OtlpExporterTest, SendsBatchesWithTheHeaders) {
  Collector collector;
  MetricsRegistry metrics;
  {
    auto exporter = OtlpExporter::Start({.endpoint = collector.url(), .headers = {{"api-key", "k1"}},
                                         .max_batch_spans = 4, .flush_interval_seconds = 0.05},
                                        &metrics);
    ASSERT_TRUE(exporter.ok()) << exporter.status().message();
    (*exporter)->Add(Spans(10));
    EXPECT_EQ(collector.WaitForSpans(10).size(), 10u);
  }
  EXPECT_GE(collector.requests(), 3);  // batches of at most 4
  EXPECT_EQ(collector.last_headers()["api-key"], "k1");
  EXPECT_NE(metrics.Render().find("tachyon:otel_spans_exported_total 10"), std::string::npos);
}

TEST(OtlpExporterTest, RetriesWhatTheCollectorRefusesForNow) {
  Collector collector(/*refuse=*/2, 503);
  MetricsRegistry metrics;
  auto exporter = OtlpExporter::Start(
      {.endpoint = collector.url(), .flush_interval_seconds = 0.05, .initial_backoff_seconds = 0.01}, &metrics);
  ASSERT_TRUE(exporter.ok());
  (*exporter)->Add(Spans(3));
  EXPECT_EQ(collector.WaitForSpans(3).size(), 3u);
  EXPECT_EQ(collector.requests(), 3);
  exporter->reset();
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("tachyon:otel_export_failures_total 2"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:otel_spans_dropped_total 0"), std::string::npos);
}

TEST(OtlpExporterTest, DropsWhatTheCollectorRefusesForGood) {
  Collector collector(/*refuse=*/1, 400);
  MetricsRegistry metrics;
  auto exporter = OtlpExporter::Start({.endpoint = collector.url(), .flush_interval_seconds = 0.05}, &metrics);
  ASSERT_TRUE(exporter.ok());
  (*exporter)->Add(Spans(2));
  exporter->reset();  // flushes: one request, refused, not retried
  EXPECT_EQ(collector.requests(), 1);
  EXPECT_NE(metrics.Render().find("tachyon:otel_spans_dropped_total 2"), std::string::npos);
}

TEST(OtlpExporterTest, ADeadCollectorDropsSpansAndNeverBlocksAdd) {
  int port;
  {
    Collector gone;
    port = std::stoi(gone.url().substr(gone.url().rfind(':') + 1));
  }  // nothing listens there now
  MetricsRegistry metrics;
  auto exporter = OtlpExporter::Start({.endpoint = "http://127.0.0.1:" + std::to_string(port),
                                       .max_queue_spans = 8, .max_batch_spans = 8, .flush_interval_seconds = 0.01,
                                       .max_retries = 1, .initial_backoff_seconds = 0.01},
                                      &metrics);
  ASSERT_TRUE(exporter.ok());
  for (int i = 0; i < 100; ++i) (*exporter)->Add(Spans(1));  // past the queue's bound: counted, not kept
  exporter->reset();
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("tachyon:otel_spans_exported_total 0"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:otel_spans_dropped_total 100"), std::string::npos) << text;
}

TEST(OtlpExporterTest, RefusesAnEndpointThatIsNotAUrl) {
  MetricsRegistry metrics;
  EXPECT_FALSE(OtlpExporter::Start({.endpoint = "otel-collector:4318"}, &metrics).ok());
  EXPECT_FALSE(OtlpExporter::Start({.endpoint = ""}, &metrics).ok());
}

}  // namespace
}  // namespace tachyon
