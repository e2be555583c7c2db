// TrafficAudit: what a capture of a team's own traffic (obs/capture.h) says
// about each lever of the latency playbook, in the playbook's order:
//
//   1 streaming            requests answered whole (perceived wait = E2E), chat among them
//   2 semantic_cache       exact duplicates (the exact cache's own key) and
//                          semantic ones (the last user message within the
//                          threshold of an earlier one in the same scope), the
//                          hit rate each cache would have had, the false hits to expect
//   3 routing              requests a small model would take (a classify route's
//                          router, a trained classifier, else a length rule)
//   4 prompt_trimming      tokens the trimmer would remove from the distinct
//                          system prompts, and retrieval documents over a budget
//   5 prefix_caching       prompt tokens in a prefix an earlier request sent, what
//                          the backends reported as cached, and for hosted backends
//                          whether the prefix is long and recent enough for their cache
//   6 continuous_batching  concurrency over time, queueing in local engines' TTFT
//   7 quantization         local backends' weight types
//   8 speculative_decoding long outputs, outputs an n-gram proposer could guess
//
// "Earlier" is earlier in the file: a capture writes a request when it ends,
// so that is the order in which answers became available to a cache.
//
// Each lever with a TTFT effect predicts the TTFT p95 the traffic would have
// had with it applied alone, from this capture's own figures: TTFT is modelled
// per route as a + b x (prompt tokens not cached), fit by least squares on the
// streamed answers; a cache hit costs the TTFT of the capture's own hits (else
// 2 ms); a request routed small gets the small backend's TTFT at its own
// quantile. The levers are ranked by that expected gain.
//
// Tokens: the capture's prompt_tokens where given; shares of prompt text
// (prefixes, removable tokens) are measured in the tokenizer's tokens when one
// is given (--tokenizer, or the route's local model), else in bytes / 4.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "base/status.h"
#include "embed/embedder.h"
#include "gateway/cache/vector_index.h"
#include "gateway/gateway_config.h"
#include "gateway/route/task_router.h"
#include "gateway/trim/token_counter.h"
#include "obs/capture.h"

namespace tachyon {

struct TrafficAuditOptions {
  const GatewayConfig* config = nullptr;  // the routes' caches, routers, trimmers; backends' kinds and models
  // The semantic comparison of routes with no semantic_cache of their own.
  std::string embedder = "hash";
  double threshold = 0.93;
  std::string pairs_path;         // labelled pairs (as `tachyon cache calibrate`): the false-hit rate
  double cache_ttl_seconds = 3600;  // routes without a cache of their own
  std::string router_model;       // a `tachyon router train` file, for routes that are not classify routes
  std::vector<std::string> small_classes = {"small"};
  double small_ttft_ms = -1;      // the small backend's TTFT when the capture has none of its answers
  std::string tokenizer;          // a GGUF file whose tokenizer counts prompt text; "": bytes / 4
  int64_t documents_budget = 4000;    // tokens of retrieval documents a request should need at most
  int64_t long_output_tokens = 256;   // an output this long is "long"
  double repetitive_share = 0.5;      // output_ngram_share at which an output is "repetitive"
  int64_t hosted_min_prefix_tokens = 1024;  // the shortest prefix hosted caches take (OpenAI, Anthropic)
  double hosted_cache_ttl_seconds = 300;    // how long they keep it (5 minutes)
  size_t max_semantic_entries = 250000;     // distinct questions indexed at most (memory)
};

class TrafficAudit {
 public:
  static StatusOr<std::unique_ptr<TrafficAudit>> Create(TrafficAuditOptions options);
  ~TrafficAudit();

  // One request, in the file's order.
  void Add(const CapturedRequest& r);
  // A line that did not read (counted and sampled in the report).
  void AddMalformed(int64_t line_number, const std::string& error);
  // The report: {"requests", "duration_s", "ttft_p50_ms", ..., "routes": {...}, "levers": [...]}.
  nlohmann::json Finish();

 private:
  struct Row;
  struct RouteState;
  explicit TrafficAudit(TrafficAuditOptions options);
  Status Init();
  RouteState& Route(const std::string& name);
  void Extract(const CapturedRequest& r, RouteState& route, Row& row);
  double PromptUnits(const std::string& text) const;

  nlohmann::json Totals();
  nlohmann::json Distributions() const;
  nlohmann::json Streaming();
  nlohmann::json SemanticCache();
  nlohmann::json Routing();
  nlohmann::json PromptTrimming();
  nlohmann::json PrefixCaching();
  nlohmann::json ContinuousBatching();
  nlohmann::json Quantization();
  nlohmann::json SpeculativeDecoding();
  // The TTFT p95 with each row's perceived TTFT replaced by fn(row, ttft) (-1: unchanged).
  template <typename Fn>
  double PredictedTtftP95(Fn fn) const;
  double Slope(const Row& row) const;  // ms per prompt token of the row's route

  TrafficAuditOptions options_;
  std::shared_ptr<const TokenCounter> counter_;  // null: bytes / 4
  std::unordered_map<std::string, std::shared_ptr<Embedder>> embedders_;
  std::unordered_map<std::string, std::shared_ptr<const TaskRouter>> routers_;  // classify routes
  std::shared_ptr<const TaskRouter> model_router_;  // --router-model
  std::optional<double> false_hit_rate_;
  std::string false_hit_note_;

  std::vector<Row> rows_;
  std::vector<std::unique_ptr<RouteState>> routes_;
  std::unordered_map<std::string, uint32_t> route_index_;
  std::vector<std::string> backends_;
  std::unordered_map<std::string, uint32_t> backend_index_;
  std::unordered_map<std::string, std::string> backend_kind_;  // from the capture, else the config

  int64_t lines_ = 0, malformed_ = 0, other_endpoints_ = 0, refused_ = 0, unreadable_bodies_ = 0, without_body_ = 0;
  std::vector<std::string> malformed_samples_;

  // Lever 2: exact keys -> when an answer was stored (ts), and the semantic index.
  struct ExactEntry {
    double stored = -1e300;  // ts of the stored answer; -1e300: none
  };  // an entry exists once its key was seen
  std::unordered_map<uint64_t, ExactEntry> exact_;
  std::unordered_map<uint64_t, uint64_t> questions_;  // scope+question -> the entry (index label) answering it
  std::unordered_map<std::string, std::unique_ptr<VectorIndex>> indexes_;  // by embedder spec
  std::vector<double> entry_stored_;                // index label -> ts stored (-1e300: none)
  bool semantic_capped_ = false;

  // Lever 4: distinct system prompts.
  struct SystemPrompt {
    std::string text;  // kept for the first kMaxSystemPrompts distinct ones
    int64_t requests = 0;
    double units = 0;
    std::vector<uint32_t> rows;  // rows using it (for the removable tokens)
  };
  std::unordered_map<uint64_t, SystemPrompt> system_prompts_;

  // Lever 5: prefix block chain hash -> ts last sent.
  std::unordered_map<uint64_t, double> blocks_;
};

}  // namespace tachyon
