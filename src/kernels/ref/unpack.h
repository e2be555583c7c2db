// Quantized blocks as plain integers, for the dot products of the formats that
// are not computed on their packed bytes directly (Q4_1, Q5_0, Q5_1, IQ4_NL;
// Q2_K, Q3_K, Q5_K, IQ4_XS): a block is unpacked once, then its integers meet
// the int8 activations (Q8_0 or Q8_K) as every other format's do. The scalar
// unpackers here are the specification; the AVX2 kernels unpack the same way.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace tachyon::ref {

// 32 weights: x[i] = d * q[i] + m.
struct Unpacked32 {
  int8_t q[32];
  float d;
  float m;  // 0 for the formats without an offset
};

// 256 weights in 16 groups of 16: x[i] = d * scale[g] * q[i] - dmin * min[g], g = i / 16.
struct Unpacked256 {
  alignas(32) int8_t q[256];
  alignas(32) int16_t scale[16];
  alignas(32) int16_t min[16];  // all 0 for the formats without mins
  float d;
  float dmin;
  bool has_min;
};

using Unpack32Fn = void (*)(const void* block, Unpacked32* out);
using Unpack256Fn = void (*)(const void* block, Unpacked256* out);

void UnpackQ4_1(const void* block, Unpacked32* out);
void UnpackQ5_0(const void* block, Unpacked32* out);
void UnpackQ5_1(const void* block, Unpacked32* out);
void UnpackIQ4_NL(const void* block, Unpacked32* out);
void UnpackQ2_K(const void* block, Unpacked256* out);
void UnpackQ3_K(const void* block, Unpacked256* out);
void UnpackQ5_K(const void* block, Unpacked256* out);
void UnpackIQ4_XS(const void* block, Unpacked256* out);

// The unpacker of a type, or null when it has none (the types with kernels of their own).
Unpack32Fn FindUnpack32(GgmlType type);
Unpack256Fn FindUnpack256(GgmlType type);

// The 16 6-bit group scales of a Q3_K block (0..63; the value is s - 32).
void UnpackQ3KScales(const uint8_t* packed, uint8_t* scales);

}  // namespace tachyon::ref
