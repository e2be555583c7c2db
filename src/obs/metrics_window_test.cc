#include "obs/metrics_window.h"

#include <gtest/gtest.h>

#include <thread>

namespace tachyon {
namespace {

TEST(MetricsWindowTest, RatesAndQuantilesAreDifferencesOfSamples) {
  MetricsRegistry registry;
  CounterFamily& requests = registry.AddCounter("t:requests_total", "r", {"route", "status"});
  HistogramFamily& ttft = registry.AddHistogram("t:ttft_seconds", "t", {"route", "backend"}, {0.1, 0.2, 0.4, 0.8});
  GaugeFamily& kv = registry.AddGauge("t:kv", "k", {"backend"});
  registry.AddCounter("t:ignored_total", "not sampled", {}).With({}).Add(7);
  MetricsWindow window(&registry, {"t:requests_total", "t:ttft_seconds", "t:kv"}, 1.0, 100);

  // Before the window: slow requests that must not count in it.
  for (int i = 0; i < 10; ++i) ttft.With({"chat", "a"}).Observe(0.7);
  requests.With({"chat", "ok"}).Add(10);
  window.SampleAt(1000);
  for (int i = 0; i < 60; ++i) ttft.With({"chat", "a"}).Observe(0.05);
  for (int i = 0; i < 40; ++i) ttft.With({"chat", "b"}).Observe(0.15);
  requests.With({"chat", "ok"}).Add(95);
  requests.With({"chat", "error"}).Add(5);
  requests.With({"embed", "ok"}).Add(3);  // a series that appears mid-window
  kv.With({"a"}).Set(0.25);
  kv.With({"b"}).Set(0.5);
  window.SampleAt(1010);

  MetricsWindow::View v = window.Window(10);
  EXPECT_DOUBLE_EQ(v.seconds(), 10);
  EXPECT_DOUBLE_EQ(v.Increase("t:requests_total", {{"route", "chat"}}), 100);
  EXPECT_DOUBLE_EQ(v.Increase("t:requests_total", {{"route", "chat"}, {"status", "error"}}), 5);
  EXPECT_DOUBLE_EQ(v.Increase("t:requests_total", {{"route", "embed"}}), 3);
  EXPECT_DOUBLE_EQ(v.Increase("t:ignored_total"), 0) << "a family not asked for is not sampled";
  EXPECT_DOUBLE_EQ(v.Count("t:ttft_seconds", {{"route", "chat"}}), 100);
  // 60 in (0, 0.1], 40 in (0.1, 0.2]: p50 is in the first bucket, p95 in the second.
  EXPECT_NEAR(v.Quantile("t:ttft_seconds", 0.5, {{"route", "chat"}}), 0.1 * 50 / 60, 1e-9);
  EXPECT_NEAR(v.Quantile("t:ttft_seconds", 0.95, {{"route", "chat"}}), 0.1 + 0.1 * 35 / 40, 1e-9);
  EXPECT_NEAR(v.Quantile("t:ttft_seconds", 0.95, {{"backend", "a"}}), 0.1 * 57 / 60, 1e-9);
  EXPECT_EQ(v.Quantile("t:ttft_seconds", 0.95, {{"route", "embed"}}), -1) << "no observation: no quantile";
  EXPECT_DOUBLE_EQ(v.Last("t:kv"), 0.75);
  EXPECT_DOUBLE_EQ(v.Last("t:kv", {{"backend", "b"}}), 0.5);
  EXPECT_EQ(v.LabelValues("t:requests_total", "route"), (std::vector<std::string>{"chat", "embed"}));
}

TEST(MetricsWindowTest, TheRingIsBoundedAndStepsMakeATimeline) {
  MetricsRegistry registry;
  Counter& c = registry.AddCounter("t:n_total", "n", {}).With({});
  MetricsWindow window(&registry, {"t:n_total"}, 1.0, 11);
  for (int t = 0; t <= 30; ++t) {
    window.SampleAt(t);
    c.Add(t);  // between sample t and t+1: t more
  }
  // Only the last 11 samples (t = 20..30) are kept: a longer window is what the ring holds.
  MetricsWindow::View all = window.Window(1000);
  EXPECT_DOUBLE_EQ(all.start(), 20);
  EXPECT_DOUBLE_EQ(all.Increase("t:n_total"), 20 + 21 + 22 + 23 + 24 + 25 + 26 + 27 + 28 + 29);
  std::vector<MetricsWindow::View> steps = window.Steps(10, 5);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_DOUBLE_EQ(steps[0].start(), 20);
  EXPECT_DOUBLE_EQ(steps[0].end(), 25);
  EXPECT_DOUBLE_EQ(steps[0].Increase("t:n_total"), 20 + 21 + 22 + 23 + 24);
  EXPECT_DOUBLE_EQ(steps[1].Increase("t:n_total"), 25 + 26 + 27 + 28 + 29);
  MetricsWindow::View last = window.Window(3);
  EXPECT_DOUBLE_EQ(last.seconds(), 3);
}

TEST(MetricsWindowTest, ACounterThatStartsOverReadsAsNoIncrease) {
  MetricsRegistry registry;
  Counter& c = registry.AddCounter("t:n_total", "n", {}).With({});
  MetricsWindow window(&registry, {"t:n_total"}, 1.0, 10);
  c.Set(50);
  window.SampleAt(1);
  c.Set(4);  // an engine replaced by a reload: its counts start again
  window.SampleAt(2);
  EXPECT_DOUBLE_EQ(window.Window(1).Increase("t:n_total"), 0);
}

TEST(MetricsWindowTest, TheThreadSamplesUntilDestroyed) {
  MetricsRegistry registry;
  registry.AddCounter("t:n_total", "n", {}).With({}).Add(1);
  int collected = 0;
  registry.AddCollector([&] { ++collected; });
  {
    MetricsWindow window(&registry, {"t:n_total"}, 0.01, 10);
    window.Start();
    while (window.Window(1).seconds() < 0.02) std::this_thread::yield();
  }
  EXPECT_GE(collected, 3) << "each sample runs the collectors first";
}

}  // namespace
}  // namespace tachyon
