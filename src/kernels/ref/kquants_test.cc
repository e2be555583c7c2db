#include "kernels/ref/kquants.h"

#include <gtest/gtest.h>

#include "kernels/kernels_test_util.h"

#include <cmath>
#include <random>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/fp16.h"

namespace tachyon {
namespace {

using testing_util::RandomNonZero;

TEST(KQuantsTest, Q4KScalePackingRoundTrips) {
  // Every 6-bit (scale, min) pair of every sub-block survives the 12-byte packing.
  std::vector<float> x(256);
  for (int j = 0; j < 8; ++j) {
    for (int l = 0; l < 32; ++l) x[32 * j + l] = (l - 8.0f) * (j + 1) * 0.01f;  // min -0.08*(j+1)
  }
  BlockQ4_K block;
  ref::QuantizeRowQ4_K(x.data(), &block, 256);
  float previous_min = -1;
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, mn;
    ref::UnpackQ4KScale(block.scales, j, &sc, &mn);
    EXPECT_GT(sc, 0);
    float min = Fp16ToFloat(block.dmin) * mn;
    EXPECT_GT(min, previous_min) << "mins grow with j";
    previous_min = min;
  }
}

// Relative error of the reconstruction stays within the format's resolution.
void ExpectRoundTrip(void (*quantize)(const float*, void*, int64_t), void (*dequantize)(const void*, float*, int64_t),
                     size_t block_bytes, float max_rel_rms) {
  const int64_t n = 4096;
  std::vector<float> x = RandomNonZero(n, 3, 0.02f), y(n);
  std::vector<uint8_t> q(n / 256 * block_bytes);
  quantize(x.data(), q.data(), n);
  dequantize(q.data(), y.data(), n);
  double err = 0, ref = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += (x[i] - y[i]) * (x[i] - y[i]);
    ref += x[i] * x[i];
  }
  EXPECT_LT(std::sqrt(err / ref), max_rel_rms);
}

TEST(KQuantsTest, Q4KRoundTrip) { ExpectRoundTrip(ref::QuantizeRowQ4_K, ref::DequantizeRowQ4_K, sizeof(BlockQ4_K), 0.12); }
TEST(KQuantsTest, Q6KRoundTrip) { ExpectRoundTrip(ref::QuantizeRowQ6_K, ref::DequantizeRowQ6_K, sizeof(BlockQ6_K), 0.03); }

// The integer dot products equal the float dot of the dequantized weights with
// the dequantized Q8_K activations (up to float summation order).
TEST(KQuantsTest, DotsEqualDequantizedDots) {
  const int64_t n = 1024;
  std::vector<float> w = RandomNonZero(n, 5, 0.02f), x = RandomNonZero(n, 6, 1.0f);
  std::vector<BlockQ8_K> xq(n / 256);
  ref::QuantizeActivationsQ8_K(x.data(), xq.data(), n);
  std::vector<float> xd(n);
  for (int64_t b = 0; b < n / 256; ++b) {
    for (int l = 0; l < 256; ++l) xd[256 * b + l] = xq[b].d * xq[b].qs[l];
    for (int g = 0; g < 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += xq[b].qs[16 * g + l];
      EXPECT_EQ(xq[b].bsums[g], sum);
    }
  }
  struct Case {
    void (*quantize)(const float*, void*, int64_t);
    void (*dequantize)(const void*, float*, int64_t);
    float (*ref_dot)(const void*, const void*, int64_t);
    size_t block_bytes;
  };
  for (Case c : {Case{ref::QuantizeRowQ4_K, ref::DequantizeRowQ4_K, ref::DotQ4_KQ8_K, sizeof(BlockQ4_K)},
                 Case{ref::QuantizeRowQ6_K, ref::DequantizeRowQ6_K, ref::DotQ6_KQ8_K, sizeof(BlockQ6_K)}}) {
    std::vector<uint8_t> wq(n / 256 * c.block_bytes);
    c.quantize(w.data(), wq.data(), n);
    std::vector<float> wd(n);
    c.dequantize(wq.data(), wd.data(), n);
    double expected = 0, scale = 0;
    for (int64_t i = 0; i < n; ++i) {
      expected += static_cast<double>(wd[i]) * xd[i];
      scale += std::fabs(wd[i] * xd[i]);
    }
    float reference = c.ref_dot(wq.data(), xq.data(), n);
    EXPECT_NEAR(reference, expected, 1e-5 * scale);
  }
}

}  // namespace
}  // namespace tachyon
