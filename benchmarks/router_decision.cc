// The router's own added latency: the gateway's router stage (rules, then the
// classifier: embedding the last user message and scoring it) timed on each
// prompt of a file, several passes, built from a real gateway config.
//
//   router_decision --config FILE.toml --prompts FILE.jsonl [--passes 20]
//
// FILE.jsonl: {"text": ...} lines. The config's first classify route is used;
// its backends are built but never called. Prints p50 / p99 / max of one
// decision in microseconds and how many prompts each class got.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "percentile.h"
#include "gateway/gateway.h"

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

int main(int argc, char** argv) {
  std::string config_path, prompts_path;
  int passes = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--config") config_path = value;
    else if (flag == "--prompts") prompts_path = value;
    else if (flag == "--passes") passes = std::stoi(value);
  }
  if (config_path.empty() || prompts_path.empty()) {
    std::fprintf(stderr, "usage: router_decision --config FILE.toml --prompts FILE.jsonl [--passes 20]\n");
    return 2;
  }
  tachyon::StatusOr<tachyon::GatewayConfig> config = tachyon::LoadGatewayConfig(config_path);
  if (!config.ok()) return std::fprintf(stderr, "%s\n", config.status().message().c_str()), 1;
  std::string route;
  std::vector<std::string> classes;
  for (const tachyon::RouteConfig& r : config->routes) {
    if (!route.empty() || r.policy != tachyon::PolicyKind::kClassify) continue;
    route = r.model;
    for (const tachyon::RouteClassConfig& k : r.classes) classes.push_back(k.name);
  }
  if (route.empty()) return std::fprintf(stderr, "%s has no classify route\n", config_path.c_str()), 1;
  tachyon::MetricsRegistry metrics;
  auto gateway = tachyon::Gateway::Build(*config, nullptr, &metrics);
  if (!gateway.ok()) return std::fprintf(stderr, "%s\n", gateway.status().message().c_str()), 1;
  tachyon::Stage* router = nullptr;
  for (const auto& stage : (*gateway)->pipeline().stages()) {
    if (stage->name() == "router") router = stage.get();
  }

  std::vector<std::shared_ptr<tachyon::CompletionRequest>> requests;
  std::ifstream in(prompts_path);
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("text")) continue;
    const nlohmann::json body = {{"model", route}, {"messages", {{{"role", "user"}, {"content", j["text"]}}}}};
    auto parsed = tachyon::ParseCompletionRequest(body.dump(), tachyon::Endpoint::kChatCompletions);
    requests.push_back(std::make_shared<tachyon::CompletionRequest>(std::get<tachyon::CompletionRequest>(parsed)));
  }
  std::vector<double> micros;
  std::map<std::string, int> reasons;
  for (int pass = 0; pass < passes; ++pass) {
    for (const auto& r : requests) {
      tachyon::GatewayRequest g{.request = r, .route = route};
      const auto start = Clock::now();
      router->Process(g);
      micros.push_back(std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      if (pass == 0) {
        const std::string& reason = g.route_reason;
        const char* by = reason.rfind("rule=", 0) == 0 ? "rule" : reason.rfind("classifier=", 0) == 0 ? "classifier"
                                                                                                     : "default";
        ++reasons[classes[g.route_class] + " by " + by];
      }
    }
  }
  std::printf("router decision over %zu prompts x %d passes: p50 %.1f us, p99 %.1f us, max %.1f us\n",
              requests.size(), passes, Percentile(micros, 0.5), Percentile(micros, 0.99),
              *std::max_element(micros.begin(), micros.end()));
  for (const auto& [key, n] : reasons) std::printf("  class %s: %d\n", key.c_str(), n);
  (*gateway)->Shutdown();
  return 0;
}
