#include "gateway/gateway_config.h"

#include "gateway/cache/redis_store.h"
#include "http/http_client.h"
#include "obs/otlp_exporter.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>

#include <toml++/toml.h>

namespace tachyon {
namespace {

// Reads one table's keys, remembering which were used so the unknown ones are errors.
class TableReader {
 public:
  TableReader(const toml::table& table, std::string path, std::string what)
      : table_(table), path_(std::move(path)), what_(std::move(what)) {}

  Status Error(const toml::node& node, const std::string& key, const std::string& message) const {
    return InvalidArgumentError(path_ + ":" + std::to_string(node.source().begin.line) + ": " + what_ + ": key '" +
                                key + "': " + message);
  }
  // An error about `key`, at its line when the table has it (a check on a default value has no node of its own).
  Status KeyError(const std::string& key, const std::string& message) const {
    const toml::node* n = table_.get(key);
    return n != nullptr ? Error(*n, key, message) : Error("key '" + key + "': " + message);
  }
  Status Error(const std::string& message) const {
    return InvalidArgumentError(path_ + ":" + std::to_string(table_.source().begin.line) + ": " + what_ + ": " +
                                message);
  }

  const toml::node* Get(const std::string& key) {
    used_.insert(key);
    return table_.get(key);
  }

  Status String(const std::string& key, std::string* out, bool required = false) {
    const toml::node* n = Get(key);
    if (n == nullptr) return required ? Error("key '" + key + "' is required") : Status::Ok();
    if (!n->is_string()) return Error(*n, key, "must be a string");
    *out = n->as_string()->get();
    return Status::Ok();
  }
  template <typename T>
  Status Integer(const std::string& key, T* out, int64_t lo, int64_t hi) {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    if (!n->is_integer()) return Error(*n, key, "must be an integer");
    const int64_t v = n->as_integer()->get();
    if (v < lo || v > hi) {
      return Error(*n, key, "must be from " + std::to_string(lo) + " to " + std::to_string(hi));
    }
    *out = static_cast<T>(v);
    return Status::Ok();
  }
  Status Number(const std::string& key, double* out, double lo, double hi) {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    if (!n->is_number()) return Error(*n, key, "must be a number");
    const double v = n->is_integer() ? static_cast<double>(n->as_integer()->get()) : n->as_floating_point()->get();
    if (!(v >= lo && v <= hi)) {
      std::ostringstream range;
      range << "must be from " << lo << " to " << hi;
      return Error(*n, key, range.str());
    }
    *out = v;
    return Status::Ok();
  }
  Status Bool(const std::string& key, bool* out) {
    const toml::node* n = Get(key);
    if (n == nullptr) return Status::Ok();
    if (!n->is_boolean()) return Error(*n, key, "must be true or false");
    *out = n->as_boolean()->get();
    return Status::Ok();
  }
  Status StringList(const std::string& key, std::vector<std::string>* out, bool required = true) {
    const toml::node* n = Get(key);
    if (n == nullptr) return required ? Error("key '" + key + "' is required") : Status::Ok();
    if (!n->is_array()) return Error(*n, key, "must be an array of strings");
    for (const toml::node& item : *n->as_array()) {
      if (!item.is_string()) return Error(item, key, "must be an array of strings");
      out->push_back(item.as_string()->get());
    }
    return Status::Ok();
  }

  // Every key that was not read is a mistake (a typo would otherwise be ignored).
  Status NoOtherKeys() const {
    for (const auto& [key, value] : table_) {
      if (!used_.count(std::string(key.str()))) return Error(value, std::string(key.str()), "unknown key");
    }
    return Status::Ok();
  }

  const std::string& path() const { return path_; }
  const std::string& what() const { return what_; }

  std::string Fingerprint() const {
    std::ostringstream out;
    out << toml::json_formatter{table_};
    return out.str();
  }

 private:
  const toml::table& table_;
  std::string path_, what_;
  std::set<std::string> used_;
};

// A path written in the config file: relative to the file unless absolute.
std::string BesideConfig(const std::string& config_path, const std::string& path) {
  if (path.empty() || path[0] == '/') return path;
  const size_t slash = config_path.rfind('/');
  return slash == std::string::npos ? path : config_path.substr(0, slash + 1) + path;
}

// `model`, which is relative to the config file unless absolute.
Status ModelPath(TableReader& t, const std::string& config_path, std::string* out) {
  RETURN_IF_ERROR(t.String("model", out, true));
  *out = BesideConfig(config_path, *out);
  return Status::Ok();
}

// prompt_cache = "off" | "auto" | { mode = "auto", ttl = "5m" | "1h", min_tokens = 1024 }
Status ReadPromptCache(TableReader& t, RouteConfig* r) {
  r->prompt_cache.scope = r->model;
  const toml::node* n = t.Get("prompt_cache");
  if (n == nullptr) return Status::Ok();
  std::string mode;
  std::string ttl = "5m";
  if (n->is_string()) {
    RETURN_IF_ERROR(t.String("prompt_cache", &mode));
  } else if (n->is_table()) {
    TableReader p(*n->as_table(), t.path(), t.what() + ": prompt_cache");
    RETURN_IF_ERROR(p.String("mode", &mode, true));
    RETURN_IF_ERROR(p.String("ttl", &ttl));
    if (ttl != "5m" && ttl != "1h") return p.KeyError("ttl", "must be \"5m\" or \"1h\", not \"" + ttl + "\"");
    RETURN_IF_ERROR(p.Integer("min_tokens", &r->prompt_cache.min_tokens, 0, 1 << 24));
    RETURN_IF_ERROR(p.NoOtherKeys());
  } else {
    return t.Error(*n, "prompt_cache", "must be \"off\", \"auto\" or a table, e.g. { mode = \"auto\", ttl = \"1h\" }");
  }
  if (mode != "off" && mode != "auto") {
    return t.Error(*n, "prompt_cache", "mode must be \"off\" or \"auto\", not \"" + mode + "\"");
  }
  r->prompt_cache.automatic = mode == "auto";
  r->prompt_cache.long_ttl = ttl == "1h";
  return Status::Ok();
}

// hedge = { after_ms = 250, max = 1, max_rate = 0.2 } | { after = "p90", min_ms = 50, max_ms = 2000, ... }
Status ReadHedge(TableReader& t, RouteConfig* r) {
  const toml::node* n = t.Get("hedge");
  if (n == nullptr) return Status::Ok();
  if (!n->is_table()) return t.Error(*n, "hedge", "must be a table, e.g. { after_ms = 250, max = 1 }");
  TableReader h(*n->as_table(), t.path(), t.what() + ": hedge");
  HedgeOptions o;
  const bool fixed = h.Get("after_ms") != nullptr, quantile = h.Get("after") != nullptr;
  if (fixed == quantile) return h.Error("needs one of after_ms (a delay) or after (\"p90\": a percentile of the first backend's own first-byte times)");
  double after_ms = 0, min_ms = o.min_seconds * 1000, max_ms = o.max_seconds * 1000;
  RETURN_IF_ERROR(h.Number("after_ms", &after_ms, 1, 600000));
  std::string after;
  RETURN_IF_ERROR(h.String("after", &after));
  if (quantile) {
    char* end = nullptr;
    const double pct = after.size() > 1 && after[0] == 'p' ? std::strtod(after.c_str() + 1, &end) : 0;
    if (end == nullptr || *end != '\0' || !(pct >= 1 && pct <= 99.9)) {
      return h.KeyError("after", "must be a percentile from \"p1\" to \"p99.9\", such as \"p90\", not \"" + after + "\"");
    }
    o.quantile = pct / 100;
  } else {
    for (const char* key : {"min_ms", "max_ms"}) {
      if (const toml::node* b = h.Get(key)) return h.Error(*b, key, "bounds after = \"pNN\" only (after_ms is the delay itself)");
    }
  }
  RETURN_IF_ERROR(h.Number("min_ms", &min_ms, 1, 600000));
  RETURN_IF_ERROR(h.Number("max_ms", &max_ms, 1, 600000));
  if (min_ms > max_ms) {
    return h.KeyError(h.Get("min_ms") != nullptr ? "min_ms" : "max_ms",
                      (std::ostringstream() << "min_ms (" << min_ms << ") must not be above max_ms (" << max_ms << ")").str());
  }
  RETURN_IF_ERROR(h.Integer("max", &o.max, 1, 8));
  RETURN_IF_ERROR(h.Number("max_rate", &o.max_rate, 0, 8));
  RETURN_IF_ERROR(h.NoOtherKeys());
  o.after_seconds = after_ms / 1000;
  o.min_seconds = min_ms / 1000;
  o.max_seconds = max_ms / 1000;
  if (r->backends.size() < 2) {
    return t.Error(*n, "hedge", "needs a route of two backends or more: a hedge starts the next backend of the policy's order");
  }
  r->hedge = o;
  return Status::Ok();
}

Status ReadBackend(TableReader& t, const std::string& path, EnvReader env, BackendConfig* b) {
  RETURN_IF_ERROR(t.String("name", &b->name, true));
  if (b->name.empty()) return t.Error("key 'name' must not be empty");
  RETURN_IF_ERROR(t.String("kind", &b->kind, true));
  RETURN_IF_ERROR(t.Integer("breaker_failures", &b->breaker.failure_threshold, 1, 1000000));
  RETURN_IF_ERROR(t.Number("breaker_cooldown", &b->breaker.cooldown_seconds, 0, 86400));
  if (b->kind == "openai" || b->kind == "anthropic") {
    RemoteBackendOptions& r = b->remote;
    r.name = b->name;
    if (b->kind == "anthropic") {
      r.dialect = UpstreamDialect::kAnthropic;
      RETURN_IF_ERROR(t.String("anthropic_version", &r.anthropic_version));
      if (r.anthropic_version.empty()) return t.KeyError("anthropic_version", "must not be empty");
      RETURN_IF_ERROR(t.Integer("default_max_tokens", &r.default_max_tokens, 1, 1 << 24));
    }
    RETURN_IF_ERROR(t.String("base_url", &r.base_url, true));
    if (StatusOr<HttpUrl> url = ParseHttpUrl(r.base_url); !url.ok()) {
      return t.KeyError("base_url", url.status().message());
    }
    std::string key_env;
    RETURN_IF_ERROR(t.String("api_key_env", &key_env));
    if (!key_env.empty()) {
      std::optional<std::string> key = env(key_env);
      if (!key || key->empty()) {
        return t.KeyError("api_key_env",
                       "the environment variable " + key_env + " is not set");
      }
      r.api_key = *key;
    }
    RETURN_IF_ERROR(t.String("upstream_model", &r.upstream_model));
    RETURN_IF_ERROR(t.Number("connect_timeout", &r.connect_timeout_seconds, 0.001, 3600));
    RETURN_IF_ERROR(t.Number("first_byte_timeout", &r.first_byte_timeout_seconds, 0.001, 86400));
    RETURN_IF_ERROR(t.Number("total_timeout", &r.total_timeout_seconds, 0.001, 86400));
    RETURN_IF_ERROR(t.Integer("pool_size", &r.pool_size, 0, 100000));
    RETURN_IF_ERROR(t.Bool("verify_tls", &r.verify_tls));
    RETURN_IF_ERROR(t.String("ca_file", &r.ca_file));
    RETURN_IF_ERROR(t.String("discover", &b->discover));
    if (!b->discover.empty() && b->discover != "dns") {
      return t.KeyError("discover", "must be \"dns\", not \"" + b->discover + "\"");
    }
    RETURN_IF_ERROR(t.Number("discover_interval", &b->discover_interval, 0.1, 86400));
    RETURN_IF_ERROR(t.String("hosts_file", &b->hosts_file));
    for (const char* key : {"discover_interval", "hosts_file"}) {
      if (b->discover.empty() && t.Get(key) != nullptr) {
        return t.KeyError(key, "needs discover = \"dns\"");
      }
    }
    if (!b->hosts_file.empty()) b->hosts_file = BesideConfig(path, b->hosts_file);
  } else if (b->kind == "local") {
    LocalBackendOptions& l = b->local;
    l.name = b->name;
    RETURN_IF_ERROR(ModelPath(t, path, &l.model_path));
    RETURN_IF_ERROR(t.String("served_model_name", &l.served_model_name));
    RETURN_IF_ERROR(t.String("chat_template", &l.chat_template));
    RETURN_IF_ERROR(t.Integer("threads", &l.threads, 1, 1024));
    RETURN_IF_ERROR(t.Integer("block_size", &l.block_size, 1, 1024));
    RETURN_IF_ERROR(t.Integer("kv_cache_memory", &l.kv_cache_memory, 0, INT64_MAX));
    RETURN_IF_ERROR(t.Integer("max_model_len", &l.max_model_len, 0, 1 << 24));
    RETURN_IF_ERROR(t.Integer("max_num_seqs", &l.max_num_seqs, 1, 65536));
    RETURN_IF_ERROR(t.Integer("max_num_batched_tokens", &l.max_num_batched_tokens, 1, 1 << 24));
    RETURN_IF_ERROR(t.Bool("prefix_caching", &l.prefix_caching));
    RETURN_IF_ERROR(t.Bool("window_pool", &l.window_pool));
    RETURN_IF_ERROR(t.String("kv_cache_dtype", &l.kv_cache_dtype));
    RETURN_IF_ERROR(t.Integer("max_queue", &l.max_queue, 1, 1 << 20));
    RETURN_IF_ERROR(t.Number("request_timeout", &l.request_timeout_seconds, 0, 86400));
    RETURN_IF_ERROR(t.String("speculative", &l.speculative));
    if (l.speculative.rfind("draft:", 0) == 0) l.speculative = "draft:" + BesideConfig(path, l.speculative.substr(6));
    RETURN_IF_ERROR(t.Integer("num_speculative_tokens", &l.num_speculative_tokens, 1, 32));
    RETURN_IF_ERROR(t.Integer("speculative_max_batch", &l.speculative_max_batch, 1, 65536));
  } else if (b->kind == "embedding") {
    EmbeddingBackendOptions& e = b->embedding;
    e.name = b->name;
    RETURN_IF_ERROR(ModelPath(t, path, &e.embedder.model_path));
    RETURN_IF_ERROR(t.String("served_model_name", &e.embedder.name));
    RETURN_IF_ERROR(t.Integer("threads", &e.embedder.threads, 1, 1024));
    std::string pooling;
    RETURN_IF_ERROR(t.String("pooling", &pooling));
    if (!pooling.empty()) {
      StatusOr<Pooling> p = ParsePooling(pooling);
      if (!p.ok()) return t.KeyError("pooling", p.status().message());
      e.embedder.pooling = *p;
    }
    RETURN_IF_ERROR(t.Bool("normalize", &e.embedder.normalize));
    RETURN_IF_ERROR(t.Integer("max_batch_tokens", &e.embedder.max_batch_tokens, 1, 1 << 24));
    RETURN_IF_ERROR(t.Integer("max_queue", &e.max_queue, 1, 1 << 20));
    RETURN_IF_ERROR(t.Integer("max_inputs", &e.max_inputs, 1, 1 << 20));
  } else {
    return t.KeyError("kind",
                   "must be \"local\", \"openai\", \"anthropic\" or \"embedding\", not \"" + b->kind + "\"");
  }
  RETURN_IF_ERROR(t.NoOtherKeys());
  // The key itself, not only its variable's name: a reload after the key changed makes the backend anew.
  b->fingerprint = t.Fingerprint() + "\n" + b->remote.api_key;
  return Status::Ok();
}

// Each element of the array of tables `key` ([[route.class]]), through fn.
Status ForEachTable(TableReader& t, const std::string& key,
                    const std::function<Status(TableReader&, size_t)>& fn) {
  const toml::node* n = t.Get(key);
  if (n == nullptr) return Status::Ok();
  const toml::array* array = n->as_array();
  if (array == nullptr) return t.Error(*n, key, "must be an array of tables: [[route." + key + "]]");
  for (size_t i = 0; i < array->size(); ++i) {
    const toml::table* table = (*array)[i].as_table();
    if (table == nullptr) return t.Error((*array)[i], key, "must be an array of tables: [[route." + key + "]]");
    TableReader reader(*table, t.path(), t.what() + ": " + key + " #" + std::to_string(i + 1));
    RETURN_IF_ERROR(fn(reader, i));
    RETURN_IF_ERROR(reader.NoOtherKeys());
  }
  return Status::Ok();
}

StatusOr<PolicyKind> ReadPolicy(TableReader& t, const std::string& fallback) {
  std::string policy = fallback;
  RETURN_IF_ERROR(t.String("policy", &policy));
  StatusOr<PolicyKind> kind = ParsePolicyKind(policy);
  if (!kind.ok()) return t.KeyError("policy", kind.status().message());
  return kind;
}

Status ReadRule(TableReader& t, const std::vector<RouteClassConfig>& classes, size_t i, RouteRule* rule) {
  std::string class_name;
  RETURN_IF_ERROR(t.String("class", &class_name, true));
  rule->class_idx = -1;
  for (size_t k = 0; k < classes.size(); ++k) {
    if (classes[k].name == class_name) rule->class_idx = static_cast<int>(k);
  }
  if (rule->class_idx < 0) return t.KeyError("class", "no [[route.class]] is named '" + class_name + "'");
  rule->name = "#" + std::to_string(i + 1);
  RETURN_IF_ERROR(t.String("name", &rule->name));
  RETURN_IF_ERROR(t.String("model", &rule->model_glob));
  std::string pattern;
  RETURN_IF_ERROR(t.String("user_regex", &pattern));
  if (!pattern.empty()) {
    StatusOr<std::shared_ptr<BoundedRegex>> regex = BoundedRegex::Compile(pattern);
    if (!regex.ok()) return t.KeyError("user_regex", regex.status().message());
    rule->user_regex = std::move(regex).value();
  }
  RETURN_IF_ERROR(t.Integer("min_prompt_chars", &rule->min_prompt_chars, 0, INT64_MAX));
  RETURN_IF_ERROR(t.Integer("max_prompt_chars", &rule->max_prompt_chars, 0, INT64_MAX));
  RETURN_IF_ERROR(t.Integer("min_output_tokens", &rule->min_output_tokens, 0, INT64_MAX));
  RETURN_IF_ERROR(t.Integer("max_output_tokens", &rule->max_output_tokens, 0, INT64_MAX));
  for (auto [key, out] : {std::pair{"tools", &rule->tools}, std::pair{"json", &rule->json}}) {
    bool v = false;
    if (t.Get(key) != nullptr) {
      RETURN_IF_ERROR(t.Bool(key, &v));
      *out = v;
    }
  }
  const bool any = !rule->model_glob.empty() || rule->user_regex || rule->min_prompt_chars > 0 ||
                   rule->max_prompt_chars >= 0 || rule->min_output_tokens >= 0 || rule->max_output_tokens >= 0 ||
                   rule->tools || rule->json;
  if (!any) {
    return t.Error("a rule needs a condition (model, user_regex, min/max_prompt_chars, min/max_output_tokens, "
                   "tools, json); the route's default takes what no rule does");
  }
  return Status::Ok();
}

Status ReadClassifier(TableReader& c, const std::vector<RouteClassConfig>& classes, RouteClassifierConfig* out) {
  RETURN_IF_ERROR(c.String("model", &out->model, true));
  out->model = BesideConfig(c.path(), out->model);
  RETURN_IF_ERROR(c.String("embedder", &out->embedder));
  for (const char* kind : {"local:", "words:"}) {
    if (out->embedder.rfind(kind, 0) == 0) {
      out->embedder = kind + BesideConfig(c.path(), out->embedder.substr(std::strlen(kind)));
    }
  }
  RETURN_IF_ERROR(c.Number("min_probability", &out->min_probability, 0, 1));
  if (const toml::node* n = c.Get("labels")) {
    if (!n->is_table()) return c.Error(*n, "labels", "must be a table of label = \"class\"");
    for (const auto& [label, value] : *n->as_table()) {
      const std::string name = value.is_string() ? value.as_string()->get() : "";
      bool known = false;
      for (const RouteClassConfig& k : classes) known |= k.name == name;
      if (!known) {
        return c.Error(value, "labels", "the label '" + std::string(label.str()) +
                                            "' must map to the name of a [[route.class]]");
      }
      out->labels.emplace_back(std::string(label.str()), name);
    }
  }
  return c.NoOtherKeys();
}

// policy = "classify": [[route.class]], [[route.rule]], default, classifier.
Status ReadClassify(TableReader& t, RouteConfig* r) {
  if (t.Get("backends") != nullptr) {
    return t.KeyError("backends",
                   "a classify route has no backends of its own: each [[route.class]] names its backends");
  }
  RETURN_IF_ERROR(ForEachTable(t, "class", [&](TableReader& c, size_t) {
    RouteClassConfig k;
    RETURN_IF_ERROR(c.String("name", &k.name, true));
    if (k.name.empty()) return c.Error("key 'name' must not be empty");
    for (const RouteClassConfig& other : r->classes) {
      if (other.name == k.name) return c.Error("a second class named '" + k.name + "'");
    }
    RETURN_IF_ERROR(c.StringList("backends", &k.backends));
    if (k.backends.empty()) return c.KeyError("backends", "must name at least one backend");
    ASSIGN_OR_RETURN(k.policy, ReadPolicy(c, "latency"));
    if (k.policy == PolicyKind::kClassify) return c.KeyError("policy", "a class cannot classify");
    RETURN_IF_ERROR(c.StringList("fallback", &k.fallback, false));
    r->classes.push_back(std::move(k));
    return Status::Ok();
  }));
  if (r->classes.empty()) return t.Error("a classify route needs at least one [[route.class]]");
  // The route's backends: every class's and fallback's, once each, in order of appearance.
  for (const RouteClassConfig& k : r->classes) {
    for (const auto* list : {&k.backends, &k.fallback}) {
      for (const std::string& b : *list) {
        if (std::find(r->backends.begin(), r->backends.end(), b) == r->backends.end()) r->backends.push_back(b);
      }
    }
  }
  std::string default_class = r->classes[0].name;
  RETURN_IF_ERROR(t.String("default", &default_class));
  r->default_class = -1;
  for (size_t k = 0; k < r->classes.size(); ++k) {
    if (r->classes[k].name == default_class) r->default_class = static_cast<int>(k);
  }
  if (r->default_class < 0) {
    return t.KeyError("default", "no [[route.class]] is named '" + default_class + "'");
  }
  RETURN_IF_ERROR(ForEachTable(t, "rule", [&](TableReader& c, size_t i) {
    RouteRule rule;
    RETURN_IF_ERROR(ReadRule(c, r->classes, i, &rule));
    r->rules.push_back(std::move(rule));
    return Status::Ok();
  }));
  if (const toml::node* n = t.Get("classifier")) {
    if (!n->is_table()) return t.Error(*n, "classifier", "must be a table, e.g. { model = \"router.bin\" }");
    TableReader c(*n->as_table(), t.path(), t.what() + ": classifier");
    RouteClassifierConfig classifier;
    RETURN_IF_ERROR(ReadClassifier(c, r->classes, &classifier));
    r->classifier = std::move(classifier);
  }
  return Status::Ok();
}

Status ReadRoute(TableReader& t, RouteConfig* r) {
  RETURN_IF_ERROR(t.String("model", &r->model, true));
  if (r->model.empty()) return t.Error("key 'model' must not be empty");
  RETURN_IF_ERROR(t.StringList("aliases", &r->aliases, false));
  ASSIGN_OR_RETURN(r->policy, ReadPolicy(t, "fallback"));
  if (r->policy == PolicyKind::kClassify) {
    RETURN_IF_ERROR(ReadClassify(t, r));
  } else {
    for (const char* key : {"class", "rule", "default", "classifier"}) {
      if (const toml::node* n = t.Get(key)) return t.Error(*n, key, "only a route with policy = \"classify\" has it");
    }
    RETURN_IF_ERROR(t.StringList("backends", &r->backends));
    if (r->backends.empty()) return t.KeyError("backends", "must name at least one backend");
  }
  RETURN_IF_ERROR(t.Integer("max_attempts", &r->max_attempts, 0, 1000));
  RETURN_IF_ERROR(ReadHedge(t, r));
  RETURN_IF_ERROR(t.Integer("affinity_prefix_chars", &r->affinity_prefix_chars, 1, 1 << 24));
  RETURN_IF_ERROR(t.Number("explore", &r->policy_options.explore, 0, 1));
  RETURN_IF_ERROR(t.Number("load_factor", &r->policy_options.load_factor, 1, 100));
  RETURN_IF_ERROR(t.Number("ewma_alpha", &r->ewma_alpha, 0.001, 1));
  RETURN_IF_ERROR(t.Bool("exact_cache", &r->exact_cache));
  RETURN_IF_ERROR(t.Number("exact_cache_ttl", &r->exact_cache_ttl, 0.001, 1e9));
  RETURN_IF_ERROR(t.Bool("cache_sampled", &r->cache_sampled));
  RETURN_IF_ERROR(t.Bool("coalesce", &r->coalesce));
  RETURN_IF_ERROR(ReadPromptCache(t, r));
  if (const toml::node* n = t.Get("semantic_cache")) {
    if (!n->is_table()) {
      return t.Error(*n, "semantic_cache", "must be a table, e.g. { embedder = \"hash\", threshold = 0.93 }");
    }
    TableReader s(*n->as_table(), t.path(), t.what() + ": semantic_cache");
    SemanticCacheConfig c;
    RETURN_IF_ERROR(s.String("embedder", &c.embedder, true));
    if (c.embedder.empty()) return s.KeyError("embedder", "must not be empty");
    // The files an embedder SPEC names are relative to the config file, as a backend's model is.
    for (const char* kind : {"local:", "words:"}) {
      if (c.embedder.rfind(kind, 0) == 0) {
        const size_t n = std::strlen(kind);
        c.embedder = kind + BesideConfig(t.path(), c.embedder.substr(n));
      }
    }
    RETURN_IF_ERROR(s.Number("threshold", &c.threshold, -1, 1));
    RETURN_IF_ERROR(s.Number("verifier", &c.verifier, 0, 1));
    RETURN_IF_ERROR(s.String("verifier_weights", &c.verifier_weights));
    c.verifier_weights = BesideConfig(t.path(), c.verifier_weights);
    RETURN_IF_ERROR(s.Number("band", &c.band, 0, 1));
    RETURN_IF_ERROR(s.String("guards", &c.guards));
    if (c.guards != "off" && c.guards != "band" && c.guards != "all") {
      return s.KeyError("guards", "must be \"off\", \"band\" or \"all\", not \"" + c.guards + "\"");
    }
    c.ttl = r->exact_cache_ttl;
    RETURN_IF_ERROR(s.Number("ttl", &c.ttl, 0.001, 1e9));
    SemanticAuditOptions& a = c.audit;
    RETURN_IF_ERROR(s.Number("audit_sample", &a.sample, 0, 1));
    RETURN_IF_ERROR(s.Integer("audit_concurrency", &a.concurrency, 1, 1024));
    RETURN_IF_ERROR(s.String("audit_compare", &a.compare));
    if (a.compare != "auto" && a.compare != "exact" && a.compare != "similar") {
      return s.KeyError("audit_compare",
                     "must be \"auto\", \"exact\" or \"similar\", not \"" + a.compare + "\"");
    }
    RETURN_IF_ERROR(s.Number("audit_agree", &a.agree, -1, 1));
    RETURN_IF_ERROR(s.Number("max_false_hit_rate", &a.max_false_hit_rate, 0, 1));
    RETURN_IF_ERROR(s.Bool("auto_threshold", &a.auto_threshold));
    if (a.auto_threshold && a.sample <= 0) {
      return s.KeyError("auto_threshold", "needs audit_sample > 0: the audits are its evidence");
    }
    RETURN_IF_ERROR(s.NoOtherKeys());
    r->semantic_cache = std::move(c);
  }
  if (const toml::node* n = t.Get("trim")) {
    if (!n->is_table()) return t.Error(*n, "trim", "must be a table, e.g. { whitespace = true, history_tokens = 4000 }");
    TableReader c(*n->as_table(), t.path(), t.what() + ": trim");
    TrimConfig trim;
    TrimOptions& o = trim.options;
    RETURN_IF_ERROR(c.Bool("whitespace", &o.whitespace));
    RETURN_IF_ERROR(c.Bool("duplicates", &o.duplicates));
    RETURN_IF_ERROR(c.Integer("min_duplicate_words", &o.min_duplicate_words, 1, 1000));
    RETURN_IF_ERROR(c.Integer("history_tokens", &o.history_tokens, 0, INT64_MAX));
    RETURN_IF_ERROR(c.Bool("documents", &o.documents));
    RETURN_IF_ERROR(c.Integer("documents_top_k", &o.documents_top_k, 0, 1000000));
    RETURN_IF_ERROR(c.Number("documents_min_score", &o.documents_min_score, -1e300, 1e300));
    RETURN_IF_ERROR(c.Integer("max_document_tokens", &o.max_document_tokens, 0, INT64_MAX));
    RETURN_IF_ERROR(c.String("tokenizer", &trim.tokenizer));
    trim.tokenizer = BesideConfig(t.path(), trim.tokenizer);
    RETURN_IF_ERROR(c.NoOtherKeys());
    if (!o.whitespace && !o.duplicates && o.history_tokens == 0 && !o.documents) {
      return c.Error("turns no step on (whitespace, duplicates, history_tokens, documents)");
    }
    r->trim = std::move(trim);
  }
  return t.NoOtherKeys();
}

Status ReadCache(TableReader& t, const std::string& config_path, EnvReader env, CacheConfig* c) {
  RETURN_IF_ERROR(t.String("store", &c->store));
  const bool sqlite = c->store.rfind("sqlite:", 0) == 0 && c->store.size() > 7;
  const bool redis = c->store.rfind("redis://", 0) == 0 || c->store.rfind("rediss://", 0) == 0;
  if (c->store != "memory" && !sqlite && !redis) {
    return t.KeyError("store",
                   "must be \"memory\", \"sqlite:PATH\" or \"redis[s]://[[USER]:PASSWORD@]HOST:PORT[/DB]\", not \"" +
                       RedactRedisUrl(c->store) + "\"");
  }
  if (redis) {
    if (StatusOr<RedisAddress> a = ParseRedisUrl(c->store); !a.ok()) {
      return t.KeyError("store", a.status().message());
    }
  }
  std::string password_env;
  RETURN_IF_ERROR(t.String("password_env", &password_env));
  if (!password_env.empty()) {
    if (!redis) return t.KeyError("password_env", "is for a redis:// store only");
    std::optional<std::string> password = env(password_env);
    if (!password || password->empty()) {
      return t.KeyError("password_env", "the environment variable " + password_env + " is not set");
    }
    c->password = *password;
  }
  RETURN_IF_ERROR(t.Bool("verify_tls", &c->verify_tls));
  RETURN_IF_ERROR(t.String("ca_file", &c->ca_file));
  c->ca_file = BesideConfig(config_path, c->ca_file);
  RETURN_IF_ERROR(t.Integer("max_entries", &c->max_entries, 1, INT64_MAX));
  RETURN_IF_ERROR(t.Integer("max_bytes", &c->max_bytes, 1, INT64_MAX));
  return t.NoOtherKeys();
}

Status ReadServer(TableReader& t, const std::string& config_path, EnvReader env, ServerConfig* s) {
  std::string host;
  RETURN_IF_ERROR(t.String("host", &host));
  if (!host.empty()) s->host = host;
  int port = -1;
  RETURN_IF_ERROR(t.Integer("port", &port, 0, 65535));
  if (port >= 0) s->port = port;
  // A key read from the environment variable that `name` names.
  auto key_from_env = [&](const char* name, std::optional<std::string>* out) -> Status {
    std::string variable;
    RETURN_IF_ERROR(t.String(name, &variable));
    if (variable.empty()) return Status::Ok();
    std::optional<std::string> key = env(variable);
    if (!key || key->empty()) return t.KeyError(name, "the environment variable " + variable + " is not set");
    *out = *key;
    return Status::Ok();
  };
  // A key from the first line of a file (a mounted secret: SIGHUP reads it again, so it rotates).
  auto key_from_file = [&](const char* name, std::optional<std::string>* out) -> Status {
    std::string file;
    RETURN_IF_ERROR(t.String(name, &file));
    if (file.empty()) return Status::Ok();
    if (out->has_value()) return t.KeyError(name, "give the key by a file or by a variable, not both");
    std::ifstream in(BesideConfig(config_path, file));
    std::string key;
    if (!in || !std::getline(in, key)) return t.KeyError(name, "cannot read a key from " + file);
    while (!key.empty() && (key.back() == '\r' || key.back() == ' ' || key.back() == '\t')) key.pop_back();
    if (key.empty()) return t.KeyError(name, "the first line of " + file + " is empty");
    *out = std::move(key);
    return Status::Ok();
  };
  RETURN_IF_ERROR(key_from_env("api_key_env", &s->api_key));
  RETURN_IF_ERROR(key_from_env("admin_key_env", &s->admin_key));
  RETURN_IF_ERROR(key_from_file("api_key_file", &s->api_key));
  RETURN_IF_ERROR(key_from_file("admin_key_file", &s->admin_key));
  RETURN_IF_ERROR(key_from_env("metrics_key_env", &s->metrics_key));
  RETURN_IF_ERROR(key_from_file("metrics_key_file", &s->metrics_key));
  size_t body = 0;
  RETURN_IF_ERROR(t.Integer("max_body_bytes", &body, 1, INT64_MAX));
  if (body > 0) s->max_body_bytes = body;
  int io = 0, workers = 0;
  RETURN_IF_ERROR(t.Integer("io_threads", &io, 1, 256));
  if (io > 0) s->io_threads = io;
  RETURN_IF_ERROR(t.Integer("workers", &workers, 1, 256));
  if (workers > 0) s->workers = workers;
  int connections = 0;
  RETURN_IF_ERROR(t.Integer("max_connections", &connections, 1, 1 << 20));
  if (connections > 0) s->max_connections = connections;
  for (auto [key, out] : {std::pair{"read_timeout", &s->read_timeout}, std::pair{"write_timeout", &s->write_timeout}}) {
    double seconds = 0;
    if (t.Get(key) == nullptr) continue;
    RETURN_IF_ERROR(t.Number(key, &seconds, 0.001, 86400));
    *out = seconds;
  }
  int64_t unsent = 0;
  RETURN_IF_ERROR(t.Integer("max_unsent_bytes", &unsent, 4096, INT64_MAX));
  if (unsent > 0) s->max_unsent_bytes = unsent;
  for (auto [key, out] : {std::pair{"access_log", &s->access_log}, std::pair{"public_metrics", &s->public_metrics}}) {
    const toml::node* n = t.Get(key);
    if (n == nullptr) continue;
    if (!n->is_boolean()) return t.Error(*n, key, "must be true or false");
    *out = n->as_boolean()->get();
  }
  for (auto [key, out] : {std::pair{"allowed_origins", &s->allowed_origins}, std::pair{"allowed_hosts", &s->allowed_hosts}}) {
    if (t.Get(key) == nullptr) continue;
    std::vector<std::string> list;
    RETURN_IF_ERROR(t.StringList(key, &list));
    *out = std::move(list);
  }
  if (const toml::node* n = t.Get("capture")) {
    if (!n->is_table()) {
      return t.Error(*n, "capture", "must be a table, e.g. { path = \"traffic.jsonl\", sample = 1.0, bodies = true }");
    }
    TableReader c(*n->as_table(), t.path(), t.what() + ": capture");
    CaptureOptions capture;
    RETURN_IF_ERROR(c.String("path", &capture.path, true));
    if (capture.path.empty()) return c.KeyError("path", "must not be empty");
    RETURN_IF_ERROR(c.Number("sample", &capture.sample, 1e-9, 1));
    RETURN_IF_ERROR(c.Bool("bodies", &capture.bodies));
    RETURN_IF_ERROR(c.Integer("max_bytes", &capture.max_bytes, 4096, INT64_MAX));
    if (c.Get("redact") != nullptr) RETURN_IF_ERROR(c.StringList("redact", &capture.redact));
    for (const std::string& pattern : capture.redact) {
      StatusOr<std::shared_ptr<BoundedRegex>> regex = BoundedRegex::Compile(pattern);
      if (!regex.ok()) return c.KeyError("redact", "'" + pattern + "': " + regex.status().message());
    }
    RETURN_IF_ERROR(c.NoOtherKeys());
    s->capture = std::move(capture);
  }
  return t.NoOtherKeys();
}

Status ReadTelemetry(TableReader& t, EnvReader env, TelemetryConfig* out) {
  RETURN_IF_ERROR(t.String("otlp_endpoint", &out->otlp_endpoint, true));
  if (StatusOr<HttpUrl> url = ParseHttpUrl(out->otlp_endpoint); !url.ok()) {
    return t.KeyError("otlp_endpoint", url.status().message());
  }
  RETURN_IF_ERROR(t.String("otlp_protocol", &out->otlp_protocol));
  if (out->otlp_protocol != "http/json") {
    return t.KeyError("otlp_protocol",
                   "'" + out->otlp_protocol + "' is not supported: this build exports \"http/json\" only "
                   "(collectors take it on the same port, 4318)");
  }
  RETURN_IF_ERROR(t.String("service_name", &out->service_name));
  if (out->service_name.empty()) return t.KeyError("service_name", "must not be empty");
  if (t.Get("sample_ratio") != nullptr) RETURN_IF_ERROR(t.Number("sample_ratio", &out->sample_ratio, 0, 1));
  std::string headers_env;
  RETURN_IF_ERROR(t.String("headers_env", &headers_env));
  if (!headers_env.empty()) {
    // An unset variable is no headers (a collector without auth); a set one must parse.
    if (std::optional<std::string> text = env(headers_env)) {
      StatusOr<std::vector<std::pair<std::string, std::string>>> headers = ParseOtlpHeaders(*text);
      if (!headers.ok()) return t.KeyError("headers_env", "$" + headers_env + ": " +
                                        headers.status().message());
      out->headers = std::move(*headers);
    }
  }
  RETURN_IF_ERROR(t.Bool("capture_content", &out->capture_content));
  return t.NoOtherKeys();
}

// [[key]]: name, the secret by key_env or its hash by key_sha256, tenant, routes, limits.
Status ReadKey(TableReader& t, EnvReader env, KeyConfig* out) {
  RETURN_IF_ERROR(t.String("name", &out->name, true));
  if (out->name.empty()) return t.KeyError("name", "must not be empty");
  for (char c : out->name) {  // a label value and a log field: printable, no quotes
    if (static_cast<unsigned char>(c) < 0x21 || c == 0x7f || c == '"' || c == '\\') {
      return t.KeyError("name", "may hold no space, quote, backslash or control character");
    }
  }
  std::string key_env, key_sha256;
  RETURN_IF_ERROR(t.String("key_env", &key_env));
  RETURN_IF_ERROR(t.String("key_sha256", &key_sha256));
  if (key_env.empty() == key_sha256.empty()) {
    return t.Error("needs one of key_env (the variable holding the key) or key_sha256 (the hex SHA-256 of the key)");
  }
  if (!key_env.empty()) {
    std::optional<std::string> secret = env(key_env);
    if (!secret || secret->empty()) return t.KeyError("key_env", "$" + key_env + " is not set");
    out->sha256 = Sha256(*secret);
  } else if (key_sha256.size() != 64 || !FromHex(key_sha256, &out->sha256)) {
    return t.KeyError("key_sha256", "must be 64 hex digits (sha256sum of the key)");
  }
  out->tenant = out->name;
  RETURN_IF_ERROR(t.String("tenant", &out->tenant));
  RETURN_IF_ERROR(t.StringList("routes", &out->routes, false));
  constexpr int64_t kMax = int64_t{1} << 40;
  RETURN_IF_ERROR(t.Integer("requests_per_minute", &out->requests_per_minute, 0, kMax));
  RETURN_IF_ERROR(t.Integer("tokens_per_minute", &out->tokens_per_minute, 0, kMax));
  RETURN_IF_ERROR(t.Integer("max_tokens_per_day", &out->max_tokens_per_day, 0, kMax));
  return t.NoOtherKeys();
}

}  // namespace

std::optional<std::string> ReadEnv(const std::string& name) {
  const char* v = std::getenv(name.c_str());
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

StatusOr<GatewayConfig> ParseGatewayConfig(const std::string& text, const std::string& path, EnvReader env) {
  toml::table root;
  try {
    root = toml::parse(text, path);
  } catch (const toml::parse_error& e) {
    return InvalidArgumentError(path + ":" + std::to_string(e.source().begin.line) + ":" +
                                std::to_string(e.source().begin.column) + ": " + std::string(e.description()));
  }
  GatewayConfig config;
  config.path = path;
  for (const auto& [key, node] : root) {
    const std::string k(key.str());
    if (k != "backend" && k != "route" && k != "server" && k != "cache" && k != "telemetry" && k != "key" &&
        k != "limits" && k != "responses") {
      return InvalidArgumentError(path + ":" + std::to_string(node.source().begin.line) + ": unknown key '" + k +
                                  "' (expected [[backend]], [[route]], [[key]], [server], [cache], [limits], "
                                  "[responses] or [telemetry])");
    }
  }
  auto tables = [&](const char* key, const std::function<Status(const toml::table&, size_t)>& fn) -> Status {
    const toml::node* n = root.get(key);
    if (n == nullptr) return Status::Ok();
    const toml::array* array = n->as_array();
    if (array == nullptr) {
      return InvalidArgumentError(path + ":" + std::to_string(n->source().begin.line) + ": '" + key +
                                  "' must be an array of tables: [[" + key + "]]");
    }
    for (size_t i = 0; i < array->size(); ++i) {
      const toml::table* t = (*array)[i].as_table();
      if (t == nullptr) {
        return InvalidArgumentError(path + ":" + std::to_string((*array)[i].source().begin.line) + ": '" + key +
                                    "' must be an array of tables: [[" + key + "]]");
      }
      RETURN_IF_ERROR(fn(*t, i));
    }
    return Status::Ok();
  };
  RETURN_IF_ERROR(tables("backend", [&](const toml::table& t, size_t i) {
    BackendConfig b;
    TableReader reader(t, path, "backend #" + std::to_string(i + 1));
    RETURN_IF_ERROR(ReadBackend(reader, path, env, &b));
    for (const BackendConfig& other : config.backends) {
      if (other.name == b.name) return reader.Error("a second backend named '" + b.name + "'");
    }
    config.backends.push_back(std::move(b));
    return Status::Ok();
  }));
  RETURN_IF_ERROR(tables("route", [&](const toml::table& t, size_t i) {
    RouteConfig r;
    TableReader reader(t, path, "route #" + std::to_string(i + 1));
    RETURN_IF_ERROR(ReadRoute(reader, &r));
    for (const std::string& name : r.backends) {
      const BackendConfig* found = nullptr;
      for (const BackendConfig& b : config.backends) {
        if (b.name == name) found = &b;
      }
      // A classify route's backends are named by its classes.
      auto error = [&](const std::string& message) {
        const toml::node* at = reader.Get("backends");
        return at != nullptr ? reader.Error(*at, "backends", message) : reader.Error("class backends: " + message);
      };
      if (found == nullptr) return error("no [[backend]] is named '" + name + "'");
      if (found->kind == "embedding") {
        return error("'" + name + "' is an embedding backend: it serves /v1/embeddings by its own model "
                     "name, without a route");
      }
    }
    for (const RouteConfig& other : config.routes) {
      if (other.model == r.model) return reader.Error("a second route for the model '" + r.model + "'");
    }
    config.routes.push_back(std::move(r));
    return Status::Ok();
  }));
  RETURN_IF_ERROR(tables("key", [&](const toml::table& t, size_t i) {
    KeyConfig key;
    TableReader reader(t, path, "key #" + std::to_string(i + 1));
    RETURN_IF_ERROR(ReadKey(reader, env, &key));
    for (const KeyConfig& other : config.keys) {
      if (other.name == key.name) return reader.Error("a second key named '" + key.name + "'");
      if (other.sha256 == key.sha256) return reader.Error("the same key as '" + other.name + "'");
    }
    // A glob may also name an embedding model (its served name is known once its file is read).
    const bool embeddings = std::any_of(config.backends.begin(), config.backends.end(),
                                        [](const BackendConfig& b) { return b.kind == "embedding"; });
    for (const std::string& glob : key.routes) {
      const bool any = std::any_of(config.routes.begin(), config.routes.end(),
                                   [&](const RouteConfig& r) { return GlobMatch(glob, r.model); });
      if (!any && !embeddings) {
        return reader.KeyError("routes", "'" + glob + "' matches no [[route]]");
      }
    }
    config.keys.push_back(std::move(key));
    return Status::Ok();
  }));
  if (const toml::node* n = root.get("server")) {
    if (!n->is_table()) return InvalidArgumentError(path + ": 'server' must be a table: [server]");
    TableReader reader(*n->as_table(), path, "[server]");
    RETURN_IF_ERROR(ReadServer(reader, path, env, &config.server));
  }
  if (const toml::node* n = root.get("cache")) {
    if (!n->is_table()) return InvalidArgumentError(path + ": 'cache' must be a table: [cache]");
    TableReader reader(*n->as_table(), path, "[cache]");
    RETURN_IF_ERROR(ReadCache(reader, path, env, &config.cache));
  }
  config.responses.store = root.get("cache") != nullptr && config.cache.store != "memory" ? "cache" : "memory";
  if (const toml::node* n = root.get("responses")) {
    if (!n->is_table()) return InvalidArgumentError(path + ": 'responses' must be a table: [responses]");
    TableReader t(*n->as_table(), path, "[responses]");
    ResponsesConfig& r = config.responses;
    RETURN_IF_ERROR(t.String("store", &r.store));
    if (r.store != "memory" && r.store != "cache") {
      return t.KeyError("store", "must be \"memory\" or \"cache\" (the [cache] store), not \"" +
                                                   r.store + "\"");
    }
    RETURN_IF_ERROR(t.Number("ttl", &r.ttl, 1, 1e9));
    RETURN_IF_ERROR(t.Integer("max_entries", &r.max_entries, 1, INT64_MAX));
    RETURN_IF_ERROR(t.Integer("max_bytes", &r.max_bytes, 1, INT64_MAX));
    RETURN_IF_ERROR(t.NoOtherKeys());
  }
  if (const toml::node* n = root.get("limits")) {
    if (!n->is_table()) return InvalidArgumentError(path + ": 'limits' must be a table: [limits]");
    TableReader t(*n->as_table(), path, "[limits]");
    LimitsConfig& l = config.limits;
    RETURN_IF_ERROR(t.String("store", &l.store));
    const bool redis = l.store.rfind("redis://", 0) == 0 || l.store.rfind("rediss://", 0) == 0;
    if (t.Get("store") != nullptr && l.store != "local" && !redis) {
      return t.KeyError("store",
                     "must be \"local\" or \"redis[s]://[[USER]:PASSWORD@]HOST:PORT[/DB]\", not \"" +
                         RedactRedisUrl(l.store) + "\"");
    }
    if (redis) {
      if (StatusOr<RedisAddress> a = ParseRedisUrl(l.store); !a.ok()) {
        return t.KeyError("store", a.status().message());
      }
    }
    RETURN_IF_ERROR(t.Integer("replicas", &l.replicas, 1, 100000));
    RETURN_IF_ERROR(t.NoOtherKeys());
  }
  if (const toml::node* n = root.get("telemetry")) {
    if (!n->is_table()) return InvalidArgumentError(path + ": 'telemetry' must be a table: [telemetry]");
    TableReader reader(*n->as_table(), path, "[telemetry]");
    TelemetryConfig telemetry;
    RETURN_IF_ERROR(ReadTelemetry(reader, env, &telemetry));
    config.telemetry = std::move(telemetry);
  }
  const bool any_embedding = std::any_of(config.backends.begin(), config.backends.end(),
                                         [](const BackendConfig& b) { return b.kind == "embedding"; });
  if (config.routes.empty() && !any_embedding) {
    return InvalidArgumentError(path + ": no [[route]]: a route maps the model name clients send to backends");
  }
  return config;
}

std::optional<SharedLimitsOptions> SharedLimitsOf(const GatewayConfig& config) {
  const bool cache_redis =
      config.cache.store.rfind("redis://", 0) == 0 || config.cache.store.rfind("rediss://", 0) == 0;
  const std::string& store = config.limits.store.empty() && cache_redis ? config.cache.store : config.limits.store;
  if (store.empty() || store == "local") return std::nullopt;
  SharedLimitsOptions o{.url = store, .replicas = config.limits.replicas};
  if (store == config.cache.store) {
    o.password = config.cache.password;
    o.verify_tls = config.cache.verify_tls;
    o.ca_file = config.cache.ca_file;
  }
  return o;
}

StatusOr<GatewayConfig> LoadGatewayConfig(const std::string& path, EnvReader env) {
  std::ifstream in(path);
  if (!in) return NotFoundError("cannot read the config file '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return ParseGatewayConfig(text.str(), path, env);
}

}  // namespace tachyon
