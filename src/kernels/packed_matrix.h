// PackedMatrix: a Q8_0, Q4_0, Q5_0, Q4_K, Q6_K or F16 weight matrix rewritten once,
// at load, for the AVX-512 VNNI kernels (x86/gemm_avx512.cc) or, on CPUs without
// them, the AVX2 ones (x86/gemm_avx2.cc, the same layout and results), and the
// product with it.
//
// F16 goes in panels of 32 rows (the last one padded with zero rows): a panel holds
// value k of its 32 rows side by side at [k][32] (64 bytes a k), so that one vector
// load gives 16 rows' weights for one k, and a tile of 32 rows x 12 tokens does 24
// fma per 2 weight conversions and 12 broadcast activations (the row-major F16
// tile of 4 rows x 6 tokens: 24 fma per 4 conversions and 10 vector loads, most
// from L2).
//
// A row is groups of 16 blocks (512 values; for the k-quants a block is 32 values of
// a super-block), the last one partial when the row's blocks are not a multiple of
// 16. In a group, "vector j" (j = 0..7) holds in its 4-byte lane b the values
// 4j..4j+3 of block b (a partial group's vectors have only its blocks' lanes: 4
// bytes a block), so that 8 vpdpbusd leave one exact integer sum per block in each
// lane, with no shuffles. vpdpbusd multiplies unsigned by
// signed bytes: the weight quants are stored unsigned (Q8_0: q + 128; Q4_0: its
// nibble, which is q + 8; Q5_0: its 5 bits, q + 16; Q6_K: its 6 bits, q + 32; Q4_K:
// its nibble, whose offset is the sub-block's min) and each activation block carries
// -offset * (sum of its quants), which takes the offset back out exactly (Q4_K: d *
// sum, which the min multiplies).
//
// A packed row: the quants of every group, then the scales, padded to 64 bytes so
// that every row and every whole group's quants start on a cache line (and 64
// bytes allocated past the last row, which a kernel may read past a partial
// group; the activations' lanes of missing blocks are zero):
//   Q8_0: uint8 u[8][64] a group; F16 d[num_blocks] (544 bytes a group, as the file's 16 blocks)
//   Q4_0: uint8 nibbles[4][64] a group, slice s holding vector s in its low nibbles
//         and vector s + 4 in its high ones; F16 d[num_blocks] (288 bytes, as the file's)
//   Q5_0: nibbles as Q4_0's, then uint64 fifth_bits[8] (bit 4 b + k of word j: the
//         fifth bit of lane b's byte k of vector j); F16 d[num_blocks] (352, as the file's)
//   Q6_K: the low 4 bits as Q4_0's nibbles, then uint64 high_bits[8][2] (bits 4 and 5
//         of lane b's byte k of vector j at bit 4 b + k of words 2 j, 2 j + 1; packed
//         for the AVX2 kernels instead uint8 crumbs[8][16]: byte c of vector j holds
//         bits 4-5 of its bytes c, c + 16, c + 32, c + 48 at bits 0-1 .. 6-7); int8
//         scale of each block's first 16 values[num_blocks], of its second 16
//         [num_blocks], F16 d[num_blocks / 8] (420 bytes a group, as the file's)
//   Q4_K: nibbles as Q4_0's; uint8 scale[num_blocks], uint8 min[num_blocks] (the 6-bit
//         values unpacked), F16 d[num_blocks / 8], F16 dmin[num_blocks / 8] (296 bytes
//         a group; the file's 288)
//
// Invariant: the product of a row and a token is computed by the same sequence of
// operations whatever the number of tokens or rows in the call (see gemm_avx512.h;
// F16: one chain of fma over k in order).
#pragma once

#include <cstdint>
#include <memory>

#include "base/thread_pool.h"
#include "gguf/ggml_type.h"

namespace tachyon {

enum class PackedFormat { kQ8_0, kQ4_0, kQ5_0, kQ4_K, kQ6_K, kF16 };
// The kernels a packed matrix is multiplied with (the layout is the same).
enum class PackedKernels { kAvx512, kAvx2 };

inline constexpr int kPackedGroupBlocks = 16;
inline constexpr int kPackedGroupValues = kPackedGroupBlocks * 32;
inline constexpr int64_t kF16PanelRows = 32;

// One token's activations for 16 blocks, quantized as the reference quantizes
// them (Q8_0: ref::QuantizeActivationsQ8_0; Q8_K for Q4_K and Q6_K), in the packed
// vector layout; d is each block's scale (Q8_K: its super-block's). A partial group
// of 1 or 2 blocks is compact instead (QuantizeActivationGroups).
struct alignas(64) ActivationGroup {
  int8_t q[kPackedGroupValues];           // vector j at q[64 j] (compact: lane b of vector j at dword j nb + b)
  float d[kPackedGroupBlocks];            // block scales (the F16 scale, widened); 0 for padding
  int32_t offset_sums[kPackedGroupBlocks];  // -offset * sum of the block's quants (Q6_K: of its first half)
  int32_t offset_sums_high[kPackedGroupBlocks];  // Q6_K: -offset * sum of the second half's; else 0
  float min_sums[kPackedGroupBlocks];       // Q4_K: d * sum of the block's quants (for the mins); else 0
};
static_assert(sizeof(ActivationGroup) == 768, "ActivationGroup is 512 quants and 16 scales, offsets and sums");

class PackedMatrix {
 public:
  // The packed form of a [rows, cols] matrix of `type` at `data` for the best kernels
  // this CPU has (AVX-512 VNNI, else AVX2), or null when it has neither or the type
  // has no packed form (then MatMul uses the rows as they are).
  static std::unique_ptr<PackedMatrix> Pack(GgmlType type, const uint8_t* data, int64_t rows, int64_t cols);
  // Packs for `kernels` regardless of the CPU (tests: the layout, and each ISA's
  // kernels where the CPU has them).
  static std::unique_ptr<PackedMatrix> PackAnyCpu(GgmlType type, const uint8_t* data, int64_t rows, int64_t cols,
                                                  PackedKernels kernels = PackedKernels::kAvx512);

  PackedFormat format() const { return format_; }
  PackedKernels kernels() const { return kernels_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Groups of 16 blocks, the partial last one included (activation groups a token
  // needs; not F16's).
  int64_t num_groups() const { return num_full_groups_ + (partial_blocks_ > 0); }

  // y [num_tokens, rows] = x [num_tokens, cols] * this^T. Needs the CPU features of kernels().
  void MatMul(const float* x, int64_t num_tokens, float* y, ThreadPool& pool) const;

  // Whether `other` takes the same activations (format and width): MatMulSameInput.
  bool CanShareInput(const PackedMatrix& other) const;
  // ys[i] [num_tokens, rows of i] = x * matrices[i]^T for `count` matrices that share
  // their input (q, k and v; gate and up): the activations quantized once and one
  // parallel loop over all their tiles. Each result is MatMul's, bit for bit.
  static void MatMulSameInput(const PackedMatrix* const* matrices, float* const* ys, int count, const float* x,
                              int64_t num_tokens, ThreadPool& pool);

  // One product of MatMulJobs: y [num_tokens, rows] = x [num_tokens, cols] * matrix^T.
  struct Job {
    const PackedMatrix* matrix;
    const float* x;
    int64_t num_tokens;
    float* y;
  };
  // Every job's product in one parallel loop over all their tiles and panels (a
  // mixture of experts' matrices in a step: one hand-off between threads for all of
  // them, not one each). Jobs with the same x, token count, format and width have
  // their activations quantized once. Each result is MatMul's, bit for bit.
  static void MatMulJobs(const Job* jobs, int count, ThreadPool& pool);

  // Row `row` unpacked back to the file's blocks (F16: values) (tests: the packing loses nothing).
  void UnpackRow(int64_t row, uint8_t* out) const;

 private:
  PackedMatrix(PackedFormat format, PackedKernels kernels, int64_t rows, int64_t cols);
  void PackRow(const uint8_t* in, uint8_t* out) const;  // one row of the file's blocks
  // Rows [16 tile, 16 tile + 16) times every token; `expanded` (or null) a buffer
  // for the tile's quants one a byte.
  void MultiplyTile(int64_t tile, const ActivationGroup* act, int64_t num_tokens, uint8_t* expanded,
                    int64_t expanded_stride, float* y) const;
  // F16: panels [begin, end) times every token.
  void MultiplyPanels(int64_t begin, int64_t end, const float* x, int64_t num_tokens, float* y) const;
  void PackPanel(const uint16_t* file, int64_t p);  // F16 panel p from the file's rows
  int64_t num_panels() const { return (rows_ + kF16PanelRows - 1) / kF16PanelRows; }
  // Bytes of one row expanded to a byte a quant (MultiplyTile's `expanded`), a
  // multiple of 64.
  int64_t ExpandedStride() const { return (num_full_groups_ * 512 + 32 * partial_blocks_ + 63) / 64 * 64; }
  const uint16_t* panel(int64_t p) const {
    return reinterpret_cast<const uint16_t*>(data_.get()) + p * cols_ * kF16PanelRows;
  }
  const uint8_t* row(int64_t r) const { return data_.get() + r * row_bytes_; }
  // Where block `block` of a row starting at `row` goes: its group's quants, its
  // lane, and the bytes of one of that group's vectors (64, or 4 a block if partial).
  struct Placement {
    uint8_t* group;
    int lane;
    int width;
  };
  Placement Place(uint8_t* row, int64_t block) const;
  size_t group_bytes() const {
    return format_ == PackedFormat::kQ8_0   ? 512
           : format_ == PackedFormat::kQ5_0 ? 320
           : format_ == PackedFormat::kQ6_K ? 384
                                            : 256;
  }
  size_t partial_group_bytes() const {
    if (partial_blocks_ == 0) return 0;
    return format_ == PackedFormat::kQ8_0 ? 32 * partial_blocks_
           : format_ == PackedFormat::kQ5_0 ? 16 * partial_blocks_ + 64
           : format_ == PackedFormat::kQ6_K ? 16 * partial_blocks_ + 128
                                            : 16 * partial_blocks_;
  }
  size_t quant_bytes() const { return num_full_groups_ * group_bytes() + partial_group_bytes(); }

  struct Free {
    void operator()(uint8_t* p) const;
  };
  PackedFormat format_;
  PackedKernels kernels_;
  int64_t rows_, cols_, num_full_groups_;
  int partial_blocks_;
  size_t row_bytes_;
  std::unique_ptr<uint8_t[], Free> data_;  // [rows][row_bytes_] (F16: [panels][cols][32]), 64-byte aligned
};

// A compact partial group's (nb blocks) Q5_0 fifth bits, as its quants lie (vector j's
// lane b at dword j nb + b): the low 4 nb bits of each of the 8 masks at `masks`, one
// after the other. Compiled for any x86-64: both kernel files call it.
uint64_t CompactPartialMask(const uint8_t* masks, int nb);

// x [n] as activation groups for weights of `format` (ceil(n / 512) groups; the
// lanes of a partial group's missing blocks are zero, scales and sums included; a
// partial group of 1 or 2 blocks in the compact layout of x86/gemm_avx512.h).
void QuantizeActivationGroups(PackedFormat format, const float* x, int64_t n, ActivationGroup* out);
// The same with every group in the 16-lane layout.
void QuantizeActivationGroupsWide(PackedFormat format, const float* x, int64_t n, ActivationGroup* out);

}  // namespace tachyon
