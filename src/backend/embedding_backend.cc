#include "backend/embedding_backend.h"

#include <chrono>

namespace tachyon {

struct EmbeddingBackend::Job {
  EmbeddingRequest request;
  Done done;
  std::chrono::steady_clock::time_point arrival;
  std::atomic<bool> cancelled{false};
  // Filled on the backend's thread.
  std::vector<std::vector<TokenId>> inputs;
  int64_t tokens = 0;
};

StatusOr<std::unique_ptr<EmbeddingBackend>> EmbeddingBackend::Create(const EmbeddingBackendOptions& options,
                                                                      MetricsRegistry* metrics) {
  if (options.max_queue < 1) return InvalidArgumentError("max_queue must be at least 1");
  if (options.max_inputs < 1) return InvalidArgumentError("max_inputs must be at least 1");
  std::unique_ptr<EmbeddingBackend> b(new EmbeddingBackend());
  b->options_ = options;
  ASSIGN_OR_RETURN(b->embedder_, LocalEmbedder::Create(options.embedder));
  const std::string& model = b->embedder_->name();
  b->requests_ = &metrics->AddCounter("tachyon:embedding_requests_total", "Embedding requests answered, by status",
                                      {"model_name", "status"});
  b->inputs_ = &metrics->AddCounter("tachyon:embedding_inputs_total", "Inputs embedded", {"model_name"}).With({model});
  b->tokens_ = &metrics->AddCounter("tachyon:embedding_tokens_total", "Tokens of the inputs embedded", {"model_name"})
                    .With({model});
  b->latency_ = &metrics->AddHistogram("tachyon:embedding_request_latency_seconds",
                                       "From arrival to the answer of an embedding request", {"model_name"})
                     .With({model});
  b->thread_ = std::thread([raw = b.get()] { raw->Loop(); });
  return b;
}

EmbeddingBackend::~EmbeddingBackend() { Shutdown(); }

void EmbeddingBackend::Shutdown() {
  CHECK(!OnOwnThread()) << "an EmbeddingBackend is shut down from its own thread (a done callback)";
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

CancelFn EmbeddingBackend::Handle(EmbeddingRequest request, Done done) {
  auto job = std::make_shared<Job>();
  job->request = std::move(request);
  job->done = std::move(done);
  job->arrival = std::chrono::steady_clock::now();
  bool full = false, stopped = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopped = stopping_;
    full = queue_.size() >= static_cast<size_t>(options_.max_queue);
    if (!full && !stopped) queue_.push_back(job);
  }
  if (full || stopped) {
    const ApiError error = stopped ? ApiError{503, "the server is shutting down", "server_error", "", ""}
                                   : ApiError{429, "too many embedding requests waiting (max_queue " +
                                                       std::to_string(options_.max_queue) + ")",
                                              "rate_limit_error", "", "queue_full"};
    requests_->With({model_name(), std::to_string(error.http_status)}).Add();
    job->done({error.http_status, ErrorBody(error), 0, 0});
    return [] {};
  }
  wake_.notify_one();
  return [weak = std::weak_ptr<Job>(job)] {
    if (auto j = weak.lock()) j->cancelled = true;
  };
}

void EmbeddingBackend::Loop() {
  std::vector<std::shared_ptr<Job>> jobs;
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (stopping_) break;
      // Every request waiting now shares the forward passes.
      while (!queue_.empty()) {
        jobs.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    Run(jobs);
    jobs.clear();
  }
  std::deque<std::shared_ptr<Job>> left;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    left.swap(queue_);
  }
  const ApiError error{503, "the server is shutting down", "server_error", "", ""};
  for (auto& job : left) job->done({503, ErrorBody(error), 0, 0});
}

void EmbeddingBackend::Run(std::vector<std::shared_ptr<Job>>& jobs) {
  const int64_t vocab = embedder_->model().config().n_vocab, context = embedder_->context_length();
  auto answer = [&](Job& job, EmbeddingAnswer a) {
    requests_->With({model_name(), std::to_string(a.http_status)}).Add();
    latency_->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - job.arrival).count());
    job.done(std::move(a));
  };
  auto refuse = [&](Job& job, const ApiError& error) { answer(job, {error.http_status, ErrorBody(error), 0, 0}); };

  // Tokenize and check each request; the good ones' inputs go in one list.
  std::vector<std::vector<TokenId>> all;
  std::vector<std::shared_ptr<Job>> good;
  for (auto& job : jobs) {
    if (job->cancelled) continue;
    const EmbeddingRequest& r = job->request;
    if (r.dimensions && *r.dimensions > embedder_->dimension()) {
      refuse(*job, {400, "'dimensions' " + std::to_string(*r.dimensions) + " is more than the model's " +
                             std::to_string(embedder_->dimension()),
                    "invalid_request_error", "dimensions", ""});
      continue;
    }
    std::optional<ApiError> error;
    for (size_t i = 0; i < r.num_inputs() && !error; ++i) {
      std::vector<TokenId> ids;
      if (r.inputs_are_tokens) {
        for (int64_t id : r.token_inputs[i]) {
          if (id >= vocab) {
            error = ApiError{400, "input[" + std::to_string(i) + "] has token id " + std::to_string(id) +
                                      ", outside the vocabulary of " + std::to_string(vocab),
                             "invalid_request_error", "input", ""};
            break;
          }
          ids.push_back(TokenId(static_cast<int32_t>(id)));
        }
        if (error) break;
        if (r.truncate && static_cast<int64_t>(ids.size()) > context) ids.resize(context);
      } else {
        ids = embedder_->Tokenize(r.texts[i], r.truncate);
      }
      if (static_cast<int64_t>(ids.size()) > context) {
        error = ApiError{400, "input[" + std::to_string(i) + "] has " + std::to_string(ids.size()) +
                                  " tokens, more than the model's context of " + std::to_string(context) +
                                  " (send \"truncate\": true to cut it)",
                         "invalid_request_error", "input", "context_length_exceeded"};
        break;
      }
      job->tokens += static_cast<int64_t>(ids.size());
      job->inputs.push_back(std::move(ids));
    }
    if (error) {
      refuse(*job, *error);
      continue;
    }
    for (auto& ids : job->inputs) all.push_back(std::move(ids));
    good.push_back(job);
  }
  if (good.empty()) return;
  StatusOr<std::vector<float>> vectors = embedder_->EmbedTokens(all);
  const int dim = embedder_->dimension();
  size_t row = 0;
  for (auto& job : good) {
    const size_t n = job->request.num_inputs();
    if (!vectors.ok()) {
      refuse(*job, {500, vectors.status().message(), "server_error", "", ""});
      continue;
    }
    std::vector<float> mine(vectors->begin() + row * dim, vectors->begin() + (row + n) * dim);
    row += n;
    int out_dim = dim;
    if (job->request.dimensions && *job->request.dimensions < dim) {
      out_dim = *job->request.dimensions;
      mine = ShortenEmbeddings(mine, n, dim, out_dim);
    }
    inputs_->Add(static_cast<double>(n));
    tokens_->Add(static_cast<double>(job->tokens));
    answer(*job, {200, EmbeddingResponseBody(mine, n, out_dim, job->request.base64, model_name(), job->tokens),
                  job->tokens, n});
  }
}

}  // namespace tachyon
