#include "kernels/ref/unpacked_quants.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/block_formats.h"
#include "kernels/fp16.h"
#include "kernels/ref/ops.h"
#include "kernels/ref/unpack.h"

namespace tachyon::ref {
namespace {

int NearestInt(float x) { return static_cast<int>(std::nearbyint(x)); }

// x ~ scale * q - min with q in 0..levels: q by rounding, then scale and min by least
// squares over those q, twice. The k-quants store min >= 0 (keep_min_positive).
void FitAffine(const float* x, int n, int levels, bool keep_min_positive, float* scale, float* min) {
  float lo = keep_min_positive ? 0.0f : x[0], hi = keep_min_positive ? 0.0f : x[0];
  for (int i = 0; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  float s = (hi - lo) / levels, m = -lo;
  for (int iter = 0; iter < 2 && s > 0; ++iter) {
    double sq = 0, sx = 0, sqq = 0, sqx = 0;
    for (int i = 0; i < n; ++i) {
      const int q = std::clamp(NearestInt((x[i] + m) / s), 0, levels);
      sq += q;
      sx += x[i];
      sqq += double(q) * q;
      sqx += double(q) * x[i];
    }
    const double var = n * sqq - sq * sq;
    if (var <= 0) break;
    double ns = (n * sqx - sq * sx) / var;
    double offset = (sx - ns * sq) / n;  // x ~ ns * q + offset
    if (keep_min_positive && offset > 0) {  // min must stay >= 0: fit through zero
      offset = 0;
      ns = sqq > 0 ? sqx / sqq : 0;
    }
    if (ns <= 0) break;
    s = static_cast<float>(ns);
    m = static_cast<float>(-offset);
  }
  *scale = s;
  *min = m;
}

// x ~ scale * q with q in lo..hi (lo < 0): starting scales that put the value of
// largest magnitude at or near either end, each refined by least squares over its
// q; the one of least error.
float FitSymmetric(const float* x, int n, int lo, int hi) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best = max / lo;
  double best_err = -1;
  for (float end : {lo - 0.5f, float(lo), lo + 0.5f, float(hi), hi + 0.5f}) {
    float s = max / end;
    for (int iter = 0; iter < 2; ++iter) {
      double sqq = 0, sqx = 0;
      for (int i = 0; i < n; ++i) {
        const int q = std::clamp(NearestInt(x[i] / s), lo, hi);
        sqq += double(q) * q;
        sqx += double(q) * x[i];
      }
      if (sqq <= 0 || sqx == 0) break;
      s = static_cast<float>(sqx / sqq);
    }
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = x[i] - double(s) * std::clamp(NearestInt(x[i] / s), lo, hi);
      err += e * e;
    }
    if (best_err < 0 || err < best_err) {
      best_err = err;
      best = s;
    }
  }
  return best;
}

// Index of the IQ4_NL level nearest v (ties to the lower): the midpoints below v.
int NearestLevel(float v) {
  static const auto midpoints = [] {
    std::array<float, 15> m{};
    for (int k = 0; k < 15; ++k) m[k] = 0.5f * (kIQ4NLValues[k] + kIQ4NLValues[k + 1]);
    return m;
  }();
  int index = 0;
  for (float m : midpoints) index += v > m;
  return index;
}

// x ~ scale * kIQ4NLValues[q]: starting scales that put the largest magnitude at
// and near either end of the table, each refined by least squares; the one of least error.
float FitNonLinear(const float* x, int n) {
  float amax = 0.0f, max = 0.0f;
  for (int i = 0; i < n; ++i) {
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      max = x[i];
    }
  }
  if (amax == 0.0f) return 0.0f;
  float best = max / kIQ4NLValues[0];
  double best_err = -1;
  for (int k = 0; k < 14; ++k) {
    const float end = k < 10 ? -127.0f + 2 * (k - 5) : 113.0f + 3 * (k - 12);
    float s = max / end;
    for (int iter = 0; iter < 2; ++iter) {
      double sqq = 0, sqx = 0;
      for (int i = 0; i < n; ++i) {
        const int v = kIQ4NLValues[NearestLevel(x[i] / s)];
        sqq += double(v) * v;
        sqx += double(v) * x[i];
      }
      if (sqq <= 0 || sqx == 0) break;
      s = static_cast<float>(sqx / sqq);
    }
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const double e = x[i] - double(s) * kIQ4NLValues[NearestLevel(x[i] / s)];
      err += e * e;
    }
    if (best_err < 0 || err < best_err) {
      best_err = err;
      best = s;
    }
  }
  return best;
}

void Pack4(const int* q, uint8_t* qs) {  // 32 values: low nibbles 0..15, high 16..31
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((q[j] & 0xF) | ((q[j + 16] & 0xF) << 4));
}

void Pack5High(const int* q, uint8_t* qh_bytes) {
  uint32_t qh = 0;
  for (int j = 0; j < 32; ++j) qh |= static_cast<uint32_t>((q[j] >> 4) & 1) << j;
  std::memcpy(qh_bytes, &qh, sizeof(qh));
}

// A 32-block with an offset (Q4_1, Q5_1): its F16 scale and offset, and q in 0..levels.
void QuantizeWithOffset(const float* x, int levels, uint16_t* d_bits, uint16_t* m_bits, int* q) {
  float s, m;
  FitAffine(x, 32, levels, false, &s, &m);
  *d_bits = FloatToFp16(s);
  *m_bits = FloatToFp16(-m);
  const float d = Fp16ToFloat(*d_bits), off = Fp16ToFloat(*m_bits);
  for (int i = 0; i < 32; ++i) q[i] = d > 0 ? std::clamp(NearestInt((x[i] - off) / d), 0, levels) : 0;
}

// Block quantizers (x: the block's values).
void QuantizeQ4_1(const float* x, BlockQ4_1* b) {
  int q[32];
  QuantizeWithOffset(x, 15, &b->d, &b->m, q);
  Pack4(q, b->qs);
}

void QuantizeQ5_1(const float* x, BlockQ5_1* b) {
  int q[32];
  QuantizeWithOffset(x, 31, &b->d, &b->m, q);
  Pack4(q, b->qs);
  Pack5High(q, b->qh);
}

void QuantizeQ5_0(const float* x, BlockQ5_0* b) {
  b->d = FloatToFp16(FitSymmetric(x, 32, -16, 15));
  const float d = Fp16ToFloat(b->d);
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = (d != 0 ? std::clamp(NearestInt(x[i] / d), -16, 15) : 0) + 16;
  Pack4(q, b->qs);
  Pack5High(q, b->qh);
}

void QuantizeIQ4_NL(const float* x, BlockIQ4_NL* b) {
  b->d = FloatToFp16(FitNonLinear(x, 32));
  const float d = Fp16ToFloat(b->d);
  int q[32];
  for (int i = 0; i < 32; ++i) q[i] = d != 0 ? NearestLevel(x[i] / d) : NearestLevel(0);
  Pack4(q, b->qs);
}

void QuantizeQ2_K(const float* x, BlockQ2_K* b) {
  float scales[16], mins[16];
  for (int g = 0; g < 16; ++g) FitAffine(x + 16 * g, 16, 3, true, &scales[g], &mins[g]);
  b->d = FloatToFp16(*std::max_element(scales, scales + 16) / 15.0f);
  b->dmin = FloatToFp16(*std::max_element(mins, mins + 16) / 15.0f);
  const float d = Fp16ToFloat(b->d), dmin = Fp16ToFloat(b->dmin);
  std::memset(b->qs, 0, sizeof(b->qs));
  for (int g = 0; g < 16; ++g) {
    const int sc = d > 0 ? std::clamp(NearestInt(scales[g] / d), 0, 15) : 0;
    const int mn = dmin > 0 ? std::clamp(NearestInt(mins[g] / dmin), 0, 15) : 0;
    b->scales[g] = static_cast<uint8_t>(sc | (mn << 4));
    const float step = d * sc, offset = dmin * mn;
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * g + l;  // element 128 h + 32 j + l' is bits 2j of qs[32 h + l']
      const int q = step > 0 ? std::clamp(NearestInt((x[i] + offset) / step), 0, 3) : 0;
      b->qs[32 * (i / 128) + i % 32] |= static_cast<uint8_t>(q << (2 * ((i % 128) / 32)));
    }
  }
}

void QuantizeQ3_K(const float* x, BlockQ3_K* b) {
  float scales[16];
  float max_scale = 0.0f;
  for (int g = 0; g < 16; ++g) {
    scales[g] = FitSymmetric(x + 16 * g, 16, -4, 3);
    if (std::fabs(scales[g]) > std::fabs(max_scale)) max_scale = scales[g];
  }
  b->d = FloatToFp16(max_scale / -32.0f);
  const float d = Fp16ToFloat(b->d);
  std::memset(b->hmask, 0, sizeof(b->hmask));
  std::memset(b->qs, 0, sizeof(b->qs));
  std::memset(b->scales, 0, sizeof(b->scales));
  for (int g = 0; g < 16; ++g) {
    const int sc = d != 0 ? std::clamp(NearestInt(scales[g] / d), -32, 31) : 0;
    const int stored = sc + 32;
    if (g < 8) {
      b->scales[g] |= static_cast<uint8_t>(stored & 0xF);
    } else {
      b->scales[g - 8] |= static_cast<uint8_t>((stored & 0xF) << 4);
    }
    b->scales[8 + g % 4] |= static_cast<uint8_t>((stored >> 4) << (2 * (g / 4)));
    const float step = d * sc;
    for (int l = 0; l < 16; ++l) {
      const int i = 16 * g + l, h = i / 128, j = (i % 128) / 32, lane = i % 32;
      const int v = (step != 0 ? std::clamp(NearestInt(x[i] / step), -4, 3) : 0) + 4;  // 0..7
      b->qs[32 * h + lane] |= static_cast<uint8_t>((v & 3) << (2 * j));
      if (v >> 2) b->hmask[lane] |= static_cast<uint8_t>(1 << (4 * h + j));
    }
  }
}

void QuantizeQ5_K(const float* x, BlockQ5_K* b) {
  float scales[8], mins[8];
  for (int s = 0; s < 8; ++s) FitAffine(x + 32 * s, 32, 31, true, &scales[s], &mins[s]);
  b->d = FloatToFp16(*std::max_element(scales, scales + 8) / 63.0f);
  b->dmin = FloatToFp16(*std::max_element(mins, mins + 8) / 63.0f);
  const float d = Fp16ToFloat(b->d), dmin = Fp16ToFloat(b->dmin);
  uint8_t sc[8], mn[8];
  for (int s = 0; s < 8; ++s) {
    sc[s] = static_cast<uint8_t>(d > 0 ? std::clamp(NearestInt(scales[s] / d), 0, 63) : 0);
    mn[s] = static_cast<uint8_t>(dmin > 0 ? std::clamp(NearestInt(mins[s] / dmin), 0, 63) : 0);
  }
  for (int j = 0; j < 4; ++j) {  // the 6-bit pairs packed as Q4_K packs them
    b->scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    b->scales[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
    b->scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
  int q[256];
  for (int s = 0; s < 8; ++s) {
    const float step = d * sc[s], offset = dmin * mn[s];
    for (int l = 0; l < 32; ++l) {
      q[32 * s + l] = step > 0 ? std::clamp(NearestInt((x[32 * s + l] + offset) / step), 0, 31) : 0;
    }
  }
  std::memset(b->qh, 0, sizeof(b->qh));
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      const int lo = q[64 * j + l], hi = q[64 * j + 32 + l];
      b->qs[32 * j + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      b->qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * j)) | ((hi >> 4) << (2 * j + 1)));
    }
  }
}

void QuantizeIQ4_XS(const float* x, BlockIQ4_XS* b) {
  float scales[8];
  float max_scale = 0.0f;
  for (int g = 0; g < 8; ++g) {
    scales[g] = FitNonLinear(x + 32 * g, 32);
    if (std::fabs(scales[g]) > std::fabs(max_scale)) max_scale = scales[g];
  }
  b->d = FloatToFp16(max_scale / -32.0f);
  const float d = Fp16ToFloat(b->d);
  b->scales_h = 0;
  std::memset(b->scales_l, 0, sizeof(b->scales_l));
  for (int g = 0; g < 8; ++g) {
    const int ls = (d != 0 ? std::clamp(NearestInt(scales[g] / d), -32, 31) : 0) + 32;
    b->scales_l[g / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (g % 2)));
    b->scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * g));
    const float step = d * (ls - 32);
    int q[32];
    for (int l = 0; l < 32; ++l) q[l] = step != 0 ? NearestLevel(x[32 * g + l] / step) : NearestLevel(0);
    Pack4(q, b->qs + 16 * g);
  }
}

template <typename Block>
void QuantizeBlocks(void (*quantize)(const float*, Block*), const float* x, void* out, int64_t n, int block_size) {
  Block* blocks = static_cast<Block*>(out);
  for (int64_t b = 0; b < n / block_size; ++b) quantize(x + b * block_size, &blocks[b]);
}

}  // namespace

UnpackedActivations ActivationsFor(GgmlType type) {
  if (FindUnpack256(type) != nullptr) return UnpackedActivations::kQ8_K;
  return type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1 ? UnpackedActivations::kQ8_0S : UnpackedActivations::kQ8_0;
}

void QuantizeActivationsQ8_0S(const float* x, void* out, int64_t n) {
  BlockQ8_0S* blocks = static_cast<BlockQ8_0S*>(out);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    BlockQ8_0 q;
    QuantizeActivationsQ8_0(x + b * kQK8_0, &q, kQK8_0);
    blocks[b].d = q.d;
    int sum = 0;
    for (int i = 0; i < kQK8_0; ++i) sum += q.qs[i];
    blocks[b].sum = static_cast<int16_t>(sum);
    std::memcpy(blocks[b].qs, q.qs, sizeof(q.qs));
  }
}

bool IsUnpackedType(GgmlType type) { return FindUnpack32(type) != nullptr || FindUnpack256(type) != nullptr; }

void DequantizeRowUnpacked(GgmlType type, const void* in, float* y, int64_t n) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  CHECK(n % traits.block_size == 0) << GgmlTypeName(type) << " row length " << n;
  const uint8_t* bytes = static_cast<const uint8_t*>(in);
  if (Unpack32Fn unpack = FindUnpack32(type)) {
    Unpacked32 u;
    for (int64_t b = 0; b < n / 32; ++b, y += 32) {
      unpack(bytes + b * traits.type_size, &u);
      if (type == GgmlType::kQ4_1 || type == GgmlType::kQ5_1) {
        for (int i = 0; i < 32; ++i) y[i] = u.q[i] * u.d + u.m;
      } else {
        for (int i = 0; i < 32; ++i) y[i] = u.d * u.q[i];
      }
    }
    return;
  }
  Unpack256Fn unpack = FindUnpack256(type);
  CHECK(unpack != nullptr) << "no unpacked dequantizer for " << GgmlTypeName(type);
  Unpacked256 u;
  for (int64_t b = 0; b < n / 256; ++b, y += 256) {
    unpack(bytes + b * traits.type_size, &u);
    for (int g = 0; g < 16; ++g) {
      const float dl = u.d * u.scale[g];
      if (u.has_min) {
        const float ml = u.dmin * u.min[g];
        for (int l = 0; l < 16; ++l) y[16 * g + l] = dl * u.q[16 * g + l] - ml;
      } else {
        for (int l = 0; l < 16; ++l) y[16 * g + l] = dl * u.q[16 * g + l];
      }
    }
  }
}

void QuantizeRowUnpacked(GgmlType type, const float* x, void* out, int64_t n) {
  switch (type) {
    case GgmlType::kQ4_1: QuantizeBlocks(QuantizeQ4_1, x, out, n, 32); return;
    case GgmlType::kQ5_0: QuantizeBlocks(QuantizeQ5_0, x, out, n, 32); return;
    case GgmlType::kQ5_1: QuantizeBlocks(QuantizeQ5_1, x, out, n, 32); return;
    case GgmlType::kIQ4_NL: QuantizeBlocks(QuantizeIQ4_NL, x, out, n, 32); return;
    case GgmlType::kQ2_K: QuantizeBlocks(QuantizeQ2_K, x, out, n, 256); return;
    case GgmlType::kQ3_K: QuantizeBlocks(QuantizeQ3_K, x, out, n, 256); return;
    case GgmlType::kQ5_K: QuantizeBlocks(QuantizeQ5_K, x, out, n, 256); return;
    case GgmlType::kIQ4_XS: QuantizeBlocks(QuantizeIQ4_XS, x, out, n, 256); return;
    default: CHECK(false) << "no unpacked quantizer for " << GgmlTypeName(type);
  }
}

float DotUnpacked(GgmlType type, const void* w, const void* x, int64_t n) {
  const GgmlTypeTraits& traits = GetGgmlTypeTraits(type);
  const uint8_t* wb = static_cast<const uint8_t*>(w);
  float sum = 0.0f;
  if (Unpack32Fn unpack = FindUnpack32(type)) {
    const bool sums = ActivationsFor(type) == UnpackedActivations::kQ8_0S;
    const size_t x_bytes = sums ? sizeof(BlockQ8_0S) : sizeof(BlockQ8_0);
    const uint8_t* xbytes = static_cast<const uint8_t*>(x);
    Unpacked32 u;
    for (int64_t b = 0; b < n / 32; ++b) {
      unpack(wb + b * traits.type_size, &u);
      const uint8_t* block = xbytes + b * x_bytes;
      const uint16_t d_bits = sums ? reinterpret_cast<const BlockQ8_0S*>(block)->d
                                   : reinterpret_cast<const BlockQ8_0*>(block)->d;
      const int8_t* qs = sums ? reinterpret_cast<const BlockQ8_0S*>(block)->qs
                              : reinterpret_cast<const BlockQ8_0*>(block)->qs;
      int32_t dot = 0, sum_x = 0;
      for (int i = 0; i < 32; ++i) {
        dot += u.q[i] * qs[i];
        sum_x += qs[i];
      }
      if (sums) sum_x = reinterpret_cast<const BlockQ8_0S*>(block)->sum;  // the quantizer's, as the kernels use it
      const float dx = Fp16ToFloat(d_bits);
      sum += u.d * dx * dot + u.m * dx * sum_x;
    }
    return sum;
  }
  Unpack256Fn unpack = FindUnpack256(type);
  CHECK(unpack != nullptr) << "no unpacked dot for " << GgmlTypeName(type);
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  Unpacked256 u;
  for (int64_t b = 0; b < n / 256; ++b) {
    unpack(wb + b * traits.type_size, &u);
    int32_t sumi = 0, sum_mins = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += u.q[16 * g + l] * xb[b].qs[16 * g + l];
      sumi += u.scale[g] * dot;
      sum_mins += u.min[g] * xb[b].bsums[g];
    }
    sum += u.d * xb[b].d * sumi - u.dmin * xb[b].d * sum_mins;
  }
  return sum;
}

}  // namespace tachyon::ref
