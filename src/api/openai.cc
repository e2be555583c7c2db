#include "api/openai.h"

#include "api/json_parse.h"

#include <nlohmann/json.hpp>

namespace tachyon {
namespace {

using json = nlohmann::json;

std::string Dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

ApiError Invalid(std::string message, std::string param) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), ""};
}

// Reads an optional number field within [lo, hi].
std::optional<ApiError> Number(const json& body, const char* key, double lo, double hi, float* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  if (!body[key].is_number()) return Invalid(std::string("'") + key + "' must be a number", key);
  double v = body[key].get<double>();
  if (v < lo || v > hi) {
    return Invalid(std::string("'") + key + "' must be between " + std::to_string(lo).substr(0, 4) + " and " +
                       std::to_string(hi).substr(0, 4),
                   key);
  }
  *out = static_cast<float>(v);
  return std::nullopt;
}

std::optional<ApiError> Bool(const json& body, const char* key, bool* out) {
  if (!body.contains(key) || body[key].is_null()) return std::nullopt;
  if (!body[key].is_boolean()) return Invalid(std::string("'") + key + "' must be a boolean", key);
  *out = body[key].get<bool>();
  return std::nullopt;
}

std::optional<ApiError> ParseMessages(const json& body, CompletionRequest* r) {
  if (!body.contains("messages")) return Invalid("'messages' is required", "messages");
  const json& messages = body["messages"];
  if (!messages.is_array() || messages.empty()) return Invalid("'messages' must be a non-empty array", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Invalid(where + " must be an object", where);
    if (!m.contains("role") || !m["role"].is_string()) return Invalid(where + ".role must be a string", where + ".role");
    ChatMessage message{m["role"].get<std::string>(), ""};
    if (m.contains("content") && !m["content"].is_null()) {
      const json& content = m["content"];
      if (content.is_string()) {
        message.content = content.get<std::string>();
      } else if (content.is_array()) {  // content parts: the text ones concatenated, the others noted
        for (size_t k = 0; k < content.size(); ++k) {
          const json& part = content[k];
          const std::string part_where = where + ".content[" + std::to_string(k) + "]";
          if (!part.is_object() || !part.contains("type") || !part["type"].is_string()) {
            return Invalid(part_where + " must be an object with a string 'type'", part_where);
          }
          if (part["type"].get_ref<const std::string&>() != "text") {
            r->has_non_text_parts = true;
            continue;
          }
          if (!part.contains("text") || !part["text"].is_string()) {
            return Invalid(part_where + ".text must be a string", part_where + ".text");
          }
          message.content += part["text"].get_ref<const std::string&>();
        }
      } else {
        return Invalid(where + ".content must be a string or an array of content parts", where + ".content");
      }
    } else if (message.role != "assistant") {
      // OpenAI's rule: only an assistant's message (one that calls tools) may leave content out.
      return Invalid(where + ".content is required for a " + message.role + " message", where + ".content");
    } else {
      message.content_null = true;
    }
    if (m.contains("tool_calls") && !m["tool_calls"].is_null()) {
      const json& calls = m["tool_calls"];
      if (!calls.is_array()) return Invalid(where + ".tool_calls must be an array", where + ".tool_calls");
      for (size_t k = 0; k < calls.size(); ++k) {
        const json& c = calls[k];
        const std::string cw = where + ".tool_calls[" + std::to_string(k) + "]";
        if (!c.is_object() || !c.contains("function") || !c["function"].is_object() ||
            !c["function"].contains("name") || !c["function"]["name"].is_string()) {
          return Invalid(cw + " must be {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}", cw);
        }
        ToolCall call{.name = c["function"]["name"].get<std::string>()};
        if (c.contains("id") && c["id"].is_string()) call.id = c["id"].get<std::string>();
        const json& args = c["function"].value("arguments", json("{}"));
        if (args.is_string()) {
          call.arguments = args.get<std::string>();
        } else if (args.is_object()) {
          call.arguments = Dump(args);
        } else {
          return Invalid(cw + ".function.arguments must be a JSON string", cw + ".function.arguments");
        }
        message.tool_calls.push_back(std::move(call));
      }
    }
    for (const char* key : {"tool_call_id", "name"}) {
      if (!m.contains(key) || m[key].is_null()) continue;
      if (!m[key].is_string()) return Invalid(where + "." + key + " must be a string", where + "." + key);
      (std::string(key) == "name" ? message.name : message.tool_call_id) = m[key].get<std::string>();
    }
    r->messages.push_back(std::move(message));
  }
  return std::nullopt;
}

// response_format's shape; the schema itself is the backend's to compile.
// `text`: the body as sent, for the schema with its properties in order.
std::optional<ApiError> ParseResponseFormat(const json& body, std::string_view text, CompletionRequest* r) {
  if (!body.contains("response_format") || body["response_format"].is_null()) return std::nullopt;
  const json& f = body["response_format"];
  if (!f.is_object() || !f.contains("type") || !f["type"].is_string()) {
    return Invalid("'response_format' must be an object with a string 'type'", "response_format");
  }
  const std::string& type = f["type"].get_ref<const std::string&>();
  ResponseFormat& out = r->response_format;
  if (type == "text") return std::nullopt;
  if (type == "json_object") {
    out.type = ResponseFormat::Type::kJsonObject;
    return std::nullopt;
  }
  if (type != "json_schema") {
    return Invalid("'response_format.type' must be text, json_object or json_schema", "response_format.type");
  }
  if (!f.contains("json_schema") || !f["json_schema"].is_object()) {
    return Invalid("'response_format.json_schema' must be an object", "response_format.json_schema");
  }
  const json& js = f["json_schema"];
  if (js.contains("name") && !js["name"].is_null()) {
    if (!js["name"].is_string()) return Invalid("'response_format.json_schema.name' must be a string", "response_format.json_schema.name");
    out.name = js["name"].get<std::string>();
  }
  if (auto e = Bool(js, "strict", &out.strict)) return *e;
  if (!js.contains("schema") || !(js["schema"].is_object() || js["schema"].is_boolean())) {
    return Invalid("'response_format.json_schema.schema' must be a JSON Schema object",
                   "response_format.json_schema.schema");
  }
  out.type = ResponseFormat::Type::kJsonSchema;
  // The body was read into sorted maps; read the schema again with its order.
  nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text, nullptr, false);
  if (ordered.is_object() && ordered.contains("response_format")) {
    out.schema = ordered["response_format"]["json_schema"]["schema"];
  } else {
    out.schema = nlohmann::ordered_json::parse(js["schema"].dump());
  }
  return std::nullopt;
}

// tools, tool_choice, parallel_tool_calls.
std::optional<ApiError> ParseTools(const json& body, std::string_view text, CompletionRequest* r) {
  const bool has_tools = body.contains("tools") && !body["tools"].is_null();
  if (has_tools) {
    const json& tools = body["tools"];
    if (!tools.is_array()) return Invalid("'tools' must be an array", "tools");
    if (tools.size() > 128) return Invalid("'tools' may hold at most 128 functions", "tools");
    for (size_t i = 0; i < tools.size(); ++i) {
      const json& t = tools[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object() || t.value("type", "") != "function" || !t.contains("function") || !t["function"].is_object()) {
        return Invalid(where + " must be {\"type\": \"function\", \"function\": {...}}", where);
      }
      const json& f = t["function"];
      if (!f.contains("name") || !f["name"].is_string() || f["name"].get_ref<const std::string&>().empty()) {
        return Invalid(where + ".function.name must be a non-empty string", where + ".function.name");
      }
      if (f.contains("parameters") && !f["parameters"].is_null() && !f["parameters"].is_object()) {
        return Invalid(where + ".function.parameters must be a JSON Schema object", where + ".function.parameters");
      }
    }
    // Read again with the order of keys kept (parameter schemas, the prompt's rendering).
    nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(text, nullptr, false);
    r->tools = ordered.is_object() && ordered.contains("tools") ? ordered["tools"]
                                                                : nlohmann::ordered_json::parse(tools.dump());
    r->tool_choice = tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  }
  if (auto e = Bool(body, "parallel_tool_calls", &r->parallel_tool_calls)) return *e;
  if (!body.contains("tool_choice") || body["tool_choice"].is_null()) return std::nullopt;
  const json& choice = body["tool_choice"];
  if (choice.is_string()) {
    const std::string& c = choice.get_ref<const std::string&>();
    if (c == "none") {
      r->tool_choice = ToolChoice::kNone;
    } else if (c == "auto" || c == "required") {
      if (r->tools.empty()) return Invalid("'tool_choice' " + c + " needs 'tools'", "tool_choice");
      r->tool_choice = c == "auto" ? ToolChoice::kAuto : ToolChoice::kRequired;
    } else {
      return Invalid("'tool_choice' must be none, auto, required or {\"type\": \"function\", ...}", "tool_choice");
    }
    return std::nullopt;
  }
  if (!choice.is_object() || !choice.contains("function") || !choice["function"].is_object() ||
      !choice["function"].contains("name") || !choice["function"]["name"].is_string()) {
    return Invalid("'tool_choice' must be none, auto, required or {\"type\": \"function\", \"function\": {\"name\"}}",
                   "tool_choice");
  }
  r->tool_choice_name = choice["function"]["name"].get<std::string>();
  for (const auto& t : r->tools) {
    if (t["function"]["name"] == r->tool_choice_name) {
      r->tool_choice = ToolChoice::kFunction;
      return std::nullopt;
    }
  }
  return Invalid("'tool_choice' names " + r->tool_choice_name + ", which is not in 'tools'", "tool_choice");
}

std::optional<ApiError> ParsePrompt(const json& body, CompletionRequest* r) {
  if (!body.contains("prompt")) return Invalid("'prompt' is required", "prompt");
  const json& prompt = body["prompt"];
  if (prompt.is_string()) {
    r->prompt = prompt.get<std::string>();
    return std::nullopt;
  }
  if (prompt.is_array() && prompt.size() == 1 && prompt[0].is_string()) {
    r->prompt = prompt[0].get<std::string>();
    return std::nullopt;
  }
  if (prompt.is_array() && !prompt.empty()) {
    for (const json& id : prompt) {
      if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > INT32_MAX) {
        return Invalid("'prompt' must be a string or an array of token ids", "prompt");
      }
      r->prompt_ids.push_back(TokenId(static_cast<int32_t>(id.get<int64_t>())));
    }
    r->prompt_is_ids = true;
    return std::nullopt;
  }
  return Invalid("'prompt' must be a string or a non-empty array of token ids (one prompt per request)", "prompt");
}

}  // namespace

std::string ErrorBody(const ApiError& e) {
  return Dump({{"error",
                {{"message", e.message},
                 {"type", e.type},
                 {"param", e.param.empty() ? json(nullptr) : json(e.param)},
                 {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}});
}

namespace {
std::variant<CompletionRequest, ApiError> ParseFields(json body, Endpoint endpoint, std::string_view text);
}  // namespace

std::string ErrorMessageOf(const std::string& body) {
  json j = ParseJson(body);
  if (j.is_object() && j.contains("error")) {
    const json& e = j["error"];
    if (e.is_object() && e.contains("message") && e["message"].is_string()) return e["message"].get<std::string>();
    if (e.is_string()) return e.get<std::string>();
  }
  return body.substr(0, 300);
}

ApiError TooDeepError() {
  return ApiError{400,
                  "the request body nests arrays and objects more than " + std::to_string(kMaxJsonDepth) +
                      " levels deep, the most this server reads",
                  "invalid_request_error", "", "json_too_deep"};
}

std::variant<CompletionRequest, ApiError> ParseCompletionRequest(std::string_view text, Endpoint endpoint) {
  bool repeated_keys = true;
  json body = ParseJson(text, &repeated_keys);  // scans the depth once; refused past the bound
  if (body.is_discarded() && JsonNestsDeeperThan(text)) return TooDeepError();  // which refusal: the error path only
  // Every read below checks the type first; this is the net under them, so that
  // no request can make the parser throw past its caller.
  try {
    std::variant<CompletionRequest, ApiError> parsed = ParseFields(std::move(body), endpoint, text);
    if (auto* r = std::get_if<CompletionRequest>(&parsed); r != nullptr && !repeated_keys) r->raw_body = text;
    return parsed;
  } catch (const json::exception& e) {
    return Invalid(std::string("the request body has a field of an unexpected type: ") + e.what(), "");
  }
}

namespace {

std::variant<CompletionRequest, ApiError> ParseFields(json body, Endpoint endpoint, std::string_view text) {
  if (body.is_discarded()) return Invalid("the request body is not valid JSON", "");
  if (!body.is_object()) return Invalid("the request body must be a JSON object", "");
  CompletionRequest r;
  r.endpoint = endpoint;
  if (body.contains("model") && !body["model"].is_null()) {
    if (!body["model"].is_string()) return Invalid("'model' must be a string", "model");
    r.model = body["model"].get<std::string>();
  }
  if (auto e = endpoint == Endpoint::kChatCompletions ? ParseMessages(body, &r) : ParsePrompt(body, &r)) return *e;
  for (const char* key : {"max_tokens", "max_completion_tokens"}) {
    if (!body.contains(key) || body[key].is_null()) continue;
    if (!body[key].is_number_integer() || body[key].get<int64_t>() < 1) {
      return Invalid(std::string("'") + key + "' must be an integer >= 1", key);
    }
    r.max_tokens = body[key].get<int64_t>();
  }
  if (auto e = Number(body, "temperature", 0.0, 2.0, &r.sampling.temperature)) return *e;
  if (auto e = Number(body, "top_p", 0.0, 1.0, &r.sampling.top_p)) return *e;
  if (auto e = Number(body, "presence_penalty", -2.0, 2.0, &r.sampling.presence_penalty)) return *e;
  if (auto e = Number(body, "frequency_penalty", -2.0, 2.0, &r.sampling.frequency_penalty)) return *e;
  if (auto e = Number(body, "repetition_penalty", 0.01, 100.0, &r.sampling.repetition_penalty)) return *e;
  if (auto e = Number(body, "min_p", 0.0, 1.0, &r.sampling.min_p)) return *e;
  if (body.contains("top_k") && !body["top_k"].is_null()) {
    if (!body["top_k"].is_number_integer() || body["top_k"].get<int64_t>() < -1 ||
        body["top_k"].get<int64_t>() > INT32_MAX) {
      return Invalid("'top_k' must be an integer >= -1 (-1 or 0: off)", "top_k");
    }
    r.sampling.top_k = std::max<int>(0, static_cast<int>(body["top_k"].get<int64_t>()));
  }
  if (body.contains("seed") && !body["seed"].is_null()) {
    if (!body["seed"].is_number_integer()) return Invalid("'seed' must be an integer", "seed");
    r.sampling.seed = static_cast<uint64_t>(body["seed"].get<int64_t>());
  }
  if (body.contains("stop") && !body["stop"].is_null()) {
    const json& stop = body["stop"];
    // A stop string is held back from a stream until it cannot match: a long one would hold back everything.
    auto add = [&](const std::string& s) -> std::optional<ApiError> {
      if (s.empty() || s.size() > kMaxStopBytes) {
        return Invalid("each stop string must have 1 to " + std::to_string(kMaxStopBytes) + " bytes", "stop");
      }
      r.stop.push_back(s);
      return std::nullopt;
    };
    if (stop.is_string()) {
      if (auto e = add(stop.get<std::string>())) return *e;
    } else if (stop.is_array() && stop.size() <= 4) {
      for (const json& s : stop) {
        if (!s.is_string()) return Invalid("'stop' must be a string or an array of up to 4 strings", "stop");
        if (auto e = add(s.get<std::string>())) return *e;
      }
    } else {
      return Invalid("'stop' must be a string or an array of up to 4 strings", "stop");
    }
  }
  if (body.contains("n") && !body["n"].is_null()) {
    if (!body["n"].is_number_integer() || body["n"].get<int64_t>() < 1 || body["n"].get<int64_t>() > 128) {
      return Invalid("'n' must be an integer from 1 to 128", "n");
    }
    r.n = body["n"].get<int>();
  }
  if (auto e = Bool(body, "stream", &r.stream)) return *e;
  if (auto e = Bool(body, "ignore_eos", &r.ignore_eos)) return *e;
  if (auto e = Bool(body, "speculative", &r.speculative)) return *e;
  if (body.contains("stream_options") && !body["stream_options"].is_null()) {
    if (!body["stream_options"].is_object()) return Invalid("'stream_options' must be an object", "stream_options");
    if (auto e = Bool(body["stream_options"], "include_usage", &r.include_usage)) return *e;
  }
  if (endpoint == Endpoint::kChatCompletions) {
    bool logprobs = false;
    if (auto e = Bool(body, "logprobs", &logprobs)) return *e;
    int top = 0;
    if (body.contains("top_logprobs") && !body["top_logprobs"].is_null()) {
      if (!body["top_logprobs"].is_number_integer() || body["top_logprobs"].get<int64_t>() < 0 ||
          body["top_logprobs"].get<int64_t>() > 20) {
        return Invalid("'top_logprobs' must be an integer from 0 to 20", "top_logprobs");
      }
      if (!logprobs) return Invalid("'top_logprobs' needs 'logprobs': true", "top_logprobs");
      top = body["top_logprobs"].get<int>();
    }
    if (logprobs) r.num_logprobs = top;
  } else if (body.contains("logprobs") && !body["logprobs"].is_null()) {
    if (!body["logprobs"].is_number_integer() || body["logprobs"].get<int64_t>() < 0 ||
        body["logprobs"].get<int64_t>() > 20) {
      return Invalid("'logprobs' must be an integer from 0 to 20", "logprobs");
    }
    r.num_logprobs = body["logprobs"].get<int>();
  }
  if (auto e = ParseResponseFormat(body, text, &r)) return *e;
  if (auto e = ParseTools(body, text, &r)) return *e;
  if (body.contains("user") && body["user"].is_string()) r.user = body["user"].get<std::string>();
  r.body = std::move(body);
  return r;
}

json UsageJson(const Usage& u) {
  json out = {{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens}};
  if (u.cached_tokens >= 0) out["prompt_tokens_details"] = {{"cached_tokens", u.cached_tokens}};
  return out;
}

json Reason(const std::string& finish_reason) {
  return finish_reason.empty() ? json(nullptr) : json(finish_reason);
}

json Bytes(const std::string& s) {
  json out = json::array();
  for (unsigned char c : s) out.push_back(static_cast<int>(c));
  return out;
}

// Chat: {"content": [{token, logprob, bytes, top_logprobs}]}; completions:
// {tokens, token_logprobs, top_logprobs, text_offset}.
json LogprobsJson(Endpoint endpoint, const std::vector<LogprobEntry>* entries, int64_t text_offset) {
  if (entries == nullptr) return nullptr;
  if (endpoint == Endpoint::kChatCompletions) {
    json content = json::array();
    for (const LogprobEntry& e : *entries) {
      json top = json::array();
      for (const auto& [token, lp] : e.top) top.push_back({{"token", token}, {"logprob", lp}, {"bytes", Bytes(token)}});
      content.push_back({{"token", e.token}, {"logprob", e.logprob}, {"bytes", Bytes(e.token)}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), token_logprobs = json::array(), top_logprobs = json::array(), offsets = json::array();
  for (const LogprobEntry& e : *entries) {
    tokens.push_back(e.token);
    token_logprobs.push_back(e.logprob);
    json top = json::object();
    for (const auto& [token, lp] : e.top) top[token] = lp;
    top_logprobs.push_back(top);
    offsets.push_back(text_offset);
    text_offset += static_cast<int64_t>(e.token.size());
  }
  return {{"tokens", tokens}, {"token_logprobs", token_logprobs}, {"top_logprobs", top_logprobs},
          {"text_offset", offsets}};
}

}  // namespace

namespace {

json ToolCallsJson(const std::vector<ToolCall>& calls, int first_index, bool with_index) {
  json out = json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    json c = {{"id", calls[i].id},
              {"type", "function"},
              {"function", {{"name", calls[i].name}, {"arguments", calls[i].arguments}}}};
    if (with_index) c["index"] = first_index + static_cast<int>(i);
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace

std::optional<std::string> PlainAnswerText(const nlohmann::json& body, Endpoint endpoint) {
  if (!body.is_object() || !body.contains("choices") || !body["choices"].is_array() || body["choices"].size() != 1 ||
      !body["choices"][0].is_object()) {
    return std::nullopt;
  }
  const nlohmann::json& choice = body["choices"][0];
  const nlohmann::json* text = nullptr;
  if (endpoint == Endpoint::kChatCompletions) {
    if (!choice.contains("message") || !choice["message"].is_object()) return std::nullopt;
    const nlohmann::json& message = choice["message"];
    for (const char* calls : {"tool_calls", "function_call"}) {
      if (message.contains(calls) && !message[calls].is_null()) return std::nullopt;
    }
    if (message.contains("content")) text = &message["content"];
  } else if (choice.contains("text")) {
    text = &choice["text"];
  }
  if (text == nullptr || !text->is_string()) return std::nullopt;
  return text->get<std::string>();
}

std::string CompletionBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const std::string& text, const std::string& reason, const Usage& usage,
                           const std::vector<LogprobEntry>* logprobs, const std::vector<ToolCall>* tool_calls) {
  json choice = {{"index", 0}, {"logprobs", LogprobsJson(endpoint, logprobs, 0)}, {"finish_reason", Reason(reason)}};
  json out = {{"id", id}, {"created", created}, {"model", model}};
  if (endpoint == Endpoint::kChatCompletions) {
    choice["message"] = {{"role", "assistant"}, {"content", text}};
    if (tool_calls != nullptr && !tool_calls->empty()) {
      if (text.empty()) choice["message"]["content"] = nullptr;
      choice["message"]["tool_calls"] = ToolCallsJson(*tool_calls, 0, false);
    }
    out["object"] = "chat.completion";
  } else {
    choice["text"] = text;
    out["object"] = "text_completion";
  }
  out["choices"] = json::array({choice});
  out["usage"] = UsageJson(usage);
  return Dump(out);
}

std::string ChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                      const std::string& text, const std::string& reason, bool first,
                      const std::vector<LogprobEntry>* logprobs, int64_t text_offset,
                      const std::vector<ToolCall>* tool_calls, int first_call_index) {
  json choice = {{"index", 0},
                 {"logprobs", LogprobsJson(endpoint, logprobs, text_offset)},
                 {"finish_reason", Reason(reason)}};
  json out = {{"id", id}, {"created", created}, {"model", model}};
  if (endpoint == Endpoint::kChatCompletions) {
    json delta = json::object();
    if (first) delta["role"] = "assistant";
    const bool calls = tool_calls != nullptr && !tool_calls->empty();
    if (!text.empty() || (reason.empty() && !calls)) delta["content"] = text;
    if (calls) delta["tool_calls"] = ToolCallsJson(*tool_calls, first_call_index, true);
    choice["delta"] = delta;
    out["object"] = "chat.completion.chunk";
  } else {
    choice["text"] = text;
    out["object"] = "text_completion";
  }
  out["choices"] = json::array({choice});
  return Dump(out);
}

std::string UsageChunkBody(Endpoint endpoint, const std::string& id, int64_t created, const std::string& model,
                           const Usage& usage) {
  json out = {{"id", id},
              {"object", endpoint == Endpoint::kChatCompletions ? "chat.completion.chunk" : "text_completion"},
              {"created", created},
              {"model", model},
              {"choices", json::array()},
              {"usage", UsageJson(usage)}};
  return Dump(out);
}

std::string SseEvent(const std::string& json_text) { return "data: " + json_text + "\n\n"; }

}  // namespace tachyon
