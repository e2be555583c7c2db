#include "obs/metrics.h"

#include <gtest/gtest.h>

#include <thread>

namespace tachyon {
namespace {

TEST(MetricsRegistryTest, FamiliesHaveHelpTypeAndLabelledSeries) {
  MetricsRegistry registry;
  CounterFamily& requests = registry.AddCounter("t:requests_total", "Requests answered", {"route", "status"});
  requests.With({"chat", "200"}).Add();
  requests.With({"chat", "200"}).Add(2);
  requests.With({"chat", "502"}).Add();
  GaugeFamily& state = registry.AddGauge("t:breaker_state", "0 closed, 1 open, 2 half-open", {"backend"});
  state.With({"a\"b\\c\nd"}).Set(1);
  HistogramFamily& ttft = registry.AddHistogram("t:ttft_seconds", "Time to first token", {"route"}, {0.1, 1});
  ttft.With({"chat"}).Observe(0.05);
  const std::string text = registry.Render();
  EXPECT_NE(text.find("# HELP t:requests_total Requests answered\n# TYPE t:requests_total counter\n"),
            std::string::npos) << text;
  EXPECT_NE(text.find("t:requests_total{route=\"chat\",status=\"200\"} 3\n"), std::string::npos) << text;
  EXPECT_NE(text.find("t:requests_total{route=\"chat\",status=\"502\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE t:breaker_state gauge\n"), std::string::npos);
  EXPECT_NE(text.find("t:breaker_state{backend=\"a\\\"b\\\\c\\nd\"} 1\n"), std::string::npos) << "escaped value";
  EXPECT_NE(text.find("# TYPE t:ttft_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("t:ttft_seconds_bucket{route=\"chat\",le=\"0.1\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("t:ttft_seconds_count{route=\"chat\"} 1\n"), std::string::npos);
  EXPECT_LT(text.find("t:requests_total"), text.find("t:breaker_state")) << "families in the order added";
}

TEST(MetricsRegistryTest, AskingAgainReturnsTheSameFamily) {
  MetricsRegistry registry;
  CounterFamily& a = registry.AddCounter("t:x_total", "x", {"k"});
  a.With({"v"}).Add(5);
  CounterFamily& b = registry.AddCounter("t:x_total", "x", {"k"});
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(b.With({"v"}).value(), 5);
  EXPECT_EQ(&a.With({"v"}), &b.With({"v"})) << "a series pointer stays valid";
}

TEST(MetricsRegistryTest, CollectorsRunBeforeEachRenderUntilRemoved) {
  MetricsRegistry registry;
  Gauge& g = registry.AddGauge("t:g", "g", {}).With({});
  int runs = 0;
  const int id = registry.AddCollector([&] { g.Set(++runs); });
  EXPECT_NE(registry.Render().find("t:g 1\n"), std::string::npos);
  EXPECT_NE(registry.Render().find("t:g 2\n"), std::string::npos);
  registry.RemoveCollector(id);
  EXPECT_NE(registry.Render().find("t:g 2\n"), std::string::npos);
}

TEST(MetricsRegistryTest, ConcurrentAddsAreNotLost) {
  MetricsRegistry registry;
  CounterFamily& c = registry.AddCounter("t:c_total", "c", {"k"});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) c.With({"k"}).Add();
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(c.With({"k"}).value(), 40000);
}

}  // namespace
}  // namespace tachyon
