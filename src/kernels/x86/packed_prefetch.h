// The software prefetch of the one-row (decode) paths of x86/gemm_avx512.cc and
// x86/gemm_avx2.cc. `static`: each of those files keeps a copy of its own, built
// for its ISA (see dot_avx2.cc on shared inline functions).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace tachyon::x86 {

// How far ahead a row's groups are asked for: a few rows of a decode step.
inline constexpr int64_t kPrefetchBytes = 4096;

// Asks for the lines kPrefetchBytes past a group of `group_bytes` quants and past
// its 32 bytes of scales.
static inline void PrefetchGroupAhead(const uint8_t* group, int64_t group_bytes, const uint8_t* scales) {
  for (int64_t line = 0; line < group_bytes; line += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(group + kPrefetchBytes + line), _MM_HINT_T0);
  }
  _mm_prefetch(reinterpret_cast<const char*>(scales + kPrefetchBytes), _MM_HINT_T0);
}

}  // namespace tachyon::x86
