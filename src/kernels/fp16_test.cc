#include "kernels/fp16.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace tachyon {
namespace {

TEST(Fp16Test, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = Fp16ToFloat(static_cast<uint16_t>(h));
    bool is_nan = ((h >> 10) & 0x1f) == 31 && (h & 0x3ff) != 0;
    if (is_nan) {
      EXPECT_TRUE(std::isnan(f)) << h;
      EXPECT_TRUE(std::isnan(Fp16ToFloat(FloatToFp16(f)))) << h;
    } else {
      EXPECT_EQ(FloatToFp16(f), h) << "half bits " << h << " -> " << f;
    }
  }
}

TEST(Fp16Test, KnownValues) {
  EXPECT_EQ(FloatToFp16(1.0f), 0x3c00);
  EXPECT_EQ(FloatToFp16(-2.0f), 0xc000);
  EXPECT_EQ(FloatToFp16(65504.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(65520.0f), 0x7c00) << "halfway to 2^16 rounds to inf";
  EXPECT_EQ(FloatToFp16(65519.0f), 0x7bff);
  EXPECT_EQ(FloatToFp16(5.9604645e-8f), 0x0001) << "smallest subnormal";
  EXPECT_EQ(FloatToFp16(2.9802322e-8f), 0x0000) << "half of it rounds to even (zero)";
  EXPECT_EQ(FloatToFp16(1e-10f), 0x0000);
  EXPECT_EQ(FloatToFp16(-0.0f), 0x8000);
  EXPECT_EQ(Fp16ToFloat(0x3555), 0.333251953125f);
}

// GCC's _Float16 conversion is an independent implementation of IEEE rounding.
TEST(Fp16Test, MatchesCompilerConversionOnRandomFloats) {
#if defined(__FLT16_MAX__)
  std::mt19937 rng(1234);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 1000000; ++i) {
    float f = BitsToFloat(bits(rng));
    if (std::isnan(f)) continue;
    _Float16 h = static_cast<_Float16>(f);
    uint16_t expected;
    std::memcpy(&expected, &h, sizeof(expected));
    ASSERT_EQ(FloatToFp16(f), expected) << "float " << f;
  }
#else
  GTEST_SKIP() << "compiler has no _Float16";
#endif
}

TEST(Bf16Test, RoundsToNearestEven) {
  EXPECT_EQ(FloatToBf16(1.0f), 0x3f80);
  EXPECT_EQ(Bf16ToFloat(0x3f80), 1.0f);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1.0078125: ties to even (1.0).
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x3f808000)), 0x3f80);
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x3f818000)), 0x3f82);
  EXPECT_EQ(FloatToBf16(BitsToFloat(0x3f808001)), 0x3f81);
  EXPECT_TRUE(std::isnan(Bf16ToFloat(FloatToBf16(std::nanf("")))));
  for (uint32_t b = 0; b < 65536; ++b) {
    float f = Bf16ToFloat(static_cast<uint16_t>(b));
    if (!std::isnan(f)) {
      EXPECT_EQ(FloatToBf16(f), b);
    }
  }
}

}  // namespace
}  // namespace tachyon
