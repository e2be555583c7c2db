#include "kernels/packed_matrix.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <sys/mman.h>

#include "base/check.h"
#include "kernels/block_formats.h"
#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/ref/kquants.h"
#include "kernels/ref/ops.h"
#include "kernels/x86/dot_avx2.h"
#include "kernels/x86/gemm_avx2.h"
#include "kernels/x86/gemm_avx512.h"

namespace tachyon {
namespace {

// Rows a task of MatMul takes: 16 rows of the widest matrices stay in L2 while
// every token of the batch passes over them: up to avx512::kRowTokens tokens
// together a row at a time, more 3 tokens and 4 rows at a time (the register tile).
constexpr int64_t kRowTile = 16;
constexpr int kTileTokens = 3;
// From this many tokens a tile of nibbles (Q4_0, Q5_0, Q4_K, Q6_K) is expanded to bytes once (ExpandQ4Rows)
// rather than its nibbles split for every 3 tokens.
constexpr int64_t kMinTokensToExpand = 12;
constexpr size_t kHugePage = size_t{2} << 20;
// Bytes allocated past the last packed (or expanded) row: the AVX2 kernels read a
// partial group's last vector half and scales whole (up to 28 and 14 bytes past
// the row's last byte), multiplying what lies there by zero activations.
constexpr size_t kReadSlack = 64;
// F16: the activations of a block of tokens that a thread passes its panels over (MultiplyPanels).
constexpr int64_t kF16TokenBlockBytes = 1 << 20;

// Lane b of vector j holds values 4j..4j+3 of block b: the byte offset, in a
// group whose vectors are `width` bytes, of value i of block b.
size_t VectorOffset(int b, int i, int width = 64) { return width * (i / 4) + 4 * b + i % 4; }

// Value v (0..255) of a Q6_K block as its 6-bit quant (0..63), and back: 128-value
// halves; in each, value 32 q + l has its low 4 bits in ql[64 half + l + 32 (q % 2)]
// (low nibble for q < 2, high for q >= 2) and its high 2 at bit 2 q of qh[32 half + l].
struct Q6Position {
  int ql, ql_shift, qh, qh_shift;
};
Q6Position Q6PositionOf(int v) {
  const int half = v / 128, quarter = v % 128 / 32, l = v % 32;
  return {64 * half + l + 32 * (quarter % 2), quarter >= 2 ? 4 : 0, 32 * half + l, 2 * quarter};
}
int Q6Value(const BlockQ6_K& block, int v) {
  const Q6Position p = Q6PositionOf(v);
  return ((block.ql[p.ql] >> p.ql_shift) & 15) | (((block.qh[p.qh] >> p.qh_shift) & 3) << 4);
}
void SetQ6Value(BlockQ6_K* block, int v, int q) {
  const Q6Position p = Q6PositionOf(v);
  block->ql[p.ql] = static_cast<uint8_t>((block->ql[p.ql] & ~(15 << p.ql_shift)) | ((q & 15) << p.ql_shift));
  block->qh[p.qh] = static_cast<uint8_t>((block->qh[p.qh] & ~(3 << p.qh_shift)) | ((q >> 4) << p.qh_shift));
}

// Bit 4 lane + v % 4 of the 64-bit word `word` of v / 4 (v = 0..31, a block's value)
// in the masks after a group's nibbles, `words` words a vector.
void SetMaskBit(uint8_t* masks, int words, int word, int lane, int v) {
  const int bit = 4 * lane + v % 4;
  masks[8 * (words * (v / 4) + word) + bit / 8] |= static_cast<uint8_t>(1 << (bit % 8));
}
int MaskBit(const uint8_t* masks, int words, int word, int lane, int v) {
  const int bit = 4 * lane + v % 4;
  return (masks[8 * (words * (v / 4) + word) + bit / 8] >> (bit % 8)) & 1;
}

// Q6_K's high 2 bits for the AVX2 kernels (one shift and mask a half vector there,
// where the bit masks take two byte expansions): 16 bytes a vector (v / 4), byte c
// holding those of the vector's bytes c, c + 16, c + 32, c + 48 at bits 0-1, 2-3, 4-5, 6-7.
void SetCrumb(uint8_t* crumbs, int lane, int v, int high) {
  const int i = 4 * lane + v % 4;
  crumbs[16 * (v / 4) + i % 16] |= static_cast<uint8_t>(high << (2 * (i / 16)));
}
int Crumb(const uint8_t* crumbs, int lane, int v) {
  const int i = 4 * lane + v % 4;
  return (crumbs[16 * (v / 4) + i % 16] >> (2 * (i / 16))) & 3;
}

}  // namespace

void PackedMatrix::Free::operator()(uint8_t* p) const { std::free(p); }

PackedMatrix::PackedMatrix(PackedFormat format, PackedKernels kernels, int64_t rows, int64_t cols)
    : format_(format),
      kernels_(kernels),
      rows_(rows),
      cols_(cols),
      num_full_groups_(cols / kPackedGroupValues),
      partial_blocks_(static_cast<int>(cols % kPackedGroupValues / 32)) {
  // Scales: F16 d a block, or (Q4_K) u8 scale and min a sub-block and F16 d and dmin a super-block.
  // Q6_K: i8 scale a 16-value half block and F16 d a super-block.
  const size_t scale_bytes = format == PackedFormat::kQ4_K   ? cols / 32 * 2 + cols / kQK_K * 4
                             : format == PackedFormat::kQ6_K ? cols / 32 * 2 + cols / kQK_K * 2
                                                             : cols / 32 * 2;
  const size_t bytes = quant_bytes() + scale_bytes;
  row_bytes_ = format == PackedFormat::kF16 ? 0 : (bytes + 63) / 64 * 64;
  const size_t total = format == PackedFormat::kF16 ? num_panels() * cols * kF16PanelRows * sizeof(uint16_t)
                                                    : row_bytes_ * rows_;
  // A large matrix in 2 MiB pages where the kernel gives them (transparent huge
  // pages on request), but for its last, partial 2 MiB (no page rounded up): a
  // decode step streams every matrix once, and with 4 KiB pages every 4 KiB of
  // weights cost a TLB miss.
  const bool huge = total >= kHugePage;
  data_.reset(static_cast<uint8_t*>(std::aligned_alloc(huge ? kHugePage : 64, total + kReadSlack)));
  CHECK(data_ != nullptr) << "out of memory packing a [" << rows << ", " << cols << "] matrix";
  std::memset(data_.get() + total, 0, kReadSlack);  // read, never used: defined all the same
  if (huge) ::madvise(data_.get(), total / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice only
}

std::unique_ptr<PackedMatrix> PackedMatrix::Pack(GgmlType type, const uint8_t* data, int64_t rows, int64_t cols) {
  if (CpuHasAvx512Vnni()) return PackAnyCpu(type, data, rows, cols, PackedKernels::kAvx512);
  if (CpuHasAvx2()) return PackAnyCpu(type, data, rows, cols, PackedKernels::kAvx2);
  return nullptr;
}

std::unique_ptr<PackedMatrix> PackedMatrix::PackAnyCpu(GgmlType type, const uint8_t* data, int64_t rows,
                                                       int64_t cols, PackedKernels kernels) {
  PackedFormat format;
  switch (type) {
    case GgmlType::kQ8_0: format = PackedFormat::kQ8_0; break;
    case GgmlType::kQ4_0: format = PackedFormat::kQ4_0; break;
    case GgmlType::kQ5_0: format = PackedFormat::kQ5_0; break;
    case GgmlType::kQ4_K: format = PackedFormat::kQ4_K; break;
    case GgmlType::kQ6_K: format = PackedFormat::kQ6_K; break;
    case GgmlType::kF16: format = PackedFormat::kF16; break;
    default: return nullptr;
  }
  const bool k_quant = format == PackedFormat::kQ4_K || format == PackedFormat::kQ6_K;
  const int64_t block = format == PackedFormat::kF16 ? 1 : k_quant ? kQK_K : 32;
  if (cols <= 0 || cols % block != 0 || rows <= 0) return nullptr;
  std::unique_ptr<PackedMatrix> m(new PackedMatrix(format, kernels, rows, cols));
  const size_t file_row_bytes = *GgmlRowBytes(type, cols);
  const bool f16 = format == PackedFormat::kF16;
  // Units of packing: rows, or F16's panels.
  const int64_t units = f16 ? m->num_panels() : rows;
  auto pack_rows = [&](int64_t begin, int64_t end) {
    for (int64_t u = begin; u < end; ++u) {
      if (f16) {
        m->PackPanel(reinterpret_cast<const uint16_t*>(data), u);
      } else {
        m->PackRow(data + u * file_row_bytes, m->data_.get() + u * m->row_bytes_);
      }
    }
  };
  // Large matrices are packed by a few threads (load time: llama-1b Q8_0's 1.3 GB
  // would take seconds on one).
  const int64_t num_threads = rows * cols >= (int64_t{1} << 22)
                                  ? std::clamp<int64_t>(std::thread::hardware_concurrency(), 1, 8)
                                  : 1;
  std::vector<std::thread> threads;
  const int64_t per_thread = (units + num_threads - 1) / num_threads;
  for (int64_t i = 1; i < num_threads; ++i) {
    threads.emplace_back(pack_rows, std::min(units, i * per_thread), std::min(units, (i + 1) * per_thread));
  }
  pack_rows(0, std::min(units, per_thread));
  for (std::thread& t : threads) t.join();
  return m;
}

void PackedMatrix::PackRow(const uint8_t* in, uint8_t* out) const {
  std::memset(out, 0, row_bytes_);  // the padding, and the masks whose bits are or-ed in
  uint8_t* scales = out + quant_bytes();
  const int64_t num_blocks = cols_ / 32;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto [group, lane, width] = Place(out, b);
    if (format_ == PackedFormat::kQ8_0) {
      // 4 values a lane move together, each + 128 (its top bit flipped).
      const BlockQ8_0& block = reinterpret_cast<const BlockQ8_0*>(in)[b];
      reinterpret_cast<uint16_t*>(scales)[b] = block.d;
      for (int j = 0; j < 8; ++j) {
        uint32_t quad;
        std::memcpy(&quad, block.qs + 4 * j, 4);
        quad ^= 0x80808080u;
        std::memcpy(group + VectorOffset(lane, 4 * j, width), &quad, 4);
      }
    } else if (format_ == PackedFormat::kQ4_0) {
      // Byte i (0..15) of the block holds values i (low nibble) and i + 16 (high):
      // slice i / 4 holds vector i / 4 low and vector i / 4 + 4 high, so the bytes move whole.
      const BlockQ4_0& block = reinterpret_cast<const BlockQ4_0*>(in)[b];
      reinterpret_cast<uint16_t*>(scales)[b] = block.d;
      for (int s = 0; s < 4; ++s) std::memcpy(group + VectorOffset(lane, 4 * s, width), block.qs + 4 * s, 4);
    } else if (format_ == PackedFormat::kQ5_0) {
      const BlockQ5_0& block = reinterpret_cast<const BlockQ5_0*>(in)[b];
      reinterpret_cast<uint16_t*>(scales)[b] = block.d;
      for (int s = 0; s < 4; ++s) std::memcpy(group + VectorOffset(lane, 4 * s, width), block.qs + 4 * s, 4);
      uint32_t high;
      std::memcpy(&high, block.qh, sizeof(high));
      for (int v = 0; v < 32; ++v) {
        if ((high >> v) & 1) SetMaskBit(group + 4 * width, 1, 0, lane, v);
      }
    } else if (format_ == PackedFormat::kQ6_K) {
      const BlockQ6_K& block = reinterpret_cast<const BlockQ6_K*>(in)[b / 8];
      const int j = static_cast<int>(b % 8);
      for (int v = 0; v < 32; ++v) {
        const int q = Q6Value(block, 32 * j + v);
        uint8_t& nibbles = group[VectorOffset(lane, v % 16, width)];
        nibbles = static_cast<uint8_t>(nibbles | (q & 15) << (v < 16 ? 0 : 4));
        if (kernels_ == PackedKernels::kAvx2) {
          SetCrumb(group + 4 * width, lane, v, q >> 4);
        } else {
          if (q & 16) SetMaskBit(group + 4 * width, 2, 0, lane, v);
          if (q & 32) SetMaskBit(group + 4 * width, 2, 1, lane, v);
        }
      }
      scales[b] = static_cast<uint8_t>(block.scales[2 * j]);
      scales[num_blocks + b] = static_cast<uint8_t>(block.scales[2 * j + 1]);
      if (j == 0) reinterpret_cast<uint16_t*>(scales + 2 * num_blocks)[b / 8] = block.d;
    } else {
      // Sub-block j of a super-block: values i in the low (j even) or high (j odd)
      // nibbles of qs[32 (j / 2) + i]; packed as Q4_0's: value i low, i + 16 high.
      const BlockQ4_K& block = reinterpret_cast<const BlockQ4_K*>(in)[b / 8];
      const int j = static_cast<int>(b % 8), shift = 4 * (j % 2);
      const uint8_t* qs = block.qs + 32 * (j / 2);
      for (int i = 0; i < 16; ++i) {
        group[VectorOffset(lane, i, width)] =
            static_cast<uint8_t>(((qs[i] >> shift) & 15) | (((qs[i + 16] >> shift) & 15) << 4));
      }
      ref::UnpackQ4KScale(block.scales, j, &scales[b], &scales[num_blocks + b]);
      if (j == 0) {
        uint16_t* d = reinterpret_cast<uint16_t*>(scales + 2 * num_blocks);
        d[b / 8] = block.d;
        d[num_blocks / 8 + b / 8] = block.dmin;
      }
    }
  }
}

void PackedMatrix::PackPanel(const uint16_t* file, int64_t p) {
  uint16_t* out = reinterpret_cast<uint16_t*>(data_.get()) + p * cols_ * kF16PanelRows;
  for (int64_t i = 0; i < kF16PanelRows; ++i) {
    const int64_t r = p * kF16PanelRows + i;
    const uint16_t* in = file + r * cols_;
    for (int64_t k = 0; k < cols_; ++k) out[k * kF16PanelRows + i] = r < rows_ ? in[k] : 0;
  }
}

void PackedMatrix::UnpackRow(int64_t r, uint8_t* out) const {
  if (format_ == PackedFormat::kF16) {
    const uint16_t* in = panel(r / kF16PanelRows) + r % kF16PanelRows;
    for (int64_t k = 0; k < cols_; ++k) std::memcpy(out + 2 * k, in + k * kF16PanelRows, 2);
    return;
  }
  const uint8_t* in = row(r);
  const uint8_t* scales = in + quant_bytes();
  const int64_t num_blocks = cols_ / 32;
  for (int64_t b = 0; b < num_blocks; ++b) {
    const auto [group, lane, width] = Place(const_cast<uint8_t*>(in), b);
    if (format_ == PackedFormat::kQ8_0) {
      BlockQ8_0& block = reinterpret_cast<BlockQ8_0*>(out)[b];
      block.d = reinterpret_cast<const uint16_t*>(scales)[b];
      for (int i = 0; i < 32; ++i) block.qs[i] = static_cast<int8_t>(group[VectorOffset(lane, i, width)] - 128);
    } else if (format_ == PackedFormat::kQ4_0) {
      BlockQ4_0& block = reinterpret_cast<BlockQ4_0*>(out)[b];
      block.d = reinterpret_cast<const uint16_t*>(scales)[b];
      for (int i = 0; i < 16; ++i) block.qs[i] = group[VectorOffset(lane, i, width)];
    } else if (format_ == PackedFormat::kQ5_0) {
      BlockQ5_0& block = reinterpret_cast<BlockQ5_0*>(out)[b];
      block.d = reinterpret_cast<const uint16_t*>(scales)[b];
      for (int i = 0; i < 16; ++i) block.qs[i] = group[VectorOffset(lane, i, width)];
      uint32_t high = 0;
      for (int v = 0; v < 32; ++v) high |= static_cast<uint32_t>(MaskBit(group + 4 * width, 1, 0, lane, v)) << v;
      std::memcpy(block.qh, &high, sizeof(high));
    } else if (format_ == PackedFormat::kQ6_K) {
      BlockQ6_K& block = reinterpret_cast<BlockQ6_K*>(out)[b / 8];
      const int j = static_cast<int>(b % 8);
      for (int v = 0; v < 32; ++v) {
        const uint8_t* masks = group + 4 * width;
        const int high = kernels_ == PackedKernels::kAvx2
                             ? Crumb(masks, lane, v)
                             : MaskBit(masks, 2, 0, lane, v) | MaskBit(masks, 2, 1, lane, v) << 1;
        const int q = (group[VectorOffset(lane, v % 16, width)] >> (v < 16 ? 0 : 4) & 15) | high << 4;
        SetQ6Value(&block, 32 * j + v, q);
      }
      block.scales[2 * j] = static_cast<int8_t>(scales[b]);
      block.scales[2 * j + 1] = static_cast<int8_t>(scales[num_blocks + b]);
      if (j == 0) block.d = reinterpret_cast<const uint16_t*>(scales + 2 * num_blocks)[b / 8];
    } else {
      BlockQ4_K& block = reinterpret_cast<BlockQ4_K*>(out)[b / 8];
      const int j = static_cast<int>(b % 8), shift = 4 * (j % 2);
      uint8_t* qs = block.qs + 32 * (j / 2);
      for (int i = 0; i < 16; ++i) {
        const uint8_t packed = group[VectorOffset(lane, i, width)];
        qs[i] = static_cast<uint8_t>((qs[i] & ~(15 << shift)) | ((packed & 15) << shift));
        qs[i + 16] = static_cast<uint8_t>((qs[i + 16] & ~(15 << shift)) | ((packed >> 4) << shift));
      }
      if (j == 7) {
        const uint8_t* sc = scales + b - 7;
        const uint8_t* mn = scales + num_blocks + b - 7;
        for (int k = 0; k < 4; ++k) {  // the 6-bit packing ref::UnpackQ4KScale reads
          block.scales[k] = static_cast<uint8_t>(sc[k] | (sc[k + 4] >> 4) << 6);
          block.scales[k + 4] = static_cast<uint8_t>(mn[k] | (mn[k + 4] >> 4) << 6);
          block.scales[k + 8] = static_cast<uint8_t>((sc[k + 4] & 15) | (mn[k + 4] & 15) << 4);
        }
        const uint16_t* d = reinterpret_cast<const uint16_t*>(scales + 2 * num_blocks);
        block.d = d[b / 8];
        block.dmin = d[num_blocks / 8 + b / 8];
      }
    }
  }
}

PackedMatrix::Placement PackedMatrix::Place(uint8_t* row, int64_t block) const {
  const int64_t g = block / kPackedGroupBlocks;
  const int lane = static_cast<int>(block % kPackedGroupBlocks);
  const bool partial = g == num_full_groups_;
  return {row + g * group_bytes(), lane, partial ? 4 * partial_blocks_ : 64};
}

namespace {

// A last group of nb <= kCompactPartialBlocks blocks rewritten in the compact layout
// (x86/gemm_avx512.h): vector j's lane b at dword j nb + b, each with its block's
// scale; its offset once, in vector 0's lane. (The 32-value formats only: a
// k-quant row's partial group is whole super-blocks.)
void CompactLastGroup(ActivationGroup* group, int nb) {
  ActivationGroup compact;
  std::memset(static_cast<void*>(&compact), 0, sizeof(compact));
  for (int b = 0; b < nb; ++b) {
    for (int i = 0; i < 32; ++i) compact.q[VectorOffset(b, i, 4 * nb)] = group->q[VectorOffset(b, i)];
    for (int j = 0; j < 8; ++j) {
      const int lane = j * nb + b;
      compact.d[lane] = group->d[b];
      if (j == 0) {
        compact.offset_sums[lane] = group->offset_sums[b];
        compact.min_sums[lane] = group->min_sums[b];
      }
    }
  }
  *group = compact;
}

}  // namespace

uint64_t CompactPartialMask(const uint8_t* masks, int nb) {
  uint64_t out = 0;
  for (int j = 0; j < 8; ++j) {
    uint64_t bits;
    std::memcpy(&bits, masks + 8 * j, sizeof(bits));
    out |= (bits & ((uint64_t{1} << (4 * nb)) - 1)) << (4 * nb * j);
  }
  return out;
}

void QuantizeActivationGroups(PackedFormat format, const float* x, int64_t n, ActivationGroup* out) {
  const int partial = static_cast<int>(n / 32 % kPackedGroupBlocks);
  const bool k_quant = format == PackedFormat::kQ4_K || format == PackedFormat::kQ6_K;
  if (!k_quant && partial > 0 && partial <= avx512::kCompactPartialBlocks) {
    QuantizeActivationGroupsWide(format, x, n, out);
    CompactLastGroup(&out[n / 32 / kPackedGroupBlocks], partial);
    return;
  }
  QuantizeActivationGroupsWide(format, x, n, out);
}

void QuantizeActivationGroupsWide(PackedFormat format, const float* x, int64_t n, ActivationGroup* out) {
  CHECK(n % 32 == 0) << "activation rows of " << n << " values are not whole blocks";
  const int64_t num_blocks = n / 32, num_groups = (n + kPackedGroupValues - 1) / kPackedGroupValues;
  std::memset(static_cast<void*>(out), 0, num_groups * sizeof(ActivationGroup));
  if (format == PackedFormat::kQ4_K || format == PackedFormat::kQ6_K) {
    // Q8_K, 8 sub-blocks of 32 to a super-block: its scale in each sub-block's lane,
    // and d * (sum of the sub-block's quants) for Q4_K's mins, or -32 * the sums of
    // its halves for Q6_K's offset.
    CHECK(n % kQK_K == 0) << "k-quant activation rows of " << n << " values are not whole super-blocks";
    thread_local std::vector<BlockQ8_K> super_blocks;
    super_blocks.resize(n / kQK_K);
    if (CpuHasAvx2()) {
      avx2::QuantizeActivationsQ8_K(x, super_blocks.data(), n);
    } else {
      ref::QuantizeActivationsQ8_K(x, super_blocks.data(), n);
    }
    for (int64_t b = 0; b < num_blocks; ++b) {
      ActivationGroup& group = out[b / kPackedGroupBlocks];
      const int lane = static_cast<int>(b % kPackedGroupBlocks);
      const BlockQ8_K& block = super_blocks[b / 8];
      const int j = static_cast<int>(b % 8);
      for (int v = 0; v < 8; ++v) std::memcpy(group.q + VectorOffset(lane, 4 * v), block.qs + 32 * j + 4 * v, 4);
      group.d[lane] = block.d;
      if (format == PackedFormat::kQ4_K) {
        group.min_sums[lane] = block.d * static_cast<float>(block.bsums[2 * j] + block.bsums[2 * j + 1]);
      } else {
        group.offset_sums[lane] = -32 * block.bsums[2 * j];
        group.offset_sums_high[lane] = -32 * block.bsums[2 * j + 1];
      }
    }
    return;
  }
  thread_local std::vector<BlockQ8_0> blocks;
  blocks.resize(num_blocks);
  if (CpuHasAvx2()) {
    avx2::QuantizeActivationsQ8_0(x, blocks.data(), n);
  } else {
    ref::QuantizeActivationsQ8_0(x, blocks.data(), n);
  }
  const int32_t offset = format == PackedFormat::kQ8_0 ? 128 : format == PackedFormat::kQ5_0 ? 16 : 8;
  for (int64_t b = 0; b < num_blocks; ++b) {
    ActivationGroup& group = out[b / kPackedGroupBlocks];
    const int lane = static_cast<int>(b % kPackedGroupBlocks);
    int32_t sum = 0;
    for (int i = 0; i < 32; ++i) sum += blocks[b].qs[i];
    for (int v = 0; v < 8; ++v) std::memcpy(group.q + VectorOffset(lane, 4 * v), blocks[b].qs + 4 * v, 4);
    group.d[lane] = Fp16ToFloat(blocks[b].d);
    group.offset_sums[lane] = -offset * sum;
  }
}

void PackedMatrix::MatMul(const float* x, int64_t num_tokens, float* y, ThreadPool& pool) const {
  const PackedMatrix* self = this;
  MatMulSameInput(&self, &y, 1, x, num_tokens, pool);
}

bool PackedMatrix::CanShareInput(const PackedMatrix& other) const {
  return format_ == other.format_ && cols_ == other.cols_;
}

void PackedMatrix::MatMulSameInput(const PackedMatrix* const* matrices, float* const* ys, int count, const float* x,
                                   int64_t num_tokens, ThreadPool& pool) {
  for (int i = 1; i < count; ++i) {
    CHECK(matrices[0]->CanShareInput(*matrices[i])) << "matrices of another format or width";
  }
  std::vector<Job> jobs(count);
  for (int i = 0; i < count; ++i) jobs[i] = {matrices[i], x, num_tokens, ys[i]};
  MatMulJobs(jobs.data(), count, pool);
}

void PackedMatrix::MatMulJobs(const Job* jobs, int count, ThreadPool& pool) {
  // The activations each quantized job reads: one set per distinct (x, tokens,
  // format, width), [num_tokens, num_groups] at act[sets[s].start].
  struct ActivationSet {
    const Job* job;  // the first job that reads it
    int64_t start;   // its first ActivationGroup
  };
  std::vector<ActivationSet> sets;
  std::vector<int> set_of(count, -1);
  std::vector<int64_t> row_starts{0};  // set s's first token among all the sets' tokens
  int64_t num_groups_total = 0;
  for (int i = 0; i < count; ++i) {
    const Job& job = jobs[i];
    if (job.matrix->format_ == PackedFormat::kF16 || job.num_tokens == 0) continue;
    for (size_t s = 0; s < sets.size() && set_of[i] < 0; ++s) {
      const Job& other = *sets[s].job;
      if (other.x == job.x && other.num_tokens == job.num_tokens && other.matrix->CanShareInput(*job.matrix)) {
        set_of[i] = static_cast<int>(s);
      }
    }
    if (set_of[i] >= 0) continue;
    set_of[i] = static_cast<int>(sets.size());
    sets.push_back({&job, num_groups_total});
    num_groups_total += job.num_tokens * job.matrix->num_groups();
    row_starts.push_back(row_starts.back() + job.num_tokens);
  }
  // Not zeroed here: QuantizeActivationGroups writes every byte.
  std::unique_ptr<ActivationGroup[]> act = std::make_unique_for_overwrite<ActivationGroup[]>(num_groups_total);
  pool.ParallelFor(row_starts.back(), [&](size_t begin, size_t end, int) {
    size_t s = 0;
    for (size_t row = begin; row < end; ++row) {
      while (static_cast<int64_t>(row) >= row_starts[s + 1]) ++s;
      const Job& job = *sets[s].job;
      const PackedMatrix& m = *job.matrix;
      const int64_t t = static_cast<int64_t>(row) - row_starts[s];
      QuantizeActivationGroups(m.format_, job.x + t * m.cols_, m.cols_, &act[sets[s].start + t * m.num_groups()]);
    }
  });
  // One loop over every job's work items (tiles of kRowTile rows; F16: panels):
  // item_starts[i] is job i's first.
  std::vector<int64_t> item_starts(count + 1, 0);
  int64_t expanded_stride = 0;  // the widest expanded tile row among the jobs that expand
  std::vector<bool> expand(count, false);
  for (int i = 0; i < count; ++i) {
    const PackedMatrix& m = *jobs[i].matrix;
    const int64_t items = jobs[i].num_tokens == 0            ? 0
                          : m.format_ == PackedFormat::kF16 ? m.num_panels()
                                                            : (m.rows_ + kRowTile - 1) / kRowTile;
    item_starts[i + 1] = item_starts[i] + items;
    // Nibble tiles are expanded to bytes once when enough tokens pass over them.
    expand[i] = m.format_ != PackedFormat::kF16 && m.format_ != PackedFormat::kQ8_0 &&
                jobs[i].num_tokens >= kMinTokensToExpand;
    if (expand[i]) expanded_stride = std::max(expanded_stride, m.ExpandedStride());
  }
  pool.ParallelFor(item_starts[count], [&](size_t item_begin, size_t item_end, int) {
    std::unique_ptr<uint8_t[], Free> expanded;
    int i = 0;
    for (size_t item = item_begin; item < item_end;) {
      while (static_cast<int64_t>(item) >= item_starts[i + 1]) ++i;
      const Job& job = jobs[i];
      const PackedMatrix& m = *job.matrix;
      const int64_t first = item_starts[i];
      if (m.format_ == PackedFormat::kF16) {  // this job's panels in the chunk, in one call
        const int64_t last = std::min<int64_t>(static_cast<int64_t>(item_end), item_starts[i + 1]);
        m.MultiplyPanels(static_cast<int64_t>(item) - first, last - first, job.x, job.num_tokens, job.y);
        item = static_cast<size_t>(last);
        continue;
      }
      if (expand[i] && expanded == nullptr) {
        const size_t bytes = kRowTile * expanded_stride + kReadSlack;
        expanded.reset(static_cast<uint8_t*>(std::aligned_alloc(64, bytes)));
        // ExpandRows writes a partial group's lanes only; the rest is read past them.
        std::memset(expanded.get(), 0, bytes);
      }
      m.MultiplyTile(static_cast<int64_t>(item) - first, &act[sets[set_of[i]].start], job.num_tokens,
                     expand[i] ? expanded.get() : nullptr, m.ExpandedStride(), job.y);
      ++item;
    }
  });
}

void PackedMatrix::MultiplyTile(int64_t tile, const ActivationGroup* act, int64_t num_tokens, uint8_t* expanded,
                                int64_t expanded_stride, float* y) const {
  const int64_t ng = num_groups(), token_stride = ng * sizeof(ActivationGroup);
  const int64_t r0 = tile * kRowTile, r1 = std::min(rows_, r0 + kRowTile);
  avx512::PackedRows rows{.rows = row(r0),
                          .row_stride = static_cast<int64_t>(row_bytes_),
                          .scales = row(r0) + quant_bytes(),
                          .scales_stride = static_cast<int64_t>(row_bytes_),
                          .num_blocks = cols_ / 32,
                          .num_full_groups = num_full_groups_,
                          .partial_blocks = partial_blocks_};
  const bool avx2 = kernels_ == PackedKernels::kAvx2;
  if (expanded != nullptr) {
    (avx2 ? avx2::ExpandRows : avx512::ExpandRows)(format_, rows, static_cast<int>(r1 - r0), expanded,
                                                   expanded_stride);
    rows.rows = expanded;
    rows.row_stride = expanded_stride;
  }
  const bool bytes = expanded != nullptr || format_ == PackedFormat::kQ8_0;
  // A few tokens together, a row at a time (avx512::kRowTokens); more, 3 at a time
  // through the 4-row register tile, the last one or two a row at a time.
  const int64_t tile_tokens = num_tokens <= avx512::kRowTokens ? num_tokens : kTileTokens;
  for (int64_t t = 0; t < num_tokens; t += tile_tokens) {
    const int nt = static_cast<int>(std::min<int64_t>(tile_tokens, num_tokens - t));
    for (int64_t r = r0, nr = 0; r < r1; r += nr) {
      nr = nt == kTileTokens && num_tokens > avx512::kRowTokens ? std::min<int64_t>(4, r1 - r) : r1 - r;
      avx512::PackedRows part = rows;
      part.rows += (r - r0) * rows.row_stride;
      part.scales += (r - r0) * rows.scales_stride;
      (avx2 ? avx2::DotTile : avx512::DotTile)(format_, bytes, part, static_cast<int>(nr), &act[t * ng],
                                               token_stride, nt, y + t * rows_ + r, rows_);
    }
  }
}

// A large batch goes in blocks of tokens whose activations (kF16TokenBlockBytes of
// F32) stay in L2 while the thread passes its panels over them, each panel (32 x
// cols F16) staying there for the block's tiles of 12 tokens. A few tokens (a decode
// step) go two panels at a time: four chains of fma a token hide their latency, and
// the weights stream from memory.
void PackedMatrix::MultiplyPanels(int64_t begin, int64_t end, const float* x, int64_t num_tokens, float* y) const {
  constexpr int64_t kTileTokens = avx512::kF16PanelTokens;
  const int64_t block_tokens =
      std::max<int64_t>(1, kF16TokenBlockBytes / (cols_ * static_cast<int64_t>(sizeof(float))) / kTileTokens) *
      kTileTokens;
  const bool pairs = num_tokens <= avx512::kF16PanelPairTokens;
  for (int64_t t0 = 0; t0 < num_tokens; t0 += block_tokens) {
    const int64_t t1 = std::min(num_tokens, t0 + block_tokens);
    for (int64_t p = begin, np = 0; p < end; p += np) {
      np = pairs && p + 1 < end ? 2 : 1;
      const int rows = static_cast<int>(std::min(rows_ - p * kF16PanelRows, np * kF16PanelRows));
      for (int64_t t = t0; t < t1; t += kTileTokens) {
        const int nt = static_cast<int>(std::min(kTileTokens, t1 - t));
        (kernels_ == PackedKernels::kAvx2 ? avx2::DotPanelsF16 : avx512::DotPanelsF16)(
            panel(p), static_cast<int>(np), cols_, rows, x + t * cols_, cols_, nt, y + t * rows_ + p * kF16PanelRows,
            rows_);
      }
    }
  }
}

}  // namespace tachyon
