#include "kernels/packed_matrix.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/block_formats.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/kernels_test_util.h"
#include "kernels/matmul.h"
#include "kernels/ref/quantize.h"

namespace tachyon {
namespace {

std::vector<uint8_t> QuantizedMatrix(GgmlType type, int64_t rows, int64_t cols, uint32_t seed) {
  const std::vector<float> values = testing_util::RandomNonZero(rows * cols, seed, 0.02f);
  const uint64_t row_bytes = *GgmlRowBytes(type, cols);
  std::vector<uint8_t> bytes(rows * row_bytes);
  for (int64_t r = 0; r < rows; ++r) {
    ref::QuantizeRow(type, values.data() + r * cols, bytes.data() + r * row_bytes, cols);
  }
  return bytes;
}

class PackedMatrixTest : public ::testing::TestWithParam<GgmlType> {};

// 576 columns: one whole group of 16 blocks and a partial one of 2 (computed compact),
// 544: of 1 (compact), 608: of 3; 768 (k-quants: 24 sub-blocks): one whole and one of
// 8; 2048: four whole.
// F16 (panels of 32 rows): 70 rows, two whole panels and one of 6, and any width.
TEST_P(PackedMatrixTest, PackingLosesNothing) {
  const GgmlType type = GetParam();
  const bool f16 = type == GgmlType::kF16;
  for (int64_t cols : {256, 768, 2048, 64, 576, 544, 37}) {
    if ((type == GgmlType::kQ4_K || type == GgmlType::kQ6_K) && cols % 256 != 0) continue;
    if (!f16 && cols % 32 != 0) continue;
    const int64_t rows = f16 ? 70 : 5;
    const std::vector<uint8_t> bytes = QuantizedMatrix(type, rows, cols, 3);
    for (PackedKernels kernels : {PackedKernels::kAvx512, PackedKernels::kAvx2}) {  // Q6_K's layouts differ
      std::unique_ptr<PackedMatrix> packed = PackedMatrix::PackAnyCpu(type, bytes.data(), rows, cols, kernels);
      ASSERT_NE(packed, nullptr);
      if (!f16) {
        EXPECT_EQ(packed->num_groups(), (cols + 511) / 512);
      }
      const uint64_t row_bytes = *GgmlRowBytes(type, cols);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<uint8_t> row(row_bytes);
        packed->UnpackRow(r, row.data());
        EXPECT_EQ(std::memcmp(row.data(), bytes.data() + r * row_bytes, row_bytes), 0)
            << cols << " cols, row " << r << (kernels == PackedKernels::kAvx2 ? ", AVX2 layout" : "");
      }
    }
  }
}

bool CpuRuns(PackedKernels kernels) {
  return kernels == PackedKernels::kAvx512 ? CpuHasAvx512Vnni() : CpuHasAvx2();
}
const char* KernelsName(PackedKernels kernels) { return kernels == PackedKernels::kAvx512 ? "AVX-512" : "AVX2"; }

// Q8_0 quants at the ends of int8 (-128, which no quantizer writes but a file may
// hold, -127 and 127) against activations at theirs: unpacked as they were, and
// the products the reference's, through whole, compact (1 and 2 blocks) and
// partial groups, for each ISA's kernels this CPU runs. (The AVX2 kernels
// multiply |q| by x * sign q: a -128 there is read as 128.)
TEST(PackedMatrixTest, Q8_0QuantsAtTheEndsOfInt8AreExact) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2: the packed kernels do not run here";
  constexpr int8_t kEnds[] = {-128, 127, -127, -128, 1, -128, 0, 127};
  for (PackedKernels kernels : {PackedKernels::kAvx512, PackedKernels::kAvx2}) {
    if (!CpuRuns(kernels)) continue;
    for (int64_t cols : {544, 576, 608, 2048}) {
      const int64_t rows = 7, tokens = 5, blocks = cols / 32;
      std::vector<BlockQ8_0> file(rows * blocks);
      for (int64_t i = 0; i < rows * blocks; ++i) {
        file[i].d = FloatToFp16(0.015625f * static_cast<float>(1 + i % 3));
        for (int v = 0; v < 32; ++v) file[i].qs[v] = kEnds[(i * 32 + v + i / blocks) % 8];
      }
      const uint8_t* bytes = reinterpret_cast<const uint8_t*>(file.data());
      WeightMatrix w{GgmlType::kQ8_0, bytes, rows, cols};
      w.packed = PackedMatrix::PackAnyCpu(GgmlType::kQ8_0, bytes, rows, cols, kernels);
      ASSERT_NE(w.packed, nullptr);
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<BlockQ8_0> row(blocks);
        w.packed->UnpackRow(r, reinterpret_cast<uint8_t*>(row.data()));
        ASSERT_EQ(std::memcmp(row.data(), &file[r * blocks], blocks * sizeof(BlockQ8_0)), 0)
            << KernelsName(kernels) << ", " << cols << " cols, row " << r;
      }
      // Each block's largest activation quantizes to +-127, most of the rest near it.
      std::vector<float> x(tokens * cols);
      for (int64_t i = 0; i < tokens * cols; ++i) x[i] = (i % 5 == 2 ? 1.0f : -0.97f) * (i % 7 == 0 ? -1 : 1);
      ThreadPool pool(2), one(1);
      std::vector<float> y(tokens * rows), reference(tokens * rows);
      MatMul(w, x.data(), tokens, y.data(), pool);
      MatMul(w, x.data(), tokens, reference.data(), one, KernelPath::kReference);
      for (int64_t i = 0; i < tokens * rows; ++i) {
        ASSERT_NEAR(y[i], reference[i], 1e-4f * (1 + std::fabs(reference[i])))
            << KernelsName(kernels) << ", " << cols << " cols, at " << i;
      }
      std::vector<float> alone(rows);
      MatMul(w, x.data(), 1, alone.data(), pool);
      for (int64_t r = 0; r < rows; ++r) ASSERT_EQ(alone[r], y[r]) << KernelsName(kernels) << ", one token, row " << r;
    }
  }
}

// Against the reference MatMul on the same bytes (the same Q8_0 activations, so only
// the order of the float sums differs), and bit for bit: every token's result the same
// in a batch of any size as alone (a row at a time up to 8 tokens, then the 4 x 3
// register tile; F16: two panels up to 6 tokens, then one panel and up to 12), with
// rows not a multiple of the tile's; for each ISA's kernels this CPU runs.
TEST_P(PackedMatrixTest, MatchesReferenceAndDoesNotDependOnTheBatch) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2: the packed kernels do not run here";
  const GgmlType type = GetParam();
  for (PackedKernels kernels : {PackedKernels::kAvx512, PackedKernels::kAvx2}) {
    if (!CpuRuns(kernels)) continue;
    for (int64_t cols : {256, 768, 2048, 576, 544, 608, 896, 37}) {
      if ((type == GgmlType::kQ4_K || type == GgmlType::kQ6_K) && cols % 256 != 0) continue;
      if (type != GgmlType::kF16 && cols % 32 != 0) continue;
      const int64_t rows = type == GgmlType::kF16 ? 101 : 37, tokens = 17;
      const std::vector<uint8_t> bytes = QuantizedMatrix(type, rows, cols, 7);
      WeightMatrix w{type, bytes.data(), rows, cols};
      w.packed = PackedMatrix::PackAnyCpu(type, bytes.data(), rows, cols, kernels);
      ASSERT_NE(w.packed, nullptr);
      const std::vector<float> x = testing_util::RandomNonZero(tokens * cols, 8);
      ThreadPool one(1), three(3);
      std::vector<float> batch(tokens * rows), reference(tokens * rows);
      MatMul(w, x.data(), tokens, batch.data(), three);
      MatMul(w, x.data(), tokens, reference.data(), one, KernelPath::kReference);
      for (int64_t i = 0; i < tokens * rows; ++i) {
        ASSERT_NEAR(batch[i], reference[i], 1e-4f * (1 + std::fabs(reference[i])))
            << KernelsName(kernels) << ", " << cols << " cols, at " << i;
      }
      for (int64_t size : {1, 2, 3, 4, 5, 6, 7, 8, 9, 12}) {
        for (int64_t t0 = 0; t0 + size <= tokens; t0 += size) {
          std::vector<float> part(size * rows);
          MatMul(w, x.data() + t0 * cols, size, part.data(), one);
          for (int64_t i = 0; i < size * rows; ++i) {
            ASSERT_EQ(part[i], batch[t0 * rows + i])
                << KernelsName(kernels) << ", bit-identical: batch of " << size << " at token " << t0;
          }
        }
      }
    }
  }
}

// The AVX2 kernels give the AVX-512 kernels' results, bit for bit (the same
// operations lane by lane, two halves of 8 lanes for one of 16), so a model's output
// does not depend on which of the two a machine has.
TEST_P(PackedMatrixTest, Avx2GivesTheAvx512Results) {
  if (!CpuHasAvx512Vnni()) GTEST_SKIP() << "this CPU has no AVX-512 VNNI to compare the AVX2 kernels with";
  const GgmlType type = GetParam();
  for (int64_t cols : {256, 768, 2048, 576, 544, 608, 800, 37}) {
    if ((type == GgmlType::kQ4_K || type == GgmlType::kQ6_K) && cols % 256 != 0) continue;
    if (type != GgmlType::kF16 && cols % 32 != 0) continue;
    const int64_t rows = type == GgmlType::kF16 ? 101 : 37;
    const std::vector<uint8_t> bytes = QuantizedMatrix(type, rows, cols, 11);
    WeightMatrix a{type, bytes.data(), rows, cols}, b{type, bytes.data(), rows, cols};
    a.packed = PackedMatrix::PackAnyCpu(type, bytes.data(), rows, cols, PackedKernels::kAvx512);
    b.packed = PackedMatrix::PackAnyCpu(type, bytes.data(), rows, cols, PackedKernels::kAvx2);
    ThreadPool pool(2);
    for (int64_t tokens : {1, 2, 3, 5, 8, 13, 30}) {
      const std::vector<float> x = testing_util::RandomNonZero(tokens * cols, 12);
      std::vector<float> ya(tokens * rows), yb(tokens * rows);
      MatMul(a, x.data(), tokens, ya.data(), pool);
      MatMul(b, x.data(), tokens, yb.data(), pool);
      for (int64_t i = 0; i < tokens * rows; ++i) {
        ASSERT_EQ(ya[i], yb[i]) << cols << " cols, " << tokens << " tokens, at " << i;
      }
    }
  }
}

// q, k and v in one call: each result MatMul's, bit for bit, and a matrix of another
// type among them sends every one through MatMul.
TEST_P(PackedMatrixTest, MatricesSharingTheirInputGiveMatMulsResults) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2: the packed kernels do not run here";
  const GgmlType type = GetParam();
  const int64_t cols = 512, tokens = 13;
  const std::vector<int64_t> rows = {40, 8, 21};
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<WeightMatrix> w;
  for (size_t i = 0; i < rows.size(); ++i) bytes.push_back(QuantizedMatrix(type, rows[i], cols, 30 + i));
  for (size_t i = 0; i < rows.size(); ++i) {
    w.push_back(WeightMatrix{type, bytes[i].data(), rows[i], cols});
    PackForMatMul(&w.back());
  }
  const std::vector<float> x = testing_util::RandomNonZero(tokens * cols, 9);
  ThreadPool pool(2);
  for (int64_t n : {int64_t{1}, tokens}) {
    std::vector<std::vector<float>> together(3), alone(3);
    for (int i = 0; i < 3; ++i) {
      together[i].resize(n * rows[i]);
      alone[i].resize(n * rows[i]);
      MatMul(w[i], x.data(), n, alone[i].data(), pool);
    }
    MatMulSameInput({{&w[0], together[0].data()}, {&w[1], together[1].data()}, {&w[2], together[2].data()}},
                    x.data(), n, pool);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(together[i], alone[i]) << "matrix " << i << ", " << n << " tokens";
  }
  // F32 beside them: not packed, so each goes alone (same results).
  const std::vector<float> f32 = testing_util::RandomNonZero(5 * cols, 4);
  const WeightMatrix other{GgmlType::kF32, reinterpret_cast<const uint8_t*>(f32.data()), 5, cols};
  std::vector<float> a(tokens * rows[0]), b(tokens * 5), a_alone(a.size()), b_alone(b.size());
  MatMulSameInput({{&w[0], a.data()}, {&other, b.data()}}, x.data(), tokens, pool);
  MatMul(w[0], x.data(), tokens, a_alone.data(), pool);
  MatMul(other, x.data(), tokens, b_alone.data(), pool);
  EXPECT_EQ(a, a_alone);
  EXPECT_EQ(b, b_alone);
}

// Products of a mixture of experts' step in one call (MatMulMany): matrices of this
// type and two others (F16 panels and Q8_0 tiles in the same loop), of several
// widths, with 0, 1, 5 or 14 tokens (14: nibble tiles expanded, beside ones that
// are not), some sharing their input; each result MatMul's, bit for bit. A matrix
// left unpacked among them sends every one through MatMul.
TEST_P(PackedMatrixTest, ManyProductsInOneLoopGiveMatMulsResults) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2: the packed kernels do not run here";
  const GgmlType type = GetParam();
  struct Spec {
    GgmlType type;
    int64_t rows, cols, tokens;
    int input;  // products with the same input index read the same x
  };
  const bool k_quant = type == GgmlType::kQ4_K || type == GgmlType::kQ6_K;
  const int64_t wide = k_quant ? 768 : 576, narrow = k_quant ? 256 : 544;
  const std::vector<Spec> specs = {
      {type, 40, wide, 1, 0},   {type, 19, wide, 1, 0},        {type, 33, narrow, 5, 1},
      {type, 8, wide, 14, 2},   {type, 21, wide, 14, 2},       {type, 17, wide, 0, 3},
      {GgmlType::kF16, 70, wide, 5, 4}, {GgmlType::kQ8_0, 37, wide, 14, 2}, {type, 50, narrow, 5, 1},
  };
  std::vector<std::vector<uint8_t>> bytes;
  std::vector<WeightMatrix> w;
  for (size_t i = 0; i < specs.size(); ++i) bytes.push_back(QuantizedMatrix(specs[i].type, specs[i].rows, specs[i].cols, 50 + i));
  w.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    w.push_back(WeightMatrix{specs[i].type, bytes[i].data(), specs[i].rows, specs[i].cols});
    PackForMatMul(&w.back());
    ASSERT_NE(w.back().packed, nullptr);
  }
  std::vector<std::vector<float>> inputs;
  for (int input = 0; input < 5; ++input) inputs.push_back(testing_util::RandomNonZero(14 * wide, 60 + input));
  ThreadPool pool(3);
  std::vector<std::vector<float>> together(specs.size()), alone(specs.size());
  std::vector<MatMulProduct> products;
  for (size_t i = 0; i < specs.size(); ++i) {
    together[i].assign(specs[i].tokens * specs[i].rows, -1.0f);
    alone[i].resize(together[i].size());
    MatMul(w[i], inputs[specs[i].input].data(), specs[i].tokens, alone[i].data(), pool);
    products.push_back({&w[i], inputs[specs[i].input].data(), specs[i].tokens, together[i].data()});
  }
  MatMulMany(products, pool);
  for (size_t i = 0; i < specs.size(); ++i) EXPECT_EQ(together[i], alone[i]) << "product " << i;
  // An F32 matrix among them: not packed, so each goes alone (same results).
  const std::vector<float> f32 = testing_util::RandomNonZero(5 * wide, 4);
  const WeightMatrix other{GgmlType::kF32, reinterpret_cast<const uint8_t*>(f32.data()), 5, wide};
  std::vector<float> a(5 * 40), b(5 * 5), b_alone(b.size());
  MatMulMany({{&w[0], inputs[0].data(), 5, a.data()}, {&other, inputs[0].data(), 5, b.data()}}, pool);
  MatMul(other, inputs[0].data(), 5, b_alone.data(), pool);
  std::vector<float> a_alone(a.size());
  MatMul(w[0], inputs[0].data(), 5, a_alone.data(), pool);
  EXPECT_EQ(a, a_alone);
  EXPECT_EQ(b, b_alone);
}

INSTANTIATE_TEST_SUITE_P(Types, PackedMatrixTest, ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ5_0,
                                                                          GgmlType::kQ4_K, GgmlType::kQ6_K, GgmlType::kF16),
                         [](const auto& info) { return std::string(GgmlTypeName(info.param)); });

TEST(PackedMatrixTest, OtherTypesAreNotPacked) {
  const std::vector<uint8_t> bytes = QuantizedMatrix(GgmlType::kQ5_K, 2, 256, 1);
  EXPECT_EQ(PackedMatrix::PackAnyCpu(GgmlType::kQ5_K, bytes.data(), 2, 256), nullptr);
}

}  // namespace
}  // namespace tachyon
