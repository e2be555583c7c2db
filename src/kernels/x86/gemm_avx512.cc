// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mfma -mf16c
// (see kernels/CMakeLists.txt). As in dot_avx2.cc, nothing here may call an
// inline function or template shared with the rest of the code: the linker keeps
// one copy, and machines without AVX-512 could run this file's.
#include "kernels/x86/gemm_avx512.h"

#include <immintrin.h>

namespace tachyon::avx512 {
namespace {

constexpr int kMaxRows = 4;
constexpr int kMaxTokens = 3;
constexpr int kMaxRowsOneToken = 8;

// The 16 lanes summed in one fixed order.
float ReduceLanes(__m512 v) {
  __m256 half = _mm256_add_ps(_mm512_castps512_ps256(v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
  __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  quarter = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
  quarter = _mm_add_ss(quarter, _mm_movehdup_ps(quarter));
  return _mm_cvtss_f32(quarter);
}

// Vector j (0..7) of a group whose vectors are `width` bytes (64, or 4 per block
// in a row's last, partial group: then only its first `width` bytes are read).
template <bool kPartial>
__m512i LoadVector(const uint8_t* p, int width) {
  if constexpr (kPartial) return _mm512_maskz_loadu_epi8((~0ull) >> (64 - width), p);
  return _mm512_load_si512(p);
}
struct Q8Rows {
  static constexpr int64_t kGroupBytes = 512;
  template <bool kPartial>
  static __m512i Load(const uint8_t* group, int j, int width) {
    return LoadVector<kPartial>(group + j * width, width);
  }
};
struct Q4Rows {
  static constexpr int64_t kGroupBytes = 256;
  // Slice j % 4 holds vector j in its low nibbles and vector j + 4 in its high ones.
  template <bool kPartial>
  static __m512i Load(const uint8_t* group, int j, int width) {
    const __m512i slice = LoadVector<kPartial>(group + (j & 3) * width, width);
    const __m512i nibbles = j < 4 ? slice : _mm512_srli_epi16(slice, 4);
    return _mm512_and_si512(nibbles, _mm512_set1_epi8(0x0f));
  }
};

// The 16 weight scales of group g of a row's scales (0 past a partial group's blocks).
template <bool kPartial>
__m512 LoadScales(const uint8_t* row, int64_t g, int num_blocks) {
  const uint16_t* d = reinterpret_cast<const uint16_t*>(row) + g * 16;
  const __m256i halves = kPartial ? _mm256_maskz_loadu_epi16(static_cast<__mmask16>((1u << num_blocks) - 1), d)
                                  : _mm256_loadu_si256(reinterpret_cast<const __m256i*>(d));
  return _mm512_cvtph_ps(halves);
}

// Group g of R rows and T tokens into acc: exact integer sums, one lane per block,
// sum(u * x) - offset * sum(x); then acc += float(sums) * (d_w * d_x).
template <class Rows, int R, int T, bool kPartial>
void TileGroup(const PackedRows& w, const ActivationGroup* const* x, int64_t g, __m512 (&acc)[R][T]) {
  const int num_blocks = kPartial ? w.partial_blocks : 16, width = 4 * num_blocks;
  __m512i sums[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) sums[r][t] = _mm512_load_si512(x[t][g].offset_sums);
  }
  for (int j = 0; j < 8; ++j) {
    __m512i xv[T];
    for (int t = 0; t < T; ++t) xv[t] = _mm512_load_si512(x[t][g].q + j * 64);
    for (int r = 0; r < R; ++r) {
      const __m512i wv = Rows::template Load<kPartial>(w.rows + r * w.row_stride + g * Rows::kGroupBytes, j, width);
      for (int t = 0; t < T; ++t) sums[r][t] = _mm512_dpbusd_epi32(sums[r][t], wv, xv[t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    const __m512 dw = LoadScales<kPartial>(w.scales + r * w.scales_stride, g, num_blocks);
    for (int t = 0; t < T; ++t) {
      const __m512 scale = _mm512_mul_ps(dw, _mm512_load_ps(x[t][g].d));
      acc[r][t] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums[r][t]), scale, acc[r][t]);
    }
  }
}

template <class Rows, int R, int T>
void Tile(const PackedRows& w, const ActivationGroup* tokens, int64_t token_stride, float* y, int64_t y_stride) {
  const ActivationGroup* x[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const ActivationGroup*>(reinterpret_cast<const uint8_t*>(tokens) + t * token_stride);
  }
  __m512 acc[R][T];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < w.num_full_groups; ++g) TileGroup<Rows, R, T, false>(w, x, g, acc);
  if (w.partial_blocks > 0) TileGroup<Rows, R, T, true>(w, x, w.num_full_groups, acc);
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) y[t * y_stride + r] = ReduceLanes(acc[r][t]);
  }
}

// One token (decode): the rows' sums are latency-bound chains of vpdpbusd, so up to
// 8 rows at a time, each in two chains (even and odd vectors) added at the end of a
// group. The integer sums are exact either way: the result is Tile's, bit for bit.
template <class Rows, int R, bool kPartial>
void OneTokenGroup(const PackedRows& w, const ActivationGroup* x, int64_t g, __m512 (&acc)[R]) {
  const int num_blocks = kPartial ? w.partial_blocks : 16, width = 4 * num_blocks;
  __m512i even[R], odd[R];
  for (int r = 0; r < R; ++r) {
    even[r] = _mm512_load_si512(x[g].offset_sums);
    odd[r] = _mm512_setzero_si512();
  }
  for (int j = 0; j < 8; j += 2) {
    const __m512i x0 = _mm512_load_si512(x[g].q + j * 64), x1 = _mm512_load_si512(x[g].q + j * 64 + 64);
    for (int r = 0; r < R; ++r) {
      const uint8_t* group = w.rows + r * w.row_stride + g * Rows::kGroupBytes;
      even[r] = _mm512_dpbusd_epi32(even[r], Rows::template Load<kPartial>(group, j, width), x0);
      odd[r] = _mm512_dpbusd_epi32(odd[r], Rows::template Load<kPartial>(group, j + 1, width), x1);
    }
  }
  const __m512 dx = _mm512_load_ps(x[g].d);
  for (int r = 0; r < R; ++r) {
    const __m512 dw = LoadScales<kPartial>(w.scales + r * w.scales_stride, g, num_blocks);
    const __m512i sums = _mm512_add_epi32(even[r], odd[r]);
    acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(sums), _mm512_mul_ps(dw, dx), acc[r]);
  }
}

template <class Rows, int R>
void TileOneToken(const PackedRows& w, const ActivationGroup* x, float* y) {
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g < w.num_full_groups; ++g) OneTokenGroup<Rows, R, false>(w, x, g, acc);
  if (w.partial_blocks > 0) OneTokenGroup<Rows, R, true>(w, x, w.num_full_groups, acc);
  for (int r = 0; r < R; ++r) y[r] = ReduceLanes(acc[r]);
}

using TileFn = void (*)(const PackedRows&, const ActivationGroup*, int64_t, float*, int64_t);

template <class Rows>
TileFn FindTile(int r, int t) {
  static constexpr TileFn kTiles[kMaxRows][kMaxTokens] = {
      {Tile<Rows, 1, 1>, Tile<Rows, 1, 2>, Tile<Rows, 1, 3>},
      {Tile<Rows, 2, 1>, Tile<Rows, 2, 2>, Tile<Rows, 2, 3>},
      {Tile<Rows, 3, 1>, Tile<Rows, 3, 2>, Tile<Rows, 3, 3>},
      {Tile<Rows, 4, 1>, Tile<Rows, 4, 2>, Tile<Rows, 4, 3>},
  };
  return kTiles[r - 1][t - 1];
}

}  // namespace

void DotTile(PackedFormat format, const PackedRows& rows, int num_rows, const ActivationGroup* tokens,
             int64_t token_stride, int num_tokens, float* y, int64_t y_stride) {
  const bool q8 = format == PackedFormat::kQ8_0;
  if (num_tokens == 1 && num_rows == kMaxRowsOneToken) {
    (q8 ? TileOneToken<Q8Rows, kMaxRowsOneToken> : TileOneToken<Q4Rows, kMaxRowsOneToken>)(rows, tokens, y);
    return;
  }
  (q8 ? FindTile<Q8Rows>(num_rows, num_tokens) : FindTile<Q4Rows>(num_rows, num_tokens))(rows, tokens, token_stride,
                                                                                         y, y_stride);
}

void ExpandQ4Rows(const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride) {
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (int r = 0; r < num_rows; ++r) {
    const uint8_t* in = rows.rows + r * rows.row_stride;
    uint8_t* o = out + r * out_stride;
    for (int64_t g = 0; g < rows.num_full_groups; ++g) {
      for (int s = 0; s < 4; ++s) {
        const __m512i slice = _mm512_load_si512(in + g * 256 + s * 64);
        _mm512_store_si512(o + g * 512 + s * 64, _mm512_and_si512(slice, low));
        _mm512_store_si512(o + g * 512 + (s + 4) * 64, _mm512_and_si512(_mm512_srli_epi16(slice, 4), low));
      }
    }
    if (rows.partial_blocks > 0) {
      const int width = 4 * rows.partial_blocks;
      const __mmask64 mask = (~0ull) >> (64 - width);
      const uint8_t* group = in + rows.num_full_groups * 256;
      uint8_t* expanded = o + rows.num_full_groups * 512;
      for (int s = 0; s < 4; ++s) {
        const __m512i slice = _mm512_maskz_loadu_epi8(mask, group + s * width);
        _mm512_mask_storeu_epi8(expanded + s * width, mask, _mm512_and_si512(slice, low));
        _mm512_mask_storeu_epi8(expanded + (s + 4) * width, mask, _mm512_and_si512(_mm512_srli_epi16(slice, 4), low));
      }
    }
  }
}

}  // namespace tachyon::avx512
