#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <span>

namespace tachyon {

Engine::Engine(const Model& model, const Vocab* vocab, EngineOptions options)
    : model_(model),
      vocab_(vocab),
      options_(options),
      kv_(options.kv),
      kv_buffer_(model.config(), options.kv.block_size, options.kv.num_blocks, options.kv_type),
      scheduler_(options.scheduler, &kv_),
      pool_(options.num_threads) {}

Status Engine::Add(Request request) {
  if (active_.count(request.id)) return InvalidArgumentError("request id already in use");
  if (request.max_tokens <= 0) return InvalidArgumentError("max_tokens must be at least 1");
  for (TokenId t : request.prompt) {
    if (t.value() < 0 || t.value() >= model_.config().n_vocab) {
      return InvalidArgumentError("prompt token id " + std::to_string(t.value()) + " is outside the vocabulary");
    }
  }
  Sequence seq;
  seq.id = request.id;
  seq.tokens = request.prompt;
  seq.num_prompt_tokens = static_cast<int64_t>(request.prompt.size());
  seq.priority = request.priority;
  seq.cache_key = request.cache_key;
  RETURN_IF_ERROR(scheduler_.Add(std::move(seq)));
  auto sampler = std::make_unique<Sampler>(request.sampling);
  const SeqId id = request.id;
  active_.emplace(id, Active{std::move(request), std::move(sampler), std::chrono::steady_clock::now()});
  return Status::Ok();
}

std::vector<RequestOutput> Engine::Expire(std::chrono::steady_clock::time_point now) {
  std::vector<RequestOutput> outputs;
  for (auto it = active_.begin(); it != active_.end();) {
    if (it->second.request.deadline >= now) {
      ++it;
      continue;
    }
    const Sequence* seq = scheduler_.Find(it->first);
    outputs.push_back({.id = it->first,
                       .finish_reason = FinishReason::kTimeout,
                       .num_prompt_tokens = seq ? seq->num_prompt_tokens : 0,
                       .num_generated_tokens = seq ? seq->num_generated() : 0});
    scheduler_.Remove(it->first);
    it = active_.erase(it);
  }
  return outputs;
}

void Engine::Cancel(SeqId id) {
  scheduler_.Remove(id);
  active_.erase(id);
}

TokenLogprobs Engine::LogprobsOf(const std::vector<float>& logits, TokenId token, int num_top) {
  const float max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l - max));
  const float log_z = max + static_cast<float>(std::log(sum));
  TokenLogprobs out{.logprob = logits[token.value()] - log_z};
  if (num_top > 0) {
    std::vector<int32_t> ids(logits.size());
    for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
    const size_t k = std::min<size_t>(num_top, ids.size());
    std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t a, int32_t b) {
      return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
    });
    for (size_t i = 0; i < k; ++i) out.top.emplace_back(TokenId(ids[i]), logits[ids[i]] - log_z);
  }
  return out;
}

std::vector<RequestOutput> Engine::Step() {
  std::vector<RequestOutput> outputs;
  SchedulerOutput plan = scheduler_.Schedule();
  if (plan.empty()) return outputs;
  const auto now = std::chrono::steady_clock::now();
  for (const ScheduledSequence& s : plan.scheduled) {
    Active& a = active_.at(s.id);
    if (a.queue_seconds < 0) a.queue_seconds = std::chrono::duration<double>(now - a.added).count();
  }

  // One batch for all scheduled chunks; block tables copied so they stay valid.
  ForwardBatch batch;
  std::vector<std::vector<int32_t>> tables;
  std::vector<size_t> sampling;  // indices into plan.scheduled that sample
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const ScheduledSequence& s = plan.scheduled[i];
    const Sequence& seq = *scheduler_.Find(s.id);
    std::vector<int32_t> table;
    for (BlockId b : kv_.BlockTable(s.id)) table.push_back(b.value());
    tables.push_back(std::move(table));
    for (int64_t p = s.first_position; p < s.first_position + s.num_new_tokens; ++p) {
      batch.tokens.push_back(seq.tokens[p]);
      batch.positions.push_back(p);
      batch.sequence_index.push_back(static_cast<int32_t>(i));
    }
    if (s.samples) {
      batch.logit_tokens.push_back(static_cast<int32_t>(batch.tokens.size()) - 1);
      sampling.push_back(i);
    }
  }
  for (const auto& table : tables) batch.sequences.push_back({table.data(), static_cast<int64_t>(table.size())});
  std::vector<float> logits = model_.Forward(batch, kv_buffer_, pool_);
  scheduler_.OnStepDone(plan);

  const int64_t n_vocab = model_.config().n_vocab;
  for (size_t k = 0; k < sampling.size(); ++k) {
    const ScheduledSequence& s = plan.scheduled[sampling[k]];
    Active& active = active_.at(s.id);
    Sequence& seq = *scheduler_.Find(s.id);
    std::span<const TokenId> generated(seq.tokens.data() + seq.num_prompt_tokens, seq.num_generated());
    float* row = logits.data() + k * n_vocab;
    // Log-probabilities come from the raw logits; the sampler changes the row in place.
    std::vector<float> raw;
    if (active.request.num_logprobs >= 0) raw.assign(row, row + n_vocab);
    TokenId next = active.sampler->Sample(std::span<float>(row, n_vocab), generated);
    scheduler_.AppendToken(s.id, next);
    RequestOutput out{.id = s.id, .new_tokens = {next}, .num_prompt_tokens = seq.num_prompt_tokens,
                      .num_generated_tokens = seq.num_generated()};
    if (!raw.empty()) out.logprobs.push_back(LogprobsOf(raw, next, active.request.num_logprobs));
    out.num_cached_tokens = std::max<int64_t>(0, seq.num_cached_tokens);
    if (!active.reported_queue) {
      out.queue_seconds = active.queue_seconds;
      active.reported_queue = true;
    }
    const Request& r = active.request;
    const bool stop_token = std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), next) != r.stop_token_ids.end();
    const bool eog = !r.ignore_eos && vocab_ != nullptr && vocab_->IsEndOfGeneration(next);
    if (stop_token || eog) {
      out.finish_reason = FinishReason::kStop;
    } else if (seq.num_generated() >= r.max_tokens) {
      out.finish_reason = FinishReason::kLength;
    }
    if (out.finish_reason != FinishReason::kNone) {
      scheduler_.Remove(s.id);
      active_.erase(s.id);
    }
    outputs.push_back(std::move(out));
  }
  return outputs;
}

}  // namespace tachyon
