// ModelShape: the hyper-parameters of a named, well-known model architecture,
// used by `tachyon model gen` to write random-weight models of real shapes.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tachyon {

// Llama 3 style RoPE frequency scaling (Llama 3.1 / 3.2 config "rope_scaling").
struct Llama3RopeScaling {
  float factor = 0;  // 0: no scaling
  float low_freq_factor = 1;
  float high_freq_factor = 4;
  int64_t original_context_length = 8192;
};

struct ModelShape {
  std::string name;         // "llama-1b"
  std::string description;  // what real model it mirrors
  std::string architecture; // GGUF general.architecture: "llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3", or the encoders "bert", "nomic-bert"
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_ff = 0;
  int64_t context_length = 0;
  float rope_theta = 10000.0f;
  float rms_norm_eps = 1e-5f;
  bool tied_embeddings = false;  // no output.weight: the token embedding doubles as output
  bool qkv_bias = false;         // Q/K/V projections have biases (qwen2)
  int64_t key_length = 0;        // a head's dimension when it is not n_embd / n_head (qwen3), else 0
  // Norm weights drawn from 1 + N(0, 0.1^2) instead of all 1: the golden test
  // shapes, where a weight read from the wrong tensor must show.
  bool random_norms = false;
  // A mixture of experts (n_expert > 0): each layer's FFN is n_expert experts of
  // n_ff_exp, n_expert_used of them per token (qwen3moe; Mixtral under llama, where
  // the experts are n_ff wide).
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  int64_t n_ff_exp = 0;
  Llama3RopeScaling rope_scaling;
  int64_t rope_dim = 0;              // dimensions of a head that rotate when not all (phi4-mini), else 0
  float rope_linear_factor = 0;      // linear rope scaling (gemma3-4b's global layers), 0: none
  // phi3's LongRoPE (when rope_original_context > 0): rope_factors_short / _long
  // tensors, the context they switch at, and the factor on cos / sin.
  int64_t rope_original_context = 0;
  float rope_attn_factor = 1.0f;
  // Gemma: sliding-window layers (window, period; local layers rotate with
  // rope_theta_swa), soft-capping of attention scores and of the logits.
  int64_t sliding_window = 0;
  int64_t swa_period = 0;
  float rope_theta_swa = 0;
  float attn_softcap = 0;
  float final_softcap = 0;
  // Encoders (bert, nomic-bert): LayerNorm epsilon, pooling_type (1 mean, 2 CLS), token types.
  float layer_norm_eps = 1e-12f;
  int pooling_type = 0;
  int64_t token_types = 2;

  bool is_encoder() const { return architecture == "bert" || architecture == "nomic-bert"; }

  int64_t head_dim() const { return key_length > 0 ? key_length : n_embd / n_head; }
  bool qk_norm() const { return architecture == "qwen3" || architecture == "qwen3moe" || architecture == "gemma3"; }
  bool is_gemma() const { return architecture == "gemma2" || architecture == "gemma3"; }
  int64_t rotary_dim() const { return rope_dim > 0 ? rope_dim : head_dim(); }
  bool is_moe() const { return n_expert > 0; }
  int64_t expert_ff() const { return n_ff_exp > 0 ? n_ff_exp : n_ff; }
  // Parameters for a given vocabulary size (the vocabulary comes from the tokenizer).
  int64_t NumParameters(int64_t vocab_size) const;
};

const std::vector<ModelShape>& BuiltinModelShapes();
// nullptr if no shape has that name.
const ModelShape* FindModelShape(const std::string& name);

}  // namespace tachyon
