#include "kernels/attention.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/fp16.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/quantize.h"
#include "kernels/x86/attention_avx2.h"
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

void StoreKv(const LayerKv& kv, const AttentionShape& shape, int64_t slot, const float* k, const float* v) {
  const int d = shape.head_dim, bs = shape.block_size;
  const int64_t block = slot / bs, offset = slot % bs;
  const int64_t head_bytes = KvRowBytes(kv.type, d);
  for (int h = 0; h < shape.n_kv_heads; ++h) {
    uint8_t* kp = static_cast<uint8_t*>(kv.k) + KvPartOffset(kv.type, shape, block, h);
    uint8_t* vp = static_cast<uint8_t*>(kv.v) + KvPartOffset(kv.type, shape, block, h);
    const float* kh = k + static_cast<int64_t>(h) * d;
    const float* vh = v + static_cast<int64_t>(h) * d;
    switch (kv.type) {
      case KvType::kQ8_0:
        ref::QuantizeActivationsQ8_0(kh, kp + offset * head_bytes, d);
        ref::QuantizeActivationsQ8_0(vh, vp + offset * head_bytes, d);
        break;
      case KvType::kF32: {
        float* kt = reinterpret_cast<float*>(kp);
        for (int i = 0; i < d; ++i) kt[static_cast<int64_t>(i) * bs + offset] = kh[i];
        std::copy(vh, vh + d, reinterpret_cast<float*>(vp) + offset * d);
        break;
      }
      case KvType::kF16: {
        uint16_t* kt = reinterpret_cast<uint16_t*>(kp);
        uint16_t* vr = reinterpret_cast<uint16_t*>(vp) + offset * d;
        for (int i = 0; i < d; ++i) {
          kt[static_cast<int64_t>(i) * bs + offset] = FloatToFp16(kh[i]);
          vr[i] = FloatToFp16(vh[i]);
        }
        break;
      }
    }
  }
}

namespace {

// The online softmax over a sequence's blocks, for one query token. The cache
// type enters only through score(kv_head_offset, slot, qh) -> q.k and
// add(acc, p, kv_head_offset, slot) -> acc += p * v.
// Heads [head_begin, head_end).
template <typename Score, typename AddValue>
void OnlineSoftmax(const float* q, const int32_t* block_table, int64_t num_positions, const AttentionShape& shape,
                   float scale, float* out, Score score, AddValue add, int head_begin, int head_end) {
  const int head_dim = shape.head_dim;
  const int group = shape.n_heads / shape.n_kv_heads;
  std::vector<float> scores(shape.block_size);
  for (int h = head_begin; h < head_end; ++h) {
    const float* qh = q + static_cast<int64_t>(h) * head_dim;
    const int kv_head = h / group;
    float* acc = out + static_cast<int64_t>(h) * head_dim;
    std::fill(acc, acc + head_dim, 0.0f);
    float running_max = -INFINITY, running_sum = 0.0f;
    const int64_t first_visible = FirstVisiblePosition(shape, num_positions - 1);
    const float inv_cap = shape.softcap > 0 ? 1.0f / shape.softcap : 0.0f;
    for (int64_t start = first_visible / shape.block_size * shape.block_size; start < num_positions;
         start += shape.block_size) {
      const int64_t first_slot = static_cast<int64_t>(block_table[start / shape.block_size]) * shape.block_size;
      const int n = static_cast<int>(std::min<int64_t>(shape.block_size, num_positions - start));
      const int j0 = static_cast<int>(std::max<int64_t>(0, first_visible - start));
      float block_max = -INFINITY;
      for (int j = 0; j < j0; ++j) scores[j] = -INFINITY;
      for (int j = j0; j < n; ++j) {
        scores[j] = score(kv_head, first_slot + j, qh) * scale;
        if (shape.softcap > 0) scores[j] = std::tanh(scores[j] * inv_cap) * shape.softcap;
        block_max = std::max(block_max, scores[j]);
      }
      const float new_max = std::max(running_max, block_max);
      const float correction = std::exp(running_max - new_max);  // 0 on the first block
      running_sum *= correction;
      for (int d = 0; d < head_dim; ++d) acc[d] *= correction;
      for (int j = j0; j < n; ++j) {
        const float p = std::exp(scores[j] - new_max);
        running_sum += p;
        add(acc, p, kv_head, first_slot + j);
      }
      running_max = new_max;
    }
    const float inv = running_sum > 0.0f ? 1.0f / running_sum : 0.0f;
    for (int d = 0; d < head_dim; ++d) acc[d] *= inv;
  }
}

// F32 or F16 (uint16_t) cache: a key's values gathered from its block's
// transposed part (converted to F32), values read in place.
template <typename T>
void AttendFloatCache(const LayerKv& kv, const float* q, const int32_t* block_table, int64_t num_positions,
                      const AttentionShape& shape, float scale, float* out, int head_begin, int head_end) {
  constexpr bool kHalf = std::is_same_v<T, uint16_t>;
  const int head_dim = shape.head_dim, bs = shape.block_size;
  const bool simd = CpuHasAvx2();
  std::vector<float> key(head_dim);
  const auto part = [&](const void* base, int kv_head, int64_t slot) {
    return reinterpret_cast<const T*>(static_cast<const uint8_t*>(base) +
                                      KvPartOffset(kv.type, shape, slot / bs, kv_head));
  };
  OnlineSoftmax(
      q, block_table, num_positions, shape, scale, out,
      [&](int kv_head, int64_t slot, const float* qh) {
        const T* column = part(kv.k, kv_head, slot) + slot % bs;
        for (int i = 0; i < head_dim; ++i) {
          if constexpr (kHalf) {
            key[i] = Fp16ToFloat(column[static_cast<int64_t>(i) * bs]);
          } else {
            key[i] = column[static_cast<int64_t>(i) * bs];
          }
        }
        return simd ? avx2::DotF32(key.data(), qh, head_dim) : ref::DotF32(key.data(), qh, head_dim);
      },
      [&](float* acc, float p, int kv_head, int64_t slot) {
        const T* value = part(kv.v, kv_head, slot) + slot % bs * head_dim;
        if constexpr (kHalf) {
          if (simd) {
            avx2::AddScaledF16(acc, p, value, head_dim);
          } else {
            for (int d = 0; d < head_dim; ++d) acc[d] += p * Fp16ToFloat(value[d]);
          }
        } else {
          if (simd) {
            avx2::AddScaledF32(acc, p, value, head_dim);
          } else {
            for (int d = 0; d < head_dim; ++d) acc[d] += p * value[d];
          }
        }
      },
      head_begin, head_end);
}

// AttendPaged for heads [head_begin, head_end) only.
void AttendPagedHeads(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                      const AttentionShape& shape, float scale, float* out, int head_begin, int head_end);

}  // namespace

void AttendPaged(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                 const AttentionShape& shape, float scale, float* out) {
  AttendPagedHeads(q, kv, block_table, num_positions, shape, scale, out, 0, shape.n_heads);
}

void AttendPagedRun(const float* q, int64_t q_stride, int num_queries, int64_t first_position, const LayerKv& kv,
                    const int32_t* block_table, const AttentionShape& shape, float scale, int kv_head, float* out) {
  if (CpuHasAvx2()) {
    avx2::AttendRunKvHead(q, q_stride, num_queries, first_position, kv, block_table, shape, scale, kv_head, out);
    return;
  }
  const int group = shape.n_heads / shape.n_kv_heads;
  for (int t = 0; t < num_queries; ++t) {
    AttendPagedHeads(q + t * q_stride, kv, block_table, first_position + t + 1, shape, scale, out + t * q_stride,
                     kv_head * group, (kv_head + 1) * group);
  }
}

namespace {

void AttendPagedHeads(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                      const AttentionShape& shape, float scale, float* out, int head_begin, int head_end) {
  const int head_dim = shape.head_dim;
  const bool simd = CpuHasAvx2();
  switch (kv.type) {
    case KvType::kF32:
      AttendFloatCache<float>(kv, q, block_table, num_positions, shape, scale, out, head_begin, head_end);
      return;
    case KvType::kF16:
      AttendFloatCache<uint16_t>(kv, q, block_table, num_positions, shape, scale, out, head_begin, head_end);
      return;
    case KvType::kQ8_0: {
      // Each position's slice of a head is dequantized, then used as F32.
      const uint8_t* k = static_cast<const uint8_t*>(kv.k);
      const uint8_t* v = static_cast<const uint8_t*>(kv.v);
      const int64_t head_bytes = KvRowBytes(KvType::kQ8_0, head_dim);
      const auto at = [&](int kv_head, int64_t slot) {
        return KvPartOffset(KvType::kQ8_0, shape, slot / shape.block_size, kv_head) +
               slot % shape.block_size * head_bytes;
      };
      std::vector<float> scratch(head_dim);
      OnlineSoftmax(
          q, block_table, num_positions, shape, scale, out,
          [&](int kv_head, int64_t slot, const float* qh) {
            ref::DequantizeRowQ8_0(k + at(kv_head, slot), scratch.data(), head_dim);
            return simd ? avx2::DotF32(scratch.data(), qh, head_dim) : ref::DotF32(scratch.data(), qh, head_dim);
          },
          [&](float* acc, float p, int kv_head, int64_t slot) {
            ref::DequantizeRowQ8_0(v + at(kv_head, slot), scratch.data(), head_dim);
            if (simd) {
              avx2::AddScaledF32(acc, p, scratch.data(), head_dim);
            } else {
              for (int d = 0; d < head_dim; ++d) acc[d] += p * scratch[d];
            }
          },
          head_begin, head_end);
      return;
    }
  }
}

}  // namespace

void AttendDense(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t num_keys,
                 const AttentionShape& shape, float scale, float* out) {
  const int head_dim = shape.head_dim;
  const bool simd = CpuHasAvx2();
  AttentionShape tiled = shape;
  tiled.block_size = kDenseTile;
  // The tiles are the sequence's rows in order: tile i starts at row i * kDenseTile.
  std::vector<int32_t> tiles((num_keys + kDenseTile - 1) / kDenseTile);
  for (size_t i = 0; i < tiles.size(); ++i) tiles[i] = static_cast<int32_t>(i);
  OnlineSoftmax(
      q, tiles.data(), num_keys, tiled, scale, out,
      [&](int kv_head, int64_t row, const float* qh) {
        const float* key = k + row * kv_stride + kv_head * head_dim;
        return simd ? avx2::DotF32(key, qh, head_dim) : ref::DotF32(key, qh, head_dim);
      },
      [&](float* acc, float p, int kv_head, int64_t row) {
        const float* value = v + row * kv_stride + kv_head * head_dim;
        if (simd) {
          avx2::AddScaledF32(acc, p, value, head_dim);
        } else {
          for (int d = 0; d < head_dim; ++d) acc[d] += p * value[d];
        }
      },
      0, shape.n_heads);
}

}  // namespace tachyon
