// Scalar reference versions of the transformer ops: the specification the
// SIMD kernels are checked against. Buffers carry their shapes in comments.
#pragma once

#include <cstdint>

#include "gguf/ggml_type.h"

namespace tachyon::ref {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * weight[i]; x, weight, out: [n]
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);

// out[i] = (x[i] - mean(x)) / sqrt(var(x) + eps) * weight[i] + bias[i]
// (the population variance, as BERT's LayerNorm); x, weight, bias, out: [n].
void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out);

// out[i] = gelu(x[i]) = x[i] / 2 * (1 + erf(x[i] / sqrt(2))), the exact GELU of
// BERT's "gelu" activation; [n], in place allowed.
void Gelu(const float* x, int64_t n, float* out);

// Rotates each head of x [num_heads, head_dim] in place for position `pos`.
// Pairs are (2i, 2i+1) for normal rope and (i, i + head_dim/2) for NeoX.
// theta_i = pos * base^(-2i/rope_dim) / freq_factors[i] (freq_factors may be null);
// only the first rope_dim dimensions of each head rotate.
void Rope(float* x, int num_heads, int head_dim, int rope_dim, double pos, float base, bool neox,
          const float* freq_factors);

// The rotation angles of one position: cos/sin [rope_dim / 2] of
// pos * base^(-2i/rope_dim) / freq_factors[i] (freq_factors may be null).
void RopeCosSin(double pos, int rope_dim, float base, const float* freq_factors, float* cos, float* sin);
// Rotates each head of x [num_heads, head_dim] by the given angles (the first
// rope_dim dimensions of each head; pairs as in Rope).
void ApplyRope(float* x, int num_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
               bool neox);

// a[i] = silu(gate[i]) * up[i]; [n]
void SiluMul(const float* gate, const float* up, int64_t n, float* out);

// out[i] = gelu_tanh(gate[i]) * up[i] (Gemma's GeGLU), computed as llama.cpp's CPU
// backend does: gate rounded to F16 and looked up in GeluTanhF16Table (outside
// -10 < gate < 10: 0, or gate itself). gelu_tanh(x) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
// [65536] F16 values: entry h is F16(gelu_tanh(F16 h as float)), in float arithmetic.
const uint16_t* GeluTanhF16Table();

// out[i] = exp((x[i] - shift) * scale); [n]. The sampler's softmax weights
// (shift: the largest logit, scale: 1 / temperature). -inf gives 0.
void ExpShifted(const float* x, int64_t n, float shift, float scale, float* out);

// Soft-capping in place: x[i] = tanh(x[i] * (1 / cap)) * cap; [n].
void SoftCap(float* x, int64_t n, float cap);

// In-place softmax over x [n].
void Softmax(float* x, int64_t n);

// Dot products of one weight row (GGUF type) with float activations [n].
float DotF32(const float* w, const float* x, int64_t n);
float DotF16(const uint16_t* w, const float* x, int64_t n);
float DotBF16(const uint16_t* w, const float* x, int64_t n);
// Quantized weight rows with activations quantized to Q8_0 (as llama.cpp does):
// w and x are n / 32 blocks; the integer products of each block are summed
// exactly, then scaled by the two block scales.
float DotQ8_0Q8_0(const void* w, const void* x, int64_t n);
// Activations x [n] -> n / 32 Q8_0 blocks for the quantized dot products. Like
// QuantizeRowQ8_0 but rounding ties to even, as llama.cpp's SIMD quantizer does
// for activations (the weight quantizer rounds ties away from zero).
void QuantizeActivationsQ8_0(const float* x, void* out, int64_t n);
float DotQ4_0Q8_0(const void* w, const void* x, int64_t n);

}  // namespace tachyon::ref
