// Histogram: counts of observations in fixed buckets (Prometheus style:
// cumulative "le" buckets, sum and count), safe to observe from any thread.
// Percentiles are read off the buckets by linear interpolation inside one.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

namespace tachyon {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);

  // The buckets' own counts (not cumulative; the last is +Inf), sum and count, read at once.
  struct Data {
    std::vector<uint64_t> counts;
    double sum = 0;
    uint64_t count = 0;
  };

  void Observe(double value);
  Data Read() const;
  const std::vector<double>& bounds() const { return bounds_; }
  uint64_t count() const;
  double sum() const;
  // The q-quantile (0..1) estimated from the buckets; 0 when empty.
  double Quantile(double q) const;
  // The series lines: "<name>_bucket{<labels>,le="..."} n", then _sum and _count
  // (the family's HELP and TYPE lines are MetricsRegistry's).
  std::string RenderPrometheus(const std::string& name, const std::string& labels) const;

  // The q-quantile of bucket counts over these bounds (counts.size() == bounds.size() + 1).
  static double QuantileOf(const std::vector<double>& bounds, const std::vector<uint64_t>& counts, double q);

  // Bucket edges for latencies in seconds, from 0.1 ms (a cache hit, the gateway's own time) to 640 s.
  static std::vector<double> LatencyBuckets();

 private:
  std::vector<double> bounds_;
  mutable std::mutex mutex_;
  std::vector<uint64_t> counts_;  // per bucket, the last is +Inf
  double sum_ = 0;
  uint64_t count_ = 0;
};

}  // namespace tachyon
