// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c
// (see kernels/CMakeLists.txt). As in dot_avx2.cc, nothing here may call an
// inline function or template shared with the rest of the code: the linker keeps
// one copy, and machines without AVX-512 could run this file's.
#include "kernels/x86/gemm_avx512.h"

#include <immintrin.h>

#include "kernels/x86/packed_prefetch.h"

namespace tachyon::avx512 {
namespace {

constexpr int kMaxRows = 4;
constexpr int kMaxTokens = 3;

// The 16 lanes summed in one fixed order.
float ReduceLanes(__m512 v) {
  __m256 half = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  quarter = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
  quarter = _mm_add_ss(quarter, _mm_movehdup_ps(quarter));
  return _mm_cvtss_f32(quarter);
}

// ReduceLanes of a, b, c and d, stored to out[0..3]: the same additions in the same
// pairs (so the same results, bit for bit) for four vectors at once.
void ReduceLanes4(__m512 a, __m512 b, __m512 c, __m512 d, float* out) {
  // v_i + v_(i+8): two vectors' 256-bit halves side by side.
  const __m512 ab = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xee));
  const __m512 cd = _mm512_add_ps(_mm512_shuffle_f32x4(c, d, 0x44), _mm512_shuffle_f32x4(c, d, 0xee));
  // h_i + h_(i+4): a 128-bit lane per vector.
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(ab, cd, 0x88), _mm512_shuffle_f32x4(ab, cd, 0xdd));
  // q_0 + q_2, q_1 + q_3; then their sum, in lane 0 of each 128-bit lane.
  const __m512 e = _mm512_add_ps(q, _mm512_permute_ps(q, 0x4e));
  const __m512 r = _mm512_add_ps(e, _mm512_permute_ps(e, 0xb1));
  _mm512_mask_compressstoreu_ps(out, 0x1111, r);
}

// Vector j (0..7) of a group whose vectors are `width` bytes (64, or 4 per block
// in a row's last, partial group: then only its first `width` bytes are read).
template <bool kPartial>
__m512i LoadVector(const uint8_t* p, int width) {
  if constexpr (kPartial) return _mm512_maskz_loadu_epi8((~0ull) >> (64 - width), p);
  return _mm512_load_si512(p);
}
// A partial group of at most kCompactBlocks blocks is read whole into one vector:
// dword j * nb + b holds vector j's lane b (the layout its quants are stored in), so
// one vpdpbusd does the group instead of 8 on mostly empty vectors.
constexpr int kCompactBlocks = kCompactPartialBlocks;

// Dword d of `lo` for d < 4 nb, of `hi` (from its dword 0) for 4 nb <= d < 8 nb.
__m512i JoinHalves(__m512i lo, __m512i hi, int nb) {
  const __m512i d = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  const __m512i split = _mm512_set1_epi32(4 * nb);
  const __mmask16 upper = _mm512_cmpge_epi32_mask(d, split);
  const __m512i idx = _mm512_mask_add_epi32(d, upper, _mm512_sub_epi32(d, split), _mm512_set1_epi32(16));
  return _mm512_maskz_permutex2var_epi32(static_cast<__mmask16>((1u << (8 * nb)) - 1), lo, idx, hi);
}

struct Q8Rows {
  static constexpr bool kHasCompact = true;
  static constexpr int64_t kGroupBytes = 512;
  static __m512i LoadCompact(const uint8_t* group, int nb) {
    return _mm512_maskz_loadu_epi8((~0ull) >> (64 - 32 * nb), group);
  }
  template <bool kPartial>
  static __m512i Load(const uint8_t* group, int j, int width) {
    return LoadVector<kPartial>(group + j * width, width);
  }
};
struct Q4Rows {
  static constexpr bool kHasCompact = true;
  static constexpr int64_t kGroupBytes = 256;
  static __m512i LoadCompact(const uint8_t* group, int nb) {
    const __m512i slices = _mm512_maskz_loadu_epi8((~0ull) >> (64 - 16 * nb), group);
    const __m512i low = _mm512_set1_epi8(0x0f);
    return JoinHalves(_mm512_and_si512(slices, low), _mm512_and_si512(_mm512_srli_epi16(slices, 4), low), nb);
  }
  // Slice j % 4 holds vector j in its low nibbles and vector j + 4 in its high ones.
  template <bool kPartial>
  static __m512i Load(const uint8_t* group, int j, int width) {
    const __m512i slice = LoadVector<kPartial>(group + (j & 3) * width, width);
    const __m512i nibbles = j < 4 ? slice : _mm512_srli_epi16(slice, 4);
    return _mm512_and_si512(nibbles, _mm512_set1_epi8(0x0f));
  }
};

struct Q5Rows {
  static constexpr bool kHasCompact = true;
  static constexpr int64_t kGroupBytes = 320;
  static __m512i LoadCompact(const uint8_t* group, int nb) {
    const __m512i fifth = _mm512_maskz_mov_epi8(CompactPartialMask(group + 16 * nb, nb), _mm512_set1_epi8(0x10));
    return _mm512_or_si512(Q4Rows::LoadCompact(group, nb), fifth);
  }
  // Q4_0's nibbles, then 8 masks of 64 bits: bit 4 b + k of mask j is the fifth bit of
  // lane b's byte k of vector j.
  template <bool kPartial>
  static __m512i Load(const uint8_t* group, int j, int width) {
    uint64_t bits;
    __builtin_memcpy(&bits, group + 4 * width + 8 * j, sizeof(bits));
    const __m512i fifth = _mm512_maskz_mov_epi8(bits, _mm512_set1_epi8(0x10));
    return _mm512_or_si512(Q4Rows::Load<kPartial>(group, j, width), fifth);
  }
};

struct Q6Rows {  // k-quant rows: never a compact group
  static constexpr bool kHasCompact = false;
  static constexpr int64_t kGroupBytes = 384;
  // Q4_0's nibbles (the low 4 bits), then 8 pairs of 64-bit masks: bits 4 and 5 of
  // lane b's byte k of vector j at bit 4 b + k of masks 2 j and 2 j + 1.
  template <bool kPartial>
  static __m512i Load(const uint8_t* group, int j, int width) {
    uint64_t bits[2];
    __builtin_memcpy(bits, group + 4 * width + 16 * j, sizeof(bits));
    const __m512i high = _mm512_or_si512(_mm512_maskz_mov_epi8(bits[0], _mm512_set1_epi8(0x10)),
                                         _mm512_maskz_mov_epi8(bits[1], _mm512_set1_epi8(0x20)));
    return _mm512_or_si512(Q4Rows::Load<kPartial>(group, j, width), high);
  }
};

// Weight scales, one lane per block of group g of row r: acc += float(sums) * (scale * d_x),
// and for the k-quants acc -= min * (d_x * sum(x)) (the activations' min_sums).
// A scale covers a whole block (kParts 1) or each half of it (kParts 2: vectors 0-3
// and 4-7, Q6_K's 16-value sub-blocks).
struct BlockScales {  // Q8_0, Q4_0, Q5_0: the block's F16 scale
  static constexpr bool kHasMins = false;
  static constexpr bool kCompact = true;  // a partial group of 1 or 2 blocks is compact
  static constexpr int kParts = 1;
  template <bool kPartial>
  static void Load(const PackedRows& w, int r, int64_t g, int num_blocks, int, __m512* scale, __m512*) {
    const uint16_t* d = reinterpret_cast<const uint16_t*>(w.scales + r * w.scales_stride) + g * 16;
    const __m256i halves = kPartial ? _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << num_blocks) - 1), d)
                                    : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d));
    *scale = _mm512_cvtph_ps(halves);
  }
};
// The two super-blocks' F16 scales at d (lanes 0-7, 8-15; a partial group has only the first).
template <bool kPartial>
__m512 SuperBlockLanes(const uint16_t* d) {
  const __m512i lanes = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m128 both = _mm_cvtph_ps(_mm_maskz_loadu_epi16(kPartial ? 1 : 3, d));
  return _mm512_permutexvar_ps(lanes, _mm512_castps128_ps512(both));
}

struct KQuantScales {  // Q4_K: d * scale_j and dmin * min_j of 32-value sub-blocks, 8 to a super-block
  static constexpr bool kHasMins = true;
  static constexpr bool kCompact = false;
  static constexpr int kParts = 1;
  template <bool kPartial>
  static void Load(const PackedRows& w, int r, int64_t g, int num_blocks, int, __m512* scale, __m512* min) {
    // [u8 scale[num_blocks]][u8 min[num_blocks]][F16 d[num_blocks / 8]][F16 dmin[num_blocks / 8]]
    const uint8_t* p = w.scales + r * w.scales_stride;
    const __mmask16 mask = kPartial ? static_cast<__mmask16>((1u << num_blocks) - 1) : 0xffff;
    const __m512 sc = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, p + g * 16)));
    const __m512 mn = _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_maskz_loadu_epi8(mask, p + w.num_blocks + g * 16)));
    const uint16_t* d = reinterpret_cast<const uint16_t*>(p + 2 * w.num_blocks) + 2 * g;
    *scale = _mm512_mul_ps(SuperBlockLanes<kPartial>(d), sc);  // exact: 11 bits of d times 6 of the scale
    *min = _mm512_mul_ps(SuperBlockLanes<kPartial>(d + w.num_blocks / 8), mn);
  }
};
struct Q6KScales {  // Q6_K: d * scale of each 16-value half of a 32-value block
  static constexpr bool kHasMins = false;
  static constexpr bool kCompact = false;
  static constexpr int kParts = 2;
  template <bool kPartial>
  static void Load(const PackedRows& w, int r, int64_t g, int num_blocks, int part, __m512* scale, __m512*) {
    // [i8 scale of the first halves[num_blocks]][i8 ... second halves[num_blocks]][F16 d[num_blocks / 8]]
    const uint8_t* p = w.scales + r * w.scales_stride;
    const __mmask16 mask = kPartial ? static_cast<__mmask16>((1u << num_blocks) - 1) : 0xffff;
    const __m512 sc =
        _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(mask, p + part * w.num_blocks + g * 16)));
    const uint16_t* d = reinterpret_cast<const uint16_t*>(p + 2 * w.num_blocks) + 2 * g;
    *scale = _mm512_mul_ps(SuperBlockLanes<kPartial>(d), sc);  // exact: 11 bits of d times 8 of the scale
  }
};

const int32_t* OffsetSums(const ActivationGroup& x, int part) {
  return part == 0 ? x.offset_sums : x.offset_sums_high;
}

// acc += float(sums) * (scale * d_x) [- min * min_sums]
template <class Scales>
__m512 AddGroup(__m512 acc, __m512i sums, __m512 scale, __m512 min, const ActivationGroup& x) {
  acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(scale, _mm512_load_ps(x.d)), acc);
  if constexpr (Scales::kHasMins) acc = _mm512_fnmadd_ps(min, _mm512_load_ps(x.min_sums), acc);
  return acc;
}

// Group g of R rows and T tokens into acc: exact integer sums, one lane per block,
// sum(u * x) - offset * sum(x); then AddGroup.
template <class Rows, class Scales, int R, int T, bool kPartial>
void TileGroup(const PackedRows& w, const ActivationGroup* const* x, int64_t g, __m512 (&acc)[R][T]) {
  const int num_blocks = kPartial ? w.partial_blocks : 16, width = 4 * num_blocks;
  constexpr int kVectors = 8 / Scales::kParts;
  for (int part = 0; part < Scales::kParts; ++part) {
    __m512i sums[R][T];
    for (int r = 0; r < R; ++r) {
      for (int t = 0; t < T; ++t) sums[r][t] = _mm512_load_si512(OffsetSums(x[t][g], part));
    }
    for (int j = part * kVectors; j < (part + 1) * kVectors; ++j) {
      __m512i xv[T];
      for (int t = 0; t < T; ++t) xv[t] = _mm512_load_si512(x[t][g].q + j * 64);
      for (int r = 0; r < R; ++r) {
        const __m512i wv =
            Rows::template Load<kPartial>(w.rows + r * w.row_stride + g * Rows::kGroupBytes, j, width);
        for (int t = 0; t < T; ++t) sums[r][t] = _mm512_dpbusd_epi32(sums[r][t], wv, xv[t]);
      }
    }
    for (int r = 0; r < R; ++r) {
      __m512 scale, min = _mm512_setzero_ps();
      Scales::template Load<kPartial>(w, r, g, num_blocks, part, &scale, &min);
      for (int t = 0; t < T; ++t) acc[r][t] = AddGroup<Scales>(acc[r][t], sums[r][t], scale, min, x[t][g]);
    }
  }
}

// A compact group's weight scales (and mins) in its dword lanes: lane j nb + b gets
// block b's. (Only 32-value formats have compact groups: a k-quant row's partial
// group is whole super-blocks, 8 blocks at least.)
template <class Scales>
void LoadCompactScales(const PackedRows& w, int r, int64_t g, int nb, __m512* scale, __m512* min) {
  const __m512i d = _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
  // d % nb, for nb = 1 or 2
  const __m512i block = nb == 1 ? _mm512_setzero_si512() : _mm512_and_si512(d, _mm512_set1_epi32(1));
  __m512 s0, m0 = _mm512_setzero_ps();
  Scales::template Load<true>(w, r, g, nb, 0, &s0, &m0);
  *scale = _mm512_permutexvar_ps(block, s0);
  *min = _mm512_permutexvar_ps(block, m0);
}

template <class Scales>
bool Compact(const PackedRows& w) {
  return Scales::kCompact && w.partial_blocks > 0 && w.partial_blocks <= kCompactBlocks;
}

template <class Rows, class Scales, int R, int T>
void TileGroupCompact(const PackedRows& w, const ActivationGroup* const* x, int64_t g, __m512 (&acc)[R][T]) {
  const int nb = w.partial_blocks;
  __m512i xv[T];
  for (int t = 0; t < T; ++t) xv[t] = _mm512_load_si512(x[t][g].q);
  for (int r = 0; r < R; ++r) {
    const __m512i wv = Rows::LoadCompact(w.rows + r * w.row_stride + g * Rows::kGroupBytes, nb);
    __m512 scale, min;
    LoadCompactScales<Scales>(w, r, g, nb, &scale, &min);
    for (int t = 0; t < T; ++t) {
      const __m512i sums = _mm512_dpbusd_epi32(_mm512_load_si512(x[t][g].offset_sums), wv, xv[t]);
      acc[r][t] = AddGroup<Scales>(acc[r][t], sums, scale, min, x[t][g]);
    }
  }
}

// y[t * y_stride + r] = the lanes of acc[r][t] summed (ReduceLanes), four rows at once.
template <int R, int T>
void StoreTile(__m512 (&acc)[R][T], float* y, int64_t y_stride) {
  for (int t = 0; t < T; ++t) {
    int r = 0;
    for (; r + 4 <= R; r += 4) {
      ReduceLanes4(acc[r][t], acc[r + 1][t], acc[r + 2][t], acc[r + 3][t], y + t * y_stride + r);
    }
    for (; r < R; ++r) y[t * y_stride + r] = ReduceLanes(acc[r][t]);
  }
}

template <class Rows, class Scales, int R, int T>
void Tile(const PackedRows& w, const ActivationGroup* tokens, int64_t token_stride, float* y, int64_t y_stride) {
  const ActivationGroup* x[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const ActivationGroup*>(reinterpret_cast<const uint8_t*>(tokens) + t * token_stride);
  }
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < w.num_full_groups; ++g) TileGroup<Rows, Scales, R, T, false>(w, x, g, acc);
  if (Compact<Scales>(w)) {
    if constexpr (Scales::kCompact) TileGroupCompact<Rows, Scales, R, T>(w, x, w.num_full_groups, acc);
  } else if (w.partial_blocks > 0) {
    TileGroup<Rows, Scales, R, T, true>(w, x, w.num_full_groups, acc);
  }
  StoreTile<R, T>(acc, y, y_stride);
}

// One token (decode). The weights stream from memory once per token, so the row
// is the unit: one row's groups one after another, its bytes read in address order
// (rows are contiguous, so a tile is one sequential stream), the lines kPrefetchBytes
// ahead asked for as each group is read. Reading 8 rows side by side instead (one
// group of each in turn) left the hardware prefetcher behind: decode_matmul, [8192 x
// 2048] from DRAM, 2 threads, A B A B: Q8_0 15.5 -> 17.2 GB/s, Q4_0 11.6 -> 17.6,
// Q4_K 10.1 -> 15.4, Q6_K 6.0 -> 15.1. Within a row, four chains of vpdpbusd (a
// chain takes vectors j and j + 4 of a 32-value format, so a nibble slice is loaded
// once for both halves; one vector each of a Q6_K part). The integer sums are exact
// in any order, so the result is Tile's, bit for bit.
using x86::kPrefetchBytes;


template <class Rows, class Scales, bool kPartial>
void OneRowGroup(const PackedRows& w, const ActivationGroup& x, int64_t g, __m512& acc) {
  const int num_blocks = kPartial ? w.partial_blocks : 16, width = 4 * num_blocks;
  const uint8_t* group = w.rows + g * Rows::kGroupBytes;
  // A partial group too: qwen2-0.5b's 896-wide rows have 12 of their 28 blocks there.
  x86::PrefetchGroupAhead(group, Rows::kGroupBytes, w.scales + g * 32);
  constexpr int kVectors = 8 / Scales::kParts;
#pragma GCC unroll 2
  for (int part = 0; part < Scales::kParts; ++part) {
    __m512i chain[4] = {_mm512_load_si512(OffsetSums(x, part)), _mm512_setzero_si512(), _mm512_setzero_si512(),
                        _mm512_setzero_si512()};
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) {
      const int j = part * kVectors + i;
      chain[i % 4] = _mm512_dpbusd_epi32(chain[i % 4], Rows::template Load<kPartial>(group, j, width),
                                         _mm512_load_si512(x.q + j * 64));
    }
    const __m512i sums = _mm512_add_epi32(_mm512_add_epi32(chain[0], chain[1]), _mm512_add_epi32(chain[2], chain[3]));
    __m512 scale, min = _mm512_setzero_ps();
    Scales::template Load<kPartial>(w, 0, g, num_blocks, part, &scale, &min);
    acc = AddGroup<Scales>(acc, sums, scale, min, x);
  }
}

template <class Rows, class Scales>
void OneTokenRow(const PackedRows& w, const ActivationGroup* x, float* y) {
  __m512 acc = _mm512_setzero_ps();
  for (int64_t g = 0; g < w.num_full_groups; ++g) OneRowGroup<Rows, Scales, false>(w, x[g], g, acc);
  if (!Compact<Scales>(w) && w.partial_blocks > 0) {
    OneRowGroup<Rows, Scales, true>(w, x[w.num_full_groups], w.num_full_groups, acc);
  }
  if constexpr (Scales::kCompact) {
    if (Compact<Scales>(w)) {
      __m512 tile_acc[1][1] = {{acc}};
      const ActivationGroup* tokens[1] = {x};
      TileGroupCompact<Rows, Scales, 1, 1>(w, tokens, w.num_full_groups, tile_acc);
      acc = tile_acc[0][0];
    }
  }
  *y = ReduceLanes(acc);
}

// A few tokens (a decode step of a few sequences): still bound by reading the
// weights, so a row at a time as for one token (its groups in address order,
// prefetched), every token's chain taking each weight vector once. Per token the
// operations are Tile's, so the results are too, bit for bit.
template <class Rows, class Scales, int T, bool kPartial>
void RowTokensGroup(const PackedRows& w, const ActivationGroup* const* x, int64_t g, __m512 (&acc)[1][T]) {
  const int num_blocks = kPartial ? w.partial_blocks : 16, width = 4 * num_blocks;
  const uint8_t* group = w.rows + g * Rows::kGroupBytes;
  // A partial group too: qwen2-0.5b's 896-wide rows have 12 of their 28 blocks there.
  x86::PrefetchGroupAhead(group, Rows::kGroupBytes, w.scales + g * 32);
  constexpr int kVectors = 8 / Scales::kParts;
  for (int part = 0; part < Scales::kParts; ++part) {
    __m512i sums[T];
    for (int t = 0; t < T; ++t) sums[t] = _mm512_load_si512(OffsetSums(x[t][g], part));
#pragma GCC unroll 8
    for (int i = 0; i < kVectors; ++i) {
      const int j = part * kVectors + i;
      const __m512i wv = Rows::template Load<kPartial>(group, j, width);
      for (int t = 0; t < T; ++t) sums[t] = _mm512_dpbusd_epi32(sums[t], wv, _mm512_load_si512(x[t][g].q + j * 64));
    }
    __m512 scale, min = _mm512_setzero_ps();
    Scales::template Load<kPartial>(w, 0, g, num_blocks, part, &scale, &min);
    for (int t = 0; t < T; ++t) acc[0][t] = AddGroup<Scales>(acc[0][t], sums[t], scale, min, x[t][g]);
  }
}

template <class Rows, class Scales, int T>
void RowTokens(const PackedRows& w, const ActivationGroup* tokens, int64_t token_stride, float* y, int64_t y_stride) {
  if constexpr (T == 1) {
    OneTokenRow<Rows, Scales>(w, tokens, y);
  } else {
    const ActivationGroup* x[T];
    for (int t = 0; t < T; ++t) {
      x[t] = reinterpret_cast<const ActivationGroup*>(reinterpret_cast<const uint8_t*>(tokens) + t * token_stride);
    }
    __m512 acc[1][T];
    for (int t = 0; t < T; ++t) acc[0][t] = _mm512_setzero_ps();
    for (int64_t g = 0; g < w.num_full_groups; ++g) RowTokensGroup<Rows, Scales, T, false>(w, x, g, acc);
    if (Compact<Scales>(w)) {
      if constexpr (Scales::kCompact) TileGroupCompact<Rows, Scales, 1, T>(w, x, w.num_full_groups, acc);
    } else if (w.partial_blocks > 0) {
      RowTokensGroup<Rows, Scales, T, true>(w, x, w.num_full_groups, acc);
    }
    for (int t = 0; t < T; ++t) y[t * y_stride] = ReduceLanes(acc[0][t]);
  }
}

using TileFn = void (*)(const PackedRows&, const ActivationGroup*, int64_t, float*, int64_t);

template <class Rows, class Scales>
void RunTile(const PackedRows& rows, int num_rows, const ActivationGroup* tokens, int64_t token_stride,
             int num_tokens, float* y, int64_t y_stride) {
  if (num_tokens != kMaxTokens || num_rows > kMaxRows) {
    static constexpr TileFn kRowFns[kRowTokens] = {
        RowTokens<Rows, Scales, 1>, RowTokens<Rows, Scales, 2>, RowTokens<Rows, Scales, 3>, RowTokens<Rows, Scales, 4>,
        RowTokens<Rows, Scales, 5>, RowTokens<Rows, Scales, 6>, RowTokens<Rows, Scales, 7>, RowTokens<Rows, Scales, 8>,
    };
    PackedRows row = rows;
    for (int r = 0; r < num_rows; ++r) {
      kRowFns[num_tokens - 1](row, tokens, token_stride, y + r, y_stride);
      row.rows += row.row_stride;
      row.scales += row.scales_stride;
    }
    return;
  }
  // The register tile: up to 4 rows x 3 tokens.
  static constexpr TileFn kTiles[kMaxRows] = {Tile<Rows, Scales, 1, kMaxTokens>, Tile<Rows, Scales, 2, kMaxTokens>,
                                              Tile<Rows, Scales, 3, kMaxTokens>, Tile<Rows, Scales, 4, kMaxTokens>};
  kTiles[num_rows - 1](rows, tokens, token_stride, y, y_stride);
}

// F16 panels (kernels/packed_matrix.h: 32 rows a panel, value k of its rows at
// [k][32]) times F32 tokens: V vectors of 16 rows (2 a panel; V = 4 takes two
// consecutive panels) by T tokens of accumulators, each (row, token) one chain of
// fma in k order from zero, stored as it is: the same operations in every tile.
// Per k: V conversions of 16 weights, T broadcast activations, V x T fma.
template <int V, int T>
void PanelTileF16(const uint16_t* panels, int64_t cols, int num_rows, const float* x, int64_t x_stride, float* y,
                  int64_t y_stride) {
  // Few tokens (a decode step) stream the panels from memory: ask for them ahead.
  constexpr bool kPrefetch = T <= 4;
  constexpr int64_t kAhead = kPrefetchBytes / 2;  // values of k ahead: 64 bytes each
  const int64_t panel_values = cols * kF16PanelRows;
  __m512 acc[V][T];
  for (int v = 0; v < V; ++v) {
    for (int t = 0; t < T; ++t) acc[v][t] = _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < cols; ++k) {
    __m512 wv[V];
    for (int v = 0; v < V; ++v) {
      const uint16_t* p = panels + (v / 2) * panel_values + k * kF16PanelRows + (v % 2) * 16;
      if constexpr (kPrefetch) {
        if (v % 2 == 0) _mm_prefetch(reinterpret_cast<const char*>(p + kAhead), _MM_HINT_T0);
      }
      wv[v] = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(p)));
    }
    for (int t = 0; t < T; ++t) {
      const __m512 xt = _mm512_set1_ps(x[t * x_stride + k]);
      for (int v = 0; v < V; ++v) acc[v][t] = _mm512_fmadd_ps(wv[v], xt, acc[v][t]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const int rows = num_rows - 16 * v;
    if (rows <= 0) break;
    const __mmask16 mask = rows >= 16 ? 0xffff : static_cast<__mmask16>((1u << rows) - 1);
    for (int t = 0; t < T; ++t) _mm512_mask_storeu_ps(y + t * y_stride + 16 * v, mask, acc[v][t]);
  }
}

using PanelTileF16Fn = void (*)(const uint16_t*, int64_t, int, const float*, int64_t, float*, int64_t);

}  // namespace

void DotPanelsF16(const uint16_t* panels, int num_panels, int64_t cols, int num_rows, const float* x,
                  int64_t x_stride, int num_tokens, float* y, int64_t y_stride) {
  static constexpr PanelTileF16Fn kOnePanel[kF16PanelTokens] = {
      PanelTileF16<2, 1>, PanelTileF16<2, 2>, PanelTileF16<2, 3>,  PanelTileF16<2, 4>,
      PanelTileF16<2, 5>, PanelTileF16<2, 6>, PanelTileF16<2, 7>,  PanelTileF16<2, 8>,
      PanelTileF16<2, 9>, PanelTileF16<2, 10>, PanelTileF16<2, 11>, PanelTileF16<2, 12>,
  };
  static constexpr PanelTileF16Fn kTwoPanels[kF16PanelPairTokens] = {
      PanelTileF16<4, 1>, PanelTileF16<4, 2>, PanelTileF16<4, 3>,
      PanelTileF16<4, 4>, PanelTileF16<4, 5>, PanelTileF16<4, 6>,
  };
  (num_panels == 2 ? kTwoPanels : kOnePanel)[num_tokens - 1](panels, cols, num_rows, x, x_stride, y, y_stride);
}

void DotTile(PackedFormat format, bool bytes, const PackedRows& rows, int num_rows, const ActivationGroup* tokens,
             int64_t token_stride, int num_tokens, float* y, int64_t y_stride) {
  if (format == PackedFormat::kQ6_K) {
    (bytes ? RunTile<Q8Rows, Q6KScales> : RunTile<Q6Rows, Q6KScales>)(rows, num_rows, tokens, token_stride,
                                                                      num_tokens, y, y_stride);
    return;
  }
  if (format == PackedFormat::kQ5_0) {
    (bytes ? RunTile<Q8Rows, BlockScales> : RunTile<Q5Rows, BlockScales>)(rows, num_rows, tokens, token_stride,
                                                                          num_tokens, y, y_stride);
    return;
  }
  if (format == PackedFormat::kQ4_K) {
    (bytes ? RunTile<Q8Rows, KQuantScales> : RunTile<Q4Rows, KQuantScales>)(rows, num_rows, tokens, token_stride,
                                                                             num_tokens, y, y_stride);
    return;
  }
  (bytes ? RunTile<Q8Rows, BlockScales> : RunTile<Q4Rows, BlockScales>)(rows, num_rows, tokens, token_stride,
                                                                        num_tokens, y, y_stride);
}

namespace {

template <class Rows>
void ExpandWith(const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride) {
  for (int r = 0; r < num_rows; ++r) {
    const uint8_t* in = rows.rows + r * rows.row_stride;
    uint8_t* o = out + r * out_stride;
    for (int64_t g = 0; g < rows.num_full_groups; ++g) {
      for (int j = 0; j < 8; ++j) {
        _mm512_store_si512(o + g * 512 + j * 64, Rows::template Load<false>(in + g * Rows::kGroupBytes, j, 64));
      }
    }
    const int nb = rows.partial_blocks;
    if (nb > 0 && nb <= kCompactBlocks) {  // vector j at 4 nb j: the compact layout already
      if constexpr (Rows::kHasCompact) {
        _mm512_mask_storeu_epi8(o + rows.num_full_groups * 512, (~0ull) >> (64 - 32 * nb),
                                Rows::LoadCompact(in + rows.num_full_groups * Rows::kGroupBytes, nb));
      }
    } else if (nb > 0) {
      const int width = 4 * rows.partial_blocks;
      const uint8_t* group = in + rows.num_full_groups * Rows::kGroupBytes;
      uint8_t* expanded = o + rows.num_full_groups * 512;
      for (int j = 0; j < 8; ++j) {
        _mm512_mask_storeu_epi8(expanded + j * width, (~0ull) >> (64 - width), Rows::template Load<true>(group, j, width));
      }
    }
  }
}

}  // namespace

void ExpandRows(PackedFormat format, const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride) {
  (format == PackedFormat::kQ5_0   ? ExpandWith<Q5Rows>
   : format == PackedFormat::kQ6_K ? ExpandWith<Q6Rows>
                                   : ExpandWith<Q4Rows>)(rows, num_rows, out, out_stride);
}

}  // namespace tachyon::avx512
