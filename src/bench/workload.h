// Workload: what `tachyon bench` sends, as sessions of one or more turns.
//
//   random         input / output lengths drawn from LengthDists, prompts of real words
//   shared-prefix  num_prefixes prefixes of prefix_len tokens, each request one of them
//                  (round robin) followed by a unique suffix of input_len tokens
//   trace          an Azure CSV or Mooncake JSONL trace, with its own arrival times;
//                  Mooncake requests with equal hash_ids get equal 512-token blocks
//   prompts        a JSONL file of prompts ("prompt", "messages", "turns", "instruction",
//                  "text" or "question"; optional "max_tokens", and "tools", "tool_choice",
//                  "parallel_tool_calls", "response_format" sent as they are), cycled as needed
//   conversation   sessions of several turns; each turn resends the growing history
//                  (the history itself is kept by the runner, from the real replies)
//   replay         a traffic capture (`tachyon serve --capture`, obs/capture.h): each
//                  chat / completion request's body as captured (model names mapped by
//                  model_map; /v1/messages bodies as the chat request they translate to),
//                  to its endpoint, streamed or not as captured, at the captured arrival
//                  times; a line without a body gets a synthetic prompt of its captured
//                  prompt_tokens and max_tokens = its completion_tokens. Requests the
//                  server refused (4xx) are left out: they measure nothing.
//
// Prompts are built when a turn is sent, from a generator seeded by (seed, session):
// a replay of a long trace holds its plans, not gigabytes of text, and the same seed
// gives the same requests in any order. Without a tokenizer a "token" is one word of
// a list of common English words, each one token with its leading space in the usual
// BPE vocabularies (tested on Llama 3's); with one, lengths are exact token counts.
#pragma once

#include <cstdint>
#include <istream>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "base/strong_id.h"
#include "bench/trace.h"

namespace tachyon {

class Tokenizer;

// "256", "uniform:LO:HI", "normal:MEAN:STD", "lognormal:MEDIAN:SIGMA"; samples are
// rounded and at least 1.
struct LengthDist {
  enum class Kind { kFixed, kUniform, kNormal, kLognormal } kind = Kind::kFixed;
  double a = 1, b = 0;

  static StatusOr<LengthDist> Parse(const std::string& spec);
  int64_t Sample(std::mt19937_64& rng) const;
  std::string ToString() const;
};

struct WorkloadOptions {
  std::string kind = "random";
  LengthDist input_len{LengthDist::Kind::kFixed, 256};
  LengthDist output_len{LengthDist::Kind::kFixed, 128};
  int num_prefixes = 1;
  int64_t prefix_len = 512;
  std::string trace_path;  // .csv: Azure, .jsonl: Mooncake
  double time_scale = 1;   // trace arrival times are divided by this (2 = twice as fast)
  int64_t max_input_len = 0;   // trace: cap on each request's input tokens (0: none)
  int64_t max_output_len = 0;  // trace: cap on each request's output tokens (0: none)
  std::string prompts_path;
  std::string traffic_path;  // replay: the capture file
  std::vector<std::pair<std::string, std::string>> model_map;  // replay: old model name -> new
  std::vector<std::string> routes;                              // replay: only these routes ("": all)
  int num_turns = 3;         // conversation without a prompts file
  int64_t num_requests = 0;  // requests (turns) in all; 0: the whole file, or 100 when synthetic
  uint64_t seed = 0;
  const Tokenizer* tokenizer = nullptr;  // exact token lengths; needed by prompt_ids
  bool prompt_ids = false;               // build token-id prompts (completions only)
};

// One request's prompt. Exactly one of text / ids / messages_json is the prompt:
// messages_json when a prompts file gave whole chats, ids with prompt_ids, else text.
struct BenchTurn {
  std::string text;
  std::vector<TokenId> ids;
  std::string messages_json;   // a JSON array of {role, content}
  std::string request_fields;  // a JSON object of the prompt file's request fields (tools, response_format, ...)
  int64_t max_tokens = 0;      // 0: the server's default
  int64_t input_tokens = 0;    // what the workload aimed for (words without a tokenizer)
  bool conversation = false;   // a turn of the conversation workload (sent with its history)
  // replay: the captured body, sent as it is (with the model mapped); the endpoint
  // ("chat" or "completions"; "": the target's), the stream flag (-1: the target's)
  // and the model of a body-less line.
  std::string body_json;
  std::string endpoint;
  int stream = -1;
  std::string model;
};

struct SessionPlan {
  double arrival_seconds = -1;  // the trace's own time; < 0 when the arrival process decides
  int num_turns = 1;
  int64_t source_idx = 0;       // line of the trace or prompts file, or request number
};

class Workload {
 public:
  static StatusOr<std::unique_ptr<Workload>> Create(const WorkloadOptions& options);

  const std::vector<SessionPlan>& sessions() const { return sessions_; }
  int64_t num_requests() const;
  bool has_arrival_times() const { return arrival_times_; }
  // The prompt of turn `turn` of session `session`: the same for the same options.
  // Not thread-safe (it keeps the shared prefixes it built): one caller at a time.
  BenchTurn Turn(size_t session, int turn) const;
  // One line for reports: "shared-prefix: 4 prefixes x 512 + 64 tokens, output 128".
  std::string Describe() const;

 private:
  explicit Workload(WorkloadOptions options) : options_(std::move(options)) {}
  Status LoadPrompts();
  // n "tokens" of text, as text (and ids when a tokenizer is set).
  void Words(std::mt19937_64& rng, int64_t n, BenchTurn* out) const;
  // Mooncake prompt blocks: block content depends on the hash id alone.
  void TraceBlocks(const TraceRequest& r, BenchTurn* out) const;

  Status LoadShareGpt(std::istream& in);
  Status LoadReplay();
  struct ReplayEntry {
    double ts = -1;
    std::string body_json;  // "": none captured
    std::string endpoint;   // "chat" or "completions"
    std::string model;
    bool stream = false;
    int64_t prompt_tokens = -1, completion_tokens = -1;
  };
  std::vector<ReplayEntry> replay_;
  int64_t replay_without_body_ = 0, replay_skipped_ = 0;
  bool arrival_times_ = false;
  struct PromptEntry {
    std::vector<std::string> turns;  // user texts
    std::string messages_json;       // whole chat, when the file gave one
    std::string request_fields;      // tools, tool_choice, parallel_tool_calls, response_format
    int64_t max_tokens = 0;
  };

  WorkloadOptions options_;
  std::vector<SessionPlan> sessions_;
  std::vector<TraceRequest> trace_;
  std::vector<PromptEntry> prompts_;
  std::vector<TokenId> bos_;  // prompt_ids: the specials the tokenizer puts before a prompt
  // shared-prefix: each prefix is built once (tokenizing it is the costly part).
  mutable std::vector<std::optional<BenchTurn>> prefixes_;
};

}  // namespace tachyon
