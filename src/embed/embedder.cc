#include "embed/embedder.h"

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
  double sum = 0.0;
  for (int i = 0; i < dim; ++i) sum += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(sum);
}

}  // namespace tachyon
