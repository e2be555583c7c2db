// Horizontal sums for the AVX2 kernel files only (dot_avx2.cc, ops_avx2.cc,
// unpacked_avx2.cc, all built with -mavx2). `static`: each of those files keeps
// a copy of its own, so the linker can never hand an AVX2-compiled body to code
// built for plain x86-64 (see dot_avx2.cc).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tachyon::avx2 {

static inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

static inline int32_t HorizontalSumI32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
  return _mm_cvtsi128_si32(s);
}

}  // namespace tachyon::avx2
