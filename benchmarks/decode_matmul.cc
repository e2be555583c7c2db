// Decode-shaped matrix products (one token, or a few: a batched decode step) read
// from memory: the weight bytes MatMul streams per second, per type, for matrices
// far larger than the L3 cache in all (copies used in turn), as token generation
// reads them.
//   build/release/benchmarks/decode_matmul [threads] [rows] [cols] [MiB in all] [types, e.g. q8_0,f16] [tokens]
//       [passes]
// Prints, per type, the median of 7 rounds in GB/s of weight bytes (10^9 B/s);
// compare with bandwidth_probe's figure for the same threads. A round passes over
// the copies `passes` times (default 1): with MiB 0 and a small matrix (two
// copies of 128 x 2048 Q8_0 are 557 KB) that times the kernels from the caches
// rather than from memory.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/ggml_type.h"
#include "kernels/matmul.h"
#include "kernels/ref/quantize.h"

namespace {

using tachyon::GgmlType;

double MedianGbPerSecond(GgmlType type, int threads, int64_t rows, int64_t cols, int64_t mib, int64_t tokens,
                         int64_t passes) {
  const uint64_t row_bytes = *tachyon::GgmlRowBytes(type, cols);
  const int64_t copies = std::max<int64_t>(2, mib * (1 << 20) / static_cast<int64_t>(row_bytes * rows));
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> row(cols);
  std::vector<std::vector<uint8_t>> data(copies, std::vector<uint8_t>(row_bytes * rows));
  std::vector<tachyon::WeightMatrix> matrices(copies);
  for (int64_t c = 0; c < copies; ++c) {
    for (int64_t r = 0; r < rows; ++r) {
      for (float& v : row) v = normal(rng);
      tachyon::ref::QuantizeRow(type, row.data(), data[c].data() + r * row_bytes, cols);
    }
    matrices[c] = {.type = type, .data = data[c].data(), .rows = rows, .cols = cols};
    tachyon::PackForMatMul(&matrices[c]);
  }
  std::vector<float> x(tokens * cols), y(tokens * rows);
  for (float& v : x) v = normal(rng);
  tachyon::ThreadPool pool(threads);
  const uint64_t bytes_per_call = row_bytes * rows;
  std::vector<double> rates;
  for (int round = 0; round < 8; ++round) {
    const auto start = std::chrono::steady_clock::now();
    for (int64_t pass = 0; pass < passes; ++pass) {
      for (int64_t c = 0; c < copies; ++c) tachyon::MatMul(matrices[c], x.data(), tokens, y.data(), pool);
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round > 0) rates.push_back(static_cast<double>(bytes_per_call * copies * passes) / seconds / 1e9);  // round 0 warms
  }
  std::sort(rates.begin(), rates.end());
  return rates[rates.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 8192;
  const int64_t cols = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int64_t mib = argc > 4 ? std::atoll(argv[4]) : 512;
  const std::string types = argc > 5 ? argv[5] : "f16,q8_0,q4_0,q4_k,q6_k";
  const int64_t tokens = argc > 6 ? std::atoll(argv[6]) : 1;
  const int64_t passes = argc > 7 ? std::max<int64_t>(1, std::atoll(argv[7])) : 1;
  std::printf("decode matmul, %d threads, [%lld x %lld] x %lld tokens, ~%lld MiB of weights, %lld passes a round\n",
              threads, static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(tokens),
              static_cast<long long>(mib), static_cast<long long>(passes));
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    std::string name = tachyon::GgmlTypeName(type);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (("," + types + ",").find("," + name + ",") == std::string::npos) continue;
    std::printf("%-6s %6.2f GB/s\n", tachyon::GgmlTypeName(type), MedianGbPerSecond(type, threads, rows, cols, mib, tokens, passes));
  }
  return 0;
}
