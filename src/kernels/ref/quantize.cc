#include "kernels/ref/quantize.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/check.h"
#include "kernels/block_formats.h"
#include "kernels/fp16.h"
#include "kernels/ref/kquants.h"
#include "kernels/ref/unpacked_quants.h"

namespace tachyon::ref {

namespace {

// Q8_0 blocks with d = amax / 127 and q = round(x / d) by the given rounding.
template <typename Round>
void QuantizeQ8_0Blocks(const float* x, void* out, int64_t n, Round round) {
  CHECK(n % kQK8_0 == 0) << "Q8_0 row length " << n << " is not a multiple of 32";
  BlockQ8_0* blocks = static_cast<BlockQ8_0*>(out);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    const float* xb = x + b * kQK8_0;
    float amax = 0.0f;
    for (int i = 0; i < kQK8_0; ++i) amax = std::max(amax, std::fabs(xb[i]));
    float d = amax / 127.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = FloatToFp16(d);
    for (int i = 0; i < kQK8_0; ++i) blocks[b].qs[i] = static_cast<int8_t>(round(xb[i] * id));
  }
}

}  // namespace

void QuantizeRowQ8_0(const float* x, void* out, int64_t n) {
  QuantizeQ8_0Blocks(x, out, n, [](float v) { return std::round(v); });  // ties away from zero
}

void QuantizeActivationsQ8_0(const float* x, void* out, int64_t n) {
  QuantizeQ8_0Blocks(x, out, n, [](float v) { return std::nearbyint(v); });  // ties to even
}

void DequantizeRowQ8_0(const void* in, float* y, int64_t n) {
  const BlockQ8_0* blocks = static_cast<const BlockQ8_0*>(in);
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    float d = Fp16ToFloat(blocks[b].d);
    for (int i = 0; i < kQK8_0; ++i) y[b * kQK8_0 + i] = d * blocks[b].qs[i];
  }
}

void QuantizeRowQ4_0(const float* x, void* out, int64_t n) {
  CHECK(n % kQK4_0 == 0) << "Q4_0 row length " << n << " is not a multiple of 32";
  BlockQ4_0* blocks = static_cast<BlockQ4_0*>(out);
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    const float* xb = x + b * kQK4_0;
    // The value of largest magnitude maps to -8, so its sign is kept.
    float amax = 0.0f, max = 0.0f;
    for (int i = 0; i < kQK4_0; ++i) {
      if (std::fabs(xb[i]) > amax) {
        amax = std::fabs(xb[i]);
        max = xb[i];
      }
    }
    float d = max / -8.0f;
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    blocks[b].d = FloatToFp16(d);
    for (int i = 0; i < kQK4_0 / 2; ++i) {
      int lo = std::min(15, static_cast<int>(xb[i] * id + 8.5f));
      int hi = std::min(15, static_cast<int>(xb[i + kQK4_0 / 2] * id + 8.5f));
      blocks[b].qs[i] = static_cast<uint8_t>(lo | (hi << 4));
    }
  }
}

void DequantizeRowQ4_0(const void* in, float* y, int64_t n) {
  const BlockQ4_0* blocks = static_cast<const BlockQ4_0*>(in);
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    float d = Fp16ToFloat(blocks[b].d);
    float* yb = y + b * kQK4_0;
    for (int i = 0; i < kQK4_0 / 2; ++i) {
      yb[i] = d * ((blocks[b].qs[i] & 0x0f) - 8);
      yb[i + kQK4_0 / 2] = d * ((blocks[b].qs[i] >> 4) - 8);
    }
  }
}

bool CanQuantizeTo(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: case GgmlType::kF16: case GgmlType::kBF16:
    case GgmlType::kQ8_0: case GgmlType::kQ4_0: case GgmlType::kQ4_K: case GgmlType::kQ6_K:
      return true;
    default:
      return IsUnpackedType(type);
  }
}

void QuantizeRow(GgmlType type, const float* x, void* out, int64_t n) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(out, x, n * sizeof(float));
      return;
    case GgmlType::kF16: {
      uint16_t* h = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) h[i] = FloatToFp16(x[i]);
      return;
    }
    case GgmlType::kBF16: {
      uint16_t* h = static_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) h[i] = FloatToBf16(x[i]);
      return;
    }
    case GgmlType::kQ8_0: QuantizeRowQ8_0(x, out, n); return;
    case GgmlType::kQ4_0: QuantizeRowQ4_0(x, out, n); return;
    case GgmlType::kQ4_K: QuantizeRowQ4_K(x, out, n); return;
    case GgmlType::kQ6_K: QuantizeRowQ6_K(x, out, n); return;
    default:
      CHECK(IsUnpackedType(type)) << "no reference quantizer for " << GgmlTypeName(type);
      QuantizeRowUnpacked(type, x, out, n);
  }
}

void DequantizeRow(GgmlType type, const void* in, float* y, int64_t n) {
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(y, in, n * sizeof(float));
      return;
    case GgmlType::kF16: {
      const uint16_t* h = static_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) y[i] = Fp16ToFloat(h[i]);
      return;
    }
    case GgmlType::kBF16: {
      const uint16_t* h = static_cast<const uint16_t*>(in);
      for (int64_t i = 0; i < n; ++i) y[i] = Bf16ToFloat(h[i]);
      return;
    }
    case GgmlType::kQ8_0: DequantizeRowQ8_0(in, y, n); return;
    case GgmlType::kQ4_0: DequantizeRowQ4_0(in, y, n); return;
    case GgmlType::kQ4_K: DequantizeRowQ4_K(in, y, n); return;
    case GgmlType::kQ6_K: DequantizeRowQ6_K(in, y, n); return;
    default:
      CHECK(IsUnpackedType(type)) << "no reference dequantizer for " << GgmlTypeName(type);
      DequantizeRowUnpacked(type, in, y, n);
  }
}

}  // namespace tachyon::ref
