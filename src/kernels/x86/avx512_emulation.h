// The AVX-512 intrinsics on a CPU without AVX-512, for tests only: SIMDe's
// portable implementations (libsimde-dev) under the intrinsics' own names, and
// the few that SIMDe 0.7.4 lacks written here as Intel's Intrinsics Guide defines
// them, on AVX2 halves. Include it instead of <immintrin.h> in a kernel file built
// a second time for a test (ops_avx512_emulated.cc), never in the library.
#pragma once

#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

#include <cstdint>

namespace tachyon::avx512_emulated {

// A lane of a masked load past the mask is zero and its memory is not read; a
// masked store writes the set lanes only.
static inline simde__m512 MaskzLoaduPs(simde__mmask16 k, const void* p) {
  alignas(64) float lanes[16];
  for (int i = 0; i < 16; ++i) lanes[i] = (k >> i) & 1 ? static_cast<const float*>(p)[i] : 0.0f;
  return simde_mm512_load_ps(lanes);
}
static inline void MaskStoreuPs(void* p, simde__mmask16 k, simde__m512 v) {
  alignas(64) float lanes[16];
  simde_mm512_store_ps(lanes, v);
  for (int i = 0; i < 16; ++i) {
    if ((k >> i) & 1) static_cast<float*>(p)[i] = lanes[i];
  }
}

static inline simde__m256 LowHalf(simde__m512 v) { return simde_mm512_castps512_ps256(v); }
static inline simde__m256 HighHalf(simde__m512 v) {
  return simde_mm256_castpd_ps(simde_mm512_extractf64x4_pd(simde_mm512_castps_pd(v), 1));
}

// vcvtps2dq: each half through AVX2's, in the current rounding mode as the
// instruction.
static inline simde__m512i CvtpsEpi32(simde__m512 v) {
  alignas(64) int32_t lanes[16];
  simde_mm256_store_si256(reinterpret_cast<simde__m256i*>(lanes), simde_mm256_cvtps_epi32(LowHalf(v)));
  simde_mm256_store_si256(reinterpret_cast<simde__m256i*>(lanes + 8), simde_mm256_cvtps_epi32(HighHalf(v)));
  return simde_mm512_load_si512(lanes);
}

// vcvtps2ph of 16 floats, kRounding the instruction's immediate.
template <int kRounding>
simde__m256i CvtpsPh(simde__m512 v) {
  alignas(32) uint16_t halves[16];
  simde_mm_store_si128(reinterpret_cast<simde__m128i*>(halves), simde_mm256_cvtps_ph(LowHalf(v), kRounding));
  simde_mm_store_si128(reinterpret_cast<simde__m128i*>(halves + 8), simde_mm256_cvtps_ph(HighHalf(v), kRounding));
  return simde_mm256_load_si256(reinterpret_cast<const simde__m256i*>(halves));
}

// vcvtph2ps of 16 halves.
static inline simde__m512 CvtphPs(simde__m256i h) {
  alignas(64) float lanes[16];
  simde_mm256_store_ps(lanes, simde_mm256_cvtph_ps(simde_mm256_castsi256_si128(h)));
  simde_mm256_store_ps(lanes + 8, simde_mm256_cvtph_ps(simde_mm256_extracti128_si256(h, 1)));
  return simde_mm512_load_ps(lanes);
}

}  // namespace tachyon::avx512_emulated

#define _mm512_maskz_loadu_ps(k, p) ::tachyon::avx512_emulated::MaskzLoaduPs((k), (p))
#define _mm512_mask_storeu_ps(p, k, v) ::tachyon::avx512_emulated::MaskStoreuPs((p), (k), (v))
#define _mm512_cvtps_epi32(v) ::tachyon::avx512_emulated::CvtpsEpi32(v)
#define _mm512_cvtps_ph(v, rounding) ::tachyon::avx512_emulated::CvtpsPh<(rounding)>(v)
#define _mm512_cvtph_ps(h) ::tachyon::avx512_emulated::CvtphPs(h)
