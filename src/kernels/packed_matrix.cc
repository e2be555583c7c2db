#include "kernels/packed_matrix.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "base/check.h"
#include "kernels/block_formats.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/ref/ops.h"
#include "kernels/x86/dot_avx2.h"
#include "kernels/x86/gemm_avx512.h"

namespace tachyon {
namespace {

// Rows a task of MatMul takes: 16 rows of the widest matrices stay in L2 while
// every token of the batch passes over them, 4 rows and 3 tokens at a time.
constexpr int64_t kRowTile = 16;
constexpr int kTileRows = 4;
constexpr int kTileTokens = 3;
constexpr int kTileRowsOneToken = 8;  // decode: more rows, so more independent vpdpbusd chains
// From this many tokens a Q4_0 tile is expanded to bytes once (ExpandQ4Rows)
// rather than its nibbles split for every 3 tokens.
constexpr int64_t kMinTokensToExpand = 12;

int32_t OffsetOf(PackedFormat format) { return format == PackedFormat::kQ8_0 ? 128 : 8; }

// Lane b of vector j holds values 4j..4j+3 of block b: the byte offset, in a
// group whose vectors are `width` bytes, of value i of block b.
size_t VectorOffset(int b, int i, int width = 64) { return width * (i / 4) + 4 * b + i % 4; }

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

PackedMatrix::PackedMatrix(PackedFormat format, int64_t rows, int64_t cols)
    : format_(format),
      rows_(rows),
      cols_(cols),
      num_full_groups_(cols / kPackedGroupValues),
      partial_blocks_(static_cast<int>(cols % kPackedGroupValues / 32)) {
  const size_t bytes = quant_bytes() + cols / 32 * sizeof(uint16_t);
  row_bytes_ = (bytes + 63) / 64 * 64;
  data_.reset(static_cast<uint8_t*>(std::aligned_alloc(64, row_bytes_ * rows_)));
  CHECK(data_ != nullptr) << "out of memory packing a [" << rows << ", " << cols << "] matrix";
  std::memset(data_.get(), 0, row_bytes_ * rows_);  // the padding after each row
}

std::unique_ptr<PackedMatrix> PackedMatrix::Pack(GgmlType type, const uint8_t* data, int64_t rows, int64_t cols) {
  if (!CpuHasAvx512Vnni()) return nullptr;
  return PackAnyCpu(type, data, rows, cols);
}

std::unique_ptr<PackedMatrix> PackedMatrix::PackAnyCpu(GgmlType type, const uint8_t* data, int64_t rows,
                                                       int64_t cols) {
  if ((type != GgmlType::kQ8_0 && type != GgmlType::kQ4_0) || cols % 32 != 0 || rows <= 0) return nullptr;
  const PackedFormat format = type == GgmlType::kQ8_0 ? PackedFormat::kQ8_0 : PackedFormat::kQ4_0;
  std::unique_ptr<PackedMatrix> m(new PackedMatrix(format, rows, cols));
  const int64_t num_blocks = cols / 32;
  const size_t file_row_bytes = *GgmlRowBytes(type, cols);
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* out = m->data_.get() + r * m->row_bytes_;
    uint16_t* scales = reinterpret_cast<uint16_t*>(out + m->quant_bytes());
    const uint8_t* in = data + r * file_row_bytes;
    for (int64_t b = 0; b < num_blocks; ++b) {
      const auto [group, lane, width] = m->Place(out, b);
      if (format == PackedFormat::kQ8_0) {
        const BlockQ8_0& block = reinterpret_cast<const BlockQ8_0*>(in)[b];
        scales[b] = block.d;
        for (int i = 0; i < 32; ++i) group[VectorOffset(lane, i, width)] = static_cast<uint8_t>(block.qs[i] + 128);
      } else {
        // Byte i (0..15) of the block holds values i (low nibble) and i + 16 (high):
        // slice i / 4 holds vector i / 4 low and vector i / 4 + 4 high, so the bytes move whole.
        const BlockQ4_0& block = reinterpret_cast<const BlockQ4_0*>(in)[b];
        scales[b] = block.d;
        for (int i = 0; i < 16; ++i) group[VectorOffset(lane, i, width)] = block.qs[i];
      }
    }
  }
  return m;
}

void PackedMatrix::UnpackRow(int64_t r, uint8_t* out) const {
  const uint8_t* in = row(r);
  const uint16_t* scales = reinterpret_cast<const uint16_t*>(in + quant_bytes());
  for (int64_t b = 0; b < cols_ / 32; ++b) {
    const auto [group, lane, width] = Place(const_cast<uint8_t*>(in), b);
    if (format_ == PackedFormat::kQ8_0) {
      BlockQ8_0& block = reinterpret_cast<BlockQ8_0*>(out)[b];
      block.d = scales[b];
      for (int i = 0; i < 32; ++i) block.qs[i] = static_cast<int8_t>(group[VectorOffset(lane, i, width)] - 128);
    } else {
      BlockQ4_0& block = reinterpret_cast<BlockQ4_0*>(out)[b];
      block.d = scales[b];
      for (int i = 0; i < 16; ++i) block.qs[i] = group[VectorOffset(lane, i, width)];
    }
  }
}

PackedMatrix::Placement PackedMatrix::Place(uint8_t* row, int64_t block) const {
  const int64_t g = block / kPackedGroupBlocks;
  const int lane = static_cast<int>(block % kPackedGroupBlocks);
  const bool partial = g == num_full_groups_;
  return {row + g * group_bytes(), lane, partial ? 4 * partial_blocks_ : 64};
}

void QuantizeActivationGroups(PackedFormat format, const float* x, int64_t n, ActivationGroup* out) {
  CHECK(n % 32 == 0) << "activation rows of " << n << " values are not whole blocks";
  const int64_t num_blocks = n / 32, num_groups = (n + kPackedGroupValues - 1) / kPackedGroupValues;
  thread_local std::vector<BlockQ8_0> blocks;
  blocks.resize(num_blocks);
  if (CpuHasAvx2()) {
    avx2::QuantizeActivationsQ8_0(x, blocks.data(), n);
  } else {
    ref::QuantizeActivationsQ8_0(x, blocks.data(), n);
  }
  std::memset(static_cast<void*>(out), 0, num_groups * sizeof(ActivationGroup));
  const int32_t offset = OffsetOf(format);
  for (int64_t b = 0; b < num_blocks; ++b) {
    ActivationGroup& group = out[b / kPackedGroupBlocks];
    const int lane = static_cast<int>(b % kPackedGroupBlocks);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) {
      group.q[VectorOffset(lane, i)] = blocks[b].qs[i];
      sum += blocks[b].qs[i];
    }
    group.d[lane] = Fp16ToFloat(blocks[b].d);
    group.offset_sums[lane] = -offset * sum;
  }
}

void PackedMatrix::MatMul(const float* x, int64_t num_tokens, float* y, ThreadPool& pool) const {
  const int64_t ng = num_groups();
  std::vector<ActivationGroup> act(num_tokens * ng);  // [num_tokens, num_groups]
  pool.ParallelFor(num_tokens, [&](size_t begin, size_t end, int) {
    for (size_t t = begin; t < end; ++t) QuantizeActivationGroups(format_, x + t * cols_, cols_, &act[t * ng]);
  });
  const int64_t num_tiles = (rows_ + kRowTile - 1) / kRowTile;
  const int64_t token_stride = ng * sizeof(ActivationGroup);
  const avx512::PackedRows all{.rows = data_.get(),
                               .row_stride = static_cast<int64_t>(row_bytes_),
                               .scales = data_.get() + quant_bytes(),
                               .scales_stride = static_cast<int64_t>(row_bytes_),
                               .num_full_groups = num_full_groups_,
                               .partial_blocks = partial_blocks_};
  // Q4_0 tiles are expanded to bytes once when enough tokens pass over them.
  const bool expand = format_ == PackedFormat::kQ4_0 && num_tokens >= kMinTokensToExpand;
  const PackedFormat tile_format = expand ? PackedFormat::kQ8_0 : format_;
  const int64_t expanded_stride = (num_full_groups_ * 512 + 32 * partial_blocks_ + 63) / 64 * 64;
  pool.ParallelFor(num_tiles, [&](size_t tile_begin, size_t tile_end, int) {
    std::unique_ptr<uint8_t[], Free> expanded(
        expand ? static_cast<uint8_t*>(std::aligned_alloc(64, kRowTile * expanded_stride)) : nullptr);
    for (size_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t r0 = tile * kRowTile, r1 = std::min(rows_, r0 + kRowTile);
      avx512::PackedRows rows = all;
      rows.rows = row(r0);
      rows.scales = row(r0) + quant_bytes();
      if (expand) {
        avx512::ExpandQ4Rows(rows, static_cast<int>(r1 - r0), expanded.get(), expanded_stride);
        rows.rows = expanded.get();
        rows.row_stride = expanded_stride;
      }
      for (int64_t t = 0; t < num_tokens; t += kTileTokens) {
        const int nt = static_cast<int>(std::min<int64_t>(kTileTokens, num_tokens - t));
        const int tile_rows = nt == 1 ? kTileRowsOneToken : kTileRows;
        for (int64_t r = r0, nr = 0; r < r1; r += nr) {
          // A one-token tile of fewer than 8 rows goes 4 (or fewer) at a time.
          nr = std::min<int64_t>(r1 - r >= tile_rows ? tile_rows : kTileRows, r1 - r);
          avx512::PackedRows part = rows;
          part.rows += (r - r0) * rows.row_stride;
          part.scales += (r - r0) * rows.scales_stride;
          avx512::DotTile(tile_format, part, static_cast<int>(nr), &act[t * ng], token_stride, nt,
                          y + t * rows_ + r, rows_);
        }
      }
    }
  });
}

}  // namespace tachyon
