// AVX2 + FMA (+ F16C) dot products, same contracts as kernels/ref/ops.h.
// Call only when CpuHasAvx2() is true; checked against the reference in
// dot_avx2_test.cc with a tolerance per type.
#pragma once

#include <cstdint>

namespace tachyon::avx2 {

float DotF32(const float* w, const float* x, int64_t n);
float DotF16(const uint16_t* w, const float* x, int64_t n);
float DotBF16(const uint16_t* w, const float* x, int64_t n);
float DotQ8_0Q8_0(const void* w, const void* x, int64_t n);
float DotQ4_0Q8_0(const void* w, const void* x, int64_t n);
float DotQ4_KQ8_K(const void* w, const void* x, int64_t n);
float DotQ6_KQ8_K(const void* w, const void* x, int64_t n);
// One weight row against 4 activation rows (x + k * x_stride, x_stride in
// bytes), out[k] bit-identical to the single-row dot with row k: the weights
// are loaded once for the 4 tokens of a batch.
void DotF32x4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out);
void DotF16x4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out);
void DotQ8_0Q8_0x4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out);
void DotQ4_KQ8_Kx4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out);
void DotQ6_KQ8_Kx4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out);

// x [n] -> n / 32 Q8_0 blocks, bit-identical to ref::QuantizeActivationsQ8_0.
void QuantizeActivationsQ8_0(const float* x, void* out, int64_t n);

}  // namespace tachyon::avx2
