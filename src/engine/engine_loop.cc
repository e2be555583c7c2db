#include "engine/engine_loop.h"

namespace tachyon {

EngineLoop::EngineLoop(std::unique_ptr<Engine> engine) : engine_(std::move(engine)) {
  thread_ = std::thread([this] { Run(); });
}

EngineLoop::~EngineLoop() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void EngineLoop::Submit(Request request, Callback callback, BlockedFn blocked) {
  ++num_in_flight_;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    submitted_.push_back({std::move(request), std::move(callback), std::move(blocked)});
  }
  wake_.notify_one();
}

void EngineLoop::Cancel(SeqId id) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    cancelled_.push_back(id);
  }
  wake_.notify_one();
}

bool EngineLoop::WaitUntilIdle(double seconds) const {
  std::unique_lock<std::mutex> lock(mutex_);
  return stepped_.wait_for(lock, std::chrono::duration<double>(seconds), [&] {
    return num_in_flight_.load() == 0 && submitted_.empty() && cancelled_.empty() && stats_.num_running == 0 &&
           stats_.num_waiting == 0;
  });
}

EngineStats EngineLoop::Stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void EngineLoop::Run() {
  while (true) {
    std::deque<Submission> submitted;
    std::deque<SeqId> cancelled;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      auto ready = [&] {
        return stopping_ || !submitted_.empty() || !cancelled_.empty() || engine_->HasRunnableWork();
      };
      if (engine_->HasWork() && !ready()) {
        // Every request is held: look again soon (their clients may have caught up,
        // or a deadline passed).
        wake_.wait_for(lock, std::chrono::milliseconds(5), ready);
      } else {
        wake_.wait(lock, ready);
      }
      if (stopping_) break;
      submitted.swap(submitted_);
      cancelled.swap(cancelled_);
    }
    for (Submission& s : submitted) {
      const SeqId id = s.request.id;
      Status status = engine_->Add(std::move(s.request));
      if (!status.ok()) {
        --num_in_flight_;
        s.callback(nullptr, status);
        continue;
      }
      callbacks_[id] = std::move(s.callback);
      if (s.blocked) blocked_[id] = std::move(s.blocked);
    }
    for (SeqId id : cancelled) {
      if (callbacks_.erase(id)) {
        engine_->Cancel(id);
        blocked_.erase(id);
        --num_in_flight_;
      }
    }
    for (const auto& [id, blocked] : blocked_) engine_->SetHeld(id, blocked());
    std::vector<RequestOutput> outputs = engine_->Expire(engine_->clock().Now());
    std::vector<RequestOutput> stepped = engine_->Step();
    if (!stepped.empty()) {
      ++decode_steps_;
      decode_sequences_ += static_cast<int64_t>(stepped.size());
    }
    for (RequestOutput& output : stepped) outputs.push_back(std::move(output));
    for (const RequestOutput& output : outputs) {
      auto it = callbacks_.find(output.id);
      if (it == callbacks_.end()) continue;
      if (output.finish_reason == FinishReason::kNone) {
        it->second(&output, Status::Ok());
        continue;
      }
      // Finished: counted out before the callback, so a caller woken by it sees the count.
      Callback callback = std::move(it->second);
      callbacks_.erase(it);
      blocked_.erase(output.id);
      --num_in_flight_;
      callback(&output, Status::Ok());
    }
    std::lock_guard<std::mutex> lock(mutex_);
    stats_ = {.num_running = engine_->scheduler().num_running(),
              .num_waiting = engine_->scheduler().num_waiting(),
              .kv_usage = engine_->kv().Usage(),
              .prefix_query_tokens = engine_->kv().prefix_query_tokens(),
              .prefix_hit_tokens = engine_->kv().prefix_hit_tokens(),
              .prompt_tokens_computed = engine_->scheduler().num_prompt_tokens_computed(),
              .decode_steps = decode_steps_,
              .decode_sequences = decode_sequences_,
              .speculative = engine_->speculative_stats()};
    stepped_.notify_all();
  }
  // Shutting down: whatever is left is cancelled.
  for (auto& [id, callback] : callbacks_) engine_->Cancel(id);
  callbacks_.clear();
  blocked_.clear();
}

}  // namespace tachyon
