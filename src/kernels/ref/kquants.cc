#include "kernels/ref/kquants.h"

#include <algorithm>
#include <cmath>

#include "kernels/block_formats.h"
#include "kernels/fp16.h"

namespace tachyon::ref {
namespace {

int NearestInt(float x) { return static_cast<int>(std::nearbyint(x)); }

}  // namespace

void UnpackQ4KScale(const uint8_t* q, int j, uint8_t* scale, uint8_t* min) {
  if (j < 4) {
    *scale = q[j] & 63;
    *min = q[j + 4] & 63;
  } else {
    *scale = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *min = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

void DequantizeRowQ4_K(const void* in, float* y, int64_t n) {
  const BlockQ4_K* blocks = static_cast<const BlockQ4_K*>(in);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = Fp16ToFloat(blocks[b].d), dmin = Fp16ToFloat(blocks[b].dmin);
    const uint8_t* q = blocks[b].qs;
    for (int j = 0; j < kQK_K / 64; ++j) {
      uint8_t s0, m0, s1, m1;
      UnpackQ4KScale(blocks[b].scales, 2 * j, &s0, &m0);
      UnpackQ4KScale(blocks[b].scales, 2 * j + 1, &s1, &m1);
      for (int l = 0; l < 32; ++l) *y++ = d * s0 * (q[l] & 0xF) - dmin * m0;
      for (int l = 0; l < 32; ++l) *y++ = d * s1 * (q[l] >> 4) - dmin * m1;
      q += 32;
    }
  }
}

void DequantizeRowQ6_K(const void* in, float* y, int64_t n) {
  const BlockQ6_K* blocks = static_cast<const BlockQ6_K*>(in);
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    const float d = Fp16ToFloat(blocks[b].d);
    const uint8_t* ql = blocks[b].ql;
    const uint8_t* qh = blocks[b].qh;
    const int8_t* sc = blocks[b].scales;
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * sc[is] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
      y += 128;
      ql += 64;
      qh += 32;
      sc += 8;
    }
  }
}

// Each sub-block of 32 gets scale (max - min) / 15 and offset -min (min <= 0),
// then scales and offsets are themselves quantized to 6 bits against d and dmin.
void QuantizeRowQ4_K(const float* x, void* out, int64_t n) {
  BlockQ4_K* blocks = static_cast<BlockQ4_K*>(out);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float scales[8], mins[8];
    for (int j = 0; j < 8; ++j) {
      float lo = 0.0f, hi = 0.0f;
      for (int l = 0; l < 32; ++l) {
        lo = std::min(lo, x[32 * j + l]);
        hi = std::max(hi, x[32 * j + l]);
      }
      scales[j] = (hi - lo) / 15.0f;
      mins[j] = -lo;
    }
    const float max_scale = *std::max_element(scales, scales + 8);
    const float max_min = *std::max_element(mins, mins + 8);
    const float d = max_scale / 63.0f, dmin = max_min / 63.0f;
    BlockQ4_K& blk = blocks[b];
    blk.d = FloatToFp16(d);
    blk.dmin = FloatToFp16(dmin);
    const float d_used = Fp16ToFloat(blk.d), dmin_used = Fp16ToFloat(blk.dmin);
    uint8_t sc[8], mn[8];
    for (int j = 0; j < 8; ++j) {
      sc[j] = static_cast<uint8_t>(std::clamp(d_used > 0 ? NearestInt(scales[j] / d_used) : 0, 0, 63));
      mn[j] = static_cast<uint8_t>(std::clamp(dmin_used > 0 ? NearestInt(mins[j] / dmin_used) : 0, 0, 63));
    }
    for (int j = 0; j < 4; ++j) {
      blk.scales[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
      blk.scales[j + 4] = static_cast<uint8_t>((mn[j] & 63) | ((mn[j + 4] >> 4) << 6));
      blk.scales[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
    }
    uint8_t q[kQK_K];
    for (int j = 0; j < 8; ++j) {
      const float step = d_used * sc[j], offset = dmin_used * mn[j];
      for (int l = 0; l < 32; ++l) {
        int v = step > 0 ? NearestInt((x[32 * j + l] + offset) / step) : 0;
        q[32 * j + l] = static_cast<uint8_t>(std::clamp(v, 0, 15));
      }
    }
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) blk.qs[32 * j + l] = static_cast<uint8_t>(q[64 * j + l] | (q[64 * j + 32 + l] << 4));
    }
  }
}

// Each group of 16 gets a signed scale mapping its largest magnitude to -32,
// and the group scales are quantized to int8 against d.
void QuantizeRowQ6_K(const float* x, void* out, int64_t n) {
  BlockQ6_K* blocks = static_cast<BlockQ6_K*>(out);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float scales[16];
    float max_abs_scale = 0.0f, max_scale = 0.0f;
    for (int g = 0; g < 16; ++g) {
      float amax = 0.0f, max = 0.0f;
      for (int l = 0; l < 16; ++l) {
        if (std::fabs(x[16 * g + l]) > amax) {
          amax = std::fabs(x[16 * g + l]);
          max = x[16 * g + l];
        }
      }
      scales[g] = max / -32.0f;
      if (std::fabs(scales[g]) > max_abs_scale) {
        max_abs_scale = std::fabs(scales[g]);
        max_scale = scales[g];
      }
    }
    BlockQ6_K& blk = blocks[b];
    const float d = max_scale / -128.0f;
    blk.d = FloatToFp16(d);
    const float d_used = Fp16ToFloat(blk.d);
    uint8_t q[kQK_K];
    for (int g = 0; g < 16; ++g) {
      int sc = d_used != 0 ? std::clamp(NearestInt(scales[g] / d_used), -128, 127) : 0;
      blk.scales[g] = static_cast<int8_t>(sc);
      const float step = d_used * sc;
      for (int l = 0; l < 16; ++l) {
        int v = step != 0 ? NearestInt(x[16 * g + l] / step) : 0;
        q[16 * g + l] = static_cast<uint8_t>(std::clamp(v, -32, 31) + 32);
      }
    }
    for (int half = 0; half < 2; ++half) {
      const uint8_t* L = q + 128 * half;
      uint8_t* ql = blk.ql + 64 * half;
      uint8_t* qh = blk.qh + 32 * half;
      for (int l = 0; l < 32; ++l) {
        ql[l] = static_cast<uint8_t>((L[l] & 0xF) | ((L[l + 64] & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((L[l + 32] & 0xF) | ((L[l + 96] & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((L[l] >> 4) | ((L[l + 32] >> 4) << 2) | ((L[l + 64] >> 4) << 4) |
                                     ((L[l + 96] >> 4) << 6));
      }
    }
  }
}

void QuantizeActivationsQ8_K(const float* x, void* out, int64_t n) {
  BlockQ8_K* blocks = static_cast<BlockQ8_K*>(out);
  for (int64_t b = 0; b < n / kQK_K; ++b, x += kQK_K) {
    float amax = 0.0f, max = 0.0f;
    for (int l = 0; l < kQK_K; ++l) {
      if (std::fabs(x[l]) > amax) {
        amax = std::fabs(x[l]);
        max = x[l];
      }
    }
    BlockQ8_K& blk = blocks[b];
    if (amax == 0.0f) {
      blk.d = 0.0f;
      std::fill(blk.qs, blk.qs + kQK_K, 0);
      std::fill(blk.bsums, blk.bsums + kQK_K / 16, 0);
      continue;
    }
    const float iscale = -128.0f / max;
    for (int l = 0; l < kQK_K; ++l) blk.qs[l] = static_cast<int8_t>(std::min(127, NearestInt(iscale * x[l])));
    for (int g = 0; g < kQK_K / 16; ++g) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += blk.qs[16 * g + l];
      blk.bsums[g] = static_cast<int16_t>(sum);
    }
    blk.d = 1.0f / iscale;
  }
}

float DotQ4_KQ8_K(const void* w, const void* x, int64_t n) {
  const BlockQ4_K* wb = static_cast<const BlockQ4_K*>(w);
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    int32_t sumi = 0, sumi_mins = 0;
    const uint8_t* q = wb[b].qs;
    const int8_t* y = xb[b].qs;
    for (int j = 0; j < 8; ++j) {
      uint8_t sc, mn;
      UnpackQ4KScale(wb[b].scales, j, &sc, &mn);
      int32_t dot = 0;
      for (int l = 0; l < 32; ++l) {
        int qv = (j % 2 == 0) ? (q[32 * (j / 2) + l] & 0xF) : (q[32 * (j / 2) + l] >> 4);
        dot += qv * y[32 * j + l];
      }
      sumi += sc * dot;
      sumi_mins += mn * (xb[b].bsums[2 * j] + xb[b].bsums[2 * j + 1]);
    }
    sum += Fp16ToFloat(wb[b].d) * xb[b].d * sumi - Fp16ToFloat(wb[b].dmin) * xb[b].d * sumi_mins;
  }
  return sum;
}

float DotQ6_KQ8_K(const void* w, const void* x, int64_t n) {
  const BlockQ6_K* wb = static_cast<const BlockQ6_K*>(w);
  const BlockQ8_K* xb = static_cast<const BlockQ8_K*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK_K; ++b) {
    // The integer values q - 32, in the dequantizer's layout.
    const uint8_t* ql = wb[b].ql;
    const uint8_t* qh = wb[b].qh;
    int8_t q[kQK_K];
    for (int half = 0; half < 2; ++half) {
      for (int l = 0; l < 32; ++l) {
        q[128 * half + l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
        q[128 * half + l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
        q[128 * half + l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
        q[128 * half + l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
      }
      ql += 64;
      qh += 32;
    }
    int32_t sumi = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t dot = 0;
      for (int l = 0; l < 16; ++l) dot += q[16 * g + l] * xb[b].qs[16 * g + l];
      sumi += wb[b].scales[g] * dot;
    }
    sum += Fp16ToFloat(wb[b].d) * xb[b].d * sumi;
  }
  return sum;
}

}  // namespace tachyon::ref
