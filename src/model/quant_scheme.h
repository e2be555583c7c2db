// QuantScheme: which tensor type each tensor of a model gets, for
// `tachyon model gen --type` and `tachyon model quantize --type`.
//
// A pure scheme (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, iq4_nl, iq4_xs,
// q4_k, q6_k) gives every 2-D weight matrix that type. The k-quant mixes (q2_k,
// q3_k_s, q3_k_m, q3_k_l, q4_k_s, q4_k_m, q5_k_s, q5_k_m, q6_k) follow llama.cpp's
// llama_tensor_get_type (src/llama-quant.cpp, commit c392e509) for Llama-family
// models without experts or an importance matrix: the output matrix (the token
// embedding when tied) Q6_K; attn_v, ffn_down and attn_output with more bits by
// layer as each mix says (e.g. Q3_K_M: attn_v Q5_K in the first two layers and
// Q4_K after, ffn_down Q5_K in the first sixteenth and Q4_K after, attn_output
// Q4_K; Q4_K_M / Q5_K_M: attn_v and ffn_down Q6_K in the first and last eighth of
// the layers and every third layer between). 1-D tensors (norms, biases, rope
// factors) and the encoders' token_types / position_embd tables stay F32. A row
// length the type's blocks do not divide falls back as llama.cpp's does: Q2_K,
// Q3_K and IQ4_XS to IQ4_NL, Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0, and a
// length no 32-block divides to F16 (an output matrix whose rows are not a
// multiple of 256 is Q8_0).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "base/status.h"
#include "gguf/ggml_type.h"

namespace tachyon {

// llama.cpp's k-quant mixes (llama_ftype names); kPure: every matrix the base type.
enum class QuantMix { kPure, kQ2_K, kQ3_K_S, kQ3_K_M, kQ3_K_L, kQ4_K_S, kQ4_K_M, kQ5_K_S, kQ5_K_M, kQ6_K };

struct QuantScheme {
  std::string name;       // "q4_k_m"
  GgmlType base;          // the type of most matrices
  QuantMix mix = QuantMix::kPure;
  uint32_t file_type = 0; // general.file_type (llama_ftype)
};

struct TensorRole {
  std::string_view name;  // GGUF tensor name
  int64_t row_length;     // ne0
  int num_dims;
  int layer = -1;         // blk.N, or -1
  int num_layers = 0;
  bool is_output = false; // output.weight, or token_embd.weight of a tied model
  int gqa = 1;            // attention heads per KV head
};

// One of the names above (case-insensitive).
StatusOr<QuantScheme> ParseQuantScheme(std::string_view name);

// The pure scheme of one of those types (CHECKs that there is one).
QuantScheme PureScheme(GgmlType type);

GgmlType TensorTypeFor(const QuantScheme& scheme, const TensorRole& role);

// blk.N. prefix -> N, else -1.
int LayerOfTensor(std::string_view name);

}  // namespace tachyon
