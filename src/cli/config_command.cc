#include "cli/config_command.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

#include "cli/format.h"
#include "gateway/discovery.h"
#include "gateway/gateway.h"
#include "gateway/gateway_config.h"
#include "http/http_client.h"

namespace tachyon::cli {
namespace {

struct ConfigFlags {
  std::string file;
  bool placeholder_env = false;
  bool resolve = false;
};

// A variable that is not set reads as a placeholder (checking a Kubernetes
// ConfigMap whose secrets only the pod's environment holds).
std::optional<std::string> EnvOrPlaceholder(const std::string& name) {
  std::optional<std::string> value = ReadEnv(name);
  return value && !value->empty() ? value : std::optional<std::string>("placeholder-for-" + name);
}

int RunCheck(const ConfigFlags& flags) {
  StatusOr<GatewayConfig> loaded = LoadGatewayConfig(flags.file, flags.placeholder_env ? EnvOrPlaceholder : ReadEnv);
  if (!loaded.ok()) return Fail(loaded.status().message());
  const GatewayConfig& config = *loaded;
  // What Gateway::Build reads from disk besides the engines' models: the classifiers.
  StatusOr<std::unordered_map<std::string, std::shared_ptr<const TaskRouter>>> routers = BuildTaskRouters(config);
  if (!routers.ok()) return Fail(routers.status().message());
  std::vector<std::string> problems;
  std::printf("%s: ok\n", flags.file.c_str());
  for (const BackendConfig& b : config.backends) {
    std::string where;
    if (b.kind == "local") {
      where = b.local.model_path;
      if (!std::filesystem::exists(b.local.model_path)) problems.push_back("backend '" + b.name + "': no file " + where);
    } else if (b.kind == "embedding") {
      where = b.embedding.embedder.model_path;
      if (!std::filesystem::exists(where)) problems.push_back("backend '" + b.name + "': no file " + where);
    } else {
      where = b.remote.base_url;
    }
    std::printf("  backend %s: %s %s", b.name.c_str(), b.kind.c_str(), where.c_str());
    if (!b.discover.empty()) {
      std::printf(", discovered by DNS every %g s%s", b.discover_interval,
                  b.hosts_file.empty() ? "" : (" from " + b.hosts_file).c_str());
      if (flags.resolve) {
        StatusOr<HttpUrl> url = ParseHttpUrl(b.remote.base_url);
        StatusOr<std::vector<std::string>> found = SystemResolver()->Resolve(url->host, b.hosts_file);
        if (!found.ok()) {
          std::printf(" (now: %s)", found.status().message().c_str());
        } else {
          std::string joined;
          for (const std::string& a : *found) joined += (joined.empty() ? "" : ", ") + a;
          std::printf(" (now: %s)", joined.empty() ? "no address" : joined.c_str());
        }
      }
    }
    std::printf("\n");
  }
  for (const RouteConfig& r : config.routes) {
    std::string names;
    for (const std::string& n : r.backends) names += (names.empty() ? "" : ", ") + n;
    std::printf("  route %s -> %s (%s%s%s%s)\n", r.model.c_str(), names.c_str(), PolicyName(r.policy),
                r.exact_cache ? "; exact cache" : "", r.semantic_cache ? "; semantic cache" : "",
                r.trim ? "; trim" : "");
  }
  if (std::any_of(config.routes.begin(), config.routes.end(),
                  [](const RouteConfig& r) { return r.exact_cache || r.semantic_cache; })) {
    std::printf("  cache store: %s\n", RedactRedisUrl(config.cache.store).c_str());
  }
  std::printf("  stored responses: %s\n", config.responses.store == "cache"
                                               ? ("in the cache store " + RedactRedisUrl(config.cache.store)).c_str()
                                               : "in memory");
  if (!config.keys.empty()) {
    const std::optional<SharedLimitsOptions> shared = SharedLimitsOf(config);
    std::printf("  keys: %zu, limits held %s\n", config.keys.size(),
                shared ? ("in " + RedactRedisUrl(shared->url) + " (shared by the replicas)").c_str()
                       : "per process");
  }
  for (const std::string& p : problems) std::fprintf(stderr, "tachyon config check: %s\n", p.c_str());
  return problems.empty() ? 0 : 1;
}

}  // namespace

void AddConfigCommand(CLI::App& app, int* exit_code) {
  CLI::App* config = app.add_subcommand("config", "Gateway configs (tachyon serve --config)");
  config->require_subcommand(1);
  auto flags = std::make_shared<ConfigFlags>();
  CLI::App* check = config->add_subcommand(
      "check", "Read a gateway config as tachyon serve would (keys, *_env variables, the files it names, "
               "classifiers) and print its backends and routes; exit 1 with the reason when it would not start");
  check->add_option("FILE", flags->file, "The config (TOML)")->required();
  check->add_flag("--placeholder-env", flags->placeholder_env,
                  "Variables that *_env keys name and that are not set read as placeholders (a Kubernetes "
                  "ConfigMap whose secrets only the pod has)");
  check->add_flag("--resolve", flags->resolve, "Resolve the discover = \"dns\" names now and print their addresses");
  check->callback([flags, exit_code] { *exit_code = RunCheck(*flags); });
}

}  // namespace tachyon::cli
