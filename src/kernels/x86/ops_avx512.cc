// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx2 -mfma -mf16c
// -ffp-contract=off (see kernels/CMakeLists.txt); as in dot_avx2.cc, no inline
// function or template shared with the rest of the code is used. Each function
// repeats ops_avx2.cc's operations in the same order, so results are the AVX2
// ones bit for bit (ops_avx512_test.cc). Built a second time for the tests on
// SIMDe's portable AVX-512 (TACHYON_AVX512_EMULATED, ops_avx512_emulated.cc).
#include "kernels/x86/ops_avx512.h"

#ifdef TACHYON_AVX512_EMULATED
#include "kernels/x86/avx512_emulation.h"
#define TACHYON_AVX512_NAMESPACE avx512_emulated
#else
#include <immintrin.h>
#define TACHYON_AVX512_NAMESPACE avx512
#endif

#include "kernels/ref/ops.h"
#include "kernels/x86/avx2_reduce.h"
#include "kernels/x86/vector_math.h"

namespace tachyon::TACHYON_AVX512_NAMESPACE {
namespace {

// The first n (0..16) lanes.
__mmask16 FirstLanes(int64_t n) { return static_cast<__mmask16>((1u << n) - 1); }

__m512 And(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
__m512 AndNot(__m512 a, __m512 b) {  // ~a & b
  return _mm512_castsi512_ps(_mm512_andnot_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}
__m512 Or(__m512 a, __m512 b) {
  return _mm512_castsi512_ps(_mm512_or_si512(_mm512_castps_si512(a), _mm512_castps_si512(b)));
}

// ops_avx2.cc's Exp on 16 lanes: the same clamp, reduction, polynomial and
// exponent bits.
__m512 Exp(__m512 x) {
  x = _mm512_min_ps(_mm512_max_ps(x, _mm512_set1_ps(-87.0f)), _mm512_set1_ps(88.0f));
  const __m512 k = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(x86::kLog2E)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(k, _mm512_set1_ps(x86::kLn2High), x);
  r = _mm512_fnmadd_ps(k, _mm512_set1_ps(x86::kLn2Low), r);
  __m512 p = _mm512_set1_ps(x86::kExpTaylor[0]);
  for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(x86::kExpTaylor[i]));
  const __m512i exponent = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(k), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(exponent));
}

// ops_avx2.cc's Tanh on 16 lanes (its comment has the method and the error).
__m512 Tanh(__m512 x) {
  const __m512 sign_mask = _mm512_set1_ps(-0.0f);
  const __m512 sign = And(x, sign_mask);
  const __m512 a = _mm512_min_ps(AndNot(sign_mask, x), _mm512_set1_ps(9.5f));
  const __m512 a2 = _mm512_mul_ps(a, a);
  __m512 p = _mm512_set1_ps(x86::kTanhTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm512_fmadd_ps(p, a2, _mm512_set1_ps(x86::kTanhTaylor[i]));
  const __m512 small = _mm512_fmadd_ps(_mm512_mul_ps(p, a2), a, a);
  const __m512 one = _mm512_set1_ps(1.0f);
  const __m512 e = Exp(_mm512_add_ps(a, a));
  const __m512 large = _mm512_sub_ps(one, _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, one)));
  const __m512 y = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(a, _mm512_set1_ps(0.55f), _CMP_LT_OQ), large, small);
  return Or(y, sign);
}

}  // namespace

void SoftCap(float* x, int64_t n, float cap) {
  const __m512 vinv = _mm512_set1_ps(1.0f / cap), vcap = _mm512_set1_ps(cap);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 lanes = FirstLanes(n - i < 16 ? n - i : 16);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, x + i);
    _mm512_mask_storeu_ps(x + i, lanes, _mm512_mul_ps(Tanh(_mm512_mul_ps(v, vinv)), vcap));
  }
}

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Lanes 0-7 sum the squares of AVX2's even chunks of 8 values, lanes 8-15 its odd
  // ones; a last chunk of 8 is an even one (lanes 8-15 add +0).
  __m512 acc = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_loadu_ps(x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
  }
  if (i + 8 <= n) {
    const __m512 v = _mm512_maskz_loadu_ps(FirstLanes(8), x + i);
    acc = _mm512_fmadd_ps(v, v, acc);
    i += 8;
  }
  const __m256 even = _mm512_castps512_ps256(acc);
  const __m256 odd = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(acc), 1));
  float sum_sq = avx2::HorizontalSum(_mm256_add_ps(even, odd));
  for (; i < n; ++i) sum_sq += x[i] * x[i];
  const float scale = 1.0f / __builtin_sqrtf(sum_sq / static_cast<float>(n) + eps);
  const __m512 vscale = _mm512_set1_ps(scale);
  for (i = 0; i < n; i += 16) {
    const __mmask16 lanes = FirstLanes(n - i < 16 ? n - i : 16);
    const __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(lanes, x + i), vscale);
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(lanes, weight + i)));
  }
}

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  const uint16_t* table = ref::GeluTanhF16Table();
  const __m512 lo = _mm512_set1_ps(-10.0f), hi = _mm512_set1_ps(10.0f);
  alignas(32) uint16_t h[16];
  for (int64_t i = 0; i < n; i += 16) {
    const int64_t count = n - i < 16 ? n - i : 16;
    const __mmask16 lanes = FirstLanes(count);
    const __m512 x = _mm512_maskz_loadu_ps(lanes, gate + i);
    _mm256_store_si256(reinterpret_cast<__m256i*>(h), _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    for (int64_t j = 0; j < count; ++j) h[j] = table[h[j]];
    __m512 g = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
    g = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, hi, _CMP_GE_OQ), g, x);
    g = _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, lo, _CMP_LE_OQ), g, _mm512_setzero_ps());
    _mm512_mask_storeu_ps(out + i, lanes, _mm512_mul_ps(g, _mm512_maskz_loadu_ps(lanes, up + i)));
  }
}

}  // namespace tachyon::TACHYON_AVX512_NAMESPACE
