// The nearest-rank percentile the micro-benchmarks print (p in [0, 1]).
#pragma once

#include <algorithm>
#include <vector>

inline double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5))];
}
