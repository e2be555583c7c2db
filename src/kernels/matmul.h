// MatMul: activations times a GGUF weight matrix, for a batch of tokens.
//
// The weight matrix is [rows, cols] row-major as GGUF stores it (ne0 = cols,
// the input size; ne1 = rows, the output size). Each weight row is read once
// per call whatever the number of tokens (rows are tiled, and every token of
// the batch uses a tile while it is in cache): that is what makes batched
// decoding cheap. Quantized weights are multiplied with the activations
// quantized as llama.cpp does (Q8_0 for Q8_0/Q4_0 and Q4_1/Q5_0/Q5_1/IQ4_NL, Q8_K for the
// k-quants and IQ4_XS; Q4_1 and Q5_1 against Q8_0 with each block's quant sum, BlockQ8_0S);
// F32/F16/BF16 weights with float activations. Work is split over rows on the given ThreadPool.
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

// Sets w->packed where this CPU has a packed kernel for w's type (AVX-512 VNNI:
// Q8_0, Q4_0, Q5_0, Q4_K, Q6_K, F16): a copy of the weights, made once at load.
void PackForMatMul(WeightMatrix* w);

// Types MatMul computes with.
bool IsMatMulType(GgmlType type);

// Which kernels run: the AVX2 ones when the CPU has them, unless forced off.
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

// Row `row` of a weight matrix as floats (embedding lookup); out [w.cols].
void DequantizeWeightRow(const WeightMatrix& w, int64_t row, float* out);

}  // namespace tachyon
