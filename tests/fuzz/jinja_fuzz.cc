// libFuzzer target: the Jinja interpreter on arbitrary template sources, rendered
// with a conversation that has a system prompt, tools, tool calls and results.
// Parsing and rendering must return a prompt or an error, never crash, hang or
// grow without bound (the step budget is lowered so that ASan's slower steps stay
// well inside libFuzzer's per-input timeout).
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "tokenizer/jinja.h"

namespace {

const tachyon::jinja::Value& Context() {
  static const tachyon::jinja::Value context = tachyon::jinja::Value::FromJson(nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Weather in Oslo? {{ not markup }}"},
      {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": {"city": "Oslo"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": -3}"},
      {"role": "assistant", "content": "Cold: -3."}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather.",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>"
  })"));
  return context;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  tachyon::jinja::Options options;
  options.max_steps = 100'000;
  options.max_output_bytes = 1 << 20;
  auto parsed = tachyon::jinja::Template::Parse(std::string_view(reinterpret_cast<const char*>(data), size), options);
  if (!parsed.ok()) {
    if (parsed.status().message().empty()) std::abort();  // every refusal says why
    return 0;
  }
  auto rendered = parsed->Render(Context(), 1'764'581'400);
  if (rendered.ok() && rendered->size() > options.max_output_bytes + (1 << 16)) std::abort();
  return 0;
}
