// EncoderModel: a BERT-family sentence-embedding model (GGUF architectures
// `bert` and `nomic-bert`, with llama.cpp's tensor names and metadata keys),
// whose weights are views into a mapped GGUF file.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<EncoderModel> model, EncoderModel::Load("bge.gguf"));
//   std::vector<float> vecs = model->Embed(sequences, model->config().pooling, pool);
//
// bert (BGE, MiniLM, E5, GTE): token + token-type (type 0) + learned absolute
// position embeddings, LayerNorm; per layer Q/K/V with biases, bidirectional
// attention, output projection with bias, residual + LayerNorm, FFN up (bias)
// -> GELU -> down (bias), residual + LayerNorm (post-norm throughout).
// nomic-bert: no position table but NeoX rotary positions on Q and K, one fused
// QKV matrix without biases, SwiGLU FFN without biases.
//
// Every sequence of a batch runs in the same forward pass (one matrix product
// per weight for all tokens); attention is dense and per sequence. There is no
// KV cache and no scheduler: a call encodes its inputs and returns.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "base/strong_id.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"

namespace tachyon {

// How token vectors become one sentence vector (llama.cpp's pooling_type
// values: 1 mean, 2 CLS (the first token), 3 last).
enum class Pooling { kMean = 1, kCls = 2, kLast = 3 };

// "mean", "cls", "last".
StatusOr<Pooling> ParsePooling(std::string_view name);
const char* PoolingName(Pooling pooling);

struct EncoderConfig {
  std::string architecture;  // "bert" or "nomic-bert"
  int64_t n_vocab = 0;
  int64_t n_embd = 0;
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t head_dim = 0;
  int64_t n_ff = 0;
  int64_t context_length = 0;  // longest input, in tokens (with CLS and SEP)
  int64_t n_token_types = 0;
  float norm_eps = 1e-12f;
  float rope_base = 10000.0f;  // nomic-bert
  // <arch>.pooling_type; mean when the file does not say.
  Pooling pooling = Pooling::kMean;

  bool rotary() const { return architecture == "nomic-bert"; }

  static StatusOr<EncoderConfig> FromGguf(const GgufFile& file);
};

// Whether a GGUF file's architecture is one EncoderModel loads.
bool IsEncoderArchitecture(std::string_view architecture);

class EncoderModel {
 public:
  static StatusOr<std::unique_ptr<EncoderModel>> Load(const std::string& path);
  static StatusOr<std::unique_ptr<EncoderModel>> FromFile(GgufFile file);

  const EncoderConfig& config() const { return config_; }
  const GgufFile& file() const { return file_; }

  // One pooled vector per sequence, [sequences.size(), n_embd] (not
  // normalized). Each sequence must hold 1..context_length ids below n_vocab
  // (callers check; a violation is a CHECK failure).
  std::vector<float> Embed(std::span<const std::vector<TokenId>> sequences, Pooling pooling,
                           ThreadPool& pool) const;

 private:
  struct Layer {
    WeightMatrix wq, wk, wv;     // bert: [n_embd, n_embd] each
    const float *bq = nullptr, *bk = nullptr, *bv = nullptr;
    WeightMatrix wqkv;           // nomic-bert: [3 n_embd, n_embd]
    WeightMatrix wo;             // [n_embd, n_embd]
    const float* bo = nullptr;   // bert
    const float *attn_norm = nullptr, *attn_norm_b = nullptr;
    WeightMatrix w_up, w_gate, w_down;  // [n_ff, n_embd], nomic-bert's gate, [n_embd, n_ff]
    const float *b_up = nullptr, *b_down = nullptr;  // bert
    const float *out_norm = nullptr, *out_norm_b = nullptr;
  };

  EncoderModel(GgufFile file, EncoderConfig config) : file_(std::move(file)), config_(std::move(config)) {}
  Status BindWeights();

  GgufFile file_;
  EncoderConfig config_;
  WeightMatrix token_embd_;
  WeightMatrix token_types_;    // [n_token_types, n_embd]; row 0 is added to every token
  WeightMatrix position_embd_;  // bert: [context_length, n_embd]
  const float *embd_norm_ = nullptr, *embd_norm_b_ = nullptr;
  std::vector<Layer> layers_;
};

}  // namespace tachyon
