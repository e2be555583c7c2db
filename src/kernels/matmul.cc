#include "kernels/matmul.h"

#include <algorithm>

#include "base/check.h"
#include "kernels/block_formats.h"
#include "kernels/cpu_features.h"
#include "kernels/ref/kquants.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quantize.h"
#include "kernels/x86/dot_avx2.h"

namespace tachyon {
namespace {

// Rows per tile: 16 rows of the largest matrices stay within L2 while every
// token of the batch passes over them.
constexpr int64_t kRowTile = 16;

using DotFn = float (*)(const void* w_row, const void* x_row, int64_t n);

// The form the activations are given to the dot product in.
enum class ActivationFormat { kF32, kQ8_0, kQ8_K };

struct Kernel {
  DotFn dot;
  ActivationFormat activations;
};

template <float (*F)(const float*, const float*, int64_t)>
float DotF32Adapter(const void* w, const void* x, int64_t n) {
  return F(static_cast<const float*>(w), static_cast<const float*>(x), n);
}
template <float (*F)(const uint16_t*, const float*, int64_t)>
float DotU16Adapter(const void* w, const void* x, int64_t n) {
  return F(static_cast<const uint16_t*>(w), static_cast<const float*>(x), n);
}

Kernel SelectKernel(GgmlType type, KernelPath path) {
  const bool simd = path == KernelPath::kAuto && CpuHasAvx2();
  switch (type) {
    using A = ActivationFormat;
    case GgmlType::kF32:
      return {simd ? DotF32Adapter<avx2::DotF32> : DotF32Adapter<ref::DotF32>, A::kF32};
    case GgmlType::kF16:
      return {simd ? DotU16Adapter<avx2::DotF16> : DotU16Adapter<ref::DotF16>, A::kF32};
    case GgmlType::kBF16:
      return {simd ? DotU16Adapter<avx2::DotBF16> : DotU16Adapter<ref::DotBF16>, A::kF32};
    case GgmlType::kQ8_0: return {simd ? avx2::DotQ8_0Q8_0 : ref::DotQ8_0Q8_0, A::kQ8_0};
    case GgmlType::kQ4_0: return {simd ? avx2::DotQ4_0Q8_0 : ref::DotQ4_0Q8_0, A::kQ8_0};
    case GgmlType::kQ4_K: return {simd ? avx2::DotQ4_KQ8_K : ref::DotQ4_KQ8_K, A::kQ8_K};
    case GgmlType::kQ6_K: return {simd ? avx2::DotQ6_KQ8_K : ref::DotQ6_KQ8_K, A::kQ8_K};
    default: CHECK(false) << "MatMul has no kernel for " << GgmlTypeName(type); return {};
  }
}

}  // namespace

bool IsMatMulType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16:
    case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_K: case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void MatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool,
            KernelPath path) {
  const Kernel kernel = SelectKernel(w.type, path);
  const uint64_t row_bytes = *GgmlRowBytes(w.type, w.cols);
  // Activations in the kernel's input format: [num_tokens, x_row_bytes].
  std::vector<uint8_t> quantized;
  const uint8_t* xs = reinterpret_cast<const uint8_t*>(x);
  uint64_t x_row_bytes = w.cols * sizeof(float);
  if (kernel.activations != ActivationFormat::kF32) {
    const bool k_quant = kernel.activations == ActivationFormat::kQ8_K;
    x_row_bytes = *GgmlRowBytes(k_quant ? GgmlType::kQ8_K : GgmlType::kQ8_0, w.cols);
    quantized.resize(num_tokens * x_row_bytes);
    const bool simd = path == KernelPath::kAuto && CpuHasAvx2();
    pool.ParallelFor(num_tokens, [&](size_t begin, size_t end, int) {
      for (size_t t = begin; t < end; ++t) {
        const float* row = x + t * w.cols;
        uint8_t* out = quantized.data() + t * x_row_bytes;
        if (k_quant) {
          ref::QuantizeActivationsQ8_K(row, out, w.cols);
        } else if (simd) {
          avx2::QuantizeActivationsQ8_0(row, out, w.cols);
        } else {
          ref::QuantizeActivationsQ8_0(row, out, w.cols);
        }
      }
    });
    xs = quantized.data();
  }
  const int64_t num_tiles = (w.rows + kRowTile - 1) / kRowTile;
  pool.ParallelFor(num_tiles, [&](size_t tile_begin, size_t tile_end, int) {
    for (size_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t r0 = tile * kRowTile, r1 = std::min(w.rows, r0 + kRowTile);
      for (int64_t t = 0; t < num_tokens; ++t) {
        const uint8_t* x_row = xs + t * x_row_bytes;
        float* y_row = y + t * w.rows;
        for (int64_t r = r0; r < r1; ++r) y_row[r] = kernel.dot(w.data + r * row_bytes, x_row, w.cols);
      }
    }
  });
}

void DequantizeWeightRow(const WeightMatrix& w, int64_t row, float* out) {
  const uint64_t row_bytes = *GgmlRowBytes(w.type, w.cols);
  ref::DequantizeRow(w.type, w.data + row * row_bytes, out, w.cols);
}

}  // namespace tachyon
