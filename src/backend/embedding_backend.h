// EmbeddingBackend: a local GGUF embedding model (LocalEmbedder) serving
// /v1/embeddings, on a thread of its own.
//
// Handle() queues a parsed request and returns at once; the backend's thread
// takes every request waiting, tokenizes and checks them (an input over the
// context is a 400 unless the request asks to truncate; a token id outside the
// vocabulary is a 400), runs all of their inputs together in as few forward
// passes as max_batch_tokens allows (many small requests share one pass), and
// answers each with OpenAI's response body. A full queue answers 429 at once.
// Metrics {model_name}: requests by status, inputs, tokens, latency.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "api/embeddings.h"
#include "backend/backend.h"
#include "embed/local_embedder.h"
#include "obs/metrics.h"

namespace tachyon {

struct EmbeddingBackendOptions {
  std::string name = "embedding";  // the backend's name (config), for logs
  LocalEmbedderOptions embedder;   // model_path, served name, pooling, threads, max_batch_tokens
  int max_queue = 256;             // requests waiting before 429
  size_t max_inputs = 2048;        // inputs in one request (OpenAI's limit)
};

struct EmbeddingAnswer {
  int http_status = 200;
  std::string body;  // the response, or an error body
  int64_t prompt_tokens = 0;
  size_t num_inputs = 0;
};

class EmbeddingBackend {
 public:
  static StatusOr<std::unique_ptr<EmbeddingBackend>> Create(const EmbeddingBackendOptions& options,
                                                            MetricsRegistry* metrics);
  ~EmbeddingBackend();

  const std::string& name() const { return options_.name; }
  const std::string& model_name() const { return embedder_->name(); }
  size_t max_inputs() const { return options_.max_inputs; }
  LocalEmbedder& embedder() { return *embedder_; }
  std::string Describe() const { return embedder_->Describe(); }

  // done runs once, on the backend's thread (or on the caller's for a full
  // queue), unless the returned function cancels the request before it runs.
  using Done = std::function<void(EmbeddingAnswer)>;
  CancelFn Handle(EmbeddingRequest request, Done done);
  // Stops the thread; requests still queued are answered 503.
  void Shutdown();
  bool OnOwnThread() const { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  struct Job;
  EmbeddingBackend() = default;
  void Loop();
  void Run(std::vector<std::shared_ptr<Job>>& jobs);

  EmbeddingBackendOptions options_;
  std::unique_ptr<LocalEmbedder> embedder_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;  // guarded by mutex_
  bool stopping_ = false;                   // guarded by mutex_
  std::thread thread_;

  CounterFamily* requests_ = nullptr;  // {model_name, status}
  Counter* inputs_ = nullptr;
  Counter* tokens_ = nullptr;
  Histogram* latency_ = nullptr;
};

}  // namespace tachyon
