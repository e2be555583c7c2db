#include "gateway/gateway_call.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <utility>

#include "base/timer_queue.h"
#include "gateway/cache/exact_cache.h"


namespace tachyon {
namespace {

double Since(Clock::time_point a, Clock::time_point b) { return SecondsBetween(a, b); }

using SteadyTime = std::chrono::steady_clock::time_point;

SteadyTime After(SteadyTime t, double seconds) {
  return t + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

const char* OperationName(Endpoint e) { return e == Endpoint::kChatCompletions ? "chat" : "text_completion"; }

// An attempt's first byte, for hedging: output (content, reasoning, a tool
// call) or a choice's end. A role-only chunk says nothing of when output comes.
bool IsOutput(const BackendChunk& c) { return !c.text.empty() || c.has_tool_calls || !c.finish_reason.empty(); }

// One request through a route: its attempts, in the plan's order, until one answers.
//
// Without hedging one attempt is in progress at a time: a failure before
// anything reached the client starts the next. With the route's `hedge`, a
// timer starts the plan's next backend beside a first attempt whose first byte
// is late; the first attempt to produce output (or to end, for a whole answer)
// is the winner: its chunks (held until then) go to the client and the others
// are cancelled at once. Invariants: every attempt started is in live_ until
// it ends (OnDone) or is abandoned (a loser, or the client went away), and its
// slot's outstanding count is raised when it starts and lowered exactly once,
// by whichever of the two comes first; only the winner's chunks reach the sink.
class GatewayCall : public std::enable_shared_from_this<GatewayCall> {
 public:
  GatewayCall(std::shared_ptr<const Gateway> gateway, Route* route, GatewayRequest request,
              std::shared_ptr<GatewaySink> sink)
      : gateway_(std::move(gateway)), route_(route), pending_(std::move(request)), sink_(std::move(sink)) {
    info_.route = route_->name();
  }

  // The pipeline, then the plan's first attempt.
  void Start() {
    std::optional<StageAnswer> answer = gateway_->pipeline().Run(pending_);
    info_.cache = pending_.cache_status;
    info_.cache_age_seconds = pending_.cache_age_seconds;
    info_.cache_similarity = pending_.cache_similarity;
    info_.route_class = route_->ClassName(pending_.route_class);
    info_.route_reason = pending_.route_reason;
    info_.trimmed_tokens = pending_.trimmed_tokens;
    info_.stage_seconds = pending_.stage_seconds;
    trace_ = pending_.trace;
    if (answer) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (finished_) return;
        finished_ = true;
      }
      Replay(*answer);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      const Clock::time_point now = gateway_->clock().Now();
      plan_ = route_->Plan(*pending_.request, pending_.route_class, now);
      if (gateway_->pipeline().wants_answers() && (!pending_.cache_key.empty() || !pending_.semantic_scope.empty())) {
        capture_ = std::make_unique<Capture>();
        capture_->request = pending_;  // before the id moves on
      }
      const std::optional<HedgeOptions>& hedge = route_->config().hedge;
      hedging_ = hedge && pending_.hedge && plan_.size() > 1;
      if (hedging_) {
        route_->hedge_budget().Earn();
        BackendSlot& first = *route_->slots()[plan_[0]];
        std::lock_guard<std::mutex> slot_lock(first.mutex);
        hedge_delay_ = HedgeDelay(*hedge, first.first_bytes, now);
      }
      request_ = BackendRequest{.request = pending_.request,
                                .id = std::move(pending_.id),
                                .created = pending_.created,
                                .model_name = route_->name(),
                                .arrival = pending_.arrival,
                                .output_blocked = pending_.output_blocked,
                                .prompt_cache = route_->config().prompt_cache};
    }
    if (Coalesces()) {
      JoinFlight();
      return;
    }
    NextAttempt(false);
  }

  const Gateway& gateway() const { return *gateway_; }

  void Cancel() {
    std::vector<CancelFn> cancels;
    std::shared_ptr<Flight> flight, followed;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || detached_) return;
      if (flight_ && flight_->num_followers() > 0) {
        // Others follow this call's answer: it goes on for them, without its client.
        detached_ = true;
        return;
      }
      flight = std::move(flight_);
      followed = std::move(followed_);
      finished_ = cancelled_ = true;
      CancelHedgeTimer();
      if (!live_.empty()) {
        const Attempt& counted = winner_ >= 0 ? *Live(winner_) : live_.front();
        route_->series(plan_[counted.plan_index]).cancelled->Add();
      }
      for (Attempt& a : live_) Abandon(a, &cancels);
      live_.clear();
      CountHedges();
    }
    for (CancelFn& cancel : cancels) cancel();
    if (followed) followed->Leave(following_);
    if (flight) {
      flight->Fail(Flight::FailKind::kRetry);  // a follower that joined just now leads instead
      gateway_->flights().Land(pending_.cache_key, flight);
    }
  }

  void OnChunk(int id, BackendChunk chunk) {
    std::vector<BackendChunk> out;
    std::vector<CancelFn> losers;
    bool detached;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      Attempt* a = Live(id);
      if (a == nullptr) return;
      detached = detached_;
      if (winner_ < 0) {
        if (hedging_ && !IsOutput(chunk)) {
          a->held.push_back(std::move(chunk));
          return;
        }
        Win(*a, &losers);
        out = std::move(a->held);
      }
      out.push_back(std::move(chunk));
      for (const BackendChunk& c : out) Sent(*a, c);
    }
    for (CancelFn& cancel : losers) cancel();
    if (detached) return;
    for (const BackendChunk& c : out) sink_->OnChunk(c, info_);
  }

  void OnDone(int id, BackendResult result) {
    const Clock::time_point now = gateway_->clock().Now();
    const SteadyTime ended_at = std::chrono::steady_clock::now();
    bool retry = false, finish = false;
    std::vector<CancelFn> losers;
    // The ended attempt's cancel function is dropped (outside the lock): it holds the
    // backend's call state, which holds this call's sink, which holds this call. Kept,
    // that cycle leaked every call that was not cancelled.
    CancelFn ended;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      Attempt* a = Live(id);
      if (a == nullptr) return;
      BackendSlot& slot = SlotOf(*a);
      const Route::Series& s = route_->series(plan_[a->plan_index]);
      const bool failure = result.kind == BackendResult::Kind::kFailed || result.kind == BackendResult::Kind::kBroken;
      // Nothing of it reached the client (a hedged call holds its chunks until it wins):
      // another attempt may still answer.
      const bool retryable = winner_ < 0 && (result.kind == BackendResult::Kind::kFailed ||
                                              (hedging_ && result.kind == BackendResult::Kind::kBroken));
      if (winner_ < 0 && !retryable) {
        Win(*a, &losers);
        a = Live(id);  // the losers left live_
      }
      if (result.kind == BackendResult::Kind::kOk && !got_content_) {
        // No content chunk came (a whole answer, or a stream of tool calls): the
        // first token is the one the backend saw, else the end.
        info_.ttft_seconds = result.first_token_seconds >= 0
                                 ? Since(request_.arrival, a->clock_started) + result.first_token_seconds
                                 : Since(request_.arrival, now);
        s.ttft->Observe(info_.ttft_seconds);
      }
      if (!committed_) info_.upstream_seconds = std::chrono::duration<double>(ended_at - a->started).count();
      if (trace_) AttemptSpan(*a, &result, ended_at);
      if (!result.error_kind.empty() && result.kind != BackendResult::Kind::kOk) {
        slot.errors->With({slot.backend->name(), result.error_kind}).Add();
      }
      if (result.first_byte_seconds >= 0) slot.first_byte->Observe(result.first_byte_seconds);
      if (result.error_kind == "connect" && !slot.discovered_from.empty()) {
        gateway_->OnConnectFailure(slot.discovered_from);  // a replica that went away: resolve its name again
      }
      {
        std::lock_guard<std::mutex> slot_lock(slot.mutex);
        --slot.outstanding;
        slot.in_flight->Set(slot.outstanding);
        if (failure && result.retry_after_seconds > 0) {
          slot.breaker.OpenFor(now, result.retry_after_seconds);  // it said when to come back
        } else if (failure) {
          slot.breaker.OnFailure(now);
        } else {
          slot.breaker.OnSuccess();
        }
        slot.breaker_state->Set(static_cast<double>(slot.breaker.state(now)));
        if (result.kind == BackendResult::Kind::kOk) {
          // A whole answer's TTFT is its end.
          const double ttft = info_.ttft_seconds >= 0 ? info_.ttft_seconds : Since(request_.arrival, now);
          const double alpha = route_->config().ewma_alpha;
          slot.ttft_ewma = slot.ttft_ewma < 0 ? ttft : alpha * ttft + (1 - alpha) * slot.ttft_ewma;
          slot.ttft_ewma_gauge->Set(slot.ttft_ewma);
        }
      }
      const size_t plan_index = a->plan_index;
      ended = std::move(a->cancel);
      live_.erase(live_.begin() + (a - live_.data()));
      if (retryable) {
        last_failure_ = std::move(result);
        if (!live_.empty()) {
          // A hedge (or the attempt it hedged) is still running: it may answer.
        } else if (next_plan_ < plan_.size()) {
          retry = true;
          route_->retries().Add();
        } else {
          finish = true;
          done_ = std::move(*last_failure_);
          Finished(now);
        }
      } else {
        finish = true;
        done_ = std::move(result);
        Finished(now);
        if (done_.kind == BackendResult::Kind::kOk) {
          s.success->Add();
          s.e2e->Observe(info_.e2e_seconds);
          if (done_.num_cached_tokens > 0) s.cached_tokens->Add(static_cast<double>(done_.num_cached_tokens));
          if (done_.cache_write_tokens > 0) s.cache_write_tokens->Add(static_cast<double>(done_.cache_write_tokens));
          // Another backend than the policy's first choice, or (fallback policy) than the first configured one.
          if (plan_index > 0 || (route_->config().policy == PolicyKind::kFallback && plan_[0] != 0)) {
            route_->fallbacks().Add();
          }
        }
      }
    }
    for (CancelFn& cancel : losers) cancel();
    if (retry) {
      NextAttempt(false);
      return;
    }
    if (!finish) return;
    const bool store = capture_ && done_.kind == BackendResult::Kind::kOk;
    if (store && trace_) trace_->Hold();  // the cache write's span ends after the answer
    if (!detached_) sink_->OnDone(done_, info_);
    if (store) {
      const SteadyTime start = std::chrono::steady_clock::now();
      Store();
      if (trace_) {
        trace_->Add(Span{.name = "gateway.cache_write", .id = NewSpanId(), .parent = trace_->root(), .start = start,
                         .end = std::chrono::steady_clock::now()});
        trace_->Release();
      }
    }
    LandFlight();  // after the store: a request that misses from now on finds the answer there
  }

 private:
  class AttemptSink : public BackendSink {
   public:
    AttemptSink(std::shared_ptr<GatewayCall> call, int attempt) : call_(std::move(call)), attempt_(attempt) {}
    void OnChunk(BackendChunk chunk) override { call_->OnChunk(attempt_, std::move(chunk)); }
    void OnDone(BackendResult result) override { call_->OnDone(attempt_, std::move(result)); }

   private:
    std::shared_ptr<GatewayCall> call_;
    int attempt_;
  };

  // A backend started for this call.
  struct Attempt {
    int id = -1;
    size_t plan_index = 0;    // into plan_
    bool hedge = false;       // started by the hedge timer
    CancelFn cancel;          // set once the backend's Start returned
    SteadyTime started;
    Clock::time_point clock_started;
    SpanId span;              // traced requests
    std::vector<BackendChunk> held;  // a hedged call's chunks before a winner is known
  };

  // mutex_ held for all of these.
  Attempt* Live(int id) {
    for (Attempt& a : live_) {
      if (a.id == id) return &a;
    }
    return nullptr;
  }
  BackendSlot& SlotOf(const Attempt& a) const { return *route_->slots()[plan_[a.plan_index]]; }

  // The call's answer is a's: its first byte is a sample of its backend's, the
  // others are abandoned (their cancel functions go to *losers, called outside
  // the lock) and the hedges' outcomes are known.
  void Win(Attempt& a, std::vector<CancelFn>* losers) {
    winner_ = a.id;
    CancelHedgeTimer();
    BackendSlot& slot = SlotOf(a);
    {
      std::lock_guard<std::mutex> slot_lock(slot.mutex);
      slot.first_bytes.Add(gateway_->clock().Now(), SecondsBetween(a.started, std::chrono::steady_clock::now()));
    }
    info_.backend = slot.backend->name();
    info_.backend_kind = slot.backend->kind();
    info_.response_model = slot.backend->model_name();
    info_.hedge_won = a.hedge;
    for (Attempt& other : live_) {
      if (other.id != a.id) Abandon(other, losers);
    }
    std::erase_if(live_, [&](const Attempt& other) { return other.id != a.id; });
    CountHedges();
  }

  // An attempt given up before it ended (it lost, or the client went away): its
  // slot's count goes down, the time it ran is a lower bound of its first byte,
  // and its backend is told to stop (at once, or when its Start returns).
  void Abandon(Attempt& a, std::vector<CancelFn>* cancels) {
    BackendSlot& slot = SlotOf(a);
    const SteadyTime now = std::chrono::steady_clock::now();
    {
      std::lock_guard<std::mutex> slot_lock(slot.mutex);
      --slot.outstanding;
      slot.breaker.OnAbandoned();
      slot.in_flight->Set(slot.outstanding);
      if (a.id != winner_) slot.first_bytes.Add(gateway_->clock().Now(), SecondsBetween(a.started, now));
    }
    if (trace_) AttemptSpan(a, nullptr, now);
    if (a.cancel) {
      cancels->push_back(std::move(a.cancel));
    } else {
      doomed_.push_back(a.id);
    }
  }

  // The call ends (mutex_ held): no more hedges; the route's error count for a failure.
  void Finished(Clock::time_point now) {
    finished_ = true;
    CancelHedgeTimer();
    CountHedges();
    info_.e2e_seconds = Since(request_.arrival, now);
    if (done_.kind != BackendResult::Kind::kOk) {
      route_->error(info_.backend, done_.error_kind.empty() ? "error" : done_.error_kind).Add();
    }
  }

  // Each hedge started, once: won, lost, or cancelled (no attempt answered).
  void CountHedges() {
    if (hedges_counted_ || hedge_ids_.empty()) return;
    hedges_counted_ = true;
    for (int id : hedge_ids_) route_->hedges(id == winner_ ? "won" : winner_ >= 0 ? "lost" : "cancelled").Add();
  }

  void CancelHedgeTimer() {
    if (hedge_timer_ != 0) TimerQueue::Shared().Cancel(std::exchange(hedge_timer_, 0));
  }

  // The next hedge, after the delay, while no attempt has won.
  void ScheduleHedge() {
    std::weak_ptr<GatewayCall> weak = weak_from_this();
    hedge_timer_ = TimerQueue::Shared().After(hedge_delay_, [weak] {
      if (std::shared_ptr<GatewayCall> self = weak.lock()) self->Hedge();
    });
  }

  // The hedge timer fired: start the plan's next backend, if the budget allows.
  void Hedge() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      hedge_timer_ = 0;
      if (finished_ || winner_ >= 0 || info_.hedges >= route_->config().hedge->max || next_plan_ >= plan_.size()) {
        return;
      }
      if (!route_->hedge_budget().Take()) {
        route_->hedges_refused().Add();
        return;
      }
    }
    if (!NextAttempt(true)) route_->hedge_budget().Refund();
  }

  // A chunk of the winner on its way to the client (mutex_ held): the answer is
  // committed, the capture and the latency series see it.
  void Sent(const Attempt& a, const BackendChunk& chunk) {
    if (!committed_) {
      first_chunk_ = std::chrono::steady_clock::now();
      info_.upstream_seconds = std::chrono::duration<double>(first_chunk_ - a.started).count();
    }
    committed_ = true;
    if (capture_) {
      // An answer with tool calls is not stored (the capture keeps text only), and
      // reasoning is not part of the answer: a hit never hands it to another client.
      if (chunk.has_tool_calls) capture_->storable = false;
      if (!chunk.reasoning) capture_->text += chunk.text;
      capture_->streamed = true;
    }
    if (flight_) {
      if (chunk.has_tool_calls) {
        flight_->Fail(Flight::FailKind::kAlone);  // a flight carries text only
      } else if (!chunk.reasoning) {
        flight_->Text(chunk.text);
      }
    }
    if (!chunk.text.empty()) {
      const Clock::time_point now = gateway_->clock().Now();
      const Route::Series& s = route_->series(plan_[a.plan_index]);
      if (!got_content_) {
        got_content_ = true;
        info_.ttft_seconds = Since(request_.arrival, now);
        s.ttft->Observe(info_.ttft_seconds);
        first_content_ = std::chrono::steady_clock::now();
      } else {
        s.itl->Observe(Since(last_content_, now));
      }
      last_content_ = now;
    }
  }

  // Starts the next backend of the plan whose breaker lets it through (a hedge:
  // beside the attempts in progress), or, when none is left and nothing is in
  // progress, ends the call. Returns whether an attempt started.
  bool NextAttempt(bool hedge) {
    std::shared_ptr<Backend> backend;
    int id = -1;
    std::string traceparent;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || (hedge && winner_ >= 0)) return false;
      const Clock::time_point now = gateway_->clock().Now();
      size_t plan_index = 0;
      for (; next_plan_ < plan_.size(); ++next_plan_) {
        BackendSlot& slot = *route_->slots()[plan_[next_plan_]];
        std::lock_guard<std::mutex> slot_lock(slot.mutex);
        if (!slot.breaker.Allow(now)) continue;  // opened since the plan was made
        ++slot.outstanding;
        slot.in_flight->Set(slot.outstanding);
        backend = slot.backend;
        plan_index = next_plan_++;
        break;
      }
      if (!backend) {
        if (hedge || !live_.empty()) return false;  // the attempts in progress go on
        done_ = last_failure_ ? std::move(*last_failure_) : NoBackend();
        Finished(now);
      } else {
        Attempt a{.id = next_id_++,
                  .plan_index = plan_index,
                  .hedge = hedge,
                  .started = std::chrono::steady_clock::now(),
                  .clock_started = now};
        id = a.id;
        ++info_.attempts;
        if (hedge) {
          ++info_.hedges;
          hedge_ids_.push_back(id);
        }
        if (live_.empty()) {  // the answering backend, unless another wins
          info_.backend = backend->name();
          info_.backend_kind = backend->kind();
          info_.response_model = backend->model_name();
        }
        if (trace_) {
          a.span = NewSpanId();
          traceparent = trace_->Traceparent(a.span);
        }
        live_.push_back(std::move(a));
        if (hedging_ && hedge_timer_ == 0 && info_.hedges < route_->config().hedge->max && next_plan_ < plan_.size()) {
          ScheduleHedge();
        }
      }
    }
    if (!backend) {
      sink_->OnDone(done_, info_);
      LandFlight();
      return false;
    }
    if (backend->StartIsCostly() && gateway_->offload()) {
      gateway_->offload()([self = shared_from_this(), backend, id, traceparent] {
        self->StartBackend(*backend, id, traceparent);
      });
    } else {
      StartBackend(*backend, id, traceparent);
    }
    return true;
  }

  void StartBackend(Backend& backend, int id, const std::string& traceparent) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || Live(id) == nullptr) {  // abandoned while it waited for a worker
        std::erase(doomed_, id);
        return;
      }
    }
    BackendRequest request = request_;
    request.traceparent = traceparent;
    CancelFn cancel = backend.Start(std::move(request), std::make_shared<AttemptSink>(shared_from_this(), id));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (Attempt* a = Live(id); a != nullptr && !finished_) {
        a->cancel = std::move(cancel);
        return;
      }
      auto doomed = std::find(doomed_.begin(), doomed_.end(), id);
      if (doomed == doomed_.end()) return;  // it ended while Start ran
      doomed_.erase(doomed);
    }
    cancel();  // abandoned while Start ran
  }

  BackendResult NoBackend() const {
    std::string states;
    for (const auto& slot : route_->slots()) {
      std::lock_guard<std::mutex> lock(slot->mutex);
      states += (states.empty() ? "" : ", ") + slot->backend->name() + ": " +
                CircuitStateName(slot->breaker.state(gateway_->clock().Now()));
    }
    BackendResult r;
    r.kind = BackendResult::Kind::kFailed;
    r.http_status = 503;
    r.error = ApiError{503, "no backend of the route '" + route_->name() + "' is available (" + states + ")",
                       "service_unavailable", "", "no_backend"};
    r.error_kind = "no_backend";
    return r;
  }

  // A complete answer to the stages that keep answers (the call is finished:
  // capture_ and done_ are no longer written).
  void Store() {
    if (std::optional<CapturedAnswer> answer = Answer()) gateway_->pipeline().OnAnswer(capture_->request, *answer);
  }
  // The finished call's answer as the caches keep it: text only (null: it had tool calls, or no plain text).
  std::optional<CapturedAnswer> Answer() const {
    if (!capture_ || !capture_->storable || done_.kind != BackendResult::Kind::kOk) return std::nullopt;
    const CompletionRequest& r = *capture_->request.request;
    CapturedAnswer answer{.endpoint = r.endpoint,
                          .model = capture_->request.route,  // the route: what purge by route and a hit name
                          .text = capture_->text,
                          .finish_reason = done_.finish_reason,
                          .has_usage = done_.has_usage,
                          .usage = done_.usage};
    if (!capture_->streamed) {
      // The whole answer, as the backend gave it in data: one choice of plain
      // text, no tool calls (its reasoning_content is not part of it).
      if (!done_.text) return std::nullopt;
      answer.text = *done_.text;
    }
    return answer;
  }

  // ---- Single flight (gateway/cache/single_flight.h) ----

  // An exact-cache miss of a route that coalesces, from a lookup (not a client's no-cache).
  bool Coalesces() const {
    return route_->config().exact_cache && route_->config().coalesce && !pending_.cache_key.empty() &&
           pending_.cache_status == "miss" && !HasCacheDirective(pending_.cache_control, "no-cache");
  }

  // Leads the key's flight (then goes upstream) or follows the one in flight.
  void JoinFlight() {
    auto follower = std::make_shared<FlightFollower>(shared_from_this());
    {
      std::lock_guard<std::mutex> lock(mutex_);
      following_ = follower.get();
    }
    SingleFlight::Joined joined = gateway_->flights().Join(pending_.cache_key, follower);
    if (!joined.leader) {
      route_->coalesced().Add();
      std::lock_guard<std::mutex> lock(mutex_);
      if (!finished_) followed_ = joined.flight;  // for Cancel
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      following_ = nullptr;
      if (!finished_) flight_ = std::move(joined.flight);
    }
    if (!flight_) {  // cancelled meanwhile: nobody leads, the next request does
      joined.flight->Fail(Flight::FailKind::kRetry);
      gateway_->flights().Land(pending_.cache_key, joined.flight);
      return;
    }
    NextAttempt(false);
  }

  // The leader's call ended (done_ is its result): the flight ends with its answer, or fails.
  void LandFlight() {
    std::shared_ptr<Flight> flight;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      flight = std::move(flight_);
    }
    if (!flight) return;
    if (std::optional<CapturedAnswer> answer = Answer()) {
      flight->End(*answer);
    } else {
      flight->Fail(done_.kind == BackendResult::Kind::kOk ? Flight::FailKind::kAlone : Flight::FailKind::kRetry);
    }
    gateway_->flights().Land(pending_.cache_key, flight);
  }

  class FlightFollower : public Flight::Follower {
   public:
    explicit FlightFollower(std::shared_ptr<GatewayCall> call) : call_(std::move(call)) {}
    void OnText(const std::string& text) override { call_->FollowText(text); }
    void OnEnd(const CapturedAnswer& answer) override { call_->FollowEnd(answer); }
    void OnFail(Flight::FailKind kind) override { call_->FollowFail(kind); }

   private:
    std::shared_ptr<GatewayCall> call_;
  };

  // A piece of the leader's text, in this request's shape (a whole answer waits for the end).
  void FollowText(const std::string& text) {
    const CompletionRequest& r = *request_.request;
    BackendChunk chunk;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || !r.stream) return;
      chunk = BackendChunk{ChunkBody(r.endpoint, request_.id, request_.created, route_->name(), text, "",
                                     !follow_started_),
                           text, ""};
      follow_started_ = true;
      FollowerInfo();
      if (info_.ttft_seconds < 0) info_.ttft_seconds = Since(request_.arrival, gateway_->clock().Now());
    }
    sink_->OnChunk(chunk, info_);
  }

  void FollowEnd(const CapturedAnswer& answer) {
    const CompletionRequest& r = *request_.request;
    std::vector<BackendChunk> chunks;
    BackendResult result;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!EndFollowing()) return;
      if (info_.ttft_seconds < 0) info_.ttft_seconds = info_.e2e_seconds;
      result.kind = BackendResult::Kind::kOk;
      result.finish_reason = answer.finish_reason;
      result.has_usage = answer.has_usage;
      result.usage = answer.usage;
      if (r.stream) {
        chunks.push_back({ChunkBody(r.endpoint, request_.id, request_.created, route_->name(), "",
                                    answer.finish_reason, !follow_started_),
                          "", answer.finish_reason});
        if (r.include_usage && answer.has_usage) {
          chunks.push_back({UsageChunkBody(r.endpoint, request_.id, request_.created, route_->name(), answer.usage),
                            "", ""});
        }
      } else {
        result.body = CompletionBody(r.endpoint, request_.id, request_.created, route_->name(), answer.text,
                                     answer.finish_reason, answer.usage);
        result.text = answer.text;
      }
      route_->RecordStageAnswer(info_.backend, info_.ttft_seconds, info_.e2e_seconds);
    }
    for (const BackendChunk& c : chunks) sink_->OnChunk(c, info_);
    sink_->OnDone(result, info_);
  }

  // The leader failed: join again (one of the followers leads), go upstream
  // alone, or, when text already went out, end as the leader's answer did.
  void FollowFail(Flight::FailKind kind) {
    if (kind == Flight::FailKind::kBroken) {
      BackendResult result;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        if (!EndFollowing()) return;
        result.kind = BackendResult::Kind::kBroken;
        result.http_status = 502;
        result.error = ApiError{502, "the upstream answer this request shared with an identical one broke off",
                                "server_error", "", "truncated"};
        result.error_kind = "truncated";
        route_->error(info_.backend, result.error_kind).Add();
      }
      sink_->OnDone(result, info_);
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      followed_.reset();
    }
    // Not from here: the flight's lock is held, and joining takes the table's.
    auto next = [self = shared_from_this(), kind] {
      if (kind == Flight::FailKind::kRetry) {
        self->JoinFlight();
      } else {
        self->NextAttempt(false);
      }
    };
    if (gateway_->offload()) {
      gateway_->offload()(std::move(next));
    } else {
      TimerQueue::Shared().After(0, std::move(next));
    }
  }

  // A follower's call ends (mutex_ held); false when it had ended already.
  bool EndFollowing() {
    if (finished_) return false;
    finished_ = true;
    followed_.reset();
    FollowerInfo();
    info_.e2e_seconds = Since(request_.arrival, gateway_->clock().Now());
    return true;
  }

  // A follower's answer is the single flight's (mutex_ held).
  void FollowerInfo() {
    info_.backend = "single-flight";
    info_.backend_kind = "cache";
    info_.cache = "coalesced";
    info_.attempts = 0;
  }

  // The span of an attempt that ended (result) or was abandoned (null; mutex_
  // held): a client span for a remote backend, with the local engine's queue,
  // prefill and decode as children.
  void AttemptSpan(const Attempt& attempt, const BackendResult* result, SteadyTime end) {
    const BackendSlot& slot = SlotOf(attempt);
    const Backend& backend = *slot.backend;
    const CompletionRequest& r = *request_.request;
    const bool remote = !backend.server_address().empty();
    const SteadyTime started = attempt.started;
    Span span{.name = std::string(OperationName(r.endpoint)) + " " + backend.model_name(),
              .id = attempt.span,
              .parent = trace_->root(),
              .kind = remote ? SpanKind::kClient : SpanKind::kInternal,
              .start = started,
              .end = end};
    std::vector<Attribute>& a = span.attributes;
    a.push_back({"gen_ai.operation.name", std::string(OperationName(r.endpoint))});
    a.push_back({"gen_ai.system", std::string(backend.kind())});
    a.push_back({"gen_ai.request.model", backend.model_name()});
    a.push_back({"tachyon.backend", backend.name()});
    a.push_back({"tachyon.attempt", static_cast<int64_t>(attempt.plan_index + 1)});
    if (attempt.hedge) a.push_back({"tachyon.hedge", true});
    if (remote) {
      a.push_back({"server.address", backend.server_address()});
      a.push_back({"server.port", static_cast<int64_t>(backend.server_port())});
    }
    if (result == nullptr) {
      // Abandoned: another attempt answered first, or the client went away.
      a.push_back({"tachyon.abandoned", std::string(winner_ >= 0 && winner_ != attempt.id ? "lost" : "cancelled")});
      span.events.push_back({.name = "end", .time = end});
      trace_->Add(std::move(span));
      return;
    }
    if (result->has_usage) {
      a.push_back({"gen_ai.usage.input_tokens", result->usage.prompt_tokens});
      a.push_back({"gen_ai.usage.output_tokens", result->usage.completion_tokens});
    }
    if (result->num_cached_tokens >= 0) a.push_back({"tachyon.cached_tokens", result->num_cached_tokens});
    if (!result->finish_reason.empty()) {
      a.push_back({"gen_ai.response.finish_reasons", result->finish_reason});
    }
    if (result->first_byte_seconds >= 0) {
      span.events.push_back({.name = "first_byte", .time = After(started, result->first_byte_seconds)});
    }
    const SteadyTime first_token = got_content_ && winner_ == attempt.id ? first_content_
                                   : result->first_token_seconds >= 0
                                       ? After(started, result->first_token_seconds)
                                       : SteadyTime{};
    if (first_token != SteadyTime{}) span.events.push_back({.name = "first_token", .time = first_token});
    span.events.push_back({.name = "end", .time = end});
    if (result->kind != BackendResult::Kind::kOk) {
      span.error = true;
      span.status_message = result->error_kind.empty() ? result->error.message : result->error_kind;
      a.push_back({"error.type", result->error_kind.empty() ? std::string("error") : result->error_kind});
    }
    if (!remote && result->submitted_seconds >= 0 && result->queue_seconds >= 0) {
      // The engine's phases: waiting for a slot, the prompt's prefill, then decoding.
      const SteadyTime queued = After(started, result->submitted_seconds);
      const SteadyTime stepped = After(queued, result->queue_seconds);
      trace_->Add(Span{.name = "engine.queue", .id = NewSpanId(), .parent = attempt.span, .start = queued,
                       .end = stepped});
      if (first_token != SteadyTime{} && first_token >= stepped) {
        trace_->Add(Span{.name = "engine.prefill", .id = NewSpanId(), .parent = attempt.span, .start = stepped,
                         .end = first_token,
                         .attributes = {{"gen_ai.usage.input_tokens", result->usage.prompt_tokens},
                                        {"tachyon.cached_tokens", std::max<int64_t>(0, result->num_cached_tokens)}}});
        trace_->Add(Span{.name = "engine.decode", .id = NewSpanId(), .parent = attempt.span, .start = first_token,
                         .end = end, .attributes = {{"gen_ai.usage.output_tokens", result->usage.completion_tokens}}});
      }
    }
    trace_->Add(std::move(span));
  }

  // A stage's answer, replayed as if a backend had given it.
  void Replay(const StageAnswer& answer) {
    const double e2e = Since(pending_.arrival, gateway_->clock().Now());
    CallInfo info = info_;
    info.backend = answer.answered_by;
    info.backend_kind = "cache";
    info.attempts = 0;
    info.ttft_seconds = info.e2e_seconds = e2e;
    if (answer.result.kind == BackendResult::Kind::kOk) route_->RecordStageAnswer(answer.answered_by, e2e);
    for (const BackendChunk& chunk : answer.chunks) sink_->OnChunk(chunk, info);
    sink_->OnDone(answer.result, info);
    if (answer.audit) Audit(answer.audit);
  }

  // The fresh answer of an audited stage answer, collected in the background.
  class AuditSink : public BackendSink {
   public:
    using Audit = std::function<void(std::optional<std::string>, bool, const std::string&)>;
    AuditSink(Audit audit, bool deterministic, Gateway::Offload offload)
        : audit_(std::move(audit)), deterministic_(deterministic), offload_(std::move(offload)) {}
    void OnChunk(BackendChunk chunk) override {
      if (chunk.has_tool_calls) storable_ = false;
      if (!chunk.reasoning) text_ += chunk.text;
      streamed_ = true;
    }
    void OnDone(BackendResult result) override {
      std::optional<std::string> fresh;
      if (result.kind == BackendResult::Kind::kOk && storable_) {
        if (streamed_) {
          fresh = std::move(text_);
        } else if (result.text) {
          fresh = std::move(*result.text);
        }
      }
      // The comparison may embed both answers: not on the backend's thread.
      auto run = [audit = std::move(audit_), fresh = std::move(fresh), deterministic = deterministic_] {
        audit(fresh, deterministic, "failed");
      };
      if (offload_) {
        offload_(std::move(run));
      } else {
        run();
      }
    }

   private:
    Audit audit_;
    bool deterministic_;
    Gateway::Offload offload_;
    std::string text_;
    bool streamed_ = false, storable_ = true;
  };

  // A sampled semantic hit (the client has its answer): the same request to the
  // route's first available backend, its answer to the audit; none while every
  // backend's breaker is open. Not counted in the route's or the backend's series.
  void Audit(AuditSink::Audit audit) {
    const std::vector<size_t> plan =
        route_->Plan(*pending_.request, pending_.route_class, gateway_->clock().Now());
    if (plan.empty()) {
      audit(std::nullopt, false, "breaker");
      return;
    }
    std::shared_ptr<Backend> backend = route_->slots()[plan[0]]->backend;
    BackendRequest request{.request = pending_.request,
                           .id = "audit-" + pending_.id,
                           .created = pending_.created,
                           .model_name = route_->name(),
                           .arrival = std::chrono::steady_clock::now(),
                           .prompt_cache = route_->config().prompt_cache};
    const bool deterministic = std::string_view(backend->kind()) == "local" &&
                               pending_.request->sampling.temperature == 0;
    auto sink = std::make_shared<AuditSink>(std::move(audit), deterministic, gateway_->offload());
    // The gateway is held until the audit ends: it owns the backend.
    auto start = [gateway = gateway_, backend, request = std::move(request), sink]() mutable {
      backend->Start(std::move(request), sink);
    };
    if (backend->StartIsCostly() && gateway_->offload()) {
      gateway_->offload()(std::move(start));
    } else {
      start();
    }
  }

  struct Capture {  // what the stages that keep answers will be given
    GatewayRequest request;
    std::string text;       // content only, never reasoning
    bool streamed = false;
    bool storable = true;   // false once a chunk carried tool calls
  };

  std::shared_ptr<const Gateway> gateway_;  // keeps the route and its backends alive
  Route* route_;
  GatewayRequest pending_;       // until Start: what the pipeline sees
  std::vector<size_t> plan_;     // set by Start, then fixed
  BackendRequest request_;       // set by Start, then fixed
  std::shared_ptr<GatewaySink> sink_;

  std::mutex mutex_;
  std::unique_ptr<Capture> capture_;  // set by Start when a stage keeps answers; guarded by mutex_
  std::vector<Attempt> live_;  // attempts in progress
  std::vector<int> doomed_;    // attempts abandoned before their Start returned a cancel function
  size_t next_plan_ = 0;       // the plan's next backend to start
  int next_id_ = 0;
  int winner_ = -1;            // the attempt whose answer the client gets; -1: not known yet
  bool cancelled_ = false, finished_ = false, committed_ = false, got_content_ = false;
  // Hedging (set by Start): whether this call may hedge, the delay, the pending
  // timer (0: none), the hedges' ids, and whether their outcomes were counted.
  bool hedging_ = false;
  double hedge_delay_ = 0;
  TimerQueue::Id hedge_timer_ = 0;
  std::vector<int> hedge_ids_;
  bool hedges_counted_ = false;
  // Single flight: the flight this call leads, or the one it follows (and its
  // follower, to leave it), and whether its client went away while followers
  // still wait on its answer (it goes on without sending).
  std::shared_ptr<Flight> flight_, followed_;
  const Flight::Follower* following_ = nullptr;
  bool follow_started_ = false;
  std::atomic<bool> detached_{false};
  Clock::time_point last_content_;
  std::shared_ptr<RequestTrace> trace_;  // set by Start; null: not traced
  SteadyTime first_chunk_, first_content_;
  std::optional<BackendResult> last_failure_;
  BackendResult done_;
  CallInfo info_;
};

}  // namespace

CancelFn StartGatewayCall(std::shared_ptr<const Gateway> gateway, Route* route, GatewayRequest request,
                          std::shared_ptr<GatewaySink> sink) {
  const bool costly = gateway->pipeline().costly(route->name()) && gateway->offload();
  auto call = std::make_shared<GatewayCall>(std::move(gateway), route, std::move(request), std::move(sink));
  if (costly) {
    call->gateway().offload()([call] { call->Start(); });
  } else {
    call->Start();
  }
  return [call] { call->Cancel(); };
}

}  // namespace tachyon
