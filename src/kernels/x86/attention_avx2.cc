// Attention for a run of queries, eight query rows in the lanes of a register.
//
// A row is one (token, head) of the KV head's group. Rows are laid out
// transposed ([dim][8 lanes]), so scores, the running max and sum, and the
// output accumulators are all lane-wise: the online softmax needs no horizontal
// operation, and a lane's arithmetic never depends on the other lanes. Each key
// block is converted to F32 once for all the rows (an F32 cache is read in place).
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

// Rows [0, n) of one block's K or V slice for `kv_head` as F32, row j at
// rows[j * *stride]: an F32 cache's rows where they are (stride kv_dim), else
// converted into `out` (stride head_dim). Only the n rows are read: the slots past
// them may hold another sequence's data, or none.
const float* BlockRows(const void* base, KvType type, int64_t first_slot, int n, int64_t kv_dim, int kv_head,
                       int head_dim, float* out, int64_t* stride) {
  if (type == KvType::kF32) {
    *stride = kv_dim;
    return static_cast<const float*>(base) + first_slot * kv_dim + static_cast<int64_t>(kv_head) * head_dim;
  }
  *stride = head_dim;
  for (int j = 0; j < n; ++j) {
    const int64_t slot = first_slot + j;
    float* row = out + static_cast<int64_t>(j) * head_dim;
    switch (type) {
      case KvType::kF32: break;  // read in place, above
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
  return out;
}

// One chunk's scores against a block's n keys (key j at keys[j * stride]):
// sc[key][lane] = q[lane] . k[key], four keys at a time (four independent chains
// over d).
inline void ChunkScores(const float* qc, const float* keys, int64_t stride, int n, int d, float* sc) {
  int j = 0;
  for (; j + 4 <= n; j += 4) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const float* k0 = keys + j * stride;
    const float* k1 = k0 + stride;
    const float* k2 = k1 + stride;
    const float* k3 = k2 + stride;
    for (int i = 0; i < d; ++i) {
      const __m256 qi = _mm256_loadu_ps(qc + i * kLanes);
      a0 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k0 + i), a0);
      a1 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k1 + i), a1);
      a2 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k2 + i), a2);
      a3 = _mm256_fmadd_ps(qi, _mm256_broadcast_ss(k3 + i), a3);
    }
    _mm256_storeu_ps(sc + j * kLanes, a0);
    _mm256_storeu_ps(sc + (j + 1) * kLanes, a1);
    _mm256_storeu_ps(sc + (j + 2) * kLanes, a2);
    _mm256_storeu_ps(sc + (j + 3) * kLanes, a3);
  }
  for (; j < n; ++j) {
    __m256 a = _mm256_setzero_ps();
    const float* kj = keys + j * stride;
    for (int i = 0; i < d; ++i) {
      a = _mm256_fmadd_ps(_mm256_loadu_ps(qc + i * kLanes), _mm256_broadcast_ss(kj + i), a);
    }
    _mm256_storeu_ps(sc + j * kLanes, a);
  }
}

// The causal mask (and the sliding window's) on the block's n keys, then the
// online softmax's step: sc becomes exp(score - new max), max and sum are
// updated; returns the factor that rescales the chunk's earlier outputs. (The
// block's keys from n on are not there: they would score -inf and add nothing.)
inline __m256 MaskAndExponentiate(float* sc, int bs, int n, int64_t block, __m256i lane_pos, int64_t window,
                                  float* max, float* sum) {
  __m256 block_max = _mm256_set1_ps(-INFINITY);
  for (int j = 0; j < n; ++j) {
    const int64_t key = block * bs + j;
    const __m256i key_pos = _mm256_set1_epi32(static_cast<int32_t>(key));
    __m256i hidden_bits = _mm256_cmpgt_epi32(key_pos, lane_pos);
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
  for (int j = 0; j < n; ++j) {
    const __m256 p = ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(sc + j * kLanes), new_max));
    _mm256_storeu_ps(sc + j * kLanes, p);
    total = _mm256_add_ps(total, p);
  }
  _mm256_storeu_ps(max, new_max);
  _mm256_storeu_ps(sum, total);
  return correction;
}

// Outputs: o = o * correction + sum_j p_j v_j over the block's n values (value j
// at values[j * stride]), four dims at a time.
inline void AccumulateValues(float* oc, const float* values, int64_t stride, const float* sc, __m256 correction,
                             int n, int d) {
  int i = 0;
  for (; i + 4 <= d; i += 4) {
    __m256 o0 = _mm256_mul_ps(_mm256_loadu_ps(oc + i * kLanes), correction);
    __m256 o1 = _mm256_mul_ps(_mm256_loadu_ps(oc + (i + 1) * kLanes), correction);
    __m256 o2 = _mm256_mul_ps(_mm256_loadu_ps(oc + (i + 2) * kLanes), correction);
    __m256 o3 = _mm256_mul_ps(_mm256_loadu_ps(oc + (i + 3) * kLanes), correction);
    for (int j = 0; j < n; ++j) {
      const float* vj = values + j * stride + i;
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
    for (int j = 0; j < n; ++j) {
      o = _mm256_fmadd_ps(_mm256_loadu_ps(sc + j * kLanes), _mm256_broadcast_ss(values + j * stride + i), o);
    }
    _mm256_storeu_ps(oc + i * kLanes, o);
  }
}

// A decode step's rows (one token: the heads of a KV head's group) fill few of
// the 8 lanes; up to this many rows go through AttendFewRows instead.
constexpr int kFewRows = 4;

// 8 values of a K or V row as F32: an F32 cache's, or an F16 cache's converted as
// they are read (cvtph is exact: the values BlockRows would have written).
inline __m256 Load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 Load8(const uint16_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }

// Values i0..i0 + 7 of the 8 rows at rows[0..7], transposed: c[i] = [rows[0][i0 +
// i], ..., rows[7][i0 + i]].
template <class T>
inline void Transpose8(const T* const* rows, int64_t i0, __m256* c) {
  __m256 t[8], u[8];
  for (int k = 0; k < 8; k += 2) {
    const __m256 a = Load8(rows[k] + i0), b = Load8(rows[k + 1] + i0);
    t[k] = _mm256_unpacklo_ps(a, b);
    t[k + 1] = _mm256_unpackhi_ps(a, b);
  }
  for (int k = 0; k < 8; k += 4) {
    u[k] = _mm256_shuffle_ps(t[k], t[k + 2], 0x44);
    u[k + 1] = _mm256_shuffle_ps(t[k], t[k + 2], 0xee);
    u[k + 2] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0x44);
    u[k + 3] = _mm256_shuffle_ps(t[k + 1], t[k + 3], 0xee);
  }
  for (int k = 0; k < 4; ++k) {
    c[k] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x20);
    c[k + 4] = _mm256_permute2f128_ps(u[k], u[k + 4], 0x31);
  }
}

// AttendRunKvHead for R <= kFewRows rows (head_dim a multiple of 8), with keys
// and dims in the lanes instead of rows: a decode step's 2 to 4 rows would leave
// most of the 8 row lanes idle. Each row's scores, softmax and outputs take the
// same operations in the same order as in the row lanes (a score: one fma chain
// over the dims from zero; the sum: the block's p added in key order; an output:
// scaled by the correction, then one fma a key in key order), so its result is
// the same bit for bit whichever form computes it. F32 and F16 caches are read in
// place (a decode step reads each key once: converting it to a buffer first cost
// as much as the arithmetic); Q8_0 blocks are converted first, as there.
template <int R>
void AttendFewRows(const float* q, int64_t q_stride, int64_t first_position, const LayerKv& kv,
                   const int32_t* block_table, const AttentionShape& shape, float scale, int kv_head, float* out) {
  const int d = shape.head_dim, bs = shape.block_size;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * d;
  const int64_t padded = (bs + 7) / 8 * 8;  // a row's scores, a vector past the block's keys
  const int64_t block_values = static_cast<int64_t>(bs) * d;
  thread_local Scratch scratch;
  float* qs = scratch.Floats(2 * R * static_cast<int64_t>(d) + R * padded + 2 * block_values + d);
  if (qs == nullptr) {
    fputs("tachyon: out of memory for attention scratch\n", stderr);
    abort();
  }
  float* os = qs + R * d;
  float* sc = os + R * d;
  float* keys = sc + R * padded;
  float* values = keys + block_values;
  float* zero = values + block_values;  // the rows of a key group past the block's keys (F32 or F16 zeros)
  Fill(zero, d, 0.0f);
  Fill(os, static_cast<int64_t>(R) * d, 0.0f);
  float max[R], sum[R];
  int64_t pos[R];
  for (int r = 0; r < R; ++r) {
    const int t = r / group, h = kv_head * group + r % group;
    const float* qh = q + t * q_stride + static_cast<int64_t>(h) * d;
    for (int i = 0; i < d; ++i) qs[r * d + i] = qh[i] * scale;
    pos[r] = first_position + t;
    max[r] = -INFINITY;
    sum[r] = 0.0f;
  }
  const int64_t last = first_position + (R - 1) / group;
  for (int64_t block = FirstVisiblePosition(shape, first_position) / bs; block <= last / bs; ++block) {
    const int64_t left = last + 1 - block * bs;
    const int n = static_cast<int>(left < bs ? left : bs);
    const int64_t first_slot = static_cast<int64_t>(block_table[block]) * bs;
    // Scores, 8 keys at a time: each 8 x 8 tile of their values transposed, so that
    // a row's value i multiplies 8 keys' value i.
    const auto scores = [&]<class T>(const T* key_rows, int64_t key_stride) {
      for (int j0 = 0; j0 < n; j0 += 8) {
        const T* kr[8];
        for (int k = 0; k < 8; ++k) {
          kr[k] = j0 + k < n ? key_rows + (j0 + k) * key_stride : reinterpret_cast<const T*>(zero);
        }
        __m256 acc[R];
        for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
        for (int i0 = 0; i0 < d; i0 += 8) {
          __m256 c[8];
          Transpose8(kr, i0, c);
          for (int r = 0; r < R; ++r) {
            for (int i = 0; i < 8; ++i) acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(qs[r * d + i0 + i]), c[i], acc[r]);
          }
        }
        for (int r = 0; r < R; ++r) _mm256_storeu_ps(sc + r * padded + j0, acc[r]);
      }
    };
    const int64_t in_place = first_slot * kv_dim + static_cast<int64_t>(kv_head) * d;
    // The next block's K and V rows are asked for while this one is computed: a
    // decode step reads each from memory once, in short strided runs (a head's row
    // of a slot), which the hardware prefetchers alone left waiting on memory.
    if (block < last / bs && kv.type != KvType::kQ8_0) {
      const int64_t row_bytes = kv.type == KvType::kF16 ? 2 * d : 4 * d;
      const int64_t slot_bytes = kv.type == KvType::kF16 ? 2 * kv_dim : 4 * kv_dim;
      const int64_t next = static_cast<int64_t>(block_table[block + 1]) * bs * slot_bytes +
                           static_cast<int64_t>(kv_head) * row_bytes;
      for (int j = 0; j < bs; ++j) {
        for (int64_t line = 0; line < row_bytes; line += 64) {
          _mm_prefetch(static_cast<const char*>(kv.k) + next + j * slot_bytes + line, _MM_HINT_T0);
          _mm_prefetch(static_cast<const char*>(kv.v) + next + j * slot_bytes + line, _MM_HINT_T0);
        }
      }
    }
    int64_t key_stride = kv_dim, value_stride = kv_dim;
    const float* key_rows = nullptr;
    const float* value_rows = nullptr;
    if (kv.type == KvType::kF16) {
      scores(static_cast<const uint16_t*>(kv.k) + in_place, kv_dim);
    } else {
      key_rows = BlockRows(kv.k, kv.type, first_slot, n, kv_dim, kv_head, d, keys, &key_stride);
      value_rows = BlockRows(kv.v, kv.type, first_slot, n, kv_dim, kv_head, d, values, &value_stride);
      scores(key_rows, key_stride);
    }
    const int64_t whole = (n + 7) / 8 * 8;
    if (shape.softcap > 0) {
      for (int r = 0; r < R; ++r) SoftCap(sc + r * padded, whole, shape.softcap);
    }
    // MaskAndExponentiate, a row at a time: max as _mm256_max_ps picks (its first
    // operand where greater, else its second).
    float correction[R];
    for (int r = 0; r < R; ++r) {
      float* s = sc + r * padded;
      float block_max = -INFINITY;
      for (int j = 0; j < n; ++j) {
        const int64_t key = block * bs + j;
        bool hidden = key > pos[r];
        if (shape.window > 0) {
          const int64_t edge = key + shape.window - 1 < INT32_MAX ? key + shape.window - 1 : INT32_MAX;
          hidden = hidden || pos[r] > edge;
        }
        if (hidden) s[j] = -INFINITY;
        block_max = block_max > s[j] ? block_max : s[j];
      }
      const float new_max = max[r] > block_max ? max[r] : block_max;
      correction[r] = _mm256_cvtss_f32(ExpNonPositive(_mm256_set1_ps(max[r] - new_max)));
      float total = sum[r] * correction[r];
      const __m256 vmax = _mm256_set1_ps(new_max);
      for (int j = 0; j < whole; j += 8) {
        _mm256_storeu_ps(s + j, ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), vmax)));
      }
      for (int j = 0; j < n; ++j) total += s[j];
      max[r] = new_max;
      sum[r] = total;
    }
    // AccumulateValues, 16 dims (the last 8 where d is an odd multiple of 8) at a
    // time: each key's values loaded once for every row.
    const auto accumulate = [&]<class T>(const T* value_rows, int64_t value_stride) {
      for (int i = 0; i < d; i += 16) {
        const bool two = i + 16 <= d;
        __m256 o[R][2];
        for (int r = 0; r < R; ++r) {
          const __m256 cr = _mm256_set1_ps(correction[r]);
          o[r][0] = _mm256_mul_ps(_mm256_loadu_ps(os + r * d + i), cr);
          o[r][1] = two ? _mm256_mul_ps(_mm256_loadu_ps(os + r * d + i + 8), cr) : _mm256_setzero_ps();
        }
        for (int j = 0; j < n; ++j) {
          const T* vj = value_rows + j * value_stride + i;
          const __m256 v0 = Load8(vj);
          const __m256 v1 = two ? Load8(vj + 8) : _mm256_setzero_ps();
          for (int r = 0; r < R; ++r) {
            const __m256 p = _mm256_set1_ps(sc[r * padded + j]);
            o[r][0] = _mm256_fmadd_ps(p, v0, o[r][0]);
            o[r][1] = _mm256_fmadd_ps(p, v1, o[r][1]);
          }
        }
        for (int r = 0; r < R; ++r) {
          _mm256_storeu_ps(os + r * d + i, o[r][0]);
          if (two) _mm256_storeu_ps(os + r * d + i + 8, o[r][1]);
        }
      }
    };
    if (kv.type == KvType::kF16) {
      accumulate(static_cast<const uint16_t*>(kv.v) + in_place, kv_dim);
    } else {
      accumulate(value_rows, value_stride);
    }
  }
  for (int r = 0; r < R; ++r) {
    const int t = r / group, h = kv_head * group + r % group;
    const float inv = sum[r] > 0.0f ? 1.0f / sum[r] : 0.0f;
    float* dst = out + t * q_stride + static_cast<int64_t>(h) * d;
    for (int i = 0; i < d; ++i) dst[i] = os[r * d + i] * inv;
  }
}

}  // namespace

void AttendRunKvHead(const float* q, int64_t q_stride, int num_queries, int64_t first_position, const LayerKv& kv,
                     const int32_t* block_table, const AttentionShape& shape, float scale, int kv_head, float* out) {
  const int d = shape.head_dim, bs = shape.block_size;
  const int group = shape.n_heads / shape.n_kv_heads;
  const int64_t kv_dim = static_cast<int64_t>(shape.n_kv_heads) * d;
  const int rows = num_queries * group;
  if (rows <= kFewRows && d % 8 == 0) {
    static constexpr void (*kFew[kFewRows])(const float*, int64_t, int64_t, const LayerKv&, const int32_t*,
                                            const AttentionShape&, float, int, float*) = {
        AttendFewRows<1>, AttendFewRows<2>, AttendFewRows<3>, AttendFewRows<4>};
    kFew[rows - 1](q, q_stride, first_position, kv, block_table, shape, scale, kv_head, out);
    return;
  }
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
    int64_t key_stride, value_stride;
    const float* key_rows = BlockRows(kv.k, kv.type, first_slot, n, kv_dim, kv_head, d, keys, &key_stride);
    const float* value_rows = BlockRows(kv.v, kv.type, first_slot, n, kv_dim, kv_head, d, values, &value_stride);
    for (int c = 0; c < chunks; ++c) {
      const float* qc = qt + static_cast<size_t>(c) * d * kLanes;
      float* oc = ot + static_cast<size_t>(c) * d * kLanes;
      const __m256i lane_pos = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos + c * kLanes));
      ChunkScores(qc, key_rows, key_stride, n, d, sc);
      // Soft-capping (Gemma 2's layers): s = tanh(s / cap) * cap, vectorized.
      if (shape.softcap > 0) SoftCap(sc, n * kLanes, shape.softcap);
      const __m256 correction =
          MaskAndExponentiate(sc, bs, n, block, lane_pos, shape.window, max + c * kLanes, sum + c * kLanes);
      AccumulateValues(oc, value_rows, value_stride, sc, correction, n, d);
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
