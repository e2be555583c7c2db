#include "gateway/gateway_call.h"

#include <optional>


namespace tachyon {
namespace {

double Since(Clock::time_point a, Clock::time_point b) { return SecondsBetween(a, b); }

using SteadyTime = std::chrono::steady_clock::time_point;

SteadyTime After(SteadyTime t, double seconds) {
  return t + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
}

const char* OperationName(Endpoint e) { return e == Endpoint::kChatCompletions ? "chat" : "text_completion"; }

// One request through a route: its attempts, in order, until one answers.
// Invariant: at most one attempt is current; a slot's outstanding count is
// raised when an attempt starts and lowered exactly once, by its OnDone or by Cancel.
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
      plan_ = route_->Plan(*pending_.request, pending_.route_class, gateway_->clock().Now());
      if (gateway_->pipeline().wants_answers() && (!pending_.cache_key.empty() || !pending_.semantic_scope.empty())) {
        capture_ = std::make_unique<Capture>();
        capture_->request = pending_;  // before the id moves on
      }
      request_ = BackendRequest{.request = pending_.request,
                                .id = std::move(pending_.id),
                                .created = pending_.created,
                                .model_name = route_->name(),
                                .arrival = pending_.arrival,
                                .output_blocked = pending_.output_blocked,
                                .prompt_cache = route_->config().prompt_cache};
    }
    NextAttempt();
  }

  const Gateway& gateway() const { return *gateway_; }

  void Cancel() {
    CancelFn cancel;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      finished_ = cancelled_ = true;
      cancel = std::move(cancel_);
      if (current_ >= 0) {
        BackendSlot& slot = Slot();
        std::lock_guard<std::mutex> slot_lock(slot.mutex);
        --slot.outstanding;
        slot.breaker.OnAbandoned();
        slot.in_flight->Set(slot.outstanding);
        route_->series(plan_[attempt_]).cancelled->Add();
      }
    }
    if (cancel) cancel();
  }

  void OnChunk(int attempt, BackendChunk chunk) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || attempt != current_) return;
      if (!committed_) {
        first_chunk_ = std::chrono::steady_clock::now();
        info_.upstream_seconds = std::chrono::duration<double>(first_chunk_ - attempt_started_).count();
      }
      committed_ = true;
      if (capture_) {
        // An answer with tool calls is not stored (the capture keeps text only), and
        // reasoning is not part of the answer: a hit never hands it to another client.
        if (chunk.has_tool_calls) capture_->storable = false;
        if (!chunk.reasoning) capture_->text += chunk.text;
        capture_->streamed = true;
      }
      if (!chunk.text.empty()) {
        const Clock::time_point now = gateway_->clock().Now();
        const Route::Series& s = route_->series(plan_[attempt_]);
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
    sink_->OnChunk(chunk, info_);
  }

  void OnDone(int attempt, BackendResult result) {
    const Clock::time_point now = gateway_->clock().Now();
    const SteadyTime ended_at = std::chrono::steady_clock::now();
    bool retry = false;
    // The ended attempt's cancel function is dropped (outside the lock): it holds the
    // backend's call state, which holds this call's sink, which holds this call. Kept,
    // that cycle leaked every call that was not cancelled.
    CancelFn ended;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || attempt != current_) return;
      BackendSlot& slot = Slot();
      const Route::Series& s = route_->series(plan_[attempt_]);
      const bool failure = result.kind == BackendResult::Kind::kFailed || result.kind == BackendResult::Kind::kBroken;
      if (result.kind == BackendResult::Kind::kOk && !got_content_) {
        // No content chunk came (a whole answer, or a stream of tool calls): the
        // first token is the one the backend saw, else the end.
        info_.ttft_seconds = result.first_token_seconds >= 0
                                 ? Since(request_.arrival, attempt_clock_start_) + result.first_token_seconds
                                 : Since(request_.arrival, now);
        s.ttft->Observe(info_.ttft_seconds);
      }
      if (!committed_) info_.upstream_seconds = std::chrono::duration<double>(ended_at - attempt_started_).count();
      if (trace_) AttemptSpan(result, ended_at);
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
      current_ = -1;
      ended = std::move(cancel_);
      retry = result.kind == BackendResult::Kind::kFailed && !committed_ && attempt_ + 1 < plan_.size();
      if (retry) {
        last_failure_ = std::move(result);
        ++attempt_;
        route_->retries().Add();
      } else {
        finished_ = true;
        info_.e2e_seconds = Since(request_.arrival, now);
        if (result.kind == BackendResult::Kind::kOk) {
          s.success->Add();
          s.e2e->Observe(info_.e2e_seconds);
          if (result.num_cached_tokens > 0) s.cached_tokens->Add(static_cast<double>(result.num_cached_tokens));
          if (result.cache_write_tokens > 0) s.cache_write_tokens->Add(static_cast<double>(result.cache_write_tokens));
          // Another backend than the policy's first choice, or (fallback policy) than the first configured one.
          if (attempt_ > 0 || (route_->config().policy == PolicyKind::kFallback && plan_[0] != 0)) {
            route_->fallbacks().Add();
          }
        } else {
          route_->error(info_.backend, result.error_kind.empty() ? "error" : result.error_kind).Add();
        }
        done_ = std::move(result);
      }
    }
    if (retry) {
      NextAttempt();
      return;
    }
    const bool store = capture_ && done_.kind == BackendResult::Kind::kOk;
    if (store && trace_) trace_->Hold();  // the cache write's span ends after the answer
    sink_->OnDone(done_, info_);
    if (store) {
      const SteadyTime start = std::chrono::steady_clock::now();
      Store();
      if (trace_) {
        trace_->Add(Span{.name = "gateway.cache_write", .id = NewSpanId(), .parent = trace_->root(), .start = start,
                         .end = std::chrono::steady_clock::now()});
        trace_->Release();
      }
    }
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

  BackendSlot& Slot() { return *route_->slots()[plan_[attempt_]]; }

  // Starts the next backend of the plan whose breaker lets it through, or ends the call.
  void NextAttempt() {
    std::shared_ptr<Backend> backend;
    int attempt = -1;
    std::string traceparent;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      const Clock::time_point now = gateway_->clock().Now();
      for (; attempt_ < plan_.size(); ++attempt_) {
        BackendSlot& slot = Slot();
        std::lock_guard<std::mutex> slot_lock(slot.mutex);
        if (!slot.breaker.Allow(now)) continue;  // opened since the plan was made
        ++slot.outstanding;
        slot.in_flight->Set(slot.outstanding);
        backend = slot.backend;
        break;
      }
      if (!backend) {
        finished_ = true;
        done_ = last_failure_ ? std::move(*last_failure_) : NoBackend();
        info_.e2e_seconds = Since(request_.arrival, gateway_->clock().Now());
        route_->error(info_.backend, done_.error_kind).Add();
      } else {
        attempt = current_ = next_id_++;
        ++info_.attempts;
        info_.backend = backend->name();
        info_.backend_kind = backend->kind();
        info_.response_model = backend->model_name();
        attempt_started_ = std::chrono::steady_clock::now();
        attempt_clock_start_ = gateway_->clock().Now();
        if (trace_) {
          attempt_span_ = NewSpanId();
          traceparent = trace_->Traceparent(attempt_span_);
        }
      }
    }
    if (!backend) {
      sink_->OnDone(done_, info_);
      return;
    }
    if (backend->StartIsCostly() && gateway_->offload()) {
      gateway_->offload()([self = shared_from_this(), backend, attempt, traceparent] {
        self->StartBackend(*backend, attempt, traceparent);
      });
    } else {
      StartBackend(*backend, attempt, traceparent);
    }
  }

  void StartBackend(Backend& backend, int attempt, const std::string& traceparent) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || attempt != current_) return;  // cancelled while it waited for a worker
    }
    BackendRequest request = request_;
    request.traceparent = traceparent;
    CancelFn cancel = backend.Start(std::move(request), std::make_shared<AttemptSink>(shared_from_this(), attempt));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (current_ == attempt && !finished_) {
        cancel_ = std::move(cancel);
        return;
      }
      if (!cancelled_ || current_ != attempt) return;  // it ended while Start ran
    }
    cancel();  // cancelled while Start ran
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
    if (!capture_->storable) return;
    const CompletionRequest& r = *capture_->request.request;
    CapturedAnswer answer{.endpoint = r.endpoint,
                          .model = capture_->request.route,  // the route: what purge by route and a hit name
                          .text = std::move(capture_->text),
                          .finish_reason = done_.finish_reason,
                          .has_usage = done_.has_usage,
                          .usage = done_.usage};
    if (!capture_->streamed) {
      // The whole answer, as the backend gave it in data: one choice of plain
      // text, no tool calls (its reasoning_content is not part of it).
      if (!done_.text) return;
      answer.text = *done_.text;
    }
    gateway_->pipeline().OnAnswer(capture_->request, answer);
  }

  // The span of the attempt that just ended (mutex_ held): a client span for a
  // remote backend, with the local engine's queue, prefill and decode as children.
  void AttemptSpan(const BackendResult& result, SteadyTime end) {
    const BackendSlot& slot = Slot();
    const Backend& backend = *slot.backend;
    const CompletionRequest& r = *request_.request;
    const bool remote = !backend.server_address().empty();
    Span span{.name = std::string(OperationName(r.endpoint)) + " " + backend.model_name(),
              .id = attempt_span_,
              .parent = trace_->root(),
              .kind = remote ? SpanKind::kClient : SpanKind::kInternal,
              .start = attempt_started_,
              .end = end};
    std::vector<Attribute>& a = span.attributes;
    a.push_back({"gen_ai.operation.name", std::string(OperationName(r.endpoint))});
    a.push_back({"gen_ai.system", std::string(backend.kind())});
    a.push_back({"gen_ai.request.model", backend.model_name()});
    a.push_back({"tachyon.backend", backend.name()});
    a.push_back({"tachyon.attempt", static_cast<int64_t>(attempt_ + 1)});
    if (remote) {
      a.push_back({"server.address", backend.server_address()});
      a.push_back({"server.port", static_cast<int64_t>(backend.server_port())});
    }
    if (result.has_usage) {
      a.push_back({"gen_ai.usage.input_tokens", result.usage.prompt_tokens});
      a.push_back({"gen_ai.usage.output_tokens", result.usage.completion_tokens});
    }
    if (result.num_cached_tokens >= 0) a.push_back({"tachyon.cached_tokens", result.num_cached_tokens});
    if (!result.finish_reason.empty()) {
      a.push_back({"gen_ai.response.finish_reasons", result.finish_reason});
    }
    if (result.first_byte_seconds >= 0) {
      span.events.push_back({.name = "first_byte", .time = After(attempt_started_, result.first_byte_seconds)});
    }
    const SteadyTime first_token = got_content_ ? first_content_
                                   : result.first_token_seconds >= 0
                                       ? After(attempt_started_, result.first_token_seconds)
                                       : SteadyTime{};
    if (first_token != SteadyTime{}) span.events.push_back({.name = "first_token", .time = first_token});
    span.events.push_back({.name = "end", .time = end});
    if (result.kind != BackendResult::Kind::kOk) {
      span.error = true;
      span.status_message = result.error_kind.empty() ? result.error.message : result.error_kind;
      a.push_back({"error.type", result.error_kind.empty() ? std::string("error") : result.error_kind});
    }
    if (!remote && result.submitted_seconds >= 0 && result.queue_seconds >= 0) {
      // The engine's phases: waiting for a slot, the prompt's prefill, then decoding.
      const SteadyTime queued = After(attempt_started_, result.submitted_seconds);
      const SteadyTime stepped = After(queued, result.queue_seconds);
      trace_->Add(Span{.name = "engine.queue", .id = NewSpanId(), .parent = attempt_span_, .start = queued,
                       .end = stepped});
      if (first_token != SteadyTime{} && first_token >= stepped) {
        trace_->Add(Span{.name = "engine.prefill", .id = NewSpanId(), .parent = attempt_span_, .start = stepped,
                         .end = first_token,
                         .attributes = {{"gen_ai.usage.input_tokens", result.usage.prompt_tokens},
                                        {"tachyon.cached_tokens", std::max<int64_t>(0, result.num_cached_tokens)}}});
        trace_->Add(Span{.name = "engine.decode", .id = NewSpanId(), .parent = attempt_span_, .start = first_token,
                         .end = end, .attributes = {{"gen_ai.usage.output_tokens", result.usage.completion_tokens}}});
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
  size_t attempt_ = 0;    // index into plan_
  int current_ = -1;      // id of the attempt in progress; -1: none
  int next_id_ = 0;
  CancelFn cancel_;
  bool cancelled_ = false, finished_ = false, committed_ = false, got_content_ = false;
  Clock::time_point last_content_;
  std::shared_ptr<RequestTrace> trace_;  // set by Start; null: not traced
  SpanId attempt_span_;                  // the current attempt's span (traced requests)
  SteadyTime attempt_started_, first_chunk_, first_content_;
  Clock::time_point attempt_clock_start_;
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
