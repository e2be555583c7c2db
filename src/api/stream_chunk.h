// StreamChunkParser: reads one streamed OpenAI chunk (the JSON of an SSE event)
// for what a client or a gateway needs to know of it: the content text, the
// finish reason, usage, or an in-stream error. Shared by the remote backend
// (which forwards the event as it is and records what it says) and tachyon
// bench (which timestamps content chunks).
//
// simdjson's DOM parser on a reused padded copy: a chunk costs about a
// microsecond (nlohmann's parser was 40% of the bench client's time). The views
// in a StreamChunk point into the parser and are valid until the next Parse.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string>
#include <string_view>

namespace tachyon {

struct StreamChunk {
  bool is_error = false;          // {"error": ...}
  std::string_view text;          // choices[0].text, or .delta.content (.delta.reasoning_content when empty)
  bool text_is_reasoning = false; // `text` is .delta.reasoning_content
  bool has_tool_calls = false;    // chat: .delta.tool_calls holds a call, or .delta.function_call is set
  std::string_view finish_reason; // choices[0].finish_reason, "" when null or absent
  bool has_choice = false;        // choices[0] exists
  std::string tool_text;          // chat: delta.tool_calls' function names and argument fragments, joined
  bool has_usage = false;
  int64_t prompt_tokens = 0, completion_tokens = 0;
  int64_t cached_tokens = -1;  // usage.prompt_tokens_details.cached_tokens; -1: absent
};

class StreamChunkParser {
 public:
  StreamChunkParser();
  ~StreamChunkParser();
  StreamChunkParser(const StreamChunkParser&) = delete;
  StreamChunkParser& operator=(const StreamChunkParser&) = delete;

  // False when `data` is not a JSON object; chat: read choices[0].delta.
  bool Parse(std::string_view data, bool chat, StreamChunk* out);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tachyon
