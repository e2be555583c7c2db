// Hedged requests: when a route's first attempt has not produced its first
// byte after a delay, the call (gateway/gateway_call.cc) starts the plan's
// next backend beside it, and the first to answer wins. This file holds what
// decides when and how often:
//
//   HedgeOptions   `hedge = { after_ms = 250, max = 1, max_rate = 0.2 }`, or
//                  `{ after = "p90", min_ms = 50, max_ms = 2000 }`
//   LatencyWindow  a backend's recent first-byte times, for after = "pNN"
//   HedgeBudget    the cap on a route's hedges: each request earns max_rate
//                  of a hedge, each hedge spends one (a retry budget), so an
//                  outage that makes every request slow adds at most max_rate
//                  of the load, after a burst of `kBurst` hedges.
#pragma once

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

namespace tachyon {

struct HedgeOptions {
  double after_seconds = 0.25;  // a fixed delay (when quantile is 0)
  // after = "pNN": the delay is the first backend's own NN-th percentile of its
  // recent first-byte times (LatencyWindow), bounded by min/max_seconds; with
  // fewer than LatencyWindow::kMinSamples samples, max_seconds.
  double quantile = 0;
  double min_seconds = 0.05, max_seconds = 2.0;
  int max = 1;            // extra attempts per request
  double max_rate = 0.2;  // hedges per request, over time
  bool operator==(const HedgeOptions&) const = default;
};

// Recent samples of one backend's time to its first byte (seconds), the last
// kWindowSeconds and at most kCapacity of them. Not thread-safe (the backend's
// slot mutex guards it).
class LatencyWindow {
 public:
  static constexpr double kWindowSeconds = 300;
  static constexpr size_t kCapacity = 1024;
  static constexpr size_t kMinSamples = 20;

  void Add(std::chrono::steady_clock::time_point now, double seconds) {
    samples_.emplace_back(now, seconds);
    if (samples_.size() > kCapacity) samples_.pop_front();
  }
  // The q-quantile (0 < q < 1, nearest rank) of the samples younger than the
  // window, or nullopt when there are fewer than kMinSamples.
  std::optional<double> Quantile(double q, std::chrono::steady_clock::time_point now) {
    const auto oldest = now - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                                  std::chrono::duration<double>(kWindowSeconds));
    while (!samples_.empty() && samples_.front().first < oldest) samples_.pop_front();
    if (samples_.size() < kMinSamples) return std::nullopt;
    std::vector<double> v;
    v.reserve(samples_.size());
    for (const auto& s : samples_) v.push_back(s.second);
    size_t rank = static_cast<size_t>(q * static_cast<double>(v.size()));  // nearest rank, 0-based
    rank = std::min(rank, v.size() - 1);
    std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(rank), v.end());
    return v[rank];
  }
  size_t size() const { return samples_.size(); }

 private:
  std::deque<std::pair<std::chrono::steady_clock::time_point, double>> samples_;
};

// The delay before a call's first hedge: the fixed one, or the quantile of the
// first backend's window bounded by the options' min and max.
inline double HedgeDelay(const HedgeOptions& o, LatencyWindow& first_backend,
                         std::chrono::steady_clock::time_point now) {
  if (o.quantile <= 0) return o.after_seconds;
  const std::optional<double> q = first_backend.Quantile(o.quantile, now);
  return std::clamp(q.value_or(o.max_seconds), o.min_seconds, o.max_seconds);
}

// A route's allowance of hedges. Thread-safe.
class HedgeBudget {
 public:
  static constexpr double kBurst = 10;  // hedges the budget holds at most (and starts with)

  explicit HedgeBudget(double per_request) : per_request_(per_request) {}
  // A request that may be hedged arrived.
  void Earn() {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_ = std::min(kBurst, tokens_ + per_request_);
  }
  // One hedge, if the budget has it.
  bool Take() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (tokens_ < 1) return false;
    tokens_ -= 1;
    return true;
  }
  // A hedge taken and not started (no backend was available).
  void Refund() {
    std::lock_guard<std::mutex> lock(mutex_);
    tokens_ = std::min(kBurst, tokens_ + 1);
  }

 private:
  std::mutex mutex_;
  double per_request_;
  double tokens_ = kBurst;
};

}  // namespace tachyon
