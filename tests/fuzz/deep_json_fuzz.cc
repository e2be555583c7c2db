// libFuzzer target: request bodies nested deep, made from a few bytes. A byte-level
// fuzzer with -max_len 4096 can never write a body of 10^5 levels (issue 31: one of
// ~200 KB overflowed a worker's stack), so this one reads its input as a recipe:
//
//   bytes 0-2   depth: with byte 2's top bit clear, byte 0 and byte 1's low bit
//               (0 .. 511: around the bound, where values are walked); with it set,
//               bytes 0-2's low 21 bits (up to ~2 million levels)
//   byte 3      where the deep value goes: an unknown field, a tool's parameters,
//               response_format's schema, a message's content parts, a tool call's
//               arguments string, a completion's prompt, an embeddings input
//   byte 4      the openers' pattern: bit k of it picks '[' or '{"k":' at level k mod 8
//   rest        the innermost value's text
//
// Every body goes through what walks JSON on the request path: the parser, the exact
// cache's canonical key (CanonicalJson, dump), the body re-serialized for an upstream,
// the schema compiler and a Jinja template that writes tools and arguments with tojson.
// A body deeper than kMaxJsonDepth must be refused with json_too_deep before any of them;
// nothing may crash at any depth.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <variant>

#include "api/embeddings.h"
#include "api/openai.h"
#include "base/json_depth.h"
#include "gateway/cache/exact_cache.h"
#include "grammar/json_grammar.h"
#include "tokenizer/chat_template.h"

namespace {

using namespace tachyon;

constexpr std::string_view kTemplate =
    "{%- if tools %}{{ tools | tojson }}\n{% endif %}"
    "{%- for m in messages %}{{ m.role }}: {{ m.content }}"
    "{%- if m.tool_calls %}{% for c in m.tool_calls %} {{ c.function.arguments | tojson }}{% endfor %}{% endif %}\n"
    "{%- endfor %}";

const ChatTemplate& Template() {
  static const ChatTemplate* t = [] {
    StatusOr<ChatTemplate> made = ChatTemplate::FromJinja(kTemplate, "", "", /*strip_leading_bos=*/false);
    if (!made.ok()) std::abort();
    return new ChatTemplate(std::move(made).value());
  }();
  return *t;
}

// The value nested `depth` levels, openers chosen by `pattern`, innermost `inner`.
std::string Nest(size_t depth, uint8_t pattern, std::string_view inner) {
  std::string open, close;
  open.reserve(depth * 6);
  close.reserve(depth);
  for (size_t k = 0; k < depth; ++k) {
    const bool object = (pattern >> (k % 8)) & 1;
    open += object ? "{\"k\":" : "[";
    close += object ? '}' : ']';
  }
  std::string out = open;
  out += inner.empty() ? std::string_view("1") : inner;
  out.append(close.rbegin(), close.rend());
  return out;
}

// A JSON string holding `text`, escaped.
std::string Quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

void Walk(const CompletionRequest& r) {
  (void)ExactCacheKeyText(r, "route", "tenant", true);
  (void)r.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (r.response_format.type == ResponseFormat::Type::kJsonSchema) (void)CompileJsonSchema(r.response_format.schema);
  for (const auto& tool : r.tools) {
    if (tool.contains("function") && tool["function"].contains("parameters")) {
      (void)CompileJsonSchema(tool["function"]["parameters"]);
    }
  }
  if (!r.messages.empty()) (void)Template().Render(r.messages, true, nullptr, &r.tools);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 5) return 0;
  const size_t depth = (data[2] & 0x80) != 0
                           ? (size_t{data[0]} | size_t{data[1]} << 8 | size_t{data[2]} << 16) & 0x1FFFFF
                           : size_t{data[0]} | size_t{data[1] & 1u} << 8;
  const uint8_t where = data[3] % 7;
  const std::string deep =
      Nest(depth, data[4], std::string_view(reinterpret_cast<const char*>(data) + 5, size - 5));
  const std::string user = R"({"role":"user","content":"hi"})";
  std::string body;
  Endpoint endpoint = Endpoint::kChatCompletions;
  bool embeddings = false;
  switch (where) {
    case 0: body = R"({"messages":[)" + user + R"(],"metadata":)" + deep + "}"; break;
    case 1:
      body = R"({"messages":[)" + user + R"(],"tools":[{"type":"function","function":{"name":"f","parameters":)" +
             deep + "}}]}";
      break;
    case 2:
      body = R"({"messages":[)" + user +
             R"(],"response_format":{"type":"json_schema","json_schema":{"name":"s","schema":{"type":"object","properties":{"x":)" +
             deep + "}}}}}";
      break;
    case 3: body = R"({"messages":[{"role":"user","content":[{"type":"text","text":"a","extra":)" + deep + "}]}]}"; break;
    case 4:  // a string: the body is shallow, the template parses the arguments
      body = R"({"messages":[)" + user +
             R"(,{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":)" +
             Quoted(deep) + "}}]}]}";
      break;
    case 5: body = R"({"prompt":)" + deep + "}", endpoint = Endpoint::kCompletions; break;
    default: body = R"({"input":)" + deep + "}", embeddings = true; break;
  }
  const bool too_deep = JsonNestsDeeperThan(body);
  if (embeddings) {
    auto parsed = ParseEmbeddingRequest(body);
    const ApiError* e = std::get_if<ApiError>(&parsed);
    if (too_deep && (e == nullptr || e->code != "json_too_deep")) std::abort();
    return 0;
  }
  auto parsed = ParseCompletionRequest(body, endpoint);
  if (const ApiError* e = std::get_if<ApiError>(&parsed)) {
    if (too_deep != (e->code == "json_too_deep")) std::abort();
    return 0;
  }
  if (too_deep) std::abort();  // a deep body got through
  Walk(std::get<CompletionRequest>(parsed));
  return 0;
}
