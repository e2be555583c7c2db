#include "api/anthropic.h"

#include <algorithm>
#include <set>

#include "api/json_parse.h"

namespace tachyon {
namespace {

using json = nlohmann::json;
using ojson = nlohmann::ordered_json;

ApiError Refuse(std::string message, std::string param) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), "unsupported_by_backend"};
}

ApiError NoEquivalent(const std::string& field) {
  return Refuse("'" + field + "' has no equivalent in Anthropic's Messages API: remove it for this route", field);
}

// The chat request's fields and what becomes of them: translated, or accepted
// only at the value that means "off" (checked in CheckUntranslatable).
const std::set<std::string, std::less<>> kTranslated = {
    "model",  "messages", "max_tokens", "max_completion_tokens", "temperature", "top_p",
    "top_k",  "stop",     "stream",     "stream_options",        "user",        "tools",
    "tool_choice", "parallel_tool_calls",
    "speculative",  // Tachyon's engine hint: nothing to send to a hosted API
};

std::optional<ApiError> CheckUntranslatable(const json& body) {
  for (const auto& [key, value] : body.items()) {
    if (kTranslated.count(key) || value.is_null()) continue;
    const bool off = (key == "n" && value == 1) || (key == "logprobs" && value == false) ||
                     ((key == "presence_penalty" || key == "frequency_penalty") && value.is_number() &&
                      value.get<double>() == 0) ||
                     (key == "response_format" && value.is_object() && StringField(value, "type") == "text") ||
                     (key == "store" && value == false);
    if (!off) return NoEquivalent(key);
  }
  return std::nullopt;
}

// {"type": "text", "text"} blocks of a content that is a string or text parts.
std::variant<std::vector<json>, ApiError> TextBlocks(const json& content, const std::string& where) {
  std::vector<json> blocks;
  if (content.is_string()) {
    if (!content.get_ref<const std::string&>().empty()) blocks.push_back({{"type", "text"}, {"text", content}});
    return blocks;
  }
  if (!content.is_array()) return Refuse(where + " must be a string or an array of parts", where);
  for (size_t i = 0; i < content.size(); ++i) {
    const json& part = content[i];
    if (!part.is_object() || StringField(part, "type") != "text" || !part.contains("text") || !part["text"].is_string()) {
      return Refuse(where + "[" + std::to_string(i) + "]: only text parts can be sent here", where);
    }
    if (part["text"].get_ref<const std::string&>().empty()) continue;
    json block = {{"type", "text"}, {"text", part["text"]}};
    // The client's own breakpoint (as Anthropic-aware OpenAI clients send it) is kept.
    if (part.contains("cache_control") && part["cache_control"].is_object()) block["cache_control"] = part["cache_control"];
    blocks.push_back(std::move(block));
  }
  return blocks;
}

// An image_url part: a data: URL becomes a base64 source, http(s) a url source.
std::variant<json, ApiError> ImageBlock(const json& part, const std::string& where) {
  if (!part.contains("image_url") || !part["image_url"].is_object() || !part["image_url"].contains("url") ||
      !part["image_url"]["url"].is_string()) {
    return Refuse(where + ".image_url.url must be a string", where);
  }
  const std::string& url = part["image_url"]["url"].get_ref<const std::string&>();
  if (url.rfind("data:", 0) == 0) {
    const size_t semicolon = url.find(";base64,");
    if (semicolon == std::string::npos) return Refuse(where + ": a data URL must be base64 (data:TYPE;base64,...)", where);
    return json{{"type", "image"},
                {"source", {{"type", "base64"}, {"media_type", url.substr(5, semicolon - 5)},
                            {"data", url.substr(semicolon + 8)}}}};
  }
  if (url.rfind("https://", 0) == 0 || url.rfind("http://", 0) == 0) {
    return json{{"type", "image"}, {"source", {{"type", "url"}, {"url", url}}}};
  }
  return Refuse(where + ": an image URL must be https://, http:// or a base64 data URL", where);
}

// A user message's content: text and image parts.
std::variant<std::vector<json>, ApiError> UserBlocks(const json& content, const std::string& where) {
  if (!content.is_array()) return TextBlocks(content, where);
  std::vector<json> blocks;
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string at = where + "[" + std::to_string(i) + "]";
    const json& part = content[i];
    const std::string type = part.is_object() ? StringField(part, "type") : "";
    if (type == "text") {
      auto text = TextBlocks(json::array({part}), where);
      if (auto* e = std::get_if<ApiError>(&text)) return *e;
      for (json& b : std::get<std::vector<json>>(text)) blocks.push_back(std::move(b));
    } else if (type == "image_url") {
      auto image = ImageBlock(part, at);
      if (auto* e = std::get_if<ApiError>(&image)) return *e;
      blocks.push_back(std::move(std::get<json>(image)));
    } else {
      return Refuse(at + ": a '" + type + "' part has no equivalent in Anthropic's Messages API", at);
    }
  }
  return blocks;
}

// An assistant message: its text, then its tool calls as tool_use blocks.
std::variant<std::vector<json>, ApiError> AssistantBlocks(const json& m, const std::string& where) {
  std::vector<json> blocks;
  if (m.contains("content") && !m["content"].is_null()) {
    auto text = TextBlocks(m["content"], where + ".content");
    if (auto* e = std::get_if<ApiError>(&text)) return *e;
    blocks = std::move(std::get<std::vector<json>>(text));
  }
  if (!m.contains("tool_calls") || m["tool_calls"].is_null()) return blocks;
  const json& calls = m["tool_calls"];
  if (!calls.is_array()) return Refuse(where + ".tool_calls must be an array", where + ".tool_calls");
  for (size_t i = 0; i < calls.size(); ++i) {
    const std::string at = where + ".tool_calls[" + std::to_string(i) + "]";
    const json& c = calls[i];
    if (!c.is_object() || !c.contains("id") || !c["id"].is_string() || !c.contains("function") ||
        !c["function"].is_object() || !c["function"].contains("name") || !c["function"]["name"].is_string()) {
      return Refuse(at + " needs an id and a function name", at);
    }
    json input = json::object();
    if (c["function"].contains("arguments") && c["function"]["arguments"].is_string() &&
        !c["function"]["arguments"].get_ref<const std::string&>().empty()) {
      input = ParseJson(c["function"]["arguments"].get_ref<const std::string&>());
      if (!input.is_object()) return Refuse(at + ".function.arguments must be a JSON object", at + ".function.arguments");
    }
    blocks.push_back({{"type", "tool_use"}, {"id", c["id"]}, {"name", c["function"]["name"]}, {"input", input}});
  }
  return blocks;
}

// messages and system of the Messages request, same-role turns merged.
std::optional<ApiError> TranslateMessages(const json& messages, json* out) {
  json system = json::array();
  json turns = json::array();
  std::set<std::string> open_calls;  // tool_use ids not yet answered
  if (!messages.is_array()) return Refuse("'messages' must be an array", "messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string where = "messages[" + std::to_string(i) + "]";
    const json& m = messages[i];
    const std::string role = m.is_object() ? StringField(m, "role") : "";
    std::variant<std::vector<json>, ApiError> blocks;
    std::string anthropic_role;
    if (role == "system" || role == "developer") {
      auto text = TextBlocks(m.contains("content") ? m["content"] : json(), where + ".content");
      if (auto* e = std::get_if<ApiError>(&text)) return *e;
      for (json& b : std::get<std::vector<json>>(text)) system.push_back(std::move(b));
      continue;
    } else if (role == "user") {
      anthropic_role = "user";
      blocks = UserBlocks(m.contains("content") ? m["content"] : json(), where + ".content");
    } else if (role == "assistant") {
      anthropic_role = "assistant";
      blocks = AssistantBlocks(m, where);
    } else if (role == "tool") {
      anthropic_role = "user";
      if (!m.contains("tool_call_id") || !m["tool_call_id"].is_string()) {
        return Refuse(where + ".tool_call_id must be a string", where + ".tool_call_id");
      }
      const std::string& id = m["tool_call_id"].get_ref<const std::string&>();
      if (!open_calls.erase(id)) {
        return Refuse(where + ": tool_call_id '" + id + "' answers no tool call of the assistant turn before it",
                      where + ".tool_call_id");
      }
      auto text = TextBlocks(m.contains("content") ? m["content"] : json(""), where + ".content");
      if (auto* e = std::get_if<ApiError>(&text)) return *e;
      json result = {{"type", "tool_result"}, {"tool_use_id", id}};
      std::vector<json>& parts = std::get<std::vector<json>>(text);
      if (!parts.empty()) result["content"] = parts;
      blocks = std::vector<json>{std::move(result)};
    } else {
      return Refuse(where + ": the role '" + role + "' has no equivalent in Anthropic's Messages API", where + ".role");
    }
    if (auto* e = std::get_if<ApiError>(&blocks)) return *e;
    std::vector<json>& b = std::get<std::vector<json>>(blocks);
    if (anthropic_role == "assistant") {
      open_calls.clear();
      for (const json& block : b) {
        if (block["type"] == "tool_use") open_calls.insert(block["id"].get<std::string>());
      }
    }
    if (b.empty()) continue;  // nothing to say (an empty string)
    if (!turns.empty() && turns.back()["role"] == anthropic_role) {
      for (json& block : b) turns.back()["content"].push_back(std::move(block));
    } else {
      turns.push_back({{"role", anthropic_role}, {"content", std::move(b)}});
    }
  }
  if (turns.empty()) return Refuse("'messages' has no user or assistant content to send", "messages");
  (*out)["messages"] = std::move(turns);
  if (!system.empty()) (*out)["system"] = std::move(system);
  return std::nullopt;
}

std::optional<ApiError> TranslateTools(const CompletionRequest& r, json* out) {
  if (r.tools.empty()) return std::nullopt;
  json tools = json::array();
  for (const auto& t : r.tools) {
    const auto& f = t["function"];
    json tool = {{"name", f["name"].get<std::string>()}};
    if (f.contains("description") && f["description"].is_string()) {
      tool["description"] = f["description"].get<std::string>();
    }
    tool["input_schema"] = f.contains("parameters") && f["parameters"].is_object()
                               ? json::parse(f["parameters"].dump())
                               : json{{"type", "object"}, {"properties", json::object()}};
    // A breakpoint the client put on the tool (the /v1/messages front door carries them here) stays.
    if (t.contains("cache_control") && t["cache_control"].is_object()) tool["cache_control"] = json::parse(t["cache_control"].dump());
    tools.push_back(std::move(tool));
  }
  (*out)["tools"] = std::move(tools);
  json choice;
  switch (r.tool_choice) {
    case ToolChoice::kNone: choice = {{"type", "none"}}; break;
    case ToolChoice::kAuto: choice = {{"type", "auto"}}; break;
    case ToolChoice::kRequired: choice = {{"type", "any"}}; break;
    case ToolChoice::kFunction: choice = {{"type", "tool"}, {"name", r.tool_choice_name}}; break;
  }
  if (!r.parallel_tool_calls && r.tool_choice != ToolChoice::kNone) choice["disable_parallel_tool_use"] = true;
  (*out)["tool_choice"] = std::move(choice);
  return std::nullopt;
}

// A lone text block without a breakpoint is sent as the plain string it was.
void CollapseLoneText(json* out) {
  for (json& turn : (*out)["messages"]) {
    const json& c = turn["content"];
    if (c.size() == 1 && c[0]["type"] == "text" && !c[0].contains("cache_control")) turn["content"] = json(c[0]["text"]);
  }
}

size_t Bytes(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace).size(); }

}  // namespace

int PlaceCacheBreakpoints(json* request, const PromptCacheOptions& options) {
  if (!options.automatic) return 0;
  json& r = *request;
  // The client's own breakpoints count against Anthropic's four, and always stay.
  int used = 0;
  auto count = [&](const json& blocks) {
    if (!blocks.is_array()) return;
    for (const json& b : blocks) used += b.is_object() && b.contains("cache_control");
  };
  if (r.contains("tools")) count(r["tools"]);
  if (r.contains("system")) count(r["system"]);
  for (const json& m : r["messages"]) count(m["content"]);
  // Candidates with the bytes of the prefix they end, latest first: the history
  // before the newest user turn, the system prompt, the tools.
  size_t tools = 0, system = 0;
  if (r.contains("tools")) tools = Bytes(r["tools"]);
  if (r.contains("system")) system = Bytes(r["system"]);
  std::vector<std::pair<json*, size_t>> candidates;
  json& messages = r["messages"];
  size_t newest_user = messages.size();
  for (size_t i = messages.size(); i-- > 0;) {
    if (messages[i]["role"] == "user") {
      newest_user = i;
      break;
    }
  }
  if (newest_user != messages.size() && newest_user > 0) {
    size_t history = 0;
    for (size_t i = 0; i < newest_user; ++i) history += Bytes(messages[i]["content"]);
    json& last = messages[newest_user - 1]["content"];
    if (last.is_array() && !last.empty()) candidates.emplace_back(&last.back(), tools + system + history);
  }
  if (r.contains("system") && r["system"].is_array() && !r["system"].empty()) {
    candidates.emplace_back(&r["system"].back(), tools + system);
  }
  if (r.contains("tools") && !r["tools"].empty()) candidates.emplace_back(&r["tools"].back(), tools);
  json mark = {{"type", "ephemeral"}};
  if (options.long_ttl) mark["ttl"] = "1h";
  int placed = 0;
  for (auto& [block, bytes] : candidates) {
    if (used + placed >= 4) break;
    if (block->contains("cache_control") || LowTokenEstimate(bytes) < options.min_tokens) continue;
    (*block)["cache_control"] = mark;
    ++placed;
  }
  return placed;
}

namespace {

std::variant<json, ApiError> TranslateRequest(const CompletionRequest& r, const MessagesRequestOptions& options) {
  if (r.endpoint != Endpoint::kChatCompletions) {
    return Refuse("an Anthropic backend serves chat completions only (/v1/chat/completions)", "");
  }
  if (auto e = CheckUntranslatable(r.body)) return *e;
  json out = json::object();
  out["model"] = options.model.empty() ? r.model : options.model;
  if (auto e = TranslateMessages(r.body["messages"], &out)) return *e;
  out["max_tokens"] = r.max_tokens ? *r.max_tokens : options.default_max_tokens;
  if (r.body.contains("temperature") && !r.body["temperature"].is_null()) {
    const double t = r.sampling.temperature;
    if (t < 0 || t > 1) {
      return Refuse("temperature " + r.body["temperature"].dump() +
                        " is outside Anthropic's range [0, 1] (OpenAI's goes to 2): send a value in [0, 1]",
                    "temperature");
    }
    out["temperature"] = r.body["temperature"];
  }
  if (r.body.contains("top_p") && !r.body["top_p"].is_null()) out["top_p"] = r.body["top_p"];
  if (r.body.contains("top_k") && !r.body["top_k"].is_null()) out["top_k"] = r.body["top_k"];
  if (!r.stop.empty()) out["stop_sequences"] = r.stop;
  if (!r.user.empty()) out["metadata"] = {{"user_id", r.user}};
  if (r.stream) out["stream"] = true;
  if (auto e = TranslateTools(r, &out)) return *e;
  PlaceCacheBreakpoints(&out, options.prompt_cache);
  CollapseLoneText(&out);
  return out;
}

}  // namespace

// The public entry points below also catch nlohmann's type errors: every access
// is checked, and one that is not is a clear error, never a crash.
std::variant<json, ApiError> MessagesRequestFromChat(const CompletionRequest& r, const MessagesRequestOptions& options) {
  try {
    return TranslateRequest(r, options);
  } catch (const json::exception& e) {
    return Refuse(std::string("the request could not be translated: ") + e.what(), "");
  }
}

std::string FinishReasonFromStopReason(std::string_view stop_reason) {
  if (stop_reason == "max_tokens" || stop_reason == "model_context_window_exceeded") return "length";
  if (stop_reason == "tool_use") return "tool_calls";
  if (stop_reason == "refusal") return "content_filter";
  return "stop";  // end_turn, stop_sequence, pause_turn, and any newer reason
}

namespace {

void ReadUsage(const json& u, MessagesUsage* usage) {
  if (!u.is_object()) return;
  auto get = [&](const char* key, int64_t* into) {
    // A count below zero is an upstream's mistake, not a refund.
    if (u.contains(key) && u[key].is_number_integer()) *into = std::max<int64_t>(0, u[key].get<int64_t>());
  };
  get("input_tokens", &usage->input_tokens);
  get("output_tokens", &usage->output_tokens);
  get("cache_read_input_tokens", &usage->cache_read_tokens);
  get("cache_creation_input_tokens", &usage->cache_write_tokens);
}

ojson UsageJson(const MessagesUsage& u) {
  return ojson{{"prompt_tokens", u.prompt_tokens()},
               {"completion_tokens", u.output_tokens},
               {"total_tokens", u.prompt_tokens() + u.output_tokens},
               {"prompt_tokens_details", {{"cached_tokens", u.cache_read_tokens}}}};
}

// A block event's `index`, when it is a non-negative integer.
std::optional<size_t> BlockIndex(const json& event) {
  if (!event.contains("index") || !event["index"].is_number_integer() || event["index"].get<int64_t>() < 0) {
    return std::nullopt;
  }
  return event["index"].get<size_t>();
}

std::string Dump(const ojson& j) { return j.dump(-1, ' ', false, ojson::error_handler_t::replace); }

}  // namespace

namespace {

std::variant<TranslatedAnswer, std::string> TranslateAnswer(std::string_view body, const std::string& id,
                                                            int64_t created, const std::string& model) {
  const json m = ParseJson(body);
  if (!m.is_object() || StringField(m, "type") != "message" || !m.contains("content") || !m["content"].is_array()) {
    return std::string("the answer is not a Messages API message");
  }
  TranslatedAnswer answer;
  std::string text, reasoning;
  ojson calls = ojson::array();
  for (const json& block : m["content"]) {
    const std::string type = block.is_object() ? StringField(block, "type") : "";
    if (type == "text" && block.contains("text") && block["text"].is_string()) {
      text += block["text"].get<std::string>();
    } else if (type == "thinking" && block.contains("thinking") && block["thinking"].is_string()) {
      reasoning += block["thinking"].get<std::string>();
    } else if (type == "redacted_thinking") {
      // encrypted reasoning: nothing a client can read
    } else if (type == "tool_use" && block.contains("id") && block["id"].is_string() && block.contains("name") &&
               block["name"].is_string()) {
      calls.push_back({{"id", block["id"].get<std::string>()},
                       {"type", "function"},
                       {"function", {{"name", block["name"].get<std::string>()},
                                     {"arguments", block.contains("input") ? block["input"].dump() : "{}"}}}});
    } else {
      return "a content block of type '" + type + "' that the gateway cannot translate";
    }
  }
  ReadUsage(m.contains("usage") ? m["usage"] : json(), &answer.usage);
  const json& stop = m.contains("stop_reason") ? m["stop_reason"] : json();
  answer.finish_reason = FinishReasonFromStopReason(stop.is_string() ? stop.get<std::string>() : "end_turn");
  const bool has_calls = !calls.empty();
  ojson message = {{"role", "assistant"}, {"content", text.empty() && has_calls ? ojson() : ojson(text)}};
  if (!reasoning.empty()) message["reasoning_content"] = reasoning;
  if (has_calls) message["tool_calls"] = std::move(calls);
  if (!has_calls) answer.text = text;
  const ojson out = {{"id", id},
                     {"object", "chat.completion"},
                     {"created", created},
                     {"model", model},
                     {"choices", ojson::array({{{"index", 0},
                                               {"message", std::move(message)},
                                               {"logprobs", nullptr},
                                               {"finish_reason", answer.finish_reason}}})},
                     {"usage", UsageJson(answer.usage)}};
  answer.body = Dump(out);
  return answer;
}

}  // namespace

std::variant<TranslatedAnswer, std::string> ChatAnswerFromMessages(std::string_view body, const std::string& id,
                                                                   int64_t created, const std::string& model) {
  try {
    return TranslateAnswer(body, id, created, model);
  } catch (const json::exception& e) {
    return std::string("the answer could not be read: ") + e.what();
  }
}

ApiError ApiErrorFromMessagesError(int http_status, const std::string& body) {
  const json j = ParseJson(body);
  ApiError e{http_status, "", "upstream_error", "", ""};
  if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    const json& err = j["error"];
    if (err.contains("message") && err["message"].is_string()) e.message = err["message"].get<std::string>();
    if (err.contains("type") && err["type"].is_string()) e.type = err["type"].get<std::string>();
  }
  if (e.message.empty()) e.message = ErrorMessageOf(body);
  if (e.type == "invalid_request_error" || e.type == "not_found_error" || e.type == "request_too_large") {
    e.type = "invalid_request_error";
  }
  return e;
}

MessagesStreamTranslator::MessagesStreamTranslator(std::string id, int64_t created, std::string model,
                                                   bool include_usage)
    : id_(std::move(id)), model_(std::move(model)), created_(created), include_usage_(include_usage) {}

MessagesStreamTranslator::Chunk MessagesStreamTranslator::Make(ojson delta, std::string finish_reason) {
  if (!role_sent_) {
    ojson with_role = {{"role", "assistant"}};
    for (auto& [k, v] : delta.items()) with_role[k] = v;
    delta = std::move(with_role);
    role_sent_ = true;
  }
  const ojson chunk = {{"id", id_},
                       {"object", "chat.completion.chunk"},
                       {"created", created_},
                       {"model", model_},
                       {"choices", ojson::array({{{"index", 0},
                                                 {"delta", std::move(delta)},
                                                 {"logprobs", nullptr},
                                                 {"finish_reason", finish_reason.empty() ? ojson() : ojson(finish_reason)}}})}};
  return Chunk{.event = Dump(chunk), .finish_reason = std::move(finish_reason)};
}

std::string MessagesStreamTranslator::OnBlockStart(const json& event, std::vector<Chunk>* out) {
  const std::optional<size_t> at = BlockIndex(event);
  if (!at || !event.contains("content_block") || !event["content_block"].is_object()) {
    return "content_block_start without an index or a content_block";
  }
  const size_t index = *at;
  if (index != blocks_.size()) return "content_block_start with index " + std::to_string(index) + " out of order";
  const json& block = event["content_block"];
  const std::string type = StringField(block, "type");
  if (type == "text") {
    blocks_.emplace_back(Block::kText, -1);
    if (block.contains("text") && block["text"].is_string() && !block["text"].get_ref<const std::string&>().empty()) {
      Chunk c = Make({{"content", block["text"].get<std::string>()}}, "");
      c.text = block["text"].get<std::string>();
      out->push_back(std::move(c));
    }
  } else if (type == "thinking") {
    blocks_.emplace_back(Block::kThinking, -1);
  } else if (type == "redacted_thinking") {
    blocks_.emplace_back(Block::kIgnored, -1);
  } else if (type == "tool_use") {
    if (!block.contains("id") || !block["id"].is_string() || !block.contains("name") || !block["name"].is_string()) {
      return "a tool_use block without an id or a name";
    }
    const int call = num_tool_calls_++;
    blocks_.emplace_back(Block::kToolUse, call);
    Chunk c = Make({{"tool_calls", ojson::array({{{"index", call},
                                                  {"id", block["id"].get<std::string>()},
                                                  {"type", "function"},
                                                  {"function", {{"name", block["name"].get<std::string>()},
                                                                {"arguments", ""}}}}})}},
                   "");
    c.has_tool_calls = true;
    out->push_back(std::move(c));
  } else {
    return "a content block of type '" + type + "' that the gateway cannot translate";
  }
  return "";
}

std::string MessagesStreamTranslator::OnBlockDelta(const json& event, std::vector<Chunk>* out) {
  const std::optional<size_t> at = BlockIndex(event);
  if (!at || !event.contains("delta") || !event["delta"].is_object()) {
    return "content_block_delta without an index or a delta";
  }
  const size_t index = *at;
  if (index >= blocks_.size()) return "content_block_delta for block " + std::to_string(index) + ", never started";
  const json& delta = event["delta"];
  const std::string type = StringField(delta, "type");
  auto string_field = [&](const char* key) -> const std::string* {
    return delta.contains(key) && delta[key].is_string() ? &delta[key].get_ref<const std::string&>() : nullptr;
  };
  const auto [kind, call] = blocks_[index];
  if (type == "text_delta" && kind == Block::kText && string_field("text")) {
    Chunk c = Make({{"content", *string_field("text")}}, "");
    c.text = *string_field("text");
    out->push_back(std::move(c));
  } else if (type == "thinking_delta" && kind == Block::kThinking && string_field("thinking")) {
    Chunk c = Make({{"reasoning_content", *string_field("thinking")}}, "");
    c.text = *string_field("thinking");
    c.reasoning = true;
    out->push_back(std::move(c));
  } else if (type == "input_json_delta" && kind == Block::kToolUse && string_field("partial_json")) {
    Chunk c = Make({{"tool_calls", ojson::array({{{"index", call},
                                                  {"function", {{"arguments", *string_field("partial_json")}}}}})}},
                   "");
    c.has_tool_calls = true;
    out->push_back(std::move(c));
  } else if (type == "signature_delta" || type == "citations_delta") {
    // the thinking block's signature, a citation: nothing an OpenAI client reads
  } else {
    return "a '" + type + "' delta for a block it does not belong to";
  }
  return "";
}

std::string MessagesStreamTranslator::OnMessageDelta(const json& event, std::vector<Chunk>* out) {
  if (event.contains("usage")) ReadUsage(event["usage"], &usage_);
  if (!event.contains("delta") || !event["delta"].is_object()) return "message_delta without a delta";
  const json& delta = event["delta"];
  if (delta.contains("stop_reason") && delta["stop_reason"].is_string()) {
    finish_reason_ = FinishReasonFromStopReason(delta["stop_reason"].get<std::string>());
    out->push_back(Make(ojson::object(), finish_reason_));
  }
  return "";
}

std::string MessagesStreamTranslator::Feed(std::string_view data, std::vector<Chunk>* out, bool* upstream_error) {
  if (upstream_error != nullptr) *upstream_error = false;
  try {
    return FeedEvent(data, out, upstream_error);
  } catch (const json::exception& e) {
    return std::string("an event that could not be read: ") + e.what();
  }
}

std::string MessagesStreamTranslator::FeedEvent(std::string_view data, std::vector<Chunk>* out, bool* upstream_error) {
  const json event = ParseJson(data);
  if (!event.is_object() || !event.contains("type") || !event["type"].is_string()) {
    return "an event that is not a Messages stream event: " + std::string(data.substr(0, 200));
  }
  const std::string& type = event["type"].get_ref<const std::string&>();
  if (type == "error") {
    if (upstream_error != nullptr) *upstream_error = true;
    const ApiError e = ApiErrorFromMessagesError(502, std::string(data));
    return e.type + ": " + e.message;
  }
  if (type == "ping") return "";
  if (stopped_) return "a '" + type + "' event after message_stop";
  if (type == "message_start") {
    if (started_) return "a second message_start";
    started_ = true;
    if (event.contains("message") && event["message"].is_object() && event["message"].contains("usage")) {
      ReadUsage(event["message"]["usage"], &usage_);
    }
    return "";
  }
  if (!started_) return "a '" + type + "' event before message_start";
  if (type == "content_block_start") return OnBlockStart(event, out);
  if (type == "content_block_delta") return OnBlockDelta(event, out);
  if (type == "content_block_stop") {
    const std::optional<size_t> at = BlockIndex(event);
    if (!at || *at >= blocks_.size()) {
      return "content_block_stop for a block never started";
    }
    return "";
  }
  if (type == "message_delta") return OnMessageDelta(event, out);
  if (type == "message_stop") {
    stopped_ = true;
    if (finish_reason_.empty()) return "message_stop without a stop_reason";
    if (include_usage_) {
      const ojson chunk = {{"id", id_},
                           {"object", "chat.completion.chunk"},
                           {"created", created_},
                           {"model", model_},
                           {"choices", ojson::array()},
                           {"usage", UsageJson(usage_)}};
      out->push_back(Chunk{.event = Dump(chunk)});
    }
    return "";
  }
  return "";  // a newer event type: the API's documentation says to ignore it
}

}  // namespace tachyon
