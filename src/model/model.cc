#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ops.h"
#include "kernels/ref/ops.h"
#include "model/tensor_binding.h"

namespace tachyon {
namespace {

// Tokens of one run that attend together (their K/V loads shared): 16 tokens of
// smol-135m's 3-head groups are 48 query rows, six registers' worth of lanes.
constexpr int64_t kAttentionTile = 16;

}  // namespace

StatusOr<std::unique_ptr<Model>> Model::Load(const std::string& path) {
  ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  StatusOr<std::unique_ptr<Model>> model = FromFile(std::move(file));
  if (!model.ok()) return model.status().WithContext(path);
  return model;
}

StatusOr<std::unique_ptr<Model>> Model::FromFile(GgufFile file) {
  ASSIGN_OR_RETURN(ModelConfig config, ModelConfig::FromGguf(file));
  std::unique_ptr<Model> model(new Model(std::move(file), std::move(config)));
  RETURN_IF_ERROR(model->BindWeights());
  return model;
}

Status Model::BindWeights() {
  const ModelConfig& c = config_;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, WeightMatrix* out) {
    return BindMatrix(file_, name, rows, cols, out);
  };
  auto vector = [&](const std::string& name, int64_t n, const float** out, bool optional) {
    return BindVector(file_, name, n, out, optional);
  };
  auto rows = [&](const std::string& name, int64_t total, int64_t first, int64_t n, WeightMatrix* out) {
    return BindMatrixRows(file_, name, total, c.n_embd, first, n, out);
  };
  RETURN_IF_ERROR(matrix("token_embd.weight", c.n_vocab, c.n_embd, &token_embd_));
  // gemma2 always reads its logits through the token embeddings (as llama.cpp does).
  if (c.architecture != "gemma2" && file_.FindTensor("output.weight") != nullptr) {
    RETURN_IF_ERROR(matrix("output.weight", c.n_vocab, c.n_embd, &output_));
  } else {
    output_ = token_embd_;  // tied embeddings
  }
  RETURN_IF_ERROR(vector("output_norm.weight", c.n_embd, &output_norm_, false));
  RETURN_IF_ERROR(vector("rope_freqs.weight", c.rope_dim / 2, &rope_freqs_, true));
  if (c.architecture == "phi3" && rope_freqs_ == nullptr) {
    RETURN_IF_ERROR(vector("rope_factors_short.weight", c.rope_dim / 2, &rope_short_, true));
    RETURN_IF_ERROR(vector("rope_factors_long.weight", c.rope_dim / 2, &rope_long_, true));
    if ((rope_short_ == nullptr) != (rope_long_ == nullptr)) {
      return InvalidArgumentError(std::string("tensor ") +
                                  (rope_short_ ? "rope_factors_long" : "rope_factors_short") +
                                  ".weight is missing: a LongRoPE file has both factor tables");
    }
    SetContextLength(c.context_length);
  }
  for (const GgufTensorInfo& t : file_.tensors()) {
    if (t.name.rfind("v.", 0) == 0 || t.name.rfind("mm.", 0) == 0) ++num_vision_tensors_;
  }
  layers_.resize(c.n_layer);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    LayerWeights& w = layers_[l];
    RETURN_IF_ERROR(vector(p + "attn_norm.weight", c.n_embd, &w.attn_norm, false));
    if (file_.FindTensor(p + "attn_qkv.weight") != nullptr) {  // fused: q rows, then k, then v
      const int64_t total = c.q_dim() + 2 * c.kv_dim();
      RETURN_IF_ERROR(rows(p + "attn_qkv.weight", total, 0, c.q_dim(), &w.wq));
      RETURN_IF_ERROR(rows(p + "attn_qkv.weight", total, c.q_dim(), c.kv_dim(), &w.wk));
      RETURN_IF_ERROR(rows(p + "attn_qkv.weight", total, c.q_dim() + c.kv_dim(), c.kv_dim(), &w.wv));
      if (file_.FindTensor(p + "attn_qkv.bias") != nullptr) {
        return UnimplementedError("tensor " + p + "attn_qkv.bias: a fused Q/K/V bias is not supported");
      }
    } else {
      RETURN_IF_ERROR(matrix(p + "attn_q.weight", c.q_dim(), c.n_embd, &w.wq));
      RETURN_IF_ERROR(matrix(p + "attn_k.weight", c.kv_dim(), c.n_embd, &w.wk));
      RETURN_IF_ERROR(matrix(p + "attn_v.weight", c.kv_dim(), c.n_embd, &w.wv));
    }
    RETURN_IF_ERROR(matrix(p + "attn_output.weight", c.n_embd, c.q_dim(), &w.wo));
    RETURN_IF_ERROR(vector(p + "attn_q.bias", c.q_dim(), &w.bq, true));
    RETURN_IF_ERROR(vector(p + "attn_k.bias", c.kv_dim(), &w.bk, true));
    RETURN_IF_ERROR(vector(p + "attn_v.bias", c.kv_dim(), &w.bv, true));
    // Forward adds all three or none: a file with some of them is refused here.
    const int num_biases = (w.bq != nullptr) + (w.bk != nullptr) + (w.bv != nullptr);
    if (num_biases != 0 && num_biases != 3) {
      return InvalidArgumentError("layer " + std::to_string(l) + " has " +
                                  (w.bq ? "" : "no ") + p + "attn_q.bias, " + (w.bk ? "" : "no ") + p +
                                  "attn_k.bias and " + (w.bv ? "" : "no ") + p +
                                  "attn_v.bias: the q, k and v biases come all three or none");
    }
    if (c.qk_norm) {
      RETURN_IF_ERROR(vector(p + "attn_q_norm.weight", c.head_dim, &w.q_norm, false));
      RETURN_IF_ERROR(vector(p + "attn_k_norm.weight", c.head_dim, &w.k_norm, false));
    }
    RETURN_IF_ERROR(vector(p + "ffn_norm.weight", c.n_embd, &w.ffn_norm, false));
    if (c.post_norms) {
      RETURN_IF_ERROR(vector(p + "post_attention_norm.weight", c.n_embd, &w.attn_post_norm, false));
      RETURN_IF_ERROR(vector(p + "post_ffw_norm.weight", c.n_embd, &w.ffn_post_norm, false));
    }
    if (c.architecture == "phi3") {  // ffn_up [2 n_ff]: the gate's rows, then up's
      RETURN_IF_ERROR(rows(p + "ffn_up.weight", 2 * c.n_ff, 0, c.n_ff, &w.w_gate));
      RETURN_IF_ERROR(rows(p + "ffn_up.weight", 2 * c.n_ff, c.n_ff, c.n_ff, &w.w_up));
      RETURN_IF_ERROR(matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &w.w_down));
    } else if (c.is_moe()) {
      RETURN_IF_ERROR(matrix(p + "ffn_gate_inp.weight", c.n_expert, c.n_embd, &w.router));
      RETURN_IF_ERROR(BindExperts(file_, p + "ffn_gate_exps.weight", c.n_expert, c.n_ff_exp, c.n_embd, &w.exp_gate));
      RETURN_IF_ERROR(BindExperts(file_, p + "ffn_up_exps.weight", c.n_expert, c.n_ff_exp, c.n_embd, &w.exp_up));
      RETURN_IF_ERROR(BindExperts(file_, p + "ffn_down_exps.weight", c.n_expert, c.n_embd, c.n_ff_exp, &w.exp_down));
    } else {
      RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", c.n_ff, c.n_embd, &w.w_gate));
      RETURN_IF_ERROR(matrix(p + "ffn_up.weight", c.n_ff, c.n_embd, &w.w_up));
      RETURN_IF_ERROR(matrix(p + "ffn_down.weight", c.n_embd, c.n_ff, &w.w_down));
    }
  }
  // Where this CPU has packed kernels, the matrices are packed once here and their
  // file pages released (token_embd_ stays as it is: it serves row lookups; a tied
  // output_ gets its own packed copy and keeps the pages).
  auto pack = [&](WeightMatrix* m) {
    PackForMatMul(m);
    if (m->packed != nullptr && m->data != token_embd_.data) {
      file_.ReleasePages(m->data, *GgmlRowBytes(m->type, m->cols) * m->rows);
    }
  };
  pack(&output_);
  for (LayerWeights& w : layers_) {
    for (WeightMatrix* m : {&w.wq, &w.wk, &w.wv, &w.wo}) pack(m);
    if (c.is_moe()) {
      pack(&w.router);
      for (auto* experts : {&w.exp_gate, &w.exp_up, &w.exp_down}) {
        for (WeightMatrix& m : *experts) pack(&m);
      }
    } else {
      for (WeightMatrix* m : {&w.w_gate, &w.w_up, &w.w_down}) pack(m);
    }
  }
  return Status::Ok();
}

void Model::SetContextLength(int64_t tokens) {
  if (rope_short_ != nullptr || rope_long_ != nullptr) {
    rope_freqs_ = tokens > config_.rope_original_context ? rope_long_ : rope_short_;
  }
}

void Model::Attention(const ForwardBatch& batch, int64_t l, const float* q, LayerKv layer, int block_size,
                      float* out, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  AttentionShape shape{static_cast<int>(c.n_head), static_cast<int>(c.n_head_kv), static_cast<int>(c.head_dim),
                       block_size};
  shape.window = c.is_sliding(l) ? c.sliding_window : 0;
  shape.softcap = c.attn_softcap;
  const float scale = c.attn_scale;
  // Runs: consecutive tokens of one sequence at consecutive positions (a prefill
  // chunk; a decode token is a run of one), cut into tiles of kAttentionTile
  // tokens that share each K/V block's loads. A token's result does not depend on
  // its tile (AttendPagedRun), so the cut is free to follow the work.
  struct Tile {
    int64_t first_token;
    int count;
  };
  std::vector<Tile> tiles;
  const int64_t n = batch.num_tokens();
  for (int64_t t = 0; t < n;) {
    int64_t end = t + 1;
    while (end < n && end - t < kAttentionTile && batch.sequence_index[end] == batch.sequence_index[t] &&
           batch.positions[end] == batch.positions[end - 1] + 1) {
      ++end;
    }
    tiles.push_back({t, static_cast<int>(end - t)});
    t = end;
  }
  // Later tiles of a prompt see more keys: alternating from both ends gives each
  // of ParallelFor's contiguous chunks of the items a like amount of work.
  std::vector<int64_t> order;
  order.reserve(tiles.size());
  for (int64_t lo = 0, hi = static_cast<int64_t>(tiles.size()) - 1; lo <= hi; ++lo, --hi) {
    order.push_back(hi);
    if (lo != hi) order.push_back(lo);
  }
  const int n_kv = static_cast<int>(c.n_head_kv);
  pool.ParallelFor(order.size() * n_kv, [&](size_t begin, size_t end, int) {
    for (size_t item = begin; item < end; ++item) {
      const Tile& tile = tiles[order[item / n_kv]];
      const int kv_head = static_cast<int>(item % n_kv);
      const ForwardSequence& seq = batch.sequences[batch.sequence_index[tile.first_token]];
      AttendPagedRun(q + tile.first_token * c.q_dim(), c.q_dim(), tile.count, batch.positions[tile.first_token],
                     layer, TableOf(seq, l), shape, scale, kv_head, out + tile.first_token * c.q_dim());
    }
  });
}

void Model::ExpertsFfn(const LayerWeights& w, const float* h, int64_t n, float* out, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t n_expert = c.n_expert, k = c.n_expert_used, ff = c.n_ff_exp, e = c.n_embd;
  // Routing, as llama.cpp does it: the softmax of the router's logits over every
  // expert, the k most probable (the lower id first on a tie), their
  // probabilities normalized to sum to 1. Pick (t, j) is token t's j-th expert.
  std::vector<float> probs(n * n_expert);
  MatMul(w.router, h, n, probs.data(), pool);
  std::vector<float> weight(n * k);
  std::vector<std::vector<int64_t>> picks_of(n_expert);  // the picks each expert computes
  std::vector<int32_t> order(n_expert);
  for (int64_t t = 0; t < n; ++t) {
    float* p = &probs[t * n_expert];
    Softmax(p, n_expert);
    for (int32_t i = 0; i < n_expert; ++i) order[i] = i;
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float sum = 0;
    for (int64_t j = 0; j < k; ++j) sum += p[order[j]];
    sum = std::max(sum, 6.103515625e-5f);  // llama.cpp's floor: the smallest F16 normal
    for (int64_t j = 0; j < k; ++j) {
      weight[t * k + j] = p[order[j]] / sum;
      picks_of[order[j]].push_back(t * k + j);
    }
  }
  // Each expert once, over all the tokens that picked it: its weights are read once
  // per step however many tokens the batch holds. The experts go in waves of up to
  // kExpertWaveRows picks (a decode step's in one), each wave's gate and up products
  // in one parallel loop and its down products in another: two hand-offs between
  // threads a wave, not two an expert.
  constexpr int64_t kExpertWaveRows = 1024;
  std::vector<int64_t> row_of_pick(n * k);  // pick p's expert output: down[row_of_pick[p]]
  std::vector<float> down(n * k * e);       // [n * k, n_embd], the picks grouped by expert
  std::vector<float> in, gate, up;
  std::vector<MatMulProduct> products;
  for (int64_t x0 = 0, row0 = 0; x0 < n_expert;) {
    // The wave: experts [x0, x1), their picks rows [row0, row1) of down.
    int64_t x1 = x0, row1 = row0;
    while (x1 < n_expert && (row1 == row0 || row1 - row0 + static_cast<int64_t>(picks_of[x1].size()) <=
                                                 kExpertWaveRows)) {
      row1 += static_cast<int64_t>(picks_of[x1].size());
      ++x1;
    }
    const int64_t rows = row1 - row0;
    // Rows are gathered only for experts that some tokens did not pick (never in a
    // decode step: there every picked expert reads h).
    const bool gathers = std::any_of(picks_of.begin() + x0, picks_of.begin() + x1,
                                     [&](const std::vector<int64_t>& p) { return !p.empty() && std::ssize(p) != n; });
    if (gathers) in.resize(rows * e);
    gate.resize(rows * ff);
    up.resize(rows * ff);
    products.clear();
    for (int64_t x = x0, r = 0; x < x1; ++x) {
      const std::vector<int64_t>& picks = picks_of[x];
      const int64_t m = static_cast<int64_t>(picks.size());
      if (m == 0) continue;
      // Picked by every token, in order (always so in a one-token step): h as it
      // is, and every such expert's activations are quantized once.
      const float* input = h;
      if (m != n) {
        input = &in[r * e];
        for (int64_t i = 0; i < m; ++i) std::copy_n(h + (picks[i] / k) * e, e, &in[(r + i) * e]);
      }
      for (int64_t i = 0; i < m; ++i) row_of_pick[picks[i]] = row0 + r + i;
      products.push_back({&w.exp_gate[x], input, m, &gate[r * ff]});
      products.push_back({&w.exp_up[x], input, m, &up[r * ff]});
      r += m;
    }
    MatMulMany(products, pool);
    SiluMul(gate.data(), up.data(), rows * ff, gate.data());
    products.clear();
    for (int64_t x = x0, r = 0; x < x1; ++x) {
      const int64_t m = static_cast<int64_t>(picks_of[x].size());
      if (m == 0) continue;
      products.push_back({&w.exp_down[x], &gate[r * ff], m, &down[(row0 + r) * e]});
      r += m;
    }
    MatMulMany(products, pool);
    x0 = x1;
    row0 = row1;
  }
  // The weighted sum in pick order (as llama.cpp adds them): a token's result does
  // not depend on the batch it is in.
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * e;
    const float* y0 = &down[row_of_pick[t * k] * e];
    for (int64_t d = 0; d < e; ++d) o[d] = weight[t * k] * y0[d];
    for (int64_t j = 1; j < k; ++j) {
      const float wj = weight[t * k + j];
      const float* yj = &down[row_of_pick[t * k + j] * e];
      for (int64_t d = 0; d < e; ++d) o[d] += wj * yj[d];
    }
  }
}

void Model::PostNorm(const float* weight, int64_t n, float* rows) const {
  if (weight == nullptr) return;
  for (int64_t t = 0; t < n; ++t) {
    RmsNorm(rows + t * config_.n_embd, weight, config_.n_embd, config_.rms_norm_eps, rows + t * config_.n_embd);
  }
}

std::vector<float> Model::Forward(const ForwardBatch& batch, KvBuffer& kv, ThreadPool& pool) const {
  const ModelConfig& c = config_;
  const int64_t n = batch.num_tokens();
  const int block_size = kv.block_size();
  for (int64_t t = 0; t < n; ++t) {
    const ForwardSequence& seq = batch.sequences.at(batch.sequence_index[t]);
    CHECK(batch.positions[t] >= 0 && batch.positions[t] / block_size < seq.num_blocks)
        << "token " << t << " at position " << batch.positions[t] << " has no KV block";
    CHECK((seq.window_block_table != nullptr) == (kv.window_num_blocks() > 0))
        << "a KV buffer with a window pool is indexed by window block tables, and only then";
    CHECK(seq.window_block_table == nullptr || seq.window_block_table[batch.positions[t] / block_size] >= 0)
        << "token " << t << " at position " << batch.positions[t] << " has no window KV block";
    CHECK(batch.tokens[t].value() >= 0 && batch.tokens[t].value() < c.n_vocab);
  }
  // Activations, one row per token.
  std::vector<float> x(n * c.n_embd);                       // [n, n_embd] residual stream
  std::vector<float> h(n * c.n_embd);                       // [n, n_embd] normed input
  std::vector<float> q(n * c.q_dim()), attn(n * c.q_dim()); // [n, q_dim]
  std::vector<float> k(n * c.kv_dim()), v(n * c.kv_dim());  // [n, kv_dim]
  std::vector<float> proj(n * c.n_embd);                    // [n, n_embd]
  std::vector<float> gate(c.is_moe() ? 0 : n * c.n_ff), up(c.is_moe() ? 0 : n * c.n_ff);  // [n, n_ff]

  for (int64_t t = 0; t < n; ++t) DequantizeWeightRow(token_embd_, batch.tokens[t].value(), &x[t * c.n_embd]);
  if (c.embd_scale > 0) {
    for (float& v : x) v *= c.embd_scale;
  }
  // Rotation angles per token, shared by every layer (sliding layers may have
  // their own base and scale): [n, rope_dim / 2] each.
  const int half = c.rope_dim / 2;
  auto angles = [&](float base, float position_scale, std::vector<float>* cos, std::vector<float>* sin) {
    cos->resize(n * half);
    sin->resize(n * half);
    for (int64_t t = 0; t < n; ++t) {
      const double pos = static_cast<double>(batch.positions[t]) * position_scale;
      ref::RopeCosSin(pos, c.rope_dim, base, rope_freqs_, &(*cos)[t * half], &(*sin)[t * half]);
    }
    if (c.rope_attn_factor != 1.0f) {  // LongRoPE's factor on the rotation (llama.cpp's mscale)
      for (float& v : *cos) v *= c.rope_attn_factor;
      for (float& v : *sin) v *= c.rope_attn_factor;
    }
  };
  std::vector<float> rope_cos, rope_sin, swa_cos, swa_sin;
  angles(c.rope_base, c.rope_position_scale, &rope_cos, &rope_sin);
  if (c.sliding_window > 0) angles(c.rope_base_swa, c.rope_position_scale_swa, &swa_cos, &swa_sin);

  for (int64_t l = 0; l < c.n_layer; ++l) {
    const LayerWeights& w = layers_[l];
    const bool sliding = c.is_sliding(l);
    const std::vector<float>& cos = sliding ? swa_cos : rope_cos;
    const std::vector<float>& sin = sliding ? swa_sin : rope_sin;
    for (int64_t t = 0; t < n; ++t) {
      RmsNorm(&x[t * c.n_embd], w.attn_norm, c.n_embd, c.rms_norm_eps, &h[t * c.n_embd]);
    }
    MatMulSameInput({{&w.wq, q.data()}, {&w.wk, k.data()}, {&w.wv, v.data()}}, h.data(), n, pool);
    LayerKv layer = kv.layer(l);
    const AttentionShape kv_shape{static_cast<int>(c.n_head), static_cast<int>(c.n_head_kv),
                                  static_cast<int>(c.head_dim), block_size};
    for (int64_t t = 0; t < n; ++t) {
      float* qt = &q[t * c.q_dim()];
      float* kt = &k[t * c.kv_dim()];
      float* vt = &v[t * c.kv_dim()];
      if (w.bq) {
        for (int64_t i = 0; i < c.q_dim(); ++i) qt[i] += w.bq[i];
        for (int64_t i = 0; i < c.kv_dim(); ++i) kt[i] += w.bk[i];
        for (int64_t i = 0; i < c.kv_dim(); ++i) vt[i] += w.bv[i];
      }
      if (w.q_norm) {
        for (int64_t i = 0; i < c.n_head; ++i) {
          RmsNorm(qt + i * c.head_dim, w.q_norm, c.head_dim, c.rms_norm_eps, qt + i * c.head_dim);
        }
        for (int64_t i = 0; i < c.n_head_kv; ++i) {
          RmsNorm(kt + i * c.head_dim, w.k_norm, c.head_dim, c.rms_norm_eps, kt + i * c.head_dim);
        }
      }
      ApplyRope(qt, c.n_head, c.head_dim, c.rope_dim, &cos[t * half], &sin[t * half], c.rope_neox);
      ApplyRope(kt, c.n_head_kv, c.head_dim, c.rope_dim, &cos[t * half], &sin[t * half], c.rope_neox);
      const ForwardSequence& seq = batch.sequences[batch.sequence_index[t]];
      const int64_t slot = static_cast<int64_t>(TableOf(seq, l)[batch.positions[t] / block_size]) * block_size +
                           batch.positions[t] % block_size;
      StoreKv(layer, kv_shape, slot, kt, vt);
    }
    Attention(batch, l, q.data(), layer, block_size, attn.data(), pool);
    MatMul(w.wo, attn.data(), n, proj.data(), pool);
    PostNorm(w.attn_post_norm, n, proj.data());
    for (int64_t i = 0; i < n * c.n_embd; ++i) x[i] += proj[i];

    for (int64_t t = 0; t < n; ++t) {
      RmsNorm(&x[t * c.n_embd], w.ffn_norm, c.n_embd, c.rms_norm_eps, &h[t * c.n_embd]);
    }
    if (c.is_moe()) {
      ExpertsFfn(w, h.data(), n, proj.data(), pool);
    } else {
      MatMulSameInput({{&w.w_gate, gate.data()}, {&w.w_up, up.data()}}, h.data(), n, pool);
      if (c.gelu_ffn) {
        GeluTanhMul(gate.data(), up.data(), n * c.n_ff, gate.data());
      } else {
        SiluMul(gate.data(), up.data(), n * c.n_ff, gate.data());
      }
      MatMul(w.w_down, gate.data(), n, proj.data(), pool);
    }
    PostNorm(w.ffn_post_norm, n, proj.data());
    for (int64_t i = 0; i < n * c.n_embd; ++i) x[i] += proj[i];
  }

  const int64_t num_logits = static_cast<int64_t>(batch.logit_tokens.size());
  std::vector<float> normed(num_logits * c.n_embd);  // [num_logits, n_embd]
  for (int64_t i = 0; i < num_logits; ++i) {
    RmsNorm(&x[batch.logit_tokens[i] * c.n_embd], output_norm_, c.n_embd, c.rms_norm_eps,
            &normed[i * c.n_embd]);
  }
  std::vector<float> logits(num_logits * c.n_vocab);  // [num_logits, n_vocab]
  MatMul(output_, normed.data(), num_logits, logits.data(), pool);
  if (c.final_softcap > 0) SoftCap(logits.data(), static_cast<int64_t>(logits.size()), c.final_softcap);
  return logits;
}

}  // namespace tachyon
