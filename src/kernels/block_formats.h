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

// 32 weights: low nibbles hold x[0..15], high nibbles x[16..31]; x[i] = d * q + m.
struct BlockQ4_1 {
  uint16_t d, m;  // F16 scale and offset
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ4_1) == 20, "BlockQ4_1 must match GGUF's 20-byte block");

// 32 weights of 5 bits: the nibbles as Q4_0, bit i of qh the fifth bit of x[i];
// x[i] = d * (q - 16).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];  // a little-endian uint32
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_0) == 22, "BlockQ5_0 must match GGUF's 22-byte block");

// As Q5_0 with an offset: x[i] = d * q + m, q in 0..31.
struct BlockQ5_1 {
  uint16_t d, m;
  uint8_t qh[4];
  uint8_t qs[16];
};
static_assert(sizeof(BlockQ5_1) == 24, "BlockQ5_1 must match GGUF's 24-byte block");

// 32 weights: x[i] = d * kIQ4NLValues[nibble], nibbles laid out as Q4_0's.
struct BlockIQ4_NL {
  uint16_t d;
  uint8_t qs[16];
};
static_assert(sizeof(BlockIQ4_NL) == 18, "BlockIQ4_NL must match GGUF's 18-byte block");

// Activations for the 32-block formats with an offset (Q4_1, Q5_1): a Q8_0 block
// and the sum of its quants, which the offset term needs (ggml's Q8_1 keeps
// d * sum as F16; the integer sum here is exact). Not a file format.
struct BlockQ8_0S {
  uint16_t d;
  int16_t sum;
  int8_t qs[kQK8_0];
};
static_assert(sizeof(BlockQ8_0S) == 36, "BlockQ8_0S: 36 bytes");

// The 16 levels of IQ4_NL and IQ4_XS (ggml-common.h's kvalues_iq4nl).
inline constexpr int8_t kIQ4NLValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};

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

// 256 weights in 16 groups of 16: x = d * (scales[g] & 15) * q - dmin * (scales[g] >> 4),
// q 2-bit. Element 128 h + 32 j + l is bits 2j..2j+1 of qs[32 h + l].
struct BlockQ2_K {
  uint8_t scales[kQK_K / 16];
  uint8_t qs[kQK_K / 4];
  uint16_t d, dmin;
};
static_assert(sizeof(BlockQ2_K) == 84, "BlockQ2_K must match GGUF's 84-byte block");

// 256 weights in 16 groups of 16: x = d * (s_g - 32) * q, q in -4..3: its low two
// bits as Q2_K lays them out, its third (set: +0, clear: -4) bit 4 h + j of hmask[l].
// The 16 6-bit s_g are packed in 12 bytes (ref::UnpackQ3KScales).
struct BlockQ3_K {
  uint8_t hmask[kQK_K / 8];
  uint8_t qs[kQK_K / 4];
  uint8_t scales[12];
  uint16_t d;
};
static_assert(sizeof(BlockQ3_K) == 110, "BlockQ3_K must match GGUF's 110-byte block");

// As Q4_K with a fifth bit: bit 2 j (low nibbles) or 2 j + 1 (high) of qh[l] for
// the 64 values of qs[32 j + l].
struct BlockQ5_K {
  uint16_t d, dmin;
  uint8_t scales[12];
  uint8_t qh[kQK_K / 8];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockQ5_K) == 176, "BlockQ5_K must match GGUF's 176-byte block");

// 256 weights in 8 groups of 32: x = d * (ls_g - 32) * kIQ4NLValues[nibble], ls_g 6-bit
// (low 4 bits in scales_l, high 2 in scales_h); each group's nibbles as IQ4_NL's.
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;
  uint8_t scales_l[kQK_K / 64];
  uint8_t qs[kQK_K / 2];
};
static_assert(sizeof(BlockIQ4_XS) == 136, "BlockIQ4_XS must match GGUF's 136-byte block");

// Activations for the k-quant dot products: 256 int8 with a float scale and
// the sums of each group of 16 (the mins and the -32 offset need them).
struct BlockQ8_K {
  float d;
  int8_t qs[kQK_K];
  int16_t bsums[kQK_K / 16];
};
static_assert(sizeof(BlockQ8_K) == 292, "BlockQ8_K must match ggml's 292-byte block");

}  // namespace tachyon
