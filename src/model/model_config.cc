#include "model/model_config.h"

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

}  // namespace

StatusOr<ModelConfig> ModelConfig::FromGguf(const GgufFile& file) {
  ModelConfig c;
  ASSIGN_OR_RETURN(c.architecture, file.GetString("general.architecture"));
  if (c.architecture != "llama" && c.architecture != "qwen2" && c.architecture != "qwen3" &&
      c.architecture != "qwen3moe") {
    return UnimplementedError("architecture '" + c.architecture +
                              "' is not supported (llama, qwen2, qwen3 and qwen3moe are)");
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
  c.rope_neox = c.architecture == "qwen2" || c.architecture == "qwen3" || c.architecture == "qwen3moe";
  c.qk_norm = c.architecture == "qwen3" || c.architecture == "qwen3moe";
  RETURN_IF_ERROR(ReadExperts(file, &c));
  if (auto type = file.GetString(a + "rope.scaling.type"); type.ok() && *type != "none") {
    if (*type != "linear") {
      return UnimplementedError("rope scaling '" + *type + "' is not supported (linear is)");
    }
    ASSIGN_OR_RETURN(double factor, file.GetFloat(a + "rope.scaling.factor"));
    if (factor <= 0) return InvalidArgumentError("rope.scaling.factor must be positive");
    c.rope_position_scale = static_cast<float>(1.0 / factor);
  }
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
