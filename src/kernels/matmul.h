// MatMul: activations times a GGUF weight matrix, for a batch of tokens.
//
// The weight matrix is [rows, cols] row-major as GGUF stores it (ne0 = cols,
// the input size; ne1 = rows, the output size). One kernel path per type and CPU:
//   - F16, Q8_0, Q4_0, Q5_0, Q4_K, Q6_K on a CPU with AVX2: packed once at load
//     (PackForMatMul) and multiplied by PackedMatrix (kernels/packed_matrix.h) with
//     the AVX-512 VNNI kernels where the CPU has them, else the AVX2 ones (same
//     layout, same results);
//   - F32, BF16 and the unpacked quant formats (Q4_1, Q5_1, IQ4_NL, Q2_K, Q3_K,
//     Q5_K, IQ4_XS; ref/unpacked_quants.h): AVX2 dots on the file's rows where the
//     CPU has AVX2;
//   - everything else (no AVX2, KernelPath::kReference, a packable matrix left
//     unpacked by hand in a test): the scalar references (ref/ops.h, ref/kquants.h).
// Each weight row is read once per call whatever the number of tokens (rows are
// tiled, and every token of the batch uses a tile while it is in cache). Quantized
// weights meet the activations quantized as llama.cpp does (Q8_0 for
// Q8_0/Q4_0/Q5_0/IQ4_NL, Q8_K for the k-quants and IQ4_XS; Q4_1 and Q5_1 against
// Q8_0 with each block's quant sum, BlockQ8_0S). Work is split over rows on the
// given ThreadPool.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <vector>

#include "base/thread_pool.h"
#include "gguf/ggml_type.h"

namespace tachyon {

class PackedMatrix;

struct WeightMatrix {
  GgmlType type = GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;  // output features
  int64_t cols = 0;  // input features
  // The same matrix packed for this CPU's fastest kernels (kernels/packed_matrix.h),
  // or null. When set, MatMul reads only it; `data` still serves row lookups.
  std::shared_ptr<const PackedMatrix> packed;
};

// Sets w->packed where this CPU has packed kernels (AVX-512 VNNI, else AVX2) and
// w's type has a packed form (Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, F16): a copy of the
// weights, made once at load.
void PackForMatMul(WeightMatrix* w);

// Types MatMul computes with.
bool IsMatMulType(GgmlType type);

// Which kernels run: kAuto, the fastest this CPU has for the matrix (packed,
// AVX2 or scalar, as above); kReference, the scalar references on the file's
// rows (tests compare against it).
enum class KernelPath { kAuto, kReference };

// y [num_tokens, w.rows] = x [num_tokens, w.cols] * w^T.
void MatMul(const WeightMatrix& w, const float* x, int64_t num_tokens, float* y, ThreadPool& pool,
            KernelPath path = KernelPath::kAuto);

// y_i = x * w_i^T for matrices that take the same input (q, k and v; gate and up):
// where they are packed alike, the activations are quantized once and one parallel
// loop covers them all (fewer hand-offs between threads in a decode step); else one
// MatMul each. Results are MatMul's, bit for bit.
struct MatMulTarget {
  const WeightMatrix* w;
  float* y;
};
void MatMulSameInput(std::initializer_list<MatMulTarget> targets, const float* x, int64_t num_tokens,
                     ThreadPool& pool);

// Independent products y_i [num_tokens_i, w_i.rows] = x_i * w_i^T (a mixture of
// experts' matrices in a step): where every matrix is packed, one parallel loop
// covers them all (PackedMatrix::MatMulJobs), the activations of products with the
// same input quantized once; else one MatMul each. Results are MatMul's, bit for bit.
struct MatMulProduct {
  const WeightMatrix* w;
  const float* x;
  int64_t num_tokens;
  float* y;
};
void MatMulMany(const std::vector<MatMulProduct>& products, ThreadPool& pool);

// Row `row` of a weight matrix as floats (embedding lookup); out [w.cols].
void DequantizeWeightRow(const WeightMatrix& w, int64_t row, float* out);

}  // namespace tachyon
