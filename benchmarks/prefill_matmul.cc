// Prefill-shaped matrix products (many tokens at once), which are compute-bound:
// the multiply-adds MatMul does per second, per type, on one matrix in cache.
//   build/release/benchmarks/prefill_matmul [threads] [rows] [cols] [tokens] [types, e.g. q8_0,f16]
// Prints, per type, the median and the best of 11 rounds in G multiply-adds a second
// (rows x cols x tokens / time). Compare builds A B A B on one machine; on a noisy
// VM the best round is the steadier figure.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/ggml_type.h"
#include "kernels/matmul.h"
#include "kernels/ref/quantize.h"

namespace {

using tachyon::GgmlType;

std::pair<double, double> MedianAndBestGmacPerSecond(GgmlType type, int threads, int64_t rows, int64_t cols, int64_t tokens) {
  const uint64_t row_bytes = *tachyon::GgmlRowBytes(type, cols);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(cols);
  std::vector<uint8_t> data(row_bytes * rows);
  for (int64_t r = 0; r < rows; ++r) {
    for (float& v : values) v = normal(rng);
    tachyon::ref::QuantizeRow(type, values.data(), data.data() + r * row_bytes, cols);
  }
  tachyon::WeightMatrix matrix{.type = type, .data = data.data(), .rows = rows, .cols = cols};
  tachyon::PackForMatMul(&matrix);
  std::vector<float> x(tokens * cols), y(tokens * rows);
  for (float& v : x) v = normal(rng);
  tachyon::ThreadPool pool(threads);
  std::vector<double> rates;
  for (int round = 0; round < 12; ++round) {
    const auto start = std::chrono::steady_clock::now();
    tachyon::MatMul(matrix, x.data(), tokens, y.data(), pool);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (round > 0) rates.push_back(static_cast<double>(rows * cols * tokens) / seconds / 1e9);  // round 0 warms
  }
  std::sort(rates.begin(), rates.end());
  return {rates[rates.size() / 2], rates.back()};
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 5632;
  const int64_t cols = argc > 3 ? std::atoll(argv[3]) : 2048;
  const int64_t tokens = argc > 4 ? std::atoll(argv[4]) : 512;
  std::printf("prefill matmul, %d threads, [%lld x %lld] x %lld tokens\n", threads, static_cast<long long>(rows),
              static_cast<long long>(cols), static_cast<long long>(tokens));
  const std::string types = argc > 5 ? argv[5] : "f16,q8_0,q4_0,q4_k,q6_k";
  for (GgmlType type : {GgmlType::kF16, GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_0, GgmlType::kQ4_K,
                        GgmlType::kQ6_K}) {
    std::string name = tachyon::GgmlTypeName(type);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (("," + types + ",").find("," + name + ",") == std::string::npos) continue;
    const auto [median, best] = MedianAndBestGmacPerSecond(type, threads, rows, cols, tokens);
    std::printf("%-6s %7.1f GMAC/s (best %.1f)\n", tachyon::GgmlTypeName(type), median, best);
  }
  return 0;
}
