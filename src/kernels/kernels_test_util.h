// Random inputs for the kernel tests: normal values, never exactly zero (a
// zero can hide a wrong scale or a missed element).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tachyon::testing_util {

inline std::vector<float> RandomNonZero(int64_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) {
    do {
      x = normal(rng);
    } while (x == 0.0f);
  }
  return v;
}

}  // namespace tachyon::testing_util
