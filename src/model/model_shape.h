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
  std::string architecture; // GGUF general.architecture: "llama", "qwen2", or the encoders "bert", "nomic-bert"
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
  Llama3RopeScaling rope_scaling;
  // Encoders (bert, nomic-bert): LayerNorm epsilon, pooling_type (1 mean, 2 CLS), token types.
  float layer_norm_eps = 1e-12f;
  int pooling_type = 0;
  int64_t token_types = 2;

  bool is_encoder() const { return architecture == "bert" || architecture == "nomic-bert"; }

  int64_t head_dim() const { return n_embd / n_head; }
  // Parameters for a given vocabulary size (the vocabulary comes from the tokenizer).
  int64_t NumParameters(int64_t vocab_size) const;
};

const std::vector<ModelShape>& BuiltinModelShapes();
// nullptr if no shape has that name.
const ModelShape* FindModelShape(const std::string& name);

}  // namespace tachyon
