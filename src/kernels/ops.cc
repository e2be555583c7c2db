#include "kernels/ops.h"

#include "kernels/cpu_features.h"
#include "kernels/ref/ops.h"
#include "kernels/x86/ops_avx2.h"
#include "kernels/x86/ops_avx512.h"

namespace tachyon {

// Where the CPU has AVX-512, RmsNorm, GeluTanhMul and SoftCap take its 16 lanes and
// masked tails; their results are AVX2's, bit for bit (x86/ops_avx512.h).
void RmsNorm(const float* x, const float* weight, int64_t n, float eps, float* out) {
  if (CpuHasAvx512()) return avx512::RmsNorm(x, weight, n, eps, out);
  CpuHasAvx2() ? avx2::RmsNorm(x, weight, n, eps, out) : ref::RmsNorm(x, weight, n, eps, out);
}

void LayerNorm(const float* x, const float* weight, const float* bias, int64_t n, float eps, float* out) {
  CpuHasAvx2() ? avx2::LayerNorm(x, weight, bias, n, eps, out) : ref::LayerNorm(x, weight, bias, n, eps, out);
}

void Gelu(const float* x, int64_t n, float* out) { CpuHasAvx2() ? avx2::Gelu(x, n, out) : ref::Gelu(x, n, out); }

void SiluMul(const float* gate, const float* up, int64_t n, float* out) {
  CpuHasAvx2() ? avx2::SiluMul(gate, up, n, out) : ref::SiluMul(gate, up, n, out);
}

void GeluTanhMul(const float* gate, const float* up, int64_t n, float* out) {
  if (CpuHasAvx512()) return avx512::GeluTanhMul(gate, up, n, out);
  CpuHasAvx2() ? avx2::GeluTanhMul(gate, up, n, out) : ref::GeluTanhMul(gate, up, n, out);
}

void SoftCap(float* x, int64_t n, float cap) {
  if (CpuHasAvx512()) return avx512::SoftCap(x, n, cap);
  CpuHasAvx2() ? avx2::SoftCap(x, n, cap) : ref::SoftCap(x, n, cap);
}

void ExpShifted(const float* x, int64_t n, float shift, float scale, float* out) {
  CpuHasAvx2() ? avx2::ExpShifted(x, n, shift, scale, out) : ref::ExpShifted(x, n, shift, scale, out);
}

void Softmax(float* x, int64_t n) { CpuHasAvx2() ? avx2::Softmax(x, n) : ref::Softmax(x, n); }

void ApplyRope(float* x, int num_heads, int head_dim, int rope_dim, const float* cos, const float* sin,
               bool neox) {
  CpuHasAvx2() ? avx2::ApplyRope(x, num_heads, head_dim, rope_dim, cos, sin, neox)
               : ref::ApplyRope(x, num_heads, head_dim, rope_dim, cos, sin, neox);
}

}  // namespace tachyon
