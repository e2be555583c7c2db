#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/ref/ops.h"
#include "kernels/x86/dot_avx2.h"

namespace tachyon {

void AttendPaged(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                 const AttentionShape& shape, float scale, float* out) {
  const int head_dim = shape.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * head_dim;
  const int group = shape.n_heads / shape.n_kv_heads;
  auto dot = CpuHasAvx2() ? avx2::DotF32 : ref::DotF32;
  std::vector<float> scores(shape.block_size);
  for (int h = 0; h < shape.n_heads; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * head_dim;
    const int64_t kv_offset = static_cast<int64_t>(h / group) * head_dim;
    float* acc = out + static_cast<int64_t>(h) * head_dim;
    std::fill(acc, acc + head_dim, 0.0f);
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int64_t start = 0; start < num_positions; start += shape.block_size) {
      const int64_t block = block_table[start / shape.block_size];
      const int n = static_cast<int>(std::min<int64_t>(shape.block_size, num_positions - start));
      const float* kb = kv.k + block * shape.block_size * kv_dim + kv_offset;
      const float* vb = kv.v + block * shape.block_size * kv_dim + kv_offset;
      float block_max = -INFINITY;
      for (int j = 0; j < n; ++j) {
        scores[j] = dot(qh, kb + j * kv_dim, head_dim) * scale;
        block_max = std::max(block_max, scores[j]);
      }
      const float new_max = std::max(running_max, block_max);
      const float correction = std::exp(running_max - new_max);  // 0 on the first block
      running_sum *= correction;
      for (int d = 0; d < head_dim; ++d) acc[d] *= correction;
      for (int j = 0; j < n; ++j) {
        const float p = std::exp(scores[j] - new_max);
        running_sum += p;
        const float* vj = vb + j * kv_dim;
        for (int d = 0; d < head_dim; ++d) acc[d] += p * vj[d];
      }
      running_max = new_max;
    }
    const float inv = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;
    for (int d = 0; d < head_dim; ++d) acc[d] *= inv;
  }
}

}  // namespace tachyon
