// Scalar reference for the k-quant formats Q4_K and Q6_K (what real Q4_K_M
// downloads contain): dequantization, a quantizer, and dot products with
// Q8_K-quantized activations. n is a multiple of 256 throughout.
#pragma once

#include <cstdint>

namespace tachyon::ref {

// 6-bit scale and min of sub-block j (0..7) of a Q4_K block.
void UnpackQ4KScale(const uint8_t* scales, int j, uint8_t* scale, uint8_t* min);

void DequantizeRowQ4_K(const void* in, float* y, int64_t n);
void DequantizeRowQ6_K(const void* in, float* y, int64_t n);
void QuantizeRowQ4_K(const float* x, void* out, int64_t n);
void QuantizeRowQ6_K(const float* x, void* out, int64_t n);

// x [n] -> n / 256 Q8_K blocks (as ggml: the value of largest magnitude maps to -128).
void QuantizeActivationsQ8_K(const float* x, void* out, int64_t n);
float DotQ4_KQ8_K(const void* w, const void* x, int64_t n);
float DotQ6_KQ8_K(const void* w, const void* x, int64_t n);

}  // namespace tachyon::ref
