#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quantize.h"
#include "kernels/x86/dot_avx2.h"
#include "kernels/x86/ops_avx2.h"

namespace tachyon {

int64_t KvRowBytes(KvType type, int64_t kv_dim) {
  switch (type) {
    case KvType::kF32: return kv_dim * 4;
    case KvType::kF16: return kv_dim * 2;
    case KvType::kQ8_0: return kv_dim / 32 * 34;
  }
  return 0;
}

void StoreKv(const LayerKv& kv, int64_t slot, int64_t kv_dim, const float* k, const float* v) {
  if (kv.type == KvType::kQ8_0) {
    const int64_t row = KvRowBytes(kv.type, kv_dim);
    ref::QuantizeActivationsQ8_0(k, static_cast<uint8_t*>(kv.k) + slot * row, kv_dim);
    ref::QuantizeActivationsQ8_0(v, static_cast<uint8_t*>(kv.v) + slot * row, kv_dim);
    return;
  }
  if (kv.type == KvType::kF32) {
    std::copy(k, k + kv_dim, static_cast<float*>(kv.k) + slot * kv_dim);
    std::copy(v, v + kv_dim, static_cast<float*>(kv.v) + slot * kv_dim);
    return;
  }
  uint16_t* kd = static_cast<uint16_t*>(kv.k) + slot * kv_dim;
  uint16_t* vd = static_cast<uint16_t*>(kv.v) + slot * kv_dim;
  for (int64_t i = 0; i < kv_dim; ++i) {
    kd[i] = FloatToFp16(k[i]);
    vd[i] = FloatToFp16(v[i]);
  }
}

namespace {

template <typename T>
void Attend(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
            const AttentionShape& shape, float scale, float* out) {
  const int head_dim = shape.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * head_dim;
  const int group = shape.n_heads / shape.n_kv_heads;
  constexpr bool kHalf = std::is_same_v<T, uint16_t>;
  // Scores q.k: float keys, or F16 keys converted on the fly.
  auto dot = [](const float* qh, const T* k, int n) {
    if constexpr (kHalf) {
      return CpuHasAvx2() ? avx2::DotF16(k, qh, n) : ref::DotF16(k, qh, n);
    } else {
      return CpuHasAvx2() ? avx2::DotF32(k, qh, n) : ref::DotF32(k, qh, n);
    }
  };
  const bool simd = CpuHasAvx2();
  const T* k_base = static_cast<const T*>(kv.k);
  const T* v_base = static_cast<const T*>(kv.v);
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
      const T* kb = k_base + block * shape.block_size * kv_dim + kv_offset;
      const T* vb = v_base + block * shape.block_size * kv_dim + kv_offset;
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
        const T* vj = vb + j * kv_dim;
        if constexpr (kHalf) {
          if (simd) {
            avx2::AddScaledF16(acc, p, vj, head_dim);
          } else {
            for (int d = 0; d < head_dim; ++d) acc[d] += p * Fp16ToFloat(vj[d]);
          }
        } else {
          if (simd) {
            avx2::AddScaledF32(acc, p, vj, head_dim);
          } else {
            for (int d = 0; d < head_dim; ++d) acc[d] += p * vj[d];
          }
        }
      }
      running_max = new_max;
    }
    const float inv = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;
    for (int d = 0; d < head_dim; ++d) acc[d] *= inv;
  }
}

// Q8_0 cache: each position's K and V slice of a head dequantized, then as F32.
void AttendQ8_0(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                const AttentionShape& shape, float scale, float* out) {
  const int head_dim = shape.head_dim;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * head_dim;
  const int64_t row = KvRowBytes(KvType::kQ8_0, kv_dim);
  const int64_t head_bytes = head_dim / 32 * 34;
  const int group = shape.n_heads / shape.n_kv_heads;
  const bool simd = CpuHasAvx2();
  const uint8_t* k_base = static_cast<const uint8_t*>(kv.k);
  const uint8_t* v_base = static_cast<const uint8_t*>(kv.v);
  std::vector<float> scores(shape.block_size), k(head_dim), v(head_dim);
  for (int h = 0; h < shape.n_heads; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * head_dim;
    const int64_t offset = static_cast<int64_t>(h / group) * head_bytes;
    float* acc = out + static_cast<int64_t>(h) * head_dim;
    std::fill(acc, acc + head_dim, 0.0f);
    float running_max = -INFINITY, running_sum = 0.0f;
    for (int64_t start = 0; start < num_positions; start += shape.block_size) {
      const int64_t block = block_table[start / shape.block_size];
      const int n = static_cast<int>(std::min<int64_t>(shape.block_size, num_positions - start));
      float block_max = -INFINITY;
      for (int j = 0; j < n; ++j) {
        ref::DequantizeRowQ8_0(k_base + (block * shape.block_size + j) * row + offset, k.data(), head_dim);
        scores[j] = (simd ? avx2::DotF32(k.data(), qh, head_dim) : ref::DotF32(k.data(), qh, head_dim)) * scale;
        block_max = std::max(block_max, scores[j]);
      }
      const float new_max = std::max(running_max, block_max);
      const float correction = std::exp(running_max - new_max);
      running_sum *= correction;
      for (int d = 0; d < head_dim; ++d) acc[d] *= correction;
      for (int j = 0; j < n; ++j) {
        const float p = std::exp(scores[j] - new_max);
        running_sum += p;
        ref::DequantizeRowQ8_0(v_base + (block * shape.block_size + j) * row + offset, v.data(), head_dim);
        if (simd) {
          avx2::AddScaledF32(acc, p, v.data(), head_dim);
        } else {
          for (int d = 0; d < head_dim; ++d) acc[d] += p * v[d];
        }
      }
      running_max = new_max;
    }
    const float inv = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;
    for (int d = 0; d < head_dim; ++d) acc[d] *= inv;
  }
}

}  // namespace

void AttendPaged(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                 const AttentionShape& shape, float scale, float* out) {
  if (kv.type == KvType::kQ8_0) {
    AttendQ8_0(q, kv, block_table, num_positions, shape, scale, out);
  } else if (kv.type == KvType::kF16) {
    Attend<uint16_t>(q, kv, block_table, num_positions, shape, scale, out);
  } else {
    Attend<float>(q, kv, block_table, num_positions, shape, scale, out);
  }
}

}  // namespace tachyon
