// Sequence: the engine's changing state for one request.
//
// Invariant: 0 <= num_computed_tokens <= tokens.size(); tokens[0,
// num_computed_tokens) have their K/V in the sequence's blocks. A step brings
// num_computed_tokens closer to tokens.size(): a prompt chunk, or the one new
// token of a decode; there is no separate prefill phase.
#pragma once

#include <cstdint>
#include <vector>

#include "base/strong_id.h"
#include "kv/block_hash.h"

namespace tachyon {

enum class SequenceStatus { kWaiting, kRunning };

struct Sequence {
  SeqId id;
  std::vector<TokenId> tokens;  // prompt, then generated
  int64_t num_prompt_tokens = 0;
  int64_t num_computed_tokens = 0;
  int priority = 0;          // lower runs first
  int64_t arrival = 0;       // admission order, set by the scheduler
  uint64_t cache_key = 0;    // extra key of the block hashes (tenant, adapter); 0: shared
  SequenceStatus status = SequenceStatus::kWaiting;
  // Hash chain of the prompt's full blocks (set at admission): how the
  // scheduler sees that two prompts share blocks before either is cached.
  std::vector<BlockHash> prompt_block_hashes;
  int num_preemptions = 0;
  int64_t num_cached_tokens = -1;  // prompt tokens found in the prefix cache at first admission; -1 before
  // Its client is behind on what was sent (backpressure): not scheduled until released;
  // its blocks stay.
  bool held = false;
  // Tokens proposed to follow `tokens` (speculative decoding), set before a step: a
  // sequence that decodes computes them with its last token, and they join
  // `tokens` only as far as the step verifies them.
  std::vector<TokenId> draft;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_generated() const { return num_tokens() - num_prompt_tokens; }
};

}  // namespace tachyon
