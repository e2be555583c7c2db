// AVX2 products on the packed layouts of kernels/packed_matrix.h: the same
// contracts as x86/gemm_avx512.h (PackedRows, the compact partial group, the
// activation groups), for CPUs without AVX-512 VNNI. Call only when
// CpuHasAvx2().
//
// A 64-byte vector of the layout is two 256-bit halves: lanes 0-7 and 8-15,
// each with an accumulator of its own, so every lane sees the AVX-512 kernel's
// operations in the same order; the halves are added lane by lane and then
// reduced as the AVX-512 kernel reduces its 16 lanes. The integer block sums
// are exact either way (Q8_0: |q| * (x * sign q) with _mm256_maddubs_epi16,
// whose pairs stay within int16; the unsigned quants of the other formats times
// x directly, a few vectors summed in int16 before widening). So a (row, token)
// here gives the AVX-512 kernel's result, bit for bit (packed_matrix_test
// checks it), and does not depend on the batch either.
#pragma once

#include <cstdint>

#include "kernels/packed_matrix.h"
#include "kernels/x86/gemm_avx512.h"

namespace tachyon::avx2 {

using PackedRows = avx512::PackedRows;

// As avx512::DotTile: 3 tokens and up to 4 rows through the register tile (2
// rows at a time here), else up to avx512::kRowTokens tokens a row at a time.
void DotTile(PackedFormat format, bool bytes, const PackedRows& rows, int num_rows, const ActivationGroup* tokens,
             int64_t token_stride, int num_tokens, float* y, int64_t y_stride);

// As avx512::DotPanelsF16 (the same arguments and limits): each (row, token)
// one chain of fma in k order, so the results are the AVX-512 kernel's, bit for
// bit.
void DotPanelsF16(const uint16_t* panels, int num_panels, int64_t cols, int num_rows, const float* x, int64_t x_stride,
                  int num_tokens, float* y, int64_t y_stride);

// As avx512::ExpandRows.
void ExpandRows(PackedFormat format, const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride);

}  // namespace tachyon::avx2
