#include "gateway/gateway.h"

#include <algorithm>
#include <random>
#include <thread>

#include <xxhash.h>

#include "api/json_parse.h"
#include "base/check.h"
#include "gateway/cache/cache_db.h"
#include "gateway/embedder_spec.h"
#include "gateway/cache/exact_cache.h"
#include "gateway/cache/redis_store.h"
#include "gateway/cache/semantic_cache.h"
#include "gateway/route/router_stage.h"
#include "gateway/route/task_router.h"
#include "gateway/trim/trim_stage.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The leading characters of the prompt as the engine would see them, for prefix affinity.
uint64_t PrefixHash(const CompletionRequest& r, size_t num_chars) {
  std::string text;
  if (r.endpoint == Endpoint::kChatCompletions) {
    for (const ChatMessage& m : r.messages) {
      if (text.size() >= num_chars) break;
      text += m.role;
      text += '\x1f';
      text += m.content;
      text += '\x1e';
    }
  } else if (r.prompt_is_ids) {
    for (TokenId t : r.prompt_ids) {
      if (text.size() >= num_chars) break;
      const int32_t v = t.value();
      text.append(reinterpret_cast<const char*>(&v), sizeof(v));
    }
  } else {
    text = r.prompt.substr(0, num_chars);
  }
  if (text.size() > num_chars) text.resize(num_chars);
  return XXH3_64bits(text.data(), text.size());
}

}  // namespace

class Route {
 public:
  struct Series {  // {model_name, route, backend}
    Histogram* ttft;
    Histogram* itl;
    Histogram* e2e;
    Counter* success;
    Counter* cancelled;
  };

  Route(const RouteConfig& config, std::vector<std::shared_ptr<BackendSlot>> slots, MetricsRegistry* m)
      : config_(config), slots_(std::move(slots)), rng_(XXH3_64bits(config.model.data(), config.model.size())) {
    if (config.policy == PolicyKind::kClassify) {
      auto index_of = [&](const std::string& name) {
        for (size_t i = 0; i < slots_.size(); ++i) {
          if (slots_[i]->backend->name() == name) return i;
        }
        CHECK(false) << "class backend '" << name << "' is not among the route's";
        return size_t{0};
      };
      for (const RouteClassConfig& k : config.classes) {
        ClassPlan plan;
        for (const std::string& b : k.backends) plan.members.push_back(index_of(b));
        for (const std::string& b : k.fallback) plan.fallback.push_back(index_of(b));
        plan.kind = k.policy;
        plan.policy = RoutePolicy::Make(k.policy, plan.members.size(), config.policy_options);
        classes_.push_back(std::move(plan));
      }
    } else {
      ClassPlan plan;
      for (size_t i = 0; i < slots_.size(); ++i) plan.members.push_back(i);
      plan.kind = config.policy;
      plan.policy = RoutePolicy::Make(config.policy, slots_.size(), config.policy_options);
      classes_.push_back(std::move(plan));
    }
    const std::vector<std::string> labels = {"model_name", "route", "backend"};
    HistogramFamily& ttft = m->AddHistogram("tachyon:time_to_first_token_seconds",
                                            "From the request read to its first content chunk sent", labels);
    HistogramFamily& itl = m->AddHistogram("tachyon:inter_token_latency_seconds",
                                           "Gaps between content chunks sent to the client", labels);
    HistogramFamily& e2e = m->AddHistogram("tachyon:e2e_request_latency_seconds",
                                           "From the request read to the last byte of its answer", labels);
    CounterFamily& success = m->AddCounter("tachyon:request_success_total", "Requests answered in full", labels);
    CounterFamily& cancelled = m->AddCounter("tachyon:request_cancelled_total",
                                             "Requests whose client went away before the answer ended", labels);
    for (const auto& slot : slots_) {
      const std::vector<std::string> v = {slot->backend->model_name(), config.model, slot->backend->name()};
      series_.push_back({&ttft.With(v), &itl.With(v), &e2e.With(v), &success.With(v), &cancelled.With(v)});
    }
    requests_ = &m->AddCounter("tachyon:route_requests_total", "Requests that reached the route", {"route"})
                     .With({config.model});
    retries_ = &m->AddCounter("tachyon:route_retries_total",
                              "Attempts on another backend after one failed before answering", {"route"})
                    .With({config.model});
    fallbacks_ = &m->AddCounter("tachyon:route_fallbacks_total",
                                "Requests answered by a backend other than the policy's first choice", {"route"})
                      .With({config.model});
    errors_ = &m->AddCounter("tachyon:request_error_total", "Requests that ended in an error, by kind",
                             {"route", "backend", "kind"});
  }

  const std::string& name() const { return config_.model; }
  const RouteConfig& config() const { return config_; }
  const std::vector<std::shared_ptr<BackendSlot>>& slots() const { return slots_; }
  const Series& series(size_t idx) const { return series_[idx]; }
  Counter& requests() const { return *requests_; }
  Counter& retries() const { return *retries_; }
  Counter& fallbacks() const { return *fallbacks_; }
  Counter& error(const std::string& backend, const std::string& kind) const {
    return errors_->With({config_.model, backend, kind});
  }

  // The backends to try for this request, in order (available ones only): a
  // classify route's class (the router's choice; -1: the default class) by the
  // class's policy, then the class's fallback backends.
  std::vector<size_t> Plan(const CompletionRequest& r, int class_idx, Clock::time_point now) {
    if (class_idx < 0 || static_cast<size_t>(class_idx) >= classes_.size()) class_idx = config_.default_class;
    const ClassPlan& plan = classes_[class_idx];
    std::vector<CandidateState> candidates;
    auto state = [&](size_t idx) {
      std::lock_guard<std::mutex> lock(slots_[idx]->mutex);
      return CandidateState{slots_[idx]->breaker.WouldAllow(now), slots_[idx]->outstanding, slots_[idx]->ttft_ewma};
    };
    for (size_t idx : plan.members) candidates.push_back(state(idx));
    PolicyInput input;
    if (plan.kind == PolicyKind::kPrefixAffinity) input.prefix_hash = PrefixHash(r, config_.affinity_prefix_chars);
    std::vector<size_t> order;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      input.random = std::uniform_real_distribution<double>(0, 1)(rng_);
      for (size_t k : plan.policy->Order(candidates, input)) order.push_back(plan.members[k]);
    }
    for (size_t idx : plan.fallback) {
      if (std::find(order.begin(), order.end(), idx) == order.end() && state(idx).available) order.push_back(idx);
    }
    const size_t limit = config_.max_attempts > 0 ? static_cast<size_t>(config_.max_attempts) : order.size();
    if (order.size() > limit) order.resize(limit);
    return order;
  }
  // The name of class class_idx ("": a route that does not classify, or a
  // request the router did not see, such as a cache hit).
  std::string ClassName(int class_idx) const {
    if (config_.policy != PolicyKind::kClassify || class_idx < 0 ||
        static_cast<size_t>(class_idx) >= config_.classes.size()) {
      return "";
    }
    return config_.classes[class_idx].name;
  }

 private:
  RouteConfig config_;
  std::vector<std::shared_ptr<BackendSlot>> slots_;
  std::vector<Series> series_;
  // One per class (a route that does not classify: one over all its backends).
  struct ClassPlan {
    std::vector<size_t> members;   // indices into slots_
    std::vector<size_t> fallback;  // tried after the members
    PolicyKind kind = PolicyKind::kFallback;
    std::unique_ptr<RoutePolicy> policy;  // over members
  };
  std::vector<ClassPlan> classes_;
  std::mutex mutex_;  // the policies' state and rng_
  std::mt19937_64 rng_;
  Counter* requests_ = nullptr;
  Counter* retries_ = nullptr;
  Counter* fallbacks_ = nullptr;
  CounterFamily* errors_ = nullptr;
};

namespace {

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
      plan_ = route_->Plan(*pending_.request, pending_.route_class, Clock::now());
      if (gateway_->pipeline().wants_answers() && (!pending_.cache_key.empty() || !pending_.semantic_scope.empty())) {
        capture_ = std::make_unique<Capture>();
        capture_->request = pending_;  // before the id moves on
      }
      request_ = BackendRequest{.request = pending_.request,
                                .id = std::move(pending_.id),
                                .created = pending_.created,
                                .model_name = route_->name(),
                                .arrival = pending_.arrival,
                                .output_blocked = pending_.output_blocked};
    }
    NextAttempt();
  }

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
      committed_ = true;
      if (capture_) {
        // An answer with tool calls is not stored (the capture keeps text only), and
        // reasoning is not part of the answer: a hit never hands it to another client.
        if (chunk.has_tool_calls) capture_->storable = false;
        if (!chunk.reasoning) capture_->text += chunk.text;
        capture_->streamed = true;
      }
      if (!chunk.text.empty()) {
        const Clock::time_point now = Clock::now();
        const Route::Series& s = route_->series(plan_[attempt_]);
        if (!got_content_) {
          got_content_ = true;
          info_.ttft_seconds = Since(request_.arrival, now);
          s.ttft->Observe(info_.ttft_seconds);
        } else {
          s.itl->Observe(Since(last_content_, now));
        }
        last_content_ = now;
      }
    }
    sink_->OnChunk(chunk, info_);
  }

  void OnDone(int attempt, BackendResult result) {
    const Clock::time_point now = Clock::now();
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
      if (!result.error_kind.empty() && result.kind != BackendResult::Kind::kOk) {
        slot.errors->With({slot.backend->name(), result.error_kind}).Add();
      }
      if (result.first_byte_seconds >= 0) slot.first_byte->Observe(result.first_byte_seconds);
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
    sink_->OnDone(done_, info_);
    if (capture_ && done_.kind == BackendResult::Kind::kOk) Store();
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
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_) return;
      const Clock::time_point now = Clock::now();
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
        info_.e2e_seconds = Since(request_.arrival, Clock::now());
        route_->error(info_.backend, done_.error_kind).Add();
      } else {
        attempt = current_ = next_id_++;
        ++info_.attempts;
        info_.backend = backend->name();
      }
    }
    if (!backend) {
      sink_->OnDone(done_, info_);
      return;
    }
    if (backend->StartIsCostly() && gateway_->offload()) {
      gateway_->offload()([self = shared_from_this(), backend, attempt] { self->StartBackend(*backend, attempt); });
    } else {
      StartBackend(*backend, attempt);
    }
  }

  void StartBackend(Backend& backend, int attempt) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (finished_ || attempt != current_) return;  // cancelled while it waited for a worker
    }
    CancelFn cancel = backend.Start(request_, std::make_shared<AttemptSink>(shared_from_this(), attempt));
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
                CircuitStateName(slot->breaker.state(Clock::now()));
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
      // The whole body: one choice of plain text, no tool calls (its reasoning_content is not kept).
      nlohmann::json body = ParseJson(done_.body);
      if (body.is_discarded() || !body.contains("choices") || !body["choices"].is_array() ||
          body["choices"].size() != 1 || !body["choices"][0].is_object()) {
        return;
      }
      const nlohmann::json& choice = body["choices"][0];
      const nlohmann::json* text = nullptr;
      if (r.endpoint == Endpoint::kChatCompletions) {
        if (!choice.contains("message") || !choice["message"].is_object()) return;
        const nlohmann::json& message = choice["message"];
        for (const char* calls : {"tool_calls", "function_call"}) {
          if (message.contains(calls) && !message[calls].is_null()) return;
        }
        if (message.contains("content")) text = &message["content"];
      } else if (choice.contains("text")) {
        text = &choice["text"];
      }
      if (text == nullptr || !text->is_string()) return;
      answer.text = text->get<std::string>();
      if (choice.contains("finish_reason") && choice["finish_reason"].is_string()) {
        answer.finish_reason = choice["finish_reason"].get<std::string>();
      }
    }
    gateway_->pipeline().OnAnswer(capture_->request, answer);
  }

  // A stage's answer, replayed as if a backend had given it.
  void Replay(const StageAnswer& answer) {
    const double e2e = Since(pending_.arrival, Clock::now());
    CallInfo info = info_;
    info.backend = answer.answered_by;
    info.attempts = 0;
    info.ttft_seconds = info.e2e_seconds = e2e;
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
  std::optional<BackendResult> last_failure_;
  BackendResult done_;
  CallInfo info_;
};

}  // namespace

std::shared_ptr<BackendSlot> MakeSlot(std::shared_ptr<Backend> backend, const std::string& fingerprint,
                                      CircuitBreakerOptions breaker, MetricsRegistry* m) {
  auto slot = std::make_shared<BackendSlot>();
  slot->backend = std::move(backend);
  slot->fingerprint = fingerprint;
  slot->breaker = CircuitBreaker(breaker);
  const std::vector<std::string> v = {slot->backend->name()};
  slot->first_byte = &m->AddHistogram("tachyon:upstream_first_byte_seconds",
                                      "From a request sent upstream to the head of its answer", {"backend"})
                          .With(v);
  slot->breaker_state = &m->AddGauge("tachyon:backend_breaker_state",
                                     "Circuit breaker per backend: 0 closed, 1 open, 2 half-open", {"backend"})
                             .With(v);
  slot->in_flight = &m->AddGauge("tachyon:backend_requests_in_flight", "Requests in flight per backend",
                                 {"backend"}).With(v);
  slot->errors = &m->AddCounter("tachyon:backend_errors_total", "Failed attempts per backend, by kind",
                                {"backend", "kind"});
  slot->breaker_state->Set(0);
  slot->in_flight->Set(0);
  return slot;
}

Gateway::~Gateway() = default;

// The last call of a gateway may end on a backend's own thread; destroying the
// gateway there would make that backend join itself, so it is destroyed on a
// thread of its own instead.
void Gateway::Delete(Gateway* g) {
  bool on_backend_thread = false;
  for (const auto& slot : g->slots_) on_backend_thread |= slot->backend->OnOwnThread();
  for (const auto& e : g->embeddings_) on_backend_thread |= e.backend->OnOwnThread();
  if (on_backend_thread) {
    std::thread([g] { delete g; }).detach();
    return;
  }
  delete g;
}

std::shared_ptr<BackendSlot> Gateway::Slot(const std::string& name) const {
  for (const auto& slot : slots_) {
    if (slot->backend->name() == name) return slot;
  }
  return nullptr;
}

StatusOr<std::shared_ptr<Gateway>> Gateway::Build(const GatewayConfig& config, const Gateway* previous,
                                                  MetricsRegistry* metrics, Offload offload) {
  std::shared_ptr<Gateway> g(new Gateway(), &Gateway::Delete);
  g->metrics_ = metrics;
  g->offload_ = std::move(offload);
  for (const BackendConfig& b : config.backends) {
    if (b.kind == "embedding") {
      std::shared_ptr<EmbeddingBackend> reused;
      for (const EmbeddingSlot& old : previous != nullptr ? previous->embeddings_ : std::vector<EmbeddingSlot>{}) {
        if (old.backend->name() == b.name && old.fingerprint == b.fingerprint) reused = old.backend;
      }
      if (!reused) {
        StatusOr<std::unique_ptr<EmbeddingBackend>> e = EmbeddingBackend::Create(b.embedding, metrics);
        if (!e.ok()) return InvalidArgumentError(config.path + ": backend '" + b.name + "': " + e.status().message());
        reused = std::move(e).value();
      }
      for (const EmbeddingSlot& other : g->embeddings_) {
        if (other.backend->model_name() == reused->model_name()) {
          return InvalidArgumentError(config.path + ": backend '" + b.name + "': a second embedding model named '" +
                                      reused->model_name() + "' (set served_model_name)");
        }
      }
      g->embeddings_.push_back({std::move(reused), b.fingerprint});
      continue;
    }
    if (previous != nullptr) {
      if (auto old = previous->Slot(b.name); old && old->fingerprint == b.fingerprint) {
        g->slots_.push_back(old);  // unchanged: its engine or connections keep running
        continue;
      }
    }
    std::shared_ptr<Backend> backend;
    if (b.kind == "local") {
      StatusOr<std::unique_ptr<LocalBackend>> local = LocalBackend::Create(b.local, metrics);
      if (!local.ok()) return InvalidArgumentError(config.path + ": backend '" + b.name + "': " + local.status().message());
      backend = std::move(local).value();
    } else {
      StatusOr<std::unique_ptr<RemoteBackend>> remote = RemoteBackend::Create(b.remote);
      if (!remote.ok()) {
        return InvalidArgumentError(config.path + ": backend '" + b.name + "': " + remote.status().message());
      }
      backend = std::move(remote).value();
    }
    g->slots_.push_back(MakeSlot(std::move(backend), b.fingerprint, b.breaker, metrics));
  }
  RETURN_IF_ERROR(g->BuildTrimmer(config, metrics));
  RETURN_IF_ERROR(g->BuildCaches(config, previous, metrics));
  for (const RouteConfig& r : config.routes) {
    std::vector<std::shared_ptr<BackendSlot>> slots;
    for (const std::string& name : r.backends) slots.push_back(g->Slot(name));
    g->routes_.push_back(std::make_unique<Route>(r, std::move(slots), metrics));
    g->by_model_[r.model] = g->routes_.back().get();
  }
  RETURN_IF_ERROR(g->BuildRouter(config, metrics));
  return g;
}

// The trim stage, for the routes with `trim`: their options and tokenizers
// (by default the route's first local backend's model).
Status Gateway::BuildTrimmer(const GatewayConfig& config, MetricsRegistry* metrics) {
  std::unordered_map<std::string, TrimRoute> routes;
  std::unordered_map<std::string, std::shared_ptr<const TokenCounter>> counters;
  for (const RouteConfig& r : config.routes) {
    if (!r.trim) continue;
    std::string tokenizer = r.trim->tokenizer;
    for (size_t i = 0; tokenizer.empty() && i < r.backends.size(); ++i) {
      for (const BackendConfig& b : config.backends) {
        if (b.name == r.backends[i] && b.kind == "local") tokenizer = b.local.model_path;
      }
    }
    std::shared_ptr<const TokenCounter>& counter = counters[tokenizer];
    if (!counter) {
      StatusOr<std::shared_ptr<const TokenCounter>> made = TokenCounter::ForModel(tokenizer);
      if (!made.ok()) {
        return InvalidArgumentError(config.path + ": route '" + r.model + "': trim: tokenizer: " +
                                    made.status().message());
      }
      counter = std::move(made).value();
    }
    routes[r.model] = TrimRoute{.options = r.trim->options, .counter = counter};
  }
  if (!routes.empty()) pipeline_.Add(std::make_unique<TrimStage>(std::move(routes), metrics));
  return Status::Ok();
}

// The router stage, for the classify routes: their rules, and their classifiers
// loaded from their files (routes naming the same embedder share one).
Status Gateway::BuildRouter(const GatewayConfig& config, MetricsRegistry* metrics) {
  std::unordered_map<std::string, std::shared_ptr<const TaskRouter>> routers;
  std::unordered_map<std::string, std::shared_ptr<Embedder>> embedders;
  for (const RouteConfig& r : config.routes) {
    if (r.policy != PolicyKind::kClassify) continue;
    TaskRouterOptions o{.rules = r.rules, .default_class = r.default_class};
    for (const RouteClassConfig& k : r.classes) o.classes.push_back(k.name);
    if (r.classifier) {
      const std::string where = config.path + ": route '" + r.model + "': classifier: ";
      StatusOr<TextClassifier> loaded = TextClassifier::Load(r.classifier->model);
      if (!loaded.ok()) return InvalidArgumentError(where + loaded.status().message());
      auto classifier = std::make_shared<const TextClassifier>(std::move(loaded).value());
      const std::string spec = r.classifier->embedder.empty() ? classifier->embedder_spec() : r.classifier->embedder;
      std::shared_ptr<Embedder>& embedder = embedders[spec];
      if (!embedder) {
        StatusOr<std::unique_ptr<Embedder>> made = MakeEmbedder(spec);
        if (!made.ok()) return InvalidArgumentError(where + "embedder '" + spec + "': " + made.status().message());
        embedder = std::move(made).value();
      }
      if (embedder->dimension() != classifier->dimension()) {
        return InvalidArgumentError(where + "the embedder '" + spec + "' gives " +
                                    std::to_string(embedder->dimension()) + "-d vectors; the classifier was trained on " +
                                    std::to_string(classifier->dimension()) + "-d ones");
      }
      for (const std::string& label : classifier->labels()) {
        int mapped = -1;
        for (const auto& [from, to] : r.classifier->labels) {
          if (from == label) mapped = static_cast<int>(std::find(o.classes.begin(), o.classes.end(), to) - o.classes.begin());
        }
        if (mapped < 0) {
          auto same = std::find(o.classes.begin(), o.classes.end(), label);
          if (same != o.classes.end()) mapped = static_cast<int>(same - o.classes.begin());
        }
        o.label_class.push_back(mapped);
      }
      for (const auto& [from, to] : r.classifier->labels) {
        if (std::find(classifier->labels().begin(), classifier->labels().end(), from) == classifier->labels().end()) {
          return InvalidArgumentError(where + "labels: the classifier has no label '" + from + "'");
        }
      }
      o.classifier = std::move(classifier);
      o.embedder = embedder;
      o.min_probability = r.classifier->min_probability;
    }
    routers[r.model] = std::make_shared<const TaskRouter>(std::move(o));
  }
  if (!routers.empty()) pipeline_.Add(std::make_unique<RouterStage>(std::move(routers), metrics));
  return Status::Ok();
}

// The cache stages and their stores; a reload keeps the stores (and their
// entries) when the [cache] table is unchanged.
Status Gateway::BuildCaches(const GatewayConfig& config, const Gateway* previous, MetricsRegistry* metrics) {
  ExactCacheOptions cache{.max_entries = config.cache.max_entries, .max_bytes = config.cache.max_bytes};
  // Whether the client's model name reaches an upstream of the route (then it keys the answer).
  auto forwards_model = [&](const RouteConfig& r) {
    for (const std::string& name : r.backends) {
      for (const BackendConfig& b : config.backends) {
        if (b.name == name && b.kind == "openai" && b.remote.upstream_model.empty()) return true;
      }
    }
    return false;
  };
  bool semantic = false;
  for (const RouteConfig& r : config.routes) {
    if (r.exact_cache) {
      cache.routes[r.model] = {.ttl_seconds = r.exact_cache_ttl, .sampled = r.cache_sampled, .key_model = forwards_model(r)};
    }
    semantic = semantic || r.semantic_cache.has_value();
  }
  if (!cache.routes.empty() || semantic) {
    // A reload keeps the stores (and their entries) when [cache] is unchanged.
    const std::string store_key = config.cache.store + "\n" + std::to_string(config.cache.max_entries) + "\n" +
                                  std::to_string(config.cache.max_bytes) + "\n" + config.cache.password + "\n" +
                                  (config.cache.verify_tls ? "verify" : "no-verify") + "\n" + config.cache.ca_file;
    const bool keep = previous != nullptr && previous->cache_store_key_ == store_key;
    if (keep) cache_db_ = previous->cache_db_;
    if (!keep && config.cache.store.rfind("sqlite:", 0) == 0) {
      StatusOr<std::unique_ptr<CacheDb>> opened = CacheDb::Open(config.cache.store.substr(7), config.cache.max_entries, metrics);
      if (!opened.ok()) return InvalidArgumentError(config.path + ": [cache] store: " + opened.status().message());
      cache_db_ = std::move(opened).value();
    }
    if (!keep && (config.cache.store.rfind("redis://", 0) == 0 || config.cache.store.rfind("rediss://", 0) == 0)) {
      StatusOr<std::unique_ptr<RedisStore>> opened = RedisStore::Open(
          config.cache.store, metrics,
          {.password = config.cache.password, .verify_tls = config.cache.verify_tls, .ca_file = config.cache.ca_file});
      if (!opened.ok()) return InvalidArgumentError(config.path + ": [cache] store: " + opened.status().message());
      cache_db_ = std::move(opened).value();
    }
    cache_store_key_ = store_key;
    if (!cache.routes.empty()) {
      if (keep && previous->exact_cache_) {
        exact_cache_ = previous->exact_cache_;
      } else {
        exact_cache_ = std::make_shared<ExactCache>(config.cache.max_entries, config.cache.max_bytes, cache_db_);
        if (Status loaded = exact_cache_->Load(); !loaded.ok()) {
          return InvalidArgumentError(config.path + ": [cache] store: " + loaded.message());
        }
      }
      pipeline_.Add(std::make_unique<ExactCacheStage>(std::move(cache), exact_cache_, metrics));
    }
    if (semantic) {
      if (keep && previous->semantic_cache_) {
        semantic_cache_ = previous->semantic_cache_;
      } else {
        semantic_cache_ =
            std::make_shared<SemanticCache>(config.cache.max_entries, config.cache.max_bytes, cache_db_,
                                            QueueDropCounter(metrics, "semantic_insert"));
        if (Status loaded = semantic_cache_->Load(); !loaded.ok()) {
          return InvalidArgumentError(config.path + ": [cache] store: " + loaded.message());
        }
      }
      // Routes naming the same embedder share one.
      std::unordered_map<std::string, std::shared_ptr<Embedder>> embedders;
      std::unordered_map<std::string, SemanticRouteOptions> routes;
      for (const RouteConfig& r : config.routes) {
        if (!r.semantic_cache) continue;
        const SemanticCacheConfig& c = *r.semantic_cache;
        std::shared_ptr<Embedder>& embedder = embedders[c.embedder];
        if (!embedder) {
          StatusOr<std::unique_ptr<Embedder>> made = MakeEmbedder(c.embedder);
          if (!made.ok()) {
            return InvalidArgumentError(config.path + ": route '" + r.model + "': semantic_cache: embedder: " +
                                        made.status().message());
          }
          embedder = std::move(made).value();
        }
        SemanticRouteOptions o{.embedder = embedder,
                               .hit = {.threshold = c.threshold,
                                       .verifier_min = c.verifier,
                                       .band = c.guards == "off" ? 0.0 : c.band,
                                       .guards_on_hits = c.guards == "all"},
                               .ttl_seconds = c.ttl,
                               .sampled = r.cache_sampled,
                               .key_model = forwards_model(r)};
        if (c.verifier > 0) {
          if (c.verifier_weights.empty()) {
            o.verifier = std::make_shared<PairVerifier>();
          } else {
            StatusOr<VerifierWeights> w = ReadVerifierWeights(c.verifier_weights);
            if (!w.ok()) {
              return InvalidArgumentError(config.path + ": route '" + r.model +
                                          "': semantic_cache: verifier_weights: " + w.status().message());
            }
            o.verifier = std::make_shared<PairVerifier>(std::move(w).value());
          }
        }
        routes[r.model] = std::move(o);
      }
      pipeline_.Add(std::make_unique<SemanticCacheStage>(std::move(routes), semantic_cache_, metrics));
    }
  }
  return Status::Ok();
}

std::shared_ptr<Gateway> Gateway::Single(std::shared_ptr<Backend> backend, const std::string& route_name,
                                         MetricsRegistry* metrics, Offload offload,
                                         std::shared_ptr<EmbeddingBackend> embedding) {
  std::shared_ptr<Gateway> g(new Gateway(), &Gateway::Delete);
  if (embedding) g->embeddings_.push_back({std::move(embedding), ""});
  g->metrics_ = metrics;
  g->offload_ = std::move(offload);
  // One backend, no alternative: its breaker never opens (a refusal would only turn errors into 503s).
  g->slots_.push_back(MakeSlot(std::move(backend), "", {.failure_threshold = 1 << 30}, metrics));
  RouteConfig r{.model = route_name, .backends = {g->slots_[0]->backend->name()}};
  g->routes_.push_back(std::make_unique<Route>(r, g->slots_, metrics));
  g->by_model_[route_name] = g->routes_.back().get();
  return g;
}

CancelFn Gateway::Handle(GatewayRequest request, std::shared_ptr<GatewaySink> sink) const {
  const CompletionRequest& r = *request.request;
  Route* route = nullptr;
  if (r.model.empty() && routes_.size() == 1) {
    route = routes_[0].get();
  } else if (auto it = by_model_.find(r.model); it != by_model_.end()) {
    route = it->second;
  } else {
    for (const auto& candidate : routes_) {  // aliases, in the order the routes are written
      for (const std::string& alias : candidate->config().aliases) {
        if (route == nullptr && GlobMatch(alias, r.model)) route = candidate.get();
      }
    }
  }
  if (route == nullptr) {
    std::string names;
    for (const auto& rt : routes_) names += (names.empty() ? "'" : ", '") + rt->name() + "'";
    const ApiError error = r.model.empty()
                               ? ApiError{400, "'model' is required: this server serves " + names,
                                          "invalid_request_error", "model", ""}
                               : ApiError{404, "the model '" + r.model + "' does not exist; this server serves " + names,
                                          "invalid_request_error", "model", "model_not_found"};
    BackendResult result{.kind = BackendResult::Kind::kRejected, .http_status = error.http_status,
                         .body = ErrorBody(error), .error = error, .error_kind = "unknown_model"};
    sink->OnDone(result, CallInfo{});
    return [] {};
  }
  route->requests().Add();
  request.route = route->name();
  auto call = std::make_shared<GatewayCall>(shared_from_this(), route, std::move(request), std::move(sink));
  if (pipeline_.costly(route->name()) && offload_) {
    offload_([call] { call->Start(); });
  } else {
    call->Start();
  }
  return [call] { call->Cancel(); };
}

void Gateway::Shutdown() {
  for (const auto& slot : slots_) slot->backend->Shutdown();
  for (const auto& e : embeddings_) e.backend->Shutdown();
}

std::shared_ptr<EmbeddingBackend> Gateway::FindEmbedding(const std::string& model, std::string* names) const {
  if (model.empty() && embeddings_.size() == 1) return embeddings_[0].backend;
  names->clear();
  for (const EmbeddingSlot& e : embeddings_) {
    if (e.backend->model_name() == model) return e.backend;
    *names += (names->empty() ? "'" : ", '") + e.backend->model_name() + "'";
  }
  return nullptr;
}

nlohmann::json Gateway::Models(int64_t created) const {
  nlohmann::json data = nlohmann::json::array();
  const Clock::time_point now = Clock::now();
  for (const auto& route : routes_) {
    nlohmann::json backends = nlohmann::json::array();
    for (const auto& slot : route->slots()) {
      std::lock_guard<std::mutex> lock(slot->mutex);
      backends.push_back({{"name", slot->backend->name()},
                          {"kind", slot->backend->kind()},
                          {"state", CircuitStateName(slot->breaker.state(now))}});
    }
    data.push_back({{"id", route->name()},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "tachyon"},
                    {"policy", PolicyName(route->config().policy)},
                    {"backends", backends}});
    if (!route->config().aliases.empty()) data.back()["aliases"] = route->config().aliases;
    if (route->config().policy == PolicyKind::kClassify) {
      nlohmann::json classes = nlohmann::json::array();
      for (const RouteClassConfig& k : route->config().classes) {
        classes.push_back({{"name", k.name}, {"backends", k.backends}, {"policy", PolicyName(k.policy)},
                           {"fallback", k.fallback}});
      }
      data.back()["classes"] = classes;
      data.back()["default_class"] = route->config().classes[route->config().default_class].name;
    }
  }
  for (const EmbeddingSlot& e : embeddings_) {
    data.push_back({{"id", e.backend->model_name()},
                    {"object", "model"},
                    {"created", created},
                    {"owned_by", "tachyon"},
                    {"type", "embedding"},
                    {"dimension", e.backend->embedder().dimension()},
                    {"max_input_tokens", e.backend->embedder().context_length()},
                    {"backends", {{{"name", e.backend->name()}, {"kind", "embedding"}, {"state", "closed"}}}}});
  }
  return {{"object", "list"}, {"data", data}};
}

int Gateway::Health(nlohmann::json* body) const {
  const Clock::time_point now = Clock::now();
  nlohmann::json backends = nlohmann::json::object(), routes = nlohmann::json::object();
  for (const auto& slot : slots_) {
    std::lock_guard<std::mutex> lock(slot->mutex);
    backends[slot->backend->name()] = {{"kind", slot->backend->kind()},
                                       {"state", CircuitStateName(slot->breaker.state(now))},
                                       {"in_flight", slot->outstanding}};
  }
  for (const EmbeddingSlot& e : embeddings_) {
    backends[e.backend->name()] = {{"kind", "embedding"}, {"state", "closed"}, {"model", e.backend->model_name()}};
  }
  bool all = true, any = routes_.empty();
  for (const auto& route : routes_) {
    int available = 0;
    for (const auto& slot : route->slots()) {
      std::lock_guard<std::mutex> lock(slot->mutex);
      available += slot->breaker.WouldAllow(now) || slot->breaker.state(now) == CircuitBreaker::State::kHalfOpen;
    }
    routes[route->name()] = available > 0 ? "ok" : "unavailable";
    all &= available > 0;
    any |= available > 0;
  }
  *body = {{"status", all ? "ok" : any ? "degraded" : "unavailable"}, {"routes", routes}, {"backends", backends}};
  return all ? 200 : 503;
}

}  // namespace tachyon
