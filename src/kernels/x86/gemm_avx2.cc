// Compiled with -mavx2 -mfma -mf16c -ffp-contract=off (see
// kernels/CMakeLists.txt). As in dot_avx2.cc, nothing here may call an inline
// function or template shared with the rest of the code: the linker keeps one
// copy, and machines without AVX2 could run this file's.
#include "kernels/x86/gemm_avx2.h"

#include <immintrin.h>

#include "kernels/x86/packed_prefetch.h"

namespace tachyon::avx2 {
namespace {

// The register tile: 2 rows x 3 tokens (avx512's is 4 x 3: AVX2 has half the
// registers).
constexpr int kTileRows = 2;
constexpr int kTileTokens = 3;
constexpr int kMaxTileRows = 4;  // a DotTile call's rows in the register tile (avx512's kMaxRows)

// avx512's ReduceLanes of the 16 lanes lo | hi: the same additions in the same
// order.
float ReduceHalves(__m256 lo, __m256 hi) {
  const __m256 half = _mm256_add_ps(lo, hi);
  __m128 quarter = _mm_add_ps(_mm256_castps256_ps128(half), _mm256_extractf128_ps(half, 1));
  quarter = _mm_add_ps(quarter, _mm_movehl_ps(quarter, quarter));
  quarter = _mm_add_ss(quarter, _mm_movehdup_ps(quarter));
  return _mm_cvtss_f32(quarter);
}

// A mask of the first n (0..8) dwords.
__m256i FirstDwords(int n) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

// Half h (lanes 8h..8h+7) of a group's vector at p. A partial group of nb
// blocks has only nb lanes (4 bytes each); the half is read whole all the same
// (the caller skips a half with no lane): its lanes past nb hold what follows
// (the next vector, the scales, the row's padding or the matrix's slack, see
// packed_matrix.h), and the activations' lanes there are zero, so they add
// nothing to any sum. A masked load (vpmaskmovd) costs several times a plain one
// on AMD's cores, and a 12-block partial group is 43% of a 896-wide row.
template <bool kPartial>
__m256i LoadHalf(const uint8_t* p, int h) {
  if constexpr (!kPartial) return _mm256_load_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * h));
}

// Byte i of the result: `value` where bit i of m is set, else 0.
__m256i ExpandBits(uint32_t m, __m256i value) {
  const __m256i which_byte = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,  //
                                              2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
  const __m256i bit = _mm256_set1_epi64x(static_cast<int64_t>(0x8040201008040201ull));
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(m)), which_byte);
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), value);
}

__m256i LowNibbles(__m256i v) { return _mm256_and_si256(v, _mm256_set1_epi8(0x0f)); }
__m256i HighNibbles(__m256i v) { return LowNibbles(_mm256_srli_epi16(v, 4)); }

// The rows' quants (kernels/packed_matrix.h), half h of vector j of a group; a
// compact group's half h.
struct Q8Rows {
  static constexpr bool kHasCompact = true;
  static constexpr int64_t kGroupBytes = 512;
  static __m256i LoadCompact(const uint8_t* group, int, int h) {
    return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group + 32 * h));
  }
  template <bool kPartial>
  static __m256i Load(const uint8_t* group, int j, int h, int width, int) {
    return LoadHalf<kPartial>(group + j * width, h);
  }
};
struct Q4Rows {
  static constexpr bool kHasCompact = true;
  static constexpr int64_t kGroupBytes = 256;
  // Compact: 16 nb bytes of slices, their low nibbles dwords 0..4nb-1, high
  // ones 4nb..8nb-1.
  static __m256i LoadCompact(const uint8_t* group, int nb, int h) {
    if (nb == 1) {
      const __m128i s = _mm_loadu_si128(reinterpret_cast<const __m128i*>(group));
      const __m128i low = _mm_set1_epi8(0x0f);
      return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(s, 4), low), _mm_and_si128(s, low));
    }
    const __m256i s = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(group));
    return h == 0 ? LowNibbles(s) : HighNibbles(s);
  }
  // Slice j % 4 holds vector j in its low nibbles and vector j + 4 in its high
  // ones.
  template <bool kPartial>
  static __m256i Load(const uint8_t* group, int j, int h, int width, int) {
    const __m256i slice = LoadHalf<kPartial>(group + (j & 3) * width, h);
    return j < 4 ? LowNibbles(slice) : HighNibbles(slice);
  }
};
struct Q5Rows {
  static constexpr bool kHasCompact = true;
  static constexpr int64_t kGroupBytes = 320;
  static __m256i LoadCompact(const uint8_t* group, int nb, int h) {
    const uint64_t bits = CompactPartialMask(group + 16 * nb, nb);
    return _mm256_or_si256(Q4Rows::LoadCompact(group, nb, h),
                           ExpandBits(static_cast<uint32_t>(bits >> (32 * h)), _mm256_set1_epi8(0x10)));
  }
  // Q4_0's nibbles, then 8 masks of 64 bits: bit 4 b + k of mask j is the fifth
  // bit of lane b's byte k of vector j.
  template <bool kPartial>
  static __m256i Load(const uint8_t* group, int j, int h, int width, int nb) {
    uint64_t bits;
    __builtin_memcpy(&bits, group + 4 * width + 8 * j, sizeof(bits));
    return _mm256_or_si256(Q4Rows::Load<kPartial>(group, j, h, width, nb),
                           ExpandBits(static_cast<uint32_t>(bits >> (32 * h)), _mm256_set1_epi8(0x10)));
  }
};
struct Q6Rows {  // k-quant rows: never a compact group
  static constexpr bool kHasCompact = false;
  static constexpr int64_t kGroupBytes = 384;
  static __m256i LoadCompact(const uint8_t*, int, int) { return _mm256_setzero_si256(); }
  // Q4_0's nibbles (the low 4 bits), then the high 2 bits as the AVX2 packing lays
  // them out (kernels/packed_matrix.h): 16 bytes a vector j, byte c holding those of
  // the vector's bytes c, c + 16, c + 32 and c + 48 at bits 0-1, 2-3, 4-5 and 6-7.
  // Half h's low 128 bits take shift 4 h, its high ones 4 h + 2.
  template <bool kPartial>
  static __m256i Load(const uint8_t* group, int j, int h, int width, int nb) {
    const __m256i crumbs =
        _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 4 * width + 16 * j)));
    const __m256i shift =
        h == 0 ? _mm256_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2) : _mm256_setr_epi32(4, 4, 4, 4, 6, 6, 6, 6);
    const __m256i high = _mm256_slli_epi16(_mm256_and_si256(_mm256_srlv_epi32(crumbs, shift), _mm256_set1_epi8(3)), 4);
    return _mm256_or_si256(Q4Rows::Load<kPartial>(group, j, h, width, nb), high);
  }
};

// Half h of the weight scales of group g of row r (avx512's, 8 lanes at a
// time). A partial group's lanes past its blocks are zero.
__m256 HalfF16(const uint16_t* d, int n) {
  __m128i half = _mm_loadu_si128(reinterpret_cast<const __m128i*>(d));
  if (n < 8) {
    // The F16 past the row's last scale are whatever follows (the row's padding or
    // the matrix's slack): zeroed, or an Inf there would make 0 * Inf a NaN. A
    // scalar copy to a buffer and a vector load of it stalls on store forwarding.
    alignas(16) static constexpr uint16_t kKeep[16] = {0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff, 0xffff,
                                                       0,      0,      0,      0,      0,      0,      0,      0};
    half = _mm_and_si128(half, _mm_loadu_si128(reinterpret_cast<const __m128i*>(kKeep + 8 - n)));
  }
  return _mm256_cvtph_ps(half);
}
struct BlockScales {  // Q8_0, Q4_0, Q5_0: the block's F16 scale
  static constexpr bool kHasMins = false;
  static constexpr bool kCompact = true;
  static constexpr int kParts = 1;
  static void Load(const PackedRows& w, int r, int64_t g, int nb, int, int h, __m256* scale, __m256*) {
    const uint16_t* d = reinterpret_cast<const uint16_t*>(w.scales + r * w.scales_stride) + g * 16 + 8 * h;
    *scale = HalfF16(d, nb - 8 * h);
  }
};
// 8 bytes as floats (a k-quant group's half is a whole super-block: 8
// sub-blocks).
__m256 Unsigned8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
__m256 Signed8(const uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// Q4_K: d * scale_j and dmin * min_j of 32-value sub-blocks, 8 to a super-block.
struct KQuantScales {
  static constexpr bool kHasMins = true;
  static constexpr bool kCompact = false;
  static constexpr int kParts = 1;
  static void Load(const PackedRows& w, int r, int64_t g, int, int, int h, __m256* scale, __m256* min) {
    // [u8 scale[num_blocks]][u8 min[num_blocks]][F16 d[num_blocks / 8]][F16
    // dmin[num_blocks / 8]]
    const uint8_t* p = w.scales + r * w.scales_stride;
    const uint16_t* d = reinterpret_cast<const uint16_t*>(p + 2 * w.num_blocks) + 2 * g + h;
    *scale = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d[0])), Unsigned8(p + g * 16 + 8 * h));
    *min = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d[w.num_blocks / 8])), Unsigned8(p + w.num_blocks + g * 16 + 8 * h));
  }
};
struct Q6KScales {  // Q6_K: d * scale of each 16-value half of a 32-value block
  static constexpr bool kHasMins = false;
  static constexpr bool kCompact = false;
  static constexpr int kParts = 2;
  static void Load(const PackedRows& w, int r, int64_t g, int, int part, int h, __m256* scale, __m256*) {
    // [i8 scale of the first halves[num_blocks]][i8 ... second
    // halves[num_blocks]][F16 d[num_blocks / 8]]
    const uint8_t* p = w.scales + r * w.scales_stride;
    const uint16_t* d = reinterpret_cast<const uint16_t*>(p + 2 * w.num_blocks) + 2 * g + h;
    *scale = _mm256_mul_ps(_mm256_set1_ps(_cvtsh_ss(d[0])), Signed8(p + part * w.num_blocks + g * 16 + 8 * h));
  }
};

// Integer products of a weight half and a token's half, as int16 pairs.
// Q8_0's quants are stored q + 128, and x * (q + 128) pairs would overflow
// int16: they are turned back to q and multiplied as |q| * (x * sign q) (x is
// never -128), so a whole group's block sums need no offsets (a compact group's
// lanes do: there the AVX-512 kernel's lanes hold parts of blocks; see
// TileGroupCompact).
struct SignedBytes {
  static constexpr int kRun = 1;  // vectors summed in int16 before widening
  static constexpr bool kOffsets = false;
  struct W {
    __m256i q, abs;
  };
  static W Prepare(__m256i u) {
    const __m256i q = _mm256_xor_si256(u, _mm256_set1_epi8(static_cast<char>(0x80)));
    return {q, _mm256_abs_epi8(q)};
  }
  static __m256i Pairs(const W& w, __m256i x) { return _mm256_maddubs_epi16(w.abs, _mm256_sign_epi8(x, w.q)); }
};
// Unsigned quants u <= kMax times x (|x| <= 128): a pair is at most 2 * 128
// kMax, so 32767 / that many vectors are summed in int16 before widening.
template <int kMax>
struct UnsignedBytes {
  static constexpr int kRun = kMax <= 15 ? 8 : kMax <= 31 ? 4 : 2;
  static constexpr bool kOffsets = true;
  using W = __m256i;
  static W Prepare(__m256i u) { return u; }
  static __m256i Pairs(const W& w, __m256i x) { return _mm256_maddubs_epi16(w, x); }
};

const int32_t* OffsetSums(const ActivationGroup& x, int part) { return part == 0 ? x.offset_sums : x.offset_sums_high; }

// acc += float(sums) * (scale * d_x) [- min * min_sums], on half h's lanes.
template <class Scales>
__m256 AddGroup(__m256 acc, __m256i sums, __m256 scale, __m256 min, const ActivationGroup& x, int h) {
  acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), _mm256_mul_ps(scale, _mm256_load_ps(x.d + 8 * h)), acc);
  if constexpr (Scales::kHasMins) acc = _mm256_fnmadd_ps(min, _mm256_load_ps(x.min_sums + 8 * h), acc);
  return acc;
}


// Vector j's half h of group g: add(r, t, int16 pairs of row r times token t)
// for each of the R rows (its weights loaded and prepared once) and T tokens (a
// token's vector loaded for each row).
template <class Rows, class Dot, int R, int T, bool kPartial, class Add>
__attribute__((always_inline)) inline void ForPairs(const PackedRows& w, const ActivationGroup* const* x, int64_t g,
                                                    int j, int h, int nb, Add add) {
  for (int r = 0; r < R; ++r) {
    const typename Dot::W wv =
        Dot::Prepare(Rows::template Load<kPartial>(w.rows + r * w.row_stride + g * Rows::kGroupBytes, j, h, 4 * nb, nb));
    for (int t = 0; t < T; ++t) {
      add(r, t, Dot::Pairs(wv, _mm256_load_si256(reinterpret_cast<const __m256i*>(x[t][g].q + j * 64 + 32 * h))));
    }
  }
}

// Group g of R rows and T tokens into acc[r][t][half].
template <class Rows, class Scales, class Dot, int R, int T, bool kPartial>
void TileGroup(const PackedRows& w, const ActivationGroup* const* x, int64_t g, __m256 (&acc)[R][T][2]) {
  const int nb = kPartial ? w.partial_blocks : 16;
  const int halves = nb > 8 ? 2 : 1;
  constexpr int kVectors = 8 / Scales::kParts;
  // One row (a decode step): its groups stream from memory in address order.
  if constexpr (R == 1) {
    x86::PrefetchGroupAhead(w.rows + g * Rows::kGroupBytes, Rows::kGroupBytes, w.scales + g * 32);
  }
  const __m256i ones = _mm256_set1_epi16(1);
  for (int part = 0; part < Scales::kParts; ++part) {
    for (int h = 0; h < halves; ++h) {
      __m256i sums[R][T];
      if constexpr (Dot::kRun == 1 && !Dot::kOffsets) {
        // Q8_0: each vector's pairs widened and added to the sums at once; in the
        // register tile four vectors unrolled. Unrolled over all eight there, GCC
        // hoisted every product ahead of its add and spilled them to the stack
        // (prefill_matmul 1 2048 2048 512: 44 against 46-48 G multiply-adds/s
        // this way). A row at a time keeps the whole unroll.
        for (int r = 0; r < R; ++r) {
          for (int t = 0; t < T; ++t) sums[r][t] = _mm256_setzero_si256();
        }
        const auto add_vector = [&](int i) {
          ForPairs<Rows, Dot, R, T, kPartial>(w, x, g, part * kVectors + i, h, nb, [&](int r, int t, __m256i pairs) {
            sums[r][t] = _mm256_add_epi32(sums[r][t], _mm256_madd_epi16(pairs, ones));
          });
        };
        if constexpr (R > 1) {
#pragma GCC unroll 4
          for (int i = 0; i < kVectors; ++i) add_vector(i);
        } else {
#pragma GCC unroll 8
          for (int i = 0; i < kVectors; ++i) add_vector(i);
        }
      } else {
        // Runs of Dot::kRun vectors summed in int16, each run widened into sums
        // (the first run starts them: no sums held while it runs). A token's
        // vector is loaded for each row. In the register tile (2 rows x 3 tokens)
        // a run is unrolled by two: unrolled whole, GCC computed every product of
        // the run first and spilled them (prefill_matmul 1 2048 2048 512, best
        // rounds: Q4_0 52-53 against 67-75, Q4_K 44 against 51-54, Q5_0 55-58
        // against 66-70 G multiply-adds/s). A row at a time (decode steps, up to 8
        // tokens) keeps the whole unroll, which it runs faster (decode_matmul 1 2048
        // 2048 4: Q4_0 18-21 against 12-13 GB/s at 1 token; Q4_K 2.0-3.2 against
        // 1.2-1.3 at 8).
        static_assert(Dot::kOffsets, "unsigned quants: the activations' offset sums start the block sums");
#pragma GCC unroll 8
        for (int i0 = 0; i0 < kVectors; i0 += Dot::kRun) {
          __m256i run[R][T];
          for (int r = 0; r < R; ++r) {
            for (int t = 0; t < T; ++t) run[r][t] = _mm256_setzero_si256();
          }
          const auto add_vector = [&](int i) {
            ForPairs<Rows, Dot, R, T, kPartial>(w, x, g, part * kVectors + i, h, nb,
                                                [&](int r, int t, __m256i pairs) {
                                                  run[r][t] = _mm256_add_epi16(run[r][t], pairs);
                                                });
          };
          if constexpr (R > 1) {
#pragma GCC unroll 2
            for (int i = i0; i < i0 + Dot::kRun; ++i) add_vector(i);
          } else {
#pragma GCC unroll 8
            for (int i = i0; i < i0 + Dot::kRun; ++i) add_vector(i);
          }
          for (int r = 0; r < R; ++r) {
            for (int t = 0; t < T; ++t) {
              const __m256i widened = _mm256_madd_epi16(run[r][t], ones);
              if (i0 > 0) {
                sums[r][t] = _mm256_add_epi32(sums[r][t], widened);
              } else {
                sums[r][t] = _mm256_add_epi32(
                    _mm256_load_si256(reinterpret_cast<const __m256i*>(OffsetSums(x[t][g], part) + 8 * h)), widened);
              }
            }
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        __m256 scale, min = _mm256_setzero_ps();
        Scales::Load(w, r, g, nb, part, h, &scale, &min);
        for (int t = 0; t < T; ++t) acc[r][t][h] = AddGroup<Scales>(acc[r][t][h], sums[r][t], scale, min, x[t][g], h);
      }
    }
  }
}

// A compact last group (nb <= avx512::kCompactPartialBlocks; avx512's
// TileGroupCompact): dword j nb + b holds vector j's lane b; the scales are
// spread the same way.
template <class Rows, class Scales, class Dot, int R, int T>
void TileGroupCompact(const PackedRows& w, const ActivationGroup* const* x, int64_t g, __m256 (&acc)[R][T][2]) {
  const int nb = w.partial_blocks;
  const __m256i ones = _mm256_set1_epi16(1);
  // Lane i gets block i % nb's scale (nb = 1 or 2).
  const __m256i block = nb == 1 ? _mm256_setzero_si256() : _mm256_setr_epi32(0, 1, 0, 1, 0, 1, 0, 1);
  for (int r = 0; r < R; ++r) {
    __m256 scale, min = _mm256_setzero_ps();
    Scales::Load(w, r, g, nb, 0, 0, &scale, &min);
    scale = _mm256_permutevar8x32_ps(scale, block);
    min = _mm256_permutevar8x32_ps(min, block);
    for (int h = 0; h < nb; ++h) {
      const typename Dot::W wv =
          Dot::Prepare(Rows::LoadCompact(w.rows + r * w.row_stride + g * Rows::kGroupBytes, nb, h));
      for (int t = 0; t < T; ++t) {
        const __m256i xv = _mm256_load_si256(reinterpret_cast<const __m256i*>(x[t][g].q + 32 * h));
        __m256i sums = _mm256_madd_epi16(Dot::Pairs(wv, xv), ones);
        if constexpr (!Dot::kOffsets) {
          // A lane here is 4 values of a block, not all 32, and the offset of
          // each block sits in one lane: the lane's sum(u * x) is sum(q * x) +
          // 128 sum(x), as the AVX-512 kernel has it before adding the offsets.
          sums = _mm256_add_epi32(
              sums, _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(static_cast<char>(0x80)), xv), ones));
        }
        sums = _mm256_add_epi32(_mm256_load_si256(reinterpret_cast<const __m256i*>(x[t][g].offset_sums + 8 * h)), sums);
        acc[r][t][h] = AddGroup<Scales>(acc[r][t][h], sums, scale, min, x[t][g], h);
      }
    }
  }
}

template <class Scales>
bool Compact(const PackedRows& w) {
  return Scales::kCompact && w.partial_blocks > 0 && w.partial_blocks <= avx512::kCompactPartialBlocks;
}

// R rows x T tokens, every group; y[t * y_stride + r] = the reduced lanes.
template <class Rows, class Scales, class Dot, int R, int T>
void Tile(const PackedRows& w, const ActivationGroup* tokens, int64_t token_stride, float* y, int64_t y_stride) {
  const ActivationGroup* x[T];
  for (int t = 0; t < T; ++t) {
    x[t] = reinterpret_cast<const ActivationGroup*>(reinterpret_cast<const uint8_t*>(tokens) + t * token_stride);
  }
  __m256 acc[R][T][2];
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) acc[r][t][0] = acc[r][t][1] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < w.num_full_groups; ++g) TileGroup<Rows, Scales, Dot, R, T, false>(w, x, g, acc);
  if (Compact<Scales>(w)) {
    if constexpr (Scales::kCompact && Rows::kHasCompact) {
      TileGroupCompact<Rows, Scales, Dot, R, T>(w, x, w.num_full_groups, acc);
    }
  } else if (w.partial_blocks > 0) {
    TileGroup<Rows, Scales, Dot, R, T, true>(w, x, w.num_full_groups, acc);
  }
  for (int t = 0; t < T; ++t) {
    for (int r = 0; r < R; ++r) y[t * y_stride + r] = ReduceHalves(acc[r][t][0], acc[r][t][1]);
  }
}

using TileFn = void (*)(const PackedRows&, const ActivationGroup*, int64_t, float*, int64_t);

template <class Rows, class Scales, class Dot>
void RunTile(const PackedRows& rows, int num_rows, const ActivationGroup* tokens, int64_t token_stride, int num_tokens,
             float* y, int64_t y_stride) {
  PackedRows part = rows;
  if (num_tokens != kTileTokens || num_rows > kMaxTileRows) {
    // A row at a time, every token's chain taking each weight vector once.
    static constexpr TileFn kRowFns[avx512::kRowTokens] = {
        Tile<Rows, Scales, Dot, 1, 1>, Tile<Rows, Scales, Dot, 1, 2>, Tile<Rows, Scales, Dot, 1, 3>,
        Tile<Rows, Scales, Dot, 1, 4>, Tile<Rows, Scales, Dot, 1, 5>, Tile<Rows, Scales, Dot, 1, 6>,
        Tile<Rows, Scales, Dot, 1, 7>, Tile<Rows, Scales, Dot, 1, 8>,
    };
    for (int r = 0; r < num_rows; ++r) {
      kRowFns[num_tokens - 1](part, tokens, token_stride, y + r, y_stride);
      part.rows += part.row_stride;
      part.scales += part.scales_stride;
    }
    return;
  }
  for (int r = 0; r < num_rows; r += kTileRows) {
    const int nr = num_rows - r < kTileRows ? num_rows - r : kTileRows;
    (nr == 2 ? Tile<Rows, Scales, Dot, 2, kTileTokens>
             : Tile<Rows, Scales, Dot, 1, kTileTokens>)(part, tokens, token_stride, y + r, y_stride);
    part.rows += nr * part.row_stride;
    part.scales += nr * part.scales_stride;
  }
}

// F16 panels: V vectors of 8 rows (vector i: rows 8 i..8 i + 7 of the panels,
// at value k of panel i / 4 + 8 (i % 4)) by T tokens, from vector `first`; each
// (row, token) one chain of fma in k order from zero, as avx512's PanelTileF16.
// No software prefetch: with _mm_prefetch (or an asm prefetch) in the loop GCC
// kept acc in memory and stored all of it every k; each vector is a sequential
// stream anyway.
template <int V, int T>
void PanelTile(const uint16_t* panels, int64_t cols, int first, int num_rows, const float* x, int64_t x_stride,
               float* y, int64_t y_stride) {
  const int64_t panel_values = cols * kF16PanelRows;
  const uint16_t* p[V];
  for (int v = 0; v < V; ++v) p[v] = panels + (first + v) / 4 * panel_values + (first + v) % 4 * 8;
  __m256 acc[V][T];
  for (int v = 0; v < V; ++v) {
    for (int t = 0; t < T; ++t) acc[v][t] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < cols; ++k) {
    const int64_t at = k * kF16PanelRows;
    // Hold the T broadcast activations and convert a vector at a time, or hold the
    // V converted vectors and broadcast a token at a time: whichever is fewer.
    if constexpr (V > T) {
      __m256 xt[T];
      for (int t = 0; t < T; ++t) xt[t] = _mm256_set1_ps(x[t * x_stride + k]);
      for (int v = 0; v < V; ++v) {
        const __m256 wv = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p[v] + at)));
        for (int t = 0; t < T; ++t) acc[v][t] = _mm256_fmadd_ps(wv, xt[t], acc[v][t]);
      }
    } else {
      __m256 wv[V];
      for (int v = 0; v < V; ++v) wv[v] = _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(p[v] + at)));
      for (int t = 0; t < T; ++t) {
        const __m256 xt = _mm256_set1_ps(x[t * x_stride + k]);
        for (int v = 0; v < V; ++v) acc[v][t] = _mm256_fmadd_ps(wv[v], xt, acc[v][t]);
      }
    }
  }
  for (int v = 0; v < V; ++v) {
    const int rows = num_rows - 8 * (first + v);
    for (int t = 0; t < T; ++t) {
      float* out = y + t * y_stride + 8 * (first + v);
      if (rows >= 8) {
        _mm256_storeu_ps(out, acc[v][t]);
      } else if (rows > 0) {
        alignas(32) float lanes[8];
        _mm256_store_ps(lanes, acc[v][t]);
        for (int i = 0; i < rows; ++i) out[i] = lanes[i];
      }
    }
  }
}

using PanelTileFn = void (*)(const uint16_t*, int64_t, int, int, const float*, int64_t, float*, int64_t);

// Tokens at a time for a decode step (up to 3: V x T accumulators, V vectors)
// and for a batch (6 tokens by 2 vectors: 12 accumulators, 2 weights and a
// broadcast).
constexpr int kFewTokens = 3;
constexpr int kBatchTokens = 6;

template <class Rows>
void ExpandWith(const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride) {
  for (int r = 0; r < num_rows; ++r) {
    const uint8_t* in = rows.rows + r * rows.row_stride;
    uint8_t* o = out + r * out_stride;
    for (int64_t g = 0; g < rows.num_full_groups; ++g) {
      for (int j = 0; j < 8; ++j) {
        for (int h = 0; h < 2; ++h) {
          _mm256_store_si256(reinterpret_cast<__m256i*>(o + g * 512 + j * 64 + 32 * h),
                             Rows::template Load<false>(in + g * Rows::kGroupBytes, j, h, 64, 16));
        }
      }
    }
    const int nb = rows.partial_blocks;
    const uint8_t* group = in + rows.num_full_groups * Rows::kGroupBytes;
    uint8_t* expanded = o + rows.num_full_groups * 512;
    // A compact group is in the compact layout already: 32 nb bytes.
    if (nb > 0 && nb <= avx512::kCompactPartialBlocks) {
      if constexpr (Rows::kHasCompact) {
        for (int h = 0; h < nb; ++h) {
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(expanded + 32 * h), Rows::LoadCompact(group, nb, h));
        }
      }
    } else if (nb > 0) {
      const int width = 4 * nb;
      for (int j = 0; j < 8; ++j) {
        for (int h = 0; 8 * h < nb; ++h) {
          _mm256_maskstore_epi32(reinterpret_cast<int*>(expanded + j * width + 32 * h), FirstDwords(nb - 8 * h),
                                 Rows::template Load<true>(group, j, h, width, nb));
        }
      }
    }
  }
}

}  // namespace

void DotTile(PackedFormat format, bool bytes, const PackedRows& rows, int num_rows, const ActivationGroup* tokens,
             int64_t token_stride, int num_tokens, float* y, int64_t y_stride) {
  using Fn = void (*)(const PackedRows&, int, const ActivationGroup*, int64_t, int, float*, int64_t);
  Fn fn;
  switch (format) {
    case PackedFormat::kQ8_0: fn = RunTile<Q8Rows, BlockScales, SignedBytes>; break;
    case PackedFormat::kQ4_0:
      fn = bytes ? RunTile<Q8Rows, BlockScales, UnsignedBytes<15>> : RunTile<Q4Rows, BlockScales, UnsignedBytes<15>>;
      break;
    case PackedFormat::kQ5_0:
      fn = bytes ? RunTile<Q8Rows, BlockScales, UnsignedBytes<31>> : RunTile<Q5Rows, BlockScales, UnsignedBytes<31>>;
      break;
    case PackedFormat::kQ4_K:
      fn = bytes ? RunTile<Q8Rows, KQuantScales, UnsignedBytes<15>> : RunTile<Q4Rows, KQuantScales, UnsignedBytes<15>>;
      break;
    case PackedFormat::kQ6_K:
      fn = bytes ? RunTile<Q8Rows, Q6KScales, UnsignedBytes<63>> : RunTile<Q6Rows, Q6KScales, UnsignedBytes<63>>;
      break;
    default: return;  // F16 goes through DotPanelsF16
  }
  fn(rows, num_rows, tokens, token_stride, num_tokens, y, y_stride);
}

void DotPanelsF16(const uint16_t* panels, int num_panels, int64_t cols, int num_rows, const float* x, int64_t x_stride,
                  int num_tokens, float* y, int64_t y_stride) {
  static constexpr PanelTileFn kOneToken[8] = {PanelTile<1, 1>, PanelTile<2, 1>, PanelTile<3, 1>, PanelTile<4, 1>,
                                               PanelTile<5, 1>, PanelTile<6, 1>, PanelTile<7, 1>, PanelTile<8, 1>};
  static constexpr PanelTileFn kFew[2][4] = {{PanelTile<1, 2>, PanelTile<2, 2>, PanelTile<3, 2>, PanelTile<4, 2>},
                                             {PanelTile<1, 3>, PanelTile<2, 3>, PanelTile<3, 3>, PanelTile<4, 3>}};
  static constexpr PanelTileFn kBatch[2][kBatchTokens] = {
      {PanelTile<1, 1>, PanelTile<1, 2>, PanelTile<1, 3>, PanelTile<1, 4>, PanelTile<1, 5>, PanelTile<1, 6>},
      {PanelTile<2, 1>, PanelTile<2, 2>, PanelTile<2, 3>, PanelTile<2, 4>, PanelTile<2, 5>, PanelTile<2, 6>}};
  const int vectors_in_panels = 4 * num_panels, vectors_with_rows = (num_rows + 7) / 8;
  const int num_vectors = vectors_in_panels < vectors_with_rows ? vectors_in_panels : vectors_with_rows;
  if (num_tokens <= kFewTokens) {
    const int step = num_tokens == 1 ? 8 : 4;
    for (int first = 0; first < num_vectors; first += step) {
      const int v = num_vectors - first < step ? num_vectors - first : step;
      const PanelTileFn fn = num_tokens == 1 ? kOneToken[v - 1] : kFew[num_tokens - 2][v - 1];
      fn(panels, cols, first, num_rows, x, x_stride, y, y_stride);
    }
    return;
  }
  for (int first = 0; first < num_vectors; first += 2) {
    const int v = num_vectors - first < 2 ? 1 : 2;
    for (int t = 0; t < num_tokens; t += kBatchTokens) {
      const int nt = num_tokens - t < kBatchTokens ? num_tokens - t : kBatchTokens;
      kBatch[v - 1][nt - 1](panels, cols, first, num_rows, x + t * x_stride, x_stride, y + t * y_stride, y_stride);
    }
  }
}

void ExpandRows(PackedFormat format, const PackedRows& rows, int num_rows, uint8_t* out, int64_t out_stride) {
  (format == PackedFormat::kQ5_0   ? ExpandWith<Q5Rows>
   : format == PackedFormat::kQ6_K ? ExpandWith<Q6Rows>
                                   : ExpandWith<Q4Rows>)(rows, num_rows, out, out_stride);
}

}  // namespace tachyon::avx2
