// Binding a model's tensors to views into its mapped GGUF file (and reading
// its size hyper-parameters), with the
// checks every model needs: the tensor exists, has the expected shape, and a
// type the kernels compute with. Errors name the tensor:
// "tensor blk.3.attn_q.weight: expected shape [2048, 2048], file has [2048, 512]".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"

namespace tachyon {

// A [rows, cols] weight matrix (GGUF shape [cols, rows]) of a MatMul type.
Status BindMatrix(const GgufFile& file, const std::string& name, int64_t rows, int64_t cols, WeightMatrix* out);

// Rows [first_row, first_row + rows) of a [total_rows, cols] matrix: a view of one
// part of a fused tensor (phi3's attn_qkv, its ffn_up of gate and up).
Status BindMatrixRows(const GgufFile& file, const std::string& name, int64_t total_rows, int64_t cols,
                      int64_t first_row, int64_t rows, WeightMatrix* out);

// The experts of a [n_expert, rows, cols] tensor (GGUF shape [cols, rows,
// n_expert]): one [rows, cols] matrix each, a view of its slice.
Status BindExperts(const GgufFile& file, const std::string& name, int64_t n_expert, int64_t rows, int64_t cols,
                   std::vector<WeightMatrix>* out);

// An F32 vector of n elements. A missing optional tensor leaves *out null.
Status BindVector(const GgufFile& file, const std::string& name, int64_t n, const float** out,
                  bool optional = false);

// A size hyper-parameter: an unsigned integer key in 1..2^31
// ("metadata key 'llama.block_count' = 0 is out of range").
Status ReadSizeKey(const GgufFile& file, const std::string& key, int64_t* out);

// The sizes every transformer's metadata gives, as <arch>.embedding_length,
// block_count, attention.head_count, feed_forward_length, context_length.
struct TransformerSizes {
  int64_t n_embd = 0, n_layer = 0, n_head = 0, n_ff = 0, context_length = 0;
};
StatusOr<TransformerSizes> ReadTransformerSizes(const GgufFile& file, const std::string& architecture);

}  // namespace tachyon
