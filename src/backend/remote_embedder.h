// RemoteEmbedder: an Embedder over any OpenAI-compatible /v1/embeddings
// upstream (OpenAI, vLLM, TEI, another Tachyon), on an HttpClient thread of its
// own. Embed() sends the texts in requests of at most max_batch inputs (float
// encoding), waits for the answers, and returns the vectors normalized (so that
// cosine is a dot product, whatever the upstream does).
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "embed/embedder.h"
#include "http/http_client.h"

namespace tachyon {

struct RemoteEmbedderOptions {
  std::string base_url;  // "http://127.0.0.1:8000/v1": requests go to base_url + "/embeddings"
  std::string model;     // the upstream's model name
  std::string api_key;   // "Authorization: Bearer"; "" for none
  int dimensions = 0;    // sent as "dimensions" when > 0
  size_t max_batch = 256;
  double timeout_seconds = 30;
  bool verify_tls = true;
  std::string ca_file;
};

class RemoteEmbedder : public Embedder {
 public:
  static StatusOr<std::unique_ptr<RemoteEmbedder>> Create(const RemoteEmbedderOptions& options);
  ~RemoteEmbedder() override;

  const std::string& id() const override { return id_; }
  // The configured dimensions, else what the first answer had (0 before it).
  int dimension() const override;
  // Errors: the upstream unreachable (kUnavailable), a non-200 answer with its
  // message, or an answer that is not an embeddings list of the right length.
  StatusOr<std::vector<float>> Embed(std::span<const std::string> texts) override;

 private:
  RemoteEmbedder() = default;
  StatusOr<std::vector<float>> EmbedBatch(std::span<const std::string> texts);

  RemoteEmbedderOptions options_;
  HttpUrl url_;
  std::string id_;
  std::unique_ptr<HttpClient> client_;
  std::thread thread_;
  mutable std::mutex mutex_;
  int dimension_ = 0;  // guarded by mutex_
};

}  // namespace tachyon
