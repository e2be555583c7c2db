// ModelConfig: the hyper-parameters of a Llama-family model, from GGUF metadata.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tachyon {

struct ModelConfig {
  // "llama" (also Mistral, and Mixtral when it has experts), "qwen2", "qwen3" or "qwen3moe"
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
  bool qk_norm = false;     // Q and K RMS-normed per head before rope (qwen3, qwen3moe)
  // A mixture of experts (n_expert > 0): each token's FFN is the weighted sum of
  // n_expert_used of n_expert expert FFNs of n_ff_exp, chosen by a router.
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  static constexpr int64_t kMaxExperts = 256;

  bool is_moe() const { return n_expert > 0; }

  int64_t q_dim() const { return n_head * head_dim; }
  int64_t kv_dim() const { return n_head_kv * head_dim; }

  // Reads <arch>.* keys; the vocabulary size comes from token_embd.weight.
  static StatusOr<ModelConfig> FromGguf(const GgufFile& file);
};

}  // namespace tachyon
