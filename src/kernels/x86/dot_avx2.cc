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
#include "kernels/ref/kquants.h"

namespace tachyon::avx2 {
namespace {

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

float DotQ4_KQ8_K(const void* w, const void* x, int64_t n) {
  const BlockQ4_K* wb = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sc[8], mn[8];
    int32_t sumi_mins = 0;
    for (int j = 0; j < 8; ++j) {
      ref::UnpackQ4KScale(wb[b].scales, j, &sc[j], &mn[j]);
      sumi_mins += mn[j] * (xb[b].bsums[2 * j] + xb[b].bsums[2 * j + 1]);
    }
    __m256i acc = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      // 32 bytes hold sub-blocks 2j (low nibbles) and 2j+1 (high nibbles); both unsigned 0..15.
      __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * j));
      __m256i lo = _mm256_and_si256(bits, low_mask);
      __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low_mask);
      __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs + 64 * j));
      __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs + 64 * j + 32));
      __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo), _mm256_set1_epi16(sc[2 * j]));
      __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi), _mm256_set1_epi16(sc[2 * j + 1]));
      acc = _mm256_add_epi32(acc, _mm256_add_epi32(p_lo, p_hi));
    }
    const int32_t sumi = HorizontalSumI32(acc);
    sum += _cvtsh_ss(wb[b].d) * xb[b].d * static_cast<float>(sumi) -
           _cvtsh_ss(wb[b].dmin) * xb[b].d * static_cast<float>(sumi_mins);
  }
  return sum;
}

float DotQ6_KQ8_K(const void* w, const void* x, int64_t n) {
  const BlockQ6_K* wb = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const int8_t* sc = wb[b].scales;
    // q is stored as q + 32 (unsigned 0..63): subtract 32 * sum(y) per group afterwards.
    int32_t offset = 0;
    for (int g = 0; g < 16; ++g) offset += sc[g] * xb[b].bsums[g];
    __m256i acc = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = wb[b].ql + 64 * half;
      const uint8_t* qh = wb[b].qh + 32 * half;
      __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_slli_epi16(_mm256_and_si256(h, two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), two_bits), 4)),
      };
      for (int s = 0; s < 4; ++s) {
        __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[b].qs + 128 * half + 32 * s));
        __m256i prod = _mm256_maddubs_epi16(q[s], y);  // 16 x int16: lanes 0-7 group 2s, 8-15 group 2s+1
        const int g = 8 * half + 2 * s;
        __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(prod, scales));
      }
    }
    const int32_t sumi = HorizontalSumI32(acc) - 32 * offset;
    sum += _cvtsh_ss(wb[b].d) * xb[b].d * static_cast<float>(sumi);
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

void DotF16x4(const void* wv, const void* xv, int64_t x_stride, int64_t n, float* out) {
  const uint16_t* w = static_cast<const uint16_t*>(wv);
  const float* x[4];
  for (int k = 0; k < 4; ++k) x[k] = reinterpret_cast<const float*>(static_cast<const uint8_t*>(xv) + k * x_stride);
  __m256 acc0[4], acc1[4];
  for (int k = 0; k < 4; ++k) acc0[k] = acc1[k] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 w0 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i)));
    const __m256 w1 = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w + i + 8)));
    for (int k = 0; k < 4; ++k) {
      acc0[k] = _mm256_fmadd_ps(w0, _mm256_loadu_ps(x[k] + i), acc0[k]);
      acc1[k] = _mm256_fmadd_ps(w1, _mm256_loadu_ps(x[k] + i + 8), acc1[k]);
    }
  }
  for (int k = 0; k < 4; ++k) {
    float sum = HorizontalSum(_mm256_add_ps(acc0[k], acc1[k]));
    for (int64_t j = i; j < n; ++j) sum += _cvtsh_ss(w[j]) * x[k][j];
    out[k] = sum;
  }
}

void DotQ8_0Q8_0x4(const void* wv, const void* xv, int64_t x_stride, int64_t n, float* out) {
  const BlockQ8_0* wb = static_cast<const BlockQ8_0*>(wv);
  const BlockQ8_0* xb[4];
  for (int k = 0; k < 4; ++k) {
    xb[k] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(xv) + k * x_stride);
  }
  __m256 acc[4];
  for (int k = 0; k < 4; ++k) acc[k] = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float dw = _cvtsh_ss(wb[b].d);
    const __m256i wq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs));
    for (int k = 0; k < 4; ++k) {
      __m256 scale = _mm256_set1_ps(dw * _cvtsh_ss(xb[k][b].d));
      __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[k][b].qs));
      acc[k] = _mm256_fmadd_ps(scale, DotInt8Block(wq, xq), acc[k]);
    }
  }
  for (int k = 0; k < 4; ++k) out[k] = HorizontalSum(acc[k]);
}

void DotQ4_KQ8_Kx4(const void* wv, const void* xv, int64_t x_stride, int64_t n, float* out) {
  const BlockQ4_K* wb = static_cast<const BlockQ4_K*>(wv);
  const BlockQ8_K* xb[4];
  for (int k = 0; k < 4; ++k) xb[k] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(xv) + k * x_stride);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  float sum[4] = {0, 0, 0, 0};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) ref::UnpackQ4KScale(wb[b].scales, j, &sc[j], &mn[j]);
    __m256i acc[4];
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_setzero_si256();
    for (int j = 0; j < 4; ++j) {
      const __m256i bits = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wb[b].qs + 32 * j));
      const __m256i lo = _mm256_and_si256(bits, low_mask);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low_mask);
      const __m256i s_lo = _mm256_set1_epi16(sc[2 * j]), s_hi = _mm256_set1_epi16(sc[2 * j + 1]);
      for (int k = 0; k < 4; ++k) {
        __m256i y_lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[k][b].qs + 64 * j));
        __m256i y_hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[k][b].qs + 64 * j + 32));
        __m256i p_lo = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, y_lo), s_lo);
        __m256i p_hi = _mm256_madd_epi16(_mm256_maddubs_epi16(hi, y_hi), s_hi);
        acc[k] = _mm256_add_epi32(acc[k], _mm256_add_epi32(p_lo, p_hi));
      }
    }
    const float d = _cvtsh_ss(wb[b].d), dmin = _cvtsh_ss(wb[b].dmin);
    for (int k = 0; k < 4; ++k) {
      int32_t sumi_mins = 0;
      for (int j = 0; j < 8; ++j) sumi_mins += mn[j] * (xb[k][b].bsums[2 * j] + xb[k][b].bsums[2 * j + 1]);
      sum[k] += d * xb[k][b].d * static_cast<float>(HorizontalSumI32(acc[k])) -
                dmin * xb[k][b].d * static_cast<float>(sumi_mins);
    }
  }
  for (int k = 0; k < 4; ++k) out[k] = sum[k];
}

void DotQ6_KQ8_Kx4(const void* wv, const void* xv, int64_t x_stride, int64_t n, float* out) {
  const BlockQ6_K* wb = static_cast<const BlockQ6_K*>(wv);
  const BlockQ8_K* xb[4];
  for (int k = 0; k < 4; ++k) xb[k] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(xv) + k * x_stride);
  const __m256i low_mask = _mm256_set1_epi8(0x0f);
  const __m256i two_bits = _mm256_set1_epi8(0x03);
  float sum[4] = {0, 0, 0, 0};
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const int8_t* sc = wb[b].scales;
    __m256i acc[4];
    for (int k = 0; k < 4; ++k) acc[k] = _mm256_setzero_si256();
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = wb[b].ql + 64 * half;
      const uint8_t* qh = wb[b].qh + 32 * half;
      const __m256i l0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql));
      const __m256i l1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(ql + 32));
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(qh));
      const __m256i q[4] = {
          _mm256_or_si256(_mm256_and_si256(l0, low_mask), _mm256_slli_epi16(_mm256_and_si256(h, two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(l1, low_mask),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 2), two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), low_mask),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 4), two_bits), 4)),
          _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), low_mask),
                          _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(h, 6), two_bits), 4)),
      };
      for (int s = 0; s < 4; ++s) {
        const int g = 8 * half + 2 * s;
        const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(sc[g + 1]), _mm_set1_epi16(sc[g]));
        for (int k = 0; k < 4; ++k) {
          __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xb[k][b].qs + 128 * half + 32 * s));
          acc[k] = _mm256_add_epi32(acc[k], _mm256_madd_epi16(_mm256_maddubs_epi16(q[s], y), scales));
        }
      }
    }
    const float d = _cvtsh_ss(wb[b].d);
    for (int k = 0; k < 4; ++k) {
      int32_t offset = 0;
      for (int g = 0; g < 16; ++g) offset += sc[g] * xb[k][b].bsums[g];
      sum[k] += d * xb[k][b].d * static_cast<float>(HorizontalSumI32(acc[k]) - 32 * offset);
    }
  }
  for (int k = 0; k < 4; ++k) out[k] = sum[k];
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
