// Attention for a run of queries, eight query rows in the lanes of a register.
//
// A row is one (token, head) of the KV head's group. Rows are laid out
// transposed ([dim][8 lanes]), so scores, the running max and sum, and the
// output accumulators are all lane-wise: the online softmax needs no horizontal
// operation, and a lane's arithmetic never depends on the other lanes. Each key
// block is converted to F32 once for all the rows.
//
// Exactness across runs: a key a row may not see scores -inf, whose exp is
// exactly 0 (and exp(0) is exactly 1), so a block that is wholly masked for a
// row changes nothing in it; a row's result is therefore the same whichever run,
// chunk or lane it is computed in (what makes a token's output independent of
// how the engine split the batch).
#include "kernels/x86/attention_avx2.h"

#include <immintrin.h>

#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "kernels/ref/quantize.h"
#include "kernels/x86/ops_avx2.h"
#include "kernels/x86/vector_math.h"

namespace tachyon::avx2 {
namespace {

constexpr int kLanes = 8;

// e^x for 8 floats (x <= 0 here): x = k ln2 + r, e^r by a degree-6 polynomial,
// times 2^k; exactly 0 for -inf (and below -87), exactly 1 for 0.
__m256 ExpNonPositive(__m256 x) {
  const __m256 dead = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 k = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(x86::kLog2E)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(k, _mm256_set1_ps(x86::kLn2High), x);
  r = _mm256_fnmadd_ps(k, _mm256_set1_ps(x86::kLn2Low), r);
  __m256 p = _mm256_set1_ps(x86::kExpTaylor[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(x86::kExpTaylor[i]));
  const __m256i exponent = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(dead, _mm256_mul_ps(p, _mm256_castsi256_ps(exponent)));
}

// A thread's buffers, kept from call to call (a decode step makes one call per
// sequence, layer and KV head). Plain malloc and loops: this file is built for
// AVX2, so it must not instantiate templates (std::vector, std::fill) that the rest
// of the binary shares, whose one kept copy could then be this file's.
class Scratch {
 public:
  ~Scratch() { free(data_); }
  float* Floats(size_t n) {
    if (n > capacity_) {
      free(data_);
      data_ = static_cast<float*>(malloc(n * sizeof(float)));
      capacity_ = data_ != nullptr ? n : 0;
    }
    return data_;
  }

 private:
  float* data_ = nullptr;
  size_t capacity_ = 0;
};

void Fill(float* p, int64_t n, float value) {
  for (int64_t i = 0; i < n; ++i) p[i] = value;
}

// Rows [0, n) of one block's K or V slice for `kv_head`, as F32 [block_size][head_dim];
// rows from n on are zero (they may hold another sequence's data, or none).
void LoadBlock(const void* base, KvType type, int64_t first_slot, int n, int block_size, int64_t kv_dim,
               int kv_head, int head_dim, float* out) {
  for (int j = 0; j < n; ++j) {
    const int64_t slot = first_slot + j;
    float* row = out + static_cast<int64_t>(j) * head_dim;
    switch (type) {
      case KvType::kF32:
        std::memcpy(row, static_cast<const float*>(base) + slot * kv_dim + kv_head * head_dim,
                    head_dim * sizeof(float));
        break;
      case KvType::kF16: {
        const uint16_t* src = static_cast<const uint16_t*>(base) + slot * kv_dim + kv_head * head_dim;
        int i = 0;
        for (; i + 8 <= head_dim; i += 8) {
          _mm256_storeu_ps(row + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
        }
        for (; i < head_dim; ++i) row[i] = _cvtsh_ss(src[i]);
        break;
      }
      case KvType::kQ8_0: {
        const int64_t row_bytes = KvRowBytes(KvType::kQ8_0, kv_dim);
        const int64_t head_bytes = head_dim / 32 * 34;
        ref::DequantizeRowQ8_0(static_cast<const uint8_t*>(base) + slot * row_bytes + kv_head * head_bytes, row,
                               head_dim);
        break;
      }
    }
  }
  Fill(out + static_cast<int64_t>(n) * head_dim, static_cast<int64_t>(block_size - n) * head_dim, 0.0f);
}

// One chunk's scores against a block's keys: sc[key][lane] = q[lane] . k[key],
// four keys at a time (four independent chains over d).
inline void ChunkScores(const float* qc, const float* keys, int bs, int d, float* sc) {
  int j = 0;
  for (; j + 4 <= bs; j += 4) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float* k0 = keys + static_cast<int64_t>(j) * d;
    for (int i = 0; i < d; ++i) {
      const __m256 qi = _mm256_loadu_ps(qc + i * kLanes);
      a0 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k0 + i), a0);
      a1 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k0 + d + i), a1);
      a2 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k0 + 2 * d + i), a2);
      a3 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k0 + 3 * d + i), a3);
    }
    _mm256_storeu_ps(sc + j * kLanes, a0);
    _mm256_storeu_ps(sc + (j + 1) * kLanes, a1);
    _mm256_storeu_ps(sc + (j + 2) * kLanes, a2);
    _mm256_storeu_ps(sc + (j + 3) * kLanes, a3);
  }
  for (; j < bs; ++j) {
    __m256 a = _mm256_setzero_ps();
    const float* kj = keys + static_cast<int64_t>(j) * d;
    for (int i = 0; i < d; ++i) {
      a = _mm256_fmadd_ps(_mm256_loadu_ps(qc + i * kLanes), _mm256_broadcast_ss(kj + i), a);
    }
    _mm256_storeu_ps(sc + j * kLanes, a);
  }
}

// The causal mask (and the sliding window's, and the block's empty tail: keys from n on), then the
// online softmax's step: sc becomes exp(score - new max), max and sum are
// updated; returns the factor that rescales the chunk's earlier outputs.
inline __m256 MaskAndExponentiate(float* sc, int bs, int n, int64_t block, __m256i lane_pos, int64_t window,
                                  float* max, float* sum) {
  __m256 block_max = _mm256_set1_ps(-INFINITY);
  for (int j = 0; j < bs; ++j) {
    const int64_t key = block * bs + j;
    const __m256i key_pos = _mm256_set1_epi32(static_cast<int32_t>(key));
    __m256i hidden_bits = _mm256_or_si256(_mm256_cmpgt_epi32(key_pos, lane_pos), _mm256_set1_epi32(j < n ? 0 : -1));
    if (window > 0) {  // lane_pos >= key + window: the key slid out of the row's window
      const int64_t edge = key + window - 1 < INT32_MAX ? key + window - 1 : INT32_MAX;
      hidden_bits = _mm256_or_si256(hidden_bits, _mm256_cmpgt_epi32(lane_pos, _mm256_set1_epi32(static_cast<int32_t>(edge))));
    }
    const __m256 hidden = _mm256_castsi256_ps(hidden_bits);
    const __m256 score = _mm256_blendv_ps(_mm256_loadu_ps(sc + j * kLanes), _mm256_set1_ps(-INFINITY), hidden);
    _mm256_storeu_ps(sc + j * kLanes, score);
    block_max = _mm256_max_ps(block_max, score);
  }
  const __m256 old_max = _mm256_loadu_ps(max);
  const __m256 new_max = _mm256_max_ps(old_max, block_max);
  const __m256 correction = ExpNonPositive(_mm256_sub_ps(old_max, new_max));  // 0 on a row's first keys
  __m256 total = _mm256_mul_ps(_mm256_loadu_ps(sum), correction);
  for (int j = 0; j < bs; ++j) {
    const __m256 p = ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(sc + j * kLanes), new_max));
    _mm256_storeu_ps(sc + j * kLanes, p);
    total = _mm256_add_ps(total, p);
  }
  _mm256_storeu_ps(max, new_max);
  _mm256_storeu_ps(sum, total);
  return correction;
}

// Outputs: o = o * correction + sum_j p_j v_j, four dims at a time.
inline void AccumulateValues(float* oc, const float* values, const float* sc, __m256 correction, int bs, int d) {
  int i = 0;
  for (; i + 4 <= d; i += 4) {
    __m256 o0 = _mm256_mul_ps(_mm256_loadu_ps(oc + i * kLanes), correction);
    __m256 o1 = _mm256_mul_ps(_mm256_loadu_ps(oc + (i + 1) * kLanes), correction);
    __m256 o2 = _mm256_mul_ps(_mm256_loadu_ps(oc + (i + 2) * kLanes), correction);
    __m256 o3 = _mm256_mul_ps(_mm256_loadu_ps(oc + (i + 3) * kLanes), correction);
    for (int j = 0; j < bs; ++j) {
      const float* vj = values + static_cast<int64_t>(j) * d + i;
      const __m256 p = _mm256_loadu_ps(sc + j * kLanes);
      o0 = _mm256_fmadd_ps(p, _mm256_broadcast_ss(vj), o0);
      o1 = _mm256_fmadd_ps(p, _mm256_broadcast_ss(vj + 1), o1);
      o2 = _mm256_fmadd_ps(p, _mm256_broadcast_ss(vj + 2), o2);
      o3 = _mm256_fmadd_ps(p, _mm256_broadcast_ss(vj + 3), o3);
    }
    _mm256_storeu_ps(oc + i * kLanes, o0);
    _mm256_storeu_ps(oc + (i + 1) * kLanes, o1);
    _mm256_storeu_ps(oc + (i + 2) * kLanes, o2);
    _mm256_storeu_ps(oc + (i + 3) * kLanes, o3);
  }
  for (; i < d; ++i) {
    __m256 o = _mm256_mul_ps(_mm256_loadu_ps(oc + i * kLanes), correction);
    for (int j = 0; j < bs; ++j) {
      o = _mm256_fmadd_ps(_mm256_loadu_ps(sc + j * kLanes),
                          _mm256_broadcast_ss(values + static_cast<int64_t>(j) * d + i), o);
    }
    _mm256_storeu_ps(oc + i * kLanes, o);
  }
}

}  // namespace

void AttendRunKvHead(const float* q, int64_t q_stride, int num_queries, int64_t first_position, const LayerKv& kv,
                     const int32_t* block_table, const AttentionShape& shape, float scale, int kv_head, float* out) {
  const int d = shape.head_dim, bs = shape.block_size;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * d;
  const int rows = num_queries * group;
  const int chunks = (rows + kLanes - 1) / kLanes;
  // Per chunk: queries (scaled) and outputs transposed [d][8], positions, max and
  // sum per lane; then one block's keys and values as F32, and its scores [key][8 lanes].
  const int64_t lanes = static_cast<int64_t>(chunks) * kLanes, transposed = lanes * d;
  const int64_t block_values = static_cast<int64_t>(bs) * d;
  thread_local Scratch scratch;
  float* qt = scratch.Floats(2 * transposed + 3 * lanes + 2 * block_values + static_cast<int64_t>(bs) * kLanes);
  if (qt == nullptr) {
    fputs("tachyon: out of memory for attention scratch\n", stderr);
    abort();
  }
  float* ot = qt + transposed;
  int32_t* pos = reinterpret_cast<int32_t*>(ot + transposed);
  float* max = ot + transposed + lanes;
  float* sum = max + lanes;
  float* keys = sum + lanes;
  float* values = keys + block_values;
  float* sc = values + block_values;
  Fill(qt, 2 * transposed, 0.0f);
  for (int64_t i = 0; i < lanes; ++i) pos[i] = INT32_MAX;  // padding lanes see every key
  Fill(max, lanes, -INFINITY);
  Fill(sum, lanes, 0.0f);
  for (int r = 0; r < rows; ++r) {
    const int t = r / group, h = kv_head * group + r % group;
    const float* qh = q + t * q_stride + static_cast<int64_t>(h) * d;
    float* dst = qt + static_cast<size_t>(r / kLanes) * d * kLanes + r % kLanes;
    for (int i = 0; i < d; ++i) dst[i * kLanes] = qh[i] * scale;
    pos[r] = static_cast<int32_t>(first_position + t);
  }
  const int64_t last = first_position + num_queries - 1;
  // Under a window, blocks wholly before the first query's window are skipped
  // (a later query's masked keys in the blocks read score -inf).
  for (int64_t block = FirstVisiblePosition(shape, first_position) / bs; block <= last / bs; ++block) {
    const int64_t left = last + 1 - block * bs;
    const int n = static_cast<int>(left < bs ? left : bs);
    const int64_t first_slot = static_cast<int64_t>(block_table[block]) * bs;
    LoadBlock(kv.k, kv.type, first_slot, n, bs, kv_dim, kv_head, d, keys);
    LoadBlock(kv.v, kv.type, first_slot, n, bs, kv_dim, kv_head, d, values);
    for (int c = 0; c < chunks; ++c) {
      const float* qc = qt + static_cast<size_t>(c) * d * kLanes;
      float* oc = ot + static_cast<size_t>(c) * d * kLanes;
      const __m256i lane_pos = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos + c * kLanes));
      ChunkScores(qc, keys, bs, d, sc);
      // Soft-capping (Gemma 2's layers): s = tanh(s / cap) * cap, vectorized.
      if (shape.softcap > 0) SoftCap(sc, bs * kLanes, shape.softcap);
      const __m256 correction =
          MaskAndExponentiate(sc, bs, n, block, lane_pos, shape.window, max + c * kLanes, sum + c * kLanes);
      AccumulateValues(oc, values, sc, correction, bs, d);
    }
  }
  for (int r = 0; r < rows; ++r) {
    const int t = r / group, h = kv_head * group + r % group;
    const float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
    const float* src = ot + static_cast<size_t>(r / kLanes) * d * kLanes + r % kLanes;
    float* dst = out + t * q_stride + static_cast<int64_t>(h) * d;
    for (int i = 0; i < d; ++i) dst[i] = src[i * kLanes] * inv;
  }
}

}  // namespace tachyon::avx2
