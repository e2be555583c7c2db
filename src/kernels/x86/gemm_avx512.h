// AVX-512 VNNI products of Q8_0 / Q4_0 / Q5_0 / Q4_K / Q6_K weights with Q8_0 or
// Q8_K activations, and of F16 weights with F32 activations, on the packed layouts
// of kernels/packed_matrix.h. Call only when
// CpuHasAvx512Vnni().
//
// One (row, token) pair is computed the same way whichever tile it falls in:
// per group of 16 blocks, the exact integer block sums (a lane per block; Q6_K: per
// 16-value half), then acc += float(sums) * (d_w * d_x) [- min_w * min_sums] in the
// group's order, then one fixed reduction of the 16 lanes. So a token's result does not depend on how many
// tokens or rows share its call (the engine's differential tests rely on it).
#pragma once

#include <cstdint>

#include "kernels/packed_matrix.h"

namespace tachyon::avx512 {

// A partial last group of at most this many blocks is computed compactly: its
// activations (QuantizeActivationGroups) laid out as its weights, vector j's lane b
// at dword j * nb + b, with their scales, offsets and min sums in those lanes.
inline constexpr int kCompactPartialBlocks = 2;

// num_rows consecutive rows of a PackedMatrix.
struct PackedRows {
  const uint8_t* rows = nullptr;  // the first row
  int64_t row_stride = 0;         // bytes from a row to the next
  const uint8_t* scales = nullptr;  // the first row's scales (kernels/packed_matrix.h)
  int64_t scales_stride = 0;        // bytes from a row's scales to the next row's
  int64_t num_blocks = 0;           // blocks of a row (k-quants: 32-value sub-blocks)
  int64_t num_full_groups = 0;
  int partial_blocks = 0;         // blocks of the last, partial group (0: none)
};

// Up to this many tokens (a decode step of a few sequences) a product goes a row
// at a time, every token's chain taking each weight vector once: like one token,
// it is bound by reading the weights, and rows read in address order keep the
// hardware prefetcher ahead.
inline constexpr int kRowTokens = 8;

// y[t * y_stride + r] = row r . token t (tokens token_stride bytes apart): 3 tokens
// and up to 4 rows in the register tile, else (num_tokens <= kRowTokens, any
// num_rows) a row at a time. Both give the same results, bit for bit.
// `bytes`: the rows' quants are one a byte (Q8_0, or expanded by ExpandRows).
void DotTile(PackedFormat format, bool bytes, const PackedRows& rows, int num_rows, const ActivationGroup* tokens,
             int64_t token_stride, int num_tokens, float* y, int64_t y_stride);

// F16 panels (kernels/packed_matrix.h) times F32 activations (tokens x_stride
// values apart): y[t * y_stride + r] for the first num_rows rows of num_panels (1, or
// 2 for up to kF16PanelPairTokens tokens) consecutive panels of 32 rows, num_tokens
// <= kF16PanelTokens. Each (row, token) is one chain of fma in k order, so results
// are bit-identical whatever the tile.
inline constexpr int kF16PanelTokens = 12;
inline constexpr int kF16PanelPairTokens = 6;
void DotPanelsF16(const uint16_t* panels, int num_panels, int64_t cols, int num_rows, const float* x,
                  int64_t x_stride, int num_tokens, float* y, int64_t y_stride);

// Q4_0 / Q5_0 / Q4_K / Q6_K rows' quants written out one a byte (as they are: products
// with them use the same activations and scales): `out` holds num_rows rows of
// out_stride bytes. For large batches, a tile is expanded once instead of its
// nibbles being split again for every 3 tokens.
void ExpandRows(PackedFormat format, const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride);

}  // namespace tachyon::avx512
