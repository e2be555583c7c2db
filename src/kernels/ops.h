// The element-wise transformer ops, dispatched at run time to the AVX2
// versions (kernels/x86/ops_avx2.h) or the scalar reference (kernels/ref/ops.h).
#pragma once

#include <cstdint>

namespace tachyon {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out);
void Gelu(const float* x, int64_t n, float* out);
void SiluMul(const float* gate, const float* up, int64_t n, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);  // Gemma's GeGLU (ref/ops.h)
void Softmax(float* x, int64_t n);
void SoftCap(float* x, int64_t n, float cap);  // x = tanh(x / cap) * cap in place (ref/ops.h)
void ExpShifted(const float* x, int64_t n, float shift, float scale, float* out);  // ref/ops.h
void ApplyRope(float* x, int num_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
               bool neox);

}  // namespace tachyon
