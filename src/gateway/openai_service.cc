#include "gateway/openai_service.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "api/openai.h"
#include "engine/text_stream.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

int64_t UnixNow() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

void SendError(ResponseWriter& writer, const ApiError& error) {
  writer.Respond(error.http_status, "application/json", ErrorBody(error));
}

// The state of one completion while it runs; touched only on the engine thread
// after submission.
struct Job {
  CompletionRequest request;
  std::shared_ptr<ResponseWriter> writer;
  std::unique_ptr<TextStream> text;
  std::string id;
  SeqId seq;
  int64_t created = 0;
  int64_t num_prompt = 0;
  int64_t num_generated = 0;
  int64_t num_cached = 0;
  std::string full_text;  // non-streaming
  std::vector<LogprobEntry> logprobs;  // non-streaming: all; streaming: since the last chunk
  int64_t text_offset = 0;             // bytes of completion text before `logprobs`
  bool sent_first = false;
  bool done = false;
  Clock::time_point arrival, first_token, last_token;
};

}  // namespace

OpenAiService::OpenAiService(OpenAiServiceOptions options, EngineLoop* loop, const Tokenizer* tokenizer,
                             std::optional<ChatTemplate> chat_template)
    : options_(std::move(options)),
      loop_(loop),
      tokenizer_(tokenizer),
      chat_template_(std::move(chat_template)),
      started_(UnixNow()) {}

void OpenAiService::Handle(const HttpRequest& request, std::shared_ptr<ResponseWriter> writer) {
  const std::string path = request.target.substr(0, request.target.find('?'));
  if (request.method == "GET" && path == "/health") {
    writer->Respond(200, "application/json", "{\"status\":\"ok\"}");
    return;
  }
  if (!options_.api_key.empty()) {
    auto it = request.headers.find("authorization");
    if (it == request.headers.end() || it->second != "Bearer " + options_.api_key) {
      SendError(*writer, {401, "missing or wrong API key (Authorization: Bearer ...)", "authentication_error", "",
                          "invalid_api_key"});
      return;
    }
  }
  if (request.method == "GET" && path == "/metrics") {
    writer->Respond(200, "text/plain; version=0.0.4", RenderMetrics());
  } else if (request.method == "GET" && path == "/v1/models") {
    nlohmann::json models = {{"object", "list"},
                             {"data", {{{"id", options_.model_name}, {"object", "model"}, {"created", started_},
                                        {"owned_by", "tachyon"}}}}};
    writer->Respond(200, "application/json", models.dump());
  } else if (request.method == "POST" && (path == "/v1/completions" || path == "/v1/chat/completions")) {
    HandleCompletion(request, std::move(writer), path == "/v1/chat/completions");
  } else if (path == "/v1/completions" || path == "/v1/chat/completions" || path == "/v1/models" ||
             path == "/metrics") {
    SendError(*writer, {405, "method " + request.method + " is not allowed on " + path, "invalid_request_error", "", ""});
  } else {
    SendError(*writer, {404, "no route " + path, "not_found_error", "", ""});
  }
}

void OpenAiService::HandleCompletion(const HttpRequest& http, std::shared_ptr<ResponseWriter> writer, bool chat) {
  const Clock::time_point arrival = Clock::now();
  auto parsed = ParseCompletionRequest(http.body, chat ? Endpoint::kChatCompletions : Endpoint::kCompletions);
  if (auto* error = std::get_if<ApiError>(&parsed)) {
    ++requests_error;
    SendError(*writer, *error);
    return;
  }
  CompletionRequest request = std::move(std::get<CompletionRequest>(parsed));
  if (!request.model.empty() && request.model != options_.model_name) {
    ++requests_error;
    SendError(*writer, {404, "the model '" + request.model + "' does not exist; this server serves '" +
                                 options_.model_name + "'",
                        "invalid_request_error", "model", "model_not_found"});
    return;
  }
  std::vector<TokenId> prompt;
  if (chat) {
    if (!chat_template_) {
      ++requests_error;
      SendError(*writer, {400, "the model has no chat template; start the server with --chat-template NAME",
                          "invalid_request_error", "messages", ""});
      return;
    }
    StatusOr<std::string> text = chat_template_->Render(request.messages);
    if (!text.ok()) {
      ++requests_error;
      SendError(*writer, {400, text.status().message(), "invalid_request_error", "messages", ""});
      return;
    }
    prompt = tokenizer_->Encode(*text, {.add_special = true, .parse_special = true});
  } else if (request.prompt_is_ids) {
    prompt = request.prompt_ids;
  } else {
    prompt = tokenizer_->Encode(request.prompt, {.add_special = true});
  }
  const int64_t num_prompt = static_cast<int64_t>(prompt.size());
  if (num_prompt == 0) {
    ++requests_error;
    SendError(*writer, {400, "the prompt is empty", "invalid_request_error", "prompt", ""});
    return;
  }
  if (num_prompt >= options_.max_model_len) {
    ++requests_error;
    SendError(*writer, {400, "the prompt has " + std::to_string(num_prompt) +
                                 " tokens; this server's maximum model length is " +
                                 std::to_string(options_.max_model_len) + " tokens (prompt + completion)",
                        "invalid_request_error", chat ? "messages" : "prompt", "context_length_exceeded"});
    return;
  }
  const int64_t room = options_.max_model_len - num_prompt;
  int64_t max_tokens = request.max_tokens.value_or(chat ? room : 16);
  if (max_tokens > room) {
    ++requests_error;
    SendError(*writer, {400, "max_tokens " + std::to_string(max_tokens) + " plus the prompt's " +
                                 std::to_string(num_prompt) + " tokens exceeds the maximum model length of " +
                                 std::to_string(options_.max_model_len),
                        "invalid_request_error", "max_tokens", "context_length_exceeded"});
    return;
  }
  if (loop_->num_in_flight() >= options_.max_queue) {
    ++requests_error;
    SendError(*writer, {429, "the server is at its limit of " + std::to_string(options_.max_queue) +
                                 " requests in flight (--max-queue); retry later",
                        "rate_limit_error", "", "server_busy"});
    return;
  }

  auto job = std::make_shared<Job>();
  job->seq = SeqId(next_id_++);
  job->id = (chat ? "chatcmpl-" : "cmpl-") + std::to_string(job->seq.value());
  job->created = UnixNow();
  job->num_prompt = num_prompt;
  job->arrival = arrival;
  job->writer = writer;
  job->text = std::make_unique<TextStream>(*tokenizer_, request.stop);
  job->request = std::move(request);
  const CompletionRequest& r = job->request;
  if (r.stream) writer->StartStream(200, "text/event-stream");
  const Endpoint endpoint = chat ? Endpoint::kChatCompletions : Endpoint::kCompletions;
  EngineLoop* loop = loop_;
  writer->OnClose([loop, seq = job->seq, this] {
    loop->Cancel(seq);
    ++requests_cancelled;
  });

  auto finish = [this, job, endpoint](FinishReason reason, const std::string& tail) {
    job->done = true;
    const CompletionRequest& r = job->request;
    const Clock::time_point end = Clock::now();
    Usage usage{job->num_prompt, job->num_generated};
    const std::vector<LogprobEntry>* logprobs = r.num_logprobs >= 0 ? &job->logprobs : nullptr;
    if (r.stream) {
      job->writer->Write(SseEvent(ChunkBody(endpoint, job->id, job->created, options_.model_name, tail, reason,
                                            !job->sent_first, logprobs, job->text_offset)));
      if (r.include_usage) {
        job->writer->Write(SseEvent(UsageChunkBody(endpoint, job->id, job->created, options_.model_name, usage)));
      }
      job->writer->Write("data: [DONE]\n\n");
      job->writer->End();
    } else {
      job->writer->Respond(200, "application/json",
                           CompletionBody(endpoint, job->id, job->created, options_.model_name, job->full_text + tail,
                                          reason, usage, logprobs));
    }
    e2e.Observe(Seconds(job->arrival, end));
    prompt_tokens += job->num_prompt;
    generation_tokens += job->num_generated;
    ++requests_ok;
    if (options_.access_log) {
      nlohmann::json line = {{"id", job->id},
                             {"model", options_.model_name},
                             {"prompt_tokens", job->num_prompt},
                             {"cached_tokens", job->num_cached},
                             {"generated_tokens", job->num_generated},
                             {"ttft_ms", job->num_generated ? Seconds(job->arrival, job->first_token) * 1e3 : 0.0},
                             {"e2e_ms", Seconds(job->arrival, end) * 1e3},
                             {"finish_reason", FinishReasonName(reason) ? FinishReasonName(reason) : ""},
                             {"stream", r.stream},
                             {"status", 200}};
      std::fprintf(stderr, "%s\n", line.dump().c_str());
    }
  };

  Request engine_request{.id = job->seq,
                         .prompt = std::move(prompt),
                         .sampling = r.sampling,
                         .max_tokens = max_tokens,
                         .ignore_eos = r.ignore_eos,
                         .num_logprobs = r.num_logprobs};
  if (options_.request_timeout_seconds > 0) {
    engine_request.deadline =
        arrival + std::chrono::milliseconds(static_cast<int64_t>(options_.request_timeout_seconds * 1000));
  }
  loop_->Submit(std::move(engine_request), [this, job, endpoint, finish, loop](const RequestOutput* out,
                                                                            const Status& status) {
    if (job->done) return;
    if (!status.ok()) {
      job->done = true;
      ++requests_error;
      ApiError error{400, status.message(), "invalid_request_error", "", ""};
      if (job->request.stream) {
        job->writer->Write(SseEvent(ErrorBody(error)));
        job->writer->End();
      } else {
        SendError(*job->writer, error);
      }
      return;
    }
    if (out->finish_reason == FinishReason::kTimeout) {
      job->done = true;
      ++requests_error;
      ApiError error{504, "the request did not finish within --request-timeout (" +
                              std::to_string(options_.request_timeout_seconds) + " s)",
                     "timeout_error", "", "request_timeout"};
      if (job->request.stream) {
        job->writer->Write(SseEvent(ErrorBody(error)));
        job->writer->Write("data: [DONE]\n\n");
        job->writer->End();
      } else {
        SendError(*job->writer, error);
      }
      return;
    }
    const Clock::time_point now = Clock::now();
    if (out->queue_seconds >= 0) queue_time.Observe(out->queue_seconds);
    job->num_cached = out->num_cached_tokens;
    std::string text;
    bool stopped = false;
    const bool want_logprobs = job->request.num_logprobs >= 0;
    for (size_t i = 0; i < out->new_tokens.size() && want_logprobs && i < out->logprobs.size(); ++i) {
      LogprobEntry entry{tokenizer_->TokenToPiece(out->new_tokens[i]), out->logprobs[i].logprob, {}};
      for (const auto& [id, lp] : out->logprobs[i].top) entry.top.emplace_back(tokenizer_->TokenToPiece(id), lp);
      job->logprobs.push_back(std::move(entry));
    }
    for (TokenId t : out->new_tokens) {
      ++job->num_generated;
      if (job->num_generated == 1) {
        job->first_token = now;
        ttft.Observe(Seconds(job->arrival, now));
      } else {
        itl.Observe(Seconds(job->last_token, now));
      }
      job->last_token = now;
      // The end-of-generation token itself is not text.
      if (out->finish_reason == FinishReason::kStop && t == out->new_tokens.back() &&
          tokenizer_->vocab().IsEndOfGeneration(t)) {
        continue;
      }
      text += job->text->Add(t, &stopped);
      if (stopped) break;
    }
    FinishReason reason = stopped ? FinishReason::kStop : out->finish_reason;
    if (stopped && out->finish_reason == FinishReason::kNone) loop->Cancel(job->seq);
    if (reason != FinishReason::kNone) {
      finish(reason, text + (stopped ? "" : job->text->Finish()));
      return;
    }
    if (job->request.stream) {
      if (!text.empty() || !job->logprobs.empty()) {
        job->writer->Write(SseEvent(ChunkBody(endpoint, job->id, job->created, options_.model_name, text,
                                              FinishReason::kNone, !job->sent_first,
                                              want_logprobs ? &job->logprobs : nullptr, job->text_offset)));
        job->sent_first = true;
        for (const LogprobEntry& e : job->logprobs) job->text_offset += static_cast<int64_t>(e.token.size());
        job->logprobs.clear();
      }
    } else {
      job->full_text += text;
    }
  });
}

std::string OpenAiService::RenderMetrics() const {
  const std::string labels = "model_name=\"" + options_.model_name + "\"";
  std::string out;
  out += ttft.RenderPrometheus("tachyon:time_to_first_token_seconds", labels);
  out += itl.RenderPrometheus("tachyon:inter_token_latency_seconds", labels);
  out += e2e.RenderPrometheus("tachyon:e2e_request_latency_seconds", labels);
  out += queue_time.RenderPrometheus("tachyon:request_queue_time_seconds", labels);
  EngineStats stats = loop_->Stats();
  auto line = [&](const char* type, const std::string& name, double value) {
    char buf[256];
    std::snprintf(buf, sizeof(buf), "# TYPE %s %s\n%s{%s} %.9g\n", name.c_str(), type, name.c_str(), labels.c_str(),
                  value);
    out += buf;
  };
  line("counter", "tachyon:prompt_tokens_total", static_cast<double>(prompt_tokens.load()));
  line("counter", "tachyon:generation_tokens_total", static_cast<double>(generation_tokens.load()));
  line("counter", "tachyon:prefix_cache_queries_total", static_cast<double>(stats.prefix_query_tokens));
  line("counter", "tachyon:prefix_cache_hits_total", static_cast<double>(stats.prefix_hit_tokens));
  line("counter", "tachyon:prompt_tokens_computed_total", static_cast<double>(stats.prompt_tokens_computed));
  line("counter", "tachyon:request_success_total", static_cast<double>(requests_ok.load()));
  line("counter", "tachyon:request_error_total", static_cast<double>(requests_error.load()));
  line("counter", "tachyon:request_cancelled_total", static_cast<double>(requests_cancelled.load()));
  line("gauge", "tachyon:num_requests_running", stats.num_running);
  line("gauge", "tachyon:num_requests_waiting", stats.num_waiting);
  line("gauge", "tachyon:kv_cache_usage_perc", stats.kv_usage);
  return out;
}

}  // namespace tachyon
