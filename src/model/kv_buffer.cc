#include "model/kv_buffer.h"

namespace tachyon {

StatusOr<KvType> ParseKvType(const std::string& name, const ModelConfig& config) {
  KvType type = KvType::kF32;
  if (name == "f16") {
    type = KvType::kF16;
  } else if (name == "q8_0") {
    type = KvType::kQ8_0;
  } else if (name != "f32") {
    return InvalidArgumentError("kv_cache_dtype must be f16, f32 or q8_0, not " + name);
  }
  if (type == KvType::kQ8_0 && config.head_dim % 32 != 0) {
    return InvalidArgumentError("kv_cache_dtype q8_0 needs a head dimension that is a multiple of 32; this model's is " +
                                std::to_string(config.head_dim));
  }
  return type;
}

KvBuffer::KvBuffer(const ModelConfig& config, int block_size, int64_t num_blocks, KvType type,
                   int64_t window_num_blocks)
    : block_size_(block_size),
      num_blocks_(num_blocks),
      window_num_blocks_(window_num_blocks),
      type_(type),
      k_(config.n_layer),
      v_(config.n_layer) {
  const size_t row = KvRowBytes(type, config.kv_dim());
  for (int64_t l = 0; l < config.n_layer; ++l) {
    const int64_t blocks = window_num_blocks > 0 && config.is_sliding(l) ? window_num_blocks : num_blocks;
    k_[l].assign(static_cast<size_t>(blocks) * block_size * row, 0);
    v_[l].assign(static_cast<size_t>(blocks) * block_size * row, 0);
  }
}

uint64_t KvBuffer::BlockBytes(const ModelConfig& config, int block_size, KvType type) {
  return 2ull * config.n_layer * block_size * KvRowBytes(type, config.kv_dim());
}

uint64_t KvBuffer::GroupBlockBytes(const ModelConfig& config, int block_size, KvType type, bool sliding) {
  int64_t layers = 0;
  for (int64_t l = 0; l < config.n_layer; ++l) layers += config.is_sliding(l) == sliding ? 1 : 0;
  return 2ull * layers * block_size * KvRowBytes(type, config.kv_dim());
}

uint64_t KvBuffer::bytes() const {
  uint64_t total = 0;
  for (size_t l = 0; l < k_.size(); ++l) total += k_[l].size() + v_[l].size();
  return total;
}

}  // namespace tachyon
