// Arrival times of an open-loop run, as `vllm bench serve` draws them: gaps from a
// gamma distribution with shape `burstiness` and mean 1 / rate (burstiness 1 is a
// Poisson process; < 1 burstier, > 1 more regular). The first request is at 0.
#pragma once

#include <cstdint>
#include <vector>

namespace tachyon {

// n times in seconds, non-decreasing; all 0 when rate is infinite.
std::vector<double> ArrivalTimes(int64_t n, double rate, double burstiness, uint64_t seed);

}  // namespace tachyon
