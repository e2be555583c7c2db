#include "api/responses_front.h"

#include <algorithm>
#include <cstdio>
#include <random>
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

bool Present(const json& object, const char* key) { return !Field(object, key).is_null(); }

std::string Str(const json& value, const std::string& where) {
  Require(value.is_string(), "Invalid type for '" + where + "': expected a string.", where);
  return value.get<std::string>();
}

// The parameters of POST /v1/responses (OpenAI's API reference), and `stop`, an
// extension passed to the chat request.
const std::set<std::string>& KnownParameters() {
  static const std::set<std::string> known = {
      "background", "conversation", "include", "input", "instructions", "max_output_tokens", "max_tool_calls",
      "metadata", "model", "parallel_tool_calls", "previous_response_id", "prompt", "prompt_cache_key",
      "reasoning", "safety_identifier", "service_tier", "store", "stream", "stream_options", "temperature", "text",
      "tool_choice", "tools", "top_logprobs", "top_p", "truncation", "user", "stop"};
  return known;
}

json TextPart(const char* type, const json& text) { return {{"type", type}, {"text", text}}; }

json OutputTextPart(const json& text) {
  return {{"type", "output_text"}, {"text", text}, {"annotations", json::array()}};
}

// A message's content as the list of parts the item keeps.
json MessageContent(const json& content, const std::string& role, const std::string& where) {
  const bool assistant = role == "assistant";
  if (content.is_string()) return json::array({assistant ? OutputTextPart(content) : TextPart("input_text", content)});
  Require(content.is_array(), "Invalid type for '" + where + "': expected a string or an array of content parts.",
          where);
  json parts = json::array();
  for (size_t k = 0; k < content.size(); ++k) {
    const json& p = content[k];
    const std::string pw = where + "[" + std::to_string(k) + "]";
    Require(p.is_object() && Field(p, "type").is_string(), "Invalid value for '" + pw + "': expected an object with a 'type'.", pw);
    const std::string type = p["type"].get<std::string>();
    if (type == "input_text" || type == "output_text") {
      const std::string text = Str(Field(p, "text"), pw + ".text");
      parts.push_back(type == "output_text" ? OutputTextPart(text) : TextPart("input_text", text));
    } else if (type == "refusal") {
      parts.push_back({{"type", "refusal"}, {"refusal", Str(Field(p, "refusal"), pw + ".refusal")}});
    } else if (type == "input_image") {
      Require(!Present(p, "file_id"), "'" + pw + ".file_id': files are not served here; send the image as image_url "
              "(a URL or a data: URL).", pw + ".file_id");
      json part = {{"type", "input_image"}, {"image_url", Str(Field(p, "image_url"), pw + ".image_url")}};
      part["detail"] = Present(p, "detail") ? Str(p["detail"], pw + ".detail") : "auto";
      parts.push_back(std::move(part));
    } else if (type == "input_file" || type == "input_audio") {
      Refuse("'" + pw + "': content parts of type '" + type + "' are not supported here.", pw + ".type");
    } else {
      Refuse("Invalid value: '" + type + "'. Supported values are: 'input_text', 'input_image', 'output_text' and "
             "'refusal'.", pw + ".type");
    }
  }
  return parts;
}

// One input item, normalized (as OpenAI lists input items).
json InputItem(const json& item, const std::string& where) {
  Require(item.is_object(), "Invalid type for '" + where + "': expected an object.", where);
  std::string type = Field(item, "type").is_string() ? item["type"].get<std::string>() : "";
  if (type.empty()) {
    Require(Present(item, "role"), "Missing required parameter: '" + where + ".type'.", where + ".type");
    type = "message";
  }
  json out;
  if (type == "message") {
    const std::string role = Str(Field(item, "role"), where + ".role");
    Require(role == "user" || role == "assistant" || role == "system" || role == "developer",
            "Invalid value: '" + role + "'. Supported values are: 'user', 'assistant', 'system' and 'developer'.",
            where + ".role");
    Require(Present(item, "content"), "Missing required parameter: '" + where + ".content'.", where + ".content");
    out = {{"type", "message"}, {"role", role}, {"content", MessageContent(item["content"], role, where + ".content")}};
    if (role == "assistant") out["status"] = "completed";
  } else if (type == "function_call") {
    out = {{"type", "function_call"},
           {"call_id", Str(Field(item, "call_id"), where + ".call_id")},
           {"name", Str(Field(item, "name"), where + ".name")},
           {"arguments", Str(Field(item, "arguments"), where + ".arguments")},
           {"status", "completed"}};
  } else if (type == "function_call_output") {
    const json& output = Field(item, "output");
    json kept;
    if (output.is_string()) {
      kept = output;
    } else {
      Require(output.is_array(), "Invalid type for '" + where + ".output': expected a string or an array of parts.",
              where + ".output");
      kept = MessageContent(output, "tool", where + ".output");
    }
    out = {{"type", "function_call_output"},
           {"call_id", Str(Field(item, "call_id"), where + ".call_id")},
           {"output", kept},
           {"status", "completed"}};
  } else if (type == "reasoning") {
    out = {{"type", "reasoning"},
           {"summary", Field(item, "summary").is_array() ? item["summary"] : json::array()}};
    if (Field(item, "content").is_array()) out["content"] = item["content"];
  } else if (type == "item_reference") {
    Refuse("'" + where + "': item_reference is not supported here; continue a conversation with "
           "previous_response_id.", where + ".type");
  } else {
    Refuse("Invalid value: '" + type + "'. Input items of this type are not supported here (supported: message, "
           "function_call, function_call_output, reasoning).", where + ".type");
  }
  if (Field(item, "id").is_string()) out["id"] = item["id"];
  return out;
}

json ChatTool(const json& tool, const std::string& where) {
  Require(tool.is_object() && Field(tool, "type").is_string(), "Missing required parameter: '" + where + ".type'.",
          where + ".type");
  const std::string type = tool["type"].get<std::string>();
  if (type != "function") {
    Refuse("'" + where + "': tools of type '" + type + "' are built-in tools that this gateway does not run; only "
           "function tools are supported.", where + ".type");
  }
  json f = {{"name", Str(Field(tool, "name"), where + ".name")}};
  if (Present(tool, "description")) f["description"] = Str(tool["description"], where + ".description");
  if (Present(tool, "parameters")) {
    Require(tool["parameters"].is_object(), "Invalid type for '" + where + ".parameters': expected an object.",
            where + ".parameters");
    f["parameters"] = tool["parameters"];
  }
  if (Present(tool, "strict")) {
    Require(tool["strict"].is_boolean(), "Invalid type for '" + where + ".strict': expected a boolean.",
            where + ".strict");
    f["strict"] = tool["strict"];
  }
  return {{"type", "function"}, {"function", f}};
}

json ChatToolChoice(const json& choice) {
  if (choice.is_string()) {
    const std::string c = choice.get<std::string>();
    Require(c == "none" || c == "auto" || c == "required",
            "Invalid value: '" + c + "'. Supported values are: 'none', 'auto' and 'required'.", "tool_choice");
    return choice;
  }
  Require(choice.is_object() && Field(choice, "type").is_string(),
          "Invalid type for 'tool_choice': expected a string or an object.", "tool_choice");
  const std::string type = choice["type"].get<std::string>();
  if (type != "function") {
    Refuse("'tool_choice': a choice of type '" + type + "' is not supported here; name a function tool.",
           "tool_choice.type");
  }
  return {{"type", "function"}, {"function", {{"name", Str(Field(choice, "name"), "tool_choice.name")}}}};
}

json ChatResponseFormat(const json& format) {
  Require(format.is_object() && Field(format, "type").is_string(),
          "Missing required parameter: 'text.format.type'.", "text.format.type");
  const std::string type = format["type"].get<std::string>();
  if (type == "text") return nullptr;
  if (type == "json_object") return {{"type", "json_object"}};
  Require(type == "json_schema",
          "Invalid value: '" + type + "'. Supported values are: 'text', 'json_object' and 'json_schema'.",
          "text.format.type");
  json js = {{"name", Str(Field(format, "name"), "text.format.name")}};
  Require(Field(format, "schema").is_object(), "Missing required parameter: 'text.format.schema'.",
          "text.format.schema");
  js["schema"] = format["schema"];
  if (Present(format, "strict")) {
    Require(format["strict"].is_boolean(), "Invalid type for 'text.format.strict': expected a boolean.",
            "text.format.strict");
    js["strict"] = format["strict"];
  }
  if (Present(format, "description")) js["description"] = Str(format["description"], "text.format.description");
  return {{"type", "json_schema"}, {"json_schema", js}};
}

ResponsesRequest Translate(const json& body) {
  Require(body.is_object(), "The body must be a JSON object.");
  for (const auto& [key, value] : body.items()) {
    if (!KnownParameters().count(key)) Refuse("Unknown parameter: '" + key + "'.", key, "unknown_parameter");
  }
  ResponsesRequest r;
  // Required by OpenAI; absent, as on the chat endpoints here, a server of one model answers with it.
  if (Present(body, "model")) r.model = Str(body["model"], "model");
  Require(!Present(body, "background") || body["background"] == false,
          "'background': background responses are not supported here.", "background");
  Require(!Present(body, "conversation"),
          "'conversation': the Conversations API is not served here; use previous_response_id.", "conversation");
  Require(!Present(body, "prompt"), "'prompt': stored prompt templates are not served here.", "prompt");
  auto boolean = [&](const char* key, bool* out) {
    if (!Present(body, key)) return;
    Require(body[key].is_boolean(), std::string("Invalid type for '") + key + "': expected a boolean.", key);
    *out = body[key].get<bool>();
  };
  boolean("store", &r.store);
  boolean("stream", &r.stream);
  if (Present(body, "previous_response_id")) r.previous_response_id = Str(body["previous_response_id"], "previous_response_id");
  if (Present(body, "instructions")) r.instructions = Str(body["instructions"], "instructions");

  const json& input = Field(body, "input");
  if (input.is_string()) {
    r.input_items.push_back({{"type", "message"}, {"role", "user"}, {"content", json::array({TextPart("input_text", input)})}});
  } else if (input.is_array()) {
    for (size_t i = 0; i < input.size(); ++i) r.input_items.push_back(InputItem(input[i], "input[" + std::to_string(i) + "]"));
  } else {
    Require(input.is_null(), "Invalid type for 'input': expected a string or an array of input items.", "input");
  }
  Require(!r.input_items.empty() || !r.previous_response_id.empty(), "Missing required parameter: 'input'.", "input");

  json& chat = r.chat;
  json& echo = r.echo;
  if (!r.model.empty()) chat["model"] = r.model;
  echo["instructions"] = r.instructions.empty() ? json(nullptr) : json(r.instructions);
  if (Present(body, "max_output_tokens")) {
    Require(body["max_output_tokens"].is_number_integer() && body["max_output_tokens"].get<int64_t>() >= 16,
            "Invalid 'max_output_tokens': integer below minimum value. Expected a value >= 16.", "max_output_tokens");
    chat["max_tokens"] = body["max_output_tokens"];
  }
  echo["max_output_tokens"] = Field(body, "max_output_tokens");
  for (const char* key : {"temperature", "top_p"}) {
    if (Present(body, key)) {
      Require(body[key].is_number(), std::string("Invalid type for '") + key + "': expected a number.", key);
      chat[key] = body[key];
    }
    echo[key] = Present(body, key) ? body[key] : json(1.0);
  }
  json tools = json::array();
  if (Present(body, "tools")) {
    Require(body["tools"].is_array(), "Invalid type for 'tools': expected an array.", "tools");
    for (size_t i = 0; i < body["tools"].size(); ++i) tools.push_back(ChatTool(body["tools"][i], "tools[" + std::to_string(i) + "]"));
    if (!tools.empty()) chat["tools"] = tools;
  }
  echo["tools"] = Present(body, "tools") ? body["tools"] : json::array();
  if (Present(body, "tool_choice")) chat["tool_choice"] = ChatToolChoice(body["tool_choice"]);
  echo["tool_choice"] = Present(body, "tool_choice") ? body["tool_choice"] : json("auto");
  bool parallel = true;
  boolean("parallel_tool_calls", &parallel);
  if (Present(body, "parallel_tool_calls") && !tools.empty()) chat["parallel_tool_calls"] = parallel;
  echo["parallel_tool_calls"] = parallel;
  json text = {{"format", {{"type", "text"}}}};
  if (Present(body, "text")) {
    Require(body["text"].is_object(), "Invalid type for 'text': expected an object.", "text");
    text = body["text"];
    if (Present(text, "format")) {
      json format = ChatResponseFormat(text["format"]);
      if (!format.is_null()) chat["response_format"] = std::move(format);
    } else {
      text["format"] = {{"type", "text"}};
    }
  }
  echo["text"] = text;
  if (Present(body, "metadata")) {
    const json& m = body["metadata"];
    Require(m.is_object() && m.size() <= 16, "Invalid 'metadata': expected an object of at most 16 pairs.", "metadata");
    for (const auto& [k, v] : m.items()) {
      Require(k.size() <= 64 && v.is_string() && v.get_ref<const std::string&>().size() <= 512,
              "Invalid 'metadata': keys are strings of at most 64 characters, values strings of at most 512.",
              "metadata");
    }
  }
  echo["metadata"] = Present(body, "metadata") ? body["metadata"] : json::object();
  if (Present(body, "user")) chat["user"] = Str(body["user"], "user");
  echo["user"] = Field(body, "user");
  if (Present(body, "truncation")) {
    const std::string t = Str(body["truncation"], "truncation");
    Require(t == "auto" || t == "disabled", "Invalid value: '" + t + "'. Supported values are: 'auto' and 'disabled'.",
            "truncation");
  }
  echo["truncation"] = Present(body, "truncation") ? body["truncation"] : json("disabled");
  json reasoning = {{"effort", nullptr}, {"summary", nullptr}};
  if (Present(body, "reasoning")) {
    Require(body["reasoning"].is_object(), "Invalid type for 'reasoning': expected an object.", "reasoning");
    reasoning = body["reasoning"];
    if (Field(reasoning, "effort").is_string()) chat["reasoning_effort"] = reasoning["effort"];
  }
  echo["reasoning"] = reasoning;
  if (Present(body, "stop")) chat["stop"] = body["stop"];
  echo["store"] = r.store;
  if (r.stream) {
    chat["stream"] = true;
    chat["stream_options"] = {{"include_usage", true}};
  }
  return r;
}

// The text of a content part list, as a chat message's content: a string when
// every part is text, else chat content parts.
json ChatContent(const json& parts) {
  bool all_text = true;
  std::string text;
  for (const json& p : parts) {
    const std::string type = p["type"].get<std::string>();
    if (type == "input_text" || type == "output_text") {
      text += p["text"].get<std::string>();
    } else if (type == "refusal") {
      text += p["refusal"].get<std::string>();
    } else {
      all_text = false;
    }
  }
  if (all_text) return text;
  json out = json::array();
  for (const json& p : parts) {
    const std::string type = p["type"].get<std::string>();
    if (type == "input_image") {
      out.push_back({{"type", "image_url"}, {"image_url", {{"url", p["image_url"]}, {"detail", p.value("detail", "auto")}}}});
    } else if (type == "refusal") {
      out.push_back({{"type", "text"}, {"text", p["refusal"]}});
    } else {
      out.push_back({{"type", "text"}, {"text", p["text"]}});
    }
  }
  return out;
}

std::string RandomHex(size_t digits) {
  thread_local std::mt19937_64 rng{std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32)};
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  while (out.size() < digits) {
    uint64_t v = rng();
    for (int i = 0; i < 16 && out.size() < digits; ++i, v >>= 4) out += kDigits[v & 15];
  }
  return out;
}

// Item ids of a response: PREFIX_ + the response id's random part + _N.
std::string ItemId(const json& response, const char* prefix, size_t index) {
  const std::string id = response.value("id", std::string("resp_"));
  return std::string(prefix) + "_" + id.substr(std::min<size_t>(5, id.size())) + "_" + std::to_string(index);
}

json UsageJson(const ResponsesUsage& u) {
  return {{"input_tokens", u.input_tokens},
          {"input_tokens_details", {{"cached_tokens", u.cached_tokens}}},
          {"output_tokens", u.output_tokens},
          {"output_tokens_details", {{"reasoning_tokens", u.reasoning_tokens}}},
          {"total_tokens", u.input_tokens + u.output_tokens}};
}

ResponsesUsage UsageFromChat(const json& u) {
  ResponsesUsage out;
  if (!u.is_object()) return out;
  auto integer = [](const json& v) { return v.is_number_integer() ? v.get<int64_t>() : int64_t{0}; };
  out.input_tokens = integer(Field(u, "prompt_tokens"));
  out.output_tokens = integer(Field(u, "completion_tokens"));
  out.cached_tokens = integer(Field(Field(u, "prompt_tokens_details"), "cached_tokens"));
  out.reasoning_tokens = integer(Field(Field(u, "completion_tokens_details"), "reasoning_tokens"));
  return out;
}

// Completed or incomplete, from the chat answer's finish_reason.
void SetStatus(json& response, const std::string& finish_reason) {
  if (finish_reason == "length" || finish_reason == "content_filter") {
    response["status"] = "incomplete";
    response["incomplete_details"] = {
        {"reason", finish_reason == "length" ? "max_output_tokens" : "content_filter"}};
  } else {
    response["status"] = "completed";
  }
}

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

}  // namespace

std::variant<ResponsesRequest, ApiError> ParseResponsesRequest(std::string_view body) {
  const json r = ParseJson(body);
  if (r.is_discarded()) return ApiError{400, "We could not parse the JSON body of your request.", "invalid_request_error", "", ""};
  try {
    return Translate(r);
  } catch (const Invalid& e) {
    return e.error;
  } catch (const json::exception& e) {  // an access not checked above: a clear error, never a crash
    return ApiError{400, std::string("the request could not be read: ") + e.what(), "invalid_request_error", "", ""};
  }
}

json ChatBodyFromResponses(const ResponsesRequest& request, const json& history) {
  json chat = request.chat;
  json messages = json::array();
  if (!request.instructions.empty()) messages.push_back({{"role", "system"}, {"content", request.instructions}});
  auto add = [&](const json& item) {
    const std::string type = item.value("type", std::string());
    if (type == "message") {
      const std::string role = item["role"].get<std::string>();
      messages.push_back({{"role", role == "developer" ? "system" : role}, {"content", ChatContent(item["content"])}});
    } else if (type == "function_call") {
      json call = {{"id", item["call_id"]},
                   {"type", "function"},
                   {"function", {{"name", item["name"]}, {"arguments", item["arguments"]}}}};
      // Calls after an assistant message (or after other calls) are that turn's.
      if (!messages.empty() && messages.back()["role"] == "assistant") {
        json& last = messages.back();
        if (!last.contains("tool_calls")) last["tool_calls"] = json::array();
        last["tool_calls"].push_back(std::move(call));
      } else {
        messages.push_back({{"role", "assistant"}, {"content", nullptr}, {"tool_calls", json::array({call})}});
      }
    } else if (type == "function_call_output") {
      const json& output = item["output"];
      messages.push_back({{"role", "tool"},
                          {"tool_call_id", item["call_id"]},
                          {"content", output.is_string() ? output : ChatContent(output)}});
    }
    // reasoning items: the model's own, not sent back
  };
  for (const json& item : history) add(item);
  for (const json& item : request.input_items) add(item);
  chat["messages"] = std::move(messages);
  return chat;
}

std::string NewResponseId() { return "resp_" + RandomHex(32); }

json ResponseSkeleton(const ResponsesRequest& request, const std::string& id, int64_t created_at) {
  json r = {{"id", id},
            {"object", "response"},
            {"created_at", created_at},
            {"status", "in_progress"},
            {"background", false},
            {"error", nullptr},
            {"incomplete_details", nullptr},
            {"model", request.model},
            {"output", json::array()},
            {"previous_response_id",
             request.previous_response_id.empty() ? json(nullptr) : json(request.previous_response_id)},
            {"usage", nullptr}};
  for (const auto& [k, v] : request.echo.items()) r[k] = v;
  return r;
}

std::variant<json, std::string> ResponseFromChat(std::string_view chat_body, json response,
                                                 const ResponsesUsage& usage, bool has_usage) {
  const json chat = ParseJson(chat_body);
  if (!chat.is_object()) return std::string("not a JSON object");
  const json& choices = Field(chat, "choices");
  if (!choices.is_array() || choices.empty() || !Field(choices[0], "message").is_object()) {
    return std::string("no choices[0].message");
  }
  const json& message = choices[0]["message"];
  if (response.value("model", "").empty() && Field(chat, "model").is_string()) response["model"] = chat["model"];
  json output = json::array();
  const json& reasoning = Field(message, "reasoning_content");
  if (reasoning.is_string() && !reasoning.get_ref<const std::string&>().empty()) {
    output.push_back({{"type", "reasoning"},
                      {"id", ItemId(response, "rs", output.size())},
                      {"summary", json::array()},
                      {"content", json::array({{{"type", "reasoning_text"}, {"text", reasoning}}})}});
  }
  const json& content = Field(message, "content");
  const json& calls = Field(message, "tool_calls");
  const bool has_calls = calls.is_array() && !calls.empty();
  if ((content.is_string() && !content.get_ref<const std::string&>().empty()) || !has_calls) {
    output.push_back({{"type", "message"},
                      {"id", ItemId(response, "msg", output.size())},
                      {"status", "completed"},
                      {"role", "assistant"},
                      {"content", json::array({OutputTextPart(content.is_string() ? content : json(""))})}});
  }
  for (const json& call : has_calls ? calls : json::array()) {
    const json& f = Field(call, "function");
    if (!f.is_object() || !Field(f, "name").is_string()) return std::string("a tool call without a function name");
    output.push_back({{"type", "function_call"},
                      {"id", ItemId(response, "fc", output.size())},
                      {"call_id", Field(call, "id").is_string() ? call["id"] : json("call_" + std::to_string(output.size()))},
                      {"name", f["name"]},
                      {"arguments", Field(f, "arguments").is_string() ? f["arguments"] : json("{}")},
                      {"status", "completed"}});
  }
  const json& finish = Field(choices[0], "finish_reason");
  if (finish == "length" && !output.empty()) output.back()["status"] = "incomplete";  // cut short
  response["output"] = std::move(output);
  SetStatus(response, finish.is_string() ? finish.get<std::string>() : "stop");
  response["usage"] = UsageJson(has_usage ? usage : UsageFromChat(Field(chat, "usage")));
  return response;
}

json FailedResponse(json response, const ApiError& error) {
  response["status"] = "failed";
  response["error"] = {{"code", error.code.empty() ? (error.http_status >= 500 ? "server_error" : error.type) : error.code},
                       {"message", error.message}};
  return response;
}

void ResponsesEventWriter::Emit(json event, std::string* out) {
  event["sequence_number"] = sequence_++;
  const std::string type = event["type"].get<std::string>();
  out->append("event: ").append(type).append("\ndata: ").append(Dump(event)).append("\n\n");
}

void ResponsesEventWriter::Start(std::string* out) {
  if (started_) return;
  started_ = true;
  Emit({{"type", "response.created"}, {"response", response_}}, out);
  Emit({{"type", "response.in_progress"}, {"response", response_}}, out);
}

void ResponsesEventWriter::Open(Item kind, json item, std::string* out) {
  Close(out);
  open_ = kind;
  text_.clear();
  item_ = std::move(item);
  const size_t index = response_["output"].size();
  Emit({{"type", "response.output_item.added"}, {"output_index", index}, {"item", item_}}, out);
  if (kind == Item::kMessage) {
    Emit({{"type", "response.content_part.added"},
          {"item_id", item_["id"]},
          {"output_index", index},
          {"content_index", 0},
          {"part", OutputTextPart("")}},
         out);
  }
}

void ResponsesEventWriter::Close(std::string* out) {
  if (open_ == Item::kNone) return;
  const size_t index = response_["output"].size();
  const json id = item_["id"];
  if (open_ == Item::kMessage) {
    const json part = OutputTextPart(text_);
    Emit({{"type", "response.output_text.done"}, {"item_id", id}, {"output_index", index}, {"content_index", 0},
          {"text", text_}, {"logprobs", json::array()}},
         out);
    Emit({{"type", "response.content_part.done"}, {"item_id", id}, {"output_index", index}, {"content_index", 0},
          {"part", part}},
         out);
    item_["content"] = json::array({part});
  } else if (open_ == Item::kFunctionCall) {
    Emit({{"type", "response.function_call_arguments.done"}, {"item_id", id}, {"output_index", index},
          {"name", item_["name"]}, {"arguments", text_}},
         out);
    item_["arguments"] = text_;
  } else {
    Emit({{"type", "response.reasoning_text.done"}, {"item_id", id}, {"output_index", index}, {"content_index", 0},
          {"text", text_}},
         out);
    item_["content"] = json::array({{{"type", "reasoning_text"}, {"text", text_}}});
  }
  if (open_ != Item::kReasoning) item_["status"] = item_status_;
  Emit({{"type", "response.output_item.done"}, {"output_index", index}, {"item", item_}}, out);
  response_["output"].push_back(std::move(item_));
  item_ = json();
  open_ = Item::kNone;
}

void ResponsesEventWriter::Chunk(std::string_view chunk, std::string* out) {
  Start(out);
  try {
    Translate(ParseJson(chunk), out);
  } catch (const json::exception&) {
    // a member of an unexpected type in an upstream's chunk: the rest of the stream is still framed
  }
}

void ResponsesEventWriter::Translate(const json& c, std::string* out) {
  if (Field(c, "usage").is_object()) {
    usage_ = UsageFromChat(c["usage"]);
    has_usage_ = true;
  }
  const json& choices = Field(c, "choices");
  if (!choices.is_array() || choices.empty() || !choices[0].is_object()) return;
  const json& delta = Field(choices[0], "delta");
  const size_t index = response_["output"].size();
  if (delta.is_object()) {
    const json& reasoning = Field(delta, "reasoning_content");
    if (reasoning.is_string() && !reasoning.get_ref<const std::string&>().empty()) {
      if (open_ != Item::kReasoning) {
        Open(Item::kReasoning, {{"type", "reasoning"}, {"id", ItemId(response_, "rs", index)}, {"summary", json::array()}},
             out);
      }
      text_ += reasoning.get<std::string>();
      Emit({{"type", "response.reasoning_text.delta"}, {"item_id", item_["id"]},
            {"output_index", response_["output"].size()}, {"content_index", 0}, {"delta", reasoning}},
           out);
    }
    const json& text = Field(delta, "content");
    if (text.is_string() && !text.get_ref<const std::string&>().empty()) {
      if (open_ != Item::kMessage) {
        Open(Item::kMessage,
             {{"type", "message"}, {"id", ItemId(response_, "msg", response_["output"].size())},
              {"status", "in_progress"}, {"role", "assistant"}, {"content", json::array()}},
             out);
      }
      text_ += text.get<std::string>();
      Emit({{"type", "response.output_text.delta"}, {"item_id", item_["id"]},
            {"output_index", response_["output"].size()}, {"content_index", 0}, {"delta", text},
            {"logprobs", json::array()}},
           out);
    }
    const json& calls = Field(delta, "tool_calls");
    for (const json& call : calls.is_array() ? calls : json::array()) {
      if (!call.is_object()) continue;
      const int tool = Field(call, "index").is_number_integer() ? call["index"].get<int>() : tool_index_;
      const json& f = Field(call, "function");
      if (open_ != Item::kFunctionCall || tool != tool_index_) {
        tool_index_ = tool;
        const size_t at = response_["output"].size() + (open_ == Item::kNone ? 0 : 1);
        Open(Item::kFunctionCall,
             {{"type", "function_call"},
              {"id", ItemId(response_, "fc", at)},
              {"call_id", Field(call, "id").is_string() ? call["id"] : json("call_" + std::to_string(at))},
              {"name", Field(f, "name").is_string() ? f["name"] : json("")},
              {"arguments", ""},
              {"status", "in_progress"}},
             out);
      }
      const json& args = Field(f, "arguments");
      if (args.is_string() && !args.get_ref<const std::string&>().empty()) {
        text_ += args.get<std::string>();
        Emit({{"type", "response.function_call_arguments.delta"}, {"item_id", item_["id"]},
              {"output_index", response_["output"].size()}, {"delta", args}},
             out);
      }
    }
  }
  const json& reason = Field(choices[0], "finish_reason");
  if (reason.is_string()) finish_reason_ = reason.get<std::string>();
}

void ResponsesEventWriter::End(const ResponsesUsage& usage, bool has_usage, std::string* out) {
  Start(out);
  if (open_ == Item::kNone && response_["output"].empty()) {  // an empty answer is one empty message
    Open(Item::kMessage,
         {{"type", "message"}, {"id", ItemId(response_, "msg", 0)}, {"status", "in_progress"},
          {"role", "assistant"}, {"content", json::array()}},
         out);
  }
  if (finish_reason_ == "length") item_status_ = "incomplete";  // the open item was cut short
  Close(out);
  SetStatus(response_, finish_reason_.empty() ? "stop" : finish_reason_);
  response_["usage"] = UsageJson(has_usage ? usage : usage_);
  const bool complete = response_["status"] == "completed";
  Emit({{"type", complete ? "response.completed" : "response.incomplete"}, {"response", response_}}, out);
}

void ResponsesEventWriter::Fail(const ApiError& error, std::string* out) {
  Start(out);
  Close(out);
  response_ = FailedResponse(std::move(response_), error);
  Emit({{"type", "response.failed"}, {"response", response_}}, out);
}

}  // namespace tachyon
