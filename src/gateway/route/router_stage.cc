#include "gateway/route/router_stage.h"

#include <chrono>

namespace tachyon {

RouterStage::RouterStage(std::unordered_map<std::string, std::shared_ptr<const TaskRouter>> routers,
                         MetricsRegistry* metrics) {
  decisions_ = &metrics->AddCounter("tachyon:router_decisions_total",
                                    "Requests of classify routes by the class chosen and what chose it "
                                    "(rule, classifier or default)",
                                    {"route", "class", "by"});
  HistogramFamily& seconds = metrics->AddHistogram(
      "tachyon:router_decision_seconds", "Time the router took to choose a request's class", {"route"},
      {1e-6, 2.5e-6, 5e-6, 1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2});
  for (auto& [route, router] : routers) routes_[route] = {std::move(router), &seconds.With({route})};
}

bool RouterStage::costly(const std::string& route) const {
  auto it = routes_.find(route);
  return it != routes_.end() && it->second.router->has_classifier();
}

std::optional<StageAnswer> RouterStage::Process(GatewayRequest& request) {
  auto it = routes_.find(request.route);
  if (it == routes_.end()) return std::nullopt;
  const auto start = std::chrono::steady_clock::now();
  RouteDecision decision = it->second.router->Decide(*request.request);
  it->second.seconds->Observe(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  const std::string by = decision.reason.rfind("rule=", 0) == 0         ? "rule"
                         : decision.reason.rfind("classifier=", 0) == 0 ? "classifier"
                                                                        : "default";
  decisions_->With({request.route, it->second.router->classes()[decision.class_idx], by}).Add();
  request.route_class = decision.class_idx;
  request.route_reason = std::move(decision.reason);
  return std::nullopt;
}

}  // namespace tachyon
