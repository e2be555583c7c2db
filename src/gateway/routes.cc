#include "gateway/routes.h"

#include <algorithm>

#include <xxhash.h>

#include "base/check.h"
#include "gateway/route/task_router.h"

namespace tachyon {
namespace {

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
  slot->ttft_ewma_gauge = &m->AddGauge("tachyon:backend_ttft_ewma_seconds",
                                       "The TTFT average the least-latency policy ranks backends by "
                                       "(exponentially weighted; 0 before the first answer)",
                                       {"backend"}).With(v);
  slot->errors = &m->AddCounter("tachyon:backend_errors_total", "Failed attempts per backend, by kind",
                                {"backend", "kind"});
  slot->breaker_state->Set(0);
  slot->in_flight->Set(0);
  return slot;
}

Route::Route(const RouteConfig& config, std::vector<std::shared_ptr<BackendSlot>> slots, MetricsRegistry* m)
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
      plan.policy = RoutePolicy::Make(k.policy, MemberNames(plan.members), config.policy_options);
      classes_.push_back(std::move(plan));
    }
  } else {
    ClassPlan plan;
    for (size_t i = 0; i < slots_.size(); ++i) plan.members.push_back(i);
    plan.kind = config.policy;
    plan.policy = RoutePolicy::Make(config.policy, MemberNames(plan.members), config.policy_options);
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
  CounterFamily& cached = m->AddCounter("tachyon:prompt_cached_tokens_total",
                                        "Prompt tokens the backend found cached (engine prefix cache, provider prompt cache)",
                                        {"route", "backend"});
  CounterFamily& written = m->AddCounter("tachyon:prompt_cache_write_tokens_total",
                                         "Prompt tokens the provider wrote to its prompt cache (Anthropic)",
                                         {"route", "backend"});
  for (const auto& slot : slots_) {
    const std::vector<std::string> v = {slot->backend->model_name(), config.model, slot->backend->name()};
    const std::vector<std::string> rb = {config.model, slot->backend->name()};
    series_.push_back({&ttft.With(v), &itl.With(v), &e2e.With(v), &success.With(v), &cancelled.With(v),
                       &cached.With(rb), &written.With(rb)});
  }
  ttft_family_ = &ttft;
  e2e_family_ = &e2e;
  success_family_ = &success;
  requests_ = &m->AddCounter("tachyon:route_requests_total", "Requests that reached the route", {"route"})
                   .With({config.model});
  retries_ = &m->AddCounter("tachyon:route_retries_total",
                            "Attempts on another backend after one failed before answering", {"route"})
                  .With({config.model});
  fallbacks_ = &m->AddCounter("tachyon:route_fallbacks_total",
                              "Requests answered by a backend other than the policy's first choice", {"route"})
                    .With({config.model});
  hedges_ = &m->AddCounter("tachyon:hedges_total",
                           "Hedged attempts (a backend started beside a late first attempt), by outcome: won (it "
                           "answered), lost (another attempt answered first), cancelled (the call ended unanswered)",
                           {"route", "outcome"});
  hedges_refused_ = &m->AddCounter("tachyon:hedges_refused_total",
                                   "Hedges not started because the route's hedge budget (max_rate) was spent",
                                   {"route"})
                         .With({config.model});
  coalesced_ = &m->AddCounter("tachyon:cache_coalesced_total",
                              "Cache misses that followed an identical request's upstream call (single flight) "
                              "instead of making their own",
                              {"route"})
                    .With({config.model});
  hedge_budget_ = std::make_unique<HedgeBudget>(config.hedge ? config.hedge->max_rate : 0);
  errors_ = &m->AddCounter("tachyon:request_error_total", "Requests that ended in an error, by kind",
                           {"route", "backend", "kind"});
}

void Route::RecordStageAnswer(const std::string& answered_by, double ttft_seconds, double e2e_seconds) const {
  const std::vector<std::string> v = {config_.model, config_.model, answered_by};
  ttft_family_->With(v).Observe(ttft_seconds);
  e2e_family_->With(v).Observe(e2e_seconds);
  success_family_->With(v).Add();
}

std::vector<std::string> Route::MemberNames(const std::vector<size_t>& members) const {
  std::vector<std::string> names;
  for (size_t idx : members) names.push_back(slots_[idx]->backend->name());
  return names;
}

void Route::Inherit(Route& previous) {
  std::scoped_lock lock(mutex_, previous.mutex_);
  for (size_t k = 0; k < classes_.size() && k < previous.classes_.size(); ++k) {
    const ClassPlan& old = previous.classes_[k];
    if (old.kind != classes_[k].kind) continue;
    classes_[k].policy->Inherit(*old.policy, previous.MemberNames(old.members));
  }
}

std::vector<size_t> Route::Plan(const CompletionRequest& r, int class_idx, Clock::time_point now) {
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

std::string Route::ClassName(int class_idx) const {
  if (config_.policy != PolicyKind::kClassify || class_idx < 0 ||
      static_cast<size_t>(class_idx) >= config_.classes.size()) {
    return "";
  }
  return config_.classes[class_idx].name;
}

void RouteTable::Add(std::unique_ptr<Route> route) {
  by_model_[route->name()] = route.get();
  routes_.push_back(std::move(route));
}

Route* RouteTable::Resolve(const std::string& model, ApiError* error) const {
  if (model.empty() && routes_.size() == 1) return routes_[0].get();
  if (auto it = by_model_.find(model); it != by_model_.end()) return it->second;
  for (const auto& candidate : routes_) {  // aliases, in the order the routes are written
    for (const std::string& alias : candidate->config().aliases) {
      if (GlobMatch(alias, model)) return candidate.get();
    }
  }
  std::string names;
  for (const auto& rt : routes_) names += (names.empty() ? "'" : ", '") + rt->name() + "'";
  *error = model.empty() ? ApiError{400, "'model' is required: this server serves " + names, "invalid_request_error",
                                    "model", ""}
                         : ApiError{404, "the model '" + model + "' does not exist; this server serves " + names,
                                    "invalid_request_error", "model", "model_not_found"};
  return nullptr;
}

}  // namespace tachyon
