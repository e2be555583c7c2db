#include "kernels/matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernels/ref/quantize.h"

namespace tachyon {
namespace {

struct Matrix {
  std::vector<uint8_t> bytes;
  WeightMatrix view;
  std::vector<float> dequantized;  // [rows, cols]
};

Matrix MakeMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> values(rows * cols);
  for (float& v : values) v = normal(rng);
  Matrix m;
  const uint64_t row_bytes = *GgmlRowBytes(type, cols);
  m.bytes.resize(rows * row_bytes);
  m.dequantized.resize(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    ref::QuantizeRow(type, values.data() + r * cols, m.bytes.data() + r * row_bytes, cols);
    ref::DequantizeRow(type, m.bytes.data() + r * row_bytes, m.dequantized.data() + r * cols, cols);
  }
  m.view = {type, m.bytes.data(), rows, cols};
  return m;
}

std::vector<float> RandomActivations(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = normal(rng);
  return x;
}

class MatMulTest : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatMulTest, MatchesDequantizedProductWithinTypeTolerance) {
  const GgmlType type = GetParam();
  const int64_t rows = 70, cols = 256, tokens = 5;
  Matrix m = MakeMatrix(type, rows, cols, 11);
  std::vector<float> x = RandomActivations(tokens * cols, 12), y(tokens * rows);
  ThreadPool pool(2);
  MatMul(m.view, x.data(), tokens, y.data(), pool);
  // Quantized types also quantize the activations (to Q8_0 or Q8_K): relative error ~1%.
  const float tolerance = GetGgmlTypeTraits(type).is_quantized ? 2e-2f : 1e-5f;
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      double expected = 0, scale = 0;
      for (int64_t c = 0; c < cols; ++c) {
        expected += static_cast<double>(m.dequantized[r * cols + c]) * x[t * cols + c];
        scale += std::fabs(m.dequantized[r * cols + c] * x[t * cols + c]);
      }
      EXPECT_NEAR(y[t * rows + r], expected, tolerance * scale) << GgmlTypeName(type) << " t" << t << " r" << r;
    }
  }
}

TEST_P(MatMulTest, BatchRowsEqualSingleTokenRowsAndThreadCountsAgree) {
  const GgmlType type = GetParam();
  // 21 tokens: the 4-token kernels, the 1-token tail, and (from 16) expanded row tiles.
  const int64_t rows = 33, cols = 256, tokens = 21;
  Matrix m = MakeMatrix(type, rows, cols, 21);
  std::vector<float> x = RandomActivations(tokens * cols, 22), batch(tokens * rows);
  ThreadPool one(1), three(3);
  MatMul(m.view, x.data(), tokens, batch.data(), three);
  for (int64_t t = 0; t < tokens; ++t) {
    std::vector<float> single(rows);
    MatMul(m.view, x.data() + t * cols, 1, single.data(), one);
    for (int64_t r = 0; r < rows; ++r) EXPECT_EQ(batch[t * rows + r], single[r]) << "bit-identical";
  }
  std::vector<float> reference(tokens * rows);
  MatMul(m.view, x.data(), tokens, reference.data(), one, KernelPath::kReference);
  for (int64_t i = 0; i < tokens * rows; ++i) {
    EXPECT_NEAR(batch[i], reference[i], 1e-4f * (1 + std::fabs(reference[i])));
  }
}

INSTANTIATE_TEST_SUITE_P(Types, MatMulTest,
                         ::testing::Values(GgmlType::kF32, GgmlType::kF16, GgmlType::kBF16,
                                           GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K,
                                           GgmlType::kQ6_K),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

}  // namespace
}  // namespace tachyon
