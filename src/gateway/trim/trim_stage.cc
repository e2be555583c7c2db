#include "gateway/trim/trim_stage.h"

namespace tachyon {

TrimStage::TrimStage(std::unordered_map<std::string, TrimRoute> routes, MetricsRegistry* metrics)
    : routes_(std::move(routes)) {
  trimmed_ = &metrics->AddCounter("tachyon:trimmed_tokens_total",
                                  "Prompt tokens the trimmer removed, by route and step "
                                  "(whitespace, duplicates, history, documents)",
                                  {"route", "step"});
}

std::optional<StageAnswer> TrimStage::Process(GatewayRequest& request) {
  auto it = routes_.find(request.route);
  if (it == routes_.end() || request.request->endpoint != Endpoint::kChatCompletions) return std::nullopt;
  const TrimRoute& route = it->second;
  nlohmann::json body = request.request->body;
  const bool has_documents = route.options.documents && body.is_object() && body.contains("documents");
  StatusOr<TrimmedTokens> trimmed = TrimChatBody(body, route.options, *route.counter);
  if (!trimmed.ok()) {
    const ApiError error{400, trimmed.status().message(), "invalid_request_error",
                         has_documents ? "documents" : "messages", ""};
    StageAnswer answer;
    answer.result = BackendResult{.kind = BackendResult::Kind::kRejected, .http_status = 400,
                                  .body = ErrorBody(error), .error = error, .error_kind = "invalid_documents"};
    return answer;
  }
  if (trimmed->empty() && !has_documents) return std::nullopt;  // nothing removed: the request as it came
  auto parsed = ParseCompletionRequest(body.dump(), Endpoint::kChatCompletions);
  if (auto* r = std::get_if<CompletionRequest>(&parsed)) {
    request.request = std::make_shared<CompletionRequest>(std::move(*r));
  } else {
    return std::nullopt;  // a trimmed body always parses; if not, the original goes on untouched
  }
  for (const auto& [step, n] : *trimmed) trimmed_->With({request.route, step}).Add(static_cast<double>(n));
  request.trimmed_tokens = std::move(*trimmed);
  return std::nullopt;
}

}  // namespace tachyon
