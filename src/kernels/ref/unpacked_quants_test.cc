#include "kernels/ref/unpacked_quants.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/kernels_test_util.h"
#include "kernels/matmul.h"
#include "kernels/ref/kquants.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quantize.h"
#include "kernels/x86/unpacked_avx2.h"

namespace tachyon {
namespace {

using testing_util::RandomNonZero;

struct TypeCase {
  GgmlType type;
  std::vector<int> half_offsets;  // where each block keeps an F16 (its scale, offset or min)
  uint64_t llama_cpp_hash;        // FNV-1a of the floats llama.cpp's dequantizer gives (below)
  double max_rel_rms;             // round-trip error bound of our quantizer, Gaussian weights
};

const std::vector<TypeCase>& Cases() {
  // The hashes: ggml_get_type_traits(type)->to_float of llama.cpp c392e5094 (ggml-base)
  // on the 8 blocks that RandomBlocks() below makes, hashed as FloatHash() hashes.
  static const std::vector<TypeCase> cases = {
      {GgmlType::kQ4_1, {0, 2}, 0xabca26d0c9425cb4ull, 0.11},
      {GgmlType::kQ5_0, {0}, 0x717c0b9f88792a27ull, 0.06},
      {GgmlType::kQ5_1, {0, 2}, 0xf3ad4ea6f15270fcull, 0.055},
      {GgmlType::kIQ4_NL, {0}, 0x7e3d62c856294fb1ull, 0.11},
      {GgmlType::kQ2_K, {80, 82}, 0x740940ef50cf869cull, 0.45},
      {GgmlType::kQ3_K, {108}, 0x164f18e71b636372ull, 0.22},
      {GgmlType::kQ5_K, {0, 2}, 0xb78801994e644d5eull, 0.06},
      {GgmlType::kIQ4_XS, {0}, 0xa44301459ee674bdull, 0.11},
  };
  return cases;
}

uint64_t SplitMix(uint64_t* s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Random bytes, with each block's F16 fields set to finite values of either sign in
// [2^-4, 1): every other bit pattern of the block is a valid block.
std::vector<uint8_t> RandomBlocks(const TypeCase& c, int blocks) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(c.type);
  uint64_t state = 42 + static_cast<uint32_t>(c.type);
  std::vector<uint8_t> bytes(traits.type_size * blocks);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(SplitMix(&state));
  for (int b = 0; b < blocks; ++b) {
    for (int offset : c.half_offsets) {
      const uint64_t r = SplitMix(&state);
      const uint16_t h = static_cast<uint16_t>((0x2C00 + r % 0x1000) | (((r >> 20) & 1) << 15));
      std::memcpy(bytes.data() + b * traits.type_size + offset, &h, sizeof(h));
    }
  }
  return bytes;
}

uint64_t FloatHash(const std::vector<float>& y) {
  uint64_t h = 1469598103934665603ull;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(y.data());
  for (size_t i = 0; i < y.size() * sizeof(float); ++i) {
    h ^= p[i];
    h *= 1099511628211ull;
  }
  return h;
}

class UnpackedQuantsTest : public ::testing::TestWithParam<TypeCase> {};

// Dequantization is the format's definition, bit for bit as llama.cpp reads the same bytes.
TEST_P(UnpackedQuantsTest, DequantizesBitForBitAsLlamaCpp) {
  const TypeCase& c = GetParam();
  const int64_t n = GetGgmlTypeTraits(c.type).block_size * 8;
  const std::vector<uint8_t> bytes = RandomBlocks(c, 8);
  std::vector<float> y(n);
  ref::DequantizeRow(c.type, bytes.data(), y.data(), n);
  EXPECT_EQ(FloatHash(y), c.llama_cpp_hash) << GgmlTypeName(c.type) << " y[0] = " << y[0];
}

TEST_P(UnpackedQuantsTest, QuantizeThenDequantizeStaysClose) {
  const TypeCase& c = GetParam();
  const int64_t n = 4096;
  const std::vector<float> x = RandomNonZero(n, 3, 0.02f);
  std::vector<uint8_t> q(*GgmlRowBytes(c.type, n));
  std::vector<float> y(n);
  ref::QuantizeRow(c.type, x.data(), q.data(), n);
  ref::DequantizeRow(c.type, q.data(), y.data(), n);
  double err = 0, norm = 0;
  for (int64_t i = 0; i < n; ++i) {
    err += double(x[i] - y[i]) * (x[i] - y[i]);
    norm += double(x[i]) * x[i];
  }
  EXPECT_LT(std::sqrt(err / norm), c.max_rel_rms) << GgmlTypeName(c.type);
  // The same values requantized give the same bytes back (the fit is deterministic and stable).
  std::vector<uint8_t> again(q.size());
  ref::QuantizeRow(c.type, x.data(), again.data(), n);
  EXPECT_EQ(q, again);
}

// Constant and all-zero blocks: no NaN, and zero stays zero.
TEST_P(UnpackedQuantsTest, DegenerateBlocksAreFinite) {
  const TypeCase& c = GetParam();
  const int64_t n = 512;
  for (float value : {0.0f, 0.5f, -3.0f}) {
    std::vector<float> x(n, value), y(n);
    std::vector<uint8_t> q(*GgmlRowBytes(c.type, n));
    ref::QuantizeRow(c.type, x.data(), q.data(), n);
    ref::DequantizeRow(c.type, q.data(), y.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      ASSERT_TRUE(std::isfinite(y[i])) << GgmlTypeName(c.type) << " " << value;
      EXPECT_NEAR(y[i], value, std::fabs(value) * 0.3 + 1e-6) << GgmlTypeName(c.type) << " " << value;
    }
  }
}

// The activations as the dot products take them, and those values as floats.
std::vector<uint8_t> Activations(GgmlType weight_type, const std::vector<float>& x, std::vector<float>* as_floats) {
  const int64_t n = static_cast<int64_t>(x.size());
  const bool k = GetGgmlTypeTraits(weight_type).block_size == 256;
  as_floats->resize(n);
  if (ref::ActivationsFor(weight_type) == ref::UnpackedActivations::kQ8_0S) {
    std::vector<uint8_t> out(n / 32 * sizeof(BlockQ8_0S));
    ref::QuantizeActivationsQ8_0S(x.data(), out.data(), n);
    const BlockQ8_0S* b = reinterpret_cast<const BlockQ8_0S*>(out.data());
    for (int64_t i = 0; i < n; ++i) (*as_floats)[i] = Fp16ToFloat(b[i / 32].d) * b[i / 32].qs[i % 32];
    for (int64_t j = 0; j < n / 32; ++j) {
      int sum = 0;
      for (int i = 0; i < 32; ++i) sum += b[j].qs[i];
      EXPECT_EQ(sum, b[j].sum);
    }
    return out;
  }
  std::vector<uint8_t> out(*GgmlRowBytes(k ? GgmlType::kQ8_K : GgmlType::kQ8_0, n));
  if (k) {
    ref::QuantizeActivationsQ8_K(x.data(), out.data(), n);
    const BlockQ8_K* b = reinterpret_cast<const BlockQ8_K*>(out.data());
    for (int64_t i = 0; i < n; ++i) (*as_floats)[i] = b[i / 256].d * b[i / 256].qs[i % 256];
  } else {
    ref::QuantizeActivationsQ8_0(x.data(), out.data(), n);
    ref::DequantizeRowQ8_0(out.data(), as_floats->data(), n);
  }
  return out;
}

// The integer dot equals the float dot of the dequantized weights and activations;
// the AVX2 kernels equal the reference, and their 4-row form the 1-row one bit for bit.
TEST_P(UnpackedQuantsTest, DotProductsAgree) {
  const TypeCase& c = GetParam();
  for (int64_t n : {256, 1024, 4096}) {
    const std::vector<float> w = RandomNonZero(n, 5, 0.05f);
    std::vector<uint8_t> wq(*GgmlRowBytes(c.type, n));
    ref::QuantizeRow(c.type, w.data(), wq.data(), n);
    std::vector<float> wf(n);
    ref::DequantizeRow(c.type, wq.data(), wf.data(), n);
    std::vector<std::vector<uint8_t>> xq(4);
    std::vector<float> xf;
    double expected[4];
    float got_ref[4];
    for (int k = 0; k < 4; ++k) {
      const std::vector<float> x = RandomNonZero(n, 11 + k, 1.0f);
      xq[k] = Activations(c.type, x, &xf);
      expected[k] = 0;
      for (int64_t i = 0; i < n; ++i) expected[k] += double(wf[i]) * xf[i];
      got_ref[k] = ref::DotUnpacked(c.type, wq.data(), xq[k].data(), n);
      EXPECT_NEAR(got_ref[k], expected[k], 1e-4 * (std::fabs(expected[k]) + std::sqrt(double(n))))
          << GgmlTypeName(c.type) << " n=" << n;
    }
    // Q5_0 has a packed form (kernels/packed_matrix.h) and no unpacked AVX2 kernel.
    if (!CpuHasAvx2() || c.type == GgmlType::kQ5_0) continue;
    const avx2::UnpackedDotFn dot = avx2::FindUnpackedDot(c.type);
    const avx2::UnpackedDot4Fn dot4 = avx2::FindUnpackedDot4(c.type);
    ASSERT_NE(dot, nullptr);
    ASSERT_NE(dot4, nullptr);
    std::vector<uint8_t> rows;
    for (const auto& r : xq) rows.insert(rows.end(), r.begin(), r.end());
    float four[4];
    dot4(wq.data(), rows.data(), static_cast<int64_t>(xq[0].size()), n, four);
    for (int k = 0; k < 4; ++k) {
      const float one = dot(wq.data(), xq[k].data(), n);
      EXPECT_NEAR(one, got_ref[k], 1e-5 * (std::fabs(got_ref[k]) + 1)) << GgmlTypeName(c.type) << " n=" << n;
      EXPECT_EQ(std::memcmp(&one, &four[k], sizeof(float)), 0) << GgmlTypeName(c.type) << " n=" << n << " k=" << k;
    }
  }
}

// The AVX2 super-block unpackers give the reference's integers, byte for byte.
TEST_P(UnpackedQuantsTest, Avx2UnpackIsTheReferences) {
  const TypeCase& c = GetParam();
  if (ref::FindUnpack256(c.type) == nullptr) GTEST_SKIP() << "a 32-block type, unpacked in registers";
  if (!CpuHasAvx2()) GTEST_SKIP() << "this CPU has no AVX2/FMA/F16C";
  if (avx2::FindUnpack256Avx2(c.type) == nullptr) GTEST_SKIP() << "a kernel of its own, checked by DotProductsAgree";
  const std::vector<uint8_t> bytes = RandomBlocks(c, 8);
  const size_t block_bytes = GetGgmlTypeTraits(c.type).type_size;
  for (int b = 0; b < 8; ++b) {
    ref::Unpacked256 want, got;
    std::memset(&want, 0, sizeof(want));
    std::memset(&got, 0, sizeof(got));
    ref::FindUnpack256(c.type)(bytes.data() + b * block_bytes, &want);
    avx2::FindUnpack256Avx2(c.type)(bytes.data() + b * block_bytes, &got);
    EXPECT_EQ(std::memcmp(want.q, got.q, sizeof(want.q)), 0) << GgmlTypeName(c.type) << " block " << b;
    EXPECT_EQ(std::memcmp(want.scale, got.scale, sizeof(want.scale)), 0) << GgmlTypeName(c.type);
    EXPECT_EQ(std::memcmp(want.min, got.min, sizeof(want.min)), 0) << GgmlTypeName(c.type);
    EXPECT_EQ(want.d, got.d);
    EXPECT_EQ(want.dmin, got.dmin);
    EXPECT_EQ(want.has_min, got.has_min);
  }
}

// Through MatMul, batch sizes on both sides of the 4-token kernels: the reference path
// and the AVX2 path agree, and both match the dequantized weights.
TEST_P(UnpackedQuantsTest, MatMulOnEitherPathMatchesTheDequantizedWeights) {
  const TypeCase& c = GetParam();
  const int64_t rows = 24, cols = 512;
  const std::vector<float> w = RandomNonZero(rows * cols, 21, 0.05f);
  const uint64_t row_bytes = *GgmlRowBytes(c.type, cols);
  std::vector<uint8_t> wq(rows * row_bytes);
  std::vector<float> wf(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    ref::QuantizeRow(c.type, w.data() + r * cols, wq.data() + r * row_bytes, cols);
    ref::DequantizeRow(c.type, wq.data() + r * row_bytes, wf.data() + r * cols, cols);
  }
  ASSERT_TRUE(IsMatMulType(c.type));
  const WeightMatrix matrix{c.type, wq.data(), rows, cols};
  ThreadPool pool(2);
  for (int64_t tokens : {1, 5, 17}) {
    const std::vector<float> x = RandomNonZero(tokens * cols, 31, 1.0f);
    std::vector<float> y_auto(tokens * rows), y_ref(tokens * rows);
    MatMul(matrix, x.data(), tokens, y_auto.data(), pool, KernelPath::kAuto);
    MatMul(matrix, x.data(), tokens, y_ref.data(), pool, KernelPath::kReference);
    for (int64_t t = 0; t < tokens; ++t) {
      for (int64_t r = 0; r < rows; ++r) {
        double exact = 0, norm = 0;
        for (int64_t i = 0; i < cols; ++i) {
          exact += double(wf[r * cols + i]) * x[t * cols + i];
          norm += std::fabs(double(wf[r * cols + i]) * x[t * cols + i]);
        }
        const float got = y_ref[t * rows + r];
        EXPECT_NEAR(got, exact, 0.02 * norm + 1e-4) << GgmlTypeName(c.type);  // activations are 8-bit
        EXPECT_NEAR(y_auto[t * rows + r], got, 1e-5 * (std::fabs(got) + 1)) << GgmlTypeName(c.type);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, UnpackedQuantsTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<TypeCase>& info) {
                           return std::string(GgmlTypeName(info.param.type));
                         });

}  // namespace
}  // namespace tachyon
