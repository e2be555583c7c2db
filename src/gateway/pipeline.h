// Pipeline: the gateway's ordered levers. Each Stage sees the request before a
// backend does and may answer it (a cache hit), change it (a trimmer) or pass
// it on; the route's backends get what is left. Stages run on a server worker
// thread, one request at a time each call (a stage shared by requests keeps its
// own locks).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "backend/backend.h"
#include "obs/trace.h"

namespace tachyon {

// A request on its way through the gateway.
struct GatewayRequest {
  std::shared_ptr<CompletionRequest> request;  // stages may change it (and its body, which goes upstream)
  std::string route;                           // the route's name (the model clients send; set by the gateway)
  std::string id;                              // response id: "chatcmpl-17"
  int64_t created = 0;
  std::string request_id;                      // x-request-id
  std::string tenant;                          // who asked (the API key's owner), for scoping
  std::chrono::steady_clock::time_point arrival;
  std::string cache_control;                   // the client's Cache-Control header, lower-case
  bool hedge = true;                           // false: the client sent x-tachyon-hedge: off
  // True while the client has not yet taken enough of what was sent: a backend that
  // can pause its stream does (backpressure); may be empty.
  std::function<bool()> output_blocked;
  // Set by the cache stages: "hit", "miss" or "bypass" (x-tachyon-cache), the
  // entry's age for a hit, and whether the answer may be stored.
  std::string cache_status;
  double cache_age_seconds = -1;
  std::string cache_key;                       // the exact cache's key of this request ("" : not cached)
  double cache_similarity = -1;                // a semantic hit's cosine
  // The semantic cache's lookup, kept for storing the answer ("" : not cached).
  std::string semantic_scope, semantic_embedder, semantic_question;
  std::vector<float> semantic_vector;
  // Set by the router stage on a `classify` route: the class (an index into
  // the route's classes; -1: not classified) and why ("rule=extraction").
  int route_class = -1;
  std::string route_reason;
  // Set by the trimmer: tokens it removed, by step ("whitespace", "duplicates",
  // "history", "documents"), in the order the steps ran.
  std::vector<std::pair<std::string, int64_t>> trimmed_tokens;
  // The request's trace (null: not traced), and the span of the stage running
  // now: a stage's own steps (the semantic cache's embed and search) are its children.
  std::shared_ptr<RequestTrace> trace;
  SpanId stage_span;
  // Seconds each stage took, in the order they ran (server-timing, the access log).
  std::vector<std::pair<std::string, double>> stage_seconds;

  // A step of the running stage, as a child span of it (nothing when not traced).
  void AddStepSpan(std::string name, std::chrono::steady_clock::time_point start,
                   std::chrono::steady_clock::time_point end, std::vector<Attribute> attributes = {}) const {
    if (!trace) return;
    trace->Add(Span{.name = std::move(name), .id = NewSpanId(), .parent = stage_span, .start = start, .end = end,
                    .attributes = std::move(attributes)});
  }
};

// A complete answer as the backend gave it, for stages that store answers.
struct CapturedAnswer {
  Endpoint endpoint = Endpoint::kChatCompletions;
  std::string model;          // as the client named it
  std::string text;           // the whole content
  std::string finish_reason;
  bool has_usage = false;
  Usage usage;
};

// A stage's own answer: replayed to the client like a backend's (the chunks of a
// stream, or the body), so a client cannot tell it from a fresh one but by its headers.
struct StageAnswer {
  std::vector<BackendChunk> chunks;  // streaming clients
  BackendResult result;              // body for the others; usage, finish reason
  std::string answered_by;           // "exact-cache": the x-tachyon-backend header
  // A sampled audit of this answer (the semantic cache's precision): the gateway
  // sends the request upstream in the background and calls this with the fresh
  // answer's text, whether it came from a deterministic backend (a local engine
  // at temperature 0), or with nullopt and why not ("breaker", "failed").
  std::function<void(std::optional<std::string> fresh, bool deterministic, const std::string& why_not)> audit;
};

class Stage {
 public:
  virtual ~Stage() = default;
  virtual std::string_view name() const = 0;
  // nullopt: pass (the request possibly changed); an answer: the request ends here.
  virtual std::optional<StageAnswer> Process(GatewayRequest& request) = 0;
  // Process does work for this route that would stall an I/O thread (embedding
  // a message): the gateway then runs the pipeline on a worker.
  virtual bool costly(const std::string& /*route*/) const { return false; }
  // Whether Process may change the request's parsed body in place. The client's
  // bytes (CompletionRequest::raw_body) go upstream only while they still mean the
  // body, so after a stage that may change it they are dropped. A stage that only
  // reads the request, or replaces it by a new parse (which keeps its own bytes),
  // says false.
  virtual bool changes_body() const { return true; }
  // Stages that store answers: the gateway then collects each backend answer
  // that ends complete (kOk) and calls OnAnswer on the backend's thread.
  virtual bool wants_answers() const { return false; }
  virtual void OnAnswer(const GatewayRequest& /*request*/, const CapturedAnswer& /*answer*/) {}
  // What the stage's span says of what it did to this request (cache status, class, trimmed tokens).
  virtual void SpanAttributes(const GatewayRequest& /*request*/, std::vector<Attribute>* /*out*/) const {}
};

class Pipeline {
 public:
  void Add(std::unique_ptr<Stage> stage) { stages_.push_back(std::move(stage)); }
  size_t num_stages() const { return stages_.size(); }
  bool costly(const std::string& route) const {
    for (const auto& stage : stages_) {
      if (stage->costly(route)) return true;
    }
    return false;
  }
  bool wants_answers() const {
    for (const auto& stage : stages_) {
      if (stage->wants_answers()) return true;
    }
    return false;
  }
  void OnAnswer(const GatewayRequest& request, const CapturedAnswer& answer) const {
    for (const auto& stage : stages_) {
      if (stage->wants_answers()) stage->OnAnswer(request, answer);
    }
  }
  const std::vector<std::unique_ptr<Stage>>& stages() const { return stages_; }
  // Runs the stages in order until one answers; times each (and, when the
  // request is traced, gives each a span under the server span).
  std::optional<StageAnswer> Run(GatewayRequest& request) const {
    for (const auto& stage : stages_) {
      const auto start = std::chrono::steady_clock::now();
      if (request.trace) request.stage_span = NewSpanId();
      std::optional<StageAnswer> answer = stage->Process(request);
      const auto end = std::chrono::steady_clock::now();
      request.stage_seconds.emplace_back(stage->name(), std::chrono::duration<double>(end - start).count());
      if (request.trace) {
        Span span{.name = "gateway." + std::string(stage->name()), .id = request.stage_span,
                  .parent = request.trace->root(), .start = start, .end = end};
        stage->SpanAttributes(request, &span.attributes);
        request.trace->Add(std::move(span));
      }
      if (answer) return answer;
      if (stage->changes_body() && !request.request->raw_body.empty()) request.request->raw_body.clear();
    }
    return std::nullopt;
  }

 private:
  std::vector<std::unique_ptr<Stage>> stages_;
};

}  // namespace tachyon
