// ChatTemplate: renders an OpenAI-style `messages` list into the prompt text a
// chat model was trained on.
//
// Templates are recognized by family from the GGUF's tokenizer.chat_template
// text (the Jinja source is not executed); `--chat-template NAME` overrides.
// An unrecognized template is an error, never a silent fallback. The rendered
// text leaves out the leading BOS (the tokenizer adds it) and must be encoded
// with parse_special = true, so that markers such as <|im_start|> become their
// special tokens.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"
#include "gguf/gguf_file.h"

namespace tachyon {

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
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
  // override_name if given, else the file's tokenizer.chat_template.
  static StatusOr<ChatTemplate> ForModel(const GgufFile& file, std::string_view override_name = "");

  static std::vector<std::string> KnownNames();

  ChatTemplateFamily family() const { return family_; }
  std::string_view name() const;

  // Fails on an unknown role or an empty list. `content`, when given, gets the
  // byte ranges of the rendered text that came from the messages (their
  // content, not the template's markup): they are tokenized with control
  // tokens off, so a message cannot spoof a turn (EncodeOptions::literal_ranges).
  StatusOr<std::string> Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt = true,
                               std::vector<std::pair<size_t, size_t>>* content = nullptr) const;

 private:
  ChatTemplate(ChatTemplateFamily family, std::string default_system)
      : family_(family), default_system_(std::move(default_system)) {}

  ChatTemplateFamily family_;
  // Used when the conversation has no system message (Qwen's templates supply one).
  std::string default_system_;
};

}  // namespace tachyon
