#include "backend/remote_backend.h"

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "api/anthropic.h"
#include "api/json_parse.h"
#include "http/sse_parser.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

// Bytes of an error body kept for the message.
constexpr size_t kMaxErrorBody = 64 << 10;
// An upstream event longer than this is not an OpenAI chunk.
constexpr size_t kMaxEventBytes = 16 << 20;
// The longest Retry-After honoured (a breaker kept open longer is an outage of our own making).
constexpr double kMaxRetryAfterSeconds = 300;

// Retry-After in seconds (RFC 9110 section 10.2.3: delay-seconds; an HTTP date is
// not read), bounded; -1 when absent or not a number.
double RetryAfterSeconds(const HttpResponseHead& head) {
  auto it = head.headers.find("retry-after");
  if (it == head.headers.end() || it->second.empty()) return -1;
  double seconds = 0;
  for (char c : it->second) {
    if (c < '0' || c > '9') return -1;
    seconds = std::min(kMaxRetryAfterSeconds, seconds * 10 + (c - '0'));
  }
  return seconds;
}

}  // namespace

// One call, on the loop thread after Start.
struct RemoteBackend::Call {
  RemoteBackend* backend;
  StreamChunkParser* parser;  // of the loop the call runs on
  std::shared_ptr<BackendSink> sink;
  bool stream = false;
  bool chat = false;
  Clock::time_point sent;
  HttpResponseHead head;
  bool got_head = false;
  bool forwarded = false;  // an event went to the sink: no other backend may be tried now
  bool saw_done = false;   // the upstream's [DONE]
  bool failed = false;     // a result was already given
  BackendResult result;
  std::string body;        // not streamed, or an error body
  std::unique_ptr<SseParser> events;
  // Anthropic: what the translated answer carries, and the stream's translator.
  bool anthropic = false;
  std::string id, model;
  int64_t created = 0;
  bool include_usage = false;
  std::unique_ptr<MessagesStreamTranslator> translator;

  const std::string& name() const { return backend->options_.name; }

  void Finish(BackendResult r) {
    if (failed) return;
    failed = true;
    sink->OnDone(std::move(r));
  }

  // Before the first event: the route may try another backend.
  void Fail(int status, std::string message, std::string kind, std::string type = "upstream_error") {
    BackendResult r;
    r.kind = forwarded ? BackendResult::Kind::kBroken : BackendResult::Kind::kFailed;
    r.http_status = status;
    r.error = ApiError{status, "backend '" + name() + "': " + message, std::move(type), "", kind};
    r.error_kind = std::move(kind);
    r.first_byte_seconds = result.first_byte_seconds;
    r.retry_after_seconds = result.retry_after_seconds;
    Finish(std::move(r));
  }

  void OnHead(const HttpResponseHead& h) {
    head = h;
    got_head = true;
    result.first_byte_seconds = std::chrono::duration<double>(Clock::now() - sent).count();
    if (stream && head.status == 200) {
      if (anthropic) {
        translator = std::make_unique<MessagesStreamTranslator>(id, created, model, include_usage);
        events = std::make_unique<SseParser>([this](std::string_view data) { OnMessagesEvent(data); });
      } else {
        events = std::make_unique<SseParser>([this](std::string_view data) { OnEvent(data); });
      }
    }
  }

  void OnData(std::string_view data) {
    if (failed) return;
    if (events) {
      events->Feed(data);
      if (events->pending_bytes() > kMaxEventBytes) {
        Fail(502, "an event of more than 16 MiB: not an OpenAI stream", "oversized_event");
      }
      return;
    }
    if (head.status == 200 && result.first_token_seconds < 0) {  // a whole answer's first token: its body's first byte
      result.first_token_seconds = std::chrono::duration<double>(Clock::now() - sent).count();
    }
    const size_t limit = head.status == 200 ? backend->options_.max_body_bytes : kMaxErrorBody;
    if (body.size() + data.size() > limit) {
      if (head.status == 200) {
        Fail(502, "the answer is larger than " + std::to_string(limit) + " bytes", "oversized_body");
      }
      return;  // an error body: its start is enough
    }
    body.append(data);
  }

  void OnEvent(std::string_view data) {
    if (failed) return;
    if (data == "[DONE]") {
      saw_done = true;
      return;
    }
    StreamChunk chunk;
    if (!parser->Parse(data, chat, &chunk)) {
      Fail(502, "an event that is not a JSON object: " + std::string(data.substr(0, 200)), "malformed_event");
      return;
    }
    if (chunk.is_error) {
      Fail(502, "error in the stream: " + ErrorMessageOf(std::string(data)), "stream_error");
      return;
    }
    if (chunk.has_usage) {
      result.has_usage = true;
      result.usage = {chunk.prompt_tokens, chunk.completion_tokens, chunk.cached_tokens};
      if (chunk.cached_tokens >= 0) result.num_cached_tokens = chunk.cached_tokens;
    }
    if (!chunk.finish_reason.empty()) result.finish_reason = std::string(chunk.finish_reason);
    forwarded = true;
    sink->OnChunk(BackendChunk{.event = std::string(data),
                               .text = std::string(chunk.text),
                               .finish_reason = std::string(chunk.finish_reason),
                               .reasoning = chunk.text_is_reasoning,
                               .has_tool_calls = chunk.has_tool_calls});
  }

  // Anthropic: one Messages event, handed on as the OpenAI chunks it makes.
  void OnMessagesEvent(std::string_view data) {
    if (failed) return;
    std::vector<MessagesStreamTranslator::Chunk> chunks;
    bool upstream_error = false;
    const std::string error = translator->Feed(data, &chunks, &upstream_error);
    if (!error.empty()) {
      if (upstream_error) {
        Fail(502, "error in the stream: " + error, "stream_error");
      } else {
        Fail(502, "not an Anthropic stream: " + error, "malformed_event");
      }
      return;
    }
    for (MessagesStreamTranslator::Chunk& c : chunks) {
      forwarded = true;
      sink->OnChunk(BackendChunk{.event = std::move(c.event),
                                 .text = std::move(c.text),
                                 .finish_reason = std::move(c.finish_reason),
                                 .reasoning = c.reasoning,
                                 .has_tool_calls = c.has_tool_calls});
      if (failed) return;
    }
    if (translator->stopped()) {
      result.finish_reason = translator->finish_reason();
      SetUsage(translator->usage());
    }
  }

  void SetUsage(const MessagesUsage& u) {
    result.has_usage = true;
    result.usage = {u.prompt_tokens(), u.output_tokens, u.cache_read_tokens};
    result.num_cached_tokens = u.cache_read_tokens;
    result.cache_write_tokens = u.cache_write_tokens;
  }

  // Anthropic: the whole answer as a chat.completion.
  void FinishMessagesAnswer() {
    auto translated = ChatAnswerFromMessages(body, id, created, model);
    if (auto* error = std::get_if<std::string>(&translated)) {
      Fail(502, *error, "malformed_body");
      return;
    }
    TranslatedAnswer& a = std::get<TranslatedAnswer>(translated);
    SetUsage(a.usage);
    result.finish_reason = a.finish_reason;
    result.text = std::move(a.text);
    result.kind = BackendResult::Kind::kOk;
    result.body = std::move(a.body);
    Finish(std::move(result));
  }

  void OnDone(const Status& status) {
    if (failed) return;
    if (!status.ok()) {
      std::string kind = status.code() == StatusCode::kOutOfRange ? (got_head ? "timeout" : "first_byte_timeout")
                         : status.code() == StatusCode::kDataLoss ? "truncated"
                         : got_head                               ? "read"
                                                                  : "connect";
      Fail(kind == "first_byte_timeout" || kind == "timeout" ? 504 : 502, status.message(), kind,
           kind == "timeout" || kind == "first_byte_timeout" ? "timeout_error" : "upstream_error");
      return;
    }
    if (head.status == 401 || head.status == 403) {
      // Our key, not the client's: the upstream's text is not relayed (OpenAI's shows the masked key).
      if (!backend->auth_refused_.exchange(true)) {
        std::fprintf(stderr,
                     "tachyon: backend '%s': the upstream answered %d to the gateway's key (check the backend's "
                     "api_key_env); its requests fail with 502 upstream_auth_failed until it accepts it\n",
                     name().c_str(), head.status);
      }
      Fail(502, "the upstream refused the gateway's credentials (" + std::to_string(head.status) + ")",
           "upstream_auth_failed");
      return;
    }
    if (head.status == 429 || (head.status >= 500 && head.status <= 599)) {
      // Overloaded or failing: another backend of the route may answer; the breaker
      // keeps this one out for as long as it asked (Retry-After).
      result.retry_after_seconds = RetryAfterSeconds(head);
      if (head.status == 429) {
        Fail(429, "answered 429 (rate limited): " + ErrorMessageOf(body), "upstream_429", "rate_limit_error");
      } else if (head.status == 529) {  // Anthropic's "overloaded"
        Fail(503, "answered 529 (overloaded): " + ErrorMessageOf(body), "upstream_overloaded", "overloaded_error");
      } else {
        Fail(502, "answered " + std::to_string(head.status) + ": " + ErrorMessageOf(body), "upstream_5xx");
      }
      return;
    }
    if (backend->auth_refused_.exchange(false)) {
      std::fprintf(stderr, "tachyon: backend '%s': the upstream accepts the gateway's key again\n", name().c_str());
    }
    // No status a client could be given as it is: not three digits of a known class,
    // informational (a 1xx as the final answer), or one that has no body.
    if (head.status < 200 || head.status > 599 || head.status == 204 || head.status == 205 || head.status == 304) {
      Fail(502, "answered status " + std::to_string(head.status) + ", which cannot carry an answer", "upstream_bad_status");
      return;
    }
    if (head.status != 200) {  // 4xx (and odd 2xx/3xx): the upstream's answer as it is
      result.kind = BackendResult::Kind::kRejected;
      result.http_status = head.status;
      auto type = head.headers.find("content-type");
      result.content_type = type != head.headers.end() ? type->second : "application/json";
      result.body = std::move(body);
      result.error = ApiError{head.status, ErrorMessageOf(result.body), "upstream_error", "", ""};
      if (anthropic) {  // Anthropic's error shape, told in OpenAI's
        result.error = ApiErrorFromMessagesError(head.status, result.body);
        result.body = ErrorBody(result.error);
        result.content_type = "application/json";
      }
      result.error_kind = "upstream_4xx";
      Finish(std::move(result));
      return;
    }
    if (stream) {
      if (!events) {
        auto type = head.headers.find("content-type");
        Fail(502, "answered '" + (type != head.headers.end() ? type->second : std::string("no content type")) +
                      "', not an event stream",
             "not_streamed");
        return;
      }
      if (anthropic ? !translator->stopped() : !saw_done && result.finish_reason.empty()) {
        Fail(502, "the stream ended before its last chunk", "truncated");
        return;
      }
      result.kind = BackendResult::Kind::kOk;
      Finish(std::move(result));
      return;
    }
    if (anthropic) {
      FinishMessagesAnswer();
      return;
    }
    nlohmann::json j = ParseJson(body);  // an answer nested past kMaxJsonDepth is refused as not JSON
    if (!j.is_object()) {
      Fail(502, "the answer is not a JSON object", "malformed_body");
      return;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      const nlohmann::json& u = j["usage"];
      result.has_usage = true;
      result.usage.prompt_tokens = std::max<int64_t>(0, IntField(u, "prompt_tokens"));
      result.usage.completion_tokens = std::max<int64_t>(0, IntField(u, "completion_tokens"));
      if (u.contains("prompt_tokens_details") && u["prompt_tokens_details"].is_object()) {
        const nlohmann::json& d = u["prompt_tokens_details"];
        if (d.contains("cached_tokens") && d["cached_tokens"].is_number_integer() && d["cached_tokens"] >= 0) {
          result.num_cached_tokens = result.usage.cached_tokens = d["cached_tokens"].get<int64_t>();
        }
      }
    }
    if (j.contains("choices") && j["choices"].is_array() && !j["choices"].empty() &&
        j["choices"][0].is_object() && j["choices"][0].contains("finish_reason") &&
        j["choices"][0]["finish_reason"].is_string()) {
      result.finish_reason = j["choices"][0]["finish_reason"].get<std::string>();
    }
    result.text = PlainAnswerText(j, chat ? Endpoint::kChatCompletions : Endpoint::kCompletions);
    result.kind = BackendResult::Kind::kOk;
    result.body = std::move(body);
    Finish(std::move(result));
  }
};

RemoteBackend::RemoteBackend(RemoteBackendOptions options, HttpUrl url)
    : options_(std::move(options)),
      url_(std::move(url)),
      model_name_(options_.upstream_model.empty() ? options_.name : options_.upstream_model),
      client_options_{.verify_peer = options_.verify_tls,
                      .ca_file = options_.ca_file,
                      .user_agent = "tachyon",
                      .max_idle_per_host = options_.pool_size} {
  own_ = std::make_unique<LoopClient>();
  own_->client = std::make_unique<HttpClient>(client_options_);
  thread_ = std::thread([this] { own_->client->RunUntilStopped(); });
}

RemoteBackend::LoopClient* RemoteBackend::ClientFor(EventLoop* loop) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (shut_down_) return nullptr;
  if (loop == nullptr) return own_.get();
  std::unique_ptr<LoopClient>& c = shared_[loop];
  if (!c) {
    c = std::make_unique<LoopClient>();
    c->client = std::make_unique<HttpClient>(loop, client_options_);
  }
  return c.get();
}

bool RemoteBackend::OnOwnThread() const {
  if (std::this_thread::get_id() == thread_.get_id()) return true;
  std::lock_guard<std::mutex> lock(mutex_);
  return shared_.count(CurrentEventLoop()) > 0;
}

StatusOr<std::unique_ptr<RemoteBackend>> RemoteBackend::Create(const RemoteBackendOptions& options) {
  StatusOr<HttpUrl> url = ParseHttpUrl(options.base_url);
  if (!url.ok()) return InvalidArgumentError("base_url: " + url.status().message());
  if (options.total_timeout_seconds <= 0) return InvalidArgumentError("total_timeout must be above 0 seconds");
  return std::unique_ptr<RemoteBackend>(new RemoteBackend(options, *url));
}

RemoteBackend::~RemoteBackend() { Shutdown(); }

void RemoteBackend::Shutdown() {
  std::unordered_map<EventLoop*, std::unique_ptr<LoopClient>> shared;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shut_down_) return;
    shut_down_ = true;
    shared.swap(shared_);
  }
  own_->client->Stop();
  thread_.join();
  own_.reset();  // the unfinished exchanges' frames, and the sinks they hold, go with it
  // Those on I/O loops end there (the server stops its loops before the gateway shuts down).
  shared.clear();
}

CancelFn RemoteBackend::Start(BackendRequest request, std::shared_ptr<BackendSink> sink) {
  const CompletionRequest& r = *request.request;
  LoopClient* loop_client = ClientFor(CurrentEventLoop());
  if (loop_client == nullptr) {
    BackendResult refused;
    refused.kind = BackendResult::Kind::kFailed;
    refused.http_status = 503;
    refused.error = ApiError{503, "backend '" + options_.name + "' is shut down", "service_unavailable", "",
                             "shutting_down"};
    refused.error_kind = "shutting_down";
    sink->OnDone(std::move(refused));
    return [] {};
  }
  const bool anthropic = options_.dialect == UpstreamDialect::kAnthropic;
  // The client's bytes as they came (raw_body) where the gateway read them as any
  // reader would; else the parsed body written again; renamed when the backend names its model.
  std::string body;
  if (anthropic) {
    auto translated = MessagesRequestFromChat(r, {.model = options_.upstream_model,
                                                  .default_max_tokens = options_.default_max_tokens,
                                                  .prompt_cache = request.prompt_cache});
    if (auto* error = std::get_if<ApiError>(&translated)) {
      error->message = "backend '" + options_.name + "' (anthropic): " + error->message;
      BackendResult refused;
      refused.kind = BackendResult::Kind::kRejected;
      refused.http_status = error->http_status;
      refused.body = ErrorBody(*error);
      refused.error = *error;
      refused.error_kind = "untranslatable";
      sink->OnDone(std::move(refused));
      return [] {};
    }
    body = std::get<nlohmann::json>(translated).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else if (request.prompt_cache.automatic && r.endpoint == Endpoint::kChatCompletions) {
    // Canonical bytes (keys sorted, no whitespace) so the provider's prefix cache
    // sees the same prefix whatever the client's key order, and a prompt_cache_key
    // that groups the requests sharing the stable prefix, unless the client chose one.
    nlohmann::json canonical = r.body;
    if (!options_.upstream_model.empty()) canonical["model"] = options_.upstream_model;
    if (!canonical.contains("prompt_cache_key") || canonical["prompt_cache_key"].is_null()) {
      canonical["prompt_cache_key"] = PromptCacheKey(r.body, request.prompt_cache.scope);
    }
    body = canonical.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else if (options_.upstream_model.empty() && !r.raw_body.empty()) {
    body = r.raw_body;
  } else if (options_.upstream_model.empty()) {
    body = r.body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  } else {
    nlohmann::json renamed = r.body;
    renamed["model"] = options_.upstream_model;
    body = renamed.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
  HttpClientRequest up{.method = "POST",
                       .host = url_.host,
                       .port = url_.port,
                       .target = url_.path + (anthropic                                 ? "/v1/messages"
                                              : r.endpoint == Endpoint::kChatCompletions ? "/chat/completions"
                                                                                         : "/completions"),
                       .body = std::move(body),
                       .timeout_seconds = options_.total_timeout_seconds,
                       .connect_timeout_seconds = options_.connect_timeout_seconds,
                       .first_byte_timeout_seconds = options_.first_byte_timeout_seconds,
                       .tls = url_.tls,
                       .connect_address = options_.connect_address};
  up.headers.emplace_back("Content-Type", "application/json");
  if (r.stream) up.headers.emplace_back("Accept", "text/event-stream");
  if (anthropic) {
    if (!options_.api_key.empty()) up.headers.emplace_back("x-api-key", options_.api_key);
    up.headers.emplace_back("anthropic-version", options_.anthropic_version);
  } else if (!options_.api_key.empty()) {
    up.headers.emplace_back("Authorization", "Bearer " + options_.api_key);
  }
  if (!request.traceparent.empty()) up.headers.emplace_back("traceparent", request.traceparent);

  auto call = std::make_shared<Call>();
  call->backend = this;
  call->parser = &loop_client->parser;
  call->sink = std::move(sink);
  call->stream = r.stream;
  call->chat = r.endpoint == Endpoint::kChatCompletions;
  call->anthropic = anthropic;
  call->id = request.id;
  call->created = request.created;
  call->model = request.model_name;
  call->include_usage = r.include_usage;
  call->sent = Clock::now();
  HttpClient* client = loop_client->client.get();
  const uint64_t id = client->Send(std::move(up), HttpStreamCallbacks{
      .on_head = [call](const HttpResponseHead& h) { call->OnHead(h); },
      .on_data = [call](std::string_view d) { call->OnData(d); },
      .on_done = [call](const Status& s) { call->OnDone(s); },
  });
  return [client, id] { client->Cancel(id); };
}

}  // namespace tachyon
