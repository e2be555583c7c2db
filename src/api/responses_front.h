// The /v1/responses front door: OpenAI's Responses API in front of the gateway,
// for the clients and agent frameworks that speak it. A Responses request is
// validated as OpenAI validates it (an unknown parameter, input item or tool
// type is a 400 that names it) and becomes the chat request the gateway's
// pipeline reads, so caches, router, trimmer and every backend kind serve it
// unchanged; the chat answer, whole or chunk by chunk, becomes a response object
// or the typed event stream (response.created ... response.completed).
//
// Items. The input (a string, or a list of items) is normalized into items as
// OpenAI lists them: `message` items (roles user, assistant, system,
// developer; content parts input_text, input_image, output_text),
// `function_call` and `function_call_output` items, and `reasoning` items
// (kept for the record, not sent to a model). A conversation is a list of such
// items; a response's output items join it when a later request names the
// response as its previous_response_id.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#include "api/openai.h"

namespace tachyon {

struct ResponsesRequest {
  std::string model;
  nlohmann::json input_items = nlohmann::json::array();  // this request's input, normalized
  std::string previous_response_id;
  bool store = true;  // OpenAI's default
  bool stream = false;
  // What the response object repeats (instructions, tools, tool_choice,
  // parallel_tool_calls, max_output_tokens, temperature, top_p, text, metadata,
  // user, truncation, reasoning), with OpenAI's defaults where absent.
  nlohmann::json echo = nlohmann::json::object();
  // The chat request's fields other than messages: model, stream, max_tokens,
  // temperature, top_p, tools, tool_choice, parallel_tool_calls, response_format, user, stop.
  nlohmann::json chat = nlohmann::json::object();
  std::string instructions;  // "" : none
};

// Parses and validates a Responses request body; a 400 in OpenAI's words otherwise.
std::variant<ResponsesRequest, ApiError> ParseResponsesRequest(std::string_view body);

// The chat request body for the request, after the conversation so far
// (`history`: items of earlier turns, from previous_response_id; may be empty).
nlohmann::json ChatBodyFromResponses(const ResponsesRequest& request, const nlohmann::json& history);

// resp_..., unpredictable (an id is how a stored response is read back).
std::string NewResponseId();

// The response object before any output: status in_progress.
nlohmann::json ResponseSkeleton(const ResponsesRequest& request, const std::string& id, int64_t created_at);

// Token counts of an answer, as the response's usage reports them.
struct ResponsesUsage {
  int64_t input_tokens = 0;
  int64_t cached_tokens = 0;
  int64_t output_tokens = 0;
  int64_t reasoning_tokens = 0;
};

// A whole chat.completion as a finished response object (status completed, or
// incomplete when the answer stopped at max_output_tokens); usage from the
// backend's result where it knows it (`has_usage`), else from the body. Second
// alternative: why the body could not be read.
std::variant<nlohmann::json, std::string> ResponseFromChat(std::string_view chat_body, nlohmann::json skeleton,
                                                           const ResponsesUsage& usage, bool has_usage);

// A failed response object (status failed, error {code, message}) with the output so far.
nlohmann::json FailedResponse(nlohmann::json response, const ApiError& error);

// An OpenAI chunk stream as the Responses events ("event: TYPE\ndata: JSON\n\n",
// each with its sequence_number), written as each chunk arrives: response.created
// and response.in_progress first, an output item per run of reasoning, text or
// one tool call, each opened (output_item.added, content_part.added) and closed
// (... .done) in order, then response.completed / response.incomplete, or
// response.failed after an error; nothing after the last.
class ResponsesEventWriter {
 public:
  explicit ResponsesEventWriter(nlohmann::json skeleton) : response_(std::move(skeleton)) {}
  // created + in_progress (once; Chunk and End call it).
  void Start(std::string* out);
  // One chunk's JSON; appends the events it makes.
  void Chunk(std::string_view chunk, std::string* out);
  // The end of a complete answer.
  void End(const ResponsesUsage& usage, bool has_usage, std::string* out);
  // An error after the stream started: response.failed with the output so far.
  void Fail(const ApiError& error, std::string* out);
  // The response as the last event carried it (after End or Fail).
  const nlohmann::json& response() const { return response_; }

 private:
  enum class Item { kNone, kReasoning, kMessage, kFunctionCall };
  void Translate(const nlohmann::json& chunk, std::string* out);
  void Emit(nlohmann::json event, std::string* out);
  void Open(Item kind, nlohmann::json item, std::string* out);
  void Close(std::string* out);

  nlohmann::json response_;
  bool started_ = false;
  int64_t sequence_ = 0;
  Item open_ = Item::kNone;
  nlohmann::json item_;  // the open item, growing
  std::string text_;     // the open item's text or arguments so far
  int tool_index_ = -1;  // the chat tool call the open function_call item carries
  std::string finish_reason_;
  std::string item_status_ = "completed";  // "incomplete" for an item cut at max_output_tokens
  ResponsesUsage usage_;
  bool has_usage_ = false;
};

}  // namespace tachyon
