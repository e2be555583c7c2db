#include "kernels/ref/ops.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/block_formats.h"
#include "kernels/fp16.h"

namespace tachyon::ref {

void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(x[i]) * x[i];
  float scale = 1.0f / std::sqrt(static_cast<float>(sum_sq / n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * weight[i];
}

void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += x[i];
  const double mean = sum / n;
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += (x[i] - mean) * (x[i] - mean);
  const float scale = static_cast<float>(1.0 / std::sqrt(sum_sq / n + eps));
  const float m = static_cast<float>(mean);
  for (int64_t i = 0; i < n; ++i) out[i] = (x[i] - m) * scale * weight[i] + bias[i];
}

void Gelu(const float* x, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) {
    const double v = x[i];
    out[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * M_SQRT1_2)));
  }
}

void RopeCosSin(double pos, int rope_dim, float base, const float* freq_factors, float* cos, float* sin) {
  for (int i = 0; i < rope_dim / 2; ++i) {
    double angle = pos * std::pow(static_cast<double>(base), -2.0 * i / rope_dim);
    if (freq_factors != nullptr) angle /= freq_factors[i];
    cos[i] = static_cast<float>(std::cos(angle));
    sin[i] = static_cast<float>(std::sin(angle));
  }
}

void ApplyRope(float* x, int num_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
               bool neox) {
  const int half = rope_dim / 2;
  for (int h = 0; h < num_heads; ++h) {
    float* head = x + static_cast<int64_t>(h) * head_dim;
    for (int i = 0; i < half; ++i) {
      const int a = neox ? i : 2 * i;
      const int b = neox ? i + half : 2 * i + 1;
      const float x0 = head[a], x1 = head[b];
      head[a] = x0 * cos[i] - x1 * sin[i];
      head[b] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

void Rope(float* x, int num_heads, int head_dim, int rope_dim, double pos, float base, bool neox,
          const float* freq_factors) {
  std::vector<float> cos(rope_dim / 2), sin(rope_dim / 2);
  RopeCosSin(pos, rope_dim, base, freq_factors, cos.data(), sin.data());
  ApplyRope(x, num_heads, head_dim, rope_dim, cos.data(), sin.data(), neox);
}

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

const uint16_t* GeluTanhF16Table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) {
      const float x = Fp16ToFloat(static_cast<uint16_t>(h));
      const float g = 0.5f * x * (1.0f + std::tanh(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
      t[h] = FloatToFp16(g);
    }
    return t;
  }();
  return table.data();
}

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  const uint16_t* table = GeluTanhF16Table();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    const float g = x <= -10.0f ? 0.0f : x >= 10.0f ? x : Fp16ToFloat(table[FloatToFp16(x)]);
    out[i] = g * up[i];
  }
}

void ExpShifted(const float* x, int64_t n, float shift, float scale, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = std::exp((x[i] - shift) * scale);
}

void SoftCap(float* x, int64_t n, float cap) {
  const float inv = 1.0f / cap;
  for (int64_t i = 0; i < n; ++i) x[i] = std::tanh(x[i] * inv) * cap;
}

void Softmax(float* x, int64_t n) {
  float max = x[0];
  for (int64_t i = 1; i < n; ++i) max = std::max(max, x[i]);
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  float inv = static_cast<float>(1.0 / sum);
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
}

float DotF32(const float* w, const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(w[i]) * x[i];
  return static_cast<float>(sum);
}

float DotF16(const uint16_t* w, const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(Fp16ToFloat(w[i])) * x[i];
  return static_cast<float>(sum);
}

float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(Bf16ToFloat(w[i])) * x[i];
  return static_cast<float>(sum);
}

float DotQ8_0Q8_0(const void* w, const void* x, int64_t n) {
  const BlockQ8_0* wb = static_cast<const BlockQ8_0*>(w);
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK8_0; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < kQK8_0; ++i) isum += wb[b].qs[i] * xb[b].qs[i];
    sum += Fp16ToFloat(wb[b].d) * Fp16ToFloat(xb[b].d) * static_cast<float>(isum);
  }
  return sum;
}

float DotQ4_0Q8_0(const void* w, const void* x, int64_t n) {
  const BlockQ4_0* wb = static_cast<const BlockQ4_0*>(w);
  const BlockQ8_0* xb = static_cast<const BlockQ8_0*>(x);
  float sum = 0.0f;
  for (int64_t b = 0; b < n / kQK4_0; ++b) {
    int32_t isum = 0;
    for (int i = 0; i < kQK4_0 / 2; ++i) {
      isum += ((wb[b].qs[i] & 0x0f) - 8) * xb[b].qs[i];
      isum += ((wb[b].qs[i] >> 4) - 8) * xb[b].qs[i + kQK4_0 / 2];
    }
    sum += Fp16ToFloat(wb[b].d) * Fp16ToFloat(xb[b].d) * static_cast<float>(isum);
  }
  return sum;
}

}  // namespace tachyon::ref
