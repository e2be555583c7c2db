#include "model/model_gen.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <memory>

#include "base/thread_pool.h"
#include "gguf/gguf_writer.h"
#include "kernels/ref/quantize.h"
#include "tokenizer/unicode.h"

namespace tachyon {
namespace {

constexpr float kWeightStd = 0.02f;
constexpr float kNormStd = 0.1f;  // ModelShape::random_norms: 1 + N(0, kNormStd^2)
// Rows generated per chunk are sized to about this many output bytes.
constexpr uint64_t kChunkBytes = 16 << 20;

enum class Init { kNormal, kOnes, kRopeFreqs, kNearOne, kRopeShort, kRopeLong };

struct TensorPlan {
  std::string name;
  GgmlType type;
  std::vector<int64_t> shape;  // shape[0] is the row length
  Init init;
};

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Fills row with N(0, std^2) by Box-Muller from a SplitMix64 stream.
void FillNormal(uint64_t state, float std, float* row, int64_t n) {
  constexpr float kTwoPi = 6.28318530717958647692f;
  for (int64_t i = 0; i < n; i += 2) {
    state = SplitMix64(state);
    float u1 = (static_cast<float>(state >> 40) + 1.0f) * (1.0f / 16777216.0f);  // (0, 1]
    float u2 = static_cast<float>((state >> 16) & 0xffffff) * (1.0f / 16777216.0f);
    float r = std * std::sqrt(-2.0f * std::log(u1));
    row[i] = r * std::cos(kTwoPi * u2);
    if (i + 1 < n) row[i + 1] = r * std::sin(kTwoPi * u2);
  }
}

// Llama 3 frequency factors (rope_freqs.weight): 1 for high frequencies, `factor`
// for low ones, smooth in between (as in Meta's apply_scaling).
void FillRopeFreqs(const ModelShape& shape, float* row, int64_t n) {
  const Llama3RopeScaling& s = shape.rope_scaling;
  double low_freq_wavelen = s.original_context_length / s.low_freq_factor;
  double high_freq_wavelen = s.original_context_length / s.high_freq_factor;
  for (int64_t i = 0; i < n; ++i) {
    double freq = 1.0 / std::pow(shape.rope_theta, 2.0 * i / shape.head_dim());
    double wavelen = 2 * M_PI / freq;
    if (wavelen < high_freq_wavelen) {
      row[i] = 1.0f;
    } else if (wavelen > low_freq_wavelen) {
      row[i] = s.factor;
    } else {
      double smooth = (s.original_context_length / wavelen - s.low_freq_factor) /
                      (s.high_freq_factor - s.low_freq_factor);
      row[i] = static_cast<float>(1.0 / ((1 - smooth) / s.factor + smooth));
    }
  }
}

// llama.cpp's tensors for the bert and nomic-bert encoders.
std::vector<TensorPlan> PlanEncoderTensors(const ModelShape& shape, GgmlType type, int64_t vocab_size) {
  const int64_t e = shape.n_embd, ff = shape.n_ff;
  const bool bert = shape.architecture == "bert";
  std::vector<TensorPlan> plan;
  auto norm = [&](const std::string& name) {
    plan.push_back({name + ".weight", GgmlType::kF32, {e}, Init::kOnes});
    plan.push_back({name + ".bias", GgmlType::kF32, {e}, Init::kNormal});
  };
  auto linear = [&](const std::string& name, int64_t in, int64_t out, bool bias) {
    plan.push_back({name + ".weight", type, {in, out}, Init::kNormal});
    if (bias) plan.push_back({name + ".bias", GgmlType::kF32, {out}, Init::kNormal});
  };
  plan.push_back({"token_embd.weight", type, {e, vocab_size}, Init::kNormal});
  plan.push_back({"token_types.weight", type, {e, shape.token_types}, Init::kNormal});
  if (bert) plan.push_back({"position_embd.weight", type, {e, shape.context_length}, Init::kNormal});
  norm("token_embd_norm");
  for (int64_t l = 0; l < shape.n_layer; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    if (bert) {
      for (const char* m : {"attn_q", "attn_k", "attn_v"}) linear(p + m, e, e, true);
    } else {
      linear(p + "attn_qkv", e, 3 * e, false);
    }
    linear(p + "attn_output", e, e, bert);
    norm(p + "attn_output_norm");
    linear(p + "ffn_up", e, ff, bert);
    if (!bert) linear(p + "ffn_gate", e, ff, false);
    linear(p + "ffn_down", ff, e, bert);
    norm(p + "layer_output_norm");
  }
  return plan;
}

std::vector<TensorPlan> PlanTensors(const ModelShape& shape, const QuantScheme& scheme, int64_t vocab_size) {
  if (shape.is_encoder()) {
    std::vector<TensorPlan> plan = PlanEncoderTensors(shape, scheme.base, vocab_size);
    for (TensorPlan& t : plan) {
      t.type = TensorTypeFor(scheme, {.name = t.name,
                                      .row_length = t.shape[0],
                                      .num_dims = static_cast<int>(t.shape.size()),
                                      .layer = LayerOfTensor(t.name),
                                      .num_layers = static_cast<int>(shape.n_layer)});
    }
    return plan;
  }
  const int64_t e = shape.n_embd, q = shape.n_head * shape.head_dim(),
                kv = shape.n_head_kv * shape.head_dim(), ff = shape.n_ff;
  const GgmlType type = scheme.base;  // placeholder; each tensor's type is chosen below
  const Init norm = shape.random_norms ? Init::kNearOne : Init::kOnes;
  const bool phi3 = shape.architecture == "phi3";
  std::vector<TensorPlan> plan;
  plan.push_back({"token_embd.weight", type, {e, vocab_size}, Init::kNormal});
  if (shape.rope_original_context > 0) {
    plan.push_back({"rope_factors_long.weight", GgmlType::kF32, {shape.rotary_dim() / 2}, Init::kRopeLong});
    plan.push_back({"rope_factors_short.weight", GgmlType::kF32, {shape.rotary_dim() / 2}, Init::kRopeShort});
  }
  if (shape.rope_scaling.factor > 0) {
    plan.push_back({"rope_freqs.weight", GgmlType::kF32, {shape.head_dim() / 2}, Init::kRopeFreqs});
  }
  for (int64_t l = 0; l < shape.n_layer; ++l) {
    std::string p = "blk." + std::to_string(l) + ".";
    plan.push_back({p + "attn_norm.weight", GgmlType::kF32, {e}, norm});
    if (phi3) {
      plan.push_back({p + "attn_qkv.weight", type, {e, q + 2 * kv}, Init::kNormal});
    } else {
      plan.push_back({p + "attn_q.weight", type, {e, q}, Init::kNormal});
      if (shape.qkv_bias) plan.push_back({p + "attn_q.bias", GgmlType::kF32, {q}, Init::kNormal});
      plan.push_back({p + "attn_k.weight", type, {e, kv}, Init::kNormal});
      if (shape.qkv_bias) plan.push_back({p + "attn_k.bias", GgmlType::kF32, {kv}, Init::kNormal});
      plan.push_back({p + "attn_v.weight", type, {e, kv}, Init::kNormal});
      if (shape.qkv_bias) plan.push_back({p + "attn_v.bias", GgmlType::kF32, {kv}, Init::kNormal});
    }
    if (shape.qk_norm()) {
      plan.push_back({p + "attn_q_norm.weight", GgmlType::kF32, {shape.head_dim()}, norm});
      plan.push_back({p + "attn_k_norm.weight", GgmlType::kF32, {shape.head_dim()}, norm});
    }
    plan.push_back({p + "attn_output.weight", type, {q, e}, Init::kNormal});
    if (shape.is_gemma()) plan.push_back({p + "post_attention_norm.weight", GgmlType::kF32, {e}, norm});
    plan.push_back({p + "ffn_norm.weight", GgmlType::kF32, {e}, norm});
    if (shape.is_gemma()) plan.push_back({p + "post_ffw_norm.weight", GgmlType::kF32, {e}, norm});
    if (phi3) {  // ffn_up holds the gate's rows, then up's
      plan.push_back({p + "ffn_up.weight", type, {e, 2 * ff}, Init::kNormal});
      plan.push_back({p + "ffn_down.weight", type, {ff, e}, Init::kNormal});
    } else if (shape.is_moe()) {
      const int64_t xff = shape.expert_ff(), ne = shape.n_expert;
      plan.push_back({p + "ffn_gate_inp.weight", GgmlType::kF32, {e, ne}, Init::kNormal});  // as llama.cpp keeps it
      plan.push_back({p + "ffn_gate_exps.weight", type, {e, xff, ne}, Init::kNormal});
      plan.push_back({p + "ffn_down_exps.weight", type, {xff, e, ne}, Init::kNormal});
      plan.push_back({p + "ffn_up_exps.weight", type, {e, xff, ne}, Init::kNormal});
    } else {
      plan.push_back({p + "ffn_gate.weight", type, {e, ff}, Init::kNormal});
      plan.push_back({p + "ffn_up.weight", type, {e, ff}, Init::kNormal});
      plan.push_back({p + "ffn_down.weight", type, {ff, e}, Init::kNormal});
    }
  }
  plan.push_back({"output_norm.weight", GgmlType::kF32, {e}, norm});
  if (!shape.tied_embeddings) {
    plan.push_back({"output.weight", type, {e, vocab_size}, Init::kNormal});
  }
  for (TensorPlan& t : plan) {
    if (t.name.find("ffn_gate_inp") != std::string::npos) continue;  // the router stays F32
    const bool is_output = t.name == "output.weight" || (shape.tied_embeddings && t.name == "token_embd.weight");
    t.type = TensorTypeFor(scheme, {.name = t.name,
                                    .row_length = t.shape[0],
                                    .num_dims = static_cast<int>(t.shape.size()),
                                    .layer = LayerOfTensor(t.name),
                                    .num_layers = static_cast<int>(shape.n_layer),
                                    .is_output = is_output,
                                    .gqa = static_cast<int>(shape.n_head / std::max<int64_t>(1, shape.n_head_kv))});
  }
  return plan;
}

void SetArchitectureMetadata(const ModelShape& shape, const QuantScheme& scheme, int64_t vocab_size,
                             GgufWriter* writer) {
  const std::string& a = shape.architecture;
  auto u32 = [](int64_t v) { return GgufValue(static_cast<uint32_t>(v)); };
  writer->SetMetadata("general.architecture", GgufValue(a));
  writer->SetMetadata("general.name", GgufValue("tachyon random " + shape.name));
  writer->SetMetadata("general.file_type", GgufValue(scheme.file_type));
  if (GetGgmlTypeTraits(scheme.base).is_quantized) {
    writer->SetMetadata("general.quantization_version", GgufValue(uint32_t{2}));
  }
  writer->SetMetadata(a + ".vocab_size", u32(vocab_size));
  writer->SetMetadata(a + ".context_length", u32(shape.context_length));
  writer->SetMetadata(a + ".embedding_length", u32(shape.n_embd));
  writer->SetMetadata(a + ".block_count", u32(shape.n_layer));
  writer->SetMetadata(a + ".feed_forward_length", u32(shape.n_ff));
  writer->SetMetadata(a + ".attention.head_count", u32(shape.n_head));
  writer->SetMetadata(a + ".attention.head_count_kv", u32(shape.n_head_kv));
  if (shape.is_encoder()) {
    writer->SetMetadata(a + ".attention.layer_norm_epsilon", GgufValue(shape.layer_norm_eps));
    writer->SetMetadata(a + ".attention.causal", GgufValue(false));
    writer->SetMetadata(a + ".pooling_type", u32(shape.pooling_type));
    if (shape.architecture == "nomic-bert") writer->SetMetadata(a + ".rope.freq_base", GgufValue(shape.rope_theta));
    return;
  }
  writer->SetMetadata(a + ".attention.layer_norm_rms_epsilon", GgufValue(shape.rms_norm_eps));
  writer->SetMetadata(a + ".rope.freq_base", GgufValue(shape.rope_theta));
  writer->SetMetadata(a + ".rope.dimension_count", u32(shape.rotary_dim()));
  if (shape.rope_linear_factor > 0) {
    writer->SetMetadata(a + ".rope.scaling.type", GgufValue(std::string("linear")));
    writer->SetMetadata(a + ".rope.scaling.factor", GgufValue(shape.rope_linear_factor));
  }
  if (shape.rope_original_context > 0) {
    writer->SetMetadata(a + ".rope.scaling.original_context_length", u32(shape.rope_original_context));
    writer->SetMetadata(a + ".rope.scaling.attn_factor", GgufValue(shape.rope_attn_factor));
  }
  if (shape.sliding_window > 0) {
    writer->SetMetadata(a + ".attention.sliding_window", u32(shape.sliding_window));
    writer->SetMetadata(a + ".attention.sliding_window_pattern", u32(shape.swa_period));
  }
  if (shape.rope_theta_swa > 0) writer->SetMetadata(a + ".rope.freq_base_swa", GgufValue(shape.rope_theta_swa));
  if (shape.attn_softcap > 0) writer->SetMetadata(a + ".attn_logit_softcapping", GgufValue(shape.attn_softcap));
  if (shape.final_softcap > 0) writer->SetMetadata(a + ".final_logit_softcapping", GgufValue(shape.final_softcap));
  if (shape.is_moe()) {
    writer->SetMetadata(a + ".expert_count", u32(shape.n_expert));
    writer->SetMetadata(a + ".expert_used_count", u32(shape.n_expert_used));
    if (shape.n_ff_exp > 0) writer->SetMetadata(a + ".expert_feed_forward_length", u32(shape.n_ff_exp));
  }
  if (shape.key_length > 0) {
    writer->SetMetadata(a + ".attention.key_length", u32(shape.key_length));
    writer->SetMetadata(a + ".attention.value_length", u32(shape.key_length));
  }
}

// Generates `plan` rows [row_begin, row_end) into `out` (row_bytes each).
void GenerateRows(const TensorPlan& plan, const ModelShape& shape, uint64_t tensor_seed,
                  int64_t row_begin, int64_t row_end, uint8_t* out, ThreadPool& pool) {
  const int64_t ne0 = plan.shape[0];
  const uint64_t row_bytes = *GgmlRowBytes(plan.type, ne0);
  std::vector<std::vector<float>> scratch(pool.num_threads(), std::vector<float>(ne0));
  pool.ParallelFor(row_end - row_begin, [&](size_t begin, size_t end, int thread_idx) {
    float* row = scratch[thread_idx].data();
    for (size_t i = begin; i < end; ++i) {
      int64_t r = row_begin + static_cast<int64_t>(i);
      switch (plan.init) {
        case Init::kNormal: FillNormal(SplitMix64(tensor_seed ^ static_cast<uint64_t>(r)), kWeightStd, row, ne0); break;
        case Init::kOnes: std::fill(row, row + ne0, 1.0f); break;
        case Init::kNearOne:
          FillNormal(SplitMix64(tensor_seed ^ static_cast<uint64_t>(r)), kNormStd, row, ne0);
          for (int64_t j = 0; j < ne0; ++j) row[j] += 1.0f;
          break;
        case Init::kRopeFreqs: FillRopeFreqs(shape, row, ne0); break;
        // LongRoPE-like factors: short ones near 1, long ones rising to ~ context / original.
        case Init::kRopeShort:
          for (int64_t j = 0; j < ne0; ++j) row[j] = 1.0f + 0.25f * static_cast<float>(j) / static_cast<float>(ne0);
          break;
        case Init::kRopeLong: {
          const float top = static_cast<float>(shape.context_length) / static_cast<float>(shape.rope_original_context);
          for (int64_t j = 0; j < ne0; ++j) {
            const float f = static_cast<float>(j) / static_cast<float>(ne0);
            row[j] = 1.0f + (top - 1.0f) * f * f;
          }
          break;
        }
      }
      ref::QuantizeRow(plan.type, row, out + i * row_bytes, ne0);
    }
  });
}

}  // namespace

StatusOr<std::vector<GgufKeyValue>> LoadVocabMetadata(const std::string& path) {
  ASSIGN_OR_RETURN(GgufFile file, GgufFile::Open(path));
  std::vector<GgufKeyValue> vocab;
  for (const GgufKeyValue& kv : file.metadata()) {
    if (kv.key.rfind("tokenizer.", 0) == 0) vocab.push_back(kv);
  }
  const GgufValue* tokens = file.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr || tokens->AsArray() == nullptr ||
      tokens->AsArray()->get<std::string>() == nullptr || tokens->AsArray()->empty()) {
    return InvalidArgumentError(path + ": no tokenizer.ggml.tokens string array; pass a GGUF "
                                "model or vocab-only file");
  }
  return vocab;
}

std::vector<GgufKeyValue> BuiltinByteVocab() {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(ByteToUnicode(static_cast<uint8_t>(b)));
    types.push_back(1);  // NORMAL
  }
  tokens.push_back("<s>");
  tokens.push_back("</s>");
  types.push_back(3);  // CONTROL
  types.push_back(3);
  return {
      {"tokenizer.ggml.model", GgufValue("gpt2")},
      {"tokenizer.ggml.pre", GgufValue("default")},
      {"tokenizer.ggml.tokens", GgufValue(GgufArray(tokens))},
      {"tokenizer.ggml.token_type", GgufValue(GgufArray(types))},
      {"tokenizer.ggml.merges", GgufValue(GgufArray::Empty(GgufValueType::kString))},
      {"tokenizer.ggml.bos_token_id", GgufValue(uint32_t{256})},
      {"tokenizer.ggml.eos_token_id", GgufValue(uint32_t{257})},
      {"tokenizer.ggml.add_bos_token", GgufValue(true)},
      {"tokenizer.ggml.add_eos_token", GgufValue(false)},
  };
}

StatusOr<ModelGenResult> GenerateRandomModel(const ModelGenOptions& options) {
  CHECK(options.shape != nullptr);
  const ModelShape& shape = *options.shape;
  std::vector<GgufKeyValue> vocab;
  if (options.vocab_path.empty()) {
    vocab = BuiltinByteVocab();
  } else {
    ASSIGN_OR_RETURN(vocab, LoadVocabMetadata(options.vocab_path));
  }
  int64_t vocab_size = 0;
  for (const GgufKeyValue& kv : vocab) {
    if (kv.key == "tokenizer.ggml.tokens") vocab_size = static_cast<int64_t>(kv.value.AsArray()->size());
  }

  GgufWriter writer;
  SetArchitectureMetadata(shape, options.scheme, vocab_size, &writer);
  for (const GgufKeyValue& kv : vocab) writer.SetMetadata(kv.key, kv.value);
  if (shape.is_encoder()) {
    // llama.cpp sizes token_types.weight from this key (BERT vocabularies carry it).
    writer.SetMetadata("tokenizer.ggml.token_type_count", GgufValue(static_cast<uint32_t>(shape.token_types)));
  }

  std::vector<TensorPlan> plan = PlanTensors(shape, options.scheme, vocab_size);
  for (const TensorPlan& t : plan) {
    RETURN_IF_ERROR(writer.AddTensor(t.name, t.type, t.shape)
                        .WithContext("shape " + shape.name + " with type " + GgmlTypeName(t.type)));
  }
  RETURN_IF_ERROR(writer.Open(options.out_path));

  ThreadPool pool(options.num_threads);
  ModelGenResult result{.vocab_size = vocab_size};
  std::vector<uint8_t> chunk;
  for (size_t t = 0; t < plan.size(); ++t) {
    const TensorPlan& tensor = plan[t];
    const int64_t ne0 = tensor.shape[0];
    const int64_t num_rows = [&] {
      int64_t rows = 1;
      for (size_t d = 1; d < tensor.shape.size(); ++d) rows *= tensor.shape[d];
      return rows;
    }();
    const uint64_t row_bytes = *GgmlRowBytes(tensor.type, ne0);
    const int64_t rows_per_chunk = std::max<int64_t>(1, kChunkBytes / row_bytes);
    const uint64_t tensor_seed = SplitMix64(SplitMix64(options.seed) ^ (t + 1));
    for (int64_t r = 0; r < num_rows; r += rows_per_chunk) {
      int64_t r_end = std::min(num_rows, r + rows_per_chunk);
      chunk.resize((r_end - r) * row_bytes);
      GenerateRows(tensor, shape, tensor_seed, r, r_end, chunk.data(), pool);
      RETURN_IF_ERROR(writer.WriteTensorData(chunk.data(), chunk.size()));
    }
    result.num_parameters += ne0 * num_rows;
  }
  RETURN_IF_ERROR(writer.Close());
  struct stat st;
  if (::stat(options.out_path.c_str(), &st) == 0) result.file_bytes = static_cast<uint64_t>(st.st_size);
  return result;
}

}  // namespace tachyon
