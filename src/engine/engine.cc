#include "engine/engine.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "base/check.h"
#include "engine/draft_proposer.h"

namespace tachyon {

StatusOr<std::unique_ptr<Proposer>> MakeProposer(const EngineOptions& options, const Vocab& vocab) {
  const SpeculativeOptions& s = options.speculative;
  switch (s.mode) {
    case SpeculativeMode::kOff:
      return std::unique_ptr<Proposer>();
    case SpeculativeMode::kNgram:
      if (s.ngram_min < 1 || s.ngram_max < s.ngram_min) return InvalidArgumentError("bad n-gram sizes");
      return std::unique_ptr<Proposer>(std::make_unique<NgramProposer>(s.ngram_min, s.ngram_max));
    case SpeculativeMode::kDraft: {
      ASSIGN_OR_RETURN(std::unique_ptr<DraftProposer> draft,
                       DraftProposer::Create(s.draft_model, vocab, options.kv.block_size, options.kv.num_blocks,
                                             options.scheduler.max_model_len));
      return std::unique_ptr<Proposer>(std::move(draft));
    }
  }
  return InvalidArgumentError("unknown speculative mode");
}

StatusOr<KvCachePlan> PlanKvCache(const ModelConfig& config, KvType type, int block_size, bool prefix_caching,
                                  bool window_pool, uint64_t kv_bytes, const SchedulerOptions& scheduler) {
  const int64_t len = scheduler.max_model_len, seqs = scheduler.max_num_seqs;
  const int64_t chunk = std::min(scheduler.max_num_batched_tokens, len);
  const int64_t blocks_per_seq = (len + block_size - 1) / block_size;
  KvCachePlan plan;
  plan.kv = {.block_size = block_size, .enable_prefix_caching = prefix_caching};
  int64_t sliding_layers = 0;
  for (int64_t l = 0; l < config.n_layer; ++l) sliding_layers += config.is_sliding(l) ? 1 : 0;
  // Window blocks all sequences hold at once: each its window and a block more
  // (its chunk's share of the step beyond one token), and the step's chunks.
  const int64_t window_demand =
      config.sliding_window > 0
          ? seqs * (WindowBlocksPerSequence(config.sliding_window, block_size, 1) + 1) +
                (chunk + block_size - 1) / block_size
          : 0;
  const bool windowed = window_pool && sliding_layers > 0 && sliding_layers < config.n_layer &&
                        window_demand < seqs * blocks_per_seq;
  plan.block_bytes = windowed ? KvBuffer::GroupBlockBytes(config, block_size, type, /*sliding=*/false)
                              : KvBuffer::BlockBytes(config, block_size, type);
  plan.window_block_bytes = windowed ? KvBuffer::GroupBlockBytes(config, block_size, type, /*sliding=*/true) : 0;
  const uint64_t main_demand_bytes = static_cast<uint64_t>(seqs * blocks_per_seq) * plan.block_bytes;
  const uint64_t window_demand_bytes = windowed ? static_cast<uint64_t>(window_demand) * plan.window_block_bytes : 0;
  if (kv_bytes == 0) kv_bytes = std::min<uint64_t>(main_demand_bytes + window_demand_bytes, 2ull << 30);
  // The bytes split as the demands split (exactly the demands when kv_bytes is their sum).
  const unsigned __int128 main_blocks = static_cast<unsigned __int128>(kv_bytes) * (seqs * blocks_per_seq) /
                                        (main_demand_bytes + window_demand_bytes);
  plan.kv.num_blocks = static_cast<int>(std::min<unsigned __int128>(main_blocks, INT32_MAX));
  if (windowed) {
    plan.kv.window = config.sliding_window;
    plan.kv.window_num_blocks =
        static_cast<int>((kv_bytes - static_cast<uint64_t>(plan.kv.num_blocks) * plan.block_bytes) /
                         plan.window_block_bytes);
  }
  if (static_cast<int64_t>(plan.kv.num_blocks) * block_size < len) {
    return InvalidArgumentError("kv_cache_memory holds " +
                                std::to_string(static_cast<int64_t>(plan.kv.num_blocks) * block_size) +
                                " tokens, fewer than max_model_len " + std::to_string(len));
  }
  const int64_t window_need =
      std::min(blocks_per_seq, WindowBlocksPerSequence(config.sliding_window, block_size, chunk));
  if (windowed && plan.kv.window_num_blocks < window_need) {
    return InvalidArgumentError("kv_cache_memory holds " + std::to_string(plan.kv.window_num_blocks) +
                                " sliding-window blocks, fewer than the " + std::to_string(window_need) +
                                " one sequence's window and chunk of max_num_batched_tokens need");
  }
  return plan;
}

Engine::Engine(const Model& model, const Vocab* vocab, EngineOptions options, std::unique_ptr<Proposer> proposer)
    : model_(model),
      vocab_(vocab),
      options_(options),
      kv_(options.kv),
      kv_buffer_(model.config(), options.kv.block_size, options.kv.num_blocks, options.kv_type,
                 options.kv.window > 0 ? options.kv.window_num_blocks : 0),
      scheduler_(options.scheduler, &kv_),
      pool_(options.num_threads),
      proposer_(options.speculative.num_tokens > 0 ? std::move(proposer) : nullptr) {
  CHECK(options.kv.window == 0 || options.kv.window == model.config().sliding_window)
      << "the window pool's window must be the model's sliding window";
  spec_stats_.accepted_per_position.assign(std::max(0, options.speculative.num_tokens), 0);
}

Status Engine::Add(Request request) {
  if (active_.count(request.id)) return InvalidArgumentError("request id already in use");
  if (request.max_tokens <= 0) return InvalidArgumentError("max_tokens must be at least 1");
  for (TokenId t : request.prompt) {
    if (t.value() < 0 || t.value() >= model_.config().n_vocab) {
      return InvalidArgumentError("prompt token id " + std::to_string(t.value()) + " is outside the vocabulary");
    }
  }
  if (request.grammar && request.grammar->trie().vocab_size() > model_.config().n_vocab) {
    return InvalidArgumentError("the grammar's vocabulary is larger than the model's");
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
  std::optional<GrammarMatcher> matcher;
  if (request.grammar) matcher.emplace(request.grammar->grammar());
  active_.emplace(id, Active{.request = std::move(request),
                             .sampler = std::move(sampler),
                             .added = clock().Now(),
                             .speculation = SpeculationControl(
                                 options_.speculative.num_tokens, options_.speculative.adaptive,
                                 proposer_ && !proposer_->costly() ? SpeculationControl::kPauseSteps
                                                                   : SpeculationControl::kMaxPauseSteps),
                             .matcher = std::move(matcher)});
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
    const SeqId id = it->first;
    ++it;
    Finish(id);
  }
  return outputs;
}

void Engine::Cancel(SeqId id) { Finish(id); }

void Engine::Finish(SeqId id) {
  scheduler_.Remove(id);
  active_.erase(id);
  if (proposer_) proposer_->Forget(id);
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

std::vector<SeqId> Engine::ProposeDrafts() {
  std::vector<SeqId> ids;
  if (!proposer_) return ids;
  std::vector<Sequence*> decoding = scheduler_.Decoding();
  if (decoding.empty() || static_cast<int>(decoding.size()) > options_.speculative.max_batch) return ids;
  std::vector<Proposer::Query> queries;
  for (Sequence* seq : decoding) {
    Active& a = active_.at(seq->id);
    if (!a.request.speculative) continue;
    // Never past max_tokens (the step emits the accepted tokens and one more),
    // and never past the model length (the scheduler's cap too).
    const int64_t room = std::min(a.request.max_tokens - seq->num_generated() - 1,
                                  options_.scheduler.max_model_len - 1 - seq->num_tokens());
    const int k = static_cast<int>(std::min<int64_t>(a.speculation.Budget(), room));
    if (k <= 0) continue;
    queries.push_back({seq->id, seq->tokens, k, &seq->draft});
    ids.push_back(seq->id);
  }
  if (!queries.empty()) proposer_->Propose(queries, pool_);
  for (const Proposer::Query& q : queries) {
    if (static_cast<int>(q.draft->size()) > q.max_tokens) q.draft->resize(q.max_tokens);
  }
  return ids;
}

Engine::StepBatch Engine::BuildBatch(const SchedulerOutput& plan) const {
  StepBatch b;
  ForwardBatch& batch = b.batch;
  for (size_t i = 0; i < plan.scheduled.size(); ++i) {
    const ScheduledSequence& s = plan.scheduled[i];
    const Sequence& seq = *scheduler_.Find(s.id);
    std::vector<int32_t> table;
    for (BlockId block : kv_.BlockTable(s.id)) table.push_back(block.value());
    b.tables.push_back(std::move(table));
    if (kv_.has_window()) {
      std::vector<int32_t> window_table;
      for (BlockId block : kv_.WindowBlockTable(s.id)) window_table.push_back(block.value());
      b.window_tables.push_back(std::move(window_table));
    }
    const int64_t end = s.first_position + s.num_new_tokens - s.num_draft_tokens;
    for (int64_t p = s.first_position; p < s.first_position + s.num_new_tokens; ++p) {
      batch.tokens.push_back(p < end ? seq.tokens[p] : seq.draft[p - end]);
      batch.positions.push_back(p);
      batch.sequence_index.push_back(static_cast<int32_t>(i));
    }
    b.first_row.push_back(s.samples ? static_cast<int64_t>(batch.logit_tokens.size()) : -1);
    if (s.samples) {
      // The last computed token's logits, then each draft token's.
      const int32_t last = static_cast<int32_t>(batch.tokens.size()) - 1;
      for (int32_t t = last - static_cast<int32_t>(s.num_draft_tokens); t <= last; ++t) batch.logit_tokens.push_back(t);
    }
  }
  for (size_t i = 0; i < b.tables.size(); ++i) {
    batch.sequences.push_back({b.tables[i].data(), static_cast<int64_t>(b.tables[i].size()),
                               kv_.has_window() ? b.window_tables[i].data() : nullptr});
  }
  return b;
}

bool Engine::MaskRows(Active& active, const Sequence& seq, const ScheduledSequence& s, std::span<float> rows) {
  const int64_t n_vocab = model_.config().n_vocab;
  GrammarMasker& masker = *active.request.grammar;
  const int32_t grammar_vocab = masker.trie().vocab_size();
  constexpr float kOff = -std::numeric_limits<float>::infinity();
  GrammarMatcher m = *active.matcher;
  std::string rest;
  for (int64_t i = 0; i <= s.num_draft_tokens; ++i) {
    std::span<float> row = rows.subspan(i * n_vocab, n_vocab);
    // Near max_tokens, only tokens after which the shortest completion still
    // fits in the tokens left (a token adds a byte or more): the answer stays
    // valid; where that cannot be checked, the shortest completion's bytes (and
    // the answer's finish reason is "length"). Nested too deep: the shortest
    // completion's bytes until shallower.
    const int64_t left = active.request.max_tokens - seq.num_generated() - i;
    const bool has_rest = m.Shortest(&rest);
    const bool near_end = has_rest && static_cast<int64_t>(rest.size()) + m.grammar().close_margin >= left;
    bool closing = has_rest && MaxNesting(m.state()) >= kMaxDepth;
    if (!closing) {
      masker.FillMask(m.state(), &mask_bits_);
      if (near_end) closing = !masker.KeepWithinBudget(m.state(), left - 1, &mask_bits_);
    }
    if (closing) {
      masker.trie().Prefixes(rest, &mask_bits_);
      if (near_end && i == 0) active.closing = true;
    }
    // End of generation (and the request's stop tokens) only where the output is complete.
    const bool complete = m.IsComplete() && (!closing || rest.empty());
    std::vector<std::pair<int32_t, float>> keep;
    if (complete) {
      if (vocab_ != nullptr) {
        for (TokenId t : vocab_->end_of_generation()) keep.emplace_back(t.value(), row[t.value()]);
      }
      for (TokenId t : active.request.stop_token_ids) keep.emplace_back(t.value(), row[t.value()]);
    }
    int64_t allowed = static_cast<int64_t>(keep.size());
    for (int32_t w = 0; w * 64 < grammar_vocab; ++w) {
      const uint64_t word = mask_bits_[w];
      allowed += __builtin_popcountll(word);
      if (word == ~uint64_t{0}) continue;
      const int32_t last = std::min(64, grammar_vocab - w * 64);
      for (int32_t b = 0; b < last; ++b) {
        if (!(word >> b & 1)) row[w * 64 + b] = kOff;
      }
    }
    for (int64_t id = grammar_vocab; id < n_vocab; ++id) row[id] = kOff;
    for (const auto& [id, logit] : keep) row[id] = logit;
    if (i == 0 && allowed == 0) return false;
    // The next row follows this draft token; a token the grammar refuses is
    // masked here, so verification rejects it and never reads the rows after.
    if (i < s.num_draft_tokens) {
      const TokenId d = seq.draft[i];
      if (d.value() >= grammar_vocab || !m.Feed(masker.trie().bytes(d.value()))) break;
    }
  }
  return true;
}

RequestOutput Engine::SampleSequence(const ScheduledSequence& s, std::span<float> rows) {
  const int64_t n_vocab = model_.config().n_vocab;
  Active& active = active_.at(s.id);
  const Request& r = active.request;
  Sequence& seq = *scheduler_.Find(s.id);
  std::span<const TokenId> generated(seq.tokens.data() + seq.num_prompt_tokens, seq.num_generated());
  // Log-probabilities come from the raw logits; the sampler changes the rows in place.
  std::vector<float> raw;
  if (r.num_logprobs >= 0) raw.assign(rows.begin(), rows.end());

  std::vector<TokenId> tokens;
  int64_t num_accepted = 0;
  if (active.matcher && !MaskRows(active, seq, s, rows)) {
    // Nothing may follow and the output is not complete (a vocabulary without
    // the bytes the grammar needs): end it rather than sample from nothing.
    RequestOutput out{.id = s.id, .num_prompt_tokens = seq.num_prompt_tokens,
                      .num_generated_tokens = seq.num_generated()};
    out.finish_reason = FinishReason::kStop;
    return out;
  } else if (s.num_draft_tokens == 0) {
    tokens.push_back(active.sampler->Sample(rows, generated));
  } else {
    std::span<const TokenId> draft(seq.draft.data(), s.num_draft_tokens);
    tokens = VerifyDraft(*active.sampler, rows, n_vocab, generated, draft, &num_accepted);
    active.speculation.Record(s.num_draft_tokens, num_accepted);
    spec_stats_.num_drafts += 1;
    spec_stats_.num_draft_tokens += s.num_draft_tokens;
    spec_stats_.num_accepted_tokens += num_accepted;
    spec_stats_.num_emitted_tokens += static_cast<int64_t>(tokens.size());
    for (int64_t i = 0; i < num_accepted && i < static_cast<int64_t>(spec_stats_.accepted_per_position.size()); ++i) {
      ++spec_stats_.accepted_per_position[i];
    }
  }

  // Stops: the first stop token or end of generation ends the output (it is
  // sent); max_tokens caps it.
  FinishReason finish = FinishReason::kNone;
  size_t keep = 0;
  while (keep < tokens.size() && finish == FinishReason::kNone) {
    const TokenId t = tokens[keep++];
    const bool stop_token = std::find(r.stop_token_ids.begin(), r.stop_token_ids.end(), t) != r.stop_token_ids.end();
    // Under a grammar, end of generation is only ever allowed where the answer may end.
    const bool eog = (!r.ignore_eos || active.matcher) && vocab_ != nullptr && vocab_->IsEndOfGeneration(t);
    if (stop_token || eog) {
      finish = active.closing ? FinishReason::kLength : FinishReason::kStop;
    } else if (active.matcher && !active.matcher->Feed(r.grammar->trie().bytes(t.value()))) {
      finish = FinishReason::kStop;  // never: the mask allowed only tokens the matcher takes
    } else if (active.matcher && active.matcher->IsFinished()) {
      // The value is whole and nothing may follow it; "length" when max_tokens shortened it.
      finish = active.closing ? FinishReason::kLength : FinishReason::kStop;
    } else if (seq.num_generated() + static_cast<int64_t>(keep) >= r.max_tokens) {
      finish = FinishReason::kLength;
    }
  }
  tokens.resize(keep);
  scheduler_.AppendTokens(s.id, tokens, std::min<int64_t>(num_accepted, static_cast<int64_t>(keep)));

  RequestOutput out{.id = s.id, .num_prompt_tokens = seq.num_prompt_tokens, .num_generated_tokens = seq.num_generated()};
  if (!raw.empty()) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::vector<float> row(raw.begin() + i * n_vocab, raw.begin() + (i + 1) * n_vocab);
      out.logprobs.push_back(LogprobsOf(row, tokens[i], r.num_logprobs));
    }
  }
  out.new_tokens = std::move(tokens);
  out.num_cached_tokens = std::max<int64_t>(0, seq.num_cached_tokens);
  if (!active.reported_queue) {
    out.queue_seconds = active.queue_seconds;
    active.reported_queue = true;
  }
  out.finish_reason = finish;
  return out;
}

std::vector<RequestOutput> Engine::Step() {
  std::vector<RequestOutput> outputs;
  const std::vector<SeqId> proposed = ProposeDrafts();
  SchedulerOutput plan = scheduler_.Schedule();
  if (!plan.empty()) {
    const auto now = clock().Now();
    for (const ScheduledSequence& s : plan.scheduled) {
      Active& a = active_.at(s.id);
      if (a.queue_seconds < 0) a.queue_seconds = std::chrono::duration<double>(now - a.added).count();
    }
    StepBatch b = BuildBatch(plan);
    std::vector<float> logits = model_.Forward(b.batch, kv_buffer_, pool_);
    scheduler_.OnStepDone(plan);

    const int64_t n_vocab = model_.config().n_vocab;
    for (size_t i = 0; i < plan.scheduled.size(); ++i) {
      if (b.first_row[i] < 0) continue;
      const ScheduledSequence& s = plan.scheduled[i];
      std::span<float> rows(logits.data() + b.first_row[i] * n_vocab, (s.num_draft_tokens + 1) * n_vocab);
      RequestOutput out = SampleSequence(s, rows);
      if (out.finish_reason != FinishReason::kNone) Finish(s.id);
      outputs.push_back(std::move(out));
    }
  }
  // A draft the step did not compute (no budget or blocks, or preempted) is dropped.
  for (SeqId id : proposed) {
    if (Sequence* seq = scheduler_.Find(id)) seq->draft.clear();
  }
  return outputs;
}

}  // namespace tachyon
