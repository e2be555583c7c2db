#include "kernels/cpu_features.h"

#include <cstdlib>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace tachyon {
namespace {

#if defined(__x86_64__) || defined(__i386__)
bool DetectAvx2() {
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return false;
  const bool fma = ecx & (1u << 12), osxsave = ecx & (1u << 27), avx = ecx & (1u << 28), f16c = ecx & (1u << 29);
  if (!(fma && osxsave && avx && f16c)) return false;
  // The OS must save the YMM registers (XCR0 bits 1 and 2).
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 6u) != 6u) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return ebx & (1u << 5);  // AVX2
}

bool DetectAvx512() {
  if (!DetectAvx2()) return false;
  const char* off = std::getenv("TACHYON_NO_AVX512");
  if (off != nullptr && off[0] != '\0' && off[0] != '0') return false;
  unsigned eax, ebx, ecx, edx;
  // The OS must save the opmask and all ZMM state (XCR0 bits 5, 6 and 7).
  unsigned xcr0_lo, xcr0_hi;
  __asm__("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  if ((xcr0_lo & 0xe6u) != 0xe6u) return false;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  const bool f = ebx & (1u << 16), bw = ebx & (1u << 30), vl = ebx & (1u << 31);
  return f && bw && vl;
}

bool DetectAvx512Vnni() {
  if (!DetectAvx512()) return false;
  unsigned eax, ebx, ecx, edx;
  if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) return false;
  return ecx & (1u << 11);  // AVX512_VNNI
}
#endif

}  // namespace

bool CpuHasAvx512() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = DetectAvx512();
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx512Vnni() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = DetectAvx512Vnni();
  return has;
#else
  return false;
#endif
}

bool CpuHasAvx2() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool has = DetectAvx2();
  return has;
#else
  return false;
#endif
}

}  // namespace tachyon
