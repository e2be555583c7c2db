// Tool calls in a model's own words: each chat template family writes calls
// in its own syntax, read back here into OpenAI's tool_calls.
//
//   hermes        <tool_call>{"name": ..., "arguments": {...}}</tool_call> ...  (Qwen2.5, Hermes 2/3)
//   llama3        {"name": ..., "parameters": {...}}  (the whole answer; <|python_tag|> before it is
//                 a control token and not in the text; several joined by ';')
//   mistral       [TOOL_CALLS][{"name": ..., "arguments": {...}}, ...]  (the marker is a control token)
//   functionary31 <function=NAME>{...}</function> ...
//   functionary32 NAME\n{...}>>>NAME\n{...}  (the prompt ends with ">>>"; "all" is text for the user)
//   deepseek      <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>NAME\n```json\n{...}\n```
//                 <｜tool▁call▁end｜>...<｜tool▁calls▁end｜>
//   command-r     Action: ```json [{"tool_name": ..., "parameters": {...}}] ```  (R+), or
//                 <|START_ACTION|>[...]<|END_ACTION|> (R7B)
//   json          no known syntax: an answer that is one JSON object with "name" and
//                 "arguments" (or "parameters"), or an array of them
// The syntax is read from the template's source (DetectToolCallSyntax).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tachyon {

enum class ToolCallSyntax { kJson, kHermes, kLlama3, kMistral, kFunctionaryV31, kFunctionaryV32, kDeepseek, kCommandR };

ToolCallSyntax DetectToolCallSyntax(std::string_view template_source);
const char* ToolCallSyntaxName(ToolCallSyntax syntax);

struct ParsedToolCall {
  std::string name;
  std::string arguments;  // JSON text of an object
};

struct ParsedAnswer {
  std::string content;  // the text for the user, calls taken out
  std::vector<ParsedToolCall> calls;
};

// Reads a finished answer. A call whose JSON does not parse stays in the content.
ParsedAnswer ParseToolCalls(ToolCallSyntax syntax, std::string_view text);

// Where a call may begin in a streamed answer so far: the text before it can
// be sent as content now; from it on it is held until the answer ends (or
// until it is clear no call starts there). text.size() when nothing is held.
size_t ToolCallHoldFrom(ToolCallSyntax syntax, std::string_view text);

}  // namespace tachyon
