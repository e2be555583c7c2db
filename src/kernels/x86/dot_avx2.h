// AVX2 + FMA (+ F16C) dot products of the float types, same contracts as
// kernels/ref/ops.h: F32 and BF16 matrices (which have no packed form), F16 for
// attention over an F16 KV cache. The quantized types with a packed form (Q8_0,
// Q4_0, Q5_0, Q4_K, Q6_K) and F16 matrices are multiplied packed
// (kernels/packed_matrix.h) on every CPU with AVX2, so they have no unpacked
// AVX2 dot here; unpacked, they take the scalar reference. Call only when
// CpuHasAvx2() is true; checked against the reference in dot_avx2_test.cc with a
// tolerance per type.
#pragma once

#include <cstdint>

namespace tachyon::avx2 {

float DotF32(const float* w, const float* x, int64_t n);
float DotF16(const uint16_t* w, const float* x, int64_t n);
float DotBF16(const uint16_t* w, const float* x, int64_t n);
// One weight row against 4 activation rows (x + k * x_stride, x_stride in
// bytes), out[k] bit-identical to the single-row dot with row k: the weights
// are loaded once for the 4 tokens of a batch.
void DotF32x4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out);

// x [n] -> n / 32 Q8_0 blocks, bit-identical to ref::QuantizeActivationsQ8_0.
void QuantizeActivationsQ8_0(const float* x, void* out, int64_t n);
// x [n] -> n / 256 Q8_K super-blocks (the k-quants' activations), bit-identical
// to ref::QuantizeActivationsQ8_K for finite x (the first value of the largest
// magnitude sets the scale).
void QuantizeActivationsQ8_K(const float* x, void* out, int64_t n);

}  // namespace tachyon::avx2
