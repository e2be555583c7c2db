// Run-time CPU feature detection: a machine without AVX2 runs the reference kernels.
#pragma once

namespace tachyon {

// AVX2, FMA and F16C together (what kernels/x86 is compiled for).
bool CpuHasAvx2();

}  // namespace tachyon
