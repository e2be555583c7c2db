// Attention of one query token over a sequence's past K/V in paged blocks,
// with an online softmax: the scores of one block at a time, never a full row
// of scores.
#pragma once

#include <cstdint>

namespace tachyon {

// One layer's K and V storage: [num_blocks, block_size, kv_dim] floats each,
// where kv_dim = n_kv_heads * head_dim.
struct LayerKv {
  float* k = nullptr;
  float* v = nullptr;
};

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;  // grouped-query attention: n_heads / n_kv_heads query heads share one
  int head_dim = 0;
  int block_size = 0;
};

// out [n_heads, head_dim] = softmax(q k^T * scale) v over positions [0, num_positions)
// of the sequence whose blocks are block_table[0 .. ceil(num_positions / block_size)).
// q: [n_heads, head_dim].
void AttendPaged(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                 const AttentionShape& shape, float scale, float* out);

}  // namespace tachyon
