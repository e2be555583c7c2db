#include "api/messages_front.h"

#include <set>

#include "api/front_door.h"
#include "api/json_parse.h"

namespace tachyon {
namespace {

using json = nlohmann::json;

using front_door::Field;
using front_door::Invalid;
using front_door::Refuse;
using front_door::Require;

// Counts the client's cache_control breakpoints (at most 4) and keeps them.
struct Breakpoints {
  int count = 0;
  void Take(const json& block, json* into, const std::string& where) {
    if (!block.contains("cache_control")) return;
    const json& c = block["cache_control"];
    Require(c.is_object() && Field(c, "type") == "ephemeral", where + ".cache_control.type: must be 'ephemeral'");
    ++count;
    if (into != nullptr) (*into)["cache_control"] = c;
  }
};

json TextPart(const json& block, const std::string& where, Breakpoints* marks) {
  Require(block.contains("text") && block["text"].is_string(), where + ".text: Field required", where);
  Require(!block["text"].get_ref<const std::string&>().empty(), where + ": text content blocks must be non-empty",
          where);
  json part = {{"type", "text"}, {"text", block["text"]}};
  marks->Take(block, &part, where);
  return part;
}

json ImagePart(const json& block, const std::string& where, Breakpoints* marks) {
  const json& source = Field(block, "source");
  Require(source.is_object(), where + ".source: Field required", where);
  const std::string type = StringField(source, "type");
  std::string url;
  if (type == "base64") {
    Require(Field(source, "media_type").is_string() && Field(source, "data").is_string(),
            where + ".source: media_type and data are required", where);
    url = "data:" + source["media_type"].get<std::string>() + ";base64," + source["data"].get<std::string>();
  } else if (type == "url") {
    Require(Field(source, "url").is_string(), where + ".source.url: Field required", where);
    url = source["url"].get<std::string>();
  } else {
    Refuse(where + ".source.type: must be 'base64' or 'url'", where);
  }
  marks->Take(block, nullptr, where);
  return {{"type", "image_url"}, {"image_url", {{"url", url}}}};
}

// A tool_result's content as the text of a tool message.
std::string ToolResultText(const json& block, const std::string& where) {
  const json& content = Field(block, "content");
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  Require(content.is_array(), where + ".content: must be a string or a list of blocks", where);
  std::string text;
  for (const json& c : content) {
    Require(c.is_object() && Field(c, "type") == "text" && Field(c, "text").is_string(),
            where + ".content: only text blocks can be passed on in a tool_result", where);
    text += c["text"].get<std::string>();
  }
  return text;
}

// One Anthropic message as one or more chat messages (tool results become tool messages).
void AddMessage(const json& m, const std::string& where, std::set<std::string>* open, Breakpoints* marks,
                json* out) {
  Require(m.is_object(), where + ": must be an object", where);
  for (const auto& [k, v] : m.items()) Require(k == "role" || k == "content", where + "." + k + ": Extra inputs are not permitted", where);
  const std::string role = StringField(m, "role");
  Require(role == "user" || role == "assistant", where + ".role: Input should be 'user' or 'assistant'", where + ".role");
  Require(m.contains("content"), where + ".content: Field required", where);
  const json& content = m["content"];
  if (content.is_string()) {
    if (role == "user") {
      Require(!open->size(), where + ": tool_use ids were found without tool_result blocks immediately after", where);
    }
    out->push_back({{"role", role}, {"content", content}});
    if (role == "assistant") open->clear();
    return;
  }
  Require(content.is_array(), where + ".content: must be a string or a list of blocks", where);
  json parts = json::array(), calls = json::array();
  std::set<std::string> answered;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + ".content." + std::to_string(i);
    const json& b = content[i];
    Require(b.is_object() && Field(b, "type").is_string(), at + ".type: Field required", at);
    const std::string type = b["type"];
    if (type == "text") {
      parts.push_back(TextPart(b, at, marks));
    } else if (type == "image" && role == "user") {
      parts.push_back(ImagePart(b, at, marks));
    } else if (type == "tool_result" && role == "user") {
      Require(Field(b, "tool_use_id").is_string(), at + ".tool_use_id: Field required", at);
      const std::string id = b["tool_use_id"];
      Require(open->count(id) > 0,
              at + ": unexpected tool_use_id found in tool_result blocks: " + id +
                  ". Each tool_result block must have a corresponding tool_use block in the previous message.",
              at);
      answered.insert(id);
      marks->Take(b, nullptr, at);
      std::string text = ToolResultText(b, at);
      if (Field(b, "is_error") == true) text = "Error: " + text;
      out->push_back({{"role", "tool"}, {"tool_call_id", id}, {"content", text}});
    } else if (type == "tool_use" && role == "assistant") {
      Require(Field(b, "id").is_string() && Field(b, "name").is_string(), at + ": tool_use needs id and name", at);
      Require(Field(b, "input").is_object(), at + ".input: must be an object", at);
      marks->Take(b, nullptr, at);
      calls.push_back({{"id", b["id"]},
                       {"type", "function"},
                       {"function", {{"name", b["name"]}, {"arguments", b["input"].dump()}}}});
    } else if ((type == "thinking" || type == "redacted_thinking") && role == "assistant") {
      // earlier reasoning: not sent on (documented)
    } else {
      Refuse(at + ": a '" + type + "' block is not supported in a " + role + " message by this gateway", at);
    }
  }
  if (role == "user") {
    for (const std::string& id : *open) {
      Require(answered.count(id) > 0, where + ": tool_use ids were found without tool_result blocks immediately after: " + id,
              where);
    }
    open->clear();
    if (!parts.empty()) out->push_back({{"role", "user"}, {"content", parts}});
    return;
  }
  open->clear();
  json message = {{"role", "assistant"}, {"content", parts.empty() ? json() : json(parts)}};
  if (!calls.empty()) {
    for (const json& c : calls) open->insert(c["id"].get<std::string>());
    message["tool_calls"] = calls;
  }
  out->push_back(std::move(message));
}

json ChatTools(const json& tools, Breakpoints* marks) {
  Require(tools.is_array(), "tools: Input should be a valid list", "tools");
  json out = json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = "tools." + std::to_string(i);
    const json& t = tools[i];
    Require(t.is_object(), at + ": must be an object", at);
    Require(!t.contains("type") || t["type"] == "custom",
            at + ": the server tool '" + StringField(t, "type") + "' is not supported by this gateway", at);
    Require(Field(t, "name").is_string() && !t["name"].get_ref<const std::string&>().empty(), at + ".name: Field required", at);
    Require(Field(t, "input_schema").is_object(), at + ".input_schema: Field required", at);
    json function = {{"name", t["name"]}, {"parameters", t["input_schema"]}};
    if (Field(t, "description").is_string()) function["description"] = t["description"];
    json tool = {{"type", "function"}, {"function", function}};
    marks->Take(t, &tool, at);
    out.push_back(std::move(tool));
  }
  return out;
}

void ChatToolChoice(const json& choice, json* out) {
  Require(choice.is_object(), "tool_choice: must be an object", "tool_choice");
  const std::string type = StringField(choice, "type");
  if (type == "auto") {
    (*out)["tool_choice"] = "auto";
  } else if (type == "any") {
    (*out)["tool_choice"] = "required";
  } else if (type == "none") {
    (*out)["tool_choice"] = "none";
  } else if (type == "tool") {
    Require(Field(choice, "name").is_string(), "tool_choice.name: Field required", "tool_choice.name");
    (*out)["tool_choice"] = {{"type", "function"}, {"function", {{"name", choice["name"]}}}};
  } else {
    Refuse("tool_choice.type: Input should be 'auto', 'any', 'tool' or 'none'", "tool_choice");
  }
  if (Field(choice, "disable_parallel_tool_use") == true) (*out)["parallel_tool_calls"] = false;
}

json Translate(const json& r, bool count_tokens) {
  Require(r.is_object(), "the body must be a JSON object");
  static const std::set<std::string> kKnown = {"model", "messages", "max_tokens", "system", "stop_sequences",
                                               "stream", "temperature", "top_p", "top_k", "metadata", "tools",
                                               "tool_choice"};
  static const std::set<std::string> kNotHere = {"thinking", "service_tier", "container", "mcp_servers",
                                                 "context_management"};
  for (const auto& [k, v] : r.items()) {
    if (kNotHere.count(k)) Refuse(k + ": not supported by this gateway", k);
    Require(kKnown.count(k) > 0 && (!count_tokens || (k != "max_tokens" && k != "stream" && k != "stop_sequences" &&
                                                       k != "temperature" && k != "top_p" && k != "top_k" &&
                                                       k != "metadata")),
            k + ": Extra inputs are not permitted", k);
  }
  Require(Field(r, "model").is_string() && !r["model"].get_ref<const std::string&>().empty(), "model: Field required",
          "model");
  json out = {{"model", r["model"]}};
  if (!count_tokens) {
    Require(Field(r, "max_tokens").is_number_integer() && r["max_tokens"].get<int64_t>() >= 1,
            "max_tokens: Field required (an integer of at least 1)", "max_tokens");
    out["max_tokens"] = r["max_tokens"];
  }
  Breakpoints marks;
  json messages = json::array();
  if (r.contains("system")) {
    const json& s = r["system"];
    if (s.is_string()) {
      if (!s.get_ref<const std::string&>().empty()) messages.push_back({{"role", "system"}, {"content", s}});
    } else {
      Require(s.is_array(), "system: Input should be a valid string or a list of text blocks", "system");
      json parts = json::array();
      for (size_t i = 0; i < s.size(); ++i) {
        const std::string at = "system." + std::to_string(i);
        Require(s[i].is_object() && Field(s[i], "type") == "text", at + ".type: Input should be 'text'", at);
        parts.push_back(TextPart(s[i], at, &marks));
      }
      if (!parts.empty()) messages.push_back({{"role", "system"}, {"content", parts}});
    }
  }
  Require(Field(r, "messages").is_array() && !r["messages"].empty(), "messages: at least one message is required",
          "messages");
  std::set<std::string> open;
  for (size_t i = 0; i < r["messages"].size(); ++i) {
    AddMessage(r["messages"][i], "messages." + std::to_string(i), &open, &marks, &messages);
  }
  out["messages"] = std::move(messages);
  if (r.contains("tools")) out["tools"] = ChatTools(r["tools"], &marks);
  if (r.contains("tool_choice")) {
    Require(r.contains("tools") || Field(r["tool_choice"], "type") == "none", "tool_choice: requires tools",
            "tool_choice");
    ChatToolChoice(r["tool_choice"], &out);
  }
  Require(marks.count <= 4, "A maximum of 4 blocks with cache_control may be provided. Found " +
                                std::to_string(marks.count) + ".");
  for (const char* key : {"temperature", "top_p"}) {
    if (!r.contains(key)) continue;
    Require(r[key].is_number() && r[key].get<double>() >= 0 && r[key].get<double>() <= 1,
            std::string(key) + ": Input should be between 0 and 1", key);
    out[key] = r[key];
  }
  if (r.contains("top_k")) {
    Require(r["top_k"].is_number_integer() && r["top_k"].get<int64_t>() >= 0, "top_k: must be at least 0", "top_k");
    out["top_k"] = r["top_k"];
  }
  if (r.contains("stop_sequences")) {
    Require(r["stop_sequences"].is_array(), "stop_sequences: Input should be a valid list", "stop_sequences");
    for (const json& s : r["stop_sequences"]) Require(s.is_string(), "stop_sequences: strings only", "stop_sequences");
    if (!r["stop_sequences"].empty()) out["stop"] = r["stop_sequences"];
  }
  if (r.contains("metadata")) {
    Require(r["metadata"].is_object(), "metadata: must be an object", "metadata");
    for (const auto& [k, v] : r["metadata"].items()) {
      Require(k == "user_id", "metadata." + k + ": Extra inputs are not permitted", "metadata");
    }
    if (Field(r["metadata"], "user_id").is_string()) out["user"] = r["metadata"]["user_id"];
  }
  if (r.contains("stream")) {
    Require(r["stream"].is_boolean(), "stream: Input should be a valid boolean", "stream");
    if (r["stream"] == true) {
      out["stream"] = true;
      out["stream_options"] = {{"include_usage", true}};  // message_delta carries the usage
    }
  }
  return out;
}

std::string AnthropicErrorType(const ApiError& e) {
  switch (e.http_status) {
    case 400: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 413: return "request_too_large";
    case 429: return "rate_limit_error";
    case 503:
    case 529: return "overloaded_error";
    default: return e.http_status >= 400 && e.http_status < 500 ? "invalid_request_error" : "api_error";
  }
}

std::string Event(const json& data) {
  return "event: " + data["type"].get<std::string>() + "\ndata: " +
         data.dump(-1, ' ', false, json::error_handler_t::replace) + "\n\n";
}

json UsageJson(const MessagesUsage& u) {
  return {{"input_tokens", u.input_tokens},
          {"output_tokens", u.output_tokens},
          {"cache_read_input_tokens", u.cache_read_tokens},
          {"cache_creation_input_tokens", u.cache_write_tokens}};
}

}  // namespace

std::variant<json, ApiError> ChatBodyFromMessagesRequest(std::string_view body, bool count_tokens) {
  const json r = ParseJson(body);
  if (r.is_discarded()) return ApiError{400, "the body is not valid JSON", "invalid_request_error", "", ""};
  try {
    return Translate(r, count_tokens);
  } catch (const Invalid& e) {
    return e.error;
  } catch (const json::exception& e) {  // an access not checked above: a clear error, never a crash
    return ApiError{400, std::string("the request could not be read: ") + e.what(), "invalid_request_error", "", ""};
  }
}

std::string MessagesErrorBody(const ApiError& error) {
  return json{{"type", "error"}, {"error", {{"type", AnthropicErrorType(error)}, {"message", error.message}}}}.dump(
      -1, ' ', false, json::error_handler_t::replace);
}

std::string StopReasonFromFinishReason(std::string_view finish_reason) {
  if (finish_reason == "length") return "max_tokens";
  if (finish_reason == "tool_calls" || finish_reason == "function_call") return "tool_use";
  if (finish_reason == "content_filter") return "refusal";
  return "end_turn";
}

namespace {

std::variant<std::string, std::string> TranslateChatAnswer(std::string_view chat_body, const std::string& model,
                                                           const MessagesUsage& usage, bool has_usage) {
  const json c = ParseJson(chat_body);
  const json& choices = Field(c, "choices");
  if (!choices.is_array() || choices.empty() || !Field(choices[0], "message").is_object()) {
    return std::variant<std::string, std::string>(std::in_place_index<1>, "the answer is not a chat completion");
  }
  const json& message = choices[0]["message"];
  json content = json::array();
  if (Field(message, "reasoning_content").is_string() && !message["reasoning_content"].get_ref<const std::string&>().empty()) {
    content.push_back({{"type", "thinking"}, {"thinking", message["reasoning_content"]}, {"signature", ""}});
  }
  if (Field(message, "content").is_string() && !message["content"].get_ref<const std::string&>().empty()) {
    content.push_back({{"type", "text"}, {"text", message["content"]}});
  }
  if (Field(message, "tool_calls").is_array()) {
    for (const json& call : message["tool_calls"]) {
      const json& f = Field(call, "function");
      json input = f.is_object() && Field(f, "arguments").is_string() ? ParseJson(f["arguments"].get<std::string>())
                                                                       : json::object();
      if (!input.is_object()) input = json::object();
      content.push_back({{"type", "tool_use"},
                         {"id", Field(call, "id").is_string() ? call["id"] : json("toolu_0")},
                         {"name", f.is_object() && Field(f, "name").is_string() ? f["name"] : json("")},
                         {"input", input}});
    }
  }
  const json& reason = Field(choices[0], "finish_reason");
  MessagesUsage u = usage;
  if (!has_usage && Field(c, "usage").is_object()) {
    const json& cu = c["usage"];
    const int64_t prompt = Field(cu, "prompt_tokens").is_number_integer() ? cu["prompt_tokens"].get<int64_t>() : 0;
    u.output_tokens = Field(cu, "completion_tokens").is_number_integer() ? cu["completion_tokens"].get<int64_t>() : 0;
    const json& details = Field(cu, "prompt_tokens_details");
    u.cache_read_tokens = details.is_object() && Field(details, "cached_tokens").is_number_integer()
                              ? details["cached_tokens"].get<int64_t>()
                              : 0;
    u.input_tokens = std::max<int64_t>(0, prompt - u.cache_read_tokens);
  }
  const std::string id = Field(c, "id").is_string() ? c["id"].get<std::string>() : "0";
  json out = {{"id", "msg_" + id},
              {"type", "message"},
              {"role", "assistant"},
              {"model", model},
              {"content", content},
              {"stop_reason", StopReasonFromFinishReason(reason.is_string() ? reason.get<std::string>() : "stop")},
              {"stop_sequence", nullptr},
              {"usage", UsageJson(u)}};
  return std::variant<std::string, std::string>(std::in_place_index<0>,
                                                out.dump(-1, ' ', false, json::error_handler_t::replace));
}

}  // namespace

std::variant<std::string, std::string> MessagesAnswerFromChat(std::string_view chat_body, const std::string& model,
                                                              const MessagesUsage& usage, bool has_usage) {
  try {
    return TranslateChatAnswer(chat_body, model, usage, has_usage);
  } catch (const json::exception& e) {
    return std::variant<std::string, std::string>(std::in_place_index<1>, e.what());
  }
}

void MessagesEventWriter::Start(std::string* out) {
  if (started_) return;
  started_ = true;
  *out += Event({{"type", "message_start"},
                 {"message", {{"id", "msg_" + id_},
                              {"type", "message"},
                              {"role", "assistant"},
                              {"model", model_},
                              {"content", json::array()},
                              {"stop_reason", nullptr},
                              {"stop_sequence", nullptr},
                              {"usage", UsageJson({})}}}});
}

void MessagesEventWriter::Close(std::string* out) {
  if (open_ == Block::kNone) return;
  *out += Event({{"type", "content_block_stop"}, {"index", index_}});
  open_ = Block::kNone;
}

void MessagesEventWriter::Open(Block kind, json content_block, std::string* out) {
  Close(out);
  open_ = kind;
  ++index_;
  *out += Event({{"type", "content_block_start"}, {"index", index_}, {"content_block", std::move(content_block)}});
}

void MessagesEventWriter::Chunk(std::string_view chunk, std::string* out) {
  Start(out);
  try {
    Translate(ParseJson(chunk), out);
  } catch (const json::exception&) {
    // a member of an unexpected type in an upstream's chunk (the backend checked it is a JSON
    // object): the rest of the stream is still framed
  }
}

void MessagesEventWriter::Translate(const json& c, std::string* out) {
  if (Field(c, "usage").is_object()) {
    const json& u = c["usage"];
    const int64_t prompt = Field(u, "prompt_tokens").is_number_integer() ? u["prompt_tokens"].get<int64_t>() : 0;
    usage_.output_tokens = Field(u, "completion_tokens").is_number_integer() ? u["completion_tokens"].get<int64_t>() : 0;
    const json& d = Field(u, "prompt_tokens_details");
    usage_.cache_read_tokens = d.is_object() && Field(d, "cached_tokens").is_number_integer()
                                   ? d["cached_tokens"].get<int64_t>() : 0;
    usage_.input_tokens = std::max<int64_t>(0, prompt - usage_.cache_read_tokens);
    has_usage_ = true;
  }
  const json& choices = Field(c, "choices");
  if (!choices.is_array() || choices.empty() || !choices[0].is_object()) return;
  const json& delta = Field(choices[0], "delta");
  if (delta.is_object()) {
    const json& reasoning = Field(delta, "reasoning_content");
    if (reasoning.is_string() && !reasoning.get_ref<const std::string&>().empty()) {
      if (open_ != Block::kThinking) Open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}}, out);
      *out += Event({{"type", "content_block_delta"}, {"index", index_},
                     {"delta", {{"type", "thinking_delta"}, {"thinking", reasoning}}}});
    }
    const json& text = Field(delta, "content");
    if (text.is_string() && !text.get_ref<const std::string&>().empty()) {
      if (open_ != Block::kText) Open(Block::kText, {{"type", "text"}, {"text", ""}}, out);
      *out += Event({{"type", "content_block_delta"}, {"index", index_},
                     {"delta", {{"type", "text_delta"}, {"text", text}}}});
    }
    const json& calls = Field(delta, "tool_calls");
    for (const json& call : calls.is_array() ? calls : json::array()) {
      if (!call.is_object()) continue;
      const int index = Field(call, "index").is_number_integer() ? call["index"].get<int>() : tool_index_;
      const json& f = Field(call, "function");
      if (open_ != Block::kToolUse || index != tool_index_) {
        tool_index_ = index;
        Open(Block::kToolUse,
             {{"type", "tool_use"},
              {"id", Field(call, "id").is_string() ? call["id"] : json("toolu_" + std::to_string(index))},
              {"name", f.is_object() && Field(f, "name").is_string() ? f["name"] : json("")},
              {"input", json::object()}},
             out);
      }
      if (f.is_object() && Field(f, "arguments").is_string() && !f["arguments"].get_ref<const std::string&>().empty()) {
        *out += Event({{"type", "content_block_delta"}, {"index", index_},
                       {"delta", {{"type", "input_json_delta"}, {"partial_json", f["arguments"]}}}});
      }
    }
  }
  const json& reason = Field(choices[0], "finish_reason");
  if (reason.is_string()) stop_reason_ = StopReasonFromFinishReason(reason.get<std::string>());
}

void MessagesEventWriter::End(const MessagesUsage& usage, bool has_usage, std::string* out) {
  Start(out);
  Close(out);
  const MessagesUsage& u = has_usage ? usage : usage_;
  *out += Event({{"type", "message_delta"},
                 {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", nullptr}}},
                 {"usage", UsageJson(u)}});
  *out += Event({{"type", "message_stop"}});
}

std::string MessagesEventWriter::ErrorEvent(const ApiError& error) {
  return Event(json::parse(MessagesErrorBody(error)));
}

}  // namespace tachyon
