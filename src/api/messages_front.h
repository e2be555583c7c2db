// The /v1/messages front door: Anthropic's Messages API in front of the gateway,
// for Anthropic SDK clients. A Messages request is validated as Anthropic
// validates it and becomes the OpenAI chat request the gateway's pipeline reads
// (the table of api/anthropic.h, inverted); the chat answer, whole or chunk by
// chunk, becomes a Messages answer or event stream. With an Anthropic backend the
// request goes back to the Messages API (the client's cache_control breakpoints
// travel on the text parts and tools), so what a client says reaches Claude.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

#include "api/anthropic.h"
#include "api/openai.h"

namespace tachyon {

// The chat request body for a Messages request, or a 400 that says what is
// wrong in Anthropic's words. `count_tokens`: the count_tokens endpoint's body
// (no max_tokens, no stream).
std::variant<nlohmann::json, ApiError> ChatBodyFromMessagesRequest(std::string_view body, bool count_tokens = false);

// {"type": "error", "error": {"type", "message"}}: an ApiError in Anthropic's
// shape, its type one of Anthropic's.
std::string MessagesErrorBody(const ApiError& error);

// A whole chat.completion as a Messages answer; usage (prompt and cache counts)
// from the backend's result where it knows them.
std::variant<std::string, std::string> MessagesAnswerFromChat(std::string_view chat_body, const std::string& model,
                                                              const MessagesUsage& usage, bool has_usage);

// An OpenAI chunk stream as Messages events ("event: NAME\ndata: JSON\n\n"),
// written as each chunk arrives: message_start before the first, a content block
// per run of text, reasoning or one tool call, message_delta and message_stop at End.
class MessagesEventWriter {
 public:
  MessagesEventWriter(std::string id, std::string model) : id_(std::move(id)), model_(std::move(model)) {}
  // One chunk's JSON; appends the events it makes.
  void Chunk(std::string_view chunk, std::string* out);
  // The end of a complete answer.
  void End(const MessagesUsage& usage, bool has_usage, std::string* out);
  // An error after the stream started: an `error` event.
  static std::string ErrorEvent(const ApiError& error);

 private:
  enum class Block { kNone, kText, kThinking, kToolUse };
  void Translate(const nlohmann::json& chunk, std::string* out);
  void Start(std::string* out);
  void Open(Block kind, nlohmann::json content_block, std::string* out);
  void Close(std::string* out);

  std::string id_, model_;
  bool started_ = false;
  Block open_ = Block::kNone;
  int index_ = -1;       // the open block's index
  int tool_index_ = -1;  // the OpenAI tool call the open tool_use block carries
  std::string stop_reason_ = "end_turn";
  MessagesUsage usage_;
  bool has_usage_ = false;
};

// stop_reason for an OpenAI finish_reason.
std::string StopReasonFromFinishReason(std::string_view finish_reason);

}  // namespace tachyon
