#include "bench/arrivals.h"

#include <cmath>
#include <random>

namespace tachyon {

std::vector<double> ArrivalTimes(int64_t n, double rate, double burstiness, uint64_t seed) {
  std::vector<double> out(static_cast<size_t>(std::max<int64_t>(n, 0)), 0.0);
  if (std::isinf(rate) || out.empty()) return out;
  std::mt19937_64 rng(seed);
  std::gamma_distribution<double> gap(burstiness, 1.0 / (rate * burstiness));
  for (size_t i = 1; i < out.size(); ++i) out[i] = out[i - 1] + gap(rng);
  return out;
}

}  // namespace tachyon
