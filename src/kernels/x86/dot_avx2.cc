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

void QuantizeActivationsQ8_K(const float* x, void* out, int64_t n) {
  BlockQ8_K* blocks = static_cast<BlockQ8_K*>(out);
  constexpr int kVectors = kQK_K / 8;
  const __m256 sign_mask = _mm256_set1_ps(-0.0f);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float* xb = x + b * kQK_K;
    BlockQ8_K& block = blocks[b];
    // max_ps returns its second operand when either is NaN: the running max goes
    // second, so a NaN is passed over as the reference's > passes it (its quant
    // differs: the reference's cast of the int conversion's NaN is undefined).
    __m256 max_abs = _mm256_setzero_ps();
    for (int j = 0; j < kVectors; ++j) {
      max_abs = _mm256_max_ps(_mm256_andnot_ps(sign_mask, _mm256_loadu_ps(xb + 8 * j)), max_abs);
    }
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(max_abs), _mm256_extractf128_ps(max_abs, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    const float amax = _mm_cvtss_f32(m);
    if (amax == 0.0f) {
      block.d = 0.0f;
      for (int i = 0; i < kQK_K; ++i) block.qs[i] = 0;
      for (int g = 0; g < kQK_K / 16; ++g) block.bsums[g] = 0;
      continue;
    }
    // The first value of that magnitude, with its sign.
    float max = amax;
    const __m256 target = _mm256_set1_ps(amax);
    for (int j = 0; j < kVectors; ++j) {
      const __m256 v = _mm256_loadu_ps(xb + 8 * j);
      const int hits = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_andnot_ps(sign_mask, v), target, _CMP_EQ_OQ));
      if (hits != 0) {
        max = xb[8 * j + __builtin_ctz(static_cast<unsigned>(hits))];
        break;
      }
    }
    const float iscale = -128.0f / max;
    const __m256 scale = _mm256_set1_ps(iscale);
    const __m256i top = _mm256_set1_epi32(127);
    // 32 values a pass: four vectors rounded to int32, capped at 127, packed to bytes
    // in order, and the two 16-value sums.
    for (int j = 0; j < kVectors; j += 4) {
      __m256i q[4];
      for (int k = 0; k < 4; ++k) {
        const __m256 scaled = _mm256_mul_ps(scale, _mm256_loadu_ps(xb + 8 * (j + k)));
        q[k] = _mm256_min_epi32(
            _mm256_cvtps_epi32(_mm256_round_ps(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)), top);
      }
      const __m256i bytes = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(block.qs + 8 * j),
                          _mm256_permutevar8x32_epi32(bytes, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
      for (int half = 0; half < 2; ++half) {
        const __m256i s = _mm256_add_epi32(q[2 * half], q[2 * half + 1]);
        __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0x4e));
        t = _mm_add_epi32(t, _mm_shuffle_epi32(t, 0xb1));
        block.bsums[j / 2 + half] = static_cast<int16_t>(_mm_cvtsi128_si32(t));
      }
    }
    block.d = 1.0f / iscale;
  }
}

}  // namespace tachyon::avx2
