// Comparison of two bench runs: every metric side by side with the ratio B/A and
// a bootstrap 95% confidence interval of that ratio. Each of the `num_resamples`
// rounds draws the requests of each run with replacement (a request's ITL gaps
// go with it) and recomputes the metric; the interval holds the middle 95% of the
// ratios. When it excludes 1, the difference is larger than what resampling the
// same runs produces: the evidence for "this change cut TTFT p95 by 38%". Rates
// (throughput, goodput) are resampled over time slices of the run instead.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "bench/run_file.h"

namespace tachyon {

struct MetricComparison {
  std::string name;          // "TTFT p95"
  std::string unit;          // "ms", "req/s", "tok/s"
  bool lower_is_better = true;
  double a = 0, b = 0;
  double ratio = 0;          // b / a; 0 when a is 0
  double ci_low = 0, ci_high = 0;
  bool has_ci = false;
  bool significant = false;  // the interval excludes 1
  bool negligible = false;   // significant, but |B/A - 1| < min_effect
};

struct Comparison {
  std::vector<MetricComparison> metrics;
  int num_resamples = 0;
  double min_effect = 0;
};

// min_effect: a relative change smaller than this (0.05 = 5%) is called negligible
// even when the interval excludes 1: a true but tiny difference is not a finding.
Comparison CompareRuns(const RunFile& a, const RunFile& b, int num_resamples, uint64_t seed, double min_effect);
// A table: metric, A, B, B/A, change, 95% CI, verdict; aligned text for the
// terminal, or Markdown (markdown = true) to paste into a review or a note.
std::string RenderComparison(const Comparison& c, const std::string& label_a, const std::string& label_b,
                             bool markdown = false);

}  // namespace tachyon
