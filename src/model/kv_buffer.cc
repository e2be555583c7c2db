#include "model/kv_buffer.h"

namespace tachyon {

KvBuffer::KvBuffer(const ModelConfig& config, int block_size, int64_t num_blocks)
    : block_size_(block_size), num_blocks_(num_blocks), k_(config.n_layer), v_(config.n_layer) {
  const size_t n = static_cast<size_t>(num_blocks) * block_size * config.kv_dim();
  for (int64_t l = 0; l < config.n_layer; ++l) {
    k_[l].assign(n, 0.0f);
    v_[l].assign(n, 0.0f);
  }
}

uint64_t KvBuffer::bytes() const {
  uint64_t total = 0;
  for (size_t l = 0; l < k_.size(); ++l) total += (k_[l].size() + v_[l].size()) * sizeof(float);
  return total;
}

}  // namespace tachyon
