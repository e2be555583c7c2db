#include "model/model_shape.h"

namespace tachyon {

int64_t ModelShape::NumParameters(int64_t vocab_size) const {
  if (is_encoder()) {
    const int64_t e = n_embd;
    int64_t per_layer = 4 * e * e + 4 * e  // Q, K, V, O (nomic-bert's fused QKV has as many weights) + 2 norms
                        + 2 * e * n_ff;    // up, down
    int64_t total = vocab_size * e + token_types * e + 2 * e;  // embeddings, types, embedding norm
    if (architecture == "bert") {
      per_layer += 4 * e + n_ff + e;  // Q/K/V/O and FFN biases
      total += context_length * e;    // position table
    } else {
      per_layer += e * n_ff;  // gate
    }
    return total + n_layer * per_layer;
  }
  int64_t kv_dim = n_head_kv * head_dim();
  int64_t q_dim = n_head * head_dim();
  int64_t per_layer = 2 * n_embd                        // attention and FFN norms
                      + n_embd * q_dim + 2 * n_embd * kv_dim + q_dim * n_embd;  // Q, K, V, O
  if (is_moe()) {
    per_layer += n_embd * n_expert + n_expert * 3 * n_embd * expert_ff();  // router, each expert's gate, up, down
  } else {
    per_layer += 3 * n_embd * n_ff;  // gate, up, down
  }
  if (qkv_bias) per_layer += q_dim + 2 * kv_dim;
  if (is_gemma()) per_layer += 2 * n_embd;  // post-attention and post-FFN norms
  if (qk_norm()) per_layer += 2 * head_dim();
  int64_t total = n_layer * per_layer + n_embd /* output norm */ + vocab_size * n_embd;
  if (!tied_embeddings) total += vocab_size * n_embd;
  if (rope_scaling.factor > 0) total += head_dim() / 2;  // rope_freqs
  return total;
}

const std::vector<ModelShape>& BuiltinModelShapes() {
  // Hyper-parameters from each model's published config.json.
  static const std::vector<ModelShape> shapes = {
      {.name = "tiny",
       .description = "the llama-tiny test shape (a few MB; for unit tests)",
       .architecture = "llama", .n_embd = 256, .n_layer = 4, .n_head = 8, .n_head_kv = 2,
       .n_ff = 704, .context_length = 2048},
      {.name = "stories15m",
       .description = "karpathy's TinyStories 15M (llama2.c)",
       .architecture = "llama", .n_embd = 288, .n_layer = 6, .n_head = 6, .n_head_kv = 6,
       .n_ff = 768, .context_length = 256, .tied_embeddings = true},
      {.name = "smol-135m",
       .description = "SmolLM-135M",
       .architecture = "llama", .n_embd = 576, .n_layer = 30, .n_head = 9, .n_head_kv = 3,
       .n_ff = 1536, .context_length = 2048, .tied_embeddings = true},
      {.name = "llama-1b",
       .description = "Llama-3.2-1B (rope theta 500000, Llama 3 rope scaling x32)",
       .architecture = "llama", .n_embd = 2048, .n_layer = 16, .n_head = 32, .n_head_kv = 8,
       .n_ff = 8192, .context_length = 131072, .rope_theta = 500000.0f,
       .tied_embeddings = true,
       .rope_scaling = {.factor = 32, .low_freq_factor = 1, .high_freq_factor = 4,
                        .original_context_length = 8192}},
      {.name = "qwen2-0.5b",
       .description = "Qwen2-0.5B (Q/K/V bias, NeoX rope, theta 1000000)",
       .architecture = "qwen2", .n_embd = 896, .n_layer = 24, .n_head = 14, .n_head_kv = 2,
       .n_ff = 4864, .context_length = 32768, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .qkv_bias = true},
      {.name = "qwen3-0.6b",
       .description = "Qwen3-0.6B (Q/K norms per head, head dim 128, NeoX rope, theta 1000000)",
       .architecture = "qwen3", .n_embd = 1024, .n_layer = 28, .n_head = 16, .n_head_kv = 8,
       .n_ff = 3072, .context_length = 40960, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 128},
      {.name = "qwen3-4b",
       .description = "Qwen3-4B (Q/K norms per head, head dim 128, NeoX rope, theta 1000000)",
       .architecture = "qwen3", .n_embd = 2560, .n_layer = 36, .n_head = 32, .n_head_kv = 8,
       .n_ff = 9728, .context_length = 40960, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 128},
      {.name = "qwen3-tiny",
       .description = "a 4-layer qwen3 (head dim 64 over n_embd 192; for the golden tests)",
       .architecture = "qwen3", .n_embd = 192, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
       .n_ff = 512, .context_length = 2048, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 64, .random_norms = true},
      {.name = "qwen3-30b-a3b",
       .description = "Qwen3-30B-A3B (qwen3moe: 128 experts of 768, 8 per token; head dim 128)",
       .architecture = "qwen3moe", .n_embd = 2048, .n_layer = 48, .n_head = 32, .n_head_kv = 4,
       .n_ff = 6144, .context_length = 40960, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .key_length = 128, .n_expert = 128, .n_expert_used = 8, .n_ff_exp = 768},
      {.name = "qwen3moe-tiny",
       .description = "a 3-layer qwen3moe: 8 experts of 128, 3 per token (for the golden tests)",
       .architecture = "qwen3moe", .n_embd = 192, .n_layer = 3, .n_head = 4, .n_head_kv = 2,
       .n_ff = 384, .context_length = 2048, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 64, .random_norms = true, .n_expert = 8, .n_expert_used = 3,
       .n_ff_exp = 128},
      {.name = "mixtral-8x7b",
       .description = "Mixtral-8x7B (llama with 8 experts of 14336, 2 per token; theta 1000000)",
       .architecture = "llama", .n_embd = 4096, .n_layer = 32, .n_head = 32, .n_head_kv = 8,
       .n_ff = 14336, .context_length = 32768, .rope_theta = 1000000.0f,
       .n_expert = 8, .n_expert_used = 2},
      {.name = "mixtral-tiny",
       .description = "a 3-layer Mixtral-style llama: 4 experts of 256, 2 per token (for the golden tests)",
       .architecture = "llama", .n_embd = 128, .n_layer = 3, .n_head = 4, .n_head_kv = 2,
       .n_ff = 256, .context_length = 2048, .random_norms = true, .n_expert = 4, .n_expert_used = 2},
      {.name = "gemma2-2b",
       .description = "Gemma-2-2B (GeGLU, post-norms, soft-capping 50 / 30, every other layer a 4096 window)",
       .architecture = "gemma2", .n_embd = 2304, .n_layer = 26, .n_head = 8, .n_head_kv = 4,
       .n_ff = 9216, .context_length = 8192, .rope_theta = 10000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 256, .sliding_window = 4096, .swa_period = 2,
       .attn_softcap = 50.0f, .final_softcap = 30.0f},
      {.name = "gemma2-tiny",
       .description = "a 4-layer gemma2: window 8 on layers 0 and 2, soft-caps 0.1 / 1.5 (for the golden tests)",
       .architecture = "gemma2", .n_embd = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
       .n_ff = 256, .context_length = 2048, .rope_theta = 10000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .random_norms = true, .sliding_window = 8, .swa_period = 2,
       .attn_softcap = 0.1f, .final_softcap = 1.5f},
      {.name = "gemma3-1b",
       .description = "Gemma-3-1B (Q/K norms, 5 of 6 layers a 512 window at theta 10000, globals at 1000000)",
       .architecture = "gemma3", .n_embd = 1152, .n_layer = 26, .n_head = 4, .n_head_kv = 1,
       .n_ff = 6912, .context_length = 32768, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 256, .sliding_window = 512, .swa_period = 6,
       .rope_theta_swa = 10000.0f},
      {.name = "gemma3-4b",
       .description = "Gemma-3-4B text (5 of 6 layers a 1024 window; globals at theta 1000000, linear x8)",
       .architecture = "gemma3", .n_embd = 2560, .n_layer = 34, .n_head = 8, .n_head_kv = 4,
       .n_ff = 10240, .context_length = 131072, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 256, .rope_linear_factor = 8.0f, .sliding_window = 1024,
       .swa_period = 6, .rope_theta_swa = 10000.0f},
      {.name = "gemma3-tiny",
       .description = "a 4-layer gemma3: window 8 on 2 of 3 layers, globals linear x4 (for the golden tests)",
       .architecture = "gemma3", .n_embd = 128, .n_layer = 4, .n_head = 4, .n_head_kv = 2,
       .n_ff = 256, .context_length = 2048, .rope_theta = 1000000.0f, .rms_norm_eps = 1e-6f,
       .tied_embeddings = true, .key_length = 64, .random_norms = true, .rope_linear_factor = 4.0f,
       .sliding_window = 8, .swa_period = 3, .rope_theta_swa = 10000.0f},
      {.name = "phi3-mini",
       .description = "Phi-3.5-mini (fused QKV and gate-up, LongRoPE 4096 -> 131072)",
       .architecture = "phi3", .n_embd = 3072, .n_layer = 32, .n_head = 32, .n_head_kv = 32,
       .n_ff = 8192, .context_length = 131072, .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
       .rope_original_context = 4096, .rope_attn_factor = 1.1902380714238083f},
      {.name = "phi4-mini",
       .description = "Phi-4-mini (phi3 with 8 KV heads, 96 of 128 head dims rotating, tied embeddings)",
       .architecture = "phi3", .n_embd = 3072, .n_layer = 32, .n_head = 24, .n_head_kv = 8,
       .n_ff = 8192, .context_length = 131072, .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
       .tied_embeddings = true, .rope_dim = 96, .rope_original_context = 4096,
       .rope_attn_factor = 1.1902380714238083f},
      {.name = "phi3-tiny",
       .description = "a 3-layer phi3: 24 of 32 head dims rotating, LongRoPE 512 -> 4096 (for the golden tests)",
       .architecture = "phi3", .n_embd = 128, .n_layer = 3, .n_head = 4, .n_head_kv = 2,
       .n_ff = 256, .context_length = 4096, .rope_theta = 10000.0f, .rms_norm_eps = 1e-5f,
       .random_norms = true, .rope_dim = 24, .rope_original_context = 512, .rope_attn_factor = 1.19f},
      {.name = "bert-tiny",
       .description = "a 2-layer bert encoder (for unit tests)",
       .architecture = "bert", .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 4,
       .n_ff = 128, .context_length = 128, .pooling_type = 1},
      {.name = "nomic-tiny",
       .description = "a 2-layer nomic-bert encoder (for unit tests)",
       .architecture = "nomic-bert", .n_embd = 64, .n_layer = 2, .n_head = 4, .n_head_kv = 4,
       .n_ff = 128, .context_length = 128, .rope_theta = 1000.0f, .pooling_type = 2},
      {.name = "bge-small",
       .description = "BGE-small-en-v1.5 (bert encoder, CLS pooling; embeddings)",
       .architecture = "bert", .n_embd = 384, .n_layer = 12, .n_head = 12, .n_head_kv = 12,
       .n_ff = 1536, .context_length = 512, .pooling_type = 2},
      {.name = "nomic-embed",
       .description = "nomic-embed-text-v1.5 (nomic-bert: rotary, SwiGLU, mean pooling; embeddings)",
       .architecture = "nomic-bert", .n_embd = 768, .n_layer = 12, .n_head = 12, .n_head_kv = 12,
       .n_ff = 3072, .context_length = 2048, .rope_theta = 1000.0f, .pooling_type = 1},
  };
  return shapes;
}

const ModelShape* FindModelShape(const std::string& name) {
  for (const ModelShape& shape : BuiltinModelShapes()) {
    if (shape.name == name) return &shape;
  }
  return nullptr;
}

}  // namespace tachyon
