// Compiled with -mavx2 -mfma -mf16c (see kernels/CMakeLists.txt).
//
// This file must not call inline functions or templates shared with the rest
// of the code (fp16.h, std::min, ...): the linker keeps one copy of each, and
// if it kept the AVX2-compiled one, machines without AVX2 would run it. Scalar
// conversions use the F16C intrinsics instead.
#include "kernels/x86/dot_avx2.h"

#include <immintrin.h>

#include "kernels/block_formats.h"
#include "kernels/x86/avx2_reduce.h"

namespace tachyon::avx2 {
float DotF32(const float* w, const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += w[i] * x[i];
  return sum;
}

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8)));
    acc0 = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x + i + 8), acc1);
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) sum += _cvtsh_ss(w[i]) * x[i];
  return sum;
}

// Same loop shape as DotF32 (two accumulators of 8), so a BF16 row and its F32
// expansion give bit-identical dots (MatMul expands rows for batches).
float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  auto load8 = [](const uint16_t* p) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
  };
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    acc0 = _mm256_fmadd_ps(load8(w + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(load8(w + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  float sum = HorizontalSum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(w[i]) << 16;
    sum += _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits)))) * x[i];
  }
  return sum;
}

void DotF32x4(const void* wv, const void* xv, int64_t x_stride, int64_t n, float* out) {
  const float* w = static_cast<const float*>(wv);
  const float* x[4];
  for (int k = 0; k < 4; ++k) x[k] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(xv) + k * x_stride);
  __m256 acc0[4], acc1[4];
  for (int k = 0; k < 4; ++k) acc0[k] = acc1[k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = _mm256_loadu_ps(w + i), w1 = _mm256_loadu_ps(w + i + 8);
    for (int k = 0; k < 4; ++k) {
      acc0[k] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[k] + i), acc0[k]);
      acc1[k] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[k] + i + 8), acc1[k]);
    }
  }
  for (int k = 0; k < 4; ++k) {
    float sum = HorizontalSum(_mm256_add_ps(acc0[k], acc1[k]));
    for (int64_t j = i; j < n; ++j) sum += w[j] * x[k][j];
    out[k] = sum;
  }
}

void QuantizeActivationsQ8_0(const float* x, void* out, int64_t n) {
  BlockQ8_0* blocks = static_cast<BlockQ8_0*>(out);
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    __m256 v[4];
    __m256 max_abs = _mm256_setzero_ps();
    for (int j = 0; j < 4; ++j) {
      v[j] = _mm256_loadu_ps(xb + 8 * j);
      max_abs = _mm256_max_ps(max_abs, _mm256_andnot_ps(sign_mask, v[j]));
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs), _mm256_extractf128_ps(max_abs, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    float amax = _mm_cvtss_f32(m);
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
    for (int j = 0; j < 4; ++j) {
      __m256 scaled = _mm256_mul_ps(v[j], _mm256_set1_ps(id));
      __m256i q = _mm256_cvtps_epi32(
          _mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
      alignas(32) int32_t lanes[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), q);
      for (int k = 0; k < 8; ++k) blocks[b].qs[8 * j + k] = static_cast<int8_t>(lanes[k]);
    }
  }
}

}  // namespace tachyon::avx2
