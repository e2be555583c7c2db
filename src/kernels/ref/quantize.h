// Scalar reference quantization: float32 rows to GGUF tensor types and back.
// This is the specification the SIMD kernels are tested against.
#pragma once

#include <cstdint>

#include "base/status.h"
#include "gguf/ggml_type.h"

namespace tachyon::ref {

// n must be a multiple of 32 for the block types.
void QuantizeRowQ8_0(const float* x, void* out, int64_t n);
void DequantizeRowQ8_0(const void* in, float* y, int64_t n);
void QuantizeRowQ4_0(const float* x, void* out, int64_t n);
void DequantizeRowQ4_0(const void* in, float* y, int64_t n);

// True for the types QuantizeRow / DequantizeRow handle: F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K,
// and those of unpacked_quants.h (Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q5_K, IQ4_XS).
bool CanQuantizeTo(GgmlType type);

// Writes n floats as `type` into out (GgmlRowBytes(type, n) bytes). CHECKs CanQuantizeTo(type).
void QuantizeRow(GgmlType type, const float* x, void* out, int64_t n);
void DequantizeRow(GgmlType type, const void* in, float* y, int64_t n);

}  // namespace tachyon::ref
