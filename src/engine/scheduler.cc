#include "engine/scheduler.h"

#include <algorithm>

#include "base/check.h"

namespace tachyon {

Scheduler::Scheduler(SchedulerOptions options, KvCacheManager* kv) : options_(options), kv_(kv) {}

Status Scheduler::Add(Sequence sequence) {
  const int64_t n = sequence.num_tokens();
  if (n == 0) return InvalidArgumentError("the prompt is empty");
  if (n + 1 > options_.max_model_len) {
    return InvalidArgumentError("the prompt has " + std::to_string(n) + " tokens; with the first generated token it "
                                "exceeds the maximum model length of " + std::to_string(options_.max_model_len));
  }
  const int64_t blocks = (n + 1 + kv_->block_size() - 1) / kv_->block_size();
  if (blocks > kv_->num_blocks()) {
    return ResourceExhaustedError("the prompt needs " + std::to_string(blocks) + " KV blocks; the cache has " +
                                  std::to_string(kv_->num_blocks()));
  }
  const int64_t window_blocks =
      std::min(blocks, kv_->WindowBlocksPerSequence(std::min(n + 1, options_.max_num_batched_tokens)));
  if (window_blocks > kv_->window_num_blocks() && kv_->has_window()) {
    return ResourceExhaustedError("the prompt needs " + std::to_string(window_blocks) +
                                  " sliding-window KV blocks; the window cache has " +
                                  std::to_string(kv_->window_num_blocks()));
  }
  CHECK(!sequences_.count(sequence.id)) << "sequence " << sequence.id.value() << " added twice";
  sequence.arrival = next_arrival_++;
  sequence.prompt_block_hashes = kv_->HashFullBlocks(
      std::span<const TokenId>(sequence.tokens.data(), sequence.num_prompt_tokens), sequence.cache_key);
  sequence.status = SequenceStatus::kWaiting;
  sequence.num_computed_tokens = 0;
  const SeqId id = sequence.id;
  const int priority = sequence.priority;
  sequences_.emplace(id, std::make_unique<Sequence>(std::move(sequence)));
  // Keep waiting_ ordered by (priority, arrival): insert after equal priorities.
  auto it = std::find_if(waiting_.begin(), waiting_.end(),
                         [&](SeqId other) { return sequences_.at(other)->priority > priority; });
  waiting_.insert(it, id);
  return Status::Ok();
}

Sequence* Scheduler::Find(SeqId id) {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

const Sequence* Scheduler::Find(SeqId id) const {
  auto it = sequences_.find(id);
  return it == sequences_.end() ? nullptr : it->second.get();
}

std::vector<Sequence*> Scheduler::Decoding() {
  std::vector<Sequence*> out;
  for (SeqId id : running_) {
    Sequence* seq = sequences_.at(id).get();
    if (!seq->held && seq->num_computed_tokens + 1 == seq->num_tokens()) out.push_back(seq);
  }
  return out;
}

SeqId Scheduler::PreemptLast(SchedulerOutput* out) {
  CHECK(!running_.empty());
  const SeqId victim = running_.back();
  running_.pop_back();
  Sequence& seq = *sequences_.at(victim);
  kv_->Free(victim);
  seq.num_computed_tokens = 0;
  seq.status = SequenceStatus::kWaiting;
  ++seq.num_preemptions;
  waiting_.push_front(victim);  // first in line once blocks free up
  out->preempted.push_back(victim);
  return victim;
}

bool Scheduler::IsInFlight(const Sequence& seq, int64_t block_idx) const {
  if (block_idx >= static_cast<int64_t>(seq.prompt_block_hashes.size())) return false;
  const int64_t bs = kv_->block_size();
  for (SeqId id : running_) {
    const Sequence& other = *sequences_.at(id);
    // Still to compute the block (not yet cached), and it is the same block.
    if (block_idx < static_cast<int64_t>(other.prompt_block_hashes.size()) &&
        other.num_computed_tokens < (block_idx + 1) * bs &&
        other.prompt_block_hashes[block_idx] == seq.prompt_block_hashes[block_idx]) {
      return true;
    }
  }
  return false;
}

Scheduler::Admission Scheduler::AdmitWaiting(Sequence& seq, int64_t* budget, SchedulerOutput* out) {
  CachedPrefix prefix = kv_->FindCachedPrefix(seq.tokens, seq.cache_key);
  const int64_t bs = kv_->block_size();
  const int64_t next_block = prefix.num_tokens / bs;
  // Never the block of the last token: that one is computed whatever the cache holds.
  if (options_.deduplicate_in_flight_prefixes && (next_block + 1) * bs < seq.num_tokens() &&
      IsInFlight(seq, next_block)) {
    return Admission::kWaitsForInFlightPrefix;
  }
  const int64_t n = std::min(seq.num_tokens() - prefix.num_tokens, *budget);
  if (n <= 0) return Admission::kNoRoom;
  if (!kv_->Allocate(seq.id, prefix.num_tokens + n, prefix)) return Admission::kNoRoom;
  kv_->CountPrefixQuery(seq.num_tokens(), prefix.num_tokens);
  if (seq.num_cached_tokens < 0) seq.num_cached_tokens = prefix.num_tokens;
  seq.num_computed_tokens = prefix.num_tokens;
  seq.status = SequenceStatus::kRunning;
  running_.push_back(seq.id);
  out->scheduled.push_back({seq.id, prefix.num_tokens, n, prefix.num_tokens + n == seq.num_tokens()});
  *budget -= n;
  return Admission::kAdmitted;
}

SchedulerOutput Scheduler::Schedule() {
  SchedulerOutput out;
  int64_t budget = options_.max_num_batched_tokens;

  // 1. Running sequences, oldest first; preempt the newest when blocks run out.
  for (size_t i = 0; i < running_.size() && budget > 0;) {
    Sequence& seq = *sequences_.at(running_[i]);
    const int64_t n = seq.held ? 0 : std::min(seq.num_tokens() - seq.num_computed_tokens, budget);
    if (n <= 0) {
      ++i;
      continue;
    }
    bool allocated = kv_->Allocate(seq.id, seq.num_computed_tokens + n);
    while (!allocated && running_.back() != seq.id) {
      PreemptLast(&out);
      allocated = kv_->Allocate(seq.id, seq.num_computed_tokens + n);
    }
    if (!allocated) {
      PreemptLast(&out);  // not even alone does it fit this step: it waits
      break;
    }
    out.scheduled.push_back({seq.id, seq.num_computed_tokens, n, seq.num_computed_tokens + n == seq.num_tokens()});
    budget -= n;
    ++i;
  }

  // 2. Waiting sequences, while there is budget, room and no preemption this
  // step. One that waits for an in-flight prefix keeps its place in line.
  if (out.preempted.empty()) {
    for (auto it = waiting_.begin();
         it != waiting_.end() && budget > 0 && static_cast<int>(running_.size()) < options_.max_num_seqs;) {
      Sequence& seq = *sequences_.at(*it);
      if (seq.held) {
        ++it;
        continue;
      }
      Admission admission = AdmitWaiting(seq, &budget, &out);
      if (admission == Admission::kNoRoom) break;
      if (admission == Admission::kWaitsForInFlightPrefix) {
        ++it;
        continue;
      }
      it = waiting_.erase(it);
    }
  }
  // 3. Drafts: a decode computes its draft too, with what is left of the budget
  // and the free blocks (so a draft never preempts or delays anyone), within
  // the model length.
  for (ScheduledSequence& s : out.scheduled) {
    Sequence& seq = *sequences_.at(s.id);
    if (seq.draft.empty() || budget <= 0 || s.num_new_tokens != 1 || !s.samples) continue;
    int64_t num_draft = std::min({static_cast<int64_t>(seq.draft.size()), budget,
                                  options_.max_model_len - 1 - seq.num_tokens()});
    if (num_draft <= 0 || !kv_->Allocate(seq.id, seq.num_tokens() + num_draft)) continue;
    s.num_new_tokens += num_draft;
    s.num_draft_tokens = num_draft;
    budget -= num_draft;
  }
  for (const ScheduledSequence& s : out.scheduled) out.num_batched_tokens += s.num_new_tokens;
  return out;
}

void Scheduler::OnStepDone(const SchedulerOutput& output) {
  for (const ScheduledSequence& s : output.scheduled) {
    Sequence* seq = Find(s.id);
    if (seq == nullptr || seq->status != SequenceStatus::kRunning) continue;  // removed meanwhile
    seq->num_computed_tokens = s.first_position + s.num_new_tokens - s.num_draft_tokens;
    num_prompt_tokens_computed_ +=
        std::max<int64_t>(0, std::min(seq->num_computed_tokens, seq->num_prompt_tokens) - s.first_position);
    kv_->CacheComputedBlocks(s.id, seq->tokens, seq->num_computed_tokens, seq->cache_key);
    kv_->ReleaseOutsideWindow(s.id, seq->num_computed_tokens);
  }
}

void Scheduler::AppendToken(SeqId id, TokenId token) {
  Sequence* seq = Find(id);
  CHECK(seq != nullptr);
  seq->tokens.push_back(token);
}

void Scheduler::AppendTokens(SeqId id, std::span<const TokenId> tokens, int64_t num_verified) {
  Sequence* seq = Find(id);
  CHECK(seq != nullptr);
  CHECK(num_verified >= 0 && num_verified <= static_cast<int64_t>(tokens.size()));
  CHECK(seq->num_computed_tokens == seq->num_tokens()) << "tokens appended to a sequence with uncomputed tokens";
  seq->tokens.insert(seq->tokens.end(), tokens.begin(), tokens.end());
  seq->draft.clear();
  seq->num_computed_tokens += num_verified;
  kv_->CacheComputedBlocks(id, seq->tokens, seq->num_computed_tokens, seq->cache_key);
  kv_->ReleaseOutsideWindow(id, seq->num_computed_tokens);
  // Blocks for positions past the new tokens held only rejected draft positions.
  kv_->Shrink(id, seq->num_tokens());
}

void Scheduler::SetHeld(SeqId id, bool held) {
  if (Sequence* seq = Find(id)) seq->held = held;
}

bool Scheduler::HasRunnable() const {
  for (const auto& [id, seq] : sequences_) {
    if (!seq->held) return true;
  }
  return false;
}

void Scheduler::Remove(SeqId id) {
  auto it = sequences_.find(id);
  if (it == sequences_.end()) return;
  kv_->Free(id);
  running_.erase(std::remove(running_.begin(), running_.end(), id), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), id), waiting_.end());
  sequences_.erase(it);
}

}  // namespace tachyon
