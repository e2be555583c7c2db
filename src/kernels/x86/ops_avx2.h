// AVX2 + FMA versions of the element-wise ops of kernels/ref/ops.h, checked
// against the reference in ops_avx2_test.cc. Call only when CpuHasAvx2().
#pragma once

#include <cstdint>

namespace tachyon::avx2 {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out);
void Gelu(const float* x, int64_t n, float* out);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
// ref::GeluTanhMul's values: the F16 rounding and the conversions eight lanes at a time, the table read per lane.
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void Softmax(float* x, int64_t n);
// ref::ExpShifted by the polynomial exp (relative error ~2e-7; exactly 0 below e^-87).
// ref::SoftCap's x = tanh(x / cap) * cap in place, with a vector tanh within
// 4e-7 relative of the C library's (a NaN gives a finite value).
void SoftCap(float* x, int64_t n, float cap);
void ExpShifted(const float* x, int64_t n, float shift, float scale, float* out);
// acc[i] += p * v[i], v in F32 or F16; [n]
void AddScaledF32(float* acc, float p, const float* v, int64_t n);
void AddScaledF16(float* acc, float p, const uint16_t* v, int64_t n);
void ApplyRope(float* x, int num_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
               bool neox);

}  // namespace tachyon::avx2
