// The OpenAI-compatible API: request parsing with validation, and the JSON of
// responses, stream chunks and errors in the shapes OpenAI's clients parse.
// Unknown fields are ignored; a known field of the wrong type is an error
// that names it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/strong_id.h"
#include "engine/engine.h"
#include "tokenizer/chat_template.h"

namespace tachyon {

// {"error": {"message", "type", "param", "code"}} with an HTTP status.
struct ApiError {
  int http_status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;  // the offending field, or ""
  std::string code;   // machine-readable, or ""
};

std::string ErrorBody(const ApiError& error);

enum class Endpoint { kCompletions, kChatCompletions };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions: text ...
  std::vector<TokenId> prompt_ids;    // ... or token ids
  bool prompt_is_ids = false;
  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens
  SamplingParams sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // vLLM's extension, for benchmarks
  std::string user;
};

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body, Endpoint endpoint);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

const char* FinishReasonName(FinishReason reason);  // "stop", "length", or nullptr

// A whole (non-streamed) response.
std::string CompletionBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::string& text, FinishReason reason, const Usage& usage);
// One SSE chunk's JSON; `first` adds the assistant role to a chat delta.
std::string ChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                      const std::string& text, FinishReason reason, bool first);
// The final usage chunk of stream_options.include_usage.
std::string UsageChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const Usage& usage);
// "data: <json>\n\n"
std::string SseEvent(const std::string& json);

}  // namespace tachyon
