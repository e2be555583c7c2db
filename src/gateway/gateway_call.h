// GatewayCall: one request through its route, after RouteTable::Resolve
// (gateway/routes.h): the pipeline's stages, then the route's Plan tried in
// order until an attempt answers. Internal to the gateway (Gateway::Handle).
#pragma once

#include <memory>

#include "gateway/gateway.h"
#include "gateway/routes.h"

namespace tachyon {

// Starts the call (on this thread, or on a worker when the route's stages are
// costly) and returns what cancels it.
CancelFn StartGatewayCall(std::shared_ptr<const Gateway> gateway, Route* route, GatewayRequest request,
                          std::shared_ptr<GatewaySink> sink);

}  // namespace tachyon
