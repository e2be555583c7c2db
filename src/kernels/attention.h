// Attention of one query token over a sequence's past K/V in paged blocks,
// with an online softmax: the scores of one block at a time, never a full row
// of scores.
#pragma once

#include <cstdint>

namespace tachyon {

// Element type of the KV cache. Q8_0 stores each token's K and V rows as Q8_0
// blocks of 32 (a head's slice must be whole blocks: head_dim % 32 == 0).
enum class KvType { kF32, kF16, kQ8_0 };

// Bytes of one token's K (or V) row of kv_dim elements.
int64_t KvRowBytes(KvType type, int64_t kv_dim);

// One layer's K and V storage: [num_blocks] blocks of block_size slots, a
// slot holding a token's K (or V) row of kv_dim = n_kv_heads * head_dim elements
// of `type` (KvRowBytes a slot). A block holds its KV heads' parts one after the
// other (KvPartOffset), so that a decode step reads one head's keys and values
// in a block as one contiguous run each. In a part, V is [block_size][head_dim]
// (a slot's row of the head); K is the same for Q8_0, and transposed for F32 and
// F16, [head_dim][block_size], so that value i of consecutive keys lies side by
// side, as the keys-in-lanes scores read it.
struct LayerKv {
  void* k = nullptr;
  void* v = nullptr;
  KvType type = KvType::kF32;
};

struct AttentionShape {
  int n_heads = 0;
  int n_kv_heads = 0;  // grouped-query attention: n_heads / n_kv_heads query heads share one
  int head_dim = 0;
  int block_size = 0;
  // A sliding window (Gemma's local layers): a query at position p sees keys at
  // p - window + 1 .. p only, and blocks wholly before that are never read. 0: all.
  int64_t window = 0;
  // Soft-capping (Gemma 2): each scaled score s becomes softcap * tanh(s / softcap)
  // before the softmax, as llama.cpp computes it (s * (1 / softcap), tanhf). 0: not.
  float softcap = 0;
};

// Whether `type` keeps K transposed in a block's part: F32 and F16 do.
inline bool KvKeysTransposed(KvType type) { return type != KvType::kQ8_0; }

// Byte offset, from a layer's K (or V), of KV head `kv_head`'s part of block `block`.
inline int64_t KvPartOffset(KvType type, const AttentionShape& shape, int64_t block, int kv_head) {
  const int64_t part = static_cast<int64_t>(shape.block_size) * KvRowBytes(type, shape.head_dim);
  return (block * shape.n_kv_heads + kv_head) * part;
}

// Writes one token's K and V ([n_kv_heads * head_dim] floats each) into slot
// `slot` (block * block_size + offset) of `kv`, laid out for `shape`.
void StoreKv(const LayerKv& kv, const AttentionShape& shape, int64_t slot, const float* k, const float* v);

// The first position a query at `position` sees under `shape`'s window.
inline int64_t FirstVisiblePosition(const AttentionShape& shape, int64_t position) {
  return shape.window > 0 && position >= shape.window ? position - shape.window + 1 : 0;
}

// out [n_heads, head_dim] = softmax(q k^T * scale) v over positions [0, num_positions)
// (from FirstVisiblePosition(shape, num_positions - 1) under a window)
// of the sequence whose blocks are block_table[0 .. ceil(num_positions / block_size)).
// q: [n_heads, head_dim].
void AttendPaged(const float* q, const LayerKv& kv, const int32_t* block_table, int64_t num_positions,
                 const AttentionShape& shape, float scale, float* out);

// Causal attention of a run of consecutive tokens of one sequence, positions
// first_position .. first_position + num_queries - 1, each over the sequence's
// positions up to its own, for the query heads of KV head `kv_head` only (callers
// split the work by KV head). q, out: [num_queries, q_stride] floats, head h of
// token t at t * q_stride + h * head_dim. On AVX2 the run's (token, head) rows
// are computed eight at a time in the lanes of registers, each K/V block
// converted once for all of them (x86/attention_avx2.h); a token's result does not
// depend on the run it is computed in, so the engine may split a batch any way.
// Elsewhere, AttendPaged's arithmetic per token.
void AttendPagedRun(const float* q, int64_t q_stride, int num_queries, int64_t first_position, const LayerKv& kv,
                    const int32_t* block_table, const AttentionShape& shape, float scale, int kv_head, float* out);

// Bidirectional attention for encoder models: one query token over all
// num_keys tokens of its own sequence (callers give each sequence's rows, so a
// batch of sequences is masked per sequence by construction), keys in tiles of
// kDenseTile with the online softmax. Rows are strided so that Q, K and V may be
// column slices of one fused projection: key j is k + j * kv_stride (head g at
// g * head_dim), likewise v. q, out: [n_heads, head_dim].
constexpr int kDenseTile = 64;
void AttendDense(const float* q, const float* k, const float* v, int64_t kv_stride, int64_t num_keys,
                 const AttentionShape& shape, float scale, float* out);

}  // namespace tachyon
