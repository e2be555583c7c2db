// ChatTemplate: renders an OpenAI-style `messages` list into the prompt text a
// chat model was trained on.
//
// The GGUF's tokenizer.chat_template runs in Tachyon's Jinja interpreter
// (jinja.h) with Hugging Face's variables (messages, add_generation_prompt,
// bos_token, eos_token). Hand-written family renderers remain for
// `--chat-template NAME` and as the fallback where the interpreter cannot parse
// a model's template (ForModel says so in note()); `--chat-template FILE.jinja`
// runs a template file. The rendered text leaves out the leading BOS (the
// tokenizer adds it) and must be encoded with parse_special = true, so that
// markers such as <|im_start|> become their special tokens, and with the
// content ranges as literal text.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "gguf/gguf_file.h"
#include "tokenizer/jinja.h"

namespace tachyon {

// A call an assistant message made: `arguments` is JSON text, as OpenAI's
// clients send it.
struct ToolCall {
  std::string id;
  std::string name;
  std::string arguments;
};

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
  bool content_null = false;         // "content": null (an assistant turn that only calls tools)
  std::vector<ToolCall> tool_calls;  // assistant
  std::string tool_call_id;          // tool: the call it answers
  std::string name;                  // tool (and some clients' function results): the function's name
};

enum class ChatTemplateFamily {
  kChatml,     // <|im_start|>role\n...<|im_end|>   (Qwen, Yi, Hermes, SmolLM)
  kLlama3,     // <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|>
  kLlama2,     // [INST] <<SYS>>\n...\n<</SYS>>\n\n... [/INST]
  kMistral,    // [INST] ... [/INST]...</s>           (Mistral Instruct v0.1/v0.2)
  kMistralV7,  // [SYSTEM_PROMPT]...[/SYSTEM_PROMPT][INST]...[/INST]
  kPhi3,       // <|user|>\n...<|end|>\n<|assistant|>\n
  kGemma,      // <start_of_turn>user\n...<end_of_turn>\n<start_of_turn>model\n
  kDeepseek,   // User: ...\n\nAssistant: ...<｜end▁of▁sentence｜>   (DeepSeek LLM chat)
  kDeepseek3,  // <｜User｜>...<｜Assistant｜>       (DeepSeek V3 / R1)
  kZephyr,     // <|user|>\n...</s>\n<|assistant|>\n
};

class ChatTemplate {
 public:
  // "chatml", "llama3", "llama2", "mistral", "mistral-v7", "phi3", "gemma",
  // "deepseek", "deepseek3", "zephyr".
  static StatusOr<ChatTemplate> FromName(std::string_view name);
  // Recognizes the family from Jinja template text.
  static StatusOr<ChatTemplate> Detect(std::string_view template_text);
  // A Jinja template. strip_leading_bos: a rendered prompt that starts with
  // `bos` loses it (the tokenizer adds BOS itself).
  static StatusOr<ChatTemplate> FromJinja(std::string_view source, std::string bos, std::string eos,
                                          bool strip_leading_bos);
  // override_name (a family name, or a path ending in .jinja) if given, else
  // the file's tokenizer.chat_template in the Jinja interpreter, with the
  // model's BOS and EOS.
  static StatusOr<ChatTemplate> ForModel(const GgufFile& file, std::string_view override_name = "");

  static std::vector<std::string> KnownNames();

  ChatTemplateFamily family() const { return family_; }
  // The family's name, or "jinja".
  std::string_view name() const;
  bool is_jinja() const { return jinja_ != nullptr; }
  // How the template was chosen, for the log ("the model's Jinja template", or why a family renderer).
  const std::string& note() const { return note_; }

  // Fails on an unknown role or an empty list. `content`, when given, gets the
  // byte ranges of the rendered text that came from the messages (their
  // content, not the template's markup): they are tokenized with control
  // tokens off, so a message cannot spoof a turn (EncodeOptions::literal_ranges).
  // `tools`: the request's tools (OpenAI's array), given to a Jinja template
  // as `tools`; null or empty for none. Tool calls' arguments go in as the
  // template reads them (tool_arguments_as_object()).
  StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                               std::vector<std::pair<size_t, size_t>>* content = nullptr,
                               const nlohmann::ordered_json* tools = nullptr) const;

  // Whether the template serializes a tool call's arguments itself (tojson of
  // an object) rather than writing a string it is given; found at load by
  // rendering a probe call both ways.
  bool tool_arguments_as_object() const { return tool_arguments_as_object_; }
  // The Jinja source ("" for a family renderer): the tool-call syntax is read from it.
  const std::string& source() const { return source_; }
  // The clock strftime_now reads (Unix seconds); 0: the real one. For tests.
  void set_now(int64_t unix_seconds) { now_ = unix_seconds; }

 private:
  ChatTemplate(ChatTemplateFamily family, std::string default_system)
      : family_(family), default_system_(std::move(default_system)) {}

  StatusOr<std::string> RenderJinja(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                    std::vector<std::pair<size_t, size_t>>* content,
                                    const nlohmann::ordered_json* tools) const;

  ChatTemplateFamily family_;
  // Used when the conversation has no system message (Qwen's templates supply one).
  std::string default_system_;
  std::shared_ptr<const jinja::Template> jinja_;  // set: a Jinja template, family_ unused
  std::string bos_, eos_;
  bool strip_leading_bos_ = false;
  std::string note_;
  std::string source_;
  bool tool_arguments_as_object_ = true;
  int64_t now_ = 0;
};

}  // namespace tachyon
