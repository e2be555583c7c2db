// Scalar reference for the formats computed through ref::Unpack* (unpack.h):
// Q4_1, Q5_0, Q5_1 and IQ4_NL (blocks of 32, dotted with Q8_0 activations) and
// Q2_K, Q3_K, Q5_K and IQ4_XS (super-blocks of 256, with Q8_K activations).
// Dequantization computes each value with the float operations, in the order,
// of the format's definition (ggml's dequantize_row_*), so a file's weights read
// back bit for bit as llama.cpp reads them. The quantizers are ours: a fit per
// group (least squares over the levels), not llama.cpp's search, so the bytes
// differ from llama-quantize's while the format is the same.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace tachyon::ref {

// The types below, each: n a multiple of its block size.
bool IsUnpackedType(GgmlType type);
void DequantizeRowUnpacked(GgmlType type, const void* in, float* y, int64_t n);
void QuantizeRowUnpacked(GgmlType type, const float* x, void* out, int64_t n);
// The activations a type's dot takes (ActivationsFor): Q8_0 for Q5_0 and IQ4_NL,
// Q8_0 with block sums (BlockQ8_0S) for Q4_1 and Q5_1, Q8_K for the super-blocks.
enum class UnpackedActivations { kQ8_0, kQ8_0S, kQ8_K };
UnpackedActivations ActivationsFor(GgmlType type);
// x [n] -> n / 32 BlockQ8_0S: the Q8_0 quants of QuantizeActivationsQ8_0, and their sums.
void QuantizeActivationsQ8_0S(const float* x, void* out, int64_t n);
// w: a row of `type`; x: its activations in ActivationsFor(type).
float DotUnpacked(GgmlType type, const void* w, const void* x, int64_t n);

}  // namespace tachyon::ref
