#include "obs/metrics.h"

#include <algorithm>
#include <cstdio>

#include "base/check.h"

namespace tachyon {
namespace {

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter: return "counter";
    case MetricType::kGauge: return "gauge";
    case MetricType::kHistogram: return "histogram";
  }
  return "untyped";
}

// "a=\"x\",b=\"y\"" for the label names and values.
std::string LabelText(const std::vector<std::string>& names, const std::vector<std::string>& values) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i > 0) out += ',';
    out += names[i] + "=\"" + MetricsRegistry::EscapeLabelValue(values[i]) + "\"";
  }
  return out;
}

void Sample(std::string& out, const std::string& name, const std::string& labels, double value) {
  char number[64];
  std::snprintf(number, sizeof(number), "%.17g", value);
  out += name;
  if (!labels.empty()) out += "{" + labels + "}";
  out += ' ';
  out += number;
  out += '\n';
}

// Help text: backslash and newline escaped, as the format requires.
std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string MetricsRegistry::EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

MetricsRegistry::Entry* MetricsRegistry::Find(const std::string& name, MetricType type,
                                              const std::vector<std::string>& label_names) {
  for (auto& e : entries_) {
    if (e->name != name) continue;
    const std::vector<std::string>& existing = e->counters     ? e->counters->label_names()
                                               : e->gauges     ? e->gauges->label_names()
                                                               : e->histograms->label_names();
    CHECK(e->type == type && existing == label_names) << "metric " << name << " registered twice with different "
                                                      << "type or labels";
    return e.get();
  }
  return nullptr;
}

CounterFamily& MetricsRegistry::AddCounter(const std::string& name, const std::string& help,
                                           std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = Find(name, MetricType::kCounter, label_names)) return *e->counters;
  auto e = std::make_unique<Entry>(Entry{name, help, MetricType::kCounter, nullptr, nullptr, nullptr});
  e->counters = std::make_unique<CounterFamily>(std::move(label_names), [] { return std::make_unique<Counter>(); });
  entries_.push_back(std::move(e));
  return *entries_.back()->counters;
}

GaugeFamily& MetricsRegistry::AddGauge(const std::string& name, const std::string& help,
                                       std::vector<std::string> label_names) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = Find(name, MetricType::kGauge, label_names)) return *e->gauges;
  auto e = std::make_unique<Entry>(Entry{name, help, MetricType::kGauge, nullptr, nullptr, nullptr});
  e->gauges = std::make_unique<GaugeFamily>(std::move(label_names), [] { return std::make_unique<Gauge>(); });
  entries_.push_back(std::move(e));
  return *entries_.back()->gauges;
}

HistogramFamily& MetricsRegistry::AddHistogram(const std::string& name, const std::string& help,
                                               std::vector<std::string> label_names, std::vector<double> bounds) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (Entry* e = Find(name, MetricType::kHistogram, label_names)) return *e->histograms;
  auto e = std::make_unique<Entry>(Entry{name, help, MetricType::kHistogram, nullptr, nullptr, nullptr});
  e->histograms = std::make_unique<HistogramFamily>(
      std::move(label_names), [bounds = std::move(bounds)] { return std::make_unique<Histogram>(bounds); });
  entries_.push_back(std::move(e));
  return *entries_.back()->histograms;
}

int MetricsRegistry::AddCollector(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(collectors_mutex_);
  const int id = next_collector_++;
  collectors_.emplace(id, std::move(fn));
  return id;
}

void MetricsRegistry::RemoveCollector(int id) {
  std::lock_guard<std::mutex> lock(collectors_mutex_);
  collectors_.erase(id);
}

void MetricsRegistry::RunCollectors() const {
  std::lock_guard<std::mutex> lock(collectors_mutex_);
  for (const auto& [id, fn] : collectors_) fn();
}

void MetricsRegistry::ForEachSeries(const std::vector<std::string>& names,
                                    const std::function<void(const SeriesRef&)>& fn) const {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const auto& e : entries_) {
    if (!names.empty() && std::find(names.begin(), names.end(), e->name) == names.end()) continue;
    switch (e->type) {
      case MetricType::kCounter:
        e->counters->ForEach([&](const std::vector<std::string>& values, const Counter& c) {
          fn({e->name, e->type, e->counters->label_names(), values, c.value(), nullptr});
        });
        break;
      case MetricType::kGauge:
        e->gauges->ForEach([&](const std::vector<std::string>& values, const Gauge& g) {
          fn({e->name, e->type, e->gauges->label_names(), values, g.value(), nullptr});
        });
        break;
      case MetricType::kHistogram:
        e->histograms->ForEach([&](const std::vector<std::string>& values, const Histogram& h) {
          fn({e->name, e->type, e->histograms->label_names(), values, 0, &h});
        });
        break;
    }
  }
}

std::string MetricsRegistry::Render() const {
  RunCollectors();
  std::lock_guard<std::mutex> lock(mutex_);
  std::string out;
  for (const auto& e : entries_) {
    out += "# HELP " + e->name + " " + EscapeHelp(e->help) + "\n";
    out += "# TYPE " + e->name + " " + TypeName(e->type) + "\n";
    switch (e->type) {
      case MetricType::kCounter:
        e->counters->ForEach([&](const std::vector<std::string>& values, const Counter& c) {
          Sample(out, e->name, LabelText(e->counters->label_names(), values), c.value());
        });
        break;
      case MetricType::kGauge:
        e->gauges->ForEach([&](const std::vector<std::string>& values, const Gauge& g) {
          Sample(out, e->name, LabelText(e->gauges->label_names(), values), g.value());
        });
        break;
      case MetricType::kHistogram:
        e->histograms->ForEach([&](const std::vector<std::string>& values, const Histogram& h) {
          out += h.RenderPrometheus(e->name, LabelText(e->histograms->label_names(), values));
        });
        break;
    }
  }
  return out;
}

}  // namespace tachyon
