// Model: a Llama-family transformer whose weights are views into a mapped GGUF
// file, and its forward pass over a ForwardBatch.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Load("m.gguf"));
//   KvBuffer kv(model->config(), 16, num_blocks);
//   std::vector<float> logits = model->Forward(batch, kv, pool);  // [logit_tokens, n_vocab]
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "gguf/gguf_file.h"
#include "kernels/matmul.h"
#include "model/forward_batch.h"
#include "model/kv_buffer.h"
#include "model/model_config.h"

namespace tachyon {

struct LayerWeights {
  const float* attn_norm = nullptr;  // [n_embd]
  WeightMatrix wq, wk, wv, wo;       // [q_dim, n_embd], [kv_dim, n_embd] x2, [n_embd, q_dim]
  const float* bq = nullptr;         // [q_dim] (qwen2), or null
  const float* bk = nullptr;         // [kv_dim]
  const float* bv = nullptr;         // [kv_dim]
  const float* q_norm = nullptr;     // [head_dim] (qwen3: each head RMS-normed before rope), or null
  const float* k_norm = nullptr;     // [head_dim]
  const float* attn_post_norm = nullptr;  // [n_embd] (gemma: the attention's output normed before the residual add)
  const float* ffn_norm = nullptr;   // [n_embd]
  const float* ffn_post_norm = nullptr;   // [n_embd] (gemma)
  // [n_ff, n_embd] x2, [n_embd, n_ff] (dense models). phi3's fused attn_qkv and
  // ffn_up (gate rows first, then up) are bound as views of their row ranges.
  WeightMatrix w_gate, w_up, w_down;
  // A mixture of experts: the router [n_expert, n_embd] (ffn_gate_inp) and each
  // expert's FFN, [n_ff_exp, n_embd] x2 and [n_embd, n_ff_exp]: slices of the
  // file's ffn_{gate,up,down}_exps tensors.
  WeightMatrix router;
  std::vector<WeightMatrix> exp_gate, exp_up, exp_down;
};

class Model {
 public:
  // Maps the file and binds every tensor, checking names, shapes and types:
  // "tensor blk.3.attn_q.weight: expected shape [2048, 2048], file has [2048, 512]".
  static StatusOr<std::unique_ptr<Model>> Load(const std::string& path);
  static StatusOr<std::unique_ptr<Model>> FromFile(GgufFile file);

  const ModelConfig& config() const { return config_; }

  // Tensors of a vision tower in the file (llama.cpp's v.* and mm.* names, as a
  // Gemma 3 file converted with its vision part has): the engine serves text and
  // leaves them unread.
  int64_t num_vision_tensors() const { return num_vision_tensors_; }

  // The longest sequence the caller will run (the file's context length until
  // told). It picks phi3's LongRoPE factors as llama.cpp does from its context
  // size: rope_factors_long above rope.scaling.original_context_length, else
  // rope_factors_short. Call before the first Forward.
  void SetContextLength(int64_t tokens);
  const GgufFile& file() const { return file_; }

  // Runs every token of the batch through the model, writing each token's K/V
  // to its sequence's block at its position, and returns the logits of the
  // batch's logit_tokens: [logit_tokens.size(), n_vocab].
  std::vector<float> Forward(const ForwardBatch& batch, KvBuffer& kv, ThreadPool& pool) const;

 private:
  Model(GgufFile file, ModelConfig config) : file_(std::move(file)), config_(std::move(config)) {}
  Status BindWeights();
  void Attention(const ForwardBatch& batch, int64_t l, const float* q, LayerKv layer, int block_size,
                 float* out, ThreadPool& pool) const;
  // The block table layer l of `seq` reads and writes through.
  const int32_t* TableOf(const ForwardSequence& seq, int64_t l) const {
    return seq.window_block_table != nullptr && config_.is_sliding(l) ? seq.window_block_table : seq.block_table;
  }
  // Gemma's post-norms: each of n rows [n, n_embd] RMS-normed in place by weight (nothing when null).
  void PostNorm(const float* weight, int64_t n, float* rows) const;
  // The mixture-of-experts FFN of n tokens' normed rows h [n, n_embd] into out.
  void ExpertsFfn(const LayerWeights& w, const float* h, int64_t n, float* out, ThreadPool& pool) const;

  GgufFile file_;
  ModelConfig config_;
  WeightMatrix token_embd_;
  WeightMatrix output_;             // token_embd_ when the embeddings are tied
  const float* output_norm_ = nullptr;
  const float* rope_freqs_ = nullptr;  // [rope_dim / 2] Llama 3 (or phi3's chosen LongRoPE) frequency factors, or null
  const float* rope_short_ = nullptr;  // [rope_dim / 2] phi3's LongRoPE factors, or null
  const float* rope_long_ = nullptr;
  std::vector<LayerWeights> layers_;
  int64_t num_vision_tensors_ = 0;
};

}  // namespace tachyon
