// Quantized block layouts, byte for byte as GGUF stores them (ggml-common.h).
// Each is static_assert'ed against the size the file format gives it.
#pragma once

#include <cstdint>

namespace tachyon {

inline constexpr int kQK8_0 = 32;
inline constexpr int kQK4_0 = 32;

// 32 weights: x[i] = d * qs[i].
struct BlockQ8_0 {
  uint16_t d;        // F16 scale
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0) == 2 + kQK8_0, "BlockQ8_0 must match GGUF's 34-byte block");

// 32 weights: low nibbles hold x[0..15], high nibbles x[16..31]; x[i] = d * (q - 8).
struct BlockQ4_0 {
  uint16_t d;            // F16 scale
  uint8_t qs[kQK4_0 / 2];
};
static_assert(sizeof(BlockQ4_0) == 2 + kQK4_0 / 2, "BlockQ4_0 must match GGUF's 18-byte block");

}  // namespace tachyon
