#include "tokenizer/chat_template.h"

#include <algorithm>
#include <ctime>
#include <fstream>
#include <sstream>

#include "base/json_depth.h"
#include "tokenizer/vocab.h"

#include <utility>

namespace tachyon {
namespace {

struct NamedFamily {
  const char* name;
  ChatTemplateFamily family;
};

constexpr NamedFamily kFamilies[] = {
    {"chatml", ChatTemplateFamily::kChatml},       {"llama3", ChatTemplateFamily::kLlama3},
    {"llama2", ChatTemplateFamily::kLlama2},       {"mistral", ChatTemplateFamily::kMistral},
    {"mistral-v7", ChatTemplateFamily::kMistralV7}, {"phi3", ChatTemplateFamily::kPhi3},
    {"gemma", ChatTemplateFamily::kGemma},         {"deepseek", ChatTemplateFamily::kDeepseek},
    {"deepseek3", ChatTemplateFamily::kDeepseek3}, {"zephyr", ChatTemplateFamily::kZephyr},
};

bool Contains(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

std::string Trim(std::string_view s) {
  const char* kSpace = " \t\n\r\f\v";
  size_t begin = s.find_first_not_of(kSpace);
  if (begin == std::string_view::npos) return "";
  size_t end = s.find_last_not_of(kSpace);
  return std::string(s.substr(begin, end - begin + 1));
}

// The system message (if first) and the rest of the conversation.
std::pair<std::string, std::vector<const ChatMessage*>> SplitSystem(
    const std::vector<ChatMessage>& messages, bool* has_system) {
  std::vector<const ChatMessage*> rest;
  std::string system;
  *has_system = !messages.empty() && messages[0].role == "system";
  for (size_t i = 0; i < messages.size(); ++i) {
    if (i == 0 && *has_system) {
      system = messages[0].content;
    } else {
      rest.push_back(&messages[i]);
    }
  }
  return {system, rest};
}

// A built-in family's prompt as it is written: markup appended as is, a
// message's text appended with its range noted in *content.
struct PromptWriter {
  std::string out;
  std::vector<std::pair<size_t, size_t>>* content = nullptr;

  void Text(std::string_view t) {
    if (content != nullptr && !t.empty()) content->emplace_back(out.size(), out.size() + t.size());
    out.append(t);
  }
  // Parts (text, is a message's) joined, trimmed as one string when `trim`;
  // only the messages' bytes that remain are content.
  void Pieces(std::initializer_list<std::pair<std::string_view, bool>> parts, bool trim) {
    std::string whole;
    std::vector<std::pair<size_t, size_t>> spans;
    for (const auto& [t, is_message] : parts) {
      if (is_message && !t.empty()) spans.emplace_back(whole.size(), whole.size() + t.size());
      whole.append(t);
    }
    size_t begin = 0, end = whole.size();
    if (trim) {
      const char* kSpace = " \t\n\r\f\v";
      begin = whole.find_first_not_of(kSpace);
      end = begin == std::string::npos ? 0 : whole.find_last_not_of(kSpace) + 1;
      if (begin == std::string::npos) begin = 0;
    }
    const size_t base = out.size();
    out.append(whole, begin, end - begin);
    for (auto [b, e] : spans) {
      b = std::max(b, begin);
      e = std::min(e, end);
      if (content != nullptr && b < e) content->emplace_back(base + b - begin, base + e - begin);
    }
  }
};

void WriteChatml(PromptWriter& w, const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                 const std::string& default_system) {
  if (!default_system.empty() && messages[0].role != "system") {
    w.out += "<|im_start|>system\n" + default_system + "<|im_end|>\n";
  }
  for (const ChatMessage& m : messages) {
    w.out += "<|im_start|>" + m.role + "\n";
    w.Text(m.content);
    w.out += "<|im_end|>\n";
  }
  if (add_generation_prompt) w.out += "<|im_start|>assistant\n";
}

void WriteLlama3(PromptWriter& w, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  for (const ChatMessage& m : messages) {
    std::string role = m.role == "tool" ? "ipython" : m.role;  // Llama 3.1 names tool results ipython
    w.out += "<|start_header_id|>" + role + "<|end_header_id|>\n\n";
    w.Text(Trim(m.content));
    w.out += "<|eot_id|>";
  }
  if (add_generation_prompt) w.out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
}

void WriteLlama2(PromptWriter& w, const std::vector<ChatMessage>& messages, bool) {
  bool has_system = false;
  auto [system, rest] = SplitSystem(messages, &has_system);
  // The first turn carries the system message inside <<SYS>> markup; the whole
  // turn is trimmed as one string.
  const std::string& system_text = system;  // a lambda may not capture a structured binding
  auto turn = [&](const ChatMessage& m, bool with_system) {
    if (with_system) {
      w.Pieces({{"<<SYS>>\n", false}, {system_text, true}, {"\n<</SYS>>\n\n", false}, {m.content, true}}, true);
    } else {
      w.Pieces({{m.content, true}}, true);
    }
  };
  bool first_turn = true;
  for (size_t i = 0; i < rest.size(); ++i) {
    const ChatMessage& m = *rest[i];
    if (m.role == "assistant") {
      w.out += " ";
      turn(m, i == 0 && has_system);
      w.out += " </s>";
    } else {
      w.out += (first_turn ? "" : "<s>") + std::string("[INST] ");
      turn(m, i == 0 && has_system);
      w.out += " [/INST]";
      first_turn = false;
    }
  }
}

void WriteMistral(PromptWriter& w, const std::vector<ChatMessage>& messages, bool) {
  bool has_system = false;
  auto [system, rest] = SplitSystem(messages, &has_system);
  for (size_t i = 0; i < rest.size(); ++i) {
    const ChatMessage& m = *rest[i];
    const bool with_system = i == 0 && has_system;
    if (m.role != "assistant") w.out += "[INST] ";
    w.Pieces({{with_system ? std::string_view(system) : "", true}, {with_system ? "\n\n" : "", false},
            {m.content, true}},
           false);
    w.out += m.role == "assistant" ? "</s>" : " [/INST]";
  }
}

void WriteMistralV7(PromptWriter& w, const std::vector<ChatMessage>& messages, bool) {
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      w.out += "[SYSTEM_PROMPT]";
      w.Text(m.content);
      w.out += "[/SYSTEM_PROMPT]";
    } else if (m.role == "assistant") {
      w.Text(m.content);
      w.out += "</s>";
    } else {
      w.out += "[INST]";
      w.Text(m.content);
      w.out += "[/INST]";
    }
  }
}

void WritePhi3(PromptWriter& w, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  for (const ChatMessage& m : messages) {
    w.out += "<|" + m.role + "|>\n";
    w.Text(m.content);
    w.out += "<|end|>\n";
  }
  if (add_generation_prompt) w.out += "<|assistant|>\n";
}

void WriteGemma(PromptWriter& w, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  bool has_system = false;
  // Gemma has no system role: the system text opens the first user turn.
  auto [system, rest] = SplitSystem(messages, &has_system);
  for (size_t i = 0; i < rest.size(); ++i) {
    const ChatMessage& m = *rest[i];
    std::string role = m.role == "assistant" ? "model" : "user";
    const bool with_system = i == 0 && has_system;
    w.out += "<start_of_turn>" + role + "\n";
    w.Pieces({{with_system ? std::string_view(system) : "", true}, {with_system ? "\n\n" : "", false},
            {m.content, true}},
           true);
    w.out += "<end_of_turn>\n";
  }
  if (add_generation_prompt) w.out += "<start_of_turn>model\n";
}

void WriteDeepseek(PromptWriter& w, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      w.Text(m.content);
      w.out += "\n\n";
    } else if (m.role == "assistant") {
      w.out += "Assistant: ";
      w.Text(m.content);
      w.out += "<｜end▁of▁sentence｜>";
    } else {
      w.out += "User: ";
      w.Text(m.content);
      w.out += "\n\n";
    }
  }
  if (add_generation_prompt) w.out += "Assistant:";
}

void WriteDeepseek3(PromptWriter& w, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  for (const ChatMessage& m : messages) {
    if (m.role == "system") {
      w.Text(m.content);
    } else if (m.role == "assistant") {
      w.out += "<｜Assistant｜>";
      w.Text(m.content);
      w.out += "<｜end▁of▁sentence｜>";
    } else {
      w.out += "<｜User｜>";
      w.Text(m.content);
    }
  }
  if (add_generation_prompt) w.out += "<｜Assistant｜>";
}

void WriteZephyr(PromptWriter& w, const std::vector<ChatMessage>& messages, bool add_generation_prompt) {
  for (const ChatMessage& m : messages) {
    w.out += "<|" + m.role + "|>\n";
    w.Text(m.content);
    w.out += "</s>\n";
  }
  if (add_generation_prompt) w.out += "<|assistant|>\n";
}

}  // namespace

std::vector<std::string> ChatTemplate::KnownNames() {
  std::vector<std::string> names;
  for (const NamedFamily& f : kFamilies) names.push_back(f.name);
  return names;
}

std::string_view ChatTemplate::name() const {
  if (jinja_) return "jinja";
  for (const NamedFamily& f : kFamilies) {
    if (f.family == family_) return f.name;
  }
  return "";
}

StatusOr<ChatTemplate> ChatTemplate::FromName(std::string_view name) {
  for (const NamedFamily& f : kFamilies) {
    if (name == f.name) return ChatTemplate(f.family, "");
  }
  std::string known;
  for (const std::string& n : KnownNames()) known += (known.empty() ? "" : ", ") + n;
  return InvalidArgumentError("unknown chat template '" + std::string(name) + "' (known: " + known +
                              ")");
}

StatusOr<ChatTemplate> ChatTemplate::Detect(std::string_view t) {
  using F = ChatTemplateFamily;
  auto make = [](F family, std::string system = "") { return ChatTemplate(family, std::move(system)); };
  if (Contains(t, "<|im_start|>")) {
    // Qwen's templates add this system message when the conversation has none.
    return make(F::kChatml, Contains(t, "You are a helpful assistant.") ? "You are a helpful assistant." : "");
  }
  if (Contains(t, "<|start_header_id|>") && Contains(t, "<|end_header_id|>")) return make(F::kLlama3);
  if (Contains(t, "<start_of_turn>")) return make(F::kGemma);
  if (Contains(t, "<｜User｜>")) return make(F::kDeepseek3);
  if (Contains(t, "[SYSTEM_PROMPT]")) return make(F::kMistralV7);
  if (Contains(t, "[INST]")) return make(Contains(t, "<<SYS>>") ? F::kLlama2 : F::kMistral);
  if (Contains(t, "<|assistant|>") && Contains(t, "<|end|>")) return make(F::kPhi3);
  if (Contains(t, "<|user|>") && (Contains(t, "eos_token") || Contains(t, "</s>"))) return make(F::kZephyr);
  if (Contains(t, "'User: '") && Contains(t, "Assistant:")) return make(F::kDeepseek);
  std::string known;
  for (const std::string& n : KnownNames()) known += (known.empty() ? "" : ", ") + n;
  return UnimplementedError("the model's chat template is not one Tachyon recognizes; pass "
                            "--chat-template with one of: " + known);
}

StatusOr<ChatTemplate> ChatTemplate::FromJinja(std::string_view source, std::string bos, std::string eos,
                                               bool strip_leading_bos) {
  ASSIGN_OR_RETURN(jinja::Template parsed, jinja::Template::Parse(source));
  ChatTemplate t(ChatTemplateFamily::kChatml, "");
  t.jinja_ = std::make_shared<const jinja::Template>(std::move(parsed));
  t.bos_ = std::move(bos);
  t.eos_ = std::move(eos);
  t.strip_leading_bos_ = strip_leading_bos;
  t.source_ = std::string(source);
  // Probe: a call with object arguments; a template that writes them with
  // tojson shows the key unescaped. Otherwise it expects the string.
  std::vector<ChatMessage> probe = {{.role = "user", .content = "x"},
                                    {.role = "assistant",
                                     .content_null = true,
                                     .tool_calls = {{"call_0", "tachyon_probe_fn", R"({"tachyon_probe_arg": 7})"}}},
                                    {.role = "tool", .content = "y", .tool_call_id = "call_0", .name = "tachyon_probe_fn"}};
  StatusOr<std::string> as_object = t.RenderJinja(probe, true, nullptr, nullptr);
  t.tool_arguments_as_object_ = as_object.ok() && as_object->find("\"tachyon_probe_arg\"") != std::string::npos &&
                                as_object->find("\\\"tachyon_probe_arg") == std::string::npos;
  return t;
}

StatusOr<ChatTemplate> ChatTemplate::ForModel(const GgufFile& file, std::string_view override_name) {
  StatusOr<Vocab> vocab = Vocab::FromGguf(file);
  std::string bos, eos;
  if (vocab.ok() && vocab->bos()) bos = vocab->token(*vocab->bos()).text;
  if (vocab.ok() && vocab->eos()) eos = vocab->token(*vocab->eos()).text;
  const bool strip_bos = vocab.ok() && vocab->add_bos();
  const std::string name(override_name);
  if (name.size() > 6 && name.compare(name.size() - 6, 6, ".jinja") == 0) {
    std::ifstream in(name, std::ios::binary);
    if (!in) return NotFoundError("chat template file " + name + " cannot be read");
    std::stringstream ss;
    ss << in.rdbuf();
    StatusOr<ChatTemplate> t = FromJinja(ss.str(), bos, eos, strip_bos);
    if (!t.ok()) return InvalidArgumentError(name + ": " + t.status().message());
    t->note_ = "the template file " + name;
    return t;
  }
  if (!override_name.empty()) {
    ASSIGN_OR_RETURN(ChatTemplate t, FromName(override_name));
    t.note_ = "the built-in " + name + " renderer (--chat-template)";
    return t;
  }
  StatusOr<std::string> text = file.GetString("tokenizer.chat_template");
  if (!text.ok()) {
    return NotFoundError("the model has no chat template (tokenizer.chat_template); pass "
                         "--chat-template NAME or FILE.jinja");
  }
  StatusOr<ChatTemplate> t = FromJinja(*text, bos, eos, strip_bos);
  if (t.ok()) {
    t->note_ = "the model's own Jinja template";
    return t;
  }
  // The interpreter cannot run it: the family renderer that matches its markers, said in the log.
  ASSIGN_OR_RETURN(ChatTemplate family, Detect(*text));
  family.note_ = "the built-in " + std::string(family.name()) + " renderer (the model's Jinja template: " +
                 t.status().message() + ")";
  return family;
}

StatusOr<std::string> ChatTemplate::RenderJinja(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                                std::vector<std::pair<size_t, size_t>>* content,
                                                const nlohmann::ordered_json* tools) const {
  jinja::Value list = jinja::Value(jinja::Value::List{});
  for (const ChatMessage& m : messages) {
    jinja::Value message = jinja::Value::MakeDict();
    message.dict().Set("role", jinja::Value(m.role));
    // Text, never markup.
    message.dict().Set("content", m.content_null ? jinja::Value::None() : jinja::Value::Literal(m.content));
    if (!m.tool_calls.empty()) {
      jinja::Value calls = jinja::Value(jinja::Value::List{});
      for (const ToolCall& c : m.tool_calls) {
        jinja::Value function = jinja::Value::MakeDict();
        function.dict().Set("name", jinja::Value(c.name));
        // A client's arguments string may nest without bound: past kMaxJsonDepth it stays text.
        nlohmann::ordered_json parsed =
            JsonNestsDeeperThan(c.arguments)
                ? nlohmann::ordered_json(nlohmann::ordered_json::value_t::discarded)
                : nlohmann::ordered_json::parse(c.arguments, nullptr, false);
        if (tool_arguments_as_object_ && !parsed.is_discarded()) {
          function.dict().Set("arguments", jinja::Value::FromJson(parsed));
        } else {
          function.dict().Set("arguments", jinja::Value::Literal(c.arguments));
        }
        jinja::Value call = jinja::Value::MakeDict();
        call.dict().Set("id", jinja::Value(c.id));
        call.dict().Set("type", jinja::Value(std::string("function")));
        call.dict().Set("function", function);
        calls.list().push_back(call);
      }
      message.dict().Set("tool_calls", calls);
    }
    if (!m.tool_call_id.empty()) message.dict().Set("tool_call_id", jinja::Value(m.tool_call_id));
    if (!m.name.empty()) message.dict().Set("name", jinja::Value(m.name));
    list.list().push_back(message);
  }
  jinja::Value context = jinja::Value::MakeDict();
  context.dict().Set("messages", list);
  if (tools != nullptr && tools->is_array() && !tools->empty()) context.dict().Set("tools", jinja::Value::FromJson(*tools));
  context.dict().Set("add_generation_prompt", jinja::Value(add_generation_prompt));
  context.dict().Set("bos_token", jinja::Value(bos_));
  context.dict().Set("eos_token", jinja::Value(eos_));
  std::vector<std::pair<size_t, size_t>> ranges;
  ASSIGN_OR_RETURN(std::string text, jinja_->Render(context, now_ != 0 ? now_ : static_cast<int64_t>(std::time(nullptr)), &ranges));
  if (strip_leading_bos_ && !bos_.empty() && text.compare(0, bos_.size(), bos_) == 0) {
    text.erase(0, bos_.size());
    for (auto& [a, b] : ranges) {
      a = a >= bos_.size() ? a - bos_.size() : 0;
      b = b >= bos_.size() ? b - bos_.size() : 0;
    }
    ranges.erase(std::remove_if(ranges.begin(), ranges.end(), [](const auto& r) { return r.first == r.second; }),
                 ranges.end());
  }
  if (content != nullptr) content->insert(content->end(), ranges.begin(), ranges.end());
  return text;
}

StatusOr<std::string> ChatTemplate::Render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                           std::vector<std::pair<size_t, size_t>>* content,
                                           const nlohmann::ordered_json* tools) const {
  if (messages.empty()) return InvalidArgumentError("messages must not be empty");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant" && role != "tool") {
      return InvalidArgumentError("messages[" + std::to_string(i) + "].role '" + role +
                                  "' is not one of system, user, assistant, tool");
    }
  }
  if (jinja_) return RenderJinja(messages, add_generation_prompt, content, tools);
  PromptWriter w{.content = content};
  using F = ChatTemplateFamily;
  switch (family_) {
    case F::kChatml: WriteChatml(w, messages, add_generation_prompt, default_system_); break;
    case F::kLlama3: WriteLlama3(w, messages, add_generation_prompt); break;
    case F::kLlama2: WriteLlama2(w, messages, add_generation_prompt); break;
    case F::kMistral: WriteMistral(w, messages, add_generation_prompt); break;
    case F::kMistralV7: WriteMistralV7(w, messages, add_generation_prompt); break;
    case F::kPhi3: WritePhi3(w, messages, add_generation_prompt); break;
    case F::kGemma: WriteGemma(w, messages, add_generation_prompt); break;
    case F::kDeepseek: WriteDeepseek(w, messages, add_generation_prompt); break;
    case F::kDeepseek3: WriteDeepseek3(w, messages, add_generation_prompt); break;
    case F::kZephyr: WriteZephyr(w, messages, add_generation_prompt); break;
  }
  return std::move(w.out);
}

}  // namespace tachyon
