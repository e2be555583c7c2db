#include "server/openai_server.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

#include "api/embeddings.h"
#include "api/messages_front.h"
#include "api/responses_front.h"
#include "base/constant_time.h"
#include "base/query_string.h"
#include "gateway/cache/exact_cache.h"
#include "gateway/cache/semantic_cache.h"
#include "server/stats_report.h"

namespace tachyon {

extern const char kDashboardHtml[];  // dashboard.html, embedded by CMake (cmake/embed_file.cmake)

// A /v1/responses call: how its answer is framed, and where it is kept.
struct ResponsesCall {
  ResponsesRequest request;
  nlohmann::json skeleton;      // the response object before any output
  nlohmann::json conversation;  // the input items up to this response, kept with it
  std::shared_ptr<ResponseStore> store;  // null: store false
  std::string tenant;
};

namespace {

// The secret of "Authorization: Bearer SECRET" (scheme case-insensitive, one or more spaces); "" when absent.
std::string BearerSecret(const HttpRequest& request) {
  auto it = request.headers.find("authorization");
  if (it == request.headers.end()) return "";
  const std::string& h = it->second;
  if (h.size() <= 7 || h[6] != ' ') return "";
  for (size_t i = 0; i < 6; ++i) {
    if (std::tolower(static_cast<unsigned char>(h[i])) != "bearer"[i]) return "";
  }
  const size_t start = h.find_first_not_of(' ', 6);
  return start == std::string::npos ? "" : h.substr(start);
}

// /dashboard's key: Authorization: Bearer, or ?key= (a browser opening the page sends no header).
std::string DashboardSecret(const HttpRequest& request) {
  if (std::string bearer = BearerSecret(request); !bearer.empty()) return bearer;
  const std::map<std::string, std::string> query = ParseQuery(QueryOf(request.target));
  auto key = query.find("key");
  return key == query.end() ? "" : key->second;
}

using SteadyClock = std::chrono::steady_clock;

// Bodies up to this size are parsed on the I/O thread (tens of microseconds at most).
constexpr size_t kInlineParseBytes = 16 << 10;

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void SendError(ResponseWriter& writer, const ApiError& error, HttpHeaders headers = {}) {
  writer.Respond(error.http_status, "application/json", ErrorBody(error), std::move(headers));
}

double UnixSecondsNow() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A request's key once admitted: what the answer's end settles.
struct KeyUse {
  std::shared_ptr<const Keyring::Key> key;  // null: the server has no keys
  Keyring::Charge charged;                  // what admission charged
  HttpHeaders headers;                      // x-ratelimit-*, on every answer
};

// The key's checks before a call on `route` ("" : the model names no route; the
// gateway answers 404 and nothing is charged): may it use the route (403
// model_not_allowed), are its limits met (429 rate_limit_exceeded)? Returns the
// error to send, or nothing with *use filled.
std::optional<ApiError> AdmitKey(std::shared_ptr<const Keyring::Key> key, const std::string& route,
                                 const std::string& model, size_t body_bytes, KeyUse* use) {
  if (route.empty()) return std::nullopt;
  if (!Keyring::MayUse(*key, route)) {
    Keyring::Count(*key, 403);
    return ApiError{403, "the key '" + key->config.name + "' may not use the model '" + model + "'",
                    "permission_error", "model", "model_not_allowed"};
  }
  Keyring::Admission a = Keyring::Admit(*key, LowTokenEstimate(body_bytes), UnixSecondsNow());
  use->headers = std::move(a.headers);
  if (!a.admitted) {
    return ApiError{429, a.message, a.limit == "requests" ? "requests" : "tokens", "", "rate_limit_exceeded"};
  }
  use->key = std::move(key);
  use->charged = a.charge;
  return std::nullopt;
}

// Adds the CORS headers of an allowed origin to whatever answer goes out.
class CorsWriter : public ResponseWriter {
 public:
  CorsWriter(std::shared_ptr<ResponseWriter> inner, HttpHeaders cors) : inner_(std::move(inner)), cors_(std::move(cors)) {}
  void Respond(int status, const std::string& content_type, std::string body, HttpHeaders headers) override {
    headers.insert(headers.end(), cors_.begin(), cors_.end());
    inner_->Respond(status, content_type, std::move(body), std::move(headers));
  }
  void StartStream(int status, const std::string& content_type, HttpHeaders headers) override {
    headers.insert(headers.end(), cors_.begin(), cors_.end());
    inner_->StartStream(status, content_type, std::move(headers));
  }
  void Write(std::string data) override { inner_->Write(std::move(data)); }
  void End() override { inner_->End(); }
  void Abort() override { inner_->Abort(); }
  bool closed() const override { return inner_->closed(); }
  int64_t unsent_bytes() const override { return inner_->unsent_bytes(); }
  void OnClose(std::function<void()> callback) override { inner_->OnClose(std::move(callback)); }

 private:
  std::shared_ptr<ResponseWriter> inner_;
  HttpHeaders cors_;
};

// A client's x-request-id is kept when it is short and printable.
bool UsableRequestId(const std::string& id) {
  if (id.empty() || id.size() > 128) return false;
  for (unsigned char c : id) {
    if (c < 0x21 || c > 0x7e) return false;
  }
  return true;
}

// What a backend's result says of the prompt, in Anthropic's terms.
MessagesUsage MessagesUsageOf(const BackendResult& r) {
  MessagesUsage u;
  u.cache_read_tokens = std::max<int64_t>(0, r.num_cached_tokens);
  u.cache_write_tokens = std::max<int64_t>(0, r.cache_write_tokens);
  u.input_tokens = std::max<int64_t>(0, r.usage.prompt_tokens - u.cache_read_tokens - u.cache_write_tokens);
  u.output_tokens = r.usage.completion_tokens;
  return u;
}

// Unix seconds (with milliseconds) of a steady-clock instant in the past.
double UnixSecondsAt(SteadyClock::time_point t) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return std::round((now - std::chrono::duration<double>(SteadyClock::now() - t).count()) * 1e3) / 1e3;
}

double Millis(double seconds) { return seconds >= 0 ? std::round(seconds * 1e6) / 1e3 : 0.0; }

// The request's traffic-capture line, started at arrival (what the server
// knows before any backend); the sink adds the outcome.
struct CaptureStart {
  std::shared_ptr<CaptureWriter> writer;  // null: this request is not captured
  std::string endpoint;                   // "/v1/chat/completions", ...
  std::string body;                       // as received
  SteadyClock::time_point arrival;
};

// The request's server span, started at arrival: the root of its trace.
struct TraceStart {
  std::shared_ptr<RequestTrace> trace;  // null: not traced
  std::string path;                     // "/v1/chat/completions"
  SteadyClock::time_point arrival;
};

// "trim;dur=0.120, cache;dur=0.052, route;dur=0.010, upstream;dur=123.400":
// the pipeline's stages (both caches as one "cache"), then the answering
// attempt's time to its first chunk (streamed) or its end, in milliseconds.
std::string ServerTiming(const CallInfo& info) {
  std::vector<std::pair<std::string, double>> parts;
  for (const auto& [stage, seconds] : info.stage_seconds) {
    std::string name = stage == "exact-cache" || stage == "semantic-cache" ? "cache"
                       : stage == "router"                                 ? "route"
                                                                           : stage;
    auto it = std::find_if(parts.begin(), parts.end(), [&](const auto& p) { return p.first == name; });
    if (it == parts.end()) {
      parts.emplace_back(std::move(name), seconds);
    } else {
      it->second += seconds;
    }
  }
  if (info.upstream_seconds >= 0) parts.emplace_back("upstream", info.upstream_seconds);
  std::string out;
  char dur[32];
  for (const auto& [name, seconds] : parts) {
    std::snprintf(dur, sizeof(dur), ";dur=%.3f", seconds * 1e3);
    out += (out.empty() ? "" : ", ") + name + dur;
  }
  return out;
}

// Frames one call's answer for HTTP and writes its access-log and capture
// lines. With `messages_model` set the client came through /v1/messages: the
// answer is framed in Anthropic's shape (whole, events, errors) for that model name.
class HttpSink : public GatewaySink {
 public:
  HttpSink(std::shared_ptr<ResponseWriter> writer, std::shared_ptr<const CompletionRequest> request,
           std::string request_id, std::string id, bool access_log, std::string messages_model, CaptureStart capture,
           TraceStart trace, KeyUse key, std::shared_ptr<ResponsesCall> responses)
      : writer_(std::move(writer)),
        request_(std::move(request)),
        request_id_(std::move(request_id)),
        id_(std::move(id)),
        access_log_(access_log),
        messages_model_(std::move(messages_model)),
        capture_(std::move(capture)),
        trace_(std::move(trace)),
        key_(std::move(key)),
        responses_(std::move(responses)) {
    if (!messages_model_.empty()) messages_ = std::make_unique<MessagesEventWriter>(id_, messages_model_);
    if (responses_) responses_events_ = std::make_unique<ResponsesEventWriter>(responses_->skeleton);
  }

  // A call cancelled (its client went away) never reaches OnDone: its server span ends here.
  ~HttpSink() override {
    if (trace_.trace && !span_done_) EndServerSpan(nullptr, nullptr, 499);
    if (key_.key && !key_done_) Keyring::Finish(*key_.key, key_.charged, 0, 0, 499, UnixSecondsNow());
  }

  void OnChunk(const BackendChunk& chunk, const CallInfo& info) override {
    const bool keep_output = capture_.writer || (trace_.trace && trace_.trace->capture_content());
    if (keep_output && !chunk.reasoning && output_.size() < CaptureWriter::kMaxOutputBytes) {
      output_.append(chunk.text, 0, CaptureWriter::kMaxOutputBytes - output_.size());
    }
    if (!started_) {
      started_ = true;
      writer_->StartStream(200, "text/event-stream", Headers(info));
    }
    if (messages_ || responses_events_) {
      std::string events;
      if (messages_) {
        messages_->Chunk(chunk.event, &events);
      } else {
        responses_events_->Chunk(chunk.event, &events);
      }
      if (!events.empty()) writer_->Write(std::move(events));
      return;
    }
    std::string event;
    event.reserve(chunk.event.size() + 8);
    event.append("data: ").append(chunk.event).append("\n\n");
    writer_->Write(std::move(event));
  }

  void OnDone(const BackendResult& result, const CallInfo& info) override {
    const int status = messages_            ? FinishMessages(result, info)
                       : responses_events_ ? FinishResponses(result, info)
                                           : Finish(result, info);
    if (trace_.trace) EndServerSpan(&result, &info, status);
    if (key_.key) {
      key_done_ = true;
      Keyring::Finish(*key_.key, key_.charged, result.has_usage ? result.usage.prompt_tokens : 0,
                      result.has_usage ? result.usage.completion_tokens : 0, status, UnixSecondsNow());
    }
    if (!access_log_ && !capture_.writer) return;
    nlohmann::json line = LogLine(result, info, status);
    if (access_log_) std::fprintf(stderr, "%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    if (!capture_.writer) return;
    line.erase("id");
    line["ts"] = UnixSecondsAt(capture_.arrival);
    line["endpoint"] = capture_.endpoint;
    line["model"] = request_->model;
    line["tenant"] = key_.key ? key_.key->config.tenant : "";
    line["backend_kind"] = info.backend_kind;
    if (!line.contains("cache")) line["cache"] = "off";
    // The whole answer is the first token the client sees; the first token the backend made is first_token_ms.
    if (!request_->stream) {
      line["first_token_ms"] = line["ttft_ms"];
      line["ttft_ms"] = line["e2e_ms"];
    }
    if (result.queue_seconds >= 0) line["queue_ms"] = Millis(result.queue_seconds);
    if (result.text) output_ = result.text->substr(0, CaptureWriter::kMaxOutputBytes);
    capture_.writer->Add({.line = std::move(line), .body = std::move(capture_.body), .output = std::move(output_)});
  }

 private:
  // Ends an OpenAI-shaped answer; returns its status.
  int Finish(const BackendResult& result, const CallInfo& info) {
    int status = 200;
    if (started_ || (request_->stream && result.kind == BackendResult::Kind::kOk)) {
      if (!started_) writer_->StartStream(200, "text/event-stream", Headers(info));
      // The one in-stream error path: an error event, then [DONE], whatever failed.
      if (result.kind != BackendResult::Kind::kOk) {
        writer_->Write(SseEvent(ErrorBody(result.error)));
        status = result.error.http_status;
      }
      writer_->Write(std::string(kSseDone));
      writer_->End();
    } else if (result.kind == BackendResult::Kind::kOk || result.kind == BackendResult::Kind::kRejected) {
      status = result.http_status;
      writer_->Respond(status, result.content_type, result.body, Headers(info));
    } else {
      status = result.error.http_status;
      HttpHeaders headers = Headers(info);
      if (result.retry_after_seconds >= 0) {
        headers.emplace_back("retry-after", std::to_string(static_cast<int64_t>(result.retry_after_seconds)));
      }
      SendError(*writer_, result.error, std::move(headers));
    }
    return status;
  }

  // Ends an Anthropic-shaped answer (/v1/messages); returns its status.
  int FinishMessages(const BackendResult& result, const CallInfo& info) {
    const bool ok = result.kind == BackendResult::Kind::kOk;
    if (started_ || (request_->stream && ok)) {
      if (!started_) writer_->StartStream(200, "text/event-stream", Headers(info));
      std::string events;
      if (ok) {
        messages_->End(MessagesUsageOf(result), result.has_usage, &events);
      } else {
        events = MessagesEventWriter::ErrorEvent(result.error);
      }
      writer_->Write(std::move(events));
      writer_->End();
      return ok ? 200 : result.error.http_status;
    }
    HttpHeaders headers = Headers(info);
    if (ok) {
      auto answer = MessagesAnswerFromChat(result.body, messages_model_, MessagesUsageOf(result), result.has_usage);
      if (answer.index() == 0) {
        writer_->Respond(200, "application/json", std::get<0>(answer), std::move(headers));
        return 200;
      }
      const ApiError bad{502, "the backend's answer could not be translated: " + std::get<1>(answer), "api_error", "", ""};
      writer_->Respond(502, "application/json", MessagesErrorBody(bad), std::move(headers));
      return 502;
    }
    ApiError error = result.error;
    if (result.kind == BackendResult::Kind::kRejected) error.http_status = result.http_status;
    if (result.retry_after_seconds >= 0) {
      headers.emplace_back("retry-after", std::to_string(static_cast<int64_t>(result.retry_after_seconds)));
    }
    writer_->Respond(error.http_status, "application/json", MessagesErrorBody(error), std::move(headers));
    return error.http_status;
  }

  // Ends a Responses-shaped answer (/v1/responses) and keeps it (store: true); returns its status.
  int FinishResponses(const BackendResult& result, const CallInfo& info) {
    const bool ok = result.kind == BackendResult::Kind::kOk;
    const ResponsesUsage usage{.input_tokens = result.usage.prompt_tokens,
                               .cached_tokens = std::max<int64_t>(0, result.num_cached_tokens),
                               .output_tokens = result.usage.completion_tokens};
    // A stored response is kept before the client reads its end: the next request
    // may name it as previous_response_id at once.
    auto keep = [&](const nlohmann::json& response) {
      if (!responses_->store || response.value("status", "") == "failed") return;
      responses_->store->Put(response["id"].get<std::string>(),
                             {.tenant = responses_->tenant, .response = response, .conversation = responses_->conversation},
                             UnixSecondsNow());
    };
    if (started_ || (request_->stream && ok)) {
      if (!started_) writer_->StartStream(200, "text/event-stream", Headers(info));
      std::string events;
      int status = 200;
      if (ok) {
        responses_events_->End(usage, result.has_usage, &events);
      } else {
        responses_events_->Fail(result.error, &events);
        status = result.error.http_status;
      }
      keep(responses_events_->response());
      writer_->Write(std::move(events));
      writer_->End();
      return status;
    }
    if (ok) {
      auto answer = ResponseFromChat(result.body, responses_->skeleton, usage, result.has_usage);
      if (answer.index() == 1) {
        SendError(*writer_, {502, "the backend's answer could not be translated: " + std::get<1>(answer),
                             "api_error", "", ""}, Headers(info));
        return 502;
      }
      const nlohmann::json& response = std::get<0>(answer);
      keep(response);
      writer_->Respond(200, "application/json", response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                       Headers(info));
      return 200;
    }
    const int status = result.kind == BackendResult::Kind::kRejected ? result.http_status : result.error.http_status;
    HttpHeaders headers = Headers(info);
    if (result.retry_after_seconds >= 0) {
      headers.emplace_back("retry-after", std::to_string(static_cast<int64_t>(result.retry_after_seconds)));
    }
    if (result.kind == BackendResult::Kind::kRejected) {
      writer_->Respond(status, result.content_type, result.body, std::move(headers));
    } else {
      SendError(*writer_, result.error, std::move(headers));
    }
    return status;
  }

  // The server span (the trace's root), with the request's outcome; then the
  // trace's hold is let go (it is exported once the cache write, if any, ended).
  // result and info are null for a call cancelled before it ended.
  void EndServerSpan(const BackendResult* result, const CallInfo* info, int status) {
    span_done_ = true;
    RequestTrace& trace = *trace_.trace;
    const CompletionRequest& r = *request_;
    const std::string operation = r.endpoint == Endpoint::kChatCompletions ? "chat" : "text_completion";
    Span span{.name = "POST " + trace_.path,
              .id = trace.root(),
              .parent = trace.remote_parent(),
              .kind = SpanKind::kServer,
              .start = trace_.arrival,
              .end = SteadyClock::now()};
    std::vector<Attribute>& a = span.attributes;
    a.push_back({"http.request.method", std::string("POST")});
    a.push_back({"url.path", trace_.path});
    a.push_back({"http.response.status_code", static_cast<int64_t>(status)});
    a.push_back({"gen_ai.operation.name", operation});
    a.push_back({"gen_ai.request.model", r.model});
    a.push_back({"tachyon.request_id", request_id_});
    a.push_back({"tachyon.stream", r.stream});
    if (r.max_tokens) a.push_back({"gen_ai.request.max_tokens", *r.max_tokens});
    if (r.body.is_object() && r.body.contains("temperature") && r.body["temperature"].is_number()) {
      a.push_back({"gen_ai.request.temperature", r.body["temperature"].get<double>()});
    }
    if (trace.capture_content()) {
      const nlohmann::json& input = r.endpoint == Endpoint::kChatCompletions && r.body.contains("messages")
                                        ? r.body["messages"]
                                        : r.body.value("prompt", nlohmann::json());
      a.push_back({"gen_ai.input.messages", input.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)});
      std::string output = result && result->text ? *result->text : output_;
      a.push_back({"gen_ai.output.messages", std::move(output)});
    }
    if (info == nullptr) {
      span.error = true;
      span.status_message = "the client went away before the answer ended";
      a.push_back({"error.type", std::string("client_closed")});
    } else {
      if (!info->route.empty()) a.push_back({"tachyon.route", info->route});
      if (!info->backend.empty()) a.push_back({"tachyon.backend", info->backend});
      if (!info->response_model.empty()) a.push_back({"gen_ai.response.model", info->response_model});
      if (!info->cache.empty()) a.push_back({"tachyon.cache", info->cache});
      if (!info->route_class.empty()) a.push_back({"tachyon.route_class", info->route_class});
      if (info->ttft_seconds >= 0) a.push_back({"tachyon.ttft_ms", Millis(info->ttft_seconds)});
      a.push_back({"tachyon.attempts", static_cast<int64_t>(info->attempts)});
      if (result->has_usage) {
        a.push_back({"gen_ai.usage.input_tokens", result->usage.prompt_tokens});
        a.push_back({"gen_ai.usage.output_tokens", result->usage.completion_tokens});
      }
      if (result->num_cached_tokens >= 0) a.push_back({"tachyon.cached_tokens", result->num_cached_tokens});
      if (!result->finish_reason.empty()) a.push_back({"gen_ai.response.finish_reasons", result->finish_reason});
      if (result->kind != BackendResult::Kind::kOk) {
        span.error = true;
        span.status_message = result->error.message;
        a.push_back({"error.type", result->error_kind.empty() ? std::string("error") : result->error_kind});
      }
    }
    trace.Add(std::move(span));
    trace.Release();
  }

  HttpHeaders Headers(const CallInfo& info) const {
    HttpHeaders h = {{"x-request-id", request_id_}};
    h.insert(h.end(), key_.headers.begin(), key_.headers.end());
    if (std::string timing = ServerTiming(info); !timing.empty()) h.emplace_back("server-timing", std::move(timing));
    if (trace_.trace) {
      h.emplace_back("traceparent", trace_.trace->Traceparent(trace_.trace->root()));
    }
    if (!info.route.empty()) h.emplace_back("x-tachyon-route", RouteHeader(info));
    if (!info.backend.empty()) h.emplace_back("x-tachyon-backend", info.backend);
    if (!info.cache.empty()) h.emplace_back("x-tachyon-cache", info.cache);
    if (info.cache_age_seconds >= 0) h.emplace_back("age", std::to_string(static_cast<int64_t>(info.cache_age_seconds)));
    if (info.cache_similarity >= 0) {
      char similarity[16];
      std::snprintf(similarity, sizeof(similarity), "%.4f", info.cache_similarity);
      h.emplace_back("x-tachyon-cache-similarity", similarity);
    }
    if (!info.trimmed_tokens.empty()) h.emplace_back("x-tachyon-trimmed-tokens", TrimmedHeader(info));
    return h;
  }

  // "auto; class=small; rule=extraction": the route, and for a classify route its class and why.
  static std::string RouteHeader(const CallInfo& info) {
    if (info.route_class.empty()) return info.route;
    std::string value = info.route + "; class=" + info.route_class + "; " + info.route_reason;
    for (char& c : value) {  // class and label names come from files: no control bytes in a header
      if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
    }
    return value;
  }
  // "412; whitespace=12; duplicates=100; history=300": the total, then each step's.
  static std::string TrimmedHeader(const CallInfo& info) {
    int64_t total = 0;
    std::string steps;
    for (const auto& [step, n] : info.trimmed_tokens) {
      total += n;
      steps += "; " + step + "=" + std::to_string(n);
    }
    return std::to_string(total) + steps;
  }

  nlohmann::json LogLine(const BackendResult& result, const CallInfo& info, int status) const {
    nlohmann::json line = {{"request_id", request_id_},
                           {"id", id_},
                           {"route", info.route},
                           {"backend", info.backend},
                           {"attempts", info.attempts},
                           {"status", status},
                           {"stream", request_->stream},
                           {"ttft_ms", Millis(info.ttft_seconds)},
                           {"e2e_ms", Millis(info.e2e_seconds)}};
    if (!info.cache.empty()) line["cache"] = info.cache;
    if (info.hedges > 0) {
      line["hedged"] = info.hedges;
      line["winner"] = info.hedge_won ? "hedge" : "first";
    }
    if (info.cache_similarity >= 0) line["cache_similarity"] = info.cache_similarity;
    if (!info.route_class.empty()) {
      line["route_class"] = info.route_class;
      line["route_reason"] = info.route_reason;
    }
    if (!info.trimmed_tokens.empty()) {
      nlohmann::json trimmed = nlohmann::json::object();
      for (const auto& [step, n] : info.trimmed_tokens) trimmed[step] = n;
      line["trimmed_tokens"] = trimmed;
    }
    if (result.has_usage) {
      line["prompt_tokens"] = result.usage.prompt_tokens;
      line["completion_tokens"] = result.usage.completion_tokens;
    }
    if (result.num_cached_tokens >= 0) line["cached_tokens"] = result.num_cached_tokens;
    if (!result.finish_reason.empty()) line["finish_reason"] = result.finish_reason;
    if (trace_.trace) line["trace_id"] = trace_.trace->trace_id().Hex();
    if (key_.key) line["key"] = key_.key->config.name;
    if (result.kind != BackendResult::Kind::kOk) line["error"] = result.error_kind.empty() ? "error" : result.error_kind;
    return line;
  }

  std::shared_ptr<ResponseWriter> writer_;
  std::shared_ptr<const CompletionRequest> request_;
  std::string request_id_, id_;
  bool access_log_;
  std::string messages_model_;                   // /v1/messages: the model the answer names
  std::unique_ptr<MessagesEventWriter> messages_;  // /v1/messages: events from chunks
  CaptureStart capture_;
  TraceStart trace_;
  std::string output_;    // captured (or traced with content) requests: the answer's text so far (bounded)
  bool started_ = false;  // backend threads only, one at a time
  bool span_done_ = false;
  KeyUse key_;
  bool key_done_ = false;
  std::shared_ptr<ResponsesCall> responses_;                // /v1/responses: its framing and store
  std::unique_ptr<ResponsesEventWriter> responses_events_;  // /v1/responses: events from chunks
};

}  // namespace

OpenAiServer::OpenAiServer(OpenAiServerOptions options, GatewayHolder* gateway, MetricsRegistry* metrics,
                           WorkerPool* workers)
    : gateway_(gateway),
      metrics_(metrics),
      workers_(workers),
      rejected_(&metrics->AddCounter("tachyon:request_rejected_total",
                                     "Requests refused before reaching a route (bad JSON, wrong key...)", {"kind"})),
      started_(UnixNow()),
      stats_window_(std::make_unique<MetricsWindow>(metrics, StatsFamilies(), kStatsIntervalSeconds, kStatsSamples)) {
  options_ = WithKeyring(std::move(options), nullptr);
  stats_window_->Start();
}

std::shared_ptr<const OpenAiServerOptions> OpenAiServer::WithKeyring(OpenAiServerOptions options,
                                                                     const OpenAiServerOptions* previous) {
  std::vector<KeyConfig> keys = options.keys;
  if (!options.api_key.empty()) {  // the one --api-key: a key like the others, of the unscoped tenant
    const bool taken = std::any_of(keys.begin(), keys.end(), [](const KeyConfig& k) { return k.name == "default"; });
    keys.push_back({.name = taken ? "api-key" : "default", .sha256 = Sha256(options.api_key), .tenant = ""});
  }
  if (!keys.empty()) {
    auto ring = std::make_shared<Keyring>(std::move(keys), metrics_, options.shared_limits);
    if (previous != nullptr && previous->keyring) ring->Inherit(*previous->keyring);
    options.keyring = std::move(ring);
  } else {
    options.keyring = nullptr;
  }
  return std::make_shared<const OpenAiServerOptions>(std::move(options));
}

std::shared_ptr<const OpenAiServerOptions> OpenAiServer::Options() const {
  std::lock_guard<std::mutex> lock(options_mutex_);
  return options_;
}

void OpenAiServer::SetOptions(OpenAiServerOptions options) {
  // One reload at a time (SIGHUP's thread): the keyring inherits from the options it replaces.
  const std::shared_ptr<const OpenAiServerOptions> previous = Options();
  auto next = WithKeyring(std::move(options), previous.get());
  std::lock_guard<std::mutex> lock(options_mutex_);
  options_ = std::move(next);
}

std::string OpenAiServer::RequestId(const HttpRequest& request) {
  auto it = request.headers.find("x-request-id");
  if (it != request.headers.end() && UsableRequestId(it->second)) return it->second;
  static const std::string prefix = "req-" + std::to_string(::getpid()) + "-";
  return prefix + std::to_string(next_id_.fetch_add(1));
}

void OpenAiServer::Handle(HttpRequest request, std::shared_ptr<ResponseWriter> writer) {
  const SteadyClock::time_point arrival = SteadyClock::now();
  const std::string path = request.target.substr(0, request.target.find('?'));
  const std::shared_ptr<const OpenAiServerOptions> options = Options();
  OriginPolicyOptions origins = options->origins;
  origins.has_api_key = options->keyring != nullptr;
  const OriginVerdict verdict = CheckOrigin(origins, request);
  if (verdict.kind == OriginVerdict::Kind::kRefuse) {
    rejected_->With({verdict.code}).Add();
    SendError(*writer, {403, verdict.message, "permission_error", "", verdict.code});
    return;
  }
  if (verdict.kind == OriginVerdict::Kind::kCors) {
    if (request.method == "OPTIONS") {  // the preflight
      writer->Respond(204, "text/plain", "", CorsHeaders(verdict.origin, true));
      return;
    }
    writer = std::make_shared<CorsWriter>(std::move(writer), CorsHeaders(verdict.origin, false));
  }
  if (request.method == "GET" && (path == "/health" || path == "/ready")) {
    nlohmann::json body;
    const std::shared_ptr<Gateway> gateway = gateway_->Get();
    const int status = path == "/health" ? gateway->Health(&body) : gateway->Ready(&body);
    writer->Respond(status, "application/json", body.dump());
    return;
  }
  if (path == "/v1/cache") {  // the admin routes: their own key, not the clients'
    const size_t q = request.target.find('?');
    HandleCacheAdmin(request, q == std::string::npos ? "" : request.target.substr(q + 1), *writer);
    return;
  }
  if (path == "/v1/keys") {
    HandleKeysAdmin(request, *writer);
    return;
  }
  if (path == "/dashboard") {  // the page holds no figure; with a client key, it asks for it too
    if (request.method != "GET") {
      SendError(*writer, {405, "method " + request.method + " is not allowed on " + path, "invalid_request_error", "",
                          ""});
      return;
    }
    if (options->keyring && !options->keyring->Find(DashboardSecret(request))) {
      rejected_->With({"invalid_api_key"}).Add();
      writer->Respond(401, "text/plain; charset=utf-8",
                      "This server has a client key: open /dashboard?key=<the key> (or send Authorization: Bearer).\n");
      return;
    }
    writer->Respond(200, "text/html; charset=utf-8", kDashboardHtml,
                    {{"cache-control", "no-store"}, {"x-content-type-options", "nosniff"}});
    return;
  }
  const bool messages = path == "/v1/messages" || path == "/v1/messages/count_tokens";
  const bool open_metrics = options->public_metrics && path == "/metrics";
  KeyRef caller;  // the client's key (null: the server has none)
  if (options->keyring && !open_metrics) {
    caller = options->keyring->Find(BearerSecret(request));
    bool allowed = caller != nullptr;
    if (!allowed && path == "/metrics" && !options->metrics_key.empty()) {  // a scraper's own key
      auto it = request.headers.find("authorization");
      allowed = it != request.headers.end() && BearerMatches(it->second, options->metrics_key);
    }
    if (messages && !allowed) {  // Anthropic's clients send x-api-key (current ones Authorization too)
      auto key = request.headers.find("x-api-key");
      if (key != request.headers.end()) caller = options->keyring->Find(key->second);
      allowed = caller != nullptr;
    }
    if (!allowed) {
      rejected_->With({"invalid_api_key"}).Add();
      const ApiError e{401, "missing or wrong API key (Authorization: Bearer ...)", "authentication_error", "",
                       "invalid_api_key"};
      writer->Respond(401, "application/json", messages ? MessagesErrorBody(e) : ErrorBody(e));
      return;
    }
  }
  const bool completions = path == "/v1/completions", chat = path == "/v1/chat/completions";
  const bool embeddings = path == "/v1/embeddings";
  if (request.method == "GET" && path == "/metrics") {
    workers_->Post([this, writer] { writer->Respond(200, "text/plain; version=0.0.4", metrics_->Render()); });
  } else if (request.method == "GET" && path == "/v1/stats") {
    const size_t q = request.target.find('?');
    const std::string query = q == std::string::npos ? "" : request.target.substr(q + 1);
    workers_->Post([this, writer, query] { HandleStats(query, *writer); });
  } else if (request.method == "GET" && path == "/v1/models") {
    writer->Respond(200, "application/json", gateway_->Get()->Models(started_).dump());
  } else if (request.method == "POST" && (completions || chat)) {
    const Endpoint endpoint = chat ? Endpoint::kChatCompletions : Endpoint::kCompletions;
    if (request.body.size() <= kInlineParseBytes) {
      // Parsed here: a hop to a worker would cost more than the parse (the gateway
      // offloads what is costly: chat templates and tokenization).
      HandleCompletion(std::move(request), std::move(writer), endpoint, arrival, std::move(caller));
    } else {
      workers_->Post([this, request = std::move(request), writer, endpoint, arrival, caller]() mutable {
        HandleCompletion(std::move(request), std::move(writer), endpoint, arrival, std::move(caller));
      });
    }
  } else if (request.method == "POST" && messages) {
    const bool count = path == "/v1/messages/count_tokens";
    if (request.body.size() <= kInlineParseBytes) {
      HandleMessages(std::move(request), std::move(writer), count, arrival, std::move(caller));
    } else {
      workers_->Post([this, request = std::move(request), writer, count, arrival, caller]() mutable {
        HandleMessages(std::move(request), std::move(writer), count, arrival, std::move(caller));
      });
    }
  } else if (messages) {
    const ApiError e{405, "method " + request.method + " is not allowed on " + path, "invalid_request_error", "", ""};
    writer->Respond(405, "application/json", MessagesErrorBody(e));
  } else if (request.method == "POST" && path == "/v1/responses") {
    if (request.body.size() <= kInlineParseBytes) {
      HandleResponses(std::move(request), std::move(writer), arrival, std::move(caller));
    } else {
      workers_->Post([this, request = std::move(request), writer, arrival, caller]() mutable {
        HandleResponses(std::move(request), std::move(writer), arrival, std::move(caller));
      });
    }
  } else if (path.rfind("/v1/responses/", 0) == 0) {
    HandleStoredResponse(request, path, *writer, caller);
  } else if (request.method == "POST" && embeddings) {
    if (request.body.size() <= kInlineParseBytes) {
      HandleEmbeddings(std::move(request), std::move(writer), arrival, std::move(caller));
    } else {
      workers_->Post([this, request = std::move(request), writer, arrival, caller]() mutable {
        HandleEmbeddings(std::move(request), std::move(writer), arrival, std::move(caller));
      });
    }
  } else if (completions || chat || embeddings || path == "/v1/models" || path == "/metrics" || path == "/v1/stats" ||
             path == "/v1/responses") {
    SendError(*writer, {405, "method " + request.method + " is not allowed on " + path, "invalid_request_error", "", ""});
  } else {
    SendError(*writer, {404, "no route " + path, "not_found_error", "", ""});
  }
}

void OpenAiServer::HandleCompletion(HttpRequest http, std::shared_ptr<ResponseWriter> writer, Endpoint endpoint,
                                    SteadyClock::time_point arrival, KeyRef key) {
  if (writer->closed()) return;  // gone while queued
  const std::string request_id = RequestId(http);
  auto parsed = ParseCompletionRequest(http.body, endpoint);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    rejected_->With({"invalid_request"}).Add();
    SendError(*writer, *error, {{"x-request-id", request_id}});
    CaptureRejected(http, endpoint == Endpoint::kChatCompletions ? "/v1/chat/completions" : "/v1/completions",
                    request_id, arrival, *error);
    return;
  }
  auto request = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
  Dispatch(http, std::move(writer), std::move(request), request_id, arrival, "", std::move(key));
}

// /v1/messages: the Anthropic request as the chat request the gateway reads, and
// an answer framed back in Anthropic's shape.
void OpenAiServer::HandleMessages(HttpRequest http, std::shared_ptr<ResponseWriter> writer, bool count_tokens,
                                  SteadyClock::time_point arrival, KeyRef key) {
  if (writer->closed()) return;
  const std::string request_id = RequestId(http);
  auto refuse = [&](const ApiError& e) {
    rejected_->With({"invalid_request"}).Add();
    writer->Respond(e.http_status, "application/json", MessagesErrorBody(e), {{"x-request-id", request_id}});
    CaptureRejected(http, count_tokens ? "/v1/messages/count_tokens" : "/v1/messages", request_id, arrival, e);
  };
  auto chat = ChatBodyFromMessagesRequest(http.body, count_tokens);
  if (auto* error = std::get_if<ApiError>(&chat)) return refuse(*error);
  const nlohmann::json& body = std::get<nlohmann::json>(chat);
  if (count_tokens) {
    // An estimate that errs low (api/prompt_cache.h): the gateway has no hosted model's tokenizer.
    size_t bytes = body["messages"].dump().size() + (body.contains("tools") ? body["tools"].dump().size() : 0);
    writer->Respond(200, "application/json", nlohmann::json{{"input_tokens", LowTokenEstimate(bytes)}}.dump(),
                    {{"x-request-id", request_id}, {"x-tachyon-token-count", "estimate"}});
    return;
  }
  auto parsed = ParseCompletionRequest(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                                       Endpoint::kChatCompletions);
  if (auto* error = std::get_if<ApiError>(&parsed)) return refuse(*error);
  auto request = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(parsed)));
  Dispatch(http, std::move(writer), std::move(request), request_id, arrival, body["model"].get<std::string>(),
           std::move(key));
}

// /v1/responses: the Responses request, after the conversation its
// previous_response_id names, as the chat request the gateway reads; the answer
// framed back as a response object or its events, and kept when store is true.
void OpenAiServer::HandleResponses(HttpRequest http, std::shared_ptr<ResponseWriter> writer,
                                   SteadyClock::time_point arrival, KeyRef key) {
  if (writer->closed()) return;
  const std::string request_id = RequestId(http);
  auto refuse = [&](const ApiError& e) {
    rejected_->With({e.http_status == 404 ? "previous_response_not_found" : "invalid_request"}).Add();
    SendError(*writer, e, {{"x-request-id", request_id}});
    CaptureRejected(http, "/v1/responses", request_id, arrival, e);
  };
  auto parsed = ParseResponsesRequest(http.body);
  if (auto* error = std::get_if<ApiError>(&parsed)) return refuse(*error);
  auto call = std::make_shared<ResponsesCall>();
  call->request = std::move(std::get<ResponsesRequest>(parsed));
  call->tenant = key ? key->config.tenant : "";
  const ResponsesRequest& r = call->request;
  const std::shared_ptr<ResponseStore> stored = gateway_->Get()->responses();
  nlohmann::json history = nlohmann::json::array();
  if (!r.previous_response_id.empty()) {
    std::shared_ptr<const ResponseStore::Entry> previous =
        stored->Get(r.previous_response_id, call->tenant, UnixSecondsNow());
    if (previous == nullptr) {
      return refuse({404, "Previous response with id '" + r.previous_response_id + "' not found.",
                     "invalid_request_error", "previous_response_id", "previous_response_not_found"});
    }
    history = previous->conversation;
    for (const nlohmann::json& item : previous->response["output"]) history.push_back(item);
  }
  const nlohmann::json chat = ChatBodyFromResponses(r, history);
  auto completion = ParseCompletionRequest(chat.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                                           Endpoint::kChatCompletions);
  if (auto* error = std::get_if<ApiError>(&completion)) return refuse(*error);
  const std::string id = NewResponseId();
  call->skeleton = ResponseSkeleton(r, id, UnixNow());
  if (r.store) {
    call->store = stored;
    call->conversation = std::move(history);
    size_t n = 0;
    for (nlohmann::json item : r.input_items) {  // listed with ids, as OpenAI lists input items
      if (!item.contains("id")) item["id"] = "msg_" + id.substr(5) + "_in" + std::to_string(n);
      ++n;
      call->conversation.push_back(std::move(item));
    }
  }
  auto request = std::make_shared<CompletionRequest>(std::move(std::get<CompletionRequest>(completion)));
  Dispatch(http, std::move(writer), std::move(request), request_id, arrival, "", std::move(key), std::move(call));
}

void OpenAiServer::HandleStoredResponse(const HttpRequest& request, const std::string& path, ResponseWriter& writer,
                                        KeyRef key) {
  std::string id = path.substr(std::string("/v1/responses/").size());
  const bool items = id.size() > 12 && id.compare(id.size() - 12, 12, "/input_items") == 0;
  if (items) id.resize(id.size() - 12);
  const bool get = request.method == "GET", del = request.method == "DELETE" && !items;
  if (!get && !del) {
    SendError(writer, {405, "method " + request.method + " is not allowed on " + path, "invalid_request_error", "", ""});
    return;
  }
  const std::string tenant = key ? key->config.tenant : "";
  const double now = UnixSecondsNow();
  const std::shared_ptr<ResponseStore> responses = gateway_->Get()->responses();
  const ApiError missing{404, "Response with id '" + id + "' not found.", "invalid_request_error", "", "not_found"};
  if (del) {
    if (!responses->Delete(id, tenant, now)) return SendError(writer, missing);
    writer.Respond(200, "application/json",
                   nlohmann::json{{"id", id}, {"object", "response"}, {"deleted", true}}.dump());
    return;
  }
  std::shared_ptr<const ResponseStore::Entry> entry = responses->Get(id, tenant, now);
  if (entry == nullptr) return SendError(writer, missing);
  if (!items) {
    writer.Respond(200, "application/json",
                   entry->response.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return;
  }
  // ?limit=1..100 (20), order=asc|desc (desc, as OpenAI), after=ITEM_ID.
  std::map<std::string, std::string> query = ParseQuery(QueryOf(request.target));
  int limit = 20;
  if (query.count("limit")) {
    char* end = nullptr;
    const long v = std::strtol(query["limit"].c_str(), &end, 10);
    if (*end != '\0' || v < 1 || v > 100) {
      return SendError(writer, {400, "Invalid 'limit': expected an integer from 1 to 100.", "invalid_request_error",
                                "limit", ""});
    }
    limit = static_cast<int>(v);
  }
  const std::string order = query.count("order") ? query["order"] : "desc";
  if (order != "asc" && order != "desc") {
    return SendError(writer, {400, "Invalid 'order': expected 'asc' or 'desc'.", "invalid_request_error", "order", ""});
  }
  std::vector<const nlohmann::json*> all;
  for (const nlohmann::json& item : entry->conversation) all.push_back(&item);
  if (order == "desc") std::reverse(all.begin(), all.end());
  size_t start = 0;
  if (query.count("after")) {
    while (start < all.size() && all[start]->value("id", std::string()) != query["after"]) ++start;
    start = start < all.size() ? start + 1 : all.size();
  }
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = start; i < all.size() && data.size() < static_cast<size_t>(limit); ++i) data.push_back(*all[i]);
  const bool more = start + data.size() < all.size();
  nlohmann::json list = {{"object", "list"},
                         {"data", data},
                         {"first_id", data.empty() ? nlohmann::json(nullptr) : data.front().value("id", nlohmann::json())},
                         {"last_id", data.empty() ? nlohmann::json(nullptr) : data.back().value("id", nlohmann::json())},
                         {"has_more", more}};
  writer.Respond(200, "application/json", list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void OpenAiServer::Dispatch(const HttpRequest& http, std::shared_ptr<ResponseWriter> writer,
                            std::shared_ptr<CompletionRequest> request, const std::string& request_id,
                            SteadyClock::time_point arrival, const std::string& messages_model, KeyRef key,
                            std::shared_ptr<ResponsesCall> responses) {
  const Endpoint endpoint = request->endpoint;
  const std::shared_ptr<Gateway> gateway = gateway_->Get();
  KeyUse key_use;
  if (key) {
    if (std::optional<ApiError> e = AdmitKey(std::move(key), gateway->RouteName(request->model), request->model,
                                             http.body.size(), &key_use)) {
      HttpHeaders headers = {{"x-request-id", request_id}};
      headers.insert(headers.end(), key_use.headers.begin(), key_use.headers.end());
      writer->Respond(e->http_status, "application/json",
                      messages_model.empty() ? ErrorBody(*e) : MessagesErrorBody(*e), std::move(headers));
      return;
    }
  }
  const int64_t n = next_id_.fetch_add(1);
  GatewayRequest g{.request = request,
                   .id = (endpoint == Endpoint::kChatCompletions ? "chatcmpl-" : "cmpl-") + std::to_string(n),
                   .created = UnixNow(),
                   .request_id = request_id,
                   .tenant = key_use.key ? key_use.key->config.tenant : "",  // the key's: caches are scoped by it
                   .arrival = arrival};
  if (auto it = http.headers.find("cache-control"); it != http.headers.end()) {
    for (char c : it->second) g.cache_control += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (auto it = http.headers.find("x-tachyon-hedge"); it != http.headers.end()) {
    std::string value;
    for (char c : it->second) value += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    g.hedge = value != "off";
  }
  const std::shared_ptr<const OpenAiServerOptions> options = Options();
  if (options->pause_unsent_bytes > 0) {
    std::weak_ptr<ResponseWriter> weak = writer;
    g.output_blocked = [weak, limit = options->pause_unsent_bytes] {
      std::shared_ptr<ResponseWriter> w = weak.lock();
      return w != nullptr && w->unsent_bytes() > limit;
    };
  }
  CaptureStart capture{.endpoint = !messages_model.empty()                     ? "/v1/messages"
                                    : responses                              ? "/v1/responses"
                                    : endpoint == Endpoint::kChatCompletions ? "/v1/chat/completions"
                                                                             : "/v1/completions",
                       .arrival = arrival};
  if (options->capture && options->capture->Sample()) {
    capture.writer = options->capture;
    capture.body = http.body;  // with bodies off, only output_ngram_share reads it
  }
  TraceStart trace{.path = capture.endpoint, .arrival = arrival};
  if (options->tracer) {
    auto header = [&](const char* name) {
      auto it = http.headers.find(name);
      return it == http.headers.end() ? std::string_view() : std::string_view(it->second);
    };
    trace.trace = options->tracer->Start(header("traceparent"), header("tracestate"));
    if (trace.trace && options->exporter) {
      trace.trace->OnFinish([exporter = options->exporter](RequestTrace& t) { exporter->Add(FinishedSpans(t)); });
    }
    g.trace = trace.trace;
  }
  auto sink = std::make_shared<HttpSink>(writer, request, request_id, g.id, options->access_log, messages_model,
                                         std::move(capture), std::move(trace), std::move(key_use),
                                         std::move(responses));
  CancelFn cancel = gateway->Handle(std::move(g), std::move(sink));
  writer->OnClose(std::move(cancel));
}

// A request refused before the gateway (its body did not parse or validate):
// captured with its status and error, so an audit sees what clients send wrong.
void OpenAiServer::CaptureRejected(const HttpRequest& http, const std::string& endpoint, const std::string& request_id,
                                   SteadyClock::time_point arrival, const ApiError& error) {
  const std::shared_ptr<const OpenAiServerOptions> options = Options();
  if (!options->capture || !options->capture->Sample()) return;
  nlohmann::json line = {{"request_id", request_id},
                         {"ts", UnixSecondsAt(arrival)},
                         {"endpoint", endpoint},
                         {"route", ""},
                         {"backend", ""},
                         {"tenant", ""},
                         {"status", error.http_status},
                         {"error", error.code.empty() ? "invalid_request" : error.code},
                         {"e2e_ms", Millis(std::chrono::duration<double>(SteadyClock::now() - arrival).count())}};
  options->capture->Add({.line = std::move(line), .body = options->capture->options().bodies ? http.body : "", .output = ""});
}

void OpenAiServer::HandleStats(const std::string& query, ResponseWriter& writer) {
  StatsQuery q;
  std::string error;
  if (!ParseStatsQuery(query, &q, &error)) {
    SendError(writer, {400, "GET /v1/stats: " + error, "invalid_request_error", "", ""});
    return;
  }
  nlohmann::json health;
  gateway_->Get()->Health(&health);
  const nlohmann::json report = StatsReport(*stats_window_, health, q, static_cast<double>(UnixNow() - started_));
  writer.Respond(200, "application/json", report.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                 {{"cache-control", "no-store"}});
}

bool OpenAiServer::AdminAllowed(const HttpRequest& request, const OpenAiServerOptions& options,
                                ResponseWriter& writer) {
  if (options.admin_key.empty()) {
    SendError(writer, {403, "the admin routes (/v1/cache, /v1/keys) need an admin key (--admin-key or [server] "
                            "admin_key_env)",
                       "permission_error", "", "no_admin_key"});
    return false;
  }
  auto it = request.headers.find("authorization");
  if (it == request.headers.end() || !BearerMatches(it->second, options.admin_key)) {
    rejected_->With({"invalid_admin_key"}).Add();
    SendError(writer, {401, "missing or wrong admin key (Authorization: Bearer ...)", "authentication_error", "",
                       "invalid_api_key"});
    return false;
  }
  return true;
}

void OpenAiServer::HandleKeysAdmin(const HttpRequest& request, ResponseWriter& writer) {
  const std::shared_ptr<const OpenAiServerOptions> options = Options();
  if (!AdminAllowed(request, *options, writer)) return;
  if (request.method != "GET") {
    SendError(writer, {405, "method " + request.method + " is not allowed on /v1/keys", "invalid_request_error", "",
                       ""});
    return;
  }
  const nlohmann::json keys = options->keyring ? options->keyring->Describe(UnixSecondsNow())
                                               : nlohmann::json{{"object", "list"}, {"data", nlohmann::json::array()}};
  writer.Respond(200, "application/json", keys.dump(), {{"cache-control", "no-store"}});
}

void OpenAiServer::HandleCacheAdmin(const HttpRequest& request, const std::string& query, ResponseWriter& writer) {
  const std::shared_ptr<const OpenAiServerOptions> options = Options();
  if (!AdminAllowed(request, *options, writer)) return;
  // ?route=NAME&tenant=NAME, percent-decoded.
  const std::map<std::string, std::string> params = ParseQuery(query);
  const std::string route = params.count("route") ? params.at("route") : "";
  const std::string tenant = params.count("tenant") ? params.at("tenant") : "";
  const std::shared_ptr<const Gateway> gateway = gateway_->Get();
  ExactCache* exact = gateway->exact_cache();
  SemanticCache* semantic = gateway->semantic_cache();
  if (request.method == "GET") {
    nlohmann::json stats = exact ? exact->Stats() : nlohmann::json{{"entries", 0}, {"bytes", 0}, {"routes", {}}};
    stats["semantic"] = semantic ? semantic->Stats() : nlohmann::json{{"entries", 0}, {"bytes", 0}, {"routes", {}}};
    for (const auto& [name, audit] : gateway->semantic_audits()) stats["semantic"]["audits"][name] = audit->Stats();
    const ResponseStore& responses = *gateway->responses();
    stats["responses"] = {{"entries", responses.size()}, {"bytes", responses.bytes()}, {"store", responses.describe()}};
    writer.Respond(200, "application/json", stats.dump());
  } else if (request.method == "DELETE") {
    const size_t exact_purged = exact ? exact->Purge(route, tenant) : 0;
    const size_t semantic_purged = semantic ? semantic->Purge(route, tenant) : 0;
    // Stored responses belong to a tenant, not a route: a purge of a route leaves them.
    const size_t responses_purged = route.empty() ? gateway->responses()->Purge(tenant) : 0;
    writer.Respond(200, "application/json",
                   nlohmann::json({{"purged", exact_purged + semantic_purged + responses_purged},
                                   {"exact", exact_purged},
                                   {"semantic", semantic_purged},
                                   {"responses", responses_purged},
                                   {"route", route},
                                   {"tenant", tenant}})
                       .dump());
  } else {
    SendError(writer, {405, "method " + request.method + " is not allowed on /v1/cache", "invalid_request_error", "", ""});
  }
}

void OpenAiServer::HandleEmbeddings(HttpRequest http, std::shared_ptr<ResponseWriter> writer,
                                    SteadyClock::time_point arrival, KeyRef key) {
  if (writer->closed()) return;
  const std::string request_id = RequestId(http);
  auto parsed = ParseEmbeddingRequest(http.body);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    rejected_->With({"invalid_request"}).Add();
    SendError(*writer, *error, {{"x-request-id", request_id}});
    return;
  }
  EmbeddingRequest request = std::move(std::get<EmbeddingRequest>(parsed));
  std::shared_ptr<Gateway> gateway = gateway_->Get();
  std::string names;
  std::shared_ptr<EmbeddingBackend> backend = gateway->FindEmbedding(request.model, &names);
  if (backend == nullptr) {
    rejected_->With({"unknown_model"}).Add();
    const ApiError error =
        names.empty() ? ApiError{404, "this server serves no embedding model (--embedding-model, or a [[backend]] "
                                      "of kind \"embedding\")", "invalid_request_error", "model", "model_not_found"}
        : request.model.empty()
            ? ApiError{400, "'model' is required: this server's embedding models are " + names,
                       "invalid_request_error", "model", ""}
            : ApiError{404, "the embedding model '" + request.model + "' does not exist; this server's are " + names,
                       "invalid_request_error", "model", "model_not_found"};
    SendError(*writer, error, {{"x-request-id", request_id}});
    return;
  }
  if (std::optional<ApiError> error = CheckEmbeddingInputLimit(request, backend->max_inputs())) {
    rejected_->With({"invalid_request"}).Add();
    SendError(*writer, *error, {{"x-request-id", request_id}});
    return;
  }
  KeyUse key_use;  // an embedding model is a route for a key's `routes`
  if (key) {
    if (std::optional<ApiError> e = AdmitKey(std::move(key), backend->model_name(), backend->model_name(),
                                             http.body.size(), &key_use)) {
      HttpHeaders headers = {{"x-request-id", request_id}};
      headers.insert(headers.end(), key_use.headers.begin(), key_use.headers.end());
      SendError(*writer, *e, std::move(headers));
      return;
    }
  }
  const std::shared_ptr<const OpenAiServerOptions> options = Options();
  const bool access_log = options->access_log;
  std::shared_ptr<CaptureWriter> capture = options->capture && options->capture->Sample() ? options->capture : nullptr;
  std::string body = capture && capture->options().bodies ? http.body : "";
  const std::string model = backend->model_name(), backend_name = backend->name();
  // The gateway stays alive until the answer is written (a reload may replace it meanwhile).
  CancelFn cancel = backend->Handle(
      std::move(request), [writer, gateway, request_id, model, backend_name, access_log, arrival, capture,
                           body = std::move(body), key_use = std::move(key_use)](EmbeddingAnswer a) mutable {
        HttpHeaders headers = {{"x-request-id", request_id}, {"x-tachyon-route", model}, {"x-tachyon-backend", backend_name}};
        headers.insert(headers.end(), key_use.headers.begin(), key_use.headers.end());
        writer->Respond(a.http_status, "application/json", std::move(a.body), std::move(headers));
        if (key_use.key) {
          Keyring::Finish(*key_use.key, key_use.charged, a.prompt_tokens, 0, a.http_status, UnixSecondsNow());
        }
        if (!access_log && !capture) return;
        nlohmann::json line = {{"request_id", request_id},
                               {"endpoint", "embeddings"},
                               {"route", model},
                               {"backend", backend_name},
                               {"status", a.http_status},
                               {"inputs", a.num_inputs},
                               {"prompt_tokens", a.prompt_tokens},
                               {"e2e_ms", Millis(std::chrono::duration<double>(SteadyClock::now() - arrival).count())}};
        if (access_log) {
          std::fprintf(stderr, "%s\n", line.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        }
        if (capture) {
          line["endpoint"] = "/v1/embeddings";
          line["ts"] = UnixSecondsAt(arrival);
          line["tenant"] = key_use.key ? key_use.key->config.tenant : "";
          line["stream"] = false;
          capture->Add({.line = std::move(line), .body = std::move(body), .output = ""});
        }
      });
  writer->OnClose(std::move(cancel));
}

}  // namespace tachyon
