#include "server/stats_report.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

TEST(StatsReportTest, QueryParameters) {
  StatsQuery q;
  std::string error;
  ASSERT_TRUE(ParseStatsQuery("window=60&step=5", &q, &error)) << error;
  EXPECT_EQ(q.window_seconds, 60);
  EXPECT_EQ(q.step_seconds, 5);
  EXPECT_TRUE(ParseStatsQuery("", &q, &error));
  EXPECT_FALSE(ParseStatsQuery("window=-1", &q, &error));
  EXPECT_FALSE(ParseStatsQuery("window=abc", &q, &error));
  EXPECT_FALSE(ParseStatsQuery("window=", &q, &error));
  EXPECT_FALSE(ParseStatsQuery("windows=60", &q, &error));
  EXPECT_NE(error.find("unknown parameter 'windows'"), std::string::npos) << error;
}

TEST(StatsReportTest, RoutesBackendsAndEnginesFromTheWindow) {
  MetricsRegistry m;
  const std::vector<std::string> labels = {"model_name", "route", "backend"};
  HistogramFamily& ttft = m.AddHistogram("tachyon:time_to_first_token_seconds", "", labels);
  HistogramFamily& e2e = m.AddHistogram("tachyon:e2e_request_latency_seconds", "", labels);
  Counter& requests = m.AddCounter("tachyon:route_requests_total", "", {"route"}).With({"chat"});
  Counter& ok = m.AddCounter("tachyon:request_success_total", "", labels).With({"m", "chat", "engine"});
  CounterFamily& errors = m.AddCounter("tachyon:request_error_total", "", {"route", "backend", "kind"});
  CounterFamily& lookups = m.AddCounter("tachyon:cache_lookups_total", "", {"kind", "result", "route"});
  CounterFamily& decisions = m.AddCounter("tachyon:router_decisions_total", "", {"route", "class", "by"});
  Gauge& kv = m.AddGauge("tachyon:kv_cache_usage_perc", "", {"model_name", "backend"}).With({"m", "engine"});
  Counter& steps = m.AddCounter("tachyon:engine_decode_steps_total", "", {"model_name", "backend"}).With({"m", "engine"});
  Counter& seqs =
      m.AddCounter("tachyon:engine_decode_sequences_total", "", {"model_name", "backend"}).With({"m", "engine"});
  Gauge& ewma = m.AddGauge("tachyon:backend_ttft_ewma_seconds", "", {"backend"}).With({"engine"});
  MetricsWindow window(&m, StatsFamilies(), 1, 301);
  window.SampleAt(100);
  for (int i = 0; i < 20; ++i) {
    ttft.With({"m", "chat", "engine"}).Observe(0.004);
    e2e.With({"m", "chat", "engine"}).Observe(0.09);
  }
  requests.Add(20);
  ok.Add(18);
  errors.With({"chat", "engine", "timeout"}).Add(2);
  lookups.With({"exact", "hit", "chat"}).Add(5);
  lookups.With({"exact", "miss", "chat"}).Add(15);
  decisions.With({"chat", "small", "rule"}).Add(12);
  decisions.With({"chat", "large", "classifier"}).Add(8);
  kv.Set(0.25);
  steps.Add(10);
  seqs.Add(30);
  ewma.Set(0.004);
  window.SampleAt(110);

  const nlohmann::json health = {
      {"status", "ok"},
      {"routes", {{"chat", "ok"}}},
      {"backends", {{"engine", {{"kind", "local"}, {"state", "closed"}, {"in_flight", 1}}}}}};
  const nlohmann::json r = StatsReport(window, health, {.window_seconds = 60, .step_seconds = 5}, 12);
  EXPECT_EQ(r["window_seconds"], 10) << "as long as the ring holds";
  EXPECT_EQ(r["step_seconds"], 5);
  ASSERT_EQ(r["routes"].size(), 1u);
  const nlohmann::json& chat = r["routes"][0];
  EXPECT_EQ(chat["route"], "chat");
  EXPECT_EQ(chat["requests"], 20);
  EXPECT_DOUBLE_EQ(chat["requests_per_second"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(chat["status_per_second"]["ok"].get<double>(), 1.8);
  EXPECT_DOUBLE_EQ(chat["status_per_second"]["error"].get<double>(), 0.2);
  EXPECT_EQ(chat["errors"]["timeout"], 2);
  // All 20 in the (2.5 ms, 5 ms] bucket: p50 at its middle.
  EXPECT_NEAR(chat["ttft_ms"]["p50"].get<double>(), 3.75, 1e-9);
  EXPECT_TRUE(chat["itl_ms"]["p95"].is_null()) << "no observation: null, not 0";
  EXPECT_DOUBLE_EQ(chat["cache"]["exact"]["hit_rate"].get<double>(), 0.25);
  EXPECT_FALSE(chat["cache"].contains("semantic"));
  EXPECT_EQ(chat["router"]["small"], 12);
  EXPECT_EQ(chat["router"]["large"], 8);
  EXPECT_EQ(chat["timeline"]["t"].size(), 1u) << "two samples, 10 s apart: one step of 5 s fits between them";
  ASSERT_EQ(r["backends"].size(), 1u);
  EXPECT_EQ(r["backends"][0]["state"], "closed");
  EXPECT_DOUBLE_EQ(r["backends"][0]["ttft_ewma_ms"].get<double>(), 4.0);
  ASSERT_EQ(r["engines"].size(), 1u);
  EXPECT_EQ(r["engines"][0]["model"], "m");
  EXPECT_DOUBLE_EQ(r["engines"][0]["kv_usage"].get<double>(), 0.25);
  EXPECT_DOUBLE_EQ(r["engines"][0]["batch_size"].get<double>(), 3.0);
}

}  // namespace
}  // namespace tachyon
