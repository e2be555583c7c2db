// kernels_test only: ops_avx512.cc built again on SIMDe's portable AVX-512
// (avx512_emulation.h) into tachyon::avx512_emulated, so that ops_avx512_test.cc
// checks its arithmetic on CPUs without AVX-512 as well.
#define TACHYON_AVX512_EMULATED
#include "kernels/x86/ops_avx512.cc"
