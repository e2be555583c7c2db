#include "cli/serve_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <filesystem>
#include <optional>
#include <thread>

#include "backend/embedding_backend.h"
#include "backend/local_backend.h"
#include "base/thread_pool.h"
#include "base/worker_pool.h"
#include "cli/format.h"
#include "gateway/discovery.h"
#include "gateway/gateway.h"
#include "gateway/gateway_config.h"
#include "gateway/keys/shared_limits.h"
#include "http/http_server.h"
#include "model/model_gen.h"
#include "obs/otlp_exporter.h"
#include "obs/trace.h"
#include "server/openai_server.h"

namespace tachyon::cli {
namespace {

struct ServeFlags {
  std::string config;
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8000;
  std::string api_key;
  std::string api_key_file;
  std::vector<std::string> allowed_origins, allowed_hosts;
  std::string admin_key;
  std::string metrics_key;
  std::string served_model_name;
  std::string chat_template;
  int threads = ThreadPool::PhysicalCores();
  int block_size = 16;
  uint64_t kv_cache_memory = 0;
  int64_t max_model_len = 0;
  int max_num_seqs = 16;
  int64_t max_num_batched_tokens = 512;
  bool no_prefix_caching = false;
  bool no_window_pool = false;
  std::string kv_cache_dtype = "f16";
  std::string speculative = "off";
  int num_speculative_tokens = 4;
  int speculative_max_batch = 8;
  size_t max_body_bytes = 8 << 20;
  int max_connections = 4096;
  double read_timeout = 30;
  double write_timeout = 30;
  int64_t max_unsent_bytes = 4 << 20;
  int max_queue = 256;
  double request_timeout = 0;
  double grace_seconds = 10;
  int io_threads = std::max(1, std::min(4, static_cast<int>(std::thread::hardware_concurrency())));
  int workers = 2;
  bool no_access_log = false;
  bool no_warmup = false;
  bool public_metrics = false;
  std::string capture;
  std::string otlp_endpoint;
  std::string embedding_model;
  std::string embedding_pooling;
  int embedding_threads = 0;  // 0: --threads
  size_t max_embedding_inputs = 2048;
  // Which flags were given (they win over the config's [server]).
  CLI::Option* host_option = nullptr;
  CLI::Option* port_option = nullptr;
  CLI::Option* api_key_option = nullptr;
  CLI::Option* body_option = nullptr;
  CLI::Option* io_option = nullptr;
  CLI::Option* workers_option = nullptr;
  CLI::Option* connections_option = nullptr;
  CLI::Option* read_timeout_option = nullptr;
  CLI::Option* write_timeout_option = nullptr;
  CLI::Option* unsent_option = nullptr;
  std::vector<CLI::Option*> engine_options;  // --model's engine flags (a config sets them per backend)
};

// The demo model: a small random-weight llama with the built-in byte vocabulary.
StatusOr<std::string> DemoModel() {
  std::string dir = (std::filesystem::temp_directory_path() / "tachyon-demo").string();
  std::filesystem::create_directories(dir);
  std::string path = dir + "/demo-tiny-q8_0.gguf";
  if (!std::filesystem::exists(path)) {
    // Written under a name of this process, then renamed: two servers starting at once do not collide.
    const std::string mine = path + "." + std::to_string(::getpid());
    StatusOr<ModelGenResult> gen = GenerateRandomModel(
        {.shape = FindModelShape("tiny"), .scheme = PureScheme(GgmlType::kQ8_0), .seed = 0, .out_path = mine});
    if (!gen.ok()) return gen.status();
    std::error_code ec;
    std::filesystem::rename(mine, path, ec);
    if (ec) return UnavailableError(path + ": " + ec.message());
  }
  return path;
}

// The one-model flags: one local backend behind one route of its name.
StatusOr<std::shared_ptr<Gateway>> SingleModel(const ServeFlags& flags, MetricsRegistry* metrics,
                                               Gateway::Offload offload) {
  LocalBackendOptions options{.name = "local",
                              .model_path = flags.model,
                              .served_model_name = flags.served_model_name,
                              .chat_template = flags.chat_template,
                              .threads = flags.threads,
                              .block_size = flags.block_size,
                              .kv_cache_memory = flags.kv_cache_memory,
                              .max_model_len = flags.max_model_len,
                              .max_num_seqs = flags.max_num_seqs,
                              .max_num_batched_tokens = flags.max_num_batched_tokens,
                              .prefix_caching = !flags.no_prefix_caching,
                              .window_pool = !flags.no_window_pool,
                              .kv_cache_dtype = flags.kv_cache_dtype,
                              .max_queue = flags.max_queue,
                              .request_timeout_seconds = flags.request_timeout,
                              .speculative = flags.speculative,
                              .num_speculative_tokens = flags.num_speculative_tokens,
                              .speculative_max_batch = flags.speculative_max_batch};
  if (options.model_path.empty()) {
    ASSIGN_OR_RETURN(options.model_path, DemoModel());
    if (options.served_model_name.empty()) options.served_model_name = "tachyon-demo (random weights)";
    if (options.chat_template.empty()) options.chat_template = "chatml";
    std::fprintf(stderr, "tachyon serve: no --model given: serving the built-in demo model (random weights, "
                         "byte-level vocabulary) from %s; its output is noise\n", options.model_path.c_str());
  }
  StatusOr<std::unique_ptr<LocalBackend>> backend = LocalBackend::Create(options, metrics);
  if (!backend.ok()) return backend.status();
  if (!(*backend)->chat_template_note().empty()) {
    std::fprintf(stderr, "tachyon serve: chat prompts: %s\n", (*backend)->chat_template_note().c_str());
  }
  if (!(*backend)->chat_disabled_reason().empty()) {
    std::fprintf(stderr, "tachyon serve: chat requests are disabled: %s\n",
                 (*backend)->chat_disabled_reason().c_str());
  }
  std::fprintf(stderr, "tachyon serve: %s\n", (*backend)->Describe().c_str());
  std::shared_ptr<EmbeddingBackend> embedding;
  if (!flags.embedding_model.empty()) {
    EmbeddingBackendOptions e{.name = "local-embedding",
                              .embedder = {.model_path = flags.embedding_model,
                                           .threads = flags.embedding_threads > 0 ? flags.embedding_threads
                                                                                  : flags.threads},
                              .max_queue = flags.max_queue,
                              .max_inputs = flags.max_embedding_inputs};
    if (!flags.embedding_pooling.empty()) {
      StatusOr<Pooling> pooling = ParsePooling(flags.embedding_pooling);
      if (!pooling.ok()) return pooling.status().WithContext("--embedding-pooling");
      e.embedder.pooling = *pooling;
    }
    StatusOr<std::unique_ptr<EmbeddingBackend>> created = EmbeddingBackend::Create(e, metrics);
    if (!created.ok()) return created.status().WithContext("--embedding-model");
    embedding = std::move(created).value();
    if (embedding->model_name() == (*backend)->model_name()) {
      return InvalidArgumentError("--embedding-model: the embedding model and the chat model are both named '" +
                                  embedding->model_name() + "'");
    }
    std::fprintf(stderr, "tachyon serve: embeddings: %s\n", embedding->Describe().c_str());
  }
  const std::string name = (*backend)->model_name();
  return Gateway::Single(std::shared_ptr<Backend>(std::move(backend).value()), name, metrics, std::move(offload),
                         std::move(embedding));
}

void DescribeConfig(const GatewayConfig& config) {
  for (const BackendConfig& b : config.backends) {
    const std::string where = b.kind == "openai" || b.kind == "anthropic" ? " " + b.remote.base_url
                              : b.kind == "embedding" ? " " + b.embedding.embedder.model_path
                                                      : "";
    std::fprintf(stderr, "tachyon serve: backend %s (%s%s%s)\n", b.name.c_str(), b.kind.c_str(), where.c_str(),
                 b.discover.empty() ? "" : ", discovered by DNS: one backend per address");
  }
  for (const RouteConfig& r : config.routes) {
    std::string names;
    for (const std::string& n : r.backends) names += (names.empty() ? "" : ", ") + n;
    std::fprintf(stderr, "tachyon serve: route %s -> %s (%s)\n", r.model.c_str(), names.c_str(), PolicyName(r.policy));
  }
}

// The clients' key: --api-key, else --api-key-file's first line, else
// $TACHYON_API_KEY; none of them: nullopt (the config's [server] api_key_env
// may still give one).
StatusOr<std::optional<std::string>> ApiKeyOf(const ServeFlags& flags) {
  if (!flags.api_key.empty() && !flags.api_key_file.empty()) {
    return InvalidArgumentError("--api-key and --api-key-file are exclusive");
  }
  if (!flags.api_key.empty()) return std::optional<std::string>(flags.api_key);
  if (!flags.api_key_file.empty()) {
    std::ifstream in(flags.api_key_file);
    std::string key;
    if (!in || !std::getline(in, key)) {
      return InvalidArgumentError("--api-key-file: cannot read a key from '" + flags.api_key_file + "'");
    }
    while (!key.empty() && std::isspace(static_cast<unsigned char>(key.back()))) key.pop_back();
    if (key.empty()) return InvalidArgumentError("--api-key-file: the first line of '" + flags.api_key_file + "' is empty");
    return std::optional<std::string>(key);
  }
  if (const char* env = std::getenv("TACHYON_API_KEY"); env != nullptr && *env != '\0') {
    return std::optional<std::string>(env);
  }
  return std::optional<std::string>();
}

// The server's settings: the flags, then the config's [server] for what no flag gave.
struct ServerSettings {
  HttpServerOptions http;
  OpenAiServerOptions server;  // server.capture: opened by OpenCapture
  int workers = 2;
  std::optional<CaptureOptions> capture;
  std::optional<TelemetryConfig> telemetry;  // opened into server.tracer / server.exporter by OpenTelemetry
  std::optional<SharedLimitsOptions> limits;  // opened into server.shared_limits by OpenLimits
};

ServerSettings Settle(const ServeFlags& flags, const std::optional<std::string>& api_key, const GatewayConfig* config) {
  ServerSettings out{.http = {.host = flags.host,
                              .port = flags.port,
                              .max_body_bytes = flags.max_body_bytes,
                              .read_timeout_seconds = flags.read_timeout,
                              .write_timeout_seconds = flags.write_timeout,
                              .max_unsent_bytes = flags.max_unsent_bytes,
                              .max_connections = flags.max_connections,
                              .num_io_threads = flags.io_threads},
                     .server = {.api_key = api_key.value_or(""),
                                .origins = {.allowed_origins = flags.allowed_origins,
                                            .allowed_hosts = flags.allowed_hosts},
                                .admin_key = flags.admin_key,
                                .metrics_key = flags.metrics_key,
                                .public_metrics = flags.public_metrics,
                                .access_log = !flags.no_access_log,
                                .pause_unsent_bytes = flags.max_unsent_bytes / 4},
                     .workers = flags.workers};
  out.server.origins.listen_host = out.http.host;
  if (config && config->server.capture) out.capture = config->server.capture;
  if (!flags.capture.empty()) {  // the flag's file, with the config's other capture settings
    if (!out.capture) out.capture = CaptureOptions{};
    out.capture->path = flags.capture;
  }
  if (config && config->telemetry) out.telemetry = config->telemetry;
  if (!flags.otlp_endpoint.empty()) {  // the flag's collector, with the config's other [telemetry] settings
    if (!out.telemetry) {
      out.telemetry = TelemetryConfig{};
      if (const char* headers = std::getenv("OTEL_EXPORTER_OTLP_HEADERS"); headers != nullptr) {
        StatusOr<std::vector<std::pair<std::string, std::string>>> parsed = ParseOtlpHeaders(headers);
        if (parsed.ok()) out.telemetry->headers = std::move(*parsed);
      }
    }
    out.telemetry->otlp_endpoint = flags.otlp_endpoint;
  }
  if (config == nullptr) return out;
  out.server.keys = config->keys;
  out.limits = SharedLimitsOf(*config);
  const ServerConfig& s = config->server;
  HttpServerOptions& http = out.http;
  OpenAiServerOptions& server = out.server;
  if (s.workers && !flags.workers_option->count()) out.workers = *s.workers;
  if (s.host && !flags.host_option->count()) http.host = *s.host;
  if (s.port && !flags.port_option->count()) http.port = *s.port;
  if (s.max_body_bytes && !flags.body_option->count()) http.max_body_bytes = *s.max_body_bytes;
  if (s.io_threads && !flags.io_option->count()) http.num_io_threads = *s.io_threads;
  if (s.max_connections && !flags.connections_option->count()) http.max_connections = *s.max_connections;
  if (s.read_timeout && !flags.read_timeout_option->count()) http.read_timeout_seconds = *s.read_timeout;
  if (s.write_timeout && !flags.write_timeout_option->count()) http.write_timeout_seconds = *s.write_timeout;
  if (s.max_unsent_bytes && !flags.unsent_option->count()) {
    http.max_unsent_bytes = *s.max_unsent_bytes;
    server.pause_unsent_bytes = *s.max_unsent_bytes / 4;
  }
  if (s.api_key && !api_key.has_value()) server.api_key = *s.api_key;
  if (s.admin_key && flags.admin_key.empty()) server.admin_key = *s.admin_key;
  if (s.metrics_key && flags.metrics_key.empty()) server.metrics_key = *s.metrics_key;
  if (s.public_metrics && !flags.public_metrics) server.public_metrics = *s.public_metrics;
  if (s.access_log && !flags.no_access_log) server.access_log = *s.access_log;
  if (s.allowed_origins && flags.allowed_origins.empty()) server.origins.allowed_origins = *s.allowed_origins;
  if (s.allowed_hosts && flags.allowed_hosts.empty()) server.origins.allowed_hosts = *s.allowed_hosts;
  server.origins.listen_host = http.host;
  return out;
}

// The [server] settings a running server cannot take on (its sockets, threads and
// per-connection limits are made at start), named with their old and new values.
std::string RestartOnlyChanges(const ServerSettings& running, const ServerSettings& next) {
  std::string out;
  auto note = [&](const char* key, const std::string& a, const std::string& b) {
    if (a != b) out += std::string(out.empty() ? "" : ", ") + key + " " + a + " -> " + b;
  };
  auto num = [](double v) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", v);
    return std::string(text);
  };
  note("host", running.http.host, next.http.host);
  note("port", std::to_string(running.http.port), std::to_string(next.http.port));
  note("max_body_bytes", std::to_string(running.http.max_body_bytes), std::to_string(next.http.max_body_bytes));
  note("io_threads", std::to_string(running.http.num_io_threads), std::to_string(next.http.num_io_threads));
  note("workers", std::to_string(running.workers), std::to_string(next.workers));
  note("max_connections", std::to_string(running.http.max_connections), std::to_string(next.http.max_connections));
  note("read_timeout", num(running.http.read_timeout_seconds), num(next.http.read_timeout_seconds));
  note("write_timeout", num(running.http.write_timeout_seconds), num(next.http.write_timeout_seconds));
  note("max_unsent_bytes", std::to_string(running.http.max_unsent_bytes), std::to_string(next.http.max_unsent_bytes));
  return out;
}

// SIGHUP: the config file read, validated and built again; on any error the
// running gateway and [server] stay as they are. Counted in
// tachyon:config_reloads_total{result="applied"|"refused"}.
// Opens next's capture, or keeps the running one when its settings are unchanged.
Status OpenCapture(ServerSettings* next, const ServerSettings* running, MetricsRegistry* metrics) {
  next->server.capture = nullptr;
  if (!next->capture) return Status::Ok();
  if (running && running->server.capture && running->capture == next->capture) {
    next->server.capture = running->server.capture;
    return Status::Ok();
  }
  StatusOr<std::shared_ptr<CaptureWriter>> writer = CaptureWriter::Open(*next->capture, metrics);
  if (!writer.ok()) return writer.status();
  next->server.capture = *writer;
  return Status::Ok();
}

// Connects next's shared limits, or keeps the running ones when [limits] is unchanged.
Status OpenLimits(ServerSettings* next, const ServerSettings* running, MetricsRegistry* metrics) {
  next->server.shared_limits = nullptr;
  if (!next->limits || next->server.keys.empty()) return Status::Ok();
  if (running && running->server.shared_limits && running->limits == next->limits) {
    next->server.shared_limits = running->server.shared_limits;
    return Status::Ok();
  }
  StatusOr<std::unique_ptr<SharedLimits>> opened = SharedLimits::Open(*next->limits, metrics);
  if (!opened.ok()) return InvalidArgumentError("[limits] store: " + opened.status().message());
  next->server.shared_limits = std::move(*opened);
  return Status::Ok();
}

// Starts next's tracer and OTLP exporter, or keeps the running ones when its
// [telemetry] is unchanged.
Status OpenTelemetry(ServerSettings* next, const ServerSettings* running, MetricsRegistry* metrics) {
  next->server.tracer = nullptr;
  next->server.exporter = nullptr;
  if (!next->telemetry) return Status::Ok();
  if (running && running->server.exporter && running->telemetry == next->telemetry) {
    next->server.tracer = running->server.tracer;
    next->server.exporter = running->server.exporter;
    return Status::Ok();
  }
  const TelemetryConfig& t = *next->telemetry;
  StatusOr<std::unique_ptr<OtlpExporter>> exporter = OtlpExporter::Start(
      {.endpoint = t.otlp_endpoint, .service_name = t.service_name, .version = TACHYON_VERSION, .headers = t.headers},
      metrics);
  if (!exporter.ok()) return InvalidArgumentError("[telemetry] otlp_endpoint: " + exporter.status().message());
  next->server.exporter = std::move(*exporter);
  next->server.tracer = std::make_shared<const Tracer>(
      TracerOptions{.sample_ratio = t.sample_ratio, .capture_content = t.capture_content});
  return Status::Ok();
}

// The gateway of a config, built from the running one and published; discovered
// backends (gateway/discovery.h) expanded by `discovery`, which also rebuilds it
// when their members change.
std::shared_ptr<BackendDiscovery> MakeDiscovery(GatewayHolder* holder, MetricsRegistry* metrics,
                                                const Gateway::Offload& offload, bool warm) {
  auto discovery = std::make_shared<std::weak_ptr<BackendDiscovery>>();
  std::shared_ptr<BackendDiscovery> d = BackendDiscovery::Create(
      SystemResolver(),
      [holder, metrics, offload, discovery, warm](const GatewayConfig& expanded) -> Status {
        StatusOr<std::shared_ptr<Gateway>> gateway = Gateway::Build(expanded, holder->Get().get(), metrics, offload);
        if (!gateway.ok()) return gateway.status();
        (*gateway)->set_on_connect_failure([discovery](const std::string& backend) {
          if (std::shared_ptr<BackendDiscovery> d = discovery->lock()) d->Poke(backend);
        });
        if (warm) (*gateway)->Warm();
        holder->Set(*gateway);
        return Status::Ok();
      },
      metrics);
  *discovery = d;
  return d;
}

void Reload(const ServeFlags& flags, const std::optional<std::string>& api_key, BackendDiscovery* discovery,
            ServerSettings* settings, OpenAiServer* service, MetricsRegistry* metrics) {
  auto count = [metrics](const char* result) {
    metrics->AddCounter("tachyon:config_reloads_total", "SIGHUP reloads of --config, by result", {"result"})
        .With({result})
        .Add();
  };
  StatusOr<GatewayConfig> reloaded = LoadGatewayConfig(flags.config);
  if (!reloaded.ok()) {
    std::fprintf(stderr, "tachyon serve: SIGHUP: the config was not reloaded: %s\n",
                 reloaded.status().message().c_str());
    return count("refused");
  }
  // Keys, origins, hosts and the access log change at once; sockets, threads and
  // limits only at a restart, so a file that changes them is not taken at all.
  ServerSettings next = Settle(flags, api_key, &*reloaded);
  if (const std::string changes = RestartOnlyChanges(*settings, next); !changes.empty()) {
    std::fprintf(stderr,
                 "tachyon serve: SIGHUP: the config was NOT reloaded: [server] changes that take a restart: %s "
                 "(restore them to reload the rest)\n",
                 changes.c_str());
    return count("refused");
  }
  if (Status s = OpenCapture(&next, settings, metrics); !s.ok()) {
    std::fprintf(stderr, "tachyon serve: SIGHUP: the config was not reloaded: %s\n", s.message().c_str());
    return count("refused");
  }
  if (Status s = OpenLimits(&next, settings, metrics); !s.ok()) {
    std::fprintf(stderr, "tachyon serve: SIGHUP: the config was not reloaded: %s\n", s.message().c_str());
    return count("refused");
  }
  if (Status s = OpenTelemetry(&next, settings, metrics); !s.ok()) {
    std::fprintf(stderr, "tachyon serve: SIGHUP: the config was not reloaded: %s\n", s.message().c_str());
    return count("refused");
  }
  if (Status s = discovery->SetConfig(*reloaded); !s.ok()) {
    std::fprintf(stderr, "tachyon serve: SIGHUP: the config was not reloaded: %s\n", s.message().c_str());
    return count("refused");
  }
  service->SetOptions(next.server);
  *settings = std::move(next);
  DescribeConfig(*reloaded);
  std::fprintf(stderr,
               "tachyon serve: SIGHUP: reloaded %s: routes, backends, caches, [[key]]s, [limits], [server] keys, origins, hosts, "
               "access log, capture and telemetry (requests in flight finish on the old config)\n",
               flags.config.c_str());
  count("applied");
}

int Run(const ServeFlags& flags) {
  // SIGINT/SIGTERM/SIGHUP are taken by sigwait below; every thread started from here inherits the mask.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  MetricsRegistry metrics;
  GatewayHolder holder;
  if (flags.max_connections < 1) return Fail("--max-connections must be at least 1");
  if (!(flags.read_timeout > 0) || !(flags.write_timeout > 0)) {
    return Fail("--read-timeout and --write-timeout must be positive seconds");
  }
  if (flags.max_unsent_bytes < 4096) return Fail("--max-unsent-bytes must be at least 4096");
  StatusOr<std::optional<std::string>> api_key = ApiKeyOf(flags);
  if (!api_key.ok()) return Fail(api_key.status().message());
  std::optional<GatewayConfig> config;
  if (!flags.config.empty()) {
    if (!flags.model.empty()) return Fail("--model and --config are exclusive: a config names its models");
    for (const CLI::Option* o : flags.engine_options) {
      if (o->count() > 0) {
        return Fail(o->get_name() + " is an engine flag of --model; with --config, set it in the [[backend]] "
                    "table (docs/gateway.md)");
      }
    }
    StatusOr<GatewayConfig> loaded = LoadGatewayConfig(flags.config);
    if (!loaded.ok()) return Fail(loaded.status().message());
    config = std::move(loaded).value();
  }
  ServerSettings settings = Settle(flags, *api_key, config ? &*config : nullptr);
  if (Status s = OpenCapture(&settings, nullptr, &metrics); !s.ok()) return Fail(s.message());
  if (Status s = OpenTelemetry(&settings, nullptr, &metrics); !s.ok()) return Fail(s.message());
  if (Status s = OpenLimits(&settings, nullptr, &metrics); !s.ok()) return Fail(s.message());
  // Request work that must not stall an I/O thread runs here (the gateway offloads it).
  auto pool = std::make_unique<WorkerPool>(settings.workers);
  const Gateway::Offload offload = [pool = pool.get()](std::function<void()> task) { pool->Post(std::move(task)); };
  std::shared_ptr<BackendDiscovery> discovery;
  if (config) {
    for (const char* result : {"applied", "refused"}) {  // both series from the start, at 0
      metrics.AddCounter("tachyon:config_reloads_total", "SIGHUP reloads of --config, by result", {"result"})
          .With({result});
    }
    discovery = MakeDiscovery(&holder, &metrics, offload, !flags.no_warmup);
    if (Status s = discovery->SetConfig(*config); !s.ok()) return Fail(s.message());
    DescribeConfig(*config);
  } else {
    StatusOr<std::shared_ptr<Gateway>> gateway = SingleModel(flags, &metrics, offload);
    if (!gateway.ok()) return Fail(gateway.status().message());
    if (!flags.no_warmup) (*gateway)->Warm();
    holder.Set(*gateway);
  }

  const HttpServerOptions& http = settings.http;
  OpenAiServer service(settings.server, &holder, &metrics, pool.get());
  StatusOr<std::unique_ptr<HttpServer>> server = HttpServer::Start(
      http, [&service](HttpRequest request, std::shared_ptr<ResponseWriter> writer) {
        service.Handle(std::move(request), std::move(writer));
      });
  if (!server.ok()) return Fail(server.status().message());
  Gauge* open_connections = &metrics.AddGauge("tachyon:http_connections", "Open client connections", {}).With({});
  const int connections_collector = metrics.AddCollector(
      [open_connections, http_server = server->get()] { open_connections->Set(http_server->num_connections()); });
  std::printf("listening on http://%s:%d\n", http.host.c_str(), (*server)->port());
  std::fflush(stdout);

  int signal = 0;
  while (true) {
    sigwait(&signals, &signal);
    if (signal != SIGHUP) break;
    if (flags.config.empty()) {
      std::fprintf(stderr, "tachyon serve: SIGHUP: no --config to reload\n");
      continue;
    }
    Reload(flags, *api_key, discovery.get(), &settings, &service, &metrics);
  }
  std::fprintf(stderr, "tachyon serve: %s: finishing open responses (up to %.0f s)\n",
               signal == SIGINT ? "SIGINT" : "SIGTERM", flags.grace_seconds);
  metrics.RemoveCollector(connections_collector);
  (*server)->Stop(flags.grace_seconds);
  if (discovery) discovery->Stop();  // no gateway is built after this
  pool->Close();             // the queued request work runs (its answers go nowhere now); later posts are dropped
  holder.Get()->Shutdown();  // engines stop, upstream connections close; no callback runs after this
  holder.Set(nullptr);
  server->reset();
  return 0;
}

}  // namespace

void AddServeCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "OpenAI-compatible HTTP server and gateway (/v1/completions, /v1/chat/completions, /v1/embeddings, "
               "/v1/models, /v1/stats, /dashboard, /health, /metrics; /v1/cache and /v1/keys with --admin-key): one local model from --model (with none, a built-in random-weight "
               "demo model) and an --embedding-model beside it, or the backends and routes of --config FILE.toml "
               "(local engines, embedding models and OpenAI-compatible upstreams)");
  cmd->add_option("--config", flags->config,
                  "Gateway config (TOML: [[backend]], [[route]], [[key]], [server]; see docs/gateway.md); SIGHUP "
                  "reloads it (routes, backends, caches, [[key]]s and their limits' state, [server] keys, origins and hosts; host, port, threads, limits and "
                  "timeouts take a restart). "
                  "The engine flags below (--served-model-name to --request-timeout but --max-body-bytes) are "
                  "--model's: a config sets them per [[backend]]");
  cmd->add_option("--model", flags->model, "GGUF model to serve (default: the built-in demo model)");
  flags->host_option = cmd->add_option("--host", flags->host, "Address to listen on")->capture_default_str();
  flags->port_option = cmd->add_option("--port", flags->port, "Port to listen on (0: any free port)")->capture_default_str();
  flags->api_key_option = cmd->add_option(
      "--api-key", flags->api_key,
      "Require Authorization: Bearer KEY (visible in ps: prefer --api-key-file or TACHYON_API_KEY)");
  cmd->add_option("--api-key-file", flags->api_key_file,
                  "Read the API key from this file (its first line); the environment variable TACHYON_API_KEY "
                  "is read when neither flag is given");
  cmd->add_option("--allowed-origins", flags->allowed_origins,
                  "Origins that get CORS headers, comma-separated (https://app.example.com, or *); without an API "
                  "key, requests from other origins are refused")
      ->delimiter(',');
  cmd->add_option("--allowed-hosts", flags->allowed_hosts,
                  "Host names this server answers besides IP addresses, localhost and --host, comma-separated (or "
                  "*); checked only without an API key (DNS rebinding)")
      ->delimiter(',');
  cmd->add_option("--admin-key", flags->admin_key,
                  "Key of the admin routes (GET / DELETE /v1/cache); without one they are refused");
  cmd->add_option("--metrics-key", flags->metrics_key,
                  "A key that may read GET /metrics and nothing else, besides the clients' key (a scraper's "
                  "credential)")
      ->envname("TACHYON_METRICS_KEY");
  cmd->add_flag("--public-metrics", flags->public_metrics,
                "GET /metrics without any key, even when the server has one (for a scraper that cannot send a "
                "key, such as the Inference Extension's endpoint picker; limit who reaches the port)");
  flags->engine_options.push_back(
      cmd->add_option("--served-model-name", flags->served_model_name, "Model name in the API (default: file stem)"));
  flags->engine_options.push_back(cmd->add_option("--chat-template", flags->chat_template,
                  "A Jinja template file (FILE.jinja) or a built-in renderer (chatml, llama3, llama2, mistral, "
                  "mistral-v7, phi3, gemma, deepseek, deepseek3, zephyr) instead of the model's own template"));
  flags->engine_options.push_back(
      cmd->add_option("--threads", flags->threads, "Compute threads")->capture_default_str());
  flags->engine_options.push_back(
      cmd->add_option("--block-size", flags->block_size, "Tokens per KV block")->capture_default_str());
  flags->engine_options.push_back(cmd->add_option("--kv-cache-memory", flags->kv_cache_memory,
                  "Bytes of KV cache (default: max-num-seqs full-length sequences, at most 2 GiB)"));
  flags->engine_options.push_back(cmd->add_option("--max-model-len", flags->max_model_len,
                  "Maximum prompt + completion tokens (default: the model's context, at most 4096)"));
  flags->engine_options.push_back(
      cmd->add_option("--max-num-seqs", flags->max_num_seqs, "Sequences running at once")->capture_default_str());
  flags->engine_options.push_back(cmd->add_option("--max-num-batched-tokens", flags->max_num_batched_tokens, "Tokens computed per step")
      ->capture_default_str());
  flags->engine_options.push_back(
      cmd->add_flag("--no-prefix-caching", flags->no_prefix_caching, "Turn off automatic prefix caching"));
  flags->engine_options.push_back(cmd->add_flag(
      "--no-window-pool", flags->no_window_pool,
      "Keep every token's K/V in the sliding-window layers too (Gemma 2/3); by default they keep only their "
      "window's, in blocks of their own"));
  flags->engine_options.push_back(cmd->add_option(
      "--speculative", flags->speculative,
      "Speculative decoding: ngram (continue text the sequence repeats), draft:FILE (a small GGUF model with the "
      "same vocabulary proposes) or off; the output is the same either way, only faster when proposals are "
      "accepted")->capture_default_str());
  flags->engine_options.push_back(cmd->add_option("--num-speculative-tokens", flags->num_speculative_tokens,
                                                  "Most tokens proposed per sequence and step (1-32; each "
                                                  "sequence adapts below it to its acceptance)")
                                      ->capture_default_str());
  flags->engine_options.push_back(cmd->add_option("--speculative-max-batch", flags->speculative_max_batch,
                                                  "No proposals in a step with more decoding sequences than "
                                                  "this (the batch alone keeps the cores busy)")
                                      ->capture_default_str());
  flags->engine_options.push_back(cmd->add_option("--kv-cache-dtype", flags->kv_cache_dtype, "K/V element type: f16, f32 or q8_0")
      ->capture_default_str());
  flags->body_option =
      cmd->add_option("--max-body-bytes", flags->max_body_bytes, "Largest request body (413 above)")->capture_default_str();
  flags->connections_option = cmd->add_option("--max-connections", flags->max_connections,
                                              "Open connections at once; one more gets a 503 and is closed")
                                  ->capture_default_str();
  flags->read_timeout_option =
      cmd->add_option("--read-timeout", flags->read_timeout,
                      "Seconds from a request's first byte to its last before the connection closes (slow senders)")
          ->capture_default_str();
  flags->write_timeout_option =
      cmd->add_option("--write-timeout", flags->write_timeout,
                      "Seconds a response may wait for a client that reads nothing before the connection closes")
          ->capture_default_str();
  flags->unsent_option = cmd->add_option("--max-unsent-bytes", flags->max_unsent_bytes,
                                         "Bytes of a response the client has not taken before its connection is "
                                         "dropped; a stream pauses at a quarter of it")
                             ->capture_default_str();
  flags->engine_options.push_back(
      cmd->add_option("--max-queue", flags->max_queue, "Requests in flight before 429")->capture_default_str());
  flags->engine_options.push_back(cmd->add_option("--request-timeout", flags->request_timeout,
                  "Seconds a request may take, queued or running, before it ends with a 504 (0: no limit)")
      ->capture_default_str());
  cmd->add_option("--shutdown-grace", flags->grace_seconds, "Seconds open responses get on SIGINT/SIGTERM")
      ->capture_default_str();
  flags->io_option = cmd->add_option("--io-threads", flags->io_threads, "Threads reading and writing connections")
                         ->capture_default_str();
  flags->workers_option = cmd->add_option("--workers", flags->workers,
                                          "Threads for request work (parsing, chat templates, tokenization)")
                              ->capture_default_str();
  cmd->add_flag("--no-access-log", flags->no_access_log, "No JSON line per request on stderr");
  cmd->add_flag("--no-warmup", flags->no_warmup,
                "Do not send each local engine a one-token request at start (it pages the weights in before the "
                "first client; GET /ready answers 503 until it has run)");
  cmd->add_option("--capture", flags->capture,
                  "Write one JSON line per finished request (numbers and the request body) to FILE, created 0600, "
                  "for `tachyon audit` and `tachyon bench --workload replay`; [server] capture sets sample, bodies, "
                  "max_bytes and redact (docs/audit.md)")
      ->type_name("FILE");
  cmd->add_option("--otlp-endpoint", flags->otlp_endpoint,
                  "Send a trace of each request to this OpenTelemetry collector (OTLP/HTTP JSON, POST URL/v1/traces; "
                  "headers from $OTEL_EXPORTER_OTLP_HEADERS); [telemetry] sets the service name, sampling and the "
                  "rest (docs/observability.md)")
      ->type_name("URL");
  flags->engine_options.push_back(cmd->add_option("--embedding-model", flags->embedding_model,
                  "GGUF embedding model (bert, nomic-bert) served on /v1/embeddings beside --model, under its "
                  "file stem"));
  flags->engine_options.push_back(cmd->add_option("--embedding-threads", flags->embedding_threads,
                  "Compute threads of the embedding model (default: --threads)"));
  flags->engine_options.push_back(cmd->add_option("--embedding-pooling", flags->embedding_pooling,
                  "mean, cls or last (default: the embedding model file's pooling_type)"));
  flags->engine_options.push_back(cmd->add_option("--max-embedding-inputs", flags->max_embedding_inputs,
                  "Inputs one /v1/embeddings request may carry")->capture_default_str());
  cmd->callback([flags, exit_code] { *exit_code = Run(*flags); });
}

}  // namespace tachyon::cli
