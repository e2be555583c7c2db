// RouterStage: the pipeline's last stage. For a request of a `classify` route
// it asks the route's TaskRouter for a class and writes the decision into the
// request (GatewayRequest::route_class, route_reason); the route then orders
// that class's backends. Other routes pass untouched.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "gateway/pipeline.h"
#include "gateway/route/task_router.h"
#include "obs/metrics.h"

namespace tachyon {

class RouterStage : public Stage {
 public:
  RouterStage(std::unordered_map<std::string, std::shared_ptr<const TaskRouter>> routers, MetricsRegistry* metrics);

  std::string_view name() const override { return "router"; }
  std::optional<StageAnswer> Process(GatewayRequest& request) override;
  bool changes_body() const override { return false; }  // reads the request only
  // The classifier embeds the message: a worker's job.
  bool costly(const std::string& route) const override;
  void SpanAttributes(const GatewayRequest& request, std::vector<Attribute>* out) const override {
    if (request.route_class >= 0) out->push_back({"tachyon.route_class", static_cast<int64_t>(request.route_class)});
    if (!request.route_reason.empty()) out->push_back({"tachyon.route_reason", request.route_reason});
  }

 private:
  struct RouteSeries {
    std::shared_ptr<const TaskRouter> router;
    Histogram* seconds = nullptr;
  };
  std::unordered_map<std::string, RouteSeries> routes_;
  CounterFamily* decisions_ = nullptr;  // {route, class, by}
};

}  // namespace tachyon
