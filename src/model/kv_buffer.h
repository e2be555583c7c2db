// KvBuffer: K/V storage for every layer in blocks of block_size tokens, the
// memory a ForwardBatch's block tables point into; F32 or F16 elements.
// Layout per layer: K and V each [num_blocks] blocks of block_size slots, a
// block holding each KV head's part in turn (kernels/attention.h's LayerKv).
// With window_num_blocks > 0 the sliding-window layers hold that many blocks
// instead (their own pool; ForwardSequence::window_block_table indexes them).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "kernels/attention.h"
#include "model/model_config.h"

namespace tachyon {

// "f32", "f16" or "q8_0" (the --kv-cache-dtype flags); q8_0 needs a head
// dimension that is a multiple of 32.
StatusOr<KvType> ParseKvType(const std::string& name, const ModelConfig& config);

class KvBuffer {
 public:
  KvBuffer(const ModelConfig& config, int block_size, int64_t num_blocks, KvType type = KvType::kF32,
           int64_t window_num_blocks = 0);

  // Bytes one block takes over all layers, K and V.
  static uint64_t BlockBytes(const ModelConfig& config, int block_size, KvType type);
  // Bytes one block takes over the sliding-window layers only (sliding) or
  // over the others, K and V.
  static uint64_t GroupBlockBytes(const ModelConfig& config, int block_size, KvType type, bool sliding);

  int block_size() const { return block_size_; }
  int64_t num_blocks() const { return num_blocks_; }
  int64_t window_num_blocks() const { return window_num_blocks_; }
  KvType type() const { return type_; }
  LayerKv layer(int64_t l) { return {k_[l].data(), v_[l].data(), type_}; }
  // Bytes held.
  uint64_t bytes() const;

 private:
  int block_size_;
  int64_t num_blocks_;
  int64_t window_num_blocks_;
  KvType type_;
  std::vector<std::vector<uint8_t>> k_, v_;
};

}  // namespace tachyon
