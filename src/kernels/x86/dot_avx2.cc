// Compiled with -mavx2 -mfma -mf16c (see kernels/CMakeLists.txt).
//
// This file must not call inline functions or templates shared with the rest
// of the code (fp16.h, std::min, ...): the linker keeps one copy of each, and
// if it kept the AVX2-compiled one, machines without AVX2 would run it. Scalar
// conversions use the F16C intrinsics instead.
#include "kernels/x86/dot_avx2.h"

#include <immintrin.h>

#include "kernels/block_formats.h"

namespace tachyon::avx2 {
namespace {

float HorizontalSum(__m256 v) {
  __m128 lo = _mm256_castps256_ps128(v), hi = _mm256_extractf128_ps(v, 1);
  __m128 s = _mm_add_ps(lo, hi);
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Sum of the 8 int16 pairs products of two int8 x int8 vectors, as 8 int32 lanes.
// x is signed; w is signed: use the sign trick so _mm256_maddubs_epi16 (u8 x s8) applies.
__m256 DotInt8Block(__m256i w, __m256i x) {
  __m256i abs_w = _mm256_sign_epi8(w, w);
  __m256i signed_x = _mm256_sign_epi8(x, w);
  __m256i pairs = _mm256_maddubs_epi16(abs_w, signed_x);  // |w| * (x * sign(w)), 16 x int16
  __m256i sums = _mm256_madd_epi16(pairs, _mm256_set1_epi16(1));  // 8 x int32
  return _mm256_cvtepi32_ps(sums);
}

}  // namespace

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

float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    __m256 wf = _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
    acc = _mm256_fmadd_ps(wf, _mm256_loadu_ps(x + i), acc);
  }
  float sum = HorizontalSum(acc);
  for (; i < n; ++i) {
    uint32_t bits = static_cast<uint32_t>(w[i]) << 16;
    sum += _mm_cvtss_f32(_mm_castsi128_ps(_mm_cvtsi32_si128(static_cast<int>(bits)))) * x[i];
  }
  return sum;
}

float DotQ8_0Q8_0(const void* w, const void* x, int64_t n) {
  const BlockQ8_0* wb = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    __m256 scale = _mm256_set1_ps(_cvtsh_ss(wb[b].d) * _cvtsh_ss(xb[b].d));
    __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs));
    __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs));
    acc = _mm256_fmadd_ps(scale, DotInt8Block(wq, xq), acc);
  }
  return HorizontalSum(acc);
}

float DotQ4_0Q8_0(const void* w, const void* x, int64_t n) {
  const BlockQ4_0* wb = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i eight = _mm256_set1_epi8(8);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    __m256 scale = _mm256_set1_ps(_cvtsh_ss(wb[b].d) * _cvtsh_ss(xb[b].d));
    // 16 bytes of nibbles -> 32 int8: low nibbles (x[0..15]) then high (x[16..31]).
    __m128i packed = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wb[b].qs));
    __m256i both = _mm256_set_m128i(_mm_srli_epi16(packed, 4), packed);
    __m256i wq = _mm256_sub_epi8(_mm256_and_si256(both, low_mask), eight);
    __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs));
    acc = _mm256_fmadd_ps(scale, DotInt8Block(wq, xq), acc);
  }
  return HorizontalSum(acc);
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
