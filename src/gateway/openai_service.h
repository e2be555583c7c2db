// OpenAiService: the OpenAI-compatible routes over the local engine.
//
//   GET  /health, /v1/models, /metrics
//   POST /v1/completions, /v1/chat/completions (streaming and not)
//
// A request is validated (api/), its prompt rendered (chat template) and
// tokenized, checked against the limits, and submitted to the EngineLoop; its
// tokens come back on the engine thread and are turned into text (stop strings
// included) and written to the client as they arrive. A client that goes away
// cancels its request. Every request's timings go to the histograms of
// /metrics and to one JSON access-log line on stderr.
#pragma once

#include <atomic>
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "engine/engine_loop.h"
#include "http/http_server.h"
#include "obs/histogram.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {

struct OpenAiServiceOptions {
  std::string model_name;          // what /v1/models lists and requests must name (or omit)
  std::string api_key;             // Bearer token; empty: no authentication
  int64_t max_model_len = 4096;    // prompt + generated tokens
  int max_queue = 256;             // requests in flight before 429
  double request_timeout_seconds = 0;  // a request still running after this ends with an error; 0: none
  bool access_log = true;
};

class OpenAiService {
 public:
  // chat_template: null when the model has none (chat requests then get a clear 400).
  OpenAiService(OpenAiServiceOptions options, EngineLoop* loop, const Tokenizer* tokenizer,
                std::optional<ChatTemplate> chat_template);

  void Handle(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer);

  std::string RenderMetrics() const;

 private:
  void HandleCompletion(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer, bool chat);

  OpenAiServiceOptions options_;
  EngineLoop* loop_;
  const Tokenizer* tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  std::atomic<int64_t> next_id_{1};
  const int64_t started_ = 0;

 public:
  // Metrics (names as vLLM's, so dashboards work).
  Histogram ttft{Histogram::LatencyBuckets()};
  Histogram itl{Histogram::LatencyBuckets()};
  Histogram e2e{Histogram::LatencyBuckets()};
  Histogram queue_time{Histogram::LatencyBuckets()};
  std::atomic<int64_t> prompt_tokens{0}, generation_tokens{0};
  std::atomic<int64_t> requests_ok{0}, requests_error{0}, requests_cancelled{0};
};

}  // namespace tachyon
