#include "kernels/ref/quantize.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "gguf/gguf_file.h"
#include "kernels/block_formats.h"
#include "kernels/fp16.h"

namespace tachyon {
namespace {

std::vector<float> RandomRow(int64_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> row(n);
  for (float& v : row) v = normal(rng);
  return row;
}

// Per-block error bound: `steps` quantization steps of amax / levels.
void ExpectWithinSteps(GgmlType type, int levels, float steps) {
  const int64_t n = 4096;
  std::vector<float> x = RandomRow(n, 42, 0.02f);
  std::vector<uint8_t> q(*GgmlRowBytes(type, n));
  std::vector<float> y(n);
  ref::QuantizeRow(type, x.data(), q.data(), n);
  ref::DequantizeRow(type, q.data(), y.data(), n);
  for (int64_t b = 0; b < n / 32; ++b) {
    float amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    float step = amax / levels;
    for (int i = 0; i < 32; ++i) {
      // fp16 scale rounding adds up to 2^-11 relative error on top of half a step.
      EXPECT_NEAR(y[b * 32 + i], x[b * 32 + i], steps * step + amax * 1e-3f)
          << GgmlTypeName(type) << " block " << b << " elem " << i;
    }
  }
}

TEST(QuantizeRefTest, Q8_0ErrorWithinHalfStep) { ExpectWithinSteps(GgmlType::kQ8_0, 127, 0.5f); }
// Q4_0 maps the largest magnitude to -8 steps; the other sign reaches only +7,
// so values near +amax there clip by up to one step.
TEST(QuantizeRefTest, Q4_0ErrorWithinOneStep) { ExpectWithinSteps(GgmlType::kQ4_0, 8, 1.0f); }

TEST(QuantizeRefTest, Q4_0KeepsTheSignOfTheLargestValue) {
  std::vector<float> x(32, 0.1f);
  x[5] = -1.0f;  // largest magnitude, negative: d = max / -8 > 0 and x[5] -> q = 0
  BlockQ4_0 block;
  ref::QuantizeRowQ4_0(x.data(), &block, 32);
  EXPECT_FLOAT_EQ(Fp16ToFloat(block.d), 0.125f);
  EXPECT_EQ(block.qs[5] & 0x0f, 0);
  std::vector<float> y(32);
  ref::DequantizeRowQ4_0(&block, y.data(), 32);
  EXPECT_FLOAT_EQ(y[5], -1.0f);
  EXPECT_FLOAT_EQ(y[0], 0.125f);
}

TEST(QuantizeRefTest, ZeroBlockHasZeroScale) {
  std::vector<float> x(32, 0.0f);
  BlockQ8_0 block;
  ref::QuantizeRowQ8_0(x.data(), &block, 32);
  EXPECT_EQ(block.d, 0);
  for (int8_t q : block.qs) EXPECT_EQ(q, 0);
}

TEST(QuantizeRefTest, Fp16AndBf16RowsRoundTrip) {
  std::vector<float> x = RandomRow(256, 7, 1.0f);
  for (GgmlType type : {GgmlType::kF16, GgmlType::kBF16, GgmlType::kF32}) {
    std::vector<uint8_t> q(*GgmlRowBytes(type, 256));
    std::vector<float> y(256);
    ref::QuantizeRow(type, x.data(), q.data(), 256);
    ref::DequantizeRow(type, q.data(), y.data(), 256);
    float tolerance = type == GgmlType::kF32 ? 0.0f : type == GgmlType::kF16 ? 1e-3f : 1e-2f;
    for (int i = 0; i < 256; ++i) {
      EXPECT_NEAR(y[i], x[i], std::fabs(x[i]) * tolerance) << GgmlTypeName(type);
    }
  }
}

// llama-quantize --pure turned llama-tiny-f32.gguf into the Q8_0 and Q4_0
// fixtures with its reference quantizers; ours must give the same bytes.
TEST(QuantizeRefTest, ByteExactWithLlamaCppFixtures) {
  const char* env = std::getenv("TACHYON_SHARED_DIR");
  std::string dir = std::string(env ? env : TACHYON_SHARED_DIR) + "/fixtures/models";
  if (!std::filesystem::exists(dir + "/llama-tiny-f32.gguf")) {
    GTEST_SKIP() << dir << "/llama-tiny-f32.gguf is absent (needs ../shared)";
  }
  StatusOr<GgufFile> f32 = GgufFile::Open(dir + "/llama-tiny-f32.gguf");
  ASSERT_TRUE(f32.ok()) << f32.status().ToString();
  for (auto [file, type] : {std::pair{"llama-tiny-q8_0.gguf", GgmlType::kQ8_0},
                            std::pair{"llama-tiny-q4_0.gguf", GgmlType::kQ4_0}}) {
    StatusOr<GgufFile> quant = GgufFile::Open(dir + "/" + file);
    ASSERT_TRUE(quant.ok()) << quant.status().ToString();
    int num_checked = 0;
    for (const GgufTensorInfo& src : f32->tensors()) {
      const GgufTensorInfo* dst = quant->FindTensor(src.name);
      ASSERT_NE(dst, nullptr) << src.name;
      if (dst->type != type) continue;
      int64_t ne0 = src.shape[0];
      int64_t num_rows = src.num_elements() / ne0;
      std::vector<uint8_t> ours(*GgmlRowBytes(type, ne0));
      for (int64_t r = 0; r < num_rows; ++r) {
        ref::QuantizeRow(type, reinterpret_cast<const float*>(src.data) + r * ne0, ours.data(), ne0);
        ASSERT_EQ(std::memcmp(ours.data(), dst->data + r * ours.size(), ours.size()), 0)
            << file << " " << src.name << " row " << r;
      }
      ++num_checked;
    }
    EXPECT_EQ(num_checked, 2 + 4 * 7) << file << ": every 2-D weight is compared";
  }
}

}  // namespace
}  // namespace tachyon
