// Memory read bandwidth with N threads: the bound for token generation, which
// must read every weight once per token.
//   build/release/benchmarks/bandwidth_probe [threads] [MiB]
// Prints the best of 5 passes in GB/s (10^9 bytes per second).
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const size_t mib = argc > 2 ? std::strtoull(argv[2], nullptr, 10) : 1024;
  const size_t n = mib * 1024 * 1024 / sizeof(uint64_t);
  std::vector<uint64_t> data(n);
  for (size_t i = 0; i < n; ++i) data[i] = i;  // touch every page
  double best = 0;
  std::vector<uint64_t> sums(threads);
  for (int pass = 0; pass < 5; ++pass) {
    auto start = std::chrono::steady_clock::now();
    std::vector<std::thread> workers;
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        const size_t begin = n / threads * t, end = t + 1 == threads ? n : n / threads * (t + 1);
        uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        for (size_t i = begin; i + 4 <= end; i += 4) {
          s0 += data[i];
          s1 += data[i + 1];
          s2 += data[i + 2];
          s3 += data[i + 3];
        }
        sums[t] = s0 + s1 + s2 + s3;
      });
    }
    for (auto& w : workers) w.join();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, n * sizeof(uint64_t) / seconds / 1e9);
  }
  uint64_t total = 0;
  for (uint64_t s : sums) total += s;
  std::printf("%.2f\n", best);
  std::fprintf(stderr, "read bandwidth, %d threads, %zu MiB: %.2f GB/s (checksum %llu)\n", threads, mib, best,
               static_cast<unsigned long long>(total));
  return 0;
}
