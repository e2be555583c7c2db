// TrimStage: the pipeline's first stage. On a route with `trim = {...}` it
// trims each chat request (prompt_trimmer.h: whitespace, duplicate
// instructions, a history budget, the `documents` extension) before the caches
// see it, so requests that differ only in what is trimmed share an entry.
// Tokens are counted with the route's tokenizer; what each step removed goes
// to tachyon:trimmed_tokens_total{route,step} and into the request
// (GatewayRequest::trimmed_tokens: the x-tachyon-trimmed-tokens header).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "gateway/pipeline.h"
#include "gateway/trim/prompt_trimmer.h"
#include "obs/metrics.h"

namespace tachyon {

struct TrimRoute {
  TrimOptions options;
  std::shared_ptr<const TokenCounter> counter;
};

class TrimStage : public Stage {
 public:
  TrimStage(std::unordered_map<std::string, TrimRoute> routes, MetricsRegistry* metrics);

  std::string_view name() const override { return "trim"; }
  std::optional<StageAnswer> Process(GatewayRequest& request) override;
  bool changes_body() const override { return false; }  // a changed body is a new parse, with its own bytes
  // Counting tokens of a long prompt is a worker's job.
  bool costly(const std::string& route) const override { return routes_.count(route) > 0; }
  void SpanAttributes(const GatewayRequest& request, std::vector<Attribute>* out) const override {
    int64_t total = 0;
    for (const auto& [step, n] : request.trimmed_tokens) total += n;
    out->push_back({"tachyon.trimmed_tokens", total});
  }

 private:
  std::unordered_map<std::string, TrimRoute> routes_;
  CounterFamily* trimmed_ = nullptr;  // {route, step}
};

}  // namespace tachyon
