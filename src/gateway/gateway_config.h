// GatewayConfig: what `tachyon serve --config FILE.toml` serves: backends
// (local engines and OpenAI-compatible upstreams) and routes (an exposed model
// name -> backends + policy). Read from TOML; every error names the file, the
// line and the key. docs/gateway.md and examples/tachyon.toml show every key.
//
//   [[backend]]                 name, kind = "local" | "openai" | "embedding", ...
//   [[route]]                   model, backends = [...], policy
//   [server]                    host, port, api_key_env, ... (flags win)
//   [cache]                     store, max_entries, max_bytes
//   [limits]                    store, replicas (where the keys' limits are held)
//   [responses]                 store, ttl, max_entries, max_bytes (stored /v1/responses)
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "backend/embedding_backend.h"
#include "backend/local_backend.h"
#include "backend/remote_backend.h"
#include "base/status.h"
#include "gateway/cache/semantic_audit.h"
#include "gateway/keys/keyring.h"
#include "gateway/keys/shared_limits.h"
#include "gateway/route/circuit_breaker.h"
#include "gateway/route/hedge.h"
#include "gateway/trim/prompt_trimmer.h"
#include "gateway/route/route_policy.h"
#include "gateway/route/task_router.h"
#include "obs/capture.h"

namespace tachyon {

struct BackendConfig {
  std::string name;
  std::string kind;  // "local", "openai", "anthropic" or "embedding" (a local embedding model for /v1/embeddings)
  LocalBackendOptions local;
  EmbeddingBackendOptions embedding;
  RemoteBackendOptions remote;
  CircuitBreakerOptions breaker;
  // discover = "dns" (openai / anthropic kinds): base_url's host names a set of
  // replicas (a Kubernetes headless Service); each of its addresses is a backend
  // of its own, "<name>/<address>", re-resolved every discover_interval seconds
  // (gateway/discovery.h). hosts_file: resolve from this hosts(5)-format file
  // instead of DNS (a fleet on one machine, tests).
  std::string discover;
  double discover_interval = 5;
  std::string hosts_file;
  std::string discovered_from;  // set on a discovered member: its [[backend]]'s name
  // The backend's table as written (keys sorted): an unchanged backend keeps
  // running across a reload; a changed one is made anew.
  std::string fingerprint;
};

// A route's semantic cache: `semantic_cache = { embedder = "hash", threshold = 0.93, ... }`.
struct SemanticCacheConfig {
  std::string embedder;         // an embedder SPEC: hash, words:PATH, local:MODEL.gguf, remote:URL#MODEL
  double threshold = 0.93;      // cosine a hit needs
  double verifier = 0;          // verifier score a hit needs (0: no verifier)
  std::string verifier_weights; // fit-verifier's file; empty: the built-in weights
  double band = 0.03;           // cosines this far under the threshold hit when the guards pass
  std::string guards = "all";   // "all" (every hit), "band" (the band under the threshold only) or "off"
  double ttl = 3600;            // seconds an answer stays
  // audit_sample, audit_concurrency, audit_compare, audit_agree, max_false_hit_rate,
  // auto_threshold: the live audit of hits (gateway/cache/semantic_audit.h).
  SemanticAuditOptions audit;
};

// A class of a `classify` route: `[[route.class]]`.
struct RouteClassConfig {
  std::string name;
  std::vector<std::string> backends;
  PolicyKind policy = PolicyKind::kLatency;  // among the class's backends
  std::vector<std::string> fallback;         // tried, in this order, after the class's own
};

// The trained classifier of a `classify` route: `classifier = { model = "router.bin", ... }`.
struct RouteClassifierConfig {
  std::string model;     // `tachyon router train`'s file, relative to the config file
  std::string embedder;  // overrides the SPEC the file was trained with ("": the file's)
  double min_probability = 0.5;
  std::vector<std::pair<std::string, std::string>> labels;  // label -> class; unnamed labels: the class of that name
};

// A route's trimmer: `trim = { whitespace = true, history_tokens = 4000, ... }`.
struct TrimConfig {
  TrimOptions options;
  std::string tokenizer;  // a GGUF file; "": the route's first local backend's model, else the built-in byte-level one
};

struct RouteConfig {
  std::string model;  // the name clients send
  std::vector<std::string> aliases;  // more names (globs: `*`, `?`) that reach this route
  std::vector<std::string> backends;  // a classify route: every backend of its classes, in order of appearance
  PolicyKind policy = PolicyKind::kFallback;
  RoutePolicyOptions policy_options;
  int max_attempts = 0;               // backends tried per request; 0: all of them
  // `hedge = { after_ms = 250, max = 1 }`: start the plan's next backend beside a
  // first attempt whose first byte is late; the first to answer wins (gateway/route/hedge.h).
  std::optional<HedgeOptions> hedge;
  size_t affinity_prefix_chars = 512; // prefix-affinity: leading characters of the prompt hashed
  double ewma_alpha = 0.2;            // latency: weight of the newest TTFT sample
  bool exact_cache = false;           // answer repeated requests from the exact cache
  double exact_cache_ttl = 3600;      // seconds an answer stays
  bool cache_sampled = false;         // also cache answers of requests with temperature > 0
  // Identical exact-cache misses in flight at once share the first one's upstream
  // call (gateway/cache/single_flight.h); false: each goes upstream.
  bool coalesce = true;
  // `prompt_cache`: "off" | "auto" | { mode, ttl = "5m" | "1h", min_tokens }: how a hosted
  // backend's own prompt cache is helped (api/prompt_cache.h); its scope is the route.
  PromptCacheOptions prompt_cache;
  std::optional<SemanticCacheConfig> semantic_cache;
  std::optional<TrimConfig> trim;
  // policy = "classify": the classes, the rules (class_idx set), the default
  // class and the classifier.
  std::vector<RouteClassConfig> classes;
  std::vector<RouteRule> rules;
  int default_class = 0;
  std::optional<RouteClassifierConfig> classifier;
};

struct CacheConfig {
  // Where entries live: "memory", or "sqlite:PATH" (relative to the working
  // directory), which keeps them across restarts.
  std::string store = "sqlite:.tachyon/cache.db";
  size_t max_entries = 100000;
  size_t max_bytes = 256 << 20;
  // A redis:// or rediss:// store: the password when the URL has none (read from
  // password_env), and for rediss:// the certificate check, as for upstreams.
  std::string password;
  bool verify_tls = true;
  std::string ca_file;  // relative to the config file
};

struct ServerConfig {
  std::optional<std::string> host;
  std::optional<int> port;
  std::optional<std::string> api_key;    // read from api_key_env or api_key_file's first line
  std::optional<std::string> admin_key;  // read from admin_key_env or admin_key_file's first line
  std::optional<std::string> metrics_key;  // read from metrics_key_env or metrics_key_file's first line
  std::optional<size_t> max_body_bytes;
  std::optional<int> io_threads;
  std::optional<int> workers;
  std::optional<bool> access_log;
  std::optional<bool> public_metrics;
  std::optional<std::vector<std::string>> allowed_origins, allowed_hosts;
  std::optional<int> max_connections;
  std::optional<double> read_timeout, write_timeout;  // seconds
  std::optional<int64_t> max_unsent_bytes;
  // `capture = { path, sample, bodies, max_bytes, redact }`: the traffic capture (obs/capture.h).
  std::optional<CaptureOptions> capture;
};

// [telemetry]: traces over OTLP/HTTP (obs/otlp_exporter.h).
struct TelemetryConfig {
  std::string otlp_endpoint;  // "http://otel-collector:4318"; "": no traces
  std::string otlp_protocol = "http/json";
  std::string service_name = "tachyon";
  double sample_ratio = 1.0;
  // "k=v,k2=v2" headers read from headers_env (OTEL_EXPORTER_OTLP_HEADERS's format).
  std::vector<std::pair<std::string, std::string>> headers;
  bool capture_content = false;  // prompt and answer text in spans
  bool operator==(const TelemetryConfig&) const = default;
};

// [limits]: where the keys' limits are held (gateway/keys/shared_limits.h).
struct LimitsConfig {
  // "local" (each process its own), or redis[s]://...; "" (absent): the [cache]
  // store when it is Redis (with its password and TLS settings), else local.
  std::string store;
  // The replicas to assume while Redis was never reached (once it was: the
  // replicas seen there): each enforces limit / replicas while Redis is down.
  int replicas = 1;
};

// [responses]: the stored responses of /v1/responses (gateway/cache/response_store.h).
struct ResponsesConfig {
  // "memory" (this process, forgotten at a restart), or "cache": also kept in the
  // [cache] store (its SQLite file, or its Redis, shared by replicas). Absent:
  // "cache" when the config has a [cache] table whose store is not memory.
  std::string store = "memory";
  double ttl = 30 * 86400.0;  // seconds, OpenAI's 30 days
  size_t max_entries = 100000;
  size_t max_bytes = size_t{256} << 20;
  bool operator==(const ResponsesConfig&) const = default;
};

struct GatewayConfig {
  std::string path;
  std::vector<BackendConfig> backends;
  std::vector<RouteConfig> routes;
  ServerConfig server;
  CacheConfig cache;
  std::optional<TelemetryConfig> telemetry;
  // [[key]]: the clients' keys, each with its tenant, routes and limits (gateway/keys/keyring.h).
  std::vector<KeyConfig> keys;
  LimitsConfig limits;
  ResponsesConfig responses;
};

// Where the keys' limits are held ([limits]): a Redis store, or none (each process
// its own). Absent, the [cache] store when it is Redis, with its password and TLS settings.
std::optional<SharedLimitsOptions> SharedLimitsOf(const GatewayConfig& config);

// `getenv` reads the environment variables that api_key_env names (a test passes its own).
using EnvReader = std::optional<std::string> (*)(const std::string& name);
std::optional<std::string> ReadEnv(const std::string& name);

StatusOr<GatewayConfig> ParseGatewayConfig(const std::string& text, const std::string& path,
                                           EnvReader env = ReadEnv);
StatusOr<GatewayConfig> LoadGatewayConfig(const std::string& path, EnvReader env = ReadEnv);

}  // namespace tachyon
