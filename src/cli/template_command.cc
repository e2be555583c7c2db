#include "cli/template_command.h"

#include <ctime>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/format.h"
#include "gguf/gguf_file.h"
#include "tokenizer/jinja.h"
#include "tokenizer/vocab.h"

namespace tachyon::cli {
namespace {

struct RenderFlags {
  std::string template_path;
  std::string model;
  std::string conversation;
  std::string bos_token;
  std::string eos_token;
  CLI::Option* bos_option = nullptr;
  CLI::Option* eos_option = nullptr;
};

StatusOr<std::string> ReadText(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return NotFoundError(std::string(what) + " " + path + ": cannot be read");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

int Render(const RenderFlags& flags) {
  if (flags.template_path.empty() == flags.model.empty()) return Fail("give one of --template and --model");
  std::string source, bos = flags.bos_token, eos = flags.eos_token;
  if (!flags.template_path.empty()) {
    StatusOr<std::string> text = ReadText(flags.template_path, "template");
    if (!text.ok()) return Fail(text.status().message());
    source = std::move(text).value();
  } else {
    StatusOr<GgufFile> file = GgufFile::Open(flags.model);
    if (!file.ok()) return Fail(file.status().message());
    StatusOr<std::string> text = file->GetString("tokenizer.chat_template");
    if (!text.ok()) return Fail(flags.model + " has no chat template (tokenizer.chat_template)");
    source = std::move(text).value();
    // The model's own BOS / EOS text unless given.
    StatusOr<Vocab> vocab = Vocab::FromGguf(*file);
    if (vocab.ok()) {
      if (!flags.bos_option->count() && vocab->bos()) bos = vocab->token(*vocab->bos()).text;
      if (!flags.eos_option->count() && vocab->eos()) eos = vocab->token(*vocab->eos()).text;
    }
  }
  StatusOr<std::string> conversation_text = ReadText(flags.conversation, "conversation");
  if (!conversation_text.ok()) return Fail(conversation_text.status().message());
  nlohmann::ordered_json conversation = nlohmann::ordered_json::parse(*conversation_text, nullptr, false);
  if (conversation.is_discarded() || !conversation.is_object() || !conversation.contains("messages")) {
    return Fail("--conversation: " + flags.conversation +
                " must hold one JSON object with \"messages\" (and optional \"tools\", \"add_generation_prompt\")");
  }
  jinja::Value context = jinja::Value::MakeDict();
  context.dict().Set("messages", jinja::Value::FromJson(conversation["messages"]));
  if (conversation.contains("tools")) context.dict().Set("tools", jinja::Value::FromJson(conversation["tools"]));
  const bool generation_prompt =
      conversation.contains("add_generation_prompt") ? conversation["add_generation_prompt"].is_boolean() &&
                                                           conversation["add_generation_prompt"].get<bool>()
                                                     : true;
  context.dict().Set("add_generation_prompt", jinja::Value(generation_prompt));
  context.dict().Set("bos_token", jinja::Value(bos));
  context.dict().Set("eos_token", jinja::Value(eos));

  StatusOr<jinja::Template> parsed = jinja::Template::Parse(source);
  if (!parsed.ok()) return Fail(parsed.status().message());
  StatusOr<std::string> prompt = parsed->Render(context, static_cast<int64_t>(std::time(nullptr)));
  if (!prompt.ok()) {
    std::fprintf(stderr, "%s\n", prompt.status().message().c_str());
    return 1;
  }
  std::fwrite(prompt->data(), 1, prompt->size(), stdout);
  return 0;
}

}  // namespace

void AddTemplateCommand(CLI::App& app, int* exit_code) {
  CLI::App* cmd = app.add_subcommand("template", "Chat templates (Jinja), rendered as a server renders them");
  cmd->require_subcommand(1);
  auto flags = std::make_shared<RenderFlags>();
  CLI::App* render = cmd->add_subcommand(
      "render",
      "Print the prompt a chat template makes of a conversation (exactly, no newline added), e.g. tachyon template "
      "render --model m.gguf --conversation chat.json; exit 1 with the template's own message when it refuses");
  render->add_option("--template", flags->template_path, "Jinja template file (.jinja)");
  render->add_option("--model", flags->model, "GGUF model whose tokenizer.chat_template to render");
  render->add_option("--conversation", flags->conversation,
                     "JSON file: {\"messages\": [...], \"tools\": [...], \"add_generation_prompt\": true}")
      ->required();
  flags->bos_option = render->add_option("--bos-token", flags->bos_token,
                                         "bos_token's text (default: the model's BOS with --model, else empty)");
  flags->eos_option = render->add_option("--eos-token", flags->eos_token,
                                         "eos_token's text (default: the model's EOS with --model, else empty)");
  render->callback([flags, exit_code] { *exit_code = Render(*flags); });
}

}  // namespace tachyon::cli
