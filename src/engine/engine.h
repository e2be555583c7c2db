// Engine: runs requests to completion, one step at a time:
//   Scheduler::Schedule -> Model::Forward (one batch for every scheduled
//   sequence) -> Sampler per sampling sequence -> outputs, finished ones freed.
//
// This is the synchronous core; the serving loop thread and per-request
// streams stand on Step(). Not thread-safe: one caller drives it.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <unordered_map>
#include <vector>

#include "base/status.h"
#include "base/thread_pool.h"
#include "engine/sampler.h"
#include "engine/scheduler.h"
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
};

class Engine {
 public:
  // vocab: for end-of-generation tokens (may be null: then only stop_token_ids and max_tokens stop).
  Engine(const Model& model, const Vocab* vocab, EngineOptions options);

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

 private:
  struct Active {
    Request request;
    std::unique_ptr<Sampler> sampler;
    std::chrono::steady_clock::time_point added;
    double queue_seconds = -1;  // set when first scheduled
    bool reported_queue = false;
  };

  const Model& model_;
  const Vocab* vocab_;
  EngineOptions options_;
  KvCacheManager kv_;
  KvBuffer kv_buffer_;
  Scheduler scheduler_;
  ThreadPool pool_;
  std::unordered_map<SeqId, Active> active_;
};

}  // namespace tachyon
