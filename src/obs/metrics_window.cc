#include "obs/metrics_window.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <set>

namespace tachyon {

MetricsWindow::MetricsWindow(const MetricsRegistry* registry, std::vector<std::string> families,
                             double interval_seconds, size_t max_samples)
    : registry_(registry),
      families_(std::move(families)),
      interval_(interval_seconds),
      max_samples_(std::max<size_t>(max_samples, 2)),
      series_(std::make_shared<const std::vector<Series>>()) {}

MetricsWindow::~MetricsWindow() {
  {
    std::lock_guard<std::mutex> lock(stop_mutex_);
    stop_ = true;
  }
  stop_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void MetricsWindow::Start() {
  if (thread_.joinable()) return;
  thread_ = std::thread([this] { Loop(); });
}

void MetricsWindow::Loop() {
  const auto interval = std::chrono::duration_cast<std::chrono::steady_clock::duration>(
      std::chrono::duration<double>(interval_));
  auto next = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(stop_mutex_);
  while (!stop_) {
    lock.unlock();
    SampleAt(std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count());
    lock.lock();
    next += interval;
    const auto now = std::chrono::steady_clock::now();
    if (next < now) next = now;  // a late sample does not make the next ones come faster
    stop_cv_.wait_until(lock, next, [this] { return stop_; });
  }
}

void MetricsWindow::SampleAt(double t) {
  registry_->RunCollectors();
  std::lock_guard<std::mutex> lock(mutex_);
  Sample sample{t, std::vector<double>(width_, 0.0)};
  std::vector<Series> added;
  auto slot = [&](const MetricsRegistry::SeriesRef& ref, size_t width) -> size_t {
    auto key = std::make_pair(ref.name, ref.values);
    auto it = index_.find(key);
    if (it != index_.end()) return (*series_)[it->second].offset;
    Series s{ref.name, ref.type, ref.label_names, ref.values, width_, {}};
    if (ref.histogram) s.bounds = ref.histogram->bounds();
    index_.emplace(std::move(key), series_->size() + added.size());
    added.push_back(std::move(s));
    width_ += width;
    sample.values.resize(width_, 0.0);
    return added.back().offset;
  };
  registry_->ForEachSeries(families_, [&](const MetricsRegistry::SeriesRef& ref) {
    if (ref.histogram) {
      const Histogram::Data d = ref.histogram->Read();
      const size_t at = slot(ref, d.counts.size() + 2);
      for (size_t i = 0; i < d.counts.size(); ++i) sample.values[at + i] = static_cast<double>(d.counts[i]);
      sample.values[at + d.counts.size()] = d.sum;
      sample.values[at + d.counts.size() + 1] = static_cast<double>(d.count);
    } else {
      sample.values[slot(ref, 1)] = ref.value;
    }
  });
  if (!added.empty()) {
    auto grown = std::make_shared<std::vector<Series>>(*series_);
    for (Series& s : added) grown->push_back(std::move(s));
    series_ = std::move(grown);
  }
  ring_.push_back(std::move(sample));
  while (ring_.size() > max_samples_) ring_.pop_front();
}

MetricsWindow::View MetricsWindow::Between(const Sample& a, const Sample& b) const {
  View v;
  v.series_ = series_;
  v.a_ = a.values;
  v.b_ = b.values;
  v.start_ = a.t;
  v.end_ = b.t;
  return v;
}

MetricsWindow::View MetricsWindow::Window(double seconds) const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (ring_.empty()) {
    View v;
    v.series_ = series_;
    return v;
  }
  const Sample& last = ring_.back();
  // The newest sample at least `seconds` older than the last; else the oldest there is.
  size_t i = ring_.size() - 1;
  while (i > 0 && last.t - ring_[i].t < seconds - interval_ / 2) --i;
  return Between(ring_[i], last);
}

std::vector<MetricsWindow::View> MetricsWindow::Steps(double seconds, double step) const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<View> out;
  if (ring_.size() < 2 || step <= 0) return out;
  const double end = ring_.back().t;
  // Walk back from the last sample, one sample per step boundary.
  std::vector<size_t> picks = {ring_.size() - 1};
  double boundary = end - step;
  for (size_t i = ring_.size() - 1; i-- > 0;) {
    if (end - ring_[i].t > seconds + interval_ / 2) break;
    if (ring_[i].t <= boundary + interval_ / 2) {
      picks.push_back(i);
      boundary -= step;
    }
  }
  std::reverse(picks.begin(), picks.end());
  for (size_t k = 1; k < picks.size(); ++k) out.push_back(Between(ring_[picks[k - 1]], ring_[picks[k]]));
  return out;
}

template <typename Fn>
void MetricsWindow::View::Match(const std::string& name, const Filter& filter, Fn fn) const {
  for (size_t i = 0; i < series_->size(); ++i) {
    const Series& s = (*series_)[i];
    if (s.name != name) continue;
    bool ok = true;
    for (const auto& [label, value] : filter) {
      auto at = std::find(s.label_names.begin(), s.label_names.end(), label);
      if (at == s.label_names.end() || s.values[at - s.label_names.begin()] != value) {
        ok = false;
        break;
      }
    }
    if (ok) fn(s);
  }
}

double MetricsWindow::View::Increase(const std::string& name, const Filter& filter) const {
  double total = 0;
  Match(name, filter, [&](const Series& s) { total += std::max(0.0, At(b_, s.offset) - At(a_, s.offset)); });
  return total;
}

double MetricsWindow::View::Last(const std::string& name, const Filter& filter) const {
  double total = 0;
  Match(name, filter, [&](const Series& s) { total += At(b_, s.offset); });
  return total;
}

double MetricsWindow::View::Count(const std::string& name, const Filter& filter) const {
  double total = 0;
  Match(name, filter, [&](const Series& s) {
    const size_t at = s.offset + s.bounds.size() + 2;  // the buckets (+Inf too), the sum, then the count
    total += std::max(0.0, At(b_, at) - At(a_, at));
  });
  return total;
}

double MetricsWindow::View::Quantile(const std::string& name, double q, const Filter& filter) const {
  std::vector<uint64_t> counts;
  std::vector<double> bounds;
  Match(name, filter, [&](const Series& s) {
    if (bounds.empty()) {
      bounds = s.bounds;
      counts.assign(bounds.size() + 1, 0);
    }
    if (s.bounds != bounds) return;  // one family has one set of bounds; guard anyway
    for (size_t i = 0; i <= bounds.size(); ++i) {
      const double d = At(b_, s.offset + i) - At(a_, s.offset + i);
      if (d > 0) counts[i] += static_cast<uint64_t>(std::llround(d));
    }
  });
  uint64_t total = 0;
  for (uint64_t c : counts) total += c;
  if (total == 0) return -1;
  return Histogram::QuantileOf(bounds, counts, q);
}

std::vector<std::string> MetricsWindow::View::LabelValues(const std::string& name, const std::string& label,
                                                         const Filter& filter) const {
  std::set<std::string> values;
  Match(name, filter, [&](const Series& s) {
    auto at = std::find(s.label_names.begin(), s.label_names.end(), label);
    if (at != s.label_names.end()) values.insert(s.values[at - s.label_names.begin()]);
  });
  return {values.begin(), values.end()};
}

}  // namespace tachyon
