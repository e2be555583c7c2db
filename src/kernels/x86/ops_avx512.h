// AVX-512 versions of the element-wise ops a Gemma or Qwen3 layer runs besides its
// matrix products: RMS norm (the per-head Q/K norms too), Gemma's GeGLU and the
// soft-cap of its logits. Each gives ops_avx2.h's results bit for bit: the same
// operations lane by lane, 16 lanes for two of 8 (RmsNorm's sum of squares in
// AVX2's order: lanes 0-7 add its even 8-value chunks, 8-15 its odd ones), and the
// last values of a row go through masked loads and stores instead of a copy.
// Call only when CpuHasAvx512().
#pragma once

#include <cstdint>

namespace tachyon::avx512 {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void SoftCap(float* x, int64_t n, float cap);

}  // namespace tachyon::avx512

// The same functions built from the same source on SIMDe's portable AVX-512
// (ops_avx512_emulated.cc, kernels_test only): they run on any x86-64 with AVX2,
// so a machine without AVX-512 still checks these kernels' arithmetic. What the
// emulation cannot show (the real instructions' speed, a fault in a masked lane)
// the native test does where the CPU has AVX-512.
namespace tachyon::avx512_emulated {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out);
void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out);
void SoftCap(float* x, int64_t n, float cap);

}  // namespace tachyon::avx512_emulated
