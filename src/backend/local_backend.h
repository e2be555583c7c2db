// LocalBackend: a GGUF model served by this process's engine (its own
// EngineLoop thread). Start() does the request work on the calling thread
// (chat template, tokenization, limits: a server worker, never an I/O thread)
// and submits to the engine; tokens come back on the engine thread and leave as
// text (stop strings held back and cut, UTF-8 whole) in OpenAI chunks, or as one
// body at the end.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "backend/backend.h"
#include "api/tool_calls.h"
#include "engine/engine_loop.h"
#include "grammar/token_mask.h"
#include "model/model.h"
#include "obs/metrics.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"

namespace tachyon {

struct LocalBackendOptions {
  std::string name = "local";
  std::string model_path;
  std::string served_model_name;  // default: the file's stem
  std::string chat_template;      // a family name or a .jinja file instead of the model's own; "" for the model's
  int threads = 1;
  int block_size = 16;
  uint64_t kv_cache_memory = 0;   // bytes; 0: max_num_seqs full-length sequences, at most 2 GiB
  int64_t max_model_len = 0;      // 0: the model's context, at most 4096
  int max_num_seqs = 16;
  int64_t max_num_batched_tokens = 512;
  bool prefix_caching = true;
  // Sliding-window layers' K/V in a pool of their own that keeps only their
  // windows (PlanKvCache); false: every layer keeps every token's.
  bool window_pool = true;
  std::string kv_cache_dtype = "f16";  // f16, f32, q8_0
  int max_queue = 256;                 // requests in flight before 429
  double request_timeout_seconds = 0;  // 0: none
  std::string speculative = "off";     // speculative decoding: ngram, draft:FILE or off
  int num_speculative_tokens = 4;      // most tokens proposed per sequence and step
  int speculative_max_batch = 8;       // decoding sequences above which a step proposes nothing
};

class LocalBackend : public Backend {
 public:
  // Loads the model and starts its engine thread; the errors name the flag or key at fault.
  static StatusOr<std::unique_ptr<LocalBackend>> Create(const LocalBackendOptions& options,
                                                        MetricsRegistry* metrics);
  ~LocalBackend() override;

  const std::string& name() const override { return options_.name; }
  const char* kind() const override { return "local"; }
  const std::string& model_name() const override { return model_name_; }
  CancelFn Start(BackendRequest request, std::shared_ptr<BackendSink> sink) override;
  // Stops the engine; its metrics collector goes first, so that a scrape or the
  // stats sampler running meanwhile never reads an engine that is gone.
  void Shutdown() override;
  bool OnOwnThread() const override { return loop_ && loop_->OnLoopThread(); }
  bool StartIsCostly() const override { return true; }
  // Blocks until the engine holds no request (EngineLoop::WaitUntilIdle); false at the timeout.
  bool WaitUntilIdle(double seconds) const { return loop_ && loop_->WaitUntilIdle(seconds); }

  // One line for the server's start-up message.
  std::string Describe() const;
  // Why chat requests are refused, or "" when the model has a chat template.
  const std::string& chat_disabled_reason() const { return chat_disabled_reason_; }
  // How chat prompts are rendered (the model's Jinja template, a file, or a built-in renderer and why).
  const std::string& chat_template_note() const { return chat_template_note_; }

  struct Call;

 private:
  LocalBackend() = default;
  // The masker for a request's response_format (null for text), compiled once
  // per schema and kept (with its mask cache) for the requests that follow;
  // an error names what the schema compiler refused.
  StatusOr<std::shared_ptr<GrammarMasker>> GrammarFor(const ResponseFormat& format);
  // The grammar of a forced tool call (tool_choice required or a named
  // function): the named function's arguments, or {"name", "arguments"} of one
  // of the tools (an array of them when parallel calls are allowed).
  StatusOr<std::shared_ptr<GrammarMasker>> ToolGrammarFor(const CompletionRequest& r);
  StatusOr<std::shared_ptr<GrammarMasker>> Masker(const std::string& key, const nlohmann::ordered_json* schema);

  // Create's steps.
  StatusOr<EngineOptions> SizeEngine();
  void RegisterMetrics(MetricsRegistry* metrics, const SpeculativeOptions& speculative);

  // Start's steps. Admission (on the calling thread): the request's limits,
  // its grammar and its prompt's tokens, or the refusal.
  struct Admitted {
    std::vector<TokenId> prompt;
    int64_t max_tokens = 0;
    std::shared_ptr<GrammarMasker> grammar;
  };
  std::variant<Admitted, ApiError> Admit(const CompletionRequest& r);
  std::optional<ApiError> CheckTextSize(const CompletionRequest& r) const;
  std::variant<std::vector<TokenId>, ApiError> EncodePrompt(const CompletionRequest& r) const;
  // Submission: the call's Call, handed to the engine with OnEngineOutput as its callback.
  CancelFn Submit(BackendRequest request, std::shared_ptr<BackendSink> sink, Admitted admitted,
                  std::chrono::steady_clock::time_point started);
  // The engine callback (engine thread), one function per event.
  void OnEngineOutput(Call& call, const RequestOutput* out, const Status& status);
  void OnError(Call& call, const Status& status);
  void OnTimeout(Call& call);
  std::string OnTokens(Call& call, const RequestOutput& out, bool* stopped);
  void OnProgress(Call& call, const std::string& text);
  void Finish(Call& call, FinishReason reason, bool stopped);
  static void Cancel(EngineLoop* loop, Call& call);

  LocalBackendOptions options_;
  std::string model_name_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<ChatTemplate> chat_template_;
  std::string chat_disabled_reason_;
  std::string chat_template_note_;
  ToolCallSyntax tool_syntax_ = ToolCallSyntax::kJson;  // how the template's model writes calls
  int64_t max_model_len_ = 0;
  KvCachePlan kv_plan_;
  std::unique_ptr<EngineLoop> loop_;
  std::atomic<int64_t> next_seq_{1};

  std::mutex grammar_mu_;
  std::shared_ptr<const TokenTrie> trie_;  // the vocabulary's bytes, built at the first grammar
  std::map<std::string, std::shared_ptr<GrammarMasker>> grammars_;  // by schema text

  MetricsRegistry* metrics_ = nullptr;
  int collector_id_ = -1;  // -1: none registered (or removed by Shutdown)
  Counter* prompt_tokens_ = nullptr;
  Counter* generation_tokens_ = nullptr;
  Histogram* queue_time_ = nullptr;
};

}  // namespace tachyon
