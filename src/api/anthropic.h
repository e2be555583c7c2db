// Anthropic's Messages API in OpenAI's terms: a chat completion request
// translated to a Messages request, and a Messages answer (whole, or streamed
// event by event) translated back to the chat completion a client of OpenAI's
// API parses. What one side can say and the other cannot is refused with a 400
// that names it, never dropped (docs/gateway.md has the table).
//
// Facts from Anthropic's API reference (docs.anthropic.com, "Messages" and
// "Streaming Messages"): `max_tokens` is required; `system` is top level;
// roles alternate user/assistant; temperature is in [0, 1]; tool results are
// user-turn blocks; a stream is message_start, then per content block
// content_block_start / _delta... / _stop, then message_delta and message_stop,
// with ping and error events anywhere and new event types to be ignored.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/openai.h"
#include "api/prompt_cache.h"

namespace tachyon {

struct MessagesRequestOptions {
  std::string model;               // sent as `model` ("" keeps the client's)
  int64_t default_max_tokens = 4096;  // when the client set neither max_tokens nor max_completion_tokens
  PromptCacheOptions prompt_cache;    // "auto": PlaceCacheBreakpoints
};

// The Messages request for a chat completion request, serialized canonically
// (keys sorted, no whitespace: the same content gives the same bytes), or a
// 400 that names what has no equivalent.
std::variant<nlohmann::json, ApiError> MessagesRequestFromChat(const CompletionRequest& request,
                                                               const MessagesRequestOptions& options);

// With options.automatic, cache_control breakpoints at the end of the stable
// prefix, where that prefix reaches options.min_tokens (LowTokenEstimate): after
// the last message before the newest user turn, after the system prompt, after
// the tools, in that order, while Anthropic's four are not used up (the client's
// own count and stay). Never reorders or rewrites anything. Returns how many it placed.
int PlaceCacheBreakpoints(nlohmann::json* messages_request, const PromptCacheOptions& options);

// usage of a Messages answer. Anthropic's input_tokens counts only the tokens
// after the last cache breakpoint; the prompt is all three.
struct MessagesUsage {
  int64_t input_tokens = 0;
  int64_t output_tokens = 0;
  int64_t cache_read_tokens = 0;   // cache_read_input_tokens
  int64_t cache_write_tokens = 0;  // cache_creation_input_tokens
  int64_t prompt_tokens() const { return input_tokens + cache_read_tokens + cache_write_tokens; }
};

// OpenAI's finish_reason for a stop_reason: end_turn / stop_sequence / pause_turn
// -> stop, max_tokens -> length, tool_use -> tool_calls, refusal -> content_filter.
std::string FinishReasonFromStopReason(std::string_view stop_reason);

// A whole Messages answer as a chat.completion.
struct TranslatedAnswer {
  std::string body;                // the chat.completion JSON
  std::optional<std::string> text; // the content when the answer is plain text (no tool calls)
  std::string finish_reason;
  MessagesUsage usage;
};
// The answer, or why the body is not a Messages answer.
std::variant<TranslatedAnswer, std::string> ChatAnswerFromMessages(std::string_view body, const std::string& id,
                                                                   int64_t created, const std::string& model);

// An Anthropic error body ({"type": "error", "error": {"type", "message"}}) as
// an ApiError of OpenAI's shape with the given status.
ApiError ApiErrorFromMessagesError(int http_status, const std::string& body);

// A Messages stream, one event's data at a time, as OpenAI chat chunks. Nothing
// is held back: each text or tool-argument delta gives its chunk at once (the
// assistant role rides on the first one).
class MessagesStreamTranslator {
 public:
  struct Chunk {
    std::string event;          // the chat.completion.chunk JSON
    std::string text;           // content or reasoning text, "" for others
    std::string finish_reason;  // on the finish chunk
    bool reasoning = false;
    bool has_tool_calls = false;
  };
  MessagesStreamTranslator(std::string id, int64_t created, std::string model, bool include_usage);

  // One event's data. Returns "" and appends chunks, or the error: an `error`
  // event (its message, with *upstream_error set), or data that is not a
  // Messages event (a block delta before its start, an unknown block type...).
  std::string Feed(std::string_view data, std::vector<Chunk>* out, bool* upstream_error = nullptr);

  bool stopped() const { return stopped_; }  // message_stop seen
  const MessagesUsage& usage() const { return usage_; }
  const std::string& finish_reason() const { return finish_reason_; }

 private:
  std::string FeedEvent(std::string_view data, std::vector<Chunk>* out, bool* upstream_error);
  Chunk Make(nlohmann::ordered_json delta, std::string finish_reason);
  std::string OnBlockStart(const nlohmann::json& event, std::vector<Chunk>* out);
  std::string OnBlockDelta(const nlohmann::json& event, std::vector<Chunk>* out);
  std::string OnMessageDelta(const nlohmann::json& event, std::vector<Chunk>* out);

  enum class Block { kText, kThinking, kToolUse, kIgnored };
  std::string id_, model_;
  int64_t created_;
  bool include_usage_;
  bool started_ = false, role_sent_ = false, stopped_ = false;
  std::vector<std::pair<Block, int>> blocks_;  // by block index: kind, tool call index
  int num_tool_calls_ = 0;
  MessagesUsage usage_;
  std::string finish_reason_;
};

}  // namespace tachyon
