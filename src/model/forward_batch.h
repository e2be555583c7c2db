// ForwardBatch: everything one Model::Forward step computes, passed explicitly
// (no hidden state): tokens of any number of sequences, each with its position,
// the block table through which its K/V are written and read, and which
// tokens' logits are wanted.
#pragma once

#include <cstdint>
#include <vector>

#include "base/strong_id.h"

namespace tachyon {

struct ForwardSequence {
  // Logical block i of the sequence lives in physical KV block block_table[i];
  // it must cover every position the batch writes for this sequence.
  const int32_t* block_table = nullptr;
  int64_t num_blocks = 0;
  // Sliding-window layers' blocks when the KvBuffer keeps them apart (its
  // window_num_blocks > 0): as long as block_table, -1 where a block lies
  // wholly before every window the batch's queries see. Null: block_table.
  const int32_t* window_block_table = nullptr;
};

struct ForwardBatch {
  std::vector<TokenId> tokens;           // [num_tokens]
  std::vector<int64_t> positions;        // [num_tokens]
  std::vector<int32_t> sequence_index;   // [num_tokens] -> sequences
  std::vector<ForwardSequence> sequences;
  std::vector<int32_t> logit_tokens;     // indices into tokens whose logits Forward returns

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }

  // One sequence's tokens from first_position on, the last token's logits asked for.
  static ForwardBatch OneSequence(const std::vector<TokenId>& tokens, int64_t first_position,
                                  const int32_t* block_table, int64_t num_blocks) {
    ForwardBatch batch;
    batch.tokens = tokens;
    for (size_t i = 0; i < tokens.size(); ++i) {
      batch.positions.push_back(first_position + static_cast<int64_t>(i));
      batch.sequence_index.push_back(0);
    }
    batch.sequences.push_back({block_table, num_blocks});
    batch.logit_tokens.push_back(static_cast<int32_t>(tokens.size()) - 1);
    return batch;
  }
};

}  // namespace tachyon
