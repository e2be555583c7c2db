// Backend: anything that turns a chat / completion request into a stream of
// OpenAI chunks (text, usage, finish reason) or one whole answer.
//
//   LocalBackend   an EngineLoop in this process (token ids stay inside it)
//   RemoteBackend  an OpenAI-compatible or Anthropic upstream over HttpClient
//
// A call's output goes to its BackendSink on the backend's own thread (the
// engine loop, the client loop), one callback at a time: OnChunk for each
// event of a streamed answer, then OnDone exactly once, unless the call was
// cancelled first (then nothing more arrives once Cancel has been seen).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "api/openai.h"
#include "api/prompt_cache.h"

namespace tachyon {

// What a backend is asked.
struct BackendRequest {
  std::shared_ptr<const CompletionRequest> request;  // parsed and validated, the whole body kept
  std::string id;          // the response id the client sees: "chatcmpl-17"
  int64_t created = 0;     // unix seconds, for the response objects
  std::string model_name;  // the model name responses carry: what the client asked for
  std::chrono::steady_clock::time_point arrival;  // when the server read the request
  // True while the client is behind on what was already sent: a backend that can
  // pause its stream does until it is false again (backpressure). May be empty.
  std::function<bool()> output_blocked;
  // The route's `prompt_cache`: what a hosted backend does for its provider's prompt cache.
  PromptCacheOptions prompt_cache;
  // W3C traceparent naming the gateway's span of this attempt ("" : not traced);
  // a remote backend sends it upstream so that the provider's trace joins ours.
  std::string traceparent;
};

// One event of a streamed answer.
struct BackendChunk {
  std::string event;          // the chunk's JSON, as the client gets it after "data: "
  std::string text;           // its content text ("" for a role, tool-call or usage chunk)
  std::string finish_reason;  // "" until the last choice chunk
  bool reasoning = false;       // `text` is the model's reasoning (reasoning_content), not the answer
  bool has_tool_calls = false;  // the event carries tool calls (or a legacy function_call)
};

struct BackendResult {
  enum class Kind {
    kOk,        // complete: streamed, or `body` holds the whole answer
    kRejected,  // a final answer that is an error (a 4xx of the upstream, a limit): status and body as they are
    kFailed,    // failed before anything reached the client: another backend may be tried
    kBroken,    // failed after chunks went out: the stream ends with an error event
  };
  Kind kind = Kind::kOk;
  int http_status = 200;
  std::string content_type = "application/json";
  std::string body;          // kOk and not streamed: the answer; kRejected: the error body
  // kOk and not streamed: the answer's text as data, when the answer is one
  // choice of plain text (no tool calls); absent otherwise. What the caches keep,
  // so that nothing parses `body` back.
  std::optional<std::string> text;
  ApiError error;            // kFailed, kBroken: what the client is told
  std::string error_kind;    // for metrics: connect, first_byte_timeout, timeout, upstream_5xx, truncated, ...
  std::string finish_reason;
  bool has_usage = false;
  Usage usage;
  int64_t num_cached_tokens = -1;     // prompt tokens found in the prefix cache (local) or the provider's prompt cache
  int64_t cache_write_tokens = -1;    // Anthropic: prompt tokens written to its prompt cache
  double first_byte_seconds = -1;     // remote: send to the response head
  double retry_after_seconds = -1;    // remote: the upstream's Retry-After on a 429 or 503 (-1: none)
  double queue_seconds = -1;          // local: arrival in the engine to its first step (-1: unknown)
  // From Start to the first token: local, the first token decoded; remote, the
  // first byte of the answer's body (-1: none, or unknown).
  double first_token_seconds = -1;
  double submitted_seconds = -1;      // local: from Start to the engine's queue (template and tokens done)
};

class BackendSink {
 public:
  virtual ~BackendSink() = default;
  virtual void OnChunk(BackendChunk chunk) = 0;
  virtual void OnDone(BackendResult result) = 0;
};

// Ends a call early: safe from any thread, more than once, after OnDone too.
using CancelFn = std::function<void()>;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const std::string& name() const = 0;
  virtual const char* kind() const = 0;  // "local", "openai", "anthropic"
  // The model name this backend answers with (for metrics and /v1/models).
  virtual const std::string& model_name() const = 0;
  // Where a remote backend's requests go (trace attributes); "" and 0 for a local one.
  virtual std::string server_address() const { return ""; }
  virtual int server_port() const { return 0; }
  // Starts a call; may do request work (templating, tokenizing) on the calling
  // thread before it returns. A request refused at once gets OnDone before Start returns.
  virtual CancelFn Start(BackendRequest request, std::shared_ptr<BackendSink> sink) = 0;
  // Stops the backend's thread and drops every call in flight (their sinks with
  // them); Start must not be called after. Idempotent; the destructor does it too.
  virtual void Shutdown() = 0;
  // True on the backend's own thread (where its callbacks run): a backend must
  // not be destroyed there (it would join itself).
  virtual bool OnOwnThread() const = 0;
  // Start does request work that would stall an I/O thread (chat templates,
  // tokenization): the gateway then calls it from a worker.
  virtual bool StartIsCostly() const { return false; }
};

}  // namespace tachyon
