// AVX2 attention of a run of query tokens over paged K/V, one KV head at a time
// (kernels/attention.h: AttendPagedRun is the entry point).
#pragma once

#include <cstdint>

#include "kernels/attention.h"

namespace tachyon::avx2 {

// The heads of `kv_head`'s group for `num_queries` consecutive tokens of one
// sequence at positions first_position...; q, out: [num_queries, q_stride] floats.
void AttendRunKvHead(const float* q, int64_t q_stride, int num_queries, int64_t first_position, const LayerKv& kv,
                     const int32_t* block_table, const AttentionShape& shape, float scale, int kv_head, float* out);

}  // namespace tachyon::avx2
