#include "model/bert.h"

#include <cmath>

#include "kernels/attention.h"
#include "kernels/ops.h"
#include "kernels/ref/ops.h"
#include "model/tensor_binding.h"

namespace tachyon {

StatusOr<Pooling> ParsePooling(std::string_view name) {
  if (name == "mean") return Pooling::kMean;
  if (name == "cls") return Pooling::kCls;
  if (name == "last") return Pooling::kLast;
  return InvalidArgumentError("unknown pooling '" + std::string(name) + "' (mean, cls, last)");
}

const char* PoolingName(Pooling pooling) {
  switch (pooling) {
    case Pooling::kMean: return "mean";
    case Pooling::kCls: return "cls";
    case Pooling::kLast: return "last";
  }
  return "?";
}

bool IsEncoderArchitecture(std::string_view architecture) {
  return architecture == "bert" || architecture == "nomic-bert";
}

StatusOr<EncoderConfig> EncoderConfig::FromGguf(const GgufFile& file) {
  EncoderConfig c;
  ASSIGN_OR_RETURN(c.architecture, file.GetString("general.architecture"));
  if (!IsEncoderArchitecture(c.architecture)) {
    return UnimplementedError("architecture '" + c.architecture +
                              "' is not an embedding model Tachyon runs (bert and nomic-bert are)");
  }
  const std::string a = c.architecture + ".";
  auto required = [&](const std::string& key, int64_t* out) { return ReadSizeKey(file, a + key, out); };
  ASSIGN_OR_RETURN(const TransformerSizes sizes, ReadTransformerSizes(file, c.architecture));
  c.n_embd = sizes.n_embd, c.n_layer = sizes.n_layer, c.n_head = sizes.n_head, c.n_ff = sizes.n_ff;
  c.context_length = sizes.context_length;
  if (file.Find(a + "attention.head_count_kv")) {
    int64_t n_head_kv = 0;
    RETURN_IF_ERROR(required("attention.head_count_kv", &n_head_kv));
    if (n_head_kv != c.n_head) {
      return UnimplementedError("an encoder with " + std::to_string(n_head_kv) + " KV heads for " +
                                std::to_string(c.n_head) + " query heads (grouped-query attention) is not supported");
    }
  }
  if (c.n_embd % c.n_head != 0) {
    return InvalidArgumentError("embedding length " + std::to_string(c.n_embd) + " is not a multiple of " +
                                std::to_string(c.n_head) + " heads");
  }
  c.head_dim = c.n_embd / c.n_head;
  if (auto causal = file.Find(a + "attention.causal"); causal != nullptr && causal->AsBool().value_or(false)) {
    return UnimplementedError(a + "attention.causal is true: Tachyon's encoders attend both ways");
  }
  if (auto eps = file.GetFloat(a + "attention.layer_norm_epsilon"); eps.ok()) c.norm_eps = static_cast<float>(*eps);
  if (const GgufValue* pooling = file.Find(a + "pooling_type"); pooling != nullptr) {
    std::optional<uint64_t> p = pooling->AsUint();
    if (!p || (*p != 1 && *p != 2 && *p != 3)) {
      return UnimplementedError(a + "pooling_type " + (p ? std::to_string(*p) : std::string("?")) +
                                " is not supported (1 mean, 2 cls, 3 last)");
    }
    c.pooling = static_cast<Pooling>(*p);
  }
  if (c.rotary()) {
    if (c.head_dim % 2 != 0) return InvalidArgumentError("head dimension must be even for rope");
    if (auto base = file.GetFloat(a + "rope.freq_base"); base.ok()) c.rope_base = static_cast<float>(*base);
  }
  const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return InvalidArgumentError("tensor token_embd.weight is missing");
  if (embd->shape.size() != 2 || embd->shape[0] != c.n_embd) {
    return InvalidArgumentError("tensor token_embd.weight: expected shape [" + std::to_string(c.n_embd) +
                                ", n_vocab], file has " + embd->ShapeString());
  }
  c.n_vocab = embd->shape[1];
  const GgufTensorInfo* types = file.FindTensor("token_types.weight");
  if (types == nullptr) return InvalidArgumentError("tensor token_types.weight is missing");
  if (types->shape.size() != 2 || types->shape[0] != c.n_embd || types->shape[1] < 1) {
    return InvalidArgumentError("tensor token_types.weight: expected shape [" + std::to_string(c.n_embd) +
                                ", n_token_types], file has " + types->ShapeString());
  }
  c.n_token_types = types->shape[1];
  return c;
}

StatusOr<std::unique_ptr<EncoderModel>> EncoderModel::Load(const std::string& path) {
  ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  StatusOr<std::unique_ptr<EncoderModel>> model = FromFile(std::move(file));
  if (!model.ok()) return model.status().WithContext(path);
  return model;
}

StatusOr<std::unique_ptr<EncoderModel>> EncoderModel::FromFile(GgufFile file) {
  ASSIGN_OR_RETURN(EncoderConfig config, EncoderConfig::FromGguf(file));
  std::unique_ptr<EncoderModel> model(new EncoderModel(std::move(file), std::move(config)));
  RETURN_IF_ERROR(model->BindWeights());
  return model;
}

Status EncoderModel::BindWeights() {
  const EncoderConfig& c = config_;
  const int64_t e = c.n_embd;
  auto matrix = [&](const std::string& name, int64_t rows, int64_t cols, WeightMatrix* out) {
    return BindMatrix(file_, name, rows, cols, out);
  };
  auto vector = [&](const std::string& name, int64_t n, const float** out) { return BindVector(file_, name, n, out); };
  RETURN_IF_ERROR(matrix("token_embd.weight", c.n_vocab, e, &token_embd_));
  RETURN_IF_ERROR(matrix("token_types.weight", c.n_token_types, e, &token_types_));
  if (!c.rotary()) RETURN_IF_ERROR(matrix("position_embd.weight", c.context_length, e, &position_embd_));
  RETURN_IF_ERROR(vector("token_embd_norm.weight", e, &embd_norm_));
  RETURN_IF_ERROR(vector("token_embd_norm.bias", e, &embd_norm_b_));
  layers_.resize(c.n_layer);
  for (int64_t l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    Layer& w = layers_[l];
    if (c.rotary()) {
      RETURN_IF_ERROR(matrix(p + "attn_qkv.weight", 3 * e, e, &w.wqkv));
    } else {
      RETURN_IF_ERROR(matrix(p + "attn_q.weight", e, e, &w.wq));
      RETURN_IF_ERROR(matrix(p + "attn_k.weight", e, e, &w.wk));
      RETURN_IF_ERROR(matrix(p + "attn_v.weight", e, e, &w.wv));
      RETURN_IF_ERROR(vector(p + "attn_q.bias", e, &w.bq));
      RETURN_IF_ERROR(vector(p + "attn_k.bias", e, &w.bk));
      RETURN_IF_ERROR(vector(p + "attn_v.bias", e, &w.bv));
      RETURN_IF_ERROR(vector(p + "attn_output.bias", e, &w.bo));
      RETURN_IF_ERROR(vector(p + "ffn_up.bias", c.n_ff, &w.b_up));
      RETURN_IF_ERROR(vector(p + "ffn_down.bias", e, &w.b_down));
    }
    RETURN_IF_ERROR(matrix(p + "attn_output.weight", e, e, &w.wo));
    RETURN_IF_ERROR(vector(p + "attn_output_norm.weight", e, &w.attn_norm));
    RETURN_IF_ERROR(vector(p + "attn_output_norm.bias", e, &w.attn_norm_b));
    RETURN_IF_ERROR(matrix(p + "ffn_up.weight", c.n_ff, e, &w.w_up));
    if (c.rotary()) RETURN_IF_ERROR(matrix(p + "ffn_gate.weight", c.n_ff, e, &w.w_gate));
    RETURN_IF_ERROR(matrix(p + "ffn_down.weight", e, c.n_ff, &w.w_down));
    RETURN_IF_ERROR(vector(p + "layer_output_norm.weight", e, &w.out_norm));
    RETURN_IF_ERROR(vector(p + "layer_output_norm.bias", e, &w.out_norm_b));
    // Packed for this CPU's kernels where it has them, the file's pages then
    // released (as the decoder's: kernels/matmul.h).
    for (WeightMatrix* m : {&w.wqkv, &w.wq, &w.wk, &w.wv, &w.wo, &w.w_up, &w.w_gate, &w.w_down}) {
      PackForMatMul(m);
      if (m->packed != nullptr) file_.ReleasePages(m->data, *GgmlRowBytes(m->type, m->cols) * m->rows);
    }
  }
  return Status::Ok();
}

namespace {

// rows [n, width] += bias [width]
void AddBias(float* rows, const float* bias, int64_t n, int64_t width) {
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < width; ++i) rows[t * width + i] += bias[i];
  }
}

// x = LayerNorm(x + residual) row by row; x, residual: [n, width].
void AddAndNorm(float* x, const float* residual, const float* weight, const float* bias, int64_t n, int64_t width,
                float eps) {
  for (int64_t i = 0; i < n * width; ++i) x[i] += residual[i];
  for (int64_t t = 0; t < n; ++t) LayerNorm(&x[t * width], weight, bias, width, eps, &x[t * width]);
}

}  // namespace

std::vector<float> EncoderModel::Embed(std::span<const std::vector<TokenId>> sequences, Pooling pooling,
                                       ThreadPool& pool) const {
  const EncoderConfig& c = config_;
  const int64_t e = c.n_embd;
  // Token t of the batch is token positions[t] of sequence seq_of[t], whose first row is starts[seq].
  std::vector<int64_t> starts, seq_of, positions;
  for (size_t s = 0; s < sequences.size(); ++s) {
    const std::vector<TokenId>& seq = sequences[s];
    CHECK(!seq.empty() && static_cast<int64_t>(seq.size()) <= c.context_length)
        << "sequence " << s << " has " << seq.size() << " tokens (1.." << c.context_length << ")";
    starts.push_back(static_cast<int64_t>(positions.size()));
    for (size_t i = 0; i < seq.size(); ++i) {
      CHECK(seq[i].value() >= 0 && seq[i].value() < c.n_vocab) << "token id " << seq[i].value();
      seq_of.push_back(static_cast<int64_t>(s));
      positions.push_back(static_cast<int64_t>(i));
    }
  }
  starts.push_back(static_cast<int64_t>(positions.size()));
  const int64_t n = static_cast<int64_t>(positions.size());
  if (n == 0) return {};

  // Activations, one row per token.
  std::vector<float> x(n * e);                   // [n, e] the layer's input (post-norm stream)
  std::vector<float> qkv(n * 3 * e);             // [n, 3e] Q | K | V
  std::vector<float> attn(n * e), proj(n * e);   // [n, e]
  std::vector<float> up(n * c.n_ff), gate(c.rotary() ? n * c.n_ff : 0);  // [n, n_ff]
  std::vector<float> row(e);

  std::vector<float> type0(e);
  DequantizeWeightRow(token_types_, 0, type0.data());  // every token is of type 0 ("sentence A")
  for (int64_t t = 0; t < n; ++t) {
    float* xt = &x[t * e];
    DequantizeWeightRow(token_embd_, sequences[seq_of[t]][positions[t]].value(), xt);
    for (int64_t i = 0; i < e; ++i) xt[i] += type0[i];
    if (!c.rotary()) {
      DequantizeWeightRow(position_embd_, positions[t], row.data());
      for (int64_t i = 0; i < e; ++i) xt[i] += row[i];
    }
    LayerNorm(xt, embd_norm_, embd_norm_b_, e, c.norm_eps, xt);
  }
  const int half = static_cast<int>(c.head_dim / 2);
  std::vector<float> rope_cos, rope_sin;  // [n, head_dim / 2]
  if (c.rotary()) {
    rope_cos.resize(n * half);
    rope_sin.resize(n * half);
    for (int64_t t = 0; t < n; ++t) {
      ref::RopeCosSin(static_cast<double>(positions[t]), static_cast<int>(c.head_dim), c.rope_base, nullptr,
                      &rope_cos[t * half], &rope_sin[t * half]);
    }
  }
  const AttentionShape shape{static_cast<int>(c.n_head), static_cast<int>(c.n_head), static_cast<int>(c.head_dim),
                             0};
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  for (const Layer& w : layers_) {
    // Q, K and V rows: the fused matrix writes [n, 3e] rows of Q | K | V;
    // bert's three matrices write three [n, e] blocks, then add their biases.
    const float *q, *k, *v;
    int64_t stride;
    if (c.rotary()) {
      MatMul(w.wqkv, x.data(), n, qkv.data(), pool);
      q = qkv.data(), k = q + e, v = q + 2 * e, stride = 3 * e;
      for (int64_t t = 0; t < n; ++t) {
        for (float* head : {&qkv[t * stride], &qkv[t * stride + e]}) {
          ApplyRope(head, static_cast<int>(c.n_head), static_cast<int>(c.head_dim), static_cast<int>(c.head_dim),
                    &rope_cos[t * half], &rope_sin[t * half], /*neox=*/true);
        }
      }
    } else {
      float* blocks = qkv.data();
      MatMul(w.wq, x.data(), n, blocks, pool);
      MatMul(w.wk, x.data(), n, blocks + n * e, pool);
      MatMul(w.wv, x.data(), n, blocks + 2 * n * e, pool);
      AddBias(blocks, w.bq, n, e);
      AddBias(blocks + n * e, w.bk, n, e);
      AddBias(blocks + 2 * n * e, w.bv, n, e);
      q = blocks, k = blocks + n * e, v = blocks + 2 * n * e, stride = e;
    }
    pool.ParallelFor(n, [&](size_t begin, size_t end, int) {
      for (size_t t = begin; t < end; ++t) {
        const int64_t first = starts[seq_of[t]], len = starts[seq_of[t] + 1] - first;
        AttendDense(q + t * stride, k + first * stride, v + first * stride, stride, len, shape, scale, &attn[t * e]);
      }
    });
    MatMul(w.wo, attn.data(), n, proj.data(), pool);
    if (w.bo) AddBias(proj.data(), w.bo, n, e);
    AddAndNorm(x.data(), proj.data(), w.attn_norm, w.attn_norm_b, n, e, c.norm_eps);

    MatMul(w.w_up, x.data(), n, up.data(), pool);
    if (c.rotary()) {
      MatMul(w.w_gate, x.data(), n, gate.data(), pool);
      SiluMul(gate.data(), up.data(), n * c.n_ff, up.data());
    } else {
      AddBias(up.data(), w.b_up, n, c.n_ff);
      Gelu(up.data(), n * c.n_ff, up.data());
    }
    MatMul(w.w_down, up.data(), n, proj.data(), pool);
    if (w.b_down) AddBias(proj.data(), w.b_down, n, e);
    AddAndNorm(x.data(), proj.data(), w.out_norm, w.out_norm_b, n, e, c.norm_eps);
  }

  std::vector<float> out(sequences.size() * e, 0.0f);
  for (size_t s = 0; s < sequences.size(); ++s) {
    float* v = &out[s * e];
    const int64_t first = starts[s], last = starts[s + 1] - 1;
    switch (pooling) {
      case Pooling::kCls: std::copy_n(&x[first * e], e, v); break;
      case Pooling::kLast: std::copy_n(&x[last * e], e, v); break;
      case Pooling::kMean: {
        std::vector<double> sum(e, 0.0);
        for (int64_t t = first; t <= last; ++t) {
          for (int64_t i = 0; i < e; ++i) sum[i] += x[t * e + i];
        }
        for (int64_t i = 0; i < e; ++i) v[i] = static_cast<float>(sum[i] / static_cast<double>(last - first + 1));
        break;
      }
    }
  }
  return out;
}

}  // namespace tachyon
