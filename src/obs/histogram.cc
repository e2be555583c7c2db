#include "obs/histogram.h"

#include <algorithm>
#include <cstdio>

namespace tachyon {

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

std::vector<double> Histogram::LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.0075, 0.01, 0.02, 0.03, 0.04, 0.05, 0.075,
          0.1,    0.15,    0.2,    0.3,   0.4,    0.5,   0.75,   1.0,  1.5,  2.0,  2.5,  5.0,  7.5,
          10.0,   20.0,    40.0,   80.0,  160.0,  320.0, 640.0};
}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  std::lock_guard<std::mutex> lock(mutex_);
  ++counts_[bucket];
  sum_ += value;
  ++count_;
}

uint64_t Histogram::count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return count_;
}

double Histogram::sum() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sum_;
}

Histogram::Data Histogram::Read() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return {counts_, sum_, count_};
}

double Histogram::Quantile(double q) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return QuantileOf(bounds_, counts_, q);
}

double Histogram::QuantileOf(const std::vector<double>& bounds, const std::vector<uint64_t>& counts, double q) {
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0 || bounds.empty()) return 0;
  const double rank = q * static_cast<double>(total);
  uint64_t below = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (below + counts[i] >= rank && counts[i] > 0) {
      const double lo = i == 0 ? 0.0 : bounds[i - 1];
      const double hi = i < bounds.size() ? bounds[i] : bounds.back();
      return lo + (hi - lo) * (rank - static_cast<double>(below)) / static_cast<double>(counts[i]);
    }
    below += counts[i];
  }
  return bounds.back();
}

std::string Histogram::RenderPrometheus(const std::string& name, const std::string& labels) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string bucket_prefix = name + "_bucket{" + labels + (labels.empty() ? "" : ",") + "le=\"";
  const std::string braces = labels.empty() ? "" : "{" + labels + "}";
  std::string out;
  uint64_t cumulative = 0;
  char number[64];
  for (size_t i = 0; i < counts_.size(); ++i) {
    cumulative += counts_[i];
    if (i < bounds_.size()) {
      std::snprintf(number, sizeof(number), "%g", bounds_[i]);
    } else {
      std::snprintf(number, sizeof(number), "+Inf");
    }
    out += bucket_prefix + number + "\"} " + std::to_string(cumulative) + "\n";
  }
  std::snprintf(number, sizeof(number), "%.9g", sum_);
  out += name + "_sum" + braces + " " + number + "\n";
  out += name + "_count" + braces + " " + std::to_string(count_) + "\n";
  return out;
}

}  // namespace tachyon
