// Compiled with -mavx2 -mfma (see kernels/CMakeLists.txt); as in dot_avx2.cc,
// no inline functions or templates shared with the rest of the code are used.
#include "kernels/x86/ops_avx2.h"

#include <immintrin.h>

#include "kernels/ref/ops.h"

#include "kernels/x86/avx2_reduce.h"
#include "kernels/x86/vector_math.h"

namespace tachyon::avx2 {
namespace {

float HorizontalMax(__m256 v) {
  __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_max_ps(s, _mm_movehl_ps(s, s));
  s = _mm_max_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// e^x for 8 floats: x = k ln2 + r with |r| <= ln2/2, e^r by a degree-6
// polynomial (Taylor coefficients; relative error below 3e-7 on that range),
// times 2^k built in the exponent bits. Inputs are clamped to [-87, 88].
__m256 Exp(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(x86::kLog2E)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - k ln2, with ln2 split in two for precision.
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(x86::kLn2High), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(x86::kLn2Low), r);
  __m256 p = _mm256_set1_ps(x86::kExpTaylor[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(x86::kExpTaylor[i]));
  const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(exponent));
}

// erf(x) by Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7):
// erf(|x|) = 1 - (a1 t + a2 t^2 + a3 t^3 + a4 t^4 + a5 t^5) e^(-x^2), t = 1 / (1 + p |x|),
// with the sign of x put back.
__m256 Erf(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 sign = _mm256_and_ps(x, sign_mask);
  const __m256 a = _mm256_andnot_ps(sign_mask, x);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 t = _mm256_div_ps(one, _mm256_fmadd_ps(_mm256_set1_ps(0.3275911f), a, one));
  __m256 poly = _mm256_set1_ps(1.061405429f);
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-1.453152027f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(1.421413741f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(-0.284496736f));
  poly = _mm256_fmadd_ps(poly, t, _mm256_set1_ps(0.254829592f));
  poly = _mm256_mul_ps(poly, t);
  const __m256 e = Exp(_mm256_mul_ps(_mm256_sub_ps(_mm256_setzero_ps(), a), a));
  const __m256 y = _mm256_fnmadd_ps(poly, e, one);
  return _mm256_or_ps(y, sign);
}

// tanh(x) for 8 floats, within 4e-7 of tanh relative: below |x| = 0.55 its
// Taylor series through x^17 (the terms left are under 6e-9 relative there);
// above, 1 - 2 / (e^2|x| + 1), where e^2|x| >= 3 keeps Exp's error from growing;
// the sign put back. From |x| = 9.5 on the result is 1 (the float nearest tanh).
__m256 Tanh(__m256 x) {
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  const __m256 sign = _mm256_and_ps(x, sign_mask);
  const __m256 a = _mm256_min_ps(_mm256_andnot_ps(sign_mask, x), _mm256_set1_ps(9.5f));
  const __m256 a2 = _mm256_mul_ps(a, a);
  __m256 p = _mm256_set1_ps(x86::kTanhTaylor[0]);
  for (int i = 1; i < 8; ++i) p = _mm256_fmadd_ps(p, a2, _mm256_set1_ps(x86::kTanhTaylor[i]));
  const __m256 small = _mm256_fmadd_ps(_mm256_mul_ps(p, a2), a, a);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = Exp(_mm256_add_ps(a, a));
  const __m256 large = _mm256_sub_ps(one, _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, one)));
  const __m256 y = _mm256_blendv_ps(large, small, _mm256_cmp_ps(a, _mm256_set1_ps(0.55f), _CMP_LT_OQ));
  return _mm256_or_ps(y, sign);
}

}  // namespace

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  const __m256 vinv = _mm256_set1_ps(inv), vcap = _mm256_set1_ps(cap);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(x + i, _mm256_mul_ps(Tanh(_mm256_mul_ps(_mm256_loadu_ps(x + i), vinv)), vcap));
  }
  if (i < n) {
    alignas(32) float tail[8] = {};
    for (int64_t j = i; j < n; ++j) tail[j - i] = x[j];
    _mm256_store_ps(tail, _mm256_mul_ps(Tanh(_mm256_mul_ps(_mm256_load_ps(tail), vinv)), vcap));
    for (int64_t j = i; j < n; ++j) x[j] = tail[j - i];
  }
}

void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out) {
  __m256 acc = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) acc = _mm256_add_ps(acc, _mm256_loadu_ps(x + i));
  float sum = HorizontalSum(acc);
  for (; i < n; ++i) sum += x[i];
  const float mean = sum / static_cast<float>(n);
  const __m256 vmean = _mm256_set1_ps(mean);
  acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 d = _mm256_sub_ps(_mm256_loadu_ps(x + i), vmean);
    acc = _mm256_fmadd_ps(d, d, acc);
  }
  float sum_sq = HorizontalSum(acc);
  for (; i < n; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float scale = 1.0f / __builtin_sqrtf(sum_sq / static_cast<float>(n) + eps);
  const __m256 vscale = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 d = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vmean), vscale);
    _mm256_storeu_ps(out + i, _mm256_fmadd_ps(d, _mm256_loadu_ps(weight + i), _mm256_loadu_ps(bias + i)));
  }
  for (; i < n; ++i) out[i] = (x[i] - mean) * scale * weight[i] + bias[i];
}

void Gelu(const float* x, int64_t n, float* out) {
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 inv_sqrt2 = _mm256_set1_ps(0.70710678118654752f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 v = _mm256_loadu_ps(x + i);
    __m256 g = _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, Erf(_mm256_mul_ps(v, inv_sqrt2))));
    _mm256_storeu_ps(out + i, g);
  }
  for (; i < n; ++i) {
    const float erf = _mm256_cvtss_f32(Erf(_mm256_set1_ps(x[i] * 0.70710678118654752f)));
    out[i] = 0.5f * x[i] * (1.0f + erf);
  }
}

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  // Two chains of fma, over the even and the odd chunks of 8 values (as
  // ops_avx512.cc's 16 lanes take them).
  __m256 even = _mm256_setzero_ps(), odd = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    even = _mm256_fmadd_ps(a, a, even);
    odd = _mm256_fmadd_ps(b, b, odd);
  }
  if (i + 8 <= n) {
    const __m256 a = _mm256_loadu_ps(x + i);
    even = _mm256_fmadd_ps(a, a, even);
    i += 8;
  }
  float sum_sq = HorizontalSum(_mm256_add_ps(even, odd));
  for (; i < n; ++i) sum_sq += x[i] * x[i];
  const float scale = 1.0f / __builtin_sqrtf(sum_sq / static_cast<float>(n) + eps);
  const __m256 vscale = _mm256_set1_ps(scale);
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vscale), _mm256_loadu_ps(weight + i)));
  }
  for (; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  int64_t i = 0;
  const __m256 one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    __m256 g = _mm256_loadu_ps(gate + i);
    __m256 silu = _mm256_div_ps(g, _mm256_add_ps(one, Exp(_mm256_sub_ps(_mm256_setzero_ps(), g))));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  for (; i < n; ++i) {
    __m256 g = _mm256_set1_ps(gate[i]);
    float e = _mm256_cvtss_f32(Exp(_mm256_sub_ps(_mm256_setzero_ps(), g)));
    out[i] = gate[i] / (1.0f + e) * up[i];
  }
}

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  const uint16_t* table = ref::GeluTanhF16Table();
  const __m256 lo = _mm256_set1_ps(-10.0f), hi = _mm256_set1_ps(10.0f);
  alignas(32) uint16_t h[8];
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    _mm_store_si128(reinterpret_cast<__m128i*>(h), _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT));
    for (int j = 0; j < 8; ++j) h[j] = table[h[j]];
    __m256 g = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
    g = _mm256_blendv_ps(g, x, _mm256_cmp_ps(x, hi, _CMP_GE_OQ));
    g = _mm256_blendv_ps(g, _mm256_setzero_ps(), _mm256_cmp_ps(x, lo, _CMP_LE_OQ));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(g, _mm256_loadu_ps(up + i)));
  }
  if (i < n) ref::GeluTanhMul(gate + i, up + i, n - i, out + i);
}

void ExpShifted(const float* x, int64_t n, float shift, float scale, float* out) {
  const __m256 s = _mm256_set1_ps(shift), k = _mm256_set1_ps(scale), floor = _mm256_set1_ps(-87.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_mul_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), s), k);
    const __m256 dead = _mm256_cmp_ps(v, floor, _CMP_LT_OQ);  // -inf and what underflows
    _mm256_storeu_ps(out + i, _mm256_andnot_ps(dead, Exp(v)));
  }
  for (; i < n; ++i) {
    const float v = (x[i] - shift) * scale;
    out[i] = v < -87.0f ? 0.0f : _mm256_cvtss_f32(Exp(_mm256_set1_ps(v)));
  }
}

void Softmax(float* x, int64_t n) {
  __m256 vmax = _mm256_set1_ps(x[0]);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(x + i));
  float max = HorizontalMax(vmax);
  for (; i < n; ++i) max = x[i] > max ? x[i] : max;
  const __m256 m = _mm256_set1_ps(max);
  __m256 acc = _mm256_setzero_ps();
  for (i = 0; i + 8 <= n; i += 8) {
    __m256 e = Exp(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  float sum = HorizontalSum(acc);
  for (; i < n; ++i) {
    x[i] = _mm256_cvtss_f32(Exp(_mm256_set1_ps(x[i] - max)));
    sum += x[i];
  }
  const __m256 inv = _mm256_set1_ps(1.0f / sum);
  for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
  for (; i < n; ++i) x[i] *= 1.0f / sum;
}

void AddScaledF32(float* acc, float p, const float* v, int64_t n) {
  const __m256 vp = _mm256_set1_ps(p);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, _mm256_loadu_ps(v + i), _mm256_loadu_ps(acc + i)));
  }
  for (; i < n; ++i) acc[i] += p * v[i];
}

void AddScaledF16(float* acc, float p, const uint16_t* v, int64_t n) {
  const __m256 vp = _mm256_set1_ps(p);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(v + i)));
    _mm256_storeu_ps(acc + i, _mm256_fmadd_ps(vp, x, _mm256_loadu_ps(acc + i)));
  }
  for (; i < n; ++i) acc[i] += p * _cvtsh_ss(v[i]);
}

void ApplyRope(float* x, int num_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
               bool neox) {
  const int half = rope_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * head_dim;
    int i = 0;
    if (neox) {
      for (; i + 8 <= half; i += 8) {
        __m256 a = _mm256_loadu_ps(head + i), b = _mm256_loadu_ps(head + i + half);
        __m256 c = _mm256_loadu_ps(cos + i), s = _mm256_loadu_ps(sin + i);
        _mm256_storeu_ps(head + i, _mm256_fmsub_ps(a, c, _mm256_mul_ps(b, s)));
        _mm256_storeu_ps(head + i + half, _mm256_fmadd_ps(a, s, _mm256_mul_ps(b, c)));
      }
      for (; i < half; ++i) {
        float a = head[i], b = head[i + half];
        head[i] = a * cos[i] - b * sin[i];
        head[i + half] = a * sin[i] + b * cos[i];
      }
    } else {
      // Pairs (2i, 2i+1): 4 pairs per vector; fmaddsub gives x*c -/+ swapped*s.
      for (; i + 4 <= half; i += 4) {
        __m256 v = _mm256_loadu_ps(head + 2 * i);
        __m128 c4 = _mm_loadu_ps(cos + i), s4 = _mm_loadu_ps(sin + i);
        __m256 c = _mm256_set_m128(_mm_unpackhi_ps(c4, c4), _mm_unpacklo_ps(c4, c4));
        __m256 s = _mm256_set_m128(_mm_unpackhi_ps(s4, s4), _mm_unpacklo_ps(s4, s4));
        __m256 swapped = _mm256_permute_ps(v, 0xB1);
        _mm256_storeu_ps(head + 2 * i, _mm256_fmaddsub_ps(v, c, _mm256_mul_ps(swapped, s)));
      }
      for (; i < half; ++i) {
        float a = head[2 * i], b = head[2 * i + 1];
        head[2 * i] = a * cos[i] - b * sin[i];
        head[2 * i + 1] = a * sin[i] + b * cos[i];
      }
    }
  }
}

}  // namespace tachyon::avx2
