// The AVX2 element-wise ops against the scalar reference on random inputs.
#include "kernels/x86/ops_avx2.h"

#include <gtest/gtest.h>

#include "kernels/kernels_test_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/ref/ops.h"

namespace tachyon {
namespace {

// Named tolerances (relative): float sums in another order; the polynomial exp.
constexpr float kRmsNormTolerance = 1e-6f;
constexpr float kExpTolerance = 1e-6f;
constexpr float kRopeTolerance = 1e-6f;
// Mean and variance summed in float lanes vs double; erf by a 5-term polynomial
// (absolute error 1.5e-7) times x / 2.
constexpr float kLayerNormTolerance = 2e-5f;
constexpr float kGeluTolerance = 5e-7f;

using testing_util::RandomNonZero;

class OpsAvx2Test : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2/FMA";
  }
};

TEST_P(OpsAvx2Test, RmsNorm) {
  const int64_t n = GetParam();
  std::vector<float> x = RandomNonZero(n, 1), w = RandomNonZero(n, 2), a(n), b(n);
  avx2::RmsNorm(x.data(), w.data(), n, 1e-5f, a.data());
  ref::RmsNorm(x.data(), w.data(), n, 1e-5f, b.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], kRmsNormTolerance * (1 + std::fabs(b[i]))) << i;
}

TEST_P(OpsAvx2Test, LayerNorm) {
  const int64_t n = GetParam();
  std::vector<float> x = RandomNonZero(n, 11, 3.0f), w = RandomNonZero(n, 12), bias = RandomNonZero(n, 13), a(n), b(n);
  for (float& v : x) v += 5.0f;  // a mean far from zero: the variance must be of x - mean
  avx2::LayerNorm(x.data(), w.data(), bias.data(), n, 1e-12f, a.data());
  ref::LayerNorm(x.data(), w.data(), bias.data(), n, 1e-12f, b.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], kLayerNormTolerance * (1 + std::fabs(b[i]))) << i;
}

TEST_P(OpsAvx2Test, Gelu) {
  const int64_t n = GetParam();
  std::vector<float> x = RandomNonZero(n, 14, 3.0f), a(n), b(n);
  x[0] = -30.0f;  // far tails: 0 and x
  if (n > 1) x[1] = 30.0f;
  avx2::Gelu(x.data(), n, a.data());
  ref::Gelu(x.data(), n, b.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], kGeluTolerance * (1 + std::fabs(x[i]))) << x[i];
}

TEST_P(OpsAvx2Test, SiluMulAndSoftmax) {
  const int64_t n = GetParam();
  std::vector<float> g = RandomNonZero(n, 3, 4.0f), u = RandomNonZero(n, 4), a(n), b(n);
  g[0] = -100.0f;  // far tails
  if (n > 1) g[1] = 100.0f;
  avx2::SiluMul(g.data(), u.data(), n, a.data());
  ref::SiluMul(g.data(), u.data(), n, b.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], kExpTolerance * (1 + std::fabs(b[i]))) << i;
  std::vector<float> s = RandomNonZero(n, 5, 10.0f), t = s;
  avx2::Softmax(s.data(), n);
  ref::Softmax(t.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(s[i], t[i], kExpTolerance * (1e-3f + t[i])) << i;
}

// Soft-capping: within 4e-7 relative of the C library's tanh, at every length
// (the tail lanes), and over a sweep of x / cap from 1e-30 to 20 of both signs,
// across the switch from the series to the exponential form at 0.55.
TEST_P(OpsAvx2Test, SoftCapIsTanhWithinFourTenthsOfAMillionth) {
  const int64_t n = GetParam();
  std::vector<float> a = RandomNonZero(n, 11, 60.0f), b = a;
  avx2::SoftCap(a.data(), n, 30.0f);
  ref::SoftCap(b.data(), n, 30.0f);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], 4e-7f * std::fabs(b[i])) << i;
}

TEST(OpsAvx2SweepTest, TanhAcrossItsRange) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2";
  std::vector<float> x;
  for (float v = 1e-30f; v < 20.0f; v *= 1.001f) x.push_back(v);
  for (float v = 0.5f; v < 0.6f; v += 1e-5f) x.push_back(v);
  const size_t positive = x.size();
  for (size_t i = 0; i < positive; ++i) x.push_back(-x[i]);
  x.push_back(0.0f);
  std::vector<float> got = x;
  avx2::SoftCap(got.data(), static_cast<int64_t>(got.size()), 1.0f);
  float worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double want = std::tanh(static_cast<double>(x[i]));
    const float err = want == 0 ? std::fabs(got[i]) : static_cast<float>(std::fabs((got[i] - want) / want));
    worst = std::max(worst, err);
    ASSERT_LE(err, 4e-7f) << "x " << x[i] << " got " << got[i] << " want " << want;
  }
  std::printf("worst relative error of the AVX2 tanh: %.3g\n", worst);
  std::vector<float> edge = {9.5f, -9.5f, 1e6f, -1e6f};
  avx2::SoftCap(edge.data(), 4, 1.0f);
  EXPECT_EQ(edge, (std::vector<float>{1.0f, -1.0f, 1.0f, -1.0f}));
}

// GeGLU: the AVX2 version reads the same F16 table, so it equals the reference
// bit for bit, tails (|gate| >= 10) and the F16 rounding's ties included.
TEST_P(OpsAvx2Test, GeluTanhMulEqualsTheReferenceExactly) {
  const int64_t n = GetParam();
  std::vector<float> g = RandomNonZero(n, 7, 4.0f), u = RandomNonZero(n, 8), a(n), b(n);
  g[0] = -10.0f;
  if (n > 1) g[1] = 10.0f;
  if (n > 2) g[2] = -30.0f;
  if (n > 3) g[3] = 1.0f + 1.0f / 2048;  // halfway between two F16 values: rounds to even
  avx2::GeluTanhMul(g.data(), u.data(), n, a.data());
  ref::GeluTanhMul(g.data(), u.data(), n, b.data());
  for (int64_t i = 0; i < n; ++i) EXPECT_EQ(a[i], b[i]) << i << " gate " << g[i];
}

TEST_P(OpsAvx2Test, ExpShifted) {
  const int64_t n = GetParam();
  std::vector<float> x = RandomNonZero(n, 9, 20.0f), a(n), b(n);
  x[0] = -INFINITY;
  if (n > 1) x[1] = 5.0f;  // the shift itself: exactly 1
  avx2::ExpShifted(x.data(), n, 5.0f, 0.7f, a.data());
  ref::ExpShifted(x.data(), n, 5.0f, 0.7f, b.data());
  EXPECT_EQ(a[0], 0.0f);
  if (n > 1) {
    EXPECT_EQ(a[1], 1.0f);
  }
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(a[i], b[i], kExpTolerance * b[i] + 1e-37f) << i << " x " << x[i];
}

TEST_P(OpsAvx2Test, ApplyRopeNormalAndNeox) {
  const int head_dim = std::max(2, static_cast<int>(GetParam() / 2 * 2));
  for (int rope_dim : {head_dim, head_dim / 2 / 2 * 2}) {
    if (rope_dim < 2) continue;
    std::vector<float> cos(rope_dim / 2), sin(rope_dim / 2);
    ref::RopeCosSin(1234.0, rope_dim, 10000.0f, nullptr, cos.data(), sin.data());
    for (bool neox : {false, true}) {
      std::vector<float> a = RandomNonZero(3 * head_dim, 6), b = a;
      avx2::ApplyRope(a.data(), 3, head_dim, rope_dim, cos.data(), sin.data(), neox);
      ref::ApplyRope(b.data(), 3, head_dim, rope_dim, cos.data(), sin.data(), neox);
      for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], kRopeTolerance * (1 + std::fabs(b[i]))) << i;
    }
  }
}

TEST_P(OpsAvx2Test, AddScaled) {
  const int64_t n = GetParam();
  std::vector<float> acc = RandomNonZero(n, 9), v = RandomNonZero(n, 10), expected = acc, got = acc;
  std::vector<uint16_t> h(n);
  for (int64_t i = 0; i < n; ++i) h[i] = FloatToFp16(v[i]);
  avx2::AddScaledF32(got.data(), 0.3f, v.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], expected[i] + 0.3f * v[i], 1e-6f);
  got = acc;
  avx2::AddScaledF16(got.data(), 0.3f, h.data(), n);
  for (int64_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], expected[i] + 0.3f * Fp16ToFloat(h[i]), 1e-6f);
}

INSTANTIATE_TEST_SUITE_P(Lengths, OpsAvx2Test, ::testing::Values(1, 7, 8, 64, 100, 2048));

}  // namespace
}  // namespace tachyon
