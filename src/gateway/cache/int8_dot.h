// Dot products of int8 vectors for the semantic cache's HNSW graphs, which
// keep each vector as int8 with one scale (a quarter of the float bytes, so a
// graph walk, which is bound by memory latency, touches a quarter of the cache
// lines). The AVX2 version is compiled on its own (int8_dot_avx2.cc) and chosen
// at run time.
#pragma once

#include <cstdint>

namespace tachyon {

int32_t Int8DotRef(const int8_t* a, const int8_t* b, int n);
int32_t Int8DotAvx2(const int8_t* a, const int8_t* b, int n);  // only when CpuHasAvx2()

}  // namespace tachyon
