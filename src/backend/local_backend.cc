#include "backend/local_backend.h"

#include <algorithm>
#include <filesystem>
#include <mutex>

#include "api/json_parse.h"
#include "engine/text_stream.h"

namespace tachyon {
namespace {

ApiError Invalid(std::string message, std::string param, std::string code = "") {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), std::move(code)};
}

const char* FinishName(FinishReason reason) {
  switch (reason) {
    case FinishReason::kStop: return "stop";
    case FinishReason::kLength: return "length";
    default: return "";
  }
}

SamplingParams ToEngine(const SamplingOptions& s) {
  return SamplingParams{.temperature = s.temperature,
                        .top_k = s.top_k,
                        .top_p = s.top_p,
                        .min_p = s.min_p,
                        .repetition_penalty = s.repetition_penalty,
                        .presence_penalty = s.presence_penalty,
                        .frequency_penalty = s.frequency_penalty,
                        .seed = s.seed};
}

BackendResult Refusal(const ApiError& error) {
  return BackendResult{.kind = BackendResult::Kind::kRejected,
                       .http_status = error.http_status,
                       .body = ErrorBody(error),
                       .error = error,
                       .error_kind = error.code.empty() ? "invalid_request" : error.code};
}

}  // namespace

// The state of one call while it runs: filled on the calling thread before
// submission, then touched only on the engine thread (and Cancel's flag).
struct LocalBackend::Call {
  BackendRequest request;
  std::shared_ptr<BackendSink> sink;
  std::unique_ptr<TextStream> text;
  SeqId seq;
  int64_t num_prompt = 0;
  int64_t num_generated = 0;
  int64_t num_cached = 0;
  double queue_seconds = -1;
  std::chrono::steady_clock::time_point started;  // Start was called
  double submitted_seconds = -1;                  // Start to the engine's queue
  double first_token_seconds = -1;                // Start to the first token decoded
  std::vector<LogprobEntry> logprobs;  // not streamed: all; streamed: since the last chunk
  int64_t text_offset = 0;             // bytes of completion text before `logprobs`
  bool sent_first = false;
  std::atomic<bool> done{false};
  // Chat with tools: auto (the answer is read for calls in the model's syntax),
  // or a forced call (the grammar's JSON: a named function's arguments, or the calls).
  enum class Tools { kOff, kAuto, kNamed, kRequired };
  Tools tools = Tools::kOff;
  ToolCallSyntax syntax = ToolCallSyntax::kJson;
  std::string answer;   // the completion's text so far
  size_t streamed = 0;  // bytes of `answer` sent as content

  void ToolChunk(const std::vector<ToolCall>& calls) {
    BackendChunk chunk{ChunkBody(endpoint(), request.id, request.created, request.model_name, "", "", !sent_first,
                                 nullptr, 0, &calls, 0),
                       "", ""};
    chunk.has_tool_calls = true;
    sent_first = true;
    sink->OnChunk(std::move(chunk));
  }

  // The answer read for calls, when it is finished.
  std::vector<ToolCall> ReadCalls(std::string* content) const {
    ParsedAnswer parsed;
    if (tools == Tools::kNamed) {
      // A model's output nests as deep as its tokens go: past the bound it is text.
      nlohmann::ordered_json args = JsonNestsDeeperThan(answer) ? nlohmann::ordered_json()
                                                                : nlohmann::ordered_json::parse(answer, nullptr, false);
      if (args.is_object()) {
        parsed.calls.push_back({r().tool_choice_name, args.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace)});
      } else {
        parsed.content = answer;
      }
    } else {
      parsed = ParseToolCalls(tools == Tools::kAuto ? syntax : ToolCallSyntax::kJson, answer);
    }
    if (!r().parallel_tool_calls && parsed.calls.size() > 1) parsed.calls.resize(1);
    std::vector<ToolCall> calls;
    for (size_t i = 0; i < parsed.calls.size(); ++i) {
      calls.push_back({request.id + "_call_" + std::to_string(i), parsed.calls[i].name, parsed.calls[i].arguments});
    }
    *content = calls.empty() ? answer : parsed.content;
    return calls;
  }

  const CompletionRequest& r() const { return *request.request; }
  Endpoint endpoint() const { return r().endpoint; }

  void Chunk(const std::string& text, const std::string& reason) {
    const bool want = r().num_logprobs >= 0;
    BackendChunk chunk{ChunkBody(endpoint(), request.id, request.created, request.model_name, text, reason,
                                 !sent_first, want ? &logprobs : nullptr, text_offset),
                       text, reason};
    sent_first = true;
    for (const LogprobEntry& e : logprobs) text_offset += static_cast<int64_t>(e.token.size());
    logprobs.clear();
    sink->OnChunk(std::move(chunk));
  }

  BackendResult Result(const std::string& reason) const {
    return BackendResult{.finish_reason = reason,
                         .has_usage = true,
                         .usage = {num_prompt, num_generated, num_cached},
                         .num_cached_tokens = num_cached,
                         .queue_seconds = queue_seconds,
                         .first_token_seconds = first_token_seconds,
                         .submitted_seconds = submitted_seconds};
  }
};

StatusOr<std::unique_ptr<LocalBackend>> LocalBackend::Create(const LocalBackendOptions& options,
                                                             MetricsRegistry* metrics) {
  std::unique_ptr<LocalBackend> b(new LocalBackend());
  b->options_ = options;
  const std::string& path = options.model_path;
  ASSIGN_OR_RETURN(b->model_, Model::Load(path));
  StatusOr<std::unique_ptr<Tokenizer>> tokenizer = Tokenizer::FromGguf(b->model_->file());
  if (!tokenizer.ok()) return InvalidArgumentError(path + ": " + tokenizer.status().message());
  b->tokenizer_ = std::move(tokenizer).value();

  StatusOr<ChatTemplate> chat = ChatTemplate::ForModel(b->model_->file(), options.chat_template);
  if (chat.ok()) {
    b->chat_template_ = *chat;
    b->chat_template_note_ = chat->note();
    b->tool_syntax_ = DetectToolCallSyntax(chat->source());
  } else if (!options.chat_template.empty()) {
    return chat.status();
  } else {
    b->chat_disabled_reason_ = chat.status().message();
  }

  ASSIGN_OR_RETURN(EngineOptions engine, b->SizeEngine());
  ASSIGN_OR_RETURN(std::unique_ptr<Proposer> proposer,
                   MakeProposer(engine, b->tokenizer_->vocab()));
  b->loop_ = std::make_unique<EngineLoop>(
      std::make_unique<Engine>(*b->model_, &b->tokenizer_->vocab(), engine, std::move(proposer)));
  b->model_name_ = !options.served_model_name.empty() ? options.served_model_name
                                                      : std::filesystem::path(path).stem().string();

  b->RegisterMetrics(metrics, engine.speculative);
  return b;
}

// The engine's limits and KV blocks from the options and the model
// (PlanKvCache: blocks from kv_cache_memory, else enough for max_num_seqs
// full-length sequences, at most 2 GiB).
StatusOr<EngineOptions> LocalBackend::SizeEngine() {
  const ModelConfig& c = model_->config();
  max_model_len_ = options_.max_model_len > 0 ? options_.max_model_len : std::min<int64_t>(c.context_length, 4096);
  if (max_model_len_ > c.context_length) {
    return InvalidArgumentError("max_model_len " + std::to_string(max_model_len_) +
                                " exceeds the model's context length " + std::to_string(c.context_length));
  }
  model_->SetContextLength(max_model_len_);  // phi3's LongRoPE factors follow the context served
  ASSIGN_OR_RETURN(KvType kv_type, ParseKvType(options_.kv_cache_dtype, c));
  if (options_.block_size < 1 || options_.max_num_seqs < 1 || options_.max_num_batched_tokens < 1) {
    return InvalidArgumentError("block_size, max_num_seqs and max_num_batched_tokens must be at least 1");
  }
  const SchedulerOptions scheduler{.max_num_batched_tokens = options_.max_num_batched_tokens,
                                   .max_num_seqs = options_.max_num_seqs, .max_model_len = max_model_len_};
  ASSIGN_OR_RETURN(kv_plan_, PlanKvCache(c, kv_type, options_.block_size, options_.prefix_caching,
                                         options_.window_pool, options_.kv_cache_memory, scheduler));
  EngineOptions engine{.kv = kv_plan_.kv,
                       .scheduler = scheduler,
                       .num_threads = std::max(1, options_.threads),
                       .kv_type = kv_type};
  if (options_.num_speculative_tokens < 1 || options_.num_speculative_tokens > 32) {
    return InvalidArgumentError("num_speculative_tokens must be from 1 to 32");
  }
  if (options_.speculative_max_batch < 1) return InvalidArgumentError("speculative_max_batch must be at least 1");
  ASSIGN_OR_RETURN(engine.speculative,
                   ParseSpeculativeMode(options_.speculative, {.num_tokens = options_.num_speculative_tokens,
                                                               .max_batch = options_.speculative_max_batch}));
  return engine;
}

// The request counters and histograms, and a collector that copies the
// engine's own figures (batch, KV, prefix cache, speculative decoding) at each scrape.
void LocalBackend::RegisterMetrics(MetricsRegistry* metrics, const SpeculativeOptions& speculative) {
  metrics_ = metrics;
  const std::vector<std::string> labels = {model_name_, options_.name};
  prompt_tokens_ = &metrics->AddCounter("tachyon:prompt_tokens_total", "Prompt tokens of finished requests",
                                        {"model_name", "backend"}).With(labels);
  generation_tokens_ = &metrics->AddCounter("tachyon:generation_tokens_total", "Tokens generated",
                                            {"model_name", "backend"}).With(labels);
  queue_time_ = &metrics->AddHistogram("tachyon:request_queue_time_seconds",
                                       "From submission to the engine step that first computes the request",
                                       {"model_name", "backend"}).With(labels);
  Counter* queries = &metrics->AddCounter("tachyon:prefix_cache_queries_total",
                                          "Prompt tokens looked up in the prefix cache", {"model_name", "backend"})
                          .With(labels);
  Counter* hits = &metrics->AddCounter("tachyon:prefix_cache_hits_total", "Prompt tokens found in the prefix cache",
                                       {"model_name", "backend"}).With(labels);
  Counter* computed = &metrics->AddCounter("tachyon:prompt_tokens_computed_total",
                                           "Prompt tokens the engine computed (not found in the cache)",
                                           {"model_name", "backend"}).With(labels);
  Gauge* running = &metrics->AddGauge("tachyon:num_requests_running", "Sequences in the running batch",
                                      {"model_name", "backend"}).With(labels);
  Gauge* waiting = &metrics->AddGauge("tachyon:num_requests_waiting", "Sequences waiting to be scheduled",
                                      {"model_name", "backend"}).With(labels);
  Gauge* kv = &metrics->AddGauge("tachyon:kv_cache_usage_perc", "Share of KV blocks in use (0..1)",
                                 {"model_name", "backend"}).With(labels);
  Counter* steps = &metrics->AddCounter("tachyon:engine_decode_steps_total",
                                       "Engine steps that emitted a token", {"model_name", "backend"}).With(labels);
  Counter* step_sequences = &metrics->AddCounter("tachyon:engine_decode_sequences_total",
                                                 "Sequences that emitted a token, summed over steps (over "
                                                 "engine_decode_steps_total: the decode batch size)",
                                                 {"model_name", "backend"}).With(labels);
  auto spec_counter = [&](const char* name, const char* help) {
    return &metrics->AddCounter(name, help, {"model_name", "backend"}).With(labels);
  };
  Counter* spec_drafts = spec_counter("tachyon:spec_decode_num_drafts_total",
                                      "Sequence-steps that verified a speculative proposal");
  Counter* spec_draft_tokens = spec_counter("tachyon:spec_decode_num_draft_tokens_total",
                                            "Tokens proposed by speculative decoding (and verified)");
  Counter* spec_accepted = spec_counter("tachyon:spec_decode_num_accepted_tokens_total",
                                        "Proposed tokens accepted by the target model");
  Counter* spec_emitted = spec_counter("tachyon:spec_decode_num_emitted_tokens_total",
                                       "Tokens emitted by steps that verified a proposal (accepted + one each); "
                                       "over num_drafts: tokens per target forward");
  CounterFamily& per_position = metrics->AddCounter(
      "tachyon:spec_decode_num_accepted_tokens_per_pos",
      "Proposals whose token at this position (0 = first proposed) was accepted", {"model_name", "backend", "position"});
  std::vector<Counter*> spec_positions;
  if (speculative.mode != SpeculativeMode::kOff) {
    for (int i = 0; i < speculative.num_tokens; ++i) {
      spec_positions.push_back(&per_position.With({model_name_, options_.name, std::to_string(i)}));
    }
  }
  EngineLoop* loop = loop_.get();
  collector_id_ = metrics->AddCollector([=] {
    const EngineStats s = loop->Stats();
    spec_drafts->Set(static_cast<double>(s.speculative.num_drafts));
    spec_draft_tokens->Set(static_cast<double>(s.speculative.num_draft_tokens));
    spec_accepted->Set(static_cast<double>(s.speculative.num_accepted_tokens));
    spec_emitted->Set(static_cast<double>(s.speculative.num_emitted_tokens));
    for (size_t i = 0; i < spec_positions.size() && i < s.speculative.accepted_per_position.size(); ++i) {
      spec_positions[i]->Set(static_cast<double>(s.speculative.accepted_per_position[i]));
    }
    queries->Set(static_cast<double>(s.prefix_query_tokens));
    hits->Set(static_cast<double>(s.prefix_hit_tokens));
    computed->Set(static_cast<double>(s.prompt_tokens_computed));
    running->Set(s.num_running);
    waiting->Set(s.num_waiting);
    kv->Set(s.kv_usage);
    steps->Set(static_cast<double>(s.decode_steps));
    step_sequences->Set(static_cast<double>(s.decode_sequences));
  });
}

LocalBackend::~LocalBackend() { Shutdown(); }

void LocalBackend::Shutdown() {
  // RemoveCollector waits out a collector that is running: none reads the loop after it.
  if (metrics_ != nullptr && collector_id_ >= 0) metrics_->RemoveCollector(collector_id_);
  collector_id_ = -1;
  loop_.reset();  // cancels what is left; no callback runs after this
}

std::string LocalBackend::Describe() const {
  const ModelConfig& c = model_->config();
  const KvCacheOptions& kv = kv_plan_.kv;
  char line[512];
  std::snprintf(line, sizeof(line), "model %s (%s), %d %s KV blocks of %d tokens (%.1f MB), max model length %lld",
                model_name_.c_str(), c.architecture.c_str(), kv.num_blocks, options_.kv_cache_dtype.c_str(),
                options_.block_size, static_cast<double>(kv_plan_.bytes()) / 1e6,
                static_cast<long long>(max_model_len_));
  std::string out = line;
  if (kv.window > 0) {
    std::snprintf(line, sizeof(line),
                  "; the sliding-window layers keep their last %lld tokens in %d blocks of their own "
                  "(%.1f MB of the total)",
                  static_cast<long long>(kv.window), kv.window_num_blocks,
                  static_cast<double>(kv.window_num_blocks) * kv_plan_.window_block_bytes / 1e6);
    out += line;
  }
  if (model_->num_vision_tensors() > 0) {
    out += "; the file's " + std::to_string(model_->num_vision_tensors()) +
           " vision-tower tensors (v.*, mm.*) are not used: the engine serves text only";
  }
  return out;
}

StatusOr<std::shared_ptr<GrammarMasker>> LocalBackend::Masker(const std::string& key,
                                                             const nlohmann::ordered_json* schema) {
  std::lock_guard<std::mutex> lock(grammar_mu_);
  if (auto it = grammars_.find(key); it != grammars_.end()) return it->second;
  std::shared_ptr<const JsonGrammar> grammar;
  if (schema == nullptr) {
    grammar = AnyJsonObjectGrammar();
  } else {
    ASSIGN_OR_RETURN(grammar, CompileJsonSchema(*schema));
  }
  if (!trie_) {
    const Vocab& vocab = tokenizer_->vocab();
    std::vector<std::string> bytes(vocab.size());
    for (int32_t id = 0; id < vocab.size(); ++id) {
      const TokenType type = vocab.token(TokenId(id)).type;
      // Control, unknown and unused tokens never stand for text in an answer.
      if (type == TokenType::kControl || type == TokenType::kUnknown || type == TokenType::kUnused) continue;
      bytes[id] = tokenizer_->TokenToPiece(TokenId(id));
    }
    trie_ = std::make_shared<const TokenTrie>(bytes);
  }
  // Schemas stay compiled while few (each mask cache holds at most 32 MiB); a
  // client that sends a new one each time gets a fresh set rather than
  // unbounded memory.
  if (grammars_.size() >= 16) grammars_.clear();
  auto masker = std::make_shared<GrammarMasker>(std::move(grammar), trie_);
  grammars_.emplace(key, masker);
  return masker;
}

StatusOr<std::shared_ptr<GrammarMasker>> LocalBackend::GrammarFor(const ResponseFormat& format) {
  if (format.type == ResponseFormat::Type::kText) return std::shared_ptr<GrammarMasker>();
  if (format.type == ResponseFormat::Type::kJsonObject) return Masker("json_object", nullptr);
  return Masker("schema:" + format.schema.dump(), &format.schema);
}

StatusOr<std::shared_ptr<GrammarMasker>> LocalBackend::ToolGrammarFor(const CompletionRequest& r) {
  using ojson = nlohmann::ordered_json;
  auto parameters = [](const ojson& tool) {
    const ojson& f = tool["function"];
    return f.contains("parameters") && f["parameters"].is_object() ? f["parameters"] : ojson({{"type", "object"}});
  };
  ojson schema;
  if (r.tool_choice == ToolChoice::kFunction) {
    for (const ojson& t : r.tools) {
      if (t["function"]["name"] == r.tool_choice_name) schema = parameters(t);
    }
  } else {
    ojson calls = ojson::array();
    for (const ojson& t : r.tools) {
      calls.push_back({{"type", "object"},
                       {"properties", {{"name", {{"const", t["function"]["name"]}}}, {"arguments", parameters(t)}}},
                       {"required", {"name", "arguments"}},
                       {"additionalProperties", false}});
    }
    schema = r.parallel_tool_calls ? ojson({{"type", "array"}, {"minItems", 1}, {"items", {{"anyOf", calls}}}})
                                   : ojson({{"anyOf", calls}});
  }
  return Masker("tools:" + schema.dump(), &schema);
}

// Admission, on the calling thread: every refusal that needs no engine, then
// the prompt's tokens, then the limits that need them.
std::variant<LocalBackend::Admitted, ApiError> LocalBackend::Admit(const CompletionRequest& r) {
  const bool chat = r.endpoint == Endpoint::kChatCompletions;
  if (!loop_) return ApiError{503, "the server is shutting down", "service_unavailable", "", "shutting_down"};
  if (r.n != 1) return Invalid("this backend answers 'n' = 1 only", "n");
  if (r.has_non_text_parts) return Invalid("this model reads text only; the message has other content parts", "messages");
  // A forced tool call is constrained to a valid call; otherwise the answer
  // may follow response_format.
  const bool forced = chat && (r.tool_choice == ToolChoice::kRequired || r.tool_choice == ToolChoice::kFunction);
  StatusOr<std::shared_ptr<GrammarMasker>> grammar = forced ? ToolGrammarFor(r) : GrammarFor(r.response_format);
  if (!grammar.ok()) return Invalid(grammar.status().message(), forced ? "tools" : "response_format");
  if (std::optional<ApiError> error = CheckTextSize(r)) return *error;
  std::variant<std::vector<TokenId>, ApiError> encoded = EncodePrompt(r);
  if (ApiError* error = std::get_if<ApiError>(&encoded)) return *error;
  Admitted admitted{.prompt = std::move(std::get<std::vector<TokenId>>(encoded)), .grammar = *grammar};
  const int64_t num_prompt = static_cast<int64_t>(admitted.prompt.size());
  if (num_prompt == 0) return Invalid("the prompt is empty", "prompt");
  if (num_prompt >= max_model_len_) {
    return Invalid("the prompt has " + std::to_string(num_prompt) + " tokens; this server's maximum model length is " +
                       std::to_string(max_model_len_) + " tokens (prompt + completion)",
                   chat ? "messages" : "prompt", "context_length_exceeded");
  }
  const int64_t room = max_model_len_ - num_prompt;
  admitted.max_tokens = r.max_tokens.value_or(chat ? room : 16);
  if (admitted.max_tokens > room) {
    return Invalid("max_tokens " + std::to_string(admitted.max_tokens) + " plus the prompt's " +
                       std::to_string(num_prompt) + " tokens exceeds the maximum model length of " +
                       std::to_string(max_model_len_),
                   "max_tokens", "context_length_exceeded");
  }
  if (loop_->num_in_flight() >= options_.max_queue) {
    return ApiError{429, "the server is at its limit of " + std::to_string(options_.max_queue) +
                             " requests in flight (--max-queue); retry later",
                    "rate_limit_error", "", "server_busy"};
  }
  return admitted;
}

// Cheap bounds before any rendering or encoding: n bytes of text are at least
// n / max_token_bytes tokens, and every message renders to at least one token.
std::optional<ApiError> LocalBackend::CheckTextSize(const CompletionRequest& r) const {
  const bool chat = r.endpoint == Endpoint::kChatCompletions;
  const uint64_t max_text_bytes = static_cast<uint64_t>(max_model_len_) * tokenizer_->max_token_bytes();
  uint64_t text_bytes = 0;
  if (chat) {
    if (r.messages.size() > static_cast<uint64_t>(max_model_len_)) {
      return Invalid(std::to_string(r.messages.size()) + " messages cannot fit in this server's maximum "
                         "model length of " + std::to_string(max_model_len_) + " tokens",
                     "messages", "context_length_exceeded");
    }
    for (const ChatMessage& m : r.messages) text_bytes += m.content.size();
  } else if (!r.prompt_is_ids) {
    text_bytes = r.prompt.size();
  }
  if (text_bytes <= max_text_bytes) return std::nullopt;
  return Invalid("the prompt has " + std::to_string(text_bytes) + " bytes of text, more than fit in this "
                     "server's maximum model length of " + std::to_string(max_model_len_) +
                     " tokens (a token here stands for at most " + std::to_string(tokenizer_->max_token_bytes()) +
                     " bytes)",
                 chat ? "messages" : "prompt", "context_length_exceeded");
}

std::variant<std::vector<TokenId>, ApiError> LocalBackend::EncodePrompt(const CompletionRequest& r) const {
  if (r.endpoint != Endpoint::kChatCompletions) {
    if (r.prompt_is_ids) return r.prompt_ids;
    return tokenizer_->Encode(r.prompt, {.add_special = true});
  }
  if (!chat_template_) {
    return Invalid("the model has no chat template (" + chat_disabled_reason_ +
                       "); start the server with --chat-template NAME",
                   "messages");
  }
  // Control tokens come from the template's markup only: a message's "<|im_end|>" is text.
  std::vector<std::pair<size_t, size_t>> content;
  StatusOr<std::string> text = chat_template_->Render(r.messages, true, &content, &r.tools);
  if (!text.ok()) return Invalid(text.status().message(), "messages");
  return tokenizer_->Encode(*text, {.add_special = true, .parse_special = true, .literal_ranges = content});
}

CancelFn LocalBackend::Start(BackendRequest request, std::shared_ptr<BackendSink> sink) {
  const auto started = std::chrono::steady_clock::now();
  std::variant<Admitted, ApiError> admitted = Admit(*request.request);
  if (ApiError* error = std::get_if<ApiError>(&admitted)) {
    sink->OnDone(Refusal(*error));
    return [] {};
  }
  return Submit(std::move(request), std::move(sink), std::move(std::get<Admitted>(admitted)), started);
}

CancelFn LocalBackend::Submit(BackendRequest request, std::shared_ptr<BackendSink> sink, Admitted admitted,
                              std::chrono::steady_clock::time_point started) {
  const CompletionRequest& r = *request.request;
  auto call = std::make_shared<Call>();
  call->started = started;
  call->seq = SeqId(next_seq_++);
  call->num_prompt = static_cast<int64_t>(admitted.prompt.size());
  call->sink = std::move(sink);
  call->text = std::make_unique<TextStream>(*tokenizer_, r.stop);
  if (r.endpoint == Endpoint::kChatCompletions) {
    call->syntax = tool_syntax_;
    call->tools = r.tool_choice == ToolChoice::kAuto       ? Call::Tools::kAuto
                 : r.tool_choice == ToolChoice::kFunction ? Call::Tools::kNamed
                 : r.tool_choice == ToolChoice::kRequired ? Call::Tools::kRequired
                                                          : Call::Tools::kOff;
  }
  Request engine_request{.id = call->seq,
                         .prompt = std::move(admitted.prompt),
                         .sampling = ToEngine(r.sampling),
                         .max_tokens = admitted.max_tokens,
                         .ignore_eos = r.ignore_eos,
                         .num_logprobs = r.num_logprobs,
                         .speculative = r.speculative,
                         .grammar = std::move(admitted.grammar)};
  if (options_.request_timeout_seconds > 0) {
    engine_request.deadline = request.arrival + std::chrono::microseconds(
                                                    static_cast<int64_t>(options_.request_timeout_seconds * 1e6));
  }
  // A stream pauses while its client is behind (the sequence keeps its blocks).
  EngineLoop::BlockedFn blocked = r.stream ? request.output_blocked : nullptr;
  call->request = std::move(request);
  call->submitted_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  loop_->Submit(
      std::move(engine_request),
      [this, call](const RequestOutput* out, const Status& status) { OnEngineOutput(*call, out, status); },
      std::move(blocked));
  EngineLoop* loop = loop_.get();
  return [loop, call] { Cancel(loop, *call); };
}

// The engine callback, on the engine thread: one branch per event.
void LocalBackend::OnEngineOutput(Call& call, const RequestOutput* out, const Status& status) {
  if (call.done.load()) return;  // cancelled, or already answered
  if (!status.ok()) return OnError(call, status);
  if (out->finish_reason == FinishReason::kTimeout) return OnTimeout(call);
  if (out->queue_seconds >= 0) {
    queue_time_->Observe(out->queue_seconds);
    call.queue_seconds = out->queue_seconds;
  }
  call.num_cached = out->num_cached_tokens;
  if (call.first_token_seconds < 0 && !out->new_tokens.empty()) {
    call.first_token_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - call.started).count();
  }
  bool stopped = false;
  const std::string text = OnTokens(call, *out, &stopped);
  const FinishReason reason = stopped ? FinishReason::kStop : out->finish_reason;
  if (stopped && out->finish_reason == FinishReason::kNone) loop_->Cancel(call.seq);
  call.answer += text;
  if (reason == FinishReason::kNone) return OnProgress(call, text);
  Finish(call, reason, stopped);
}

void LocalBackend::OnError(Call& call, const Status& status) {
  call.done = true;
  call.sink->OnDone(Refusal(Invalid(status.message(), "")));
}

void LocalBackend::OnTimeout(Call& call) {
  call.done = true;
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", options_.request_timeout_seconds);
  const ApiError error{504, std::string("the request did not finish within --request-timeout (") + seconds + " s)",
                       "timeout_error", "", "request_timeout"};
  BackendResult result = Refusal(error);
  result.error_kind = "timeout";
  if (call.sent_first) result.kind = BackendResult::Kind::kBroken;
  call.sink->OnDone(std::move(result));
}

// The text of an output's new tokens (with their logprobs when asked). An
// output carries several tokens when a speculative proposal was accepted; a
// stop string ends it wherever it falls (*stopped).
std::string LocalBackend::OnTokens(Call& call, const RequestOutput& out, bool* stopped) {
  const bool want_logprobs = call.r().num_logprobs >= 0;
  std::string text;
  for (size_t i = 0; i < out.new_tokens.size(); ++i) {
    const TokenId t = out.new_tokens[i];
    if (want_logprobs && i < out.logprobs.size()) {
      LogprobEntry entry{tokenizer_->TokenToPiece(t), out.logprobs[i].logprob, {}};
      for (const auto& [id, lp] : out.logprobs[i].top) entry.top.emplace_back(tokenizer_->TokenToPiece(id), lp);
      call.logprobs.push_back(std::move(entry));
    }
    ++call.num_generated;
    // The end-of-generation token itself is not text.
    if (out.finish_reason == FinishReason::kStop && t == out.new_tokens.back() &&
        tokenizer_->vocab().IsEndOfGeneration(t)) {
      continue;
    }
    text += call.text->Add(t, stopped);
    if (*stopped) break;
  }
  return text;
}

// Unfinished: a stream sends what it may. Plain text goes at once; with tools,
// content streams up to where a tool call may begin and the rest waits for the end.
void LocalBackend::OnProgress(Call& call, const std::string& text) {
  if (!call.r().stream) return;
  if (call.tools == Call::Tools::kOff) {
    if (!text.empty() || !call.logprobs.empty()) call.Chunk(text, "");
    call.streamed = call.answer.size();
    return;
  }
  const size_t hold = call.tools == Call::Tools::kAuto ? ToolCallHoldFrom(call.syntax, call.answer) : 0;
  if (hold > call.streamed) {
    call.Chunk(call.answer.substr(call.streamed, hold - call.streamed), "");
    call.streamed = hold;
  }
}

// The one finish path: the answer read for tool calls, then what is left of it
// streamed (or the whole body), the usage chunk, and the result.
void LocalBackend::Finish(Call& call, FinishReason reason, bool stopped) {
  const CompletionRequest& r = call.r();
  call.done = true;
  if (!stopped) call.answer += call.text->Finish();
  prompt_tokens_->Add(static_cast<double>(call.num_prompt));
  generation_tokens_->Add(static_cast<double>(call.num_generated));
  std::string content = call.answer;
  std::vector<ToolCall> calls;
  if (call.tools != Call::Tools::kOff) calls = call.ReadCalls(&content);
  BackendResult result =
      call.Result(!calls.empty() && reason == FinishReason::kStop ? "tool_calls" : FinishName(reason));
  if (!r.stream) {
    result.body = CompletionBody(r.endpoint, call.request.id, call.request.created, call.request.model_name, content,
                                 result.finish_reason, result.usage, r.num_logprobs >= 0 ? &call.logprobs : nullptr,
                                 &calls);
    if (calls.empty()) result.text = content;
    call.sink->OnDone(std::move(result));
    return;
  }
  // What content is left: the part of the answer's text not yet sent.
  const std::string_view sent(call.answer.data(), call.streamed);
  std::string rest;
  if (content.compare(0, sent.size(), sent) == 0 && content.size() > sent.size()) rest = content.substr(sent.size());
  if (call.tools == Call::Tools::kOff) {
    call.Chunk(rest, result.finish_reason);
  } else {
    if (!rest.empty()) call.Chunk(rest, "");
    if (!calls.empty()) call.ToolChunk(calls);
    call.Chunk("", result.finish_reason);
  }
  if (r.include_usage) {
    call.sink->OnChunk(
        {UsageChunkBody(r.endpoint, call.request.id, call.request.created, call.request.model_name, result.usage), "",
         ""});
  }
  call.sink->OnDone(std::move(result));
}

// The client went away: nothing more is sent, and the sequence's blocks are freed.
void LocalBackend::Cancel(EngineLoop* loop, Call& call) {
  call.done = true;
  loop->Cancel(call.seq);
}

}  // namespace tachyon
