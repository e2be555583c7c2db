#include "model/kv_buffer.h"

namespace tachyon {

KvBuffer::KvBuffer(const ModelConfig& config, int block_size, int64_t num_blocks, KvType type)
    : block_size_(block_size), num_blocks_(num_blocks), type_(type), k_(config.n_layer), v_(config.n_layer) {
  const size_t bytes = static_cast<size_t>(num_blocks) * block_size * KvRowBytes(type, config.kv_dim());
  for (int64_t l = 0; l < config.n_layer; ++l) {
    k_[l].assign(bytes, 0);
    v_[l].assign(bytes, 0);
  }
}

uint64_t KvBuffer::BlockBytes(const ModelConfig& config, int block_size, KvType type) {
  return 2ull * config.n_layer * block_size * KvRowBytes(type, config.kv_dim());
}

uint64_t KvBuffer::bytes() const {
  uint64_t total = 0;
  for (size_t l = 0; l < k_.size(); ++l) total += k_[l].size() + v_[l].size();
  return total;
}

}  // namespace tachyon
