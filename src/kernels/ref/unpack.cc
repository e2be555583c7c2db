#include "kernels/ref/unpack.h"

#include <cstring>

#include "kernels/block_formats.h"
#include "kernels/fp16.h"
#include "kernels/ref/kquants.h"

namespace tachyon::ref {
namespace {

uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

// The 32 5-bit values of a Q5_0 / Q5_1 block.
void Unpack5Bits(const uint8_t* qs, const uint8_t* qh_bytes, int8_t* q, int offset) {
  const uint32_t qh = Load32(qh_bytes);
  for (int j = 0; j < 16; ++j) {
    q[j] = static_cast<int8_t>(((qs[j] & 0xF) | (((qh >> j) & 1) << 4)) - offset);
    q[j + 16] = static_cast<int8_t>(((qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4)) - offset);
  }
}

}  // namespace

void UnpackQ4_1(const void* block, Unpacked32* out) {
  const BlockQ4_1& b = *static_cast<const BlockQ4_1*>(block);
  for (int j = 0; j < 16; ++j) {
    out->q[j] = static_cast<int8_t>(b.qs[j] & 0xF);
    out->q[j + 16] = static_cast<int8_t>(b.qs[j] >> 4);
  }
  out->d = Fp16ToFloat(b.d);
  out->m = Fp16ToFloat(b.m);
}

void UnpackQ5_0(const void* block, Unpacked32* out) {
  const BlockQ5_0& b = *static_cast<const BlockQ5_0*>(block);
  Unpack5Bits(b.qs, b.qh, out->q, 16);
  out->d = Fp16ToFloat(b.d);
  out->m = 0.0f;
}

void UnpackQ5_1(const void* block, Unpacked32* out) {
  const BlockQ5_1& b = *static_cast<const BlockQ5_1*>(block);
  Unpack5Bits(b.qs, b.qh, out->q, 0);
  out->d = Fp16ToFloat(b.d);
  out->m = Fp16ToFloat(b.m);
}

void UnpackIQ4_NL(const void* block, Unpacked32* out) {
  const BlockIQ4_NL& b = *static_cast<const BlockIQ4_NL*>(block);
  for (int j = 0; j < 16; ++j) {
    out->q[j] = kIQ4NLValues[b.qs[j] & 0xF];
    out->q[j + 16] = kIQ4NLValues[b.qs[j] >> 4];
  }
  out->d = Fp16ToFloat(b.d);
  out->m = 0.0f;
}

void UnpackQ3KScales(const uint8_t* packed, uint8_t* scales) {
  for (int j = 0; j < 16; ++j) {
    const int low = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    scales[j] = static_cast<uint8_t>(low | (high << 4));
  }
}

void UnpackQ2_K(const void* block, Unpacked256* out) {
  const BlockQ2_K& b = *static_cast<const BlockQ2_K*>(block);
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      for (int l = 0; l < 32; ++l) out->q[128 * h + 32 * j + l] = static_cast<int8_t>((b.qs[32 * h + l] >> (2 * j)) & 3);
    }
  }
  for (int g = 0; g < 16; ++g) {
    out->scale[g] = static_cast<int16_t>(b.scales[g] & 0xF);
    out->min[g] = static_cast<int16_t>(b.scales[g] >> 4);
  }
  out->d = Fp16ToFloat(b.d);
  out->dmin = Fp16ToFloat(b.dmin);
  out->has_min = true;
}

void UnpackQ3_K(const void* block, Unpacked256* out) {
  const BlockQ3_K& b = *static_cast<const BlockQ3_K*>(block);
  for (int h = 0; h < 2; ++h) {
    for (int j = 0; j < 4; ++j) {
      const int bit = 4 * h + j;
      for (int l = 0; l < 32; ++l) {
        const int low = (b.qs[32 * h + l] >> (2 * j)) & 3;
        out->q[128 * h + 32 * j + l] = static_cast<int8_t>(low - (((b.hmask[l] >> bit) & 1) ? 0 : 4));
      }
    }
  }
  uint8_t scales[16];
  UnpackQ3KScales(b.scales, scales);
  for (int g = 0; g < 16; ++g) {
    out->scale[g] = static_cast<int16_t>(scales[g] - 32);
    out->min[g] = 0;
  }
  out->d = Fp16ToFloat(b.d);
  out->dmin = 0.0f;
  out->has_min = false;
}

void UnpackQ5_K(const void* block, Unpacked256* out) {
  const BlockQ5_K& b = *static_cast<const BlockQ5_K*>(block);
  for (int j = 0; j < 4; ++j) {
    for (int l = 0; l < 32; ++l) {
      const uint8_t packed = b.qs[32 * j + l];
      out->q[64 * j + l] = static_cast<int8_t>((packed & 0xF) | (((b.qh[l] >> (2 * j)) & 1) << 4));
      out->q[64 * j + 32 + l] = static_cast<int8_t>((packed >> 4) | (((b.qh[l] >> (2 * j + 1)) & 1) << 4));
    }
  }
  for (int s = 0; s < 8; ++s) {
    uint8_t sc, mn;
    UnpackQ4KScale(b.scales, s, &sc, &mn);
    out->scale[2 * s] = out->scale[2 * s + 1] = sc;
    out->min[2 * s] = out->min[2 * s + 1] = mn;
  }
  out->d = Fp16ToFloat(b.d);
  out->dmin = Fp16ToFloat(b.dmin);
  out->has_min = true;
}

void UnpackIQ4_XS(const void* block, Unpacked256* out) {
  const BlockIQ4_XS& b = *static_cast<const BlockIQ4_XS*>(block);
  for (int g = 0; g < 8; ++g) {
    const int ls = ((b.scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((b.scales_h >> (2 * g)) & 3) << 4);
    out->scale[2 * g] = out->scale[2 * g + 1] = static_cast<int16_t>(ls - 32);
    out->min[2 * g] = out->min[2 * g + 1] = 0;
    for (int l = 0; l < 16; ++l) {
      out->q[32 * g + l] = kIQ4NLValues[b.qs[16 * g + l] & 0xF];
      out->q[32 * g + 16 + l] = kIQ4NLValues[b.qs[16 * g + l] >> 4];
    }
  }
  out->d = Fp16ToFloat(b.d);
  out->dmin = 0.0f;
  out->has_min = false;
}

Unpack32Fn FindUnpack32(GgmlType type) {
  switch (type) {
    case GgmlType::kQ4_1: return UnpackQ4_1;
    case GgmlType::kQ5_0: return UnpackQ5_0;
    case GgmlType::kQ5_1: return UnpackQ5_1;
    case GgmlType::kIQ4_NL: return UnpackIQ4_NL;
    default: return nullptr;
  }
}

Unpack256Fn FindUnpack256(GgmlType type) {
  switch (type) {
    case GgmlType::kQ2_K: return UnpackQ2_K;
    case GgmlType::kQ3_K: return UnpackQ3_K;
    case GgmlType::kQ5_K: return UnpackQ5_K;
    case GgmlType::kIQ4_XS: return UnpackIQ4_XS;
    default: return nullptr;
  }
}

}  // namespace tachyon::ref
