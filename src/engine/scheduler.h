// Scheduler: decides, each step, which sequences run and how many of their
// tokens are computed, under a token budget and a sequence cap (vLLM v1's
// accounting: one counter, num_computed_tokens, covers chunked prefill,
// decode and prefix caching).
//
// A step gives every running sequence what it needs first (one token for a
// decode; the next chunk of a prompt still being prefilled), in arrival
// order, then spends the rest of the budget on waiting sequences by priority
// then arrival: each reuses its longest cached prefix and computes a chunk of
// the rest. When blocks run out, the most recently arrived running sequence
// is preempted: its blocks are freed and it waits to be recomputed (its
// tokens are kept). With a window pool (KvCacheManager), each step's
// computed tokens release the sliding-window blocks no later query sees.
// Pure: no I/O, no threads, no clock.
//
// In-flight prefix deduplication: a waiting sequence whose next uncached
// prompt block is one that a running sequence is still prefilling waits for
// those blocks to be computed and cached (it could not run past them sooner
// by computing them itself, since both share one token budget), then reuses
// them; later waiting sequences are admitted meanwhile. If the running one
// goes away first, the waiting one computes the blocks itself.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "engine/sequence.h"
#include "kv/kv_cache_manager.h"

namespace tachyon {

struct SchedulerOptions {
  int64_t max_num_batched_tokens = 2048;  // tokens computed per step, all sequences together
  int max_num_seqs = 64;                  // running sequences at once
  int64_t max_model_len = 4096;           // prompt + generation, per sequence
  bool deduplicate_in_flight_prefixes = true;  // see above; off only for comparisons
};

struct ScheduledSequence {
  SeqId id;
  int64_t first_position = 0;  // num_computed_tokens when scheduled
  int64_t num_new_tokens = 0;  // tokens [first_position, first_position + num_new_tokens) computed
  bool samples = false;        // the chunk reaches the last token: the step samples a new one
  // Of num_new_tokens, the last num_draft_tokens are the sequence's draft (a decode
  // only): computed, but not counted as computed until verified (AppendTokens).
  int64_t num_draft_tokens = 0;
};

struct SchedulerOutput {
  std::vector<ScheduledSequence> scheduled;
  std::vector<SeqId> preempted;
  int64_t num_batched_tokens = 0;
  bool empty() const { return scheduled.empty(); }
};

class Scheduler {
 public:
  Scheduler(SchedulerOptions options, KvCacheManager* kv);

  // Admits a sequence, or says why it can never run: a prompt that with one
  // generated token exceeds max_model_len, or needs more KV blocks than exist.
  Status Add(Sequence sequence);

  SchedulerOutput Schedule();

  // After the forward pass of `output`: advances num_computed_tokens (draft
  // tokens excluded) and registers newly full blocks in the prefix cache.
  // Sampled tokens are then appended with AppendToken or AppendTokens.
  void OnStepDone(const SchedulerOutput& output);
  void AppendToken(SeqId id, TokenId token);
  // Appends `tokens` after a speculative step: the first num_verified of them are
  // the draft tokens the step accepted (their K/V were computed with the
  // draft), the rest are new. The draft is cleared, and the blocks that only
  // rejected draft positions needed go back to the pool.
  void AppendTokens(SeqId id, std::span<const TokenId> tokens, int64_t num_verified);

  // Removes a sequence (finished or cancelled) and frees its blocks.
  void Remove(SeqId id);
  // Holds a sequence out of the steps (its output is not being read) or releases it.
  void SetHeld(SeqId id, bool held);
  // Whether a step would compute anything: some sequence waits or runs unheld.
  bool HasRunnable() const;

  // Running sequences, not held, whose next step is a decode (one token to compute).
  std::vector<Sequence*> Decoding();

  Sequence* Find(SeqId id);
  const Sequence* Find(SeqId id) const;
  int num_running() const { return static_cast<int>(running_.size()); }
  int num_waiting() const { return static_cast<int>(waiting_.size()); }
  bool empty() const { return running_.empty() && waiting_.empty(); }

  // Prompt tokens computed so far (cached prefixes excluded; recomputation
  // after preemption included).
  int64_t num_prompt_tokens_computed() const { return num_prompt_tokens_computed_; }

 private:
  enum class Admission { kAdmitted, kNoRoom, kWaitsForInFlightPrefix };
  Admission AdmitWaiting(Sequence& seq, int64_t* budget, SchedulerOutput* out);
  // Whether a running sequence is prefilling block `block_idx` of `seq`'s prompt.
  bool IsInFlight(const Sequence& seq, int64_t block_idx) const;
  // Frees the most recently arrived running sequence; returns its id.
  SeqId PreemptLast(SchedulerOutput* out);

  SchedulerOptions options_;
  KvCacheManager* kv_;
  int64_t next_arrival_ = 0;
  std::unordered_map<SeqId, std::unique_ptr<Sequence>> sequences_;
  std::vector<SeqId> running_;  // in arrival order
  std::deque<SeqId> waiting_;   // in priority, then arrival order
  int64_t num_prompt_tokens_computed_ = 0;
};

}  // namespace tachyon
