#include "api/tool_calls.h"

#include "api/json_parse.h"

#include <nlohmann/json.hpp>

namespace tachyon {
namespace {

using json = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>", kHermesClose = "</tool_call>";
constexpr std::string_view kFunctionOpen = "<function=", kFunctionClose = "</function>";
constexpr std::string_view kDeepseekCalls = "<\xef\xbd\x9ctool\xe2\x96\x81" "calls\xe2\x96\x81" "begin\xef\xbd\x9c>";
constexpr std::string_view kDeepseekCall = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "begin\xef\xbd\x9c>";
constexpr std::string_view kDeepseekSep = "<\xef\xbd\x9ctool\xe2\x96\x81sep\xef\xbd\x9c>";
constexpr std::string_view kDeepseekCallEnd = "<\xef\xbd\x9ctool\xe2\x96\x81" "call\xe2\x96\x81" "end\xef\xbd\x9c>";
constexpr std::string_view kStartAction = "<|START_ACTION|>", kEndAction = "<|END_ACTION|>";
constexpr std::string_view kAction = "Action:";

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

std::string_view Trim(std::string_view s) {
  while (!s.empty() && IsSpace(s.front())) s.remove_prefix(1);
  while (!s.empty() && IsSpace(s.back())) s.remove_suffix(1);
  return s;
}

size_t SkipSpace(std::string_view s, size_t i) {
  while (i < s.size() && IsSpace(s[i])) ++i;
  return i;
}

// The end (exclusive) of the JSON object or array that starts at s[start],
// by bracket depth outside strings; npos when it does not close.
size_t JsonEnd(std::string_view s, size_t start) {
  if (start >= s.size() || (s[start] != '{' && s[start] != '[')) return std::string_view::npos;
  int depth = 0;
  bool in_string = false;
  for (size_t i = start; i < s.size(); ++i) {
    const char c = s[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if (c == '}' || c == ']') {
      if (--depth == 0) return i + 1;
    }
  }
  return std::string_view::npos;
}

// Arguments as JSON text of an object: an object as it is, a string that holds one.
bool Arguments(const json& args, std::string* out) {
  if (args.is_object()) {
    *out = args.dump(-1, ' ', false, json::error_handler_t::replace);
    return true;
  }
  if (args.is_string()) {
    json parsed = ParseJson(args.get<std::string>());
    if (parsed.is_object()) {
      *out = parsed.dump(-1, ' ', false, json::error_handler_t::replace);
      return true;
    }
  }
  return false;
}

// {"name": ..., "arguments" | "parameters": {...}} (Command R: "tool_name").
bool CallFromObject(const json& j, ParsedToolCall* call) {
  if (!j.is_object()) return false;
  const char* name_key = j.contains("name") ? "name" : "tool_name";
  if (!j.contains(name_key) || !j[name_key].is_string() || j[name_key].get_ref<const std::string&>().empty()) {
    return false;
  }
  call->name = j[name_key].get<std::string>();
  for (const char* key : {"arguments", "parameters"}) {
    if (j.contains(key)) return Arguments(j[key], &call->arguments);
  }
  call->arguments = "{}";
  return true;
}

// One object or an array of objects, each a call.
bool CallsFromJson(std::string_view text, std::vector<ParsedToolCall>* calls) {
  json j = ParseJson(text);
  if (j.is_discarded()) return false;
  std::vector<ParsedToolCall> out;
  if (j.is_array()) {
    if (j.empty()) return false;
    for (const json& item : j) {
      ParsedToolCall c;
      if (!CallFromObject(item, &c)) return false;
      out.push_back(std::move(c));
    }
  } else {
    ParsedToolCall c;
    if (!CallFromObject(j, &c)) return false;
    out.push_back(std::move(c));
  }
  calls->insert(calls->end(), out.begin(), out.end());
  return true;
}

// Blocks OPEN json CLOSE anywhere in the text (Hermes).
ParsedAnswer Tagged(std::string_view text, std::string_view open, std::string_view close) {
  ParsedAnswer a;
  size_t i = 0;
  while (true) {
    const size_t at = text.find(open, i);
    if (at == std::string_view::npos) break;
    const size_t body = SkipSpace(text, at + open.size());
    const size_t end = JsonEnd(text, body);
    std::vector<ParsedToolCall> calls;
    if (end == std::string_view::npos || !CallsFromJson(text.substr(body, end - body), &calls)) break;
    a.content += text.substr(i, at - i);
    a.calls.insert(a.calls.end(), calls.begin(), calls.end());
    i = SkipSpace(text, end);
    if (text.compare(i, close.size(), close) == 0) i += close.size();
  }
  a.content += text.substr(i);
  a.content = std::string(Trim(a.content));
  return a;
}

// <function=NAME>{...}</function> (Functionary v3.1).
ParsedAnswer FunctionTags(std::string_view text) {
  ParsedAnswer a;
  size_t i = 0;
  while (true) {
    const size_t at = text.find(kFunctionOpen, i);
    if (at == std::string_view::npos) break;
    const size_t name_end = text.find('>', at);
    if (name_end == std::string_view::npos) break;
    const size_t body = SkipSpace(text, name_end + 1);
    const size_t end = JsonEnd(text, body);
    std::string args;
    if (end == std::string_view::npos || !Arguments(ParseJson(text.substr(body, end - body)), &args)) {
      break;
    }
    a.content += text.substr(i, at - i);
    a.calls.push_back({std::string(text.substr(at + kFunctionOpen.size(), name_end - at - kFunctionOpen.size())), args});
    i = SkipSpace(text, end);
    if (text.compare(i, kFunctionClose.size(), kFunctionClose) == 0) i += kFunctionClose.size();
  }
  a.content += text.substr(i);
  a.content = std::string(Trim(a.content));
  return a;
}

// NAME\n{...}>>>NAME\n{...} after the prompt's ">>>"; "all" is text (Functionary v3.2).
ParsedAnswer Recipients(std::string_view text) {
  ParsedAnswer a;
  size_t i = 0;
  while (i <= text.size()) {
    size_t next = text.find(">>>", i);
    if (next == std::string_view::npos) next = text.size();
    std::string_view segment = text.substr(i, next - i);
    const size_t nl = segment.find('\n');
    const std::string_view name = Trim(segment.substr(0, nl));
    const std::string_view body = nl == std::string_view::npos ? std::string_view() : Trim(segment.substr(nl + 1));
    std::string args;
    if (name == "all" || name.empty()) {
      a.content += body;
    } else if (Arguments(ParseJson(body), &args)) {
      a.calls.push_back({std::string(name), args});
    } else {
      a.content += segment;
    }
    i = next + 3;
  }
  a.content = std::string(Trim(a.content));
  return a;
}

// function<｜tool▁sep｜>NAME\n```json\n{...}\n``` blocks (DeepSeek R1 / V3).
ParsedAnswer Deepseek(std::string_view text) {
  ParsedAnswer a;
  const size_t first = text.find(kDeepseekCalls);
  if (first == std::string_view::npos) {
    a.content = std::string(Trim(text));
    return a;
  }
  size_t i = first;
  while (true) {
    const size_t at = text.find(kDeepseekCall, i);
    if (at == std::string_view::npos) break;
    const size_t sep = text.find(kDeepseekSep, at);
    if (sep == std::string_view::npos) break;
    const size_t nl = text.find('\n', sep);
    if (nl == std::string_view::npos) break;
    const std::string name(Trim(text.substr(sep + kDeepseekSep.size(), nl - sep - kDeepseekSep.size())));
    const size_t body = text.find_first_of("{[", nl);
    const size_t end = JsonEnd(text, body);
    std::string args;
    if (end == std::string_view::npos || !Arguments(ParseJson(text.substr(body, end - body)), &args)) {
      break;
    }
    a.calls.push_back({name, args});
    const size_t call_end = text.find(kDeepseekCallEnd, end);
    i = call_end == std::string_view::npos ? end : call_end + kDeepseekCallEnd.size();
  }
  if (a.calls.empty()) {
    a.content = std::string(Trim(text));
  } else {
    a.content = std::string(Trim(text.substr(0, first)));
  }
  return a;
}

// The first JSON array after `marker` (Command R).
ParsedAnswer AfterMarker(std::string_view text, std::string_view marker) {
  ParsedAnswer a;
  const size_t at = text.find(marker);
  if (at != std::string_view::npos) {
    const size_t body = text.find_first_of("[{", at + marker.size());
    const size_t end = JsonEnd(text, body);
    if (end != std::string_view::npos && CallsFromJson(text.substr(body, end - body), &a.calls)) {
      a.content = std::string(Trim(text.substr(0, at)));
      return a;
    }
  }
  a.calls.clear();
  a.content = std::string(Trim(text));
  return a;
}

// The whole answer as JSON calls, several separated by ';' (Llama 3, Mistral, generic).
ParsedAnswer WholeJson(std::string_view text) {
  ParsedAnswer a;
  std::string_view t = Trim(text);
  if (t.substr(0, 12) == "[TOOL_CALLS]") t = Trim(t.substr(12));
  size_t i = 0;
  std::vector<ParsedToolCall> calls;
  while (i < t.size()) {
    const size_t end = JsonEnd(t, i);
    if (end == std::string_view::npos || !CallsFromJson(t.substr(i, end - i), &calls)) {
      calls.clear();
      break;
    }
    i = SkipSpace(t, end);
    if (i < t.size() && t[i] == ';') i = SkipSpace(t, i + 1);
  }
  if (calls.empty()) {
    a.content = std::string(Trim(text));
  } else {
    a.calls = std::move(calls);
  }
  return a;
}

// Where `marker` starts in text, or where a prefix of it ends the text.
size_t MarkerHold(std::string_view text, std::string_view marker) {
  const size_t at = text.find(marker);
  if (at != std::string_view::npos) return at;
  for (size_t n = std::min(marker.size() - 1, text.size()); n > 0; --n) {
    if (text.compare(text.size() - n, n, marker, 0, n) == 0) return text.size() - n;
  }
  return text.size();
}

}  // namespace

ToolCallSyntax DetectToolCallSyntax(std::string_view src) {
  auto has = [&](std::string_view s) { return src.find(s) != std::string_view::npos; };
  if (has(kHermesOpen)) return ToolCallSyntax::kHermes;
  if (has("[TOOL_CALLS]")) return ToolCallSyntax::kMistral;
  if (has(kFunctionOpen)) return ToolCallSyntax::kFunctionaryV31;
  if (has(">>>") && has("recipient")) return ToolCallSyntax::kFunctionaryV32;
  if (has(kDeepseekCalls)) return ToolCallSyntax::kDeepseek;
  if (has(kStartAction) || has("tool_name")) return ToolCallSyntax::kCommandR;
  if (has("<|start_header_id|>") && has("tools")) return ToolCallSyntax::kLlama3;
  return ToolCallSyntax::kJson;
}

const char* ToolCallSyntaxName(ToolCallSyntax syntax) {
  switch (syntax) {
    case ToolCallSyntax::kJson: return "json";
    case ToolCallSyntax::kHermes: return "hermes";
    case ToolCallSyntax::kLlama3: return "llama3";
    case ToolCallSyntax::kMistral: return "mistral";
    case ToolCallSyntax::kFunctionaryV31: return "functionary-v3.1";
    case ToolCallSyntax::kFunctionaryV32: return "functionary-v3.2";
    case ToolCallSyntax::kDeepseek: return "deepseek";
    case ToolCallSyntax::kCommandR: return "command-r";
  }
  return "json";
}

ParsedAnswer ParseToolCalls(ToolCallSyntax syntax, std::string_view text) {
  switch (syntax) {
    case ToolCallSyntax::kHermes: return Tagged(text, kHermesOpen, kHermesClose);
    case ToolCallSyntax::kFunctionaryV31: return FunctionTags(text);
    case ToolCallSyntax::kFunctionaryV32: return Recipients(text);
    case ToolCallSyntax::kDeepseek: return Deepseek(text);
    case ToolCallSyntax::kCommandR:
      return text.find(kStartAction) != std::string_view::npos ? AfterMarker(text, kStartAction)
                                                                : AfterMarker(text, kAction);
    case ToolCallSyntax::kLlama3:
    case ToolCallSyntax::kMistral:
    case ToolCallSyntax::kJson: return WholeJson(text);
  }
  return WholeJson(text);
}

size_t ToolCallHoldFrom(ToolCallSyntax syntax, std::string_view text) {
  switch (syntax) {
    case ToolCallSyntax::kHermes: return MarkerHold(text, kHermesOpen);
    case ToolCallSyntax::kFunctionaryV31: return MarkerHold(text, kFunctionOpen);
    case ToolCallSyntax::kDeepseek: return MarkerHold(text, kDeepseekCalls);
    case ToolCallSyntax::kCommandR:
      return std::min(MarkerHold(text, kStartAction), MarkerHold(text, kAction));
    case ToolCallSyntax::kFunctionaryV32: return 0;  // the recipient line first: held to the end
    case ToolCallSyntax::kLlama3:
    case ToolCallSyntax::kMistral:
    case ToolCallSyntax::kJson: {
      const size_t first = SkipSpace(text, 0);
      if (first == text.size() || text[first] == '{' || text[first] == '[') return 0;
      return text.size();
    }
  }
  return text.size();
}

}  // namespace tachyon
