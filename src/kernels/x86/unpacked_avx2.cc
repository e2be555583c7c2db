// Compiled with -mavx2 -mfma -mf16c; see dot_avx2.cc for why nothing inline is
// shared with the rest of the code (the templates here have internal linkage).
#include "kernels/x86/unpacked_avx2.h"

#include <immintrin.h>

#include <cstring>

#include "kernels/block_formats.h"
#include "kernels/ref/kquants.h"
#include "kernels/ref/unpack.h"
#include "kernels/x86/avx2_reduce.h"

namespace tachyon::avx2 {
namespace {


// Pairwise int8 products of w and x, summed in pairs: 16 int16. The sign goes onto
// w: |x| as an unsigned byte holds 128 (Q8_K activations reach -128), while w, never
// -128 in these formats, can be negated.
__m256i PairProducts(__m256i w, __m256i x) {
  return _mm256_maddubs_epi16(_mm256_sign_epi8(x, x), _mm256_sign_epi8(w, x));
}

// The 16 packed nibbles of a 32-block: low nibbles (values 0..15), then high (16..31).
__m256i Nibbles(const uint8_t* qs) {
  const __m128i raw = _mm_loadu_si128(reinterpret_cast<const __m128i*>(qs));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(raw, 4), mask), _mm_and_si128(raw, mask));
}

// Bit i of the little-endian uint32 at qh, as 0x10 in byte i (0 where clear).
__m256i FifthBits(const uint8_t* qh_bytes) {
  uint32_t qh;
  std::memcpy(&qh, qh_bytes, sizeof(qh));
  const __m256i spread = _mm256_shuffle_epi8(
      _mm256_set1_epi32(static_cast<int>(qh)),
      _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0x0000000000000000));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  const __m256i set = _mm256_cmpeq_epi8(_mm256_and_si256(spread, bit), bit);
  return _mm256_and_si256(set, _mm256_set1_epi8(0x10));
}

// A 32-block as signed int8 values with x = d * q + m.
struct Block32 {
  __m256i q;
  float d, m;
};

struct Q4_1 {
  static constexpr size_t kBytes = sizeof(BlockQ4_1);
  static Block32 Unpack(const uint8_t* p) {
    const BlockQ4_1& b = *reinterpret_cast<const BlockQ4_1*>(p);
    return {Nibbles(b.qs), _cvtsh_ss(b.d), _cvtsh_ss(b.m)};
  }
};
struct Q5_1 {
  static constexpr size_t kBytes = sizeof(BlockQ5_1);
  static Block32 Unpack(const uint8_t* p) {
    const BlockQ5_1& b = *reinterpret_cast<const BlockQ5_1*>(p);
    return {_mm256_or_si256(Nibbles(b.qs), FifthBits(b.qh)), _cvtsh_ss(b.d), _cvtsh_ss(b.m)};
  }
};
struct IQ4_NL {
  static constexpr size_t kBytes = sizeof(BlockIQ4_NL);
  static Block32 Unpack(const uint8_t* p) {
    const BlockIQ4_NL& b = *reinterpret_cast<const BlockIQ4_NL*>(p);
    const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
    return {_mm256_shuffle_epi8(_mm256_set_m128i(table, table), Nibbles(b.qs)), _cvtsh_ss(b.d), 0.0f};
  }
};

// One unpacked 32-block without an offset (IQ4_NL) against one Q8_0 block, added to acc.
__m256 Accumulate32(const Block32& w, const BlockQ8_0& x, __m256 acc) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  const __m256i dot = _mm256_madd_epi16(PairProducts(w.q, xq), _mm256_set1_epi16(1));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(w.d * _cvtsh_ss(x.d)), acc);
}

// The same with the block's quant sum given (Q4_1, Q5_1): the offset term is a
// scalar product a block, added to `offsets`.
__m256 Accumulate32S(const Block32& w, const BlockQ8_0S& x, __m256 acc, float* offsets) {
  const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs));
  const float dx = _cvtsh_ss(x.d);
  const __m256i dot = _mm256_madd_epi16(PairProducts(w.q, xq), _mm256_set1_epi16(1));
  *offsets += w.m * dx * static_cast<float>(x.sum);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(w.d * dx), acc);
}

template <typename F>
float Dot32S(const void* w, const void* x, int64_t n) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0S* xb = static_cast<const BlockQ8_0S*>(x);
  __m256 acc = _mm256_setzero_ps();
  float offsets = 0.0f;
  for (int64_t b = 0; b < n / 32; ++b) acc = Accumulate32S(F::Unpack(wb + b * F::kBytes), xb[b], acc, &offsets);
  return HorizontalSum(acc) + offsets;
}

template <typename F>
void Dot32Sx4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0S* xb[4];
  for (int k = 0; k < 4; ++k) xb[k] = reinterpret_cast<const BlockQ8_0S*>(static_cast<const uint8_t*>(x) + k * x_stride);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  float offsets[4] = {0, 0, 0, 0};
  for (int64_t b = 0; b < n / 32; ++b) {
    const Block32 u = F::Unpack(wb + b * F::kBytes);
    for (int k = 0; k < 4; ++k) acc[k] = Accumulate32S(u, xb[k][b], acc[k], &offsets[k]);
  }
  for (int k = 0; k < 4; ++k) out[k] = HorizontalSum(acc[k]) + offsets[k];
}

template <typename F>
float Dot32(const void* w, const void* x, int64_t n) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  __m256 acc = _mm256_setzero_ps();
  for (int64_t b = 0; b < n / 32; ++b) acc = Accumulate32(F::Unpack(wb + b * F::kBytes), xb[b], acc);
  return HorizontalSum(acc);
}

template <typename F>
void Dot32x4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_0* xb[4];
  for (int k = 0; k < 4; ++k) xb[k] = reinterpret_cast<const BlockQ8_0*>(static_cast<const uint8_t*>(x) + k * x_stride);
  __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
  for (int64_t b = 0; b < n / 32; ++b) {
    const Block32 u = F::Unpack(wb + b * F::kBytes);
    for (int k = 0; k < 4; ++k) acc[k] = Accumulate32(u, xb[k][b], acc[k]);
  }
  for (int k = 0; k < 4; ++k) out[k] = HorizontalSum(acc[k]);
}

// The super-block unpackers of ref/unpack.h, the quants in registers (scales as the
// reference unpacks them: a few scalar steps a block). Same results, byte for byte.
__m256i Load256(const uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
void Store256(int8_t* p, __m256i v) { _mm256_store_si256(reinterpret_cast<__m256i*>(p), v); }
// Bit `shift` of every byte of v, as 0 or 1.
__m256i BitOfBytes(__m256i v, int shift) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(1));
}
__m256i TwoBitsOfBytes(__m256i v, int shift) {
  return _mm256_and_si256(_mm256_srli_epi16(v, shift), _mm256_set1_epi8(3));
}

void UnpackQ2_KAvx2(const void* block, ref::Unpacked256* out) {
  const BlockQ2_K& b = *static_cast<const BlockQ2_K*>(block);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = Load256(b.qs + 32 * h);
    for (int j = 0; j < 4; ++j) Store256(out->q + 128 * h + 32 * j, TwoBitsOfBytes(bits, 2 * j));
  }
  for (int g = 0; g < 16; ++g) {
    out->scale[g] = static_cast<int16_t>(b.scales[g] & 0xF);
    out->min[g] = static_cast<int16_t>(b.scales[g] >> 4);
  }
  out->d = _cvtsh_ss(b.d);
  out->dmin = _cvtsh_ss(b.dmin);
  out->has_min = true;
}

void UnpackQ3_KAvx2(const void* block, ref::Unpacked256* out) {
  const BlockQ3_K& b = *static_cast<const BlockQ3_K*>(block);
  const __m256i hmask = Load256(b.hmask), four = _mm256_set1_epi8(4);
  for (int h = 0; h < 2; ++h) {
    const __m256i bits = Load256(b.qs + 32 * h);
    for (int j = 0; j < 4; ++j) {
      // low two bits - 4, plus 4 where the high bit is set
      const __m256i high = _mm256_slli_epi16(BitOfBytes(hmask, 4 * h + j), 2);
      Store256(out->q + 128 * h + 32 * j, _mm256_sub_epi8(_mm256_add_epi8(TwoBitsOfBytes(bits, 2 * j), high), four));
    }
  }
  uint8_t scales[16];
  ref::UnpackQ3KScales(b.scales, scales);
  for (int g = 0; g < 16; ++g) {
    out->scale[g] = static_cast<int16_t>(scales[g] - 32);
    out->min[g] = 0;
  }
  out->d = _cvtsh_ss(b.d);
  out->dmin = 0.0f;
  out->has_min = false;
}

void UnpackIQ4_XSAvx2(const void* block, ref::Unpacked256* out) {
  const BlockIQ4_XS& b = *static_cast<const BlockIQ4_XS*>(block);
  const __m128i table = _mm_loadu_si128(reinterpret_cast<const __m128i*>(kIQ4NLValues));
  const __m256i table2 = _mm256_set_m128i(table, table);
  for (int g = 0; g < 8; ++g) {
    const int ls = ((b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((b.scales_h >> (2 * g)) & 3) << 4);
    out->scale[2 * g] = out->scale[2 * g + 1] = static_cast<int16_t>(ls - 32);
    out->min[2 * g] = out->min[2 * g + 1] = 0;
    Store256(out->q + 32 * g, _mm256_shuffle_epi8(table2, Nibbles(b.qs + 16 * g)));
  }
  out->d = _cvtsh_ss(b.d);
  out->dmin = 0.0f;
  out->has_min = false;
}

// One unpacked super-block against one Q8_K block: d * dx * sum_g scale_g (q . x)_g
// - dmin * dx * sum_g min_g bsum_g.
float Dot256Block(const ref::Unpacked256& u, const BlockQ8_K& x) {
  __m256i acc = _mm256_setzero_si256();
  for (int k = 0; k < 8; ++k) {
    const __m256i q = _mm256_load_si256(reinterpret_cast<const __m256i*>(u.q + 32 * k));
    const __m256i xq = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * k));
    const __m256i scales = _mm256_set_m128i(_mm_set1_epi16(u.scale[2 * k + 1]), _mm_set1_epi16(u.scale[2 * k]));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(PairProducts(q, xq), scales));
  }
  float sum = u.d * x.d * static_cast<float>(HorizontalSumI32(acc));
  if (u.has_min) {
    const __m256i mins = _mm256_load_si256(reinterpret_cast<const __m256i*>(u.min));
    const __m256i bsums = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.bsums));
    sum -= u.dmin * x.d * static_cast<float>(HorizontalSumI32(_mm256_madd_epi16(mins, bsums)));
  }
  return sum;
}

// Q5_K on its own: its 5-bit quants are unsigned, so they meet the activations in
// maddubs directly, with the scales broadcast per sub-block (no unpacked copy).
struct Q5KBlock {
  __m256i q[8];  // sub-block s: values 0..31
  uint8_t sc[8], mn[8];
  float d, dmin;
};

void LoadQ5K(const BlockQ5_K& b, Q5KBlock* out) {
  const __m256i qh = Load256(b.qh), low = _mm256_set1_epi8(0x0F);
  for (int j = 0; j < 4; ++j) {
    const __m256i bits = Load256(b.qs + 32 * j);
    const __m256i lo = _mm256_and_si256(bits, low), hi = _mm256_and_si256(_mm256_srli_epi16(bits, 4), low);
    out->q[2 * j] = _mm256_or_si256(lo, _mm256_slli_epi16(BitOfBytes(qh, 2 * j), 4));
    out->q[2 * j + 1] = _mm256_or_si256(hi, _mm256_slli_epi16(BitOfBytes(qh, 2 * j + 1), 4));
  }
  for (int s = 0; s < 8; ++s) ref::UnpackQ4KScale(b.scales, s, &out->sc[s], &out->mn[s]);
  out->d = _cvtsh_ss(b.d);
  out->dmin = _cvtsh_ss(b.dmin);
}

// The same value as Dot256Block on the unpacked block.
float DotQ5KBlock(const Q5KBlock& w, const BlockQ8_K& x) {
  __m256i acc = _mm256_setzero_si256();
  int32_t mins = 0;
  for (int s = 0; s < 8; ++s) {
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(x.qs + 32 * s));
    acc = _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w.q[s], y), _mm256_set1_epi16(w.sc[s])));
    mins += w.mn[s] * (x.bsums[2 * s] + x.bsums[2 * s + 1]);
  }
  float sum = w.d * x.d * static_cast<float>(HorizontalSumI32(acc));
  sum -= w.dmin * x.d * static_cast<float>(mins);
  return sum;
}

float DotQ5K(const void* w, const void* x, int64_t n) {
  const BlockQ5_K* wb = static_cast<const BlockQ5_K*>(w);
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  Q5KBlock u;
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    LoadQ5K(wb[b], &u);
    sum += DotQ5KBlock(u, xb[b]);
  }
  return sum;
}

void DotQ5Kx4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out) {
  const BlockQ5_K* wb = static_cast<const BlockQ5_K*>(w);
  const BlockQ8_K* xb[4];
  for (int k = 0; k < 4; ++k) xb[k] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + k * x_stride);
  Q5KBlock u;
  float sum[4] = {0, 0, 0, 0};
  for (int64_t b = 0; b < n / 256; ++b) {
    LoadQ5K(wb[b], &u);
    for (int k = 0; k < 4; ++k) sum[k] += DotQ5KBlock(u, xb[k][b]);
  }
  for (int k = 0; k < 4; ++k) out[k] = sum[k];
}

template <ref::Unpack256Fn Unpack, size_t kBytes>
float Dot256(const void* w, const void* x, int64_t n) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  ref::Unpacked256 u;
  float sum = 0.0f;
  for (int64_t b = 0; b < n / 256; ++b) {
    Unpack(wb + b * kBytes, &u);
    sum += Dot256Block(u, xb[b]);
  }
  return sum;
}

template <ref::Unpack256Fn Unpack, size_t kBytes>
void Dot256x4(const void* w, const void* x, int64_t x_stride, int64_t n, float* out) {
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  const BlockQ8_K* xb[4];
  for (int k = 0; k < 4; ++k) xb[k] = reinterpret_cast<const BlockQ8_K*>(static_cast<const uint8_t*>(x) + k * x_stride);
  ref::Unpacked256 u;
  float sum[4] = {0, 0, 0, 0};
  for (int64_t b = 0; b < n / 256; ++b) {
    Unpack(wb + b * kBytes, &u);
    for (int k = 0; k < 4; ++k) sum[k] += Dot256Block(u, xb[k][b]);
  }
  for (int k = 0; k < 4; ++k) out[k] = sum[k];
}

}  // namespace

ref::Unpack256Fn FindUnpack256Avx2(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K: return UnpackQ2_KAvx2;
    case GgmlType::kQ3_K: return UnpackQ3_KAvx2;
    case GgmlType::kIQ4_XS: return UnpackIQ4_XSAvx2;
    default: return nullptr;
  }
}

UnpackedDotFn FindUnpackedDot(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1: return Dot32S<Q4_1>;
    case GgmlType::kQ5_1: return Dot32S<Q5_1>;
    case GgmlType::kIQ4_NL: return Dot32<IQ4_NL>;
    case GgmlType::kQ2_K: return Dot256<UnpackQ2_KAvx2, sizeof(BlockQ2_K)>;
    case GgmlType::kQ3_K: return Dot256<UnpackQ3_KAvx2, sizeof(BlockQ3_K)>;
    case GgmlType::kQ5_K: return DotQ5K;
    case GgmlType::kIQ4_XS: return Dot256<UnpackIQ4_XSAvx2, sizeof(BlockIQ4_XS)>;
    default: return nullptr;
  }
}

UnpackedDot4Fn FindUnpackedDot4(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1: return Dot32Sx4<Q4_1>;
    case GgmlType::kQ5_1: return Dot32Sx4<Q5_1>;
    case GgmlType::kIQ4_NL: return Dot32x4<IQ4_NL>;
    case GgmlType::kQ2_K: return Dot256x4<UnpackQ2_KAvx2, sizeof(BlockQ2_K)>;
    case GgmlType::kQ3_K: return Dot256x4<UnpackQ3_KAvx2, sizeof(BlockQ3_K)>;
    case GgmlType::kQ5_K: return DotQ5Kx4;
    case GgmlType::kIQ4_XS: return Dot256x4<UnpackIQ4_XSAvx2, sizeof(BlockIQ4_XS)>;
    default: return nullptr;
  }
}

}  // namespace tachyon::avx2
