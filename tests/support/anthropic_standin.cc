// anthropic_standin: a strict stand-in for Anthropic's Messages API, for the
// gateway's tests and benchmarks (no network reaches the real one here).
//
// It validates each request as the API reference documents it and refuses
// what the real API refuses, with Anthropic's error shape: the x-api-key and
// anthropic-version headers; only the documented top-level fields; model;
// max_tokens (required, >= 1); messages alternating user / assistant, each
// with content; known block types per role, non-empty text; a tool_use
// answered by a tool_result in the next user turn and no tool_result without
// its tool_use; tools with a name and an object input_schema; tool_choice;
// temperature and top_p in [0, 1]; at most 4 cache_control breakpoints.
//
// It simulates the prompt cache: the prompt is tools, then system, then
// messages, block by block; a cache_control breakpoint whose prefix reaches
// --min-cache-tokens writes that prefix (5 minutes, or its ttl); a later
// request whose prefix up to one of its breakpoints, or up to a block boundary
// at most 20 blocks before one, was written reads it (usage.cache_read_input_tokens). Tokens are estimated as bytes / 4. The first
// byte of an answer comes --base-ms + --ms-per-token x uncached input tokens
// after the request, so caching shows in TTFT as it does on the real API.
//
//   anthropic_standin --port 0 [--key KEY] [--base-ms 20] [--ms-per-token 0.1]
//                     [--min-cache-tokens 1024] [--gap-ms 0] [--tokens 8]
//                     [--status S] [--retry-after S] [--fault error_event|cut]
//   --port 0      any free port; the first stdout line is "listening on http://127.0.0.1:PORT"
//   --status S    every request is answered S with an Anthropic error (529: overloaded_error)
//   --fault F     streams: error_event sends an overloaded_error event after message_start;
//                 cut closes the connection in the middle of an event
// Answers: a tool_use of the first tool when tools are given, tool_choice is not
// none and the last user turn has no tool_result; else --tokens text deltas.
// A system prompt containing "THINK" gets a thinking block first.
//   GET /stats   {"requests", "invalid", "last_invalid", "input_tokens", "cache_read_tokens",
//                 "cache_write_tokens"}
//   GET /last    the last valid request body
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "http/http_server.h"

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using tachyon::HttpRequest;
using tachyon::ResponseWriter;

struct Options {
  int port = 0;
  std::string key;
  double base_ms = 20;
  double ms_per_token = 0.1;
  int64_t min_cache_tokens = 1024;
  int gap_ms = 0;
  int tokens = 8;
  int status = 200;
  int retry_after = -1;
  std::string fault;
};
Options options;

// Runs functions at their time on one thread: the I/O thread never waits.
class Timers {
 public:
  Timers() : thread_([this] { Run(); }) {}
  void At(Clock::time_point when, std::function<void()> fn) {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.emplace(when, std::move(fn));
    wake_.notify_one();
  }

 private:
  void Run() {
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
      if (queue_.empty()) {
        wake_.wait(lock);
        continue;
      }
      auto first = queue_.begin();
      if (first->first > Clock::now()) {
        wake_.wait_until(lock, first->first);
        continue;
      }
      std::function<void()> fn = std::move(first->second);
      queue_.erase(first);
      lock.unlock();
      fn();
      lock.lock();
    }
  }
  std::mutex mutex_;
  std::condition_variable wake_;
  std::multimap<Clock::time_point, std::function<void()>> queue_;
  std::thread thread_;
};

struct Stats {
  std::mutex mutex;
  int64_t requests = 0, invalid = 0, input_tokens = 0, cache_read = 0, cache_write = 0;
  std::string last_invalid, last;
  std::unordered_map<size_t, Clock::time_point> cache;  // prefix hash -> expiry
};
Stats stats;

struct Invalid {
  std::string message;
};

[[noreturn]] void Refuse(const std::string& message) { throw Invalid{message}; }

void Require(bool ok, const std::string& message) {
  if (!ok) Refuse(message);
}

int breakpoints = 0;  // per request, on the I/O thread

void CheckCacheControl(const json& block, const std::string& where) {
  if (!block.contains("cache_control")) return;
  const json& c = block["cache_control"];
  Require(c.is_object() && c.value("type", "") == "ephemeral", where + ".cache_control.type: must be 'ephemeral'");
  for (const auto& [k, v] : c.items()) {
    Require(k == "type" || (k == "ttl" && (v == "5m" || v == "1h")), where + ".cache_control." + k + ": not permitted");
  }
  ++breakpoints;
}

void CheckKeys(const json& object, const std::set<std::string>& allowed, const std::string& where) {
  for (const auto& [k, v] : object.items()) {
    Require(allowed.count(k) > 0, where + "." + k + ": Extra inputs are not permitted");
  }
}

void CheckText(const json& b, const std::string& where) {
  CheckKeys(b, {"type", "text", "cache_control", "citations"}, where);
  Require(b.contains("text") && b["text"].is_string(), where + ".text: Field required");
  Require(!b["text"].get<std::string>().empty(), where + ": text content blocks must be non-empty");
  CheckCacheControl(b, where);
}

void CheckImage(const json& b, const std::string& where) {
  CheckKeys(b, {"type", "source", "cache_control"}, where);
  Require(b.contains("source") && b["source"].is_object(), where + ".source: Field required");
  const json& s = b["source"];
  const std::string type = s.value("type", "");
  if (type == "base64") {
    static const std::set<std::string> kTypes = {"image/jpeg", "image/png", "image/gif", "image/webp"};
    Require(kTypes.count(s.value("media_type", "")) > 0, where + ".source.media_type: unsupported image type");
    Require(s.contains("data") && s["data"].is_string() && !s["data"].get<std::string>().empty(),
            where + ".source.data: Field required");
  } else if (type == "url") {
    Require(s.contains("url") && s["url"].is_string(), where + ".source.url: Field required");
  } else {
    Refuse(where + ".source.type: must be 'base64' or 'url'");
  }
  CheckCacheControl(b, where);
}

// The blocks of one message; returns the tool_use ids an assistant turn opens.
std::set<std::string> CheckMessage(const json& m, const std::string& where, const std::set<std::string>& open) {
  Require(m.is_object(), where + ": must be an object");
  CheckKeys(m, {"role", "content"}, where);
  const std::string role = m.value("role", "");
  Require(role == "user" || role == "assistant", where + ".role: must be 'user' or 'assistant'");
  Require(m.contains("content"), where + ".content: Field required");
  const json& content = m["content"];
  std::set<std::string> opened;
  std::set<std::string> answered;
  if (content.is_string()) {
    Require(!content.get<std::string>().empty() || role == "assistant", where + ".content: must be non-empty");
  } else {
    Require(content.is_array() && !content.empty(), where + ".content: must be a string or a non-empty list");
    for (size_t i = 0; i < content.size(); ++i) {
      const std::string at = where + ".content." + std::to_string(i);
      const json& b = content[i];
      Require(b.is_object() && b.contains("type") && b["type"].is_string(), at + ".type: Field required");
      const std::string type = b["type"];
      if (type == "text") {
        CheckText(b, at);
      } else if (type == "image" && role == "user") {
        CheckImage(b, at);
      } else if (type == "tool_use" && role == "assistant") {
        CheckKeys(b, {"type", "id", "name", "input", "cache_control"}, at);
        Require(b.contains("id") && b["id"].is_string() && b.contains("name") && b["name"].is_string(),
                at + ": tool_use needs id and name");
        Require(b.contains("input") && b["input"].is_object(), at + ".input: must be an object");
        opened.insert(b["id"].get<std::string>());
        CheckCacheControl(b, at);
      } else if (type == "tool_result" && role == "user") {
        CheckKeys(b, {"type", "tool_use_id", "content", "is_error", "cache_control"}, at);
        Require(b.contains("tool_use_id") && b["tool_use_id"].is_string(), at + ".tool_use_id: Field required");
        const std::string id = b["tool_use_id"];
        Require(open.count(id) > 0, at + ": unexpected `tool_use_id` found in `tool_result` blocks: " + id +
                                        ". Each `tool_result` block must have a corresponding `tool_use` block in "
                                        "the previous message.");
        answered.insert(id);
        if (b.contains("content") && b["content"].is_array()) {
          for (size_t k = 0; k < b["content"].size(); ++k) {
            const json& c = b["content"][k];
            const std::string ct = c.is_object() ? c.value("type", "") : "";
            if (ct == "text") {
              CheckText(c, at + ".content." + std::to_string(k));
            } else if (ct == "image") {
              CheckImage(c, at + ".content." + std::to_string(k));
            } else {
              Refuse(at + ".content." + std::to_string(k) + ": must be a text or image block");
            }
          }
        } else if (b.contains("content")) {
          Require(b["content"].is_string(), at + ".content: must be a string or a list");
        }
        CheckCacheControl(b, at);
      } else if (type == "thinking" && role == "assistant") {
        Require(b.contains("thinking") && b.contains("signature"), at + ": thinking needs thinking and signature");
      } else {
        Refuse(at + ": a '" + type + "' block is not permitted in a " + role + " message");
      }
    }
  }
  if (role == "user") {
    for (const std::string& id : open) {
      Require(answered.count(id) > 0, where + ": `tool_use` ids were found without `tool_result` blocks immediately "
                                             "after: " + id);
    }
  }
  return opened;
}

void CheckTools(const json& r) {
  if (!r.contains("tools")) {
    Require(!r.contains("tool_choice") || r["tool_choice"].value("type", "") == "none",
            "tool_choice: requires tools");
    return;
  }
  Require(r["tools"].is_array(), "tools: must be a list");
  static const std::regex kName("^[a-zA-Z0-9_-]{1,64}$");
  std::set<std::string> names;
  for (size_t i = 0; i < r["tools"].size(); ++i) {
    const json& t = r["tools"][i];
    const std::string at = "tools." + std::to_string(i);
    Require(t.is_object(), at + ": must be an object");
    CheckKeys(t, {"name", "description", "input_schema", "cache_control", "type"}, at);
    Require(t.contains("name") && t["name"].is_string() && std::regex_match(t["name"].get<std::string>(), kName),
            at + ".name: String should match pattern '^[a-zA-Z0-9_-]{1,64}$'");
    Require(names.insert(t["name"].get<std::string>()).second, at + ".name: Tool names must be unique");
    Require(t.contains("input_schema") && t["input_schema"].is_object() &&
                t["input_schema"].value("type", "") == "object",
            at + ".input_schema.type: Input should be 'object'");
    if (t.contains("description")) Require(t["description"].is_string(), at + ".description: must be a string");
    CheckCacheControl(t, at);
  }
  if (r.contains("tool_choice")) {
    const json& c = r["tool_choice"];
    Require(c.is_object(), "tool_choice: must be an object");
    const std::string type = c.value("type", "");
    Require(type == "auto" || type == "any" || type == "tool" || type == "none",
            "tool_choice.type: must be auto, any, tool or none");
    CheckKeys(c, {"type", "name", "disable_parallel_tool_use"}, "tool_choice");
    if (type == "tool") Require(names.count(c.value("name", "")) > 0, "tool_choice.name: no tool of that name");
  }
}

void CheckRequest(const HttpRequest& request, const json& r) {
  Require(r.is_object(), "the body must be a JSON object");
  CheckKeys(r, {"model", "messages", "max_tokens", "system", "stop_sequences", "stream", "temperature", "top_p",
                "top_k", "metadata", "tools", "tool_choice", "thinking", "service_tier"},
            "body");
  Require(r.contains("model") && r["model"].is_string() && !r["model"].get<std::string>().empty(),
          "model: Field required");
  Require(r.contains("max_tokens") && r["max_tokens"].is_number_integer() && r["max_tokens"].get<int64_t>() >= 1,
          "max_tokens: Field required (an integer >= 1)");
  for (const char* key : {"temperature", "top_p"}) {
    if (r.contains(key)) {
      Require(r[key].is_number() && r[key].get<double>() >= 0 && r[key].get<double>() <= 1,
              std::string(key) + ": must be between 0 and 1");
    }
  }
  if (r.contains("top_k")) Require(r["top_k"].is_number_integer() && r["top_k"] >= 0, "top_k: must be >= 0");
  if (r.contains("stream")) Require(r["stream"].is_boolean(), "stream: must be a boolean");
  if (r.contains("stop_sequences")) {
    Require(r["stop_sequences"].is_array(), "stop_sequences: must be a list");
    for (const json& s : r["stop_sequences"]) Require(s.is_string(), "stop_sequences: must be strings");
  }
  if (r.contains("metadata")) {
    Require(r["metadata"].is_object(), "metadata: must be an object");
    CheckKeys(r["metadata"], {"user_id"}, "metadata");
  }
  if (r.contains("system")) {
    const json& s = r["system"];
    if (s.is_array()) {
      for (size_t i = 0; i < s.size(); ++i) {
        Require(s[i].is_object() && s[i].value("type", "") == "text", "system." + std::to_string(i) + ": must be text");
        CheckText(s[i], "system." + std::to_string(i));
      }
    } else {
      Require(s.is_string(), "system: must be a string or a list of text blocks");
    }
  }
  CheckTools(r);
  Require(r.contains("messages") && r["messages"].is_array() && !r["messages"].empty(),
          "messages: at least one message is required");
  std::set<std::string> open;
  std::string previous_role;
  for (size_t i = 0; i < r["messages"].size(); ++i) {
    const json& m = r["messages"][i];
    const std::string where = "messages." + std::to_string(i);
    open = CheckMessage(m, where, open);
    const std::string role = m["role"];
    Require(role != previous_role, where + ": roles must alternate between 'user' and 'assistant'");
    previous_role = role;
  }
  Require(breakpoints <= 4, "A maximum of 4 blocks with cache_control may be provided. Found " +
                                std::to_string(breakpoints) + ".");
  auto key = request.headers.find("x-api-key");
  if (!options.key.empty()) {
    Require(key != request.headers.end() && key->second == options.key, "AUTH");
  }
  Require(request.headers.count("anthropic-version") > 0, "anthropic-version: header is required");
}

// The prompt as segments in the cache's order: (canonical bytes, breakpoint ttl or 0).
std::vector<std::pair<std::string, int>> Segments(const json& r) {
  std::vector<std::pair<std::string, int>> out;
  auto add = [&](json block) {
    int ttl = 0;
    if (block.is_object() && block.contains("cache_control")) {
      ttl = block["cache_control"].value("ttl", "5m") == "1h" ? 3600 : 300;
      block.erase("cache_control");
    }
    out.emplace_back(block.dump(), ttl);
  };
  if (r.contains("tools")) {
    for (const json& t : r["tools"]) add(t);
  }
  if (r.contains("system")) {
    if (r["system"].is_string()) {
      add(r["system"]);
    } else {
      for (const json& b : r["system"]) add(b);
    }
  }
  for (const json& m : r["messages"]) {
    out.emplace_back(m["role"].get<std::string>(), 0);
    if (m["content"].is_string()) {
      add(m["content"]);
    } else {
      for (const json& b : m["content"]) add(b);
    }
  }
  return out;
}

struct Usage {
  int64_t input = 0, cache_read = 0, cache_write = 0;
};

Usage SimulateCache(const json& r) {
  const auto segments = Segments(r);
  std::vector<int64_t> tokens_to(segments.size());
  std::vector<size_t> hash_to(segments.size());
  std::string prefix;
  int64_t bytes = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    prefix += segments[i].first;
    prefix += '\x1f';
    bytes += static_cast<int64_t>(segments[i].first.size());
    tokens_to[i] = (bytes + 3) / 4;
    hash_to[i] = std::hash<std::string>()(prefix);
  }
  const int64_t total = segments.empty() ? 0 : tokens_to.back();
  Usage u;
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lock(stats.mutex);
  int64_t read = 0, written = 0;
  for (size_t i = 0; i < segments.size(); ++i) {
    if (segments[i].second == 0 || tokens_to[i] < options.min_cache_tokens) continue;
    // A hit at the breakpoint, or at a block boundary up to 20 blocks before it
    // (Anthropic's lookback), reads that prefix; the rest up to the breakpoint is written.
    for (size_t back = 0; back <= 20 && back <= i; ++back) {
      auto it = stats.cache.find(hash_to[i - back]);
      if (it != stats.cache.end() && it->second > now && tokens_to[i - back] > read) {
        read = tokens_to[i - back];
        break;
      }
    }
    written = tokens_to[i] - read;
    stats.cache[hash_to[i]] = now + std::chrono::seconds(segments[i].second);
  }
  u.cache_read = read;
  u.cache_write = written;
  u.input = total - read - written;
  stats.input_tokens += u.input;
  stats.cache_read += u.cache_read;
  stats.cache_write += u.cache_write;
  return u;
}

std::string Event(const json& data) {
  return "event: " + data["type"].get<std::string>() + "\ndata: " + data.dump() + "\n\n";
}

json ErrorJson(const std::string& type, const std::string& message) {
  return {{"type", "error"}, {"error", {{"type", type}, {"message", message}}}};
}

// The answer's content blocks and stop reason.
std::pair<json, std::string> Answer(const json& r) {
  json blocks = json::array();
  const std::string system = r.contains("system") ? r["system"].dump() : "";
  if (system.find("THINK") != std::string::npos) {
    blocks.push_back({{"type", "thinking"}, {"thinking", "Considering the question."}, {"signature", "sig"}});
  }
  const json& last = r["messages"].back();
  bool has_result = false;
  if (last["content"].is_array()) {
    for (const json& b : last["content"]) has_result |= b["type"] == "tool_result";
  }
  const bool call = r.contains("tools") && !r["tools"].empty() &&
                    (!r.contains("tool_choice") || r["tool_choice"].value("type", "") != "none") && !has_result;
  if (call) {
    const json& tool = r["tools"][0];
    json input = json::object();
    if (tool["input_schema"].contains("properties") && tool["input_schema"]["properties"].is_object()) {
      for (const auto& [name, schema] : tool["input_schema"]["properties"].items()) input[name] = "Oslo";
    }
    blocks.push_back({{"type", "tool_use"}, {"id", "toolu_01"}, {"name", tool["name"]}, {"input", input}});
    return {blocks, "tool_use"};
  }
  std::string text;
  for (int i = 0; i < options.tokens; ++i) text += i == 0 ? "Hello" : " tok";
  blocks.push_back({{"type", "text"}, {"text", text}});
  const int64_t max_tokens = r["max_tokens"];
  return {blocks, max_tokens < options.tokens ? "max_tokens" : "end_turn"};
}

// The events of a streamed answer, each with its delay after the previous one.
std::vector<std::string> StreamEvents(const json& message) {
  std::vector<std::string> out;
  json start = message;
  start["content"] = json::array();
  start["stop_reason"] = nullptr;
  start["usage"]["output_tokens"] = 1;
  out.push_back(Event({{"type", "message_start"}, {"message", start}}));
  if (options.fault == "error_event") {
    out.push_back(Event(ErrorJson("overloaded_error", "Overloaded")));
    return out;
  }
  out.push_back(Event({{"type", "ping"}}));
  for (size_t i = 0; i < message["content"].size(); ++i) {
    const json& b = message["content"][i];
    const std::string type = b["type"];
    json empty = b;
    if (type == "text") empty["text"] = "";
    if (type == "thinking") empty["thinking"] = "", empty["signature"] = "";
    if (type == "tool_use") empty["input"] = json::object();
    out.push_back(Event({{"type", "content_block_start"}, {"index", i}, {"content_block", empty}}));
    if (type == "text") {
      const std::string text = b["text"];
      for (size_t at = 0; at < text.size();) {
        const size_t next = text.find(' ', at + 1);
        const size_t end = next == std::string::npos ? text.size() : next;
        out.push_back(Event({{"type", "content_block_delta"}, {"index", i},
                             {"delta", {{"type", "text_delta"}, {"text", text.substr(at, end - at)}}}}));
        at = end;
      }
    } else if (type == "thinking") {
      out.push_back(Event({{"type", "content_block_delta"}, {"index", i},
                           {"delta", {{"type", "thinking_delta"}, {"thinking", b["thinking"]}}}}));
      out.push_back(Event({{"type", "content_block_delta"}, {"index", i},
                           {"delta", {{"type", "signature_delta"}, {"signature", b["signature"]}}}}));
    } else {
      const std::string input = b["input"].dump();
      const size_t half = input.size() / 2;
      for (const std::string& piece : {input.substr(0, half), input.substr(half)}) {
        out.push_back(Event({{"type", "content_block_delta"}, {"index", i},
                             {"delta", {{"type", "input_json_delta"}, {"partial_json", piece}}}}));
      }
    }
    out.push_back(Event({{"type", "content_block_stop"}, {"index", i}}));
  }
  out.push_back(Event({{"type", "message_delta"},
                       {"delta", {{"type", "message_delta"}, {"stop_reason", message["stop_reason"]},
                                  {"stop_sequence", nullptr}}},
                       {"usage", {{"output_tokens", message["usage"]["output_tokens"]}}}}));
  out.push_back(Event({{"type", "message_stop"}}));
  return out;
}

Timers* timers = nullptr;

void SendStream(std::shared_ptr<ResponseWriter> writer, std::vector<std::string> events, size_t next) {
  for (; next < events.size(); ++next) {
    if (options.fault == "cut" && next == 5) {  // after two text deltas
      writer->Write(events[next].substr(0, events[next].size() / 2));
      writer->Abort();
      return;
    }
    writer->Write(events[next]);
    if (options.gap_ms > 0 && next + 1 < events.size()) {
      timers->At(Clock::now() + std::chrono::milliseconds(options.gap_ms),
                 [writer, events = std::move(events), next] { SendStream(writer, events, next + 1); });
      return;
    }
  }
  writer->End();
}

void Messages(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  const json r = json::parse(request.body, nullptr, false);
  breakpoints = 0;
  try {
    CheckRequest(request, r);
  } catch (const Invalid& e) {
    {
      std::lock_guard<std::mutex> lock(stats.mutex);
      ++stats.invalid;
      stats.last_invalid = e.message;
    }
    std::fprintf(stderr, "anthropic_standin: invalid request: %s\n", e.message.c_str());
    if (e.message == "AUTH") {
      writer->Respond(401, "application/json", ErrorJson("authentication_error", "invalid x-api-key").dump());
    } else {
      writer->Respond(400, "application/json", ErrorJson("invalid_request_error", e.message).dump());
    }
    return;
  }
  {
    std::lock_guard<std::mutex> lock(stats.mutex);
    ++stats.requests;
    stats.last = request.body;
  }
  if (options.status != 200) {
    tachyon::HttpHeaders headers;
    if (options.retry_after >= 0) headers.emplace_back("retry-after", std::to_string(options.retry_after));
    const std::string type = options.status == 529 ? "overloaded_error"
                             : options.status == 429 ? "rate_limit_error"
                             : options.status >= 500 ? "api_error"
                                                     : "invalid_request_error";
    writer->Respond(options.status, "application/json", ErrorJson(type, "stand-in status").dump(), headers);
    return;
  }
  const Usage usage = SimulateCache(r);
  auto [blocks, stop] = Answer(r);
  json message = {{"id", "msg_01"},   {"type", "message"},      {"role", "assistant"},
                  {"model", r["model"]}, {"content", blocks},   {"stop_reason", stop},
                  {"stop_sequence", nullptr},
                  {"usage", {{"input_tokens", usage.input}, {"output_tokens", options.tokens},
                             {"cache_read_input_tokens", usage.cache_read},
                             {"cache_creation_input_tokens", usage.cache_write}}}};
  const auto delay = std::chrono::microseconds(
      static_cast<int64_t>(1000 * (options.base_ms + options.ms_per_token * static_cast<double>(usage.input + usage.cache_write))));
  const bool stream = r.value("stream", false);
  timers->At(Clock::now() + delay, [writer, message = std::move(message), stream] {
    if (!stream) {
      writer->Respond(200, "application/json", message.dump());
      return;
    }
    writer->StartStream(200, "text/event-stream");
    SendStream(writer, StreamEvents(message), 0);
  });
}

void Handle(HttpRequest request, std::shared_ptr<ResponseWriter> writer) {
  if (request.method == "GET" && request.target == "/stats") {
    std::lock_guard<std::mutex> lock(stats.mutex);
    writer->Respond(200, "application/json",
                    json{{"requests", stats.requests}, {"invalid", stats.invalid}, {"last_invalid", stats.last_invalid},
                         {"input_tokens", stats.input_tokens}, {"cache_read_tokens", stats.cache_read},
                         {"cache_write_tokens", stats.cache_write}}
                        .dump());
    return;
  }
  if (request.method == "GET" && request.target == "/last") {
    std::lock_guard<std::mutex> lock(stats.mutex);
    writer->Respond(200, "application/json", stats.last);
    return;
  }
  if (request.method != "POST" || request.target != "/v1/messages") {
    writer->Respond(404, "application/json", ErrorJson("not_found_error", "Not found").dump());
    return;
  }
  Messages(request, std::move(writer));
}

}  // namespace

int main(int argc, char** argv) {
  // Blocked before any thread starts, so that every thread leaves them to sigwait.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--port") options.port = std::atoi(value.c_str());
    else if (flag == "--key") options.key = value;
    else if (flag == "--base-ms") options.base_ms = std::atof(value.c_str());
    else if (flag == "--ms-per-token") options.ms_per_token = std::atof(value.c_str());
    else if (flag == "--min-cache-tokens") options.min_cache_tokens = std::atoll(value.c_str());
    else if (flag == "--gap-ms") options.gap_ms = std::atoi(value.c_str());
    else if (flag == "--tokens") options.tokens = std::atoi(value.c_str());
    else if (flag == "--status") options.status = std::atoi(value.c_str());
    else if (flag == "--retry-after") options.retry_after = std::atoi(value.c_str());
    else if (flag == "--fault") options.fault = value;
    else {
      std::fprintf(stderr, "anthropic_standin: unknown flag %s\n", flag.c_str());
      return 2;
    }
  }
  Timers t;
  timers = &t;
  auto server = tachyon::HttpServer::Start({.port = options.port}, Handle);
  if (!server.ok()) {
    std::fprintf(stderr, "anthropic_standin: %s\n", server.status().message().c_str());
    return 1;
  }
  std::printf("listening on http://127.0.0.1:%d\n", (*server)->port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  std::_Exit(0);
}
