// MetricsRegistry: every metric of the process, by family (one name, one help
// text, one type, a fixed list of label names), rendered by one Prometheus text
// writer (format 0.0.4: "# HELP", "# TYPE", then the series).
//
// Families are created once and live as long as the registry; a series (one
// set of label values) is created on first use and never removed, so a pointer
// to it stays valid and recording is one atomic add (or one histogram lock),
// with no map lookup on the hot path. Asking again for a family that exists
// returns it (a reloaded gateway keeps counting in the same series).
//
// Values read from elsewhere at scrape time (engine gauges) come from collectors:
// functions run before each render that Set() their gauges.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "base/check.h"
#include "obs/histogram.h"

namespace tachyon {

class Counter {
 public:
  void Add(double v = 1) { value_.fetch_add(v, std::memory_order_relaxed); }
  // For a count kept elsewhere (the engine's), copied by a collector at scrape time.
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double v) { value_.fetch_add(v, std::memory_order_relaxed); }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

enum class MetricType { kCounter, kGauge, kHistogram };

// One family: series keyed by their label values (in the order of label_names).
template <typename Series>
class MetricFamily {
 public:
  MetricFamily(std::vector<std::string> label_names, std::function<std::unique_ptr<Series>()> make)
      : label_names_(std::move(label_names)), make_(std::move(make)) {}

  // The series with these label values (as many as label_names; CHECKed).
  Series& With(const std::vector<std::string>& values);

  const std::vector<std::string>& label_names() const { return label_names_; }
  // Calls fn(values, series) for every series, in label order.
  void ForEach(const std::function<void(const std::vector<std::string>&, const Series&)>& fn) const {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& [values, series] : series_) fn(values, *series);
  }

 private:
  std::vector<std::string> label_names_;
  std::function<std::unique_ptr<Series>()> make_;
  mutable std::mutex mutex_;
  std::map<std::vector<std::string>, std::unique_ptr<Series>> series_;  // guarded by mutex_
};

using CounterFamily = MetricFamily<Counter>;
using GaugeFamily = MetricFamily<Gauge>;
using HistogramFamily = MetricFamily<Histogram>;

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // A name asked for again must come with the same type and label names (CHECKed).
  CounterFamily& AddCounter(const std::string& name, const std::string& help, std::vector<std::string> label_names);
  GaugeFamily& AddGauge(const std::string& name, const std::string& help, std::vector<std::string> label_names);
  HistogramFamily& AddHistogram(const std::string& name, const std::string& help,
                                std::vector<std::string> label_names,
                                std::vector<double> bounds = Histogram::LatencyBuckets());

  // fn runs before every render (on the scraping thread); the id removes it.
  int AddCollector(std::function<void()> fn);
  void RemoveCollector(int id);

  // The Prometheus text exposition of every family, in the order they were added.
  std::string Render() const;

  // Runs the collectors (Render does, first).
  void RunCollectors() const;
  // Calls fn for every series of the families named (all when names is empty), in
  // the order the families were added: a counter's or gauge's value, or a histogram.
  struct SeriesRef {
    const std::string& name;
    MetricType type;
    const std::vector<std::string>& label_names;
    const std::vector<std::string>& values;
    double value;               // counters and gauges
    const Histogram* histogram;  // histograms
  };
  void ForEachSeries(const std::vector<std::string>& names, const std::function<void(const SeriesRef&)>& fn) const;

  // Escapes a label value for the text format (backslash, double quote, newline).
  static std::string EscapeLabelValue(const std::string& value);

 private:
  struct Entry {
    std::string name, help;
    MetricType type;
    std::unique_ptr<CounterFamily> counters;
    std::unique_ptr<GaugeFamily> gauges;
    std::unique_ptr<HistogramFamily> histograms;
  };
  Entry* Find(const std::string& name, MetricType type, const std::vector<std::string>& label_names);

  mutable std::mutex mutex_;
  std::vector<std::unique_ptr<Entry>> entries_;  // guarded by mutex_
  std::map<int, std::function<void()>> collectors_;  // guarded by collectors_mutex_
  mutable std::mutex collectors_mutex_;
  int next_collector_ = 1;
};

template <typename Series>
Series& MetricFamily<Series>::With(const std::vector<std::string>& values) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = series_.find(values);
  if (it == series_.end()) {
    CHECK_EQ(values.size(), label_names_.size()) << "a series needs one value per label of its family";
    it = series_.emplace(values, make_()).first;
  }
  return *it->second;
}

}  // namespace tachyon
