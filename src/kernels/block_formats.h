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

inline constexpr int kQK_K = 256;  // values per k-quant super-block

// 256 weights in 8 sub-blocks of 32: x = d * scale_j * q - dmin * min_j, with
// 6-bit scale_j and min_j packed in `scales` (see ref::UnpackQ4KScales).
struct BlockQ4_K {
  uint16_t d;     // F16 super-block scale of the scales
  uint16_t dmin;  // F16 super-block scale of the mins
  uint8_t scales[12];
  uint8_t qs[kQK_K / 2];  // 4-bit quants, 64 values per 32 bytes (low nibbles, then high)
};
static_assert(sizeof(BlockQ4_K) == 144, "BlockQ4_K must match GGUF's 144-byte block");

// 256 weights in 16 groups of 16: x = d * scales_g * (q - 32), q 6-bit.
struct BlockQ6_K {
  uint8_t ql[kQK_K / 2];      // low 4 bits
  uint8_t qh[kQK_K / 4];      // high 2 bits
  int8_t scales[kQK_K / 16];  // 8-bit group scales
  uint16_t d;                 // F16 super-block scale
};
static_assert(sizeof(BlockQ6_K) == 210, "BlockQ6_K must match GGUF's 210-byte block");

// Activations for the k-quant dot products: 256 int8 with a float scale and
// the sums of each group of 16 (the mins and the -32 offset need them).
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "BlockQ8_K must match ggml's 292-byte block");

}  // namespace tachyon
