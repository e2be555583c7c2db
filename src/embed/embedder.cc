#include "embed/embedder.h"

#include "kernels/cpu_features.h"
#include "kernels/x86/dot_avx2.h"

#include <cmath>

namespace tachyon {

void NormalizeRows(float* vectors, size_t n, int dim) {
  for (size_t r = 0; r < n; ++r) {
    float* v = vectors + r * dim;
    double norm = 0.0;
    for (int i = 0; i < dim; ++i) norm += static_cast<double>(v[i]) * v[i];
    if (norm <= 0) continue;
    const float inv = static_cast<float>(1.0 / std::sqrt(norm));
    for (int i = 0; i < dim; ++i) v[i] *= inv;
  }
}

float Dot(const float* a, const float* b, int dim) {
  static const bool avx2 = CpuHasAvx2();
  if (avx2) return avx2::DotF32(a, b, dim);
  double sum = 0.0;
  for (int i = 0; i < dim; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

}  // namespace tachyon
