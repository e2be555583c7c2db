// Run-time CPU feature detection: a machine without AVX2 runs the reference kernels.
#pragma once

namespace tachyon {

// AVX2, FMA and F16C together (what kernels/x86 is compiled for).
bool CpuHasAvx2();

// AVX-512 F, BW and VL, and an OS that saves the ZMM registers: what
// kernels/x86/ops_avx512.cc is compiled for. TACHYON_NO_AVX512=1 turns it off too.
bool CpuHasAvx512();

// AVX-512 F, BW and VL with VNNI (vpdpbusd), and an OS that saves the ZMM
// registers: what kernels/x86/gemm_avx512.cc is compiled for. TACHYON_NO_AVX512=1
// in the environment turns it off (to compare the AVX2 kernels on the same machine).
bool CpuHasAvx512Vnni();

}  // namespace tachyon
