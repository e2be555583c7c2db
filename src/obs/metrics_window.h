// MetricsWindow: the registry's series of some families, sampled at a fixed
// interval into a ring of bounded length, so that a rate or a quantile over the
// last minutes is the difference of two samples (the histograms' bucket counts
// subtract) and no request leaves anything behind. What /v1/stats and the
// dashboard show; Prometheus computes the same from /metrics with rate() and
// histogram_quantile().
//
// A sample is one vector of doubles: counters and gauges take one slot, a
// histogram its bucket counts, then sum and count. Series only ever appear
// (the registry never removes one), so a slot's position never changes and an
// older, shorter sample reads 0 past its end.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "obs/metrics.h"

namespace tachyon {

class MetricsWindow {
  struct Series {
    std::string name;
    MetricType type;
    std::vector<std::string> label_names, values;
    size_t offset = 0;           // first slot in a sample
    std::vector<double> bounds;  // histograms
  };

 public:
  // label name -> value; a series matches when it has every pair.
  using Filter = std::vector<std::pair<std::string, std::string>>;

  // Samples the families named every interval_seconds, keeping max_samples.
  MetricsWindow(const MetricsRegistry* registry, std::vector<std::string> families, double interval_seconds,
                size_t max_samples);
  ~MetricsWindow();  // stops the sampling thread
  MetricsWindow(const MetricsWindow&) = delete;
  MetricsWindow& operator=(const MetricsWindow&) = delete;

  // A thread of its own that samples every interval (runs the collectors first).
  void Start();
  // One sample at t (unix seconds), on the caller's thread: what the thread does, and tests.
  void SampleAt(double t);

  double interval_seconds() const { return interval_; }
  size_t max_samples() const { return max_samples_; }

  // Figures between two samples: the last one, and the oldest at least `seconds` before it.
  class View {
   public:
    double start() const { return start_; }
    double end() const { return end_; }
    double seconds() const { return end_ - start_; }
    bool empty() const { return end_ <= start_; }
    // Counters: the increase (negative steps, from a replaced engine's counts, read as 0).
    double Increase(const std::string& name, const Filter& filter = {}) const;
    // Gauges: the sum of the matching series at the end.
    double Last(const std::string& name, const Filter& filter = {}) const;
    // Histograms: the q-quantile of the observations in the window; -1 when there were none.
    double Quantile(const std::string& name, double q, const Filter& filter = {}) const;
    // Histograms: how many observations the window holds.
    double Count(const std::string& name, const Filter& filter = {}) const;
    // The values a label takes among the family's matching series (sorted, unique).
    std::vector<std::string> LabelValues(const std::string& name, const std::string& label,
                                         const Filter& filter = {}) const;

   private:
    friend class MetricsWindow;
    std::shared_ptr<const std::vector<Series>> series_;
    std::vector<double> a_, b_;  // the samples at start and end
    double start_ = 0, end_ = 0;
    // Calls fn(series index) for the matching series of a family.
    template <typename Fn>
    void Match(const std::string& name, const Filter& filter, Fn fn) const;
    double At(const std::vector<double>& v, size_t i) const { return i < v.size() ? v[i] : 0; }
  };

  // The window ending at the last sample, `seconds` long (or as long as the ring holds).
  View Window(double seconds) const;
  // Consecutive windows of `step` seconds covering the last `seconds`, oldest first
  // (a timeline for charts): each the difference of two samples.
  std::vector<View> Steps(double seconds, double step) const;

 private:
  struct Sample {
    double t = 0;
    std::vector<double> values;
  };
  View Between(const Sample& a, const Sample& b) const;
  void Loop();

  const MetricsRegistry* registry_;
  const std::vector<std::string> families_;
  const double interval_;
  const size_t max_samples_;

  mutable std::mutex mutex_;
  // Copied when a series appears (rarely), so that a View reads it without the lock.
  std::shared_ptr<const std::vector<Series>> series_;                     // guarded by mutex_
  std::map<std::pair<std::string, std::vector<std::string>>, size_t> index_;  // guarded by mutex_
  size_t width_ = 0;                                                       // guarded by mutex_
  std::deque<Sample> ring_;                                                // guarded by mutex_

  std::mutex stop_mutex_;
  std::condition_variable stop_cv_;
  bool stop_ = false;  // guarded by stop_mutex_
  std::thread thread_;
};

}  // namespace tachyon
