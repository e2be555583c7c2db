// The OpenAI-compatible API: request parsing with validation, and the JSON of
// responses, stream chunks and errors in the shapes OpenAI's clients parse.
// A known field of the wrong type is an error that names it. The parsed body is
// kept whole (CompletionRequest::body), so fields Tachyon does not interpret
// (tools, ...) pass through to a remote upstream unchanged.
// Nothing here depends on the engine: what a backend can do (n > 1, image
// parts) is the backend's to accept or refuse.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/strong_id.h"
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
// 400 json_too_deep: a body that nests past kMaxJsonDepth (api/json_parse.h).
ApiError TooDeepError();
// The message of an error body in OpenAI's shape ({"error": {"message"}} or
// {"error": "..."}), or the body's first 300 bytes when it has none.
std::string ErrorMessageOf(const std::string& body);

enum class Endpoint { kCompletions, kChatCompletions };

// Sampling fields of a request, with OpenAI's defaults (temperature 1 and the
// rest off); the local backend maps them onto the engine's SamplingParams.
struct SamplingOptions {
  float temperature = 1.0f;        // 0: greedy
  int top_k = 0;                   // vLLM's extension; 0: all tokens
  float top_p = 1.0f;
  float min_p = 0.0f;              // vLLM's extension
  float repetition_penalty = 1.0f; // vLLM's extension
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  uint64_t seed = 0;
};

// response_format: free text, any JSON object, or JSON under a schema.
struct ResponseFormat {
  enum class Type { kText, kJsonObject, kJsonSchema };
  Type type = Type::kText;
  std::string name;               // json_schema.name
  bool strict = false;            // json_schema.strict (the output follows the schema either way)
  nlohmann::ordered_json schema;  // json_schema.schema, its properties in the client's order
};

// tool_choice: none, auto, required, or one named function.
enum class ToolChoice { kNone, kAuto, kRequired, kFunction };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kCompletions;
  std::string model;
  std::vector<ChatMessage> messages;  // chat
  std::string prompt;                 // completions: text ...
  std::vector<TokenId> prompt_ids;    // ... or token ids
  bool prompt_is_ids = false;
  std::optional<int64_t> max_tokens;  // max_tokens or max_completion_tokens
  SamplingOptions sampling;
  std::vector<std::string> stop;
  int n = 1;                          // choices asked for
  bool has_non_text_parts = false;    // chat content parts other than text (images, audio)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool ignore_eos = false;     // vLLM's extension, for benchmarks
  bool speculative = true;     // Tachyon's extension: false opts out of speculative decoding
  int num_logprobs = -1;       // completions "logprobs": N; chat "logprobs": true + "top_logprobs": N; -1 off
  ResponseFormat response_format;
  // Chat: the functions the model may call (OpenAI's `tools`, each checked to be
  // {"type": "function", "function": {"name", "description"?, "parameters"?}}).
  nlohmann::ordered_json tools = nlohmann::ordered_json::array();
  ToolChoice tool_choice = ToolChoice::kNone;  // auto when tools are given
  std::string tool_choice_name;                // kFunction
  bool parallel_tool_calls = true;
  std::string user;
  nlohmann::json body;  // the whole parsed request, unknown fields included
  // The client's bytes when they mean exactly `body` to any JSON reader (no object
  // in them repeats a key, so no upstream can read a field the gateway did not
  // see), else "". Sent upstream as they are (no re-serialising on the hot path).
  // A gateway stage that changes `body` in place says so (Stage::changes_body) and
  // the pipeline drops these bytes; one that parses a new request keeps that one's.
  std::string raw_body;
};

// One generated token's log-probability entry, with its text (possibly part
// of a UTF-8 character) and the most likely alternatives.
struct LogprobEntry {
  std::string token;
  float logprob = 0;
  std::vector<std::pair<std::string, float>> top;
};

// The longest stop string a request may carry, in bytes.
inline constexpr size_t kMaxStopBytes = 1024;

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view body, Endpoint endpoint);

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Prompt tokens a cache already held (the engine's prefix cache, a provider's
  // prompt cache): usage.prompt_tokens_details.cached_tokens; -1: not known.
  int64_t cached_tokens = -1;
};

// Finish reasons are OpenAI's strings ("stop", "length", "tool_calls", ...): a
// remote upstream's pass through as they are; "" means not finished (null).

// A whole (non-streamed) response.
// logprobs: null when not asked for; text_offset: where the entries' text starts in the completion.
// tool_calls (chat): the message's calls; its content is then null when empty.
std::string CompletionBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::string& text, const std::string& finish_reason, const Usage& usage,
                           const std::vector<LogprobEntry>* logprobs = nullptr,
                           const std::vector<ToolCall>* tool_calls = nullptr);
// The text of a whole (non-streamed) answer's body when it is one choice of
// plain text: a chat message's string content with no tool calls (its
// reasoning_content is not part of it), or a completion's text; nullopt for
// anything else (several choices, tool calls, no text).
std::optional<std::string> PlainAnswerText(const nlohmann::json& body, Endpoint endpoint);
// One SSE chunk's JSON; `first` adds the assistant role to a chat delta.
// tool_calls: delta.tool_calls, indexed from first_call_index, each with its
// id, name and whole arguments.
std::string ChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                      const std::string& text, const std::string& finish_reason, bool first,
                      const std::vector<LogprobEntry>* logprobs = nullptr, int64_t text_offset = 0,
                      const std::vector<ToolCall>* tool_calls = nullptr, int first_call_index = 0);
// The final usage chunk of stream_options.include_usage.
std::string UsageChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const Usage& usage);
// "data: <json>\n\n"
std::string SseEvent(const std::string& json);
// The last event of every stream.
inline constexpr std::string_view kSseDone = "data: [DONE]\n\n";

}  // namespace tachyon
