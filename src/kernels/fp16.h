// Scalar conversions between float32 and the 16-bit float formats of GGUF:
// IEEE half (F16) and bfloat16 (BF16), both rounding to nearest even.
#pragma once

#include <cstdint>
#include <cstring>

namespace tachyon {

inline uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof(u));
  return u;
}

inline float BitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof(f));
  return f;
}

inline float Fp16ToFloat(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exponent = (h >> 10) & 0x1f;
  uint32_t mantissa = h & 0x3ff;
  if (exponent == 0) {
    // Zero or subnormal: mantissa * 2^-24.
    float magnitude = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return BitsToFloat(sign | FloatBits(magnitude));
  }
  if (exponent == 31) return BitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  return BitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

inline uint16_t FloatToFp16(float f) {
  uint32_t x = FloatBits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t magnitude = x & 0x7fffffffu;
  if (magnitude >= 0x7f800000u) {  // inf or NaN (NaN stays NaN: quiet bit set)
    return static_cast<uint16_t>(sign | 0x7c00 |
                                 (magnitude > 0x7f800000u ? 0x200 | ((magnitude >> 13) & 0x3ff) : 0));
  }
  if (magnitude >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00);  // >= 65520: inf
  if (magnitude < 0x38800000u) {
    // Below 2^-14: the result is subnormal (or the smallest normal after rounding).
    // Adding 0.5f puts the value's 2^-24 units in the low mantissa bits, rounded to even.
    uint32_t units = FloatBits(BitsToFloat(magnitude) + 0.5f) - FloatBits(0.5f);
    return static_cast<uint16_t>(sign | units);
  }
  uint32_t odd = (magnitude >> 13) & 1;
  magnitude += 0xc8000fffu + odd;  // rebias exponent by -112 and round to nearest even
  return static_cast<uint16_t>(sign | (magnitude >> 13));
}

inline float Bf16ToFloat(uint16_t b) { return BitsToFloat(static_cast<uint32_t>(b) << 16); }

inline uint16_t FloatToBf16(float f) {
  uint32_t x = FloatBits(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((x + 0x7fff + ((x >> 16) & 1)) >> 16);
}

}  // namespace tachyon
