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
  int num_logprobs = -1;       // completions "logprobs": N; chat "logprobs": true + "top_logprobs": N; -1 off
  std::string user;
};

// One generated token's log-probability entry, with its text (possibly part
// of a UTF-8 character) and the most likely alternatives.
struct LogprobEntry {
  std::string token;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body, Endpoint endpoint);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
};

const char* FinishReasonName(FinishReason reason);  // "stop", "length", or nullptr

// A whole (non-streamed) response.
// logprobs: null when not asked for; text_offset: where the entries' text starts in the completion.
std::string CompletionBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::string& text, FinishReason reason, const Usage& usage,
                           const std::vector<LogprobEntry>* logprobs = nullptr);
// One SSE chunk's JSON; `first` adds the assistant role to a chat delta.
std::string ChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                      const std::string& text, FinishReason reason, bool first,
                      const std::vector<LogprobEntry>* logprobs = nullptr, int64_t text_offset = 0);
// The final usage chunk of stream_options.include_usage.
std::string UsageChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const Usage& usage);
// "data: <json>\n\n"
std::string SseEvent(const std::string& json);

}  // namespace tachyon
