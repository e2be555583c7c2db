// QuantScheme: which tensor type each tensor of a model gets, for
// `tachyon model gen --type` and `tachyon model quantize --type`.
//
// A pure scheme (f32, f16, bf16, q8_0, q4_0, q4_k, q6_k) gives every 2-D
// weight matrix that type; q4_k_m mixes as llama.cpp's Q4_K_M does: Q6_K for
// the output matrix (the token embedding when tied) and for attn_v / ffn_down
// in the first and last eighth of the layers and every third layer between,
// Q4_K elsewhere. 1-D tensors (norms, biases, rope factors) and the encoders'
// token_types / position_embd tables stay F32. A k-quant needs rows that are a
// multiple of 256: a matrix whose rows are not
// falls back to Q8_0 (for Q6_K) or Q4_0 (for Q4_K; llama.cpp uses Q5_0, which
// Tachyon does not compute with yet), and rows that no 32-block divides to F16.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "gguf/ggml_type.h"

namespace tachyon {

struct QuantScheme {
  std::string name;       // "q4_k_m"
  GgmlType base;          // the type of most matrices
  bool k_mix = false;     // Q4_K_M's mixing rules
  uint32_t file_type = 0; // general.file_type (llama_ftype)
};

struct TensorRole {
  std::string_view name;  // GGUF tensor name
  int64_t row_length;     // ne0
  int num_dims;
  int layer = -1;         // blk.N, or -1
  int num_layers = 0;
  bool is_output = false; // output.weight, or token_embd.weight of a tied model
};

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k", "q6_k", "q4_k_m" (case-insensitive).
StatusOr<QuantScheme> ParseQuantScheme(std::string_view name);

// The pure scheme of one of those types (CHECKs that there is one).
QuantScheme PureScheme(GgmlType type);

GgmlType TensorTypeFor(const QuantScheme& scheme, const TensorRole& role);

// blk.N. prefix -> N, else -1.
int LayerOfTensor(std::string_view name);

}  // namespace tachyon
