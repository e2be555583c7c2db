#include "kernels/matmul.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/block_formats.h"
#include "kernels/cpu_features.h"
#include "kernels/packed_matrix.h"
#include "kernels/ref/kquants.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quantize.h"
#include "kernels/ref/unpack.h"
#include "kernels/ref/unpacked_quants.h"
#include "kernels/x86/dot_avx2.h"
#include "kernels/x86/unpacked_avx2.h"

namespace tachyon {
namespace {

// Rows per tile: 16 rows of the largest matrices stay within L2 while every
// token of the batch passes over them.
constexpr int64_t kRowTile = 16;
// Expanding a tile costs a pass over its rows; below this many tokens it does
// not pay for itself (decode batches stay on the packed rows).
constexpr int64_t kMinTokensToExpand = 16;

using DotFn = float (*)(const void* w_row, const void* x_row, int64_t n);
// One weight row against 4 activation rows x_row + k * x_stride (bytes).
using Dot4Fn = void (*)(const void* w_row, const void* x_rows, int64_t x_stride, int64_t n, float* out);

// The form the activations are given to the dot product in.
enum class ActivationFormat { kF32, kQ8_0, kQ8_0S, kQ8_K };

struct Kernel {
  DotFn dot;
  ActivationFormat activations;
  Dot4Fn dot4 = nullptr;  // the same dots, 4 tokens at a time (bit-identical), where there is one
};

template <float (*F)(const float*, const float*, int64_t)>
float DotF32Adapter(const void* w, const void* x, int64_t n) {
  return F(static_cast<const float*>(w), static_cast<const float*>(x), n);
}
template <float (*F)(const uint16_t*, const float*, int64_t)>
float DotU16Adapter(const void* w, const void* x, int64_t n) {
  return F(static_cast<const uint16_t*>(w), static_cast<const float*>(x), n);
}

template <GgmlType T>
float RefUnpackedDotOf(const void* w, const void* x, int64_t n) {
  return ref::DotUnpacked(T, w, x, n);
}

DotFn RefUnpackedDot(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1: return RefUnpackedDotOf<GgmlType::kQ4_1>;
    case GgmlType::kQ5_0: return RefUnpackedDotOf<GgmlType::kQ5_0>;
    case GgmlType::kQ5_1: return RefUnpackedDotOf<GgmlType::kQ5_1>;
    case GgmlType::kIQ4_NL: return RefUnpackedDotOf<GgmlType::kIQ4_NL>;
    case GgmlType::kQ2_K: return RefUnpackedDotOf<GgmlType::kQ2_K>;
    case GgmlType::kQ3_K: return RefUnpackedDotOf<GgmlType::kQ3_K>;
    case GgmlType::kQ5_K: return RefUnpackedDotOf<GgmlType::kQ5_K>;
    case GgmlType::kIQ4_XS: return RefUnpackedDotOf<GgmlType::kIQ4_XS>;
    default: return nullptr;
  }
}

Kernel SelectKernel(GgmlType type, KernelPath path) {
  const bool simd = path == KernelPath::kAuto && CpuHasAvx2();
  switch (type) {
    using A = ActivationFormat;
    case GgmlType::kF32:
      return {simd ? DotF32Adapter<avx2::DotF32> : DotF32Adapter<ref::DotF32>, A::kF32,
              simd ? avx2::DotF32x4 : nullptr};
    case GgmlType::kF16:
      return {simd ? DotU16Adapter<avx2::DotF16> : DotU16Adapter<ref::DotF16>, A::kF32,
              simd ? avx2::DotF16x4 : nullptr};
    case GgmlType::kBF16:
      return {simd ? DotU16Adapter<avx2::DotBF16> : DotU16Adapter<ref::DotBF16>, A::kF32};
    case GgmlType::kQ8_0:
      return {simd ? avx2::DotQ8_0Q8_0 : ref::DotQ8_0Q8_0, A::kQ8_0, simd ? avx2::DotQ8_0Q8_0x4 : nullptr};
    case GgmlType::kQ4_0: return {simd ? avx2::DotQ4_0Q8_0 : ref::DotQ4_0Q8_0, A::kQ8_0};
    case GgmlType::kQ4_K:
      return {simd ? avx2::DotQ4_KQ8_K : ref::DotQ4_KQ8_K, A::kQ8_K, simd ? avx2::DotQ4_KQ8_Kx4 : nullptr};
    case GgmlType::kQ6_K:
      return {simd ? avx2::DotQ6_KQ8_K : ref::DotQ6_KQ8_K, A::kQ8_K, simd ? avx2::DotQ6_KQ8_Kx4 : nullptr};
    default: {
      // The formats computed through unpacking (ref/unpacked_quants.h).
      const ref::UnpackedActivations form = ref::ActivationsFor(type);
      const A activations = form == ref::UnpackedActivations::kQ8_0S ? A::kQ8_0S
                            : form == ref::UnpackedActivations::kQ8_0 ? A::kQ8_0
                                                                     : A::kQ8_K;
      CHECK(ref::IsUnpackedType(type)) << "MatMul has no kernel for " << GgmlTypeName(type);
      if (simd) return {avx2::FindUnpackedDot(type), activations, avx2::FindUnpackedDot4(type)};
      return {RefUnpackedDot(type), activations};
    }
  }
}

// Expands one weight row into a type whose dot with the same activations is
// bit-identical but cheaper per token: Q4_0 -> Q8_0 (no nibble unpacking per
// token). F16 is not expanded: converting in registers reads half the bytes,
// and the dots are load-bound (measured: llama-1b F16 pp512 40.3 -> 34.4 tok/s
// when expanded to F32).
using ExpandFn = void (*)(const uint8_t* row, uint8_t* out, int64_t cols);

void ExpandQ4_0ToQ8_0(const uint8_t* row, uint8_t* out, int64_t cols) {
  const BlockQ4_0* in = reinterpret_cast<const BlockQ4_0*>(row);
  BlockQ8_0* q8 = reinterpret_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < cols / kQK4_0; ++b) {
    q8[b].d = in[b].d;
    for (int i = 0; i < kQK4_0 / 2; ++i) {
      q8[b].qs[i] = static_cast<int8_t>((in[b].qs[i] & 0x0f) - 8);
      q8[b].qs[i + kQK4_0 / 2] = static_cast<int8_t>((in[b].qs[i] >> 4) - 8);
    }
  }
}

struct Expansion {
  ExpandFn expand = nullptr;  // null: use the rows as they are
  GgmlType type = GgmlType::kF32;
};

Expansion SelectExpansion(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_0: return {ExpandQ4_0ToQ8_0, GgmlType::kQ8_0};
    default: return {};
  }
}

}  // namespace

bool IsMatMulType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16:
    case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_K: case GgmlType::kQ6_K:
      return true;
    default:
      return ref::IsUnpackedType(type);
  }
}

void PackForMatMul(WeightMatrix* w) {
  if (w->packed != nullptr || w->data == nullptr) return;
  w->packed = PackedMatrix::Pack(w->type, w->data, w->rows, w->cols);
}

void MatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool,
            KernelPath path) {
  if (w.packed != nullptr && path == KernelPath::kAuto) {
    w.packed->MatMul(x, num_tokens, y, pool);
    return;
  }
  const Kernel kernel = SelectKernel(w.type, path);
  const uint64_t row_bytes = *GgmlRowBytes(w.type, w.cols);
  // Activations in the kernel's input format: [num_tokens, x_row_bytes].
  std::vector<uint8_t> quantized;
  const uint8_t* xs = reinterpret_cast<const uint8_t*>(x);
  uint64_t x_row_bytes = w.cols * sizeof(float);
  if (kernel.activations != ActivationFormat::kF32) {
    const bool k_quant = kernel.activations == ActivationFormat::kQ8_K;
    const bool with_sums = kernel.activations == ActivationFormat::kQ8_0S;
    x_row_bytes = with_sums ? w.cols / kQK8_0 * sizeof(BlockQ8_0S)
                            : *GgmlRowBytes(k_quant ? GgmlType::kQ8_K : GgmlType::kQ8_0, w.cols);
    quantized.resize(num_tokens * x_row_bytes);
    const bool simd = path == KernelPath::kAuto && CpuHasAvx2();
    pool.ParallelFor(num_tokens, [&](size_t begin, size_t end, int) {
      for (size_t t = begin; t < end; ++t) {
        const float* row = x + t * w.cols;
        uint8_t* out = quantized.data() + t * x_row_bytes;
        if (k_quant) {
          ref::QuantizeActivationsQ8_K(row, out, w.cols);
        } else if (with_sums) {
          ref::QuantizeActivationsQ8_0S(row, out, w.cols);
        } else if (simd) {
          avx2::QuantizeActivationsQ8_0(row, out, w.cols);
        } else {
          ref::QuantizeActivationsQ8_0(row, out, w.cols);
        }
      }
    });
    xs = quantized.data();
  }
  // For a large batch, each tile of rows is expanded once into the cheaper
  // type; small batches read the rows as they are (expansion would cost more than it saves).
  const Expansion expansion = num_tokens >= kMinTokensToExpand ? SelectExpansion(w.type) : Expansion{};
  const Kernel tile_kernel = expansion.expand ? SelectKernel(expansion.type, path) : kernel;
  const uint64_t tile_row_bytes = expansion.expand ? *GgmlRowBytes(expansion.type, w.cols) : row_bytes;
  const int64_t num_tiles = (w.rows + kRowTile - 1) / kRowTile;
  pool.ParallelFor(num_tiles, [&](size_t tile_begin, size_t tile_end, int) {
    std::vector<uint8_t> expanded(expansion.expand ? kRowTile * tile_row_bytes : 0);
    for (size_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t r0 = tile * kRowTile, r1 = std::min(w.rows, r0 + kRowTile);
      const uint8_t* rows = w.data + r0 * row_bytes;
      if (expansion.expand) {
        for (int64_t r = r0; r < r1; ++r) {
          expansion.expand(w.data + r * row_bytes, expanded.data() + (r - r0) * tile_row_bytes, w.cols);
        }
        rows = expanded.data();
      }
      int64_t t = 0;
      if (tile_kernel.dot4 != nullptr) {
        for (; t + 4 <= num_tokens; t += 4) {
          for (int64_t r = r0; r < r1; ++r) {
            float out[4];
            tile_kernel.dot4(rows + (r - r0) * tile_row_bytes, xs + t * x_row_bytes, x_row_bytes, w.cols, out);
            for (int k = 0; k < 4; ++k) y[(t + k) * w.rows + r] = out[k];
          }
        }
      }
      for (; t < num_tokens; ++t) {
        const uint8_t* x_row = xs + t * x_row_bytes;
        float* y_row = y + t * w.rows;
        for (int64_t r = r0; r < r1; ++r) {
          y_row[r] = tile_kernel.dot(rows + (r - r0) * tile_row_bytes, x_row, w.cols);
        }
      }
    }
  });
}

void MatMulSameInput(std::initializer_list<MatMulTarget> targets, const float* x, int64_t num_tokens,
                     ThreadPool& pool) {
  std::vector<const PackedMatrix*> packed;
  std::vector<float*> ys;
  for (const MatMulTarget& t : targets) {
    if (t.w->packed == nullptr || (!packed.empty() && !packed[0]->CanShareInput(*t.w->packed))) {
      for (const MatMulTarget& each : targets) MatMul(*each.w, x, num_tokens, each.y, pool);
      return;
    }
    packed.push_back(t.w->packed.get());
    ys.push_back(t.y);
  }
  PackedMatrix::MatMulSameInput(packed.data(), ys.data(), static_cast<int>(packed.size()), x, num_tokens, pool);
}

void DequantizeWeightRow(const WeightMatrix& w, int64_t row, float* out) {
  const uint64_t row_bytes = *GgmlRowBytes(w.type, w.cols);
  ref::DequantizeRow(w.type, w.data + row * row_bytes, out, w.cols);
}

}  // namespace tachyon
