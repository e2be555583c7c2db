// Engine: runs requests to completion, one step at a time:
//   proposals (speculative decoding, when on) -> Scheduler::Schedule ->
//   Model::Forward (one batch for every scheduled sequence and its proposal)
//   -> Sampler per sampling sequence (verifying proposals) -> stop checks ->
//   outputs, finished ones freed.
//
// This is the synchronous core; the serving loop thread and per-request
// streams stand on Step(). Not thread-safe: one caller drives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/proposer.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
#include "engine/speculative.h"
#include "grammar/token_mask.h"
#include "kv/kv_cache_manager.h"
#include "model/kv_buffer.h"
#include "model/model.h"
#include "tokenizer/vocab.h"

namespace tachyon {

struct Request {
  SeqId id;
  std::vector<TokenId> prompt;
  SamplingParams sampling;
  int64_t max_tokens = 16;
  bool ignore_eos = false;          // generate exactly max_tokens
  std::vector<TokenId> stop_token_ids;
  int priority = 0;
  uint64_t cache_key = 0;
  // Log-probabilities of generated tokens (from the model's raw logits): -1 off;
  // k >= 0: the chosen token's, plus the k most likely.
  int num_logprobs = -1;
  // Past this time the request ends with kTimeout, waiting or running.
  std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
  // Speculative decoding for this request when the engine has a proposer (the
  // output is the same either way; false opts out).
  bool speculative = true;
  // Constrained decoding: every token keeps the output a prefix of the
  // grammar's language (tokens that would not get -inf before sampling, and
  // end-of-generation only where the output is complete); the request stops
  // as soon as nothing may follow. Its vocabulary must be the model's.
  std::shared_ptr<GrammarMasker> grammar;
};

enum class FinishReason { kNone, kStop, kLength, kTimeout };

struct TokenLogprobs {
  float logprob = 0;                               // of the generated token
  std::vector<std::pair<TokenId, float>> top;      // most likely first
};

struct RequestOutput {
  SeqId id;
  std::vector<TokenId> new_tokens;  // generated since the last output
  std::vector<TokenLogprobs> logprobs;  // one per new token when the request asked for them
  FinishReason finish_reason = FinishReason::kNone;
  int64_t num_prompt_tokens = 0;
  int64_t num_generated_tokens = 0;
  int64_t num_cached_tokens = 0;  // prompt tokens reused from the prefix cache
  double queue_seconds = -1;      // on the first output: from Add to the first step that computed it
};

struct EngineOptions {
  KvCacheOptions kv;
  SchedulerOptions scheduler;
  int num_threads = 1;
  KvType kv_type = KvType::kF16;  // element type of the K/V blocks
  // num_tokens and max_batch apply when the engine is given a proposer.
  SpeculativeOptions speculative;
  // What queue times and deadlines are measured on (null: the real clock).
  const Clock* clock = nullptr;
};

// A KV cache sized for a model: its options and what its blocks weigh.
struct KvCachePlan {
  KvCacheOptions kv;
  uint64_t block_bytes = 0;         // one block of the main pool, over the layers it serves
  uint64_t window_block_bytes = 0;  // one block of the window pool (0 without one)
  uint64_t bytes() const {
    return static_cast<uint64_t>(kv.num_blocks) * block_bytes +
           static_cast<uint64_t>(kv.window_num_blocks) * window_block_bytes;
  }
};

// Sizes the KV cache in kv_bytes (0: what scheduler.max_num_seqs sequences of
// max_model_len tokens need, at most 2 GiB). A model with both sliding-window
// and full-attention layers (Gemma 2/3) gets a window pool (unless
// window_pool is false) when that saves
// memory: its share of the bytes is what the sliding layers of max_num_seqs
// sequences hold at once (each its window and one chunk). Errors when the
// main pool holds fewer than max_model_len tokens or the window pool less than
// one sequence's window and chunk.
StatusOr<KvCachePlan> PlanKvCache(const ModelConfig& config, KvType type, int block_size, bool prefix_caching,
                                  bool window_pool, uint64_t kv_bytes, const SchedulerOptions& scheduler);

// The proposer options.speculative asks for: null when off; a draft model is
// loaded and must share `vocab` (the target's).
StatusOr<std::unique_ptr<Proposer>> MakeProposer(const EngineOptions& options, const Vocab& vocab);

// Counters of speculative decoding since the engine started.
struct SpeculativeStats {
  int64_t num_drafts = 0;           // sequence-steps that verified a proposal
  int64_t num_draft_tokens = 0;     // tokens proposed (and computed)
  int64_t num_accepted_tokens = 0;  // proposed tokens accepted
  int64_t num_emitted_tokens = 0;   // tokens those steps emitted (accepted + one each)
  std::vector<int64_t> accepted_per_position;  // [i]: proposals whose token i was accepted
};

class Engine {
 public:
  // vocab: for end-of-generation tokens (may be null: then only stop_token_ids and max_tokens stop).
  // proposer: speculative decoding (null: off).
  Engine(const Model& model, const Vocab* vocab, EngineOptions options, std::unique_ptr<Proposer> proposer = nullptr);

  Status Add(Request request);
  // One step; returns an output for every request that produced tokens or finished.
  std::vector<RequestOutput> Step();
  // Ends every request whose deadline is before `now` (kTimeout outputs).
  std::vector<RequestOutput> Expire(std::chrono::steady_clock::time_point now);
  void Cancel(SeqId id);
  // See Scheduler::SetHeld.
  void SetHeld(SeqId id, bool held) { scheduler_.SetHeld(id, held); }
  bool HasWork() const { return !scheduler_.empty(); }
  // Whether Step() would compute anything (some request is not held).
  bool HasRunnableWork() const { return scheduler_.HasRunnable(); }

  const KvCacheManager& kv() const { return kv_; }

  // log-softmax of `logits` at `token`, and the num_top most likely tokens (lowest id on ties).
  static TokenLogprobs LogprobsOf(const std::vector<float>& logits, TokenId token, int num_top);
  const Scheduler& scheduler() const { return scheduler_; }
  const SpeculativeStats& speculative_stats() const { return spec_stats_; }
  bool speculates() const { return proposer_ != nullptr; }
  // The clock of queue times and deadlines (EngineOptions::clock, else the real one).
  const Clock& clock() const { return Clock::Or(options_.clock); }

 private:
  struct Active {
    Request request;
    std::unique_ptr<Sampler> sampler;
    std::chrono::steady_clock::time_point added;
    double queue_seconds = -1;  // set when first scheduled
    bool reported_queue = false;
    SpeculationControl speculation;
    std::optional<GrammarMatcher> matcher;  // with a grammar
    bool closing = false;  // the grammar's answer is being closed before max_tokens
  };
  // The forward batch of a plan, and where each scheduled sequence's logit rows start.
  struct StepBatch {
    ForwardBatch batch;
    std::vector<std::vector<int32_t>> tables;  // block tables, copied so they stay valid
    std::vector<std::vector<int32_t>> window_tables;  // with a window pool
    std::vector<int64_t> first_row;            // per scheduled sequence; -1: it does not sample
  };

  // Sets the draft of every decoding sequence that speculates this step; returns their ids.
  std::vector<SeqId> ProposeDrafts();
  StepBatch BuildBatch(const SchedulerOutput& plan) const;
  // Samples (verifying the draft) from a sequence's logit rows, appends the
  // tokens, checks stops and returns its output.
  RequestOutput SampleSequence(const ScheduledSequence& s, std::span<float> rows);
  void Finish(SeqId id);
  // Masks each of a sequence's logit rows with its grammar: row i follows the
  // draft's first i tokens. Returns false when the first row allows no token
  // at all (the grammar is stuck: the request ends).
  bool MaskRows(Active& active, const Sequence& seq, const ScheduledSequence& s, std::span<float> rows);

  const Model& model_;
  const Vocab* vocab_;
  EngineOptions options_;
  KvCacheManager kv_;
  KvBuffer kv_buffer_;
  Scheduler scheduler_;
  ThreadPool pool_;
  std::unique_ptr<Proposer> proposer_;
  SpeculativeStats spec_stats_;
  std::unordered_map<SeqId, Active> active_;
  std::vector<uint64_t> mask_bits_;  // scratch
};

}  // namespace tachyon
