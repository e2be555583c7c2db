#include "kernels/ref/ops.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

namespace tachyon {
namespace {

TEST(RefOpsTest, RmsNormHasUnitRms) {
  std::vector<float> x = {1, -2, 3, -4}, w = {1, 1, 1, 2}, out(4);
  ref::RmsNorm(x.data(), w.data(), 4, 0.0f, out.data());
  float rms = std::sqrt((1 + 4 + 9 + 16) / 4.0f);
  EXPECT_FLOAT_EQ(out[0], 1 / rms);
  EXPECT_FLOAT_EQ(out[3], -8 / rms);
}

TEST(RefOpsTest, LayerNormCentersScalesAndShifts) {
  std::vector<float> x = {1, 2, 3, 6}, w = {1, 1, 2, 1}, b = {0, 0, 0, 10}, out(4);
  ref::LayerNorm(x.data(), w.data(), b.data(), 4, 0.0f, out.data());
  // mean 3, population variance (4 + 1 + 0 + 9) / 4 = 3.5
  const float sd = std::sqrt(3.5f);
  EXPECT_FLOAT_EQ(out[0], -2 / sd);
  EXPECT_FLOAT_EQ(out[1], -1 / sd);
  EXPECT_FLOAT_EQ(out[2], 0.0f);
  EXPECT_FLOAT_EQ(out[3], 3 / sd + 10);
}

TEST(RefOpsTest, GeluIsExactErfForm) {
  std::vector<float> x = {-3, -1, 0, 0.5f, 2}, out(5);
  ref::Gelu(x.data(), 5, out.data());
  // Values of x * Phi(x) from the standard normal CDF.
  EXPECT_NEAR(out[0], -3 * 0.0013498980, 1e-7);
  EXPECT_NEAR(out[1], -1 * 0.1586552539, 1e-7);
  EXPECT_EQ(out[2], 0.0f);
  EXPECT_NEAR(out[3], 0.5 * 0.6914624613, 1e-7);
  EXPECT_NEAR(out[4], 2 * 0.9772498681, 1e-6);
}

TEST(RefOpsTest, RopeRotatesPairsByPositionAngle) {
  // One head of 4 dims, base 10000: pair 0 rotates by pos, pair 1 by pos / 100.
  std::vector<float> x = {1, 0, 1, 0};
  ref::Rope(x.data(), 1, 4, 4, 3, 10000.0f, /*neox=*/false, nullptr);
  EXPECT_NEAR(x[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(x[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(x[2], std::cos(0.03), 1e-6);
  EXPECT_NEAR(x[3], std::sin(0.03), 1e-6);
  // NeoX pairs dimension i with i + head_dim / 2.
  std::vector<float> y = {1, 1, 0, 0};
  ref::Rope(y.data(), 1, 4, 4, 3, 10000.0f, /*neox=*/true, nullptr);
  EXPECT_NEAR(y[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(y[2], std::sin(3.0), 1e-6);
  EXPECT_NEAR(y[1], std::cos(0.03), 1e-6);
  EXPECT_NEAR(y[3], std::sin(0.03), 1e-6);
  // Frequency factors divide the angle (Llama 3 scaling).
  std::vector<float> z = {1, 0, 1, 0}, factors = {1.0f, 2.0f};
  ref::Rope(z.data(), 1, 4, 4, 3, 10000.0f, false, factors.data());
  EXPECT_NEAR(z[3], std::sin(0.015), 1e-6);
  // Position 0 is the identity.
  std::vector<float> p = {0.3f, -0.7f, 0.1f, 0.9f}, q = p;
  ref::Rope(q.data(), 1, 4, 4, 0, 10000.0f, false, nullptr);
  EXPECT_EQ(p, q);
}

TEST(RefOpsTest, SoftmaxSumsToOneAndIsShiftInvariant) {
  std::vector<float> a = {1000, 1001, 1002}, b = {0, 1, 2};
  ref::Softmax(a.data(), 3);
  ref::Softmax(b.data(), 3);
  EXPECT_NEAR(a[0] + a[1] + a[2], 1.0f, 1e-6);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(RefOpsTest, SiluMul) {
  std::vector<float> g = {0, 1, -1}, u = {2, 2, 2}, out(3);
  ref::SiluMul(g.data(), u.data(), 3, out.data());
  EXPECT_FLOAT_EQ(out[0], 0);
  EXPECT_NEAR(out[1], 2 / (1 + std::exp(-1.0f)), 1e-6);
  EXPECT_NEAR(out[2], -2 / (1 + std::exp(1.0f)), 1e-6);
}

TEST(RefOpsTest, ActivationQuantizationRoundsTiesToEven) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;  // scale 1: values are their own quanta
  x[1] = 2.5f;
  x[2] = -3.5f;
  x[3] = 1.5f;
  uint8_t block[34];
  ref::QuantizeActivationsQ8_0(x.data(), block, 32);
  const int8_t* qs = reinterpret_cast<const int8_t*>(block + 2);
  EXPECT_EQ(qs[0], 127);
  EXPECT_EQ(qs[1], 2);
  EXPECT_EQ(qs[2], -4);
  EXPECT_EQ(qs[3], 2);
}

// The tanh GELU of Gemma's GeGLU (through its F16 table) against the formula in
// double: within the F16 rounding of input and output (a few parts in 2^11).
TEST(RefOpsTest, GeluTanhMulFollowsTheFormulaWithinF16Rounding) {
  std::vector<float> gate, up;
  for (float x = -12.0f; x <= 12.0f; x += 0.01f) {
    gate.push_back(x);
    up.push_back(1.0f);
  }
  std::vector<float> out(gate.size());
  ref::GeluTanhMul(gate.data(), up.data(), static_cast<int64_t>(gate.size()), out.data());
  for (size_t i = 0; i < gate.size(); ++i) {
    const double x = gate[i];
    const double expected = 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)));
    EXPECT_NEAR(out[i], expected, 2e-3 * (std::fabs(expected) + std::fabs(x)) + 1e-6) << "x " << x;
  }
  float x = 3.0f, y = 0;
  const float two = 2.0f;
  ref::GeluTanhMul(&x, &two, 1, &y);
  EXPECT_NEAR(y, 2 * 2.99636, 1e-2) << "the up factor multiplies";
}

TEST(RefOpsTest, SoftCapBoundsAndKeepsSmallValues) {
  std::vector<float> x = {0.0f, 0.01f, -0.01f, 5.0f, -1000.0f, 1000.0f};
  ref::SoftCap(x.data(), static_cast<int64_t>(x.size()), 2.0f);
  EXPECT_EQ(x[0], 0.0f);
  EXPECT_NEAR(x[1], 0.01f, 1e-6);
  EXPECT_NEAR(x[2], -0.01f, 1e-6);
  EXPECT_NEAR(x[3], 2.0 * std::tanh(2.5), 1e-6);
  EXPECT_EQ(x[4], -2.0f);
  EXPECT_EQ(x[5], 2.0f);
}

}  // namespace
}  // namespace tachyon
