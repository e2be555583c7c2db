// The AVX2 kernels against the scalar reference on random (never zero) inputs.
#include "kernels/x86/dot_avx2.h"

#include <gtest/gtest.h>

#include "kernels/kernels_test_util.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/block_formats.h"
#include "kernels/ref/kquants.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quantize.h"

namespace tachyon {
namespace {

// Relative tolerance of a dot product of n terms: float accumulation in another order.
constexpr float kF32Tolerance = 1e-5f;    // F32, F16, BF16 weights (exact products, float sums)

using testing_util::RandomNonZero;

// |a - b| <= tol * sum |w_i x_i| (the scale of the terms, not of the result).
void ExpectClose(float simd, float reference, float scale, float tol, const char* what) {
  EXPECT_LE(std::fabs(simd - reference), tol * scale + 1e-6f) << what << " simd " << simd << " ref " << reference;
}

class DotAvx2Test : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2/FMA/F16C";
  }
};

TEST_P(DotAvx2Test, FloatTypes) {
  const int64_t n = GetParam();
  std::vector<float> w = RandomNonZero(n, 1), x = RandomNonZero(n, 2);
  float scale = 0;
  for (int64_t i = 0; i < n; ++i) scale += std::fabs(w[i] * x[i]);
  ExpectClose(avx2::DotF32(w.data(), x.data(), n), ref::DotF32(w.data(), x.data(), n), scale,
              kF32Tolerance, "f32");
  std::vector<uint16_t> h(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    h[i] = FloatToFp16(w[i]);
    b[i] = FloatToBf16(w[i]);
  }
  ExpectClose(avx2::DotF16(h.data(), x.data(), n), ref::DotF16(h.data(), x.data(), n), scale,
              kF32Tolerance, "f16");
  ExpectClose(avx2::DotBF16(b.data(), x.data(), n), ref::DotBF16(b.data(), x.data(), n), scale,
              kF32Tolerance, "bf16");
}

TEST_P(DotAvx2Test, ActivationQuantizationIsTheReferences) {
  const int64_t n = GetParam() / 32 * 32;
  if (n == 0) GTEST_SKIP();
  std::vector<float> x = RandomNonZero(n, 4);
  std::vector<uint8_t> xq(*GgmlRowBytes(GgmlType::kQ8_0, n)), xq_ref(xq.size());
  avx2::QuantizeActivationsQ8_0(x.data(), xq.data(), n);
  ref::QuantizeActivationsQ8_0(x.data(), xq_ref.data(), n);
  EXPECT_EQ(xq, xq_ref) << "activation quantization is bit-identical";
}

TEST_P(DotAvx2Test, KQuantActivationQuantizationIsTheReferences) {
  const int64_t n = GetParam() / kQK_K * kQK_K;
  if (n == 0) GTEST_SKIP();
  std::vector<float> x = RandomNonZero(n, 5);
  // Super-block 0: ties of magnitude, the negative first (it sets the sign), in a
  // vector and past it; 1: all zero; 2: the largest magnitude positive, last.
  for (int i = 0; i < kQK_K; ++i) x[i] *= 0.1f;
  x[3] = -0.75f;
  x[5] = x[200] = 0.75f;
  if (n >= 3 * kQK_K) {
    for (int i = 0; i < kQK_K; ++i) x[kQK_K + i] = 0.0f;
    x[3 * kQK_K - 1] = 40.0f;
  }
  std::vector<uint8_t> xq(n / kQK_K * sizeof(BlockQ8_K)), xq_ref(xq.size());
  avx2::QuantizeActivationsQ8_K(x.data(), xq.data(), n);
  ref::QuantizeActivationsQ8_K(x.data(), xq_ref.data(), n);
  EXPECT_EQ(xq, xq_ref) << "k-quant activation quantization is bit-identical";
}

TEST_P(DotAvx2Test, FourTokenKernelIsBitIdenticalToSingleDots) {
  const int64_t n = GetParam();
  std::vector<float> w = RandomNonZero(n, 7, 0.02f);
  std::vector<float> x = RandomNonZero(4 * n, 8);
  float out[4];
  avx2::DotF32x4(w.data(), x.data(), n * sizeof(float), n, out);
  for (int k = 0; k < 4; ++k) EXPECT_EQ(out[k], avx2::DotF32(w.data(), x.data() + k * n, n)) << "f32 " << k;
}

INSTANTIATE_TEST_SUITE_P(Lengths, DotAvx2Test, ::testing::Values(32, 48, 256, 1000, 2048, 8192));

}  // namespace
}  // namespace tachyon
