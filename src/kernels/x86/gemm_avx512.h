// AVX-512 VNNI products of Q8_0 / Q4_0 weights with Q8_0 activations, on the
// packed layouts of kernels/packed_matrix.h. Call only when CpuHasAvx512Vnni().
//
// One (row, token) pair is computed the same way whichever tile it falls in:
// per group of 16 blocks, the exact integer block sums (a lane per block), then
// acc += float(sums) * (d_w * d_x) in the group's order, then one fixed
// reduction of the 16 lanes. So a token's result does not depend on how many
// tokens or rows share its call (the engine's differential tests rely on it).
#pragma once

#include <cstdint>

#include "kernels/packed_matrix.h"

namespace tachyon::avx512 {

// num_rows consecutive rows of a PackedMatrix.
struct PackedRows {
  const uint8_t* rows = nullptr;  // the first row
  int64_t row_stride = 0;         // bytes from a row to the next
  const uint8_t* scales = nullptr;  // the first row's F16 scales
  int64_t scales_stride = 0;        // bytes from a row's scales to the next row's
  int64_t num_full_groups = 0;
  int partial_blocks = 0;         // blocks of the last, partial group (0: none)
};

// y[t * y_stride + r] = row r . token t, for num_rows <= 4 (or 8 with one token)
// rows and num_tokens <= 3 tokens (token_stride bytes apart).
void DotTile(PackedFormat format, const PackedRows& rows, int num_rows, const ActivationGroup* tokens,
             int64_t token_stride, int num_tokens, float* y, int64_t y_stride);

// Q4_0 rows written out as Q8_0-layout quants (the nibbles as bytes, offset 8 kept:
// products with them use the Q4_0 activations): `out` holds num_rows rows of
// out_stride bytes. For large batches, a tile is expanded once instead of its
// nibbles being split again for every 3 tokens.
void ExpandQ4Rows(const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride);

}  // namespace tachyon::avx512
