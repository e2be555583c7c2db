// ModelConfig: the hyper-parameters of a Llama-family model, from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tachyon {

struct ModelConfig {
  // "llama" (also Mistral, and Mixtral when it has experts), "qwen2", "qwen3", "qwen3moe",
  // "gemma2", "gemma3" or "phi3" (Phi-3, Phi-4-mini)
  std::string architecture;
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t context_length = 0;
  float rms_norm_eps = 1e-5f;
  float rope_base = 10000.0f;
  int rope_dim = 0;         // dimensions of each head that rotate
  bool rope_neox = false;   // NeoX rotation (pairs i, i + d/2) instead of (2i, 2i+1)
  float rope_position_scale = 1.0f;  // linear rope scaling: positions are multiplied by this
  bool qk_norm = false;     // Q and K RMS-normed per head before rope (qwen3, qwen3moe, gemma3)
  // Attention scores are q.k * attn_scale (1 / sqrt(head_dim) but for Gemma's 27B).
  float attn_scale = 0;
  // LongRoPE (phi3): frequency factors from rope_factors_short / rope_factors_long
  // (the long ones when the context in use is above rope_original_context), and
  // cos / sin multiplied by rope_attn_factor.
  int64_t rope_original_context = 0;
  float rope_attn_factor = 1.0f;
  // Gemma 2 / 3.
  float embd_scale = 0;       // the token embeddings are multiplied by this (sqrt(n_embd)); 0: not
  bool post_norms = false;    // RMS norms on the attention's and the FFN's outputs before the residual adds
  bool gelu_ffn = false;      // GeGLU (tanh GELU of the gate) instead of SwiGLU
  float attn_softcap = 0;     // scores become c * tanh(s / c); 0: not
  float final_softcap = 0;    // likewise the output logits
  // Sliding-window layers: a token sees the `sliding_window` latest positions
  // (its own included). Layer l slides when swa_period > 0 and l % swa_period <
  // swa_period - 1 (gemma2: every other layer from 0; gemma3: 5 of each 6); those
  // layers rotate with rope_base_swa and rope_position_scale_swa.
  int64_t sliding_window = 0;
  int64_t swa_period = 0;
  float rope_base_swa = 10000.0f;
  float rope_position_scale_swa = 1.0f;
  // A mixture of experts (n_expert > 0): each token's FFN is the weighted sum of
  // n_expert_used of n_expert expert FFNs of n_ff_exp, chosen by a router.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  static constexpr int64_t kMaxExperts = 256;

  bool is_moe() const { return n_expert > 0; }
  bool is_sliding(int64_t layer) const {
    return sliding_window > 0 && swa_period > 0 && layer % swa_period < swa_period - 1;
  }

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }

  // Reads <arch>.* keys; the vocabulary size comes from token_embd.weight.
  static StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace tachyon
