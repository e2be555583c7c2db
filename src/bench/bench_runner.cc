#include "bench/bench_runner.h"

#include <algorithm>
#include <chrono>
#include <sys/resource.h>
#include <csignal>
#include <deque>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "api/openai.h"
#include "api/stream_chunk.h"
#include "bench/arrivals.h"
#include "http/sse_parser.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// CPU time of the calling thread (the client's loop), user + system, in seconds.
double ThreadCpuSeconds() {
  rusage usage{};
  if (::getrusage(RUSAGE_THREAD, &usage) != 0) return 0;
  auto seconds = [](const timeval& t) { return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6; };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

// The loop-lag probe's period.
constexpr auto kLagProbePeriod = std::chrono::milliseconds(10);

// Bytes of an error body kept for the message.
constexpr size_t kMaxErrorBody = 4096;
// An event (or a line) longer than this is not an OpenAI chunk; the rest of the stream is dropped.
constexpr size_t kMaxEventBytes = 16 << 20;
// Content chunks a stream may have: a token is at most one chunk, so more than this
// many for the request's max_tokens is a server that does not stop (memory stays bounded).
int64_t MaxContentChunks(int64_t max_tokens) { return std::max<int64_t>(4096, 4 * max_tokens); }

std::string ErrorKind(const Status& s, bool got_head) {
  switch (s.code()) {
    case StatusCode::kOutOfRange: return "timeout";
    case StatusCode::kDataLoss: return "truncated";
    case StatusCode::kUnavailable: return got_head ? "read" : "connect";
    default: return "client";
  }
}

// The state of one request while it streams. Lives in a shared_ptr held by the callbacks.
struct InFlight {
  RequestRecord record;
  Clock::time_point sent;
  Clock::time_point now;  // time of the read being parsed
  int status = 0;
  std::string content_type;
  bool chat = false;
  bool oversized = false;
  bool has_usage = false;
  int64_t usage_prompt = 0, usage_completion = 0;
  int64_t content_chunks = 0;
  std::string reply;       // the streamed text, for the conversation history
  std::string error_body;  // non-200 bodies
  bool stream = true;
  std::string whole;       // not streamed: the 200 answer
  std::unique_ptr<SseParser> parser;

  void OnEvent(std::string_view data, StreamChunkParser& parser) {
    if (data == "[DONE]") return;
    StreamChunk chunk;
    if (!parser.Parse(data, chat, &chunk)) return;
    if (chunk.is_error) {
      if (record.error_kind.empty()) {
        record.error_kind = "stream_error";
        record.error_message = ErrorMessageOf(std::string(data));
      }
      return;
    }
    if (chunk.has_usage) {
      has_usage = true;
      usage_prompt = chunk.prompt_tokens;
      usage_completion = chunk.completion_tokens;
    }
    // A tool call's fragments count as output like content.
    const std::string_view piece = chunk.text.empty() ? std::string_view(chunk.tool_text) : chunk.text;
    if (piece.empty()) return;
    if (content_chunks >= MaxContentChunks(record.max_tokens)) {
      oversized = true;
      record.error_kind = "oversized_stream";
      record.error_message = "more than " + std::to_string(MaxContentChunks(record.max_tokens)) +
                             " content chunks for max_tokens " + std::to_string(record.max_tokens);
      return;
    }
    record.chunk_seconds.push_back(Since(sent, now));
    reply.append(piece);
    ++content_chunks;
  }

  // A whole answer is one content chunk at its end.
  void OnWhole(Clock::time_point end) {
    nlohmann::json j = nlohmann::json::parse(whole, nullptr, false);
    if (!j.is_object()) {
      record.error_kind = "malformed_body";
      record.error_message = "the answer is not a JSON object";
      return;
    }
    if (j.contains("usage") && j["usage"].is_object()) {
      has_usage = true;
      usage_prompt = j["usage"].value("prompt_tokens", int64_t{0});
      usage_completion = j["usage"].value("completion_tokens", int64_t{0});
    }
    if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) return;
    const nlohmann::json& c = j["choices"][0];
    std::string text;
    if (c.contains("text") && c["text"].is_string()) text = c["text"].get<std::string>();
    if (c.contains("message") && c["message"].is_object() && c["message"].contains("content") &&
        c["message"]["content"].is_string()) {
      text = c["message"]["content"].get<std::string>();
    }
    if (text.empty() && c.contains("message") && c["message"].is_object() && c["message"].contains("tool_calls") &&
        c["message"]["tool_calls"].is_array()) {
      for (const auto& call : c["message"]["tool_calls"]) {
        if (call.is_object() && call.contains("function") && call["function"].is_object()) {
          text += call["function"].value("name", "") + call["function"].value("arguments", "");
        }
      }
    }
    if (text.empty()) return;
    record.chunk_seconds.push_back(Since(sent, end));
    reply = std::move(text);
    ++content_chunks;
  }

  void Finish(const Status& s, Clock::time_point end, int64_t expected_prompt) {
    record.e2e_seconds = Since(sent, end);
    if (s.ok() && status == 200 && !stream) OnWhole(end);
    if (!s.ok()) {
      record.error_kind = ErrorKind(s, status != 0);
      record.error_message = s.message();
    } else if (status != 200) {
      record.error_kind = "http_" + std::to_string(status);
      record.error_message = ErrorMessageOf(error_body);
    } else if (record.error_kind.empty() && content_chunks == 0) {
      // As vllm bench serve: without a content chunk there is no TTFT.
      if (!stream) {
        record.error_kind = "no_content";
        record.error_message = "the answer has no content";
      } else if (content_type.rfind("text/event-stream", 0) != 0) {
        record.error_kind = "not_streamed";
        record.error_message = "the server answered '" + content_type + "', not an event stream";
      } else {
        record.error_kind = "no_content";
        record.error_message = "the stream ended without a content chunk";
      }
    }
    record.ok = record.error_kind.empty();
    record.tokens_from_usage = has_usage;
    record.output_tokens = has_usage ? usage_completion : content_chunks;
    record.prompt_tokens = has_usage ? usage_prompt : expected_prompt;
  }
};

struct Session {
  size_t idx = 0;
  int next_turn = 0;
  std::vector<std::pair<std::string, std::string>> history;
};

class Runner {
 public:
  Runner(const Workload& workload, const BenchRunOptions& options, HttpClient& client)
      : workload_(workload), options_(options), client_(client) {}

  BenchRun Run() {
    start_ = Clock::now();
    const auto& plans = workload_.sessions();
    planned_ = workload_.num_requests();
    std::vector<double> arrivals;
    const bool trace_times = workload_.has_arrival_times() && options_.use_trace_times &&
                             std::isinf(options_.request_rate);
    if (!trace_times) {
      arrivals = ArrivalTimes(static_cast<int64_t>(plans.size()), options_.request_rate, options_.burstiness,
                              options_.seed);
    }
    for (size_t i = 0; i < plans.size(); ++i) {
      const double at = trace_times ? plans[i].arrival_seconds : arrivals[i];
      if (at <= 0) {
        ready_.push_back({i, 0, {}});
      } else {
        client_.RunAt(start_ + std::chrono::microseconds(static_cast<int64_t>(at * 1e6)), [this, i, alive = alive_] {
          if (!*alive) return;
          ready_.push_back({i, 0, {}});
          Dispatch();
        });
      }
      ++sessions_waiting_;
    }
    client_.Post([this, alive = alive_] {
      if (*alive) Dispatch();
    });
    if (options_.stop_on_interrupt) {
      client_.OnSignalOnce(SIGINT, [this, alive = alive_] {
        if (*alive) Interrupt();
      });
    }
    if (options_.duration_seconds > 0) {
      client_.RunAt(start_ + std::chrono::microseconds(static_cast<int64_t>(options_.duration_seconds * 1e6)),
                    [this, alive = alive_] {
                      if (*alive) Dispatch();
                    });
    }
    if (options_.on_progress) ScheduleProgress();
    ProbeLag(Clock::now() + kLagProbePeriod);
    const double cpu_start = ThreadCpuSeconds();
    client_.Run();
    const double wall = Since(start_, Clock::now());
    run_.load.cpu_seconds = ThreadCpuSeconds() - cpu_start;
    run_.load.cpu_share = wall > 0 ? run_.load.cpu_seconds / wall : 0;
    if (!lags_.empty()) {
      run_.load.lag_p50_seconds = Percentile(lags_, 0.5);
      run_.load.lag_p99_seconds = Percentile(lags_, 0.99);
      run_.load.lag_max_seconds = *std::max_element(lags_.begin(), lags_.end());
    }
    // Timers, signal waits and abandoned exchanges of this run may still sit in the
    // client's loop; none of them may reach this Runner in the client's next run.
    *alive_ = false;
    client_.ClearSignals();
    run_.duration_seconds = first_send_set_ ? std::max(0.0, Since(first_send_, last_end_)) : 0;
    run_.client = client_.stats();
    if (options_.on_progress) options_.on_progress(Progress());
    return std::move(run_);
  }

 private:
  // Ctrl-C: what is in flight is recorded as interrupted, and the loop stops.
  void Interrupt() {
    run_.interrupted = true;
    const Clock::time_point now = Clock::now();
    last_end_ = now;
    for (auto& [id, f] : in_flight_requests_) {
      f->Finish(Status::Ok(), now, 0);
      f->record.ok = false;
      f->record.error_kind = "interrupted";
      f->record.error_message = "still in flight at Ctrl-C";
      run_.records.push_back(std::move(f->record));
    }
    in_flight_requests_.clear();
    finished_ = true;
    client_.Stop();
  }

  bool Expired() const {
    return options_.duration_seconds > 0 && Since(start_, Clock::now()) >= options_.duration_seconds;
  }

  void Dispatch() {
    if (Expired() && sessions_waiting_ > 0) {
      run_.stopped_by_duration = true;
      ready_.clear();
    }
    while (!ready_.empty() && (options_.concurrency <= 0 || static_cast<int64_t>(in_flight_requests_.size()) < options_.concurrency)) {
      Session s = std::move(ready_.front());
      ready_.pop_front();
      Send(std::move(s));
    }
    if (in_flight_requests_.empty() && (sessions_waiting_ == 0 || run_.stopped_by_duration)) {
      finished_ = true;
      client_.Stop();
    }
  }

  void Send(Session session) {
    const BenchTurn turn = workload_.Turn(session.idx, session.next_turn);
    auto f = std::make_shared<InFlight>();
    f->chat = (turn.endpoint.empty() ? options_.target.endpoint : turn.endpoint) == "chat";
    f->stream = options_.target.stream && turn.stream != 0;
    f->record.session = static_cast<int64_t>(session.idx);
    f->record.turn = session.next_turn;
    f->record.max_tokens = turn.max_tokens;
    f->parser = std::make_unique<SseParser>(
        [raw = f.get(), events = &events_](std::string_view d) { raw->OnEvent(d, *events); });
    HttpClientRequest request{.method = "POST",
                              .host = options_.target.url.host,
                              .port = options_.target.url.port,
                              .target = ApiPath(options_.target, f->chat ? "/chat/completions" : "/completions"),
                              .headers = options_.target.headers,
                              .body = RequestBody(options_.target, turn, session.history),
                              .timeout_seconds = options_.target.timeout_seconds,
                              .tls = options_.target.url.tls,
                              // A completion the bench made up: safe to send again on
                              // a new connection when a kept-alive one was closed.
                              .replayable = true};
    if (!options_.target.api_key.empty()) {
      request.headers.emplace_back("Authorization", "Bearer " + options_.target.api_key);
    }
    if (f->stream) request.headers.emplace_back("Accept", "text/event-stream");
    auto shared_session = std::make_shared<Session>(std::move(session));
    const int64_t expected_prompt = turn.input_tokens;
    const std::string user_text = turn.text;
    const int64_t id = next_id_++;
    in_flight_requests_[id] = f;
    // The turn's end, once: from the client's on_done, or at once when the answer turns
    // out oversized (the exchange is then cancelled: a server that never stops sending
    // costs neither memory nor the rest of the timeout).
    auto finish = [this, alive = alive_, f, id, shared_session, expected_prompt, user_text](const Status& s) {
      if (!*alive || finished_ || !in_flight_requests_.erase(id)) return;
      const Clock::time_point end = Clock::now();
      f->Finish(s, end, expected_prompt);
      last_end_ = end;
      OnTurnDone(*f, *shared_session, user_text);
    };
    f->sent = Clock::now();
    if (!first_send_set_) {
      first_send_ = f->sent;
      first_send_set_ = true;
    }
    f->record.start_seconds = Since(start_, f->sent);
    // Callbacks run on the loop, after Send returns: the id is in place before any of them.
    exchanges_[id] = client_.Send(
        std::move(request),
        {.on_head =
             [f](const HttpResponseHead& head) {
               f->status = head.status;
               auto type = head.headers.find("content-type");
               if (type != head.headers.end()) f->content_type = type->second;
             },
         .on_data =
             [this, f, id, finish](std::string_view data) {
               f->now = Clock::now();
               const bool was_oversized = f->oversized;
               if (f->status == 200 && !f->stream) {
                 if (f->whole.size() + data.size() > kMaxEventBytes) {
                   f->oversized = true;
                   f->record.error_kind = "oversized_body";
                   f->record.error_message = "an answer of more than 16 MiB";
                 } else if (!f->oversized) {
                   f->whole.append(data);
                 }
               } else if (f->status == 200 && !f->oversized) {
                 f->parser->Feed(data);
                 if (f->parser->pending_bytes() > kMaxEventBytes) {
                   f->oversized = true;  // memory stays bounded whatever the server sends
                   f->record.error_kind = "oversized_event";
                   f->record.error_message = "an event of more than 16 MiB without an end";
                 }
               } else if (f->error_body.size() < kMaxErrorBody) {
                 f->error_body.append(data.substr(0, kMaxErrorBody - f->error_body.size()));
               }
               if (f->oversized && !was_oversized) {
                 client_.Cancel(exchanges_[id]);
                 exchanges_.erase(id);
                 client_.Post([finish] { finish(Status::Ok()); });
               }
             },
         .on_done =
             [this, id, finish](const Status& s) {
               exchanges_.erase(id);
               finish(s);
             }});
  }

  void OnTurnDone(InFlight& f, Session& session, const std::string& user_text) {
    const int num_turns = workload_.sessions()[session.idx].num_turns;
    const bool ok = f.record.ok;
    ++num_done_;
    if (!ok) ++num_failed_;
    run_.records.push_back(std::move(f.record));
    ++session.next_turn;
    if (ok && session.next_turn < num_turns) {
      session.history.emplace_back(user_text, std::move(f.reply));
      // The session keeps its place: its next turn goes before sessions not yet started.
      ready_.push_front(std::move(session));
    } else {
      // Turns after a failed one are never sent; they are recorded as failed, not dropped.
      for (int t = session.next_turn; !ok && t < num_turns; ++t) {
        RequestRecord skipped;
        skipped.session = static_cast<int64_t>(session.idx);
        skipped.turn = t;
        skipped.start_seconds = Since(start_, Clock::now());
        skipped.error_kind = "skipped_after_error";
        skipped.error_message = "an earlier turn of this conversation failed";
        run_.records.push_back(std::move(skipped));
        ++num_done_;
        ++num_failed_;
      }
      --sessions_waiting_;
    }
    Dispatch();
  }

  BenchProgress Progress() const {
    return {num_done_, num_failed_, static_cast<int64_t>(in_flight_requests_.size()), planned_, Since(start_, Clock::now())};
  }

  // A timer every kLagProbePeriod: how late it fires is how long ready work waits on the loop.
  void ProbeLag(Clock::time_point due) {
    client_.RunAt(due, [this, due, alive = alive_] {
      if (!*alive || finished_) return;
      const Clock::time_point now = Clock::now();
      lags_.push_back(Since(due, now));
      ProbeLag(now + kLagProbePeriod);
    });
  }

  void ScheduleProgress() {
    client_.RunAt(Clock::now() + std::chrono::microseconds(static_cast<int64_t>(
                                     options_.progress_interval_seconds * 1e6)),
                  [this, alive = alive_] {
                    if (!*alive || finished_) return;
                    options_.on_progress(Progress());
                    ScheduleProgress();
                  });
  }

  const Workload& workload_;
  const BenchRunOptions& options_;
  HttpClient& client_;
  StreamChunkParser events_;  // one per client loop: every stream is parsed on this thread
  std::deque<Session> ready_;
  std::map<int64_t, std::shared_ptr<InFlight>> in_flight_requests_;  // sent, not yet ended
  int64_t next_id_ = 0;
  std::map<int64_t, uint64_t> exchanges_;  // request id -> the client's exchange id, while it runs
  BenchRun run_;
  Clock::time_point start_, first_send_, last_end_;
  bool first_send_set_ = false;
  bool finished_ = false;
  std::vector<double> lags_;  // seconds
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);  // false once Run() returned
  int64_t sessions_waiting_ = 0, num_done_ = 0, num_failed_ = 0, planned_ = 0;
};

}  // namespace

std::string ApiPath(const BenchTarget& target, const std::string& suffix) {
  std::string base = target.url.path;
  if (base.size() < 3 || base.compare(base.size() - 3, 3, "/v1") != 0) base += "/v1";
  return base + suffix;
}

std::string EndpointPath(const BenchTarget& target) {
  return ApiPath(target, target.endpoint == "chat" ? "/chat/completions" : "/completions");
}

std::string RequestBody(const BenchTarget& target, const BenchTurn& turn,
                        const std::vector<std::pair<std::string, std::string>>& history) {
  if (!turn.body_json.empty()) {  // a replayed request: as captured, the run's extra body over it
    nlohmann::json body = nlohmann::json::parse(turn.body_json);
    if (target.extra_body.is_object()) {
      for (const auto& [k, v] : target.extra_body.items()) body[k] = v;
    }
    const bool stream = target.stream && turn.stream != 0;
    body["stream"] = stream;
    if (stream) {
      body["stream_options"] = {{"include_usage", true}};  // the token counts the report needs
    } else {
      body.erase("stream_options");
    }
    if (!body.contains("model") && !target.model.empty()) body["model"] = target.model;
    return body.dump();
  }
  nlohmann::json body = target.extra_body.is_object() ? target.extra_body : nlohmann::json::object();
  if (!target.model.empty()) body["model"] = target.model;
  if (!turn.model.empty()) body["model"] = turn.model;
  // The prompt file's own fields (tools, tool_choice, response_format, ...).
  if (!turn.request_fields.empty()) {
    const nlohmann::json fields = nlohmann::json::parse(turn.request_fields);
    for (const auto& [k, v] : fields.items()) body[k] = v;
  }
  if ((turn.endpoint.empty() ? target.endpoint : turn.endpoint) == "chat") {
    nlohmann::json messages = nlohmann::json::array();
    if (!turn.messages_json.empty()) {
      messages = nlohmann::json::parse(turn.messages_json);
    } else {
      for (const auto& [user, assistant] : history) {
        messages.push_back({{"role", "user"}, {"content", user}});
        messages.push_back({{"role", "assistant"}, {"content", assistant}});
      }
      messages.push_back({{"role", "user"}, {"content", turn.text}});
    }
    body["messages"] = std::move(messages);
    if (turn.max_tokens > 0) body["max_completion_tokens"] = turn.max_tokens;
  } else {
    if (!turn.ids.empty()) {
      nlohmann::json ids = nlohmann::json::array();
      for (TokenId id : turn.ids) ids.push_back(id.value());
      body["prompt"] = std::move(ids);
    } else if (!turn.conversation) {
      body["prompt"] = turn.text;
    } else {
      // A conversation's turns share their history as a text prefix.
      std::string prompt;
      for (const auto& [user, assistant] : history) prompt += "User: " + user + "\nAssistant:" + assistant + "\n";
      body["prompt"] = prompt + "User: " + turn.text + "\nAssistant:";
    }
    if (turn.max_tokens > 0) body["max_tokens"] = turn.max_tokens;
  }
  const bool stream = target.stream && turn.stream != 0;
  body["stream"] = stream;
  if (stream) body["stream_options"] = {{"include_usage", true}};
  if (!body.contains("temperature")) body["temperature"] = target.temperature;
  if (target.ignore_eos) body["ignore_eos"] = true;
  return body.dump();
}

BenchRun RunBench(const Workload& workload, const BenchRunOptions& options, HttpClient& client) {
  Runner runner(workload, options, client);
  return runner.Run();
}

BenchRun RunBench(const Workload& workload, const BenchRunOptions& options) {
  HttpClient client;
  return RunBench(workload, options, client);
}

}  // namespace tachyon
