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

// Whether MatMul multiplies `type` packed wherever the CPU has AVX2 (PackedMatrix::Pack).
bool HasPackedForm(GgmlType type) {
  switch (type) {
    case GgmlType::kF16: case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ5_0:
    case GgmlType::kQ4_K: case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

// The dot product of an unpacked matrix. One path per type and CPU: a type with
// a packed form reaches here unpacked only on a CPU without AVX2, on the
// reference path, or from a matrix a test built by hand, and takes the scalar
// reference; F32, BF16 and the unpacked quant formats take AVX2 where the CPU has it.
Kernel SelectKernel(GgmlType type, KernelPath path) {
  const bool simd = path == KernelPath::kAuto && CpuHasAvx2() && !HasPackedForm(type);
  switch (type) {
    using A = ActivationFormat;
    case GgmlType::kF32:
      return {simd ? DotF32Adapter<avx2::DotF32> : DotF32Adapter<ref::DotF32>, A::kF32,
              simd ? avx2::DotF32x4 : nullptr};
    case GgmlType::kF16: return {DotU16Adapter<ref::DotF16>, A::kF32};
    case GgmlType::kBF16:
      return {simd ? DotU16Adapter<avx2::DotBF16> : DotU16Adapter<ref::DotBF16>, A::kF32};
    case GgmlType::kQ8_0: return {ref::DotQ8_0Q8_0, A::kQ8_0};
    case GgmlType::kQ4_0: return {ref::DotQ4_0Q8_0, A::kQ8_0};
    case GgmlType::kQ4_K: return {ref::DotQ4_KQ8_K, A::kQ8_K};
    case GgmlType::kQ6_K: return {ref::DotQ6_KQ8_K, A::kQ8_K};
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
        if (k_quant && simd) {
          avx2::QuantizeActivationsQ8_K(row, out, w.cols);
        } else if (k_quant) {
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
  const int64_t num_tiles = (w.rows + kRowTile - 1) / kRowTile;
  pool.ParallelFor(num_tiles, [&](size_t tile_begin, size_t tile_end, int) {
    for (size_t tile = tile_begin; tile < tile_end; ++tile) {
      const int64_t r0 = tile * kRowTile, r1 = std::min(w.rows, r0 + kRowTile);
      const uint8_t* rows = w.data + r0 * row_bytes;
      int64_t t = 0;
      if (kernel.dot4 != nullptr) {
        for (; t + 4 <= num_tokens; t += 4) {
          for (int64_t r = r0; r < r1; ++r) {
            float out[4];
            kernel.dot4(rows + (r - r0) * row_bytes, xs + t * x_row_bytes, x_row_bytes, w.cols, out);
            for (int k = 0; k < 4; ++k) y[(t + k) * w.rows + r] = out[k];
          }
        }
      }
      for (; t < num_tokens; ++t) {
        const uint8_t* x_row = xs + t * x_row_bytes;
        float* y_row = y + t * w.rows;
        for (int64_t r = r0; r < r1; ++r) {
          y_row[r] = kernel.dot(rows + (r - r0) * row_bytes, x_row, w.cols);
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

void MatMulMany(const std::vector<MatMulProduct>& products, ThreadPool& pool) {
  std::vector<PackedMatrix::Job> jobs;
  jobs.reserve(products.size());
  for (const MatMulProduct& p : products) {
    if (p.w->packed == nullptr) {
      for (const MatMulProduct& each : products) MatMul(*each.w, each.x, each.num_tokens, each.y, pool);
      return;
    }
    jobs.push_back({p.w->packed.get(), p.x, p.num_tokens, p.y});
  }
  PackedMatrix::MatMulJobs(jobs.data(), static_cast<int>(jobs.size()), pool);
}

void DequantizeWeightRow(const WeightMatrix& w, int64_t row, float* out) {
  const uint64_t row_bytes = *GgmlRowBytes(w.type, w.cols);
  ref::DequantizeRow(w.type, w.data + row * row_bytes, out, w.cols);
}

}  // namespace tachyon
