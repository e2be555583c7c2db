// RemoteBackend: an OpenAI-compatible upstream (vLLM, llama.cpp's server, a
// hosted API) or Anthropic's Messages API, over HttpClient, on its own loop thread.
//
// Anthropic: the chat request is translated (POST {base_url}/v1/messages), and
// each event of the answer becomes its OpenAI chunk as it is read; the rest
// below holds for both.
//
// The request goes up as the client sent it (every field, known or not), with
// `model` replaced by upstream_model when one is set. A streamed answer comes
// back event by event and each event is handed on the moment it is read: no
// buffering, the event's JSON unchanged (only the upstream's [DONE] is dropped:
// the server ends every stream itself). Called on an HttpServer I/O thread, the
// call runs on that thread's own loop (a client per I/O thread, each with its
// connection pool), so nothing is handed between threads on the way up or back;
// called elsewhere (a worker), it runs on the backend's own loop thread. A 4xx passes through as it is; a
// connect error, a 5xx or a first-byte timeout is a kFailed result (nothing has
// reached the client: the route may try another backend); a failure after the
// first event is kBroken. Cancel closes the upstream connection.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "api/stream_chunk.h"
#include "backend/backend.h"
#include "http/http_client.h"

namespace tachyon {

// The API an upstream speaks: OpenAI's (requests and answers pass through), or
// Anthropic's Messages API (chat requests translated there, answers back: api/anthropic.h).
enum class UpstreamDialect { kOpenAI, kAnthropic };

struct RemoteBackendOptions {
  std::string name;
  UpstreamDialect dialect = UpstreamDialect::kOpenAI;
  std::string base_url;        // "http://127.0.0.1:9001/v1" (the paths /chat/completions, /completions go under it)
  std::string connect_address; // a numeric address to connect to instead of base_url's host's (DNS discovery); "": resolve the host
  std::string api_key;         // sent as "Authorization: Bearer" (Anthropic: x-api-key); "" for none
  std::string upstream_model;  // the model name sent upstream; "" keeps the client's
  double connect_timeout_seconds = 5;
  double first_byte_timeout_seconds = 60;
  double total_timeout_seconds = 600;
  size_t pool_size = 64;       // idle keep-alive connections kept to the upstream
  bool verify_tls = true;
  std::string ca_file;
  size_t max_body_bytes = 64 << 20;  // a whole (not streamed) answer larger than this is an error
  // Anthropic: the anthropic-version header, and max_tokens when the client sets none
  // (the Messages API requires it).
  std::string anthropic_version = "2023-06-01";
  int64_t default_max_tokens = 4096;
};

class RemoteBackend : public Backend {
 public:
  static StatusOr<std::unique_ptr<RemoteBackend>> Create(const RemoteBackendOptions& options);
  ~RemoteBackend() override;  // stops the loop; calls in flight get no more callbacks

  const std::string& name() const override { return options_.name; }
  const char* kind() const override {
    return options_.dialect == UpstreamDialect::kAnthropic ? "anthropic" : "openai";
  }
  const std::string& model_name() const override { return model_name_; }
  std::string server_address() const override { return url_.host; }
  int server_port() const override { return url_.port; }
  CancelFn Start(BackendRequest request, std::shared_ptr<BackendSink> sink) override;
  void Shutdown() override;
  // Its own loop thread, or an I/O thread where its calls run.
  bool OnOwnThread() const override;

  const RemoteBackendOptions& options() const { return options_; }

  struct Call;

 private:
  explicit RemoteBackend(RemoteBackendOptions options, HttpUrl url);

  RemoteBackendOptions options_;
  HttpUrl url_;
  std::string model_name_;  // upstream_model, or the backend's name
  // A client and its chunk parser, used on one loop's thread only.
  struct LoopClient {
    std::unique_ptr<HttpClient> client;
    StreamChunkParser parser;
  };
  LoopClient* ClientFor(EventLoop* loop);

  HttpClientOptions client_options_;
  std::unique_ptr<LoopClient> own_;  // on thread_; null after Shutdown
  std::thread thread_;
  mutable std::mutex mutex_;
  std::unordered_map<EventLoop*, std::unique_ptr<LoopClient>> shared_;  // guarded by mutex_
  // The upstream refuses our key (its last answer was 401/403): logged when it
  // starts and when it ends, never per request.
  std::atomic<bool> auth_refused_{false};
  bool shut_down_ = false;                                              // guarded by mutex_
};

}  // namespace tachyon
