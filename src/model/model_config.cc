#include "model/model_config.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "model/tensor_binding.h"

namespace tachyon {
namespace {

// The experts of a mixture-of-experts file: <arch>.expert_count (1..256),
// expert_used_count (1..expert_count), and the experts' FFN width
// (qwen3moe: expert_feed_forward_length; Mixtral under llama: feed_forward_length).
Status ReadExperts(const GgufFile& file, ModelConfig* c) {
  const std::string a = c->architecture + ".";
  const bool moe_arch = c->architecture == "qwen3moe";
  const bool has_router = file.FindTensor("blk.0.ffn_gate_inp.weight") != nullptr;
  uint64_t count = 0;
  if (file.Find(a + "expert_count") != nullptr) {
    ASSIGN_OR_RETURN(count, file.GetUint(a + "expert_count"));
  }
  if (count == 0) {
    if (moe_arch || has_router) {
      return InvalidArgumentError("metadata key '" + a + "expert_count' is " +
                                  (file.Find(a + "expert_count") ? "0" : "missing") +
                                  ": a mixture of experts needs at least one expert");
    }
    return Status::Ok();  // a dense model (some dense files write expert_count = 0)
  }
  if (count > static_cast<uint64_t>(ModelConfig::kMaxExperts)) {
    return InvalidArgumentError("metadata key '" + a + "expert_count' = " + std::to_string(count) +
                                " is more than the " + std::to_string(ModelConfig::kMaxExperts) + " experts supported");
  }
  c->n_expert = static_cast<int64_t>(count);
  RETURN_IF_ERROR(ReadSizeKey(file, a + "expert_used_count", &c->n_expert_used));
  if (c->n_expert_used > c->n_expert) {
    return InvalidArgumentError("metadata key '" + a + "expert_used_count' = " + std::to_string(c->n_expert_used) +
                                " is more than expert_count " + std::to_string(c->n_expert));
  }
  c->n_ff_exp = c->n_ff;
  if (file.Find(a + "expert_feed_forward_length") != nullptr) {
    RETURN_IF_ERROR(ReadSizeKey(file, a + "expert_feed_forward_length", &c->n_ff_exp));
  }
  return Status::Ok();
}

// phi3: the context the LongRoPE factors switch at (rope.scaling.original_context_length,
// else the training context) and the factor on cos / sin (rope.scaling.attn_factor, else 1).
// A file's sliding window is not used: llama.cpp turns Phi's off too.
Status ReadLongRope(const GgufFile& file, ModelConfig* c) {
  const std::string a = c->architecture + ".";
  c->rope_original_context = c->context_length;
  if (file.Find(a + "rope.scaling.original_context_length") != nullptr) {
    RETURN_IF_ERROR(ReadSizeKey(file, a + "rope.scaling.original_context_length", &c->rope_original_context));
  }
  if (file.Find(a + "rope.scaling.attn_factor") != nullptr) {
    ASSIGN_OR_RETURN(double f, file.GetFloat(a + "rope.scaling.attn_factor"));
    if (!(f > 0 && f < 100)) {
      return InvalidArgumentError("metadata key '" + a + "rope.scaling.attn_factor' = " + std::to_string(f) +
                                  " is out of range (0, 100)");
    }
    c->rope_attn_factor = static_cast<float>(f);
  }
  return Status::Ok();
}

// A positive float key, or `fallback` when the file has none.
Status ReadPositiveFloat(const GgufFile& file, const std::string& key, float fallback, float* out) {
  *out = fallback;
  if (file.Find(key) == nullptr) return Status::Ok();
  ASSIGN_OR_RETURN(double v, file.GetFloat(key));
  if (!(v > 0 && v < 1e9)) {
    return InvalidArgumentError("metadata key '" + key + "' = " + std::to_string(v) + " must be positive");
  }
  *out = static_cast<float>(v);
  return Status::Ok();
}

// gemma2 / gemma3, as llama.cpp reads them: embeddings scaled by sqrt(n_embd),
// post-norms, GeGLU; gemma2 soft-caps attention (attn_logit_softcapping, 50) and
// logits (final_logit_softcapping, 30) and slides every other layer (window 4096
// unless the file says); gemma3 caps the logits only when the file asks, and
// slides 5 of 6 layers when the file sets a window, those rotating with
// rope.freq_base_swa (10000) without position scaling. The 27B sizes scale queries by n_embd / n_head.
Status ReadGemma(const GgufFile& file, ModelConfig* c) {
  const std::string a = c->architecture + ".";
  const bool gemma2 = c->architecture == "gemma2";
  c->embd_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->post_norms = true;
  c->gelu_ffn = true;
  if (gemma2) {
    RETURN_IF_ERROR(ReadPositiveFloat(file, a + "attn_logit_softcapping", 50.0f, &c->attn_softcap));
    RETURN_IF_ERROR(ReadPositiveFloat(file, a + "final_logit_softcapping", 30.0f, &c->final_softcap));
  } else if (file.Find(a + "final_logit_softcapping") != nullptr) {
    RETURN_IF_ERROR(ReadPositiveFloat(file, a + "final_logit_softcapping", 0, &c->final_softcap));
  }
  const bool has_window = file.Find(a + "attention.sliding_window") != nullptr;
  if (has_window) {
    RETURN_IF_ERROR(ReadSizeKey(file, a + "attention.sliding_window", &c->sliding_window));
  } else if (gemma2) {
    c->sliding_window = 4096;
  }
  if (c->sliding_window > 0) {
    c->swa_period = gemma2 ? 2 : 6;
    if (file.Find(a + "attention.sliding_window_pattern") != nullptr) {
      RETURN_IF_ERROR(ReadSizeKey(file, a + "attention.sliding_window_pattern", &c->swa_period));
    }
    c->rope_base_swa = gemma2 ? c->rope_base : 10000.0f;
    c->rope_position_scale_swa = gemma2 ? c->rope_position_scale : 1.0f;
    RETURN_IF_ERROR(ReadPositiveFloat(file, a + "rope.freq_base_swa", c->rope_base_swa, &c->rope_base_swa));
  }
  if ((gemma2 && c->n_layer == 46) || (!gemma2 && c->n_layer == 62)) {
    c->attn_scale = 1.0f / std::sqrt(static_cast<float>(c->n_embd / c->n_head));
  }
  return Status::Ok();
}

}  // namespace

StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.architecture, file.GetString("general.architecture"));
  static const char* const kArchitectures[] = {"llama", "qwen2", "qwen3", "qwen3moe", "gemma2", "gemma3", "phi3"};
  if (std::find(std::begin(kArchitectures), std::end(kArchitectures), c.architecture) == std::end(kArchitectures)) {
    return UnimplementedError("architecture '" + c.architecture +
                              "' is not supported (llama, qwen2, qwen3, qwen3moe, gemma2, gemma3 and phi3 are)");
  }
  const std::string a = c.architecture + ".";
  auto required = [&](const std::string& key, int64_t* out) { return ReadSizeKey(file, a + key, out); };
  ASSIGN_OR_RETURN(const TransformerSizes sizes, ReadTransformerSizes(file, c.architecture));
  c.n_embd = sizes.n_embd, c.n_layer = sizes.n_layer, c.n_head = sizes.n_head, c.n_ff = sizes.n_ff;
  c.context_length = sizes.context_length;
  c.n_head_kv = c.n_head;
  if (file.Find(a + "attention.head_count_kv")) RETURN_IF_ERROR(required("attention.head_count_kv", &c.n_head_kv));
  if (c.n_head % c.n_head_kv != 0) {
    return InvalidArgumentError(std::to_string(c.n_head) + " attention heads cannot be grouped over " +
                                std::to_string(c.n_head_kv) + " KV heads");
  }
  c.head_dim = c.n_embd / c.n_head;
  if (file.Find(a + "attention.key_length")) RETURN_IF_ERROR(required("attention.key_length", &c.head_dim));
  if (file.Find(a + "attention.value_length")) {
    int64_t value_length = 0;
    RETURN_IF_ERROR(required("attention.value_length", &value_length));
    if (value_length != c.head_dim) {
      return UnimplementedError("key length " + std::to_string(c.head_dim) + " != value length " +
                                std::to_string(value_length));
    }
  }
  if (c.head_dim % 2 != 0) return InvalidArgumentError("head dimension must be even for rope");
  int64_t rope_dim = c.head_dim;
  if (file.Find(a + "rope.dimension_count")) RETURN_IF_ERROR(required("rope.dimension_count", &rope_dim));
  if (rope_dim > c.head_dim || rope_dim % 2 != 0) {
    return InvalidArgumentError("rope.dimension_count " + std::to_string(rope_dim) +
                                " must be even and at most the head dimension " + std::to_string(c.head_dim));
  }
  c.rope_dim = static_cast<int>(rope_dim);
  if (auto eps = file.GetFloat(a + "attention.layer_norm_rms_epsilon"); eps.ok()) {
    c.rms_norm_eps = static_cast<float>(*eps);
  }
  if (auto base = file.GetFloat(a + "rope.freq_base"); base.ok()) c.rope_base = static_cast<float>(*base);
  c.rope_neox = c.architecture != "llama";
  c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3moe" || c.architecture == "gemma3";
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  RETURN_IF_ERROR(ReadExperts(file, &c));
  const bool phi3 = c.architecture == "phi3";
  if (auto type = file.GetString(a + "rope.scaling.type"); type.ok() && *type != "none") {
    if (phi3 && (*type == "longrope" || *type == "su")) {
      // LongRoPE is read below from its own keys and tensors.
    } else if (*type != "linear") {
      return UnimplementedError("rope scaling '" + *type + "' is not supported (linear is, and longrope for phi3)");
    } else {
      ASSIGN_OR_RETURN(double factor, file.GetFloat(a + "rope.scaling.factor"));
      if (!(factor > 0)) return InvalidArgumentError("metadata key '" + a + "rope.scaling.factor' must be positive");
      c.rope_position_scale = static_cast<float>(1.0 / factor);
    }
  }
  if (phi3) RETURN_IF_ERROR(ReadLongRope(file, &c));
  if (c.architecture == "gemma2" || c.architecture == "gemma3") RETURN_IF_ERROR(ReadGemma(file, &c));
  const GgufTensorInfo* embd = file.FindTensor("token_embd.weight");
  if (embd == nullptr) return InvalidArgumentError("tensor token_embd.weight is missing");
  if (embd->shape.size() != 2 || embd->shape[0] != c.n_embd) {
    return InvalidArgumentError("tensor token_embd.weight: expected shape [" + std::to_string(c.n_embd) +
                                ", n_vocab], file has " + embd->ShapeString());
  }
  c.n_vocab = embd->shape[1];
  return c;
}

}  // namespace tachyon
