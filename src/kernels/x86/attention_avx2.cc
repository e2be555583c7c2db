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

// Rows [0, n) of KV head kv_head's part of block `block` in a layer's V (or a
// Q8_0 K) as F32, row j at rows[j * *stride]: an F32 cache's rows where they
// are, else converted into `out`. Only the n rows are read: the slots past them
// may hold another sequence's data, or none.
const float* PartRows(const void* base, KvType type, const AttentionShape& shape, int64_t block, int kv_head, int n,
                      float* out, int64_t* stride) {
  const int d = shape.head_dim;
  const uint8_t* part = static_cast<const uint8_t*>(base) + KvPartOffset(type, shape, block, kv_head);
  *stride = d;
  switch (type) {
    case KvType::kF32: return reinterpret_cast<const float*>(part);
    case KvType::kF16: {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(part);
      const int64_t count = static_cast<int64_t>(n) * d;
      int64_t i = 0;
      for (; i + 8 <= count; i += 8) {
        _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
      }
      for (; i < count; ++i) out[i] = _cvtsh_ss(src[i]);
      return out;
    }
    case KvType::kQ8_0: {
      const int64_t row_bytes = KvRowBytes(KvType::kQ8_0, d);
      for (int j = 0; j < n; ++j) ref::DequantizeRowQ8_0(part + j * row_bytes, out + static_cast<int64_t>(j) * d, d);
      return out;
    }
  }
  return out;
}

// The keys [0, n) of KV head kv_head's part of block `block` as F32, value i of
// key j at keys[j * *key_stride + i * *dim_stride]: an F32 cache's transposed
// part where it is, an F16 one's converted into `out` the same way ([head_dim]
// [block_size]), Q8_0 rows dequantized into `out`.
const float* PartKeys(const void* base, KvType type, const AttentionShape& shape, int64_t block, int kv_head, int n,
                      float* out, int64_t* key_stride, int64_t* dim_stride) {
  const int d = shape.head_dim, bs = shape.block_size;
  if (type == KvType::kQ8_0) {
    *dim_stride = 1;
    return PartRows(base, type, shape, block, kv_head, n, out, key_stride);
  }
  *key_stride = 1;
  *dim_stride = bs;
  const uint8_t* part = static_cast<const uint8_t*>(base) + KvPartOffset(type, shape, block, kv_head);
  if (type == KvType::kF32) return reinterpret_cast<const float*>(part);
  const uint16_t* src = reinterpret_cast<const uint16_t*>(part);
  for (int i = 0; i < d; ++i) {
    const uint16_t* column = src + static_cast<int64_t>(i) * bs;
    float* dst = out + static_cast<int64_t>(i) * bs;
    int j = 0;
    for (; j + 8 <= n; j += 8) {
      _mm256_storeu_ps(dst + j, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(column + j))));
    }
    for (; j < n; ++j) dst[j] = _cvtsh_ss(column[j]);
  }
  return out;
}

// C chunks' scores against a block's n keys (value i of key j at keys[j *
// key_stride + i * dim_stride]): sc[c][key][lane] = q[c][lane] . k[key], K keys at
// a time, C K independent chains over d, each key's value broadcast once for the
// C chunks (one chunk: 8 keys keep both FMA pipes busy through their latency; two:
// 4; then 1 for the block's last keys).
template <int C, int K>
inline void ChunkScoresOf(const float* const* qc, const float* keys, int64_t key_stride, int64_t dim_stride, int j,
                          int d, float* const* sc) {
  __m256 a[C][K];
  for (int c = 0; c < C; ++c) {
    for (int k = 0; k < K; ++k) a[c][k] = _mm256_setzero_ps();
  }
  const float* kj = keys + j * key_stride;
  for (int i = 0; i < d; ++i) {
    __m256 qi[C];
    for (int c = 0; c < C; ++c) qi[c] = _mm256_loadu_ps(qc[c] + i * kLanes);
    const float* ki = kj + i * dim_stride;
    for (int k = 0; k < K; ++k) {
      const __m256 key = _mm256_broadcast_ss(ki + k * key_stride);
      for (int c = 0; c < C; ++c) a[c][k] = _mm256_fmadd_ps(qi[c], key, a[c][k]);
    }
  }
  for (int c = 0; c < C; ++c) {
    for (int k = 0; k < K; ++k) _mm256_storeu_ps(sc[c] + (j + k) * kLanes, a[c][k]);
  }
}
template <int C>
inline void ChunkScores(const float* const* qc, const float* keys, int64_t key_stride, int64_t dim_stride, int n,
                        int d, float* const* sc) {
  constexpr int kWide = C == 1 ? 8 : 4;
  int j = 0;
  for (; j + kWide <= n; j += kWide) ChunkScoresOf<C, kWide>(qc, keys, key_stride, dim_stride, j, d, sc);
  for (; j + 4 <= n; j += 4) ChunkScoresOf<C, 4>(qc, keys, key_stride, dim_stride, j, d, sc);
  for (; j < n; ++j) ChunkScoresOf<C, 1>(qc, keys, key_stride, dim_stride, j, d, sc);
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

// C chunks' outputs: o[c] = o[c] * correction[c] + sum_j p[c]_j v_j over the
// block's n values (value j at values[j * stride]), dims [i, i + K): C K
// independent chains over the keys, each value broadcast once for the C chunks.
template <int C, int K>
inline void AccumulateValuesOf(float* const* oc, const float* values, int64_t stride, const float* const* sc,
                               const __m256* correction, int n, int i) {
  __m256 o[C][K];
  for (int c = 0; c < C; ++c) {
    for (int k = 0; k < K; ++k) o[c][k] = _mm256_mul_ps(_mm256_loadu_ps(oc[c] + (i + k) * kLanes), correction[c]);
  }
  for (int j = 0; j < n; ++j) {
    const float* vj = values + j * stride + i;
    __m256 p[C];
    for (int c = 0; c < C; ++c) p[c] = _mm256_loadu_ps(sc[c] + j * kLanes);
    for (int k = 0; k < K; ++k) {
      const __m256 value = _mm256_broadcast_ss(vj + k);
      for (int c = 0; c < C; ++c) o[c][k] = _mm256_fmadd_ps(p[c], value, o[c][k]);
    }
  }
  for (int c = 0; c < C; ++c) {
    for (int k = 0; k < K; ++k) _mm256_storeu_ps(oc[c] + (i + k) * kLanes, o[c][k]);
  }
}
template <int C>
inline void AccumulateValues(float* const* oc, const float* values, int64_t stride, const float* const* sc,
                             const __m256* correction, int n, int d) {
  constexpr int kWide = C == 1 ? 8 : 4;
  int i = 0;
  for (; i + kWide <= d; i += kWide) AccumulateValuesOf<C, kWide>(oc, values, stride, sc, correction, n, i);
  for (; i + 4 <= d; i += 4) AccumulateValuesOf<C, 4>(oc, values, stride, sc, correction, n, i);
  for (; i < d; ++i) AccumulateValuesOf<C, 1>(oc, values, stride, sc, correction, n, i);
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
  const int64_t padded = (bs + 7) / 8 * 8;  // a row's scores, a vector past the block's keys
  const int64_t block_values = static_cast<int64_t>(bs) * d;
  const int64_t part_bytes = static_cast<int64_t>(bs) * KvRowBytes(kv.type, d);
  thread_local Scratch scratch;
  float* qs = scratch.Floats(2 * R * static_cast<int64_t>(d) + R * padded + 2 * block_values + padded * d + d);
  if (qs == nullptr) {
    fputs("tachyon: out of memory for attention scratch\n", stderr);
    abort();
  }
  float* os = qs + R * d;
  float* sc = os + R * d;
  float* keys = sc + R * padded;              // Q8_0 rows, or F16 columns at block_size
  float* values = keys + block_values;        // Q8_0 rows
  float* columns = values + block_values;     // columns at `padded` (a block size not a multiple of 8)
  float* zero = columns + padded * d;         // the rows of a key group past the block's keys
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
    const int64_t physical = block_table[block];
    // Scores from rows (Q8_0), 8 keys at a time: each 8 x 8 tile of their values
    // transposed, so that a row's value i multiplies 8 keys' value i.
    const auto row_scores = [&](const float* key_rows, int64_t key_stride) {
      for (int j0 = 0; j0 < n; j0 += 8) {
        const float* kr[8];
        for (int k = 0; k < 8; ++k) kr[k] = j0 + k < n ? key_rows + (j0 + k) * key_stride : zero;
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
    // Scores from a transposed part (F32, F16: value i of key j at cols[i * stride
    // + j], 8 keys a vector, readable up to `padded`), 16 keys at a time: the two
    // vectors' 2 R chains advance together over the dims. Lanes past n hold
    // whatever the slots there hold; their scores are never used.
    const auto column_scores = [&]<class T>(const T* cols, int64_t stride) {
      const auto keys = [&]<int G>(int j0) {
        __m256 acc[G][R];
        for (int g = 0; g < G; ++g) {
          for (int r = 0; r < R; ++r) acc[g][r] = _mm256_setzero_ps();
        }
        for (int i = 0; i < d; ++i) {
          __m256 c[G];
          for (int g = 0; g < G; ++g) c[g] = Load8(cols + i * stride + j0 + 8 * g);
          for (int r = 0; r < R; ++r) {
            const __m256 qi = _mm256_set1_ps(qs[r * d + i]);
            for (int g = 0; g < G; ++g) acc[g][r] = _mm256_fmadd_ps(qi, c[g], acc[g][r]);
          }
        }
        for (int g = 0; g < G; ++g) {
          for (int r = 0; r < R; ++r) _mm256_storeu_ps(sc + r * padded + j0 + 8 * g, acc[g][r]);
        }
      };
      int j0 = 0;
      for (; j0 + 8 < n; j0 += 16) keys.template operator()<2>(j0);
      if (j0 < n) keys.template operator()<1>(j0);
    };
    // The next block's K and V parts are asked for while this one is computed: a
    // decode step reads each from memory once, a block's part at a time, which the
    // hardware prefetchers alone left waiting on memory.
    if (block < last / bs) {
      const int64_t next = KvPartOffset(kv.type, shape, block_table[block + 1], kv_head);
      for (int64_t line = 0; line < part_bytes; line += 64) {
        _mm_prefetch(static_cast<const char*>(kv.k) + next + line, _MM_HINT_T0);
        _mm_prefetch(static_cast<const char*>(kv.v) + next + line, _MM_HINT_T0);
      }
    }
    const uint8_t* k_part = static_cast<const uint8_t*>(kv.k) + KvPartOffset(kv.type, shape, physical, kv_head);
    const uint8_t* v_part = static_cast<const uint8_t*>(kv.v) + KvPartOffset(kv.type, shape, physical, kv_head);
    if (kv.type == KvType::kQ8_0) {
      int64_t key_stride;
      const float* key_rows = PartRows(kv.k, kv.type, shape, physical, kv_head, n, keys, &key_stride);
      row_scores(key_rows, key_stride);
    } else if (bs % 8 == 0 && kv.type == KvType::kF16) {
      column_scores(reinterpret_cast<const uint16_t*>(k_part), bs);
    } else if (bs % 8 == 0) {
      column_scores(reinterpret_cast<const float*>(k_part), bs);
    } else {
      // A block size that is not a multiple of 8: the columns copied to `padded`
      // (the last vector of a column would run into the next).
      int64_t key_stride, dim_stride;
      const float* cols = PartKeys(kv.k, kv.type, shape, physical, kv_head, n, keys, &key_stride, &dim_stride);
      for (int i = 0; i < d; ++i) {
        float* dst = columns + static_cast<int64_t>(i) * padded;
        for (int j = 0; j < n; ++j) dst[j] = cols[i * dim_stride + j];
        for (int j = n; j < padded; ++j) dst[j] = 0.0f;
      }
      column_scores(static_cast<const float*>(columns), padded);
    }
    const int64_t whole = (n + 7) / 8 * 8;
    if (shape.softcap > 0) {
      for (int r = 0; r < R; ++r) SoftCap(sc + r * padded, whole, shape.softcap);
    }
    // MaskAndExponentiate, a row at a time, 8 keys a vector: masked keys and the
    // lanes past n score -inf. The block's max comes from a tree of maxima rather
    // than in key order; the two can differ only in the sign of a zero maximum,
    // which changes no difference taken from it (s - max, old max - new max: 0 and
    // -0 give the same result, and e^0 = e^-0 = 1 exactly), so every p is the same.
    float correction[R], total[R];
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i first_key = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int32_t>(block * bs)), lane);
    for (int r = 0; r < R; ++r) {
      float* s = sc + r * padded;
      // Keys before `lowest` slid out of the row's window.
      const int64_t lowest = shape.window > 0 && pos[r] - shape.window + 1 > 0 ? pos[r] - shape.window + 1 : 0;
      const __m256i newest = _mm256_set1_epi32(static_cast<int32_t>(pos[r] < block * bs + n - 1 ? pos[r] : block * bs + n - 1));
      const __m256i oldest = _mm256_set1_epi32(static_cast<int32_t>(lowest));
      __m256 vmax = _mm256_set1_ps(-INFINITY);
      for (int j = 0; j < whole; j += 8) {
        const __m256i key = _mm256_add_epi32(first_key, _mm256_set1_epi32(j));
        const __m256i hidden = _mm256_or_si256(_mm256_cmpgt_epi32(key, newest), _mm256_cmpgt_epi32(oldest, key));
        const __m256 score =
            _mm256_blendv_ps(_mm256_loadu_ps(s + j), _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(hidden));
        _mm256_storeu_ps(s + j, score);
        vmax = _mm256_max_ps(vmax, score);
      }
      __m128 m = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
      m = _mm_max_ps(m, _mm_movehl_ps(m, m));
      m = _mm_max_ss(m, _mm_movehdup_ps(m));
      const float block_max = _mm_cvtss_f32(m);
      const float new_max = max[r] > block_max ? max[r] : block_max;
      correction[r] = _mm256_cvtss_f32(ExpNonPositive(_mm256_set1_ps(max[r] - new_max)));
      total[r] = sum[r] * correction[r];
      const __m256 vnew = _mm256_set1_ps(new_max);
      for (int j = 0; j < whole; j += 8) {
        _mm256_storeu_ps(s + j, ExpNonPositive(_mm256_sub_ps(_mm256_loadu_ps(s + j), vnew)));
      }
      max[r] = new_max;
    }
    // Each row's p added in key order, the rows' chains side by side.
    for (int j = 0; j < n; ++j) {
      for (int r = 0; r < R; ++r) total[r] += sc[r * padded + j];
    }
    for (int r = 0; r < R; ++r) sum[r] = total[r];
    // AccumulateValues, V vectors of 8 dims at a time (32 dims for up to 2 rows,
    // 24 for 3: as many chains as the registers hold; then 16, then 8): each key's
    // values loaded once for every row, R V chains of fma side by side.
    const auto accumulate = [&]<class T>(const T* value_rows, int64_t value_stride) {
      const auto dims = [&]<int V>(int i) {
        __m256 o[R][V];
        for (int r = 0; r < R; ++r) {
          const __m256 cr = _mm256_set1_ps(correction[r]);
          for (int u = 0; u < V; ++u) o[r][u] = _mm256_mul_ps(_mm256_loadu_ps(os + r * d + i + 8 * u), cr);
        }
        for (int j = 0; j < n; ++j) {
          const T* vj = value_rows + j * value_stride + i;
          __m256 v[V];
          for (int u = 0; u < V; ++u) v[u] = Load8(vj + 8 * u);
          for (int r = 0; r < R; ++r) {
            const __m256 p = _mm256_set1_ps(sc[r * padded + j]);
            for (int u = 0; u < V; ++u) o[r][u] = _mm256_fmadd_ps(p, v[u], o[r][u]);
          }
        }
        for (int r = 0; r < R; ++r) {
          for (int u = 0; u < V; ++u) _mm256_storeu_ps(os + r * d + i + 8 * u, o[r][u]);
        }
      };
      int i = 0;
      if constexpr (R <= 2) {
        for (; i + 32 <= d; i += 32) dims.template operator()<4>(i);
      } else if constexpr (R == 3) {
        for (; i + 24 <= d; i += 24) dims.template operator()<3>(i);
      }
      for (; i + 16 <= d; i += 16) dims.template operator()<2>(i);
      if (i < d) dims.template operator()<1>(i);
    };
    if (kv.type == KvType::kF16) {
      accumulate(reinterpret_cast<const uint16_t*>(v_part), d);
    } else if (kv.type == KvType::kF32) {
      accumulate(reinterpret_cast<const float*>(v_part), d);
    } else {
      int64_t value_stride;
      const float* value_rows = PartRows(kv.v, kv.type, shape, physical, kv_head, n, values, &value_stride);
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
  // sum per lane; then one block's keys and values as F32, and the scores of two
  // chunks, [key][8 lanes] each.
  const int64_t lanes = static_cast<int64_t>(chunks) * kLanes, transposed = lanes * d;
  const int64_t block_values = static_cast<int64_t>(bs) * d;
  thread_local Scratch scratch;
  float* qt = scratch.Floats(2 * transposed + 3 * lanes + 2 * block_values + 2 * static_cast<int64_t>(bs) * kLanes);
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
    int64_t key_stride, dim_stride, value_stride;
    const int64_t physical = block_table[block];
    const float* key_rows = PartKeys(kv.k, kv.type, shape, physical, kv_head, n, keys, &key_stride, &dim_stride);
    const float* value_rows = PartRows(kv.v, kv.type, shape, physical, kv_head, n, values, &value_stride);
    // Two chunks at a time (each key's and value's broadcast shared by both), the
    // last one alone.
    const auto chunks_at = [&]<int C>(int c0) {
      const float* qc[C];
      float* oc[C];
      float* scc[C];
      __m256 correction[C];
      for (int c = 0; c < C; ++c) {
        qc[c] = qt + static_cast<size_t>(c0 + c) * d * kLanes;
        oc[c] = ot + static_cast<size_t>(c0 + c) * d * kLanes;
        scc[c] = sc + static_cast<size_t>(c) * bs * kLanes;
      }
      ChunkScores<C>(qc, key_rows, key_stride, dim_stride, n, d, scc);
      for (int c = 0; c < C; ++c) {
        const int chunk = c0 + c;
        const __m256i lane_pos = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(pos + chunk * kLanes));
        // Soft-capping (Gemma 2's layers): s = tanh(s / cap) * cap, vectorized.
        if (shape.softcap > 0) SoftCap(scc[c], n * kLanes, shape.softcap);
        correction[c] = MaskAndExponentiate(scc[c], bs, n, block, lane_pos, shape.window, max + chunk * kLanes,
                                            sum + chunk * kLanes);
      }
      AccumulateValues<C>(oc, value_rows, value_stride, scc, correction, n, d);
    };
    int c0 = 0;
    for (; c0 + 2 <= chunks; c0 += 2) chunks_at.template operator()<2>(c0);
    if (c0 < chunks) chunks_at.template operator()<1>(c0);
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
