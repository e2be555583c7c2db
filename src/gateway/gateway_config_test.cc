#include "gateway/gateway_config.h"

#include <gtest/gtest.h>

namespace tachyon {
namespace {

std::optional<std::string> FakeEnv(const std::string& name) {
  if (name == "UPSTREAM_A_KEY") return std::string("sk-a");
  if (name == "UPSTREAM_B_KEY") return std::string("sk-b");
  if (name == "ANTHROPIC_API_KEY") return std::string("sk-ant");
  if (name == "OTLP_HEADERS") return std::string("api-key=k1, x-team = a");
  if (name == "BROKEN_OTLP_HEADERS") return std::string("no-equals-sign");
  if (name == "TEAM_A_KEY") return std::string("sk-team-a");
  if (name == "TEAM_B_KEY") return std::string("sk-team-b");
  return std::nullopt;
}

StatusOr<GatewayConfig> Parse(const std::string& text) { return ParseGatewayConfig(text, "t.toml", FakeEnv); }

std::string ErrorOf(const std::string& text) {
  StatusOr<GatewayConfig> c = Parse(text);
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : c.status().message();
}

TEST(GatewayConfigTest, TheSmallestConfigAndItsFixedKeys) {
  StatusOr<GatewayConfig> c = Parse(R"(
[[backend]]
name = "upstream-a"
kind = "openai"                      # or "local", with model = "path/to/model.gguf"
base_url = "http://127.0.0.1:9001/v1"
api_key_env = "UPSTREAM_A_KEY"       # optional
upstream_model = "gpt-4o-mini"       # optional

[[route]]
model = "chat"
backends = ["upstream-a"]
policy = "fallback"
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->backends.size(), 1u);
  EXPECT_EQ(c->backends[0].kind, "openai");
  EXPECT_EQ(c->backends[0].remote.base_url, "http://127.0.0.1:9001/v1");
  EXPECT_EQ(c->backends[0].remote.api_key, "sk-a");
  EXPECT_EQ(c->backends[0].remote.upstream_model, "gpt-4o-mini");
  ASSERT_EQ(c->routes.size(), 1u);
  EXPECT_EQ(c->routes[0].model, "chat");
  EXPECT_EQ(c->routes[0].backends, std::vector<std::string>{"upstream-a"});
  EXPECT_EQ(c->routes[0].policy, PolicyKind::kFallback);
}

TEST(GatewayConfigTest, AnAnthropicBackendAndItsOwnKeys) {
  StatusOr<GatewayConfig> c = Parse(R"(
[[backend]]
name = "claude"
kind = "anthropic"
base_url = "https://api.anthropic.com"
api_key_env = "UPSTREAM_A_KEY"
anthropic_version = "2023-06-01"
default_max_tokens = 1024
upstream_model = "claude-sonnet-4-5"
first_byte_timeout = 30
[[route]]
model = "claude"
backends = ["claude"]
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const RemoteBackendOptions& r = c->backends[0].remote;
  EXPECT_EQ(r.dialect, UpstreamDialect::kAnthropic);
  EXPECT_EQ(r.api_key, "sk-a");
  EXPECT_EQ(r.default_max_tokens, 1024);
  EXPECT_EQ(r.first_byte_timeout_seconds, 30);
  // Anthropic's keys on an openai backend are unknown there.
  EXPECT_NE(ErrorOf(R"(
[[backend]]
name = "o"
kind = "openai"
base_url = "http://127.0.0.1:1/v1"
default_max_tokens = 10
)").find("default_max_tokens"), std::string::npos);
  EXPECT_NE(ErrorOf(R"(
[[backend]]
name = "c"
kind = "anthropic"
base_url = "http://127.0.0.1:1"
default_max_tokens = 0
)").find("default_max_tokens"), std::string::npos);
}

TEST(GatewayConfigTest, PromptCacheIsOffAutoOrATable) {
  const std::string backend = "[[backend]]\nname = \"c\"\nkind = \"anthropic\"\nbase_url = \"http://127.0.0.1:1\"\n";
  StatusOr<GatewayConfig> c = Parse(backend + R"(
[[route]]
model = "a"
backends = ["c"]
prompt_cache = "auto"
[[route]]
model = "b"
backends = ["c"]
prompt_cache = { mode = "auto", ttl = "1h", min_tokens = 2048 }
[[route]]
model = "d"
backends = ["c"]
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->routes[0].prompt_cache.automatic);
  EXPECT_FALSE(c->routes[0].prompt_cache.long_ttl);
  EXPECT_EQ(c->routes[0].prompt_cache.scope, "a");
  EXPECT_TRUE(c->routes[1].prompt_cache.long_ttl);
  EXPECT_EQ(c->routes[1].prompt_cache.min_tokens, 2048);
  EXPECT_FALSE(c->routes[2].prompt_cache.automatic);
  EXPECT_NE(ErrorOf(backend + "[[route]]\nmodel = \"a\"\nbackends = [\"c\"]\nprompt_cache = \"always\"\n")
                .find("prompt_cache"), std::string::npos);
  EXPECT_NE(ErrorOf(backend + "[[route]]\nmodel = \"a\"\nbackends = [\"c\"]\nprompt_cache = { mode = \"auto\", ttl = \"2h\" }\n")
                .find("ttl"), std::string::npos);
}

TEST(GatewayConfigTest, EveryKeyOfALocalBackendAndTheServerTable) {
  StatusOr<GatewayConfig> c = Parse(R"(
[server]
port = 9000
io_threads = 2
max_connections = 100
read_timeout = 5
write_timeout = 2.5
max_unsent_bytes = 65536

[[backend]]
name = "small"
kind = "local"
model = "models/m.gguf"
max_num_seqs = 8
prefix_caching = false
window_pool = false
request_timeout = 2.5
breaker_failures = 3
breaker_cooldown = 1

[[route]]
model = "m"
backends = ["small"]
policy = "prefix-affinity"
affinity_prefix_chars = 64
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const LocalBackendOptions& l = c->backends[0].local;
  EXPECT_EQ(l.model_path, "models/m.gguf") << "t.toml has no folder: the path stays";
  EXPECT_EQ(l.max_num_seqs, 8);
  EXPECT_FALSE(l.prefix_caching);
  EXPECT_FALSE(l.window_pool);
  EXPECT_DOUBLE_EQ(l.request_timeout_seconds, 2.5);
  EXPECT_EQ(c->backends[0].breaker.failure_threshold, 3);
  EXPECT_EQ(*c->server.port, 9000);
  EXPECT_EQ(*c->server.max_connections, 100);
  EXPECT_DOUBLE_EQ(*c->server.read_timeout, 5);
  EXPECT_DOUBLE_EQ(*c->server.write_timeout, 2.5);
  EXPECT_EQ(*c->server.max_unsent_bytes, 65536);
  EXPECT_NE(ErrorOf("[server]\nmax_unsent_bytes = 100\n").find("max_unsent_bytes"), std::string::npos);
  EXPECT_NE(ErrorOf("[server]\nwrite_timeout = 0\n").find("write_timeout"), std::string::npos);
  EXPECT_EQ(c->routes[0].affinity_prefix_chars, 64u);
  StatusOr<GatewayConfig> nested = ParseGatewayConfig(
      "[[backend]]\nname='a'\nkind='local'\nmodel='m.gguf'\n[[route]]\nmodel='m'\nbackends=['a']\n", "/etc/t/x.toml",
      FakeEnv);
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->backends[0].local.model_path, "/etc/t/m.gguf") << "relative to the config file";
}

TEST(GatewayConfigTest, TheTrafficCaptureTable) {
  const std::string route = "[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://127.0.0.1:9/v1\"\n"
                            "[[route]]\nmodel = \"chat\"\nbackends = [\"a\"]\n";
  StatusOr<GatewayConfig> c = Parse(route + R"([server]
capture = { path = "traffic.jsonl", sample = 0.5, bodies = false, max_bytes = 1048576, redact = ['\d{3}-\d{4}'] }
)");
  ASSERT_TRUE(c.ok()) << c.status().message();
  ASSERT_TRUE(c->server.capture.has_value());
  EXPECT_EQ(c->server.capture->path, "traffic.jsonl");
  EXPECT_DOUBLE_EQ(c->server.capture->sample, 0.5);
  EXPECT_FALSE(c->server.capture->bodies);
  EXPECT_EQ(c->server.capture->max_bytes, 1048576);
  EXPECT_EQ(c->server.capture->redact, std::vector<std::string>{"\\d{3}-\\d{4}"});
  EXPECT_FALSE(Parse(route).value().server.capture.has_value());
  EXPECT_NE(ErrorOf("[server]\ncapture = { sample = 0.5 }\n").find("'path' is required"), std::string::npos);
  EXPECT_NE(ErrorOf("[server]\ncapture = { path = \"t\", sample = 0 }\n").find("sample"), std::string::npos);
  EXPECT_NE(ErrorOf("[server]\ncapture = { path = \"t\", redact = [\"(open\"] }\n").find("(open"), std::string::npos);
  EXPECT_NE(ErrorOf("[server]\ncapture = { path = \"t\", bodys = true }\n").find("bodys"), std::string::npos);
  EXPECT_NE(ErrorOf("[server]\ncapture = \"t\"\n").find("must be a table"), std::string::npos);
}

TEST(GatewayConfigTest, AnEmbeddingBackendNeedsNoRouteAndCannotBeRouted) {
  StatusOr<GatewayConfig> c = Parse(R"(
[[backend]]
name = "enc"
kind = "embedding"
model = "models/bge-small.gguf"
served_model_name = "bge"
threads = 2
pooling = "mean"
normalize = false
max_batch_tokens = 2048
max_queue = 8
max_inputs = 64
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const EmbeddingBackendOptions& e = c->backends[0].embedding;
  EXPECT_EQ(e.name, "enc");
  EXPECT_EQ(e.embedder.model_path, "models/bge-small.gguf");  // t.toml has no directory
  EXPECT_EQ(e.embedder.name, "bge");
  EXPECT_EQ(e.embedder.threads, 2);
  EXPECT_EQ(e.embedder.pooling, Pooling::kMean);
  EXPECT_FALSE(e.embedder.normalize);
  EXPECT_EQ(e.embedder.max_batch_tokens, 2048);
  EXPECT_EQ(e.max_queue, 8);
  EXPECT_EQ(e.max_inputs, 64u);
  EXPECT_NE(ErrorOf("[[backend]]\nname = \"enc\"\nkind = \"embedding\"\nmodel = \"m.gguf\"\n"
                    "[[route]]\nmodel = \"x\"\nbackends = [\"enc\"]\n")
                .find("'enc' is an embedding backend"),
            std::string::npos);
  EXPECT_NE(ErrorOf("[[backend]]\nname = \"enc\"\nkind = \"embedding\"\nmodel = \"m.gguf\"\npooling = \"max\"\n")
                .find("t.toml:5: backend #1: key 'pooling': unknown pooling 'max'"),
            std::string::npos)
      << ErrorOf("[[backend]]\nname = \"enc\"\nkind = \"embedding\"\nmodel = \"m.gguf\"\npooling = \"max\"\n");
}

TEST(GatewayConfigTest, ExactCacheKeysAndTheCacheTable) {
  StatusOr<GatewayConfig> c = Parse(R"(
[[backend]]
name = "a"
kind = "openai"
base_url = "http://127.0.0.1:9001/v1"
[[route]]
model = "chat"
backends = ["a"]
exact_cache = true
exact_cache_ttl = 600
cache_sampled = true
[cache]
store = "memory"
max_entries = 5000
max_bytes = 1048576
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->routes[0].exact_cache);
  EXPECT_DOUBLE_EQ(c->routes[0].exact_cache_ttl, 600);
  EXPECT_TRUE(c->routes[0].cache_sampled);
  EXPECT_EQ(c->cache.max_entries, 5000u);
  EXPECT_EQ(c->cache.max_bytes, 1048576u);
  const std::string base = "[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://h/v1\"\n"
                           "[[route]]\nmodel = \"chat\"\nbackends = [\"a\"]\n";
  EXPECT_NE(ErrorOf(base + "[cache]\nstore = \"memcached://127.0.0.1:11211\"\n").find("key 'store': must be \"memory\""),
            std::string::npos);
  EXPECT_EQ(Parse(base + "[cache]\nstore = \"redis://127.0.0.1:6379/2\"\n")->cache.store, "redis://127.0.0.1:6379/2");
  EXPECT_NE(ErrorOf(base + "[cache]\nstore = \"redis://h:99999\"\n").find("bad port"), std::string::npos);
  // A password from the environment, TLS with its certificate check (issue 31).
  StatusOr<GatewayConfig> r = Parse(base + "[cache]\nstore = \"rediss://cache:6380/1\"\npassword_env = \"UPSTREAM_B_KEY\"\n"
                                           "verify_tls = false\nca_file = \"ca.pem\"\n");
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->cache.password, "sk-b");
  EXPECT_FALSE(r->cache.verify_tls);
  EXPECT_EQ(r->cache.ca_file, "ca.pem");  // beside t.toml
  EXPECT_NE(ErrorOf(base + "[cache]\nstore = \"redis://h\"\npassword_env = \"NOPE\"\n").find("NOPE is not set"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "[cache]\nstore = \"memory\"\npassword_env = \"UPSTREAM_B_KEY\"\n").find("redis"),
            std::string::npos);
  // A password in the URL never shows in an error.
  EXPECT_EQ(ErrorOf(base + "[cache]\nstore = \"redis://:hunter2@h:99999\"\n").find("hunter2"), std::string::npos);
  EXPECT_EQ(Parse(base)->cache.store, "sqlite:.tachyon/cache.db");  // the default
  EXPECT_EQ(*Parse(base + "[server]\nadmin_key_env = \"UPSTREAM_A_KEY\"\n")->server.admin_key, "sk-a");
  EXPECT_NE(ErrorOf(base + "[server]\nadmin_key_env = \"NOPE\"\n").find("NOPE is not set"), std::string::npos);
  EXPECT_EQ(Parse(base + "[cache]\nstore = \"sqlite:/tmp/c.db\"\n")->cache.store, "sqlite:/tmp/c.db");
  EXPECT_NE(ErrorOf(base + "[cache]\nmax_entrys = 3\n").find("max_entrys"), std::string::npos);
}

TEST(GatewayConfigTest, SemanticCacheTable) {
  const std::string base = "[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://h/v1\"\n"
                           "[[route]]\nmodel = \"chat\"\nbackends = [\"a\"]\nexact_cache_ttl = 120\n";
  // The issue's fixed example, and the defaults.
  StatusOr<GatewayConfig> c = Parse(base + "semantic_cache = { embedder = \"hash\", threshold = 0.93 }\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->routes[0].semantic_cache);
  const SemanticCacheConfig& s = *c->routes[0].semantic_cache;
  EXPECT_EQ(s.embedder, "hash");
  EXPECT_DOUBLE_EQ(s.threshold, 0.93);
  EXPECT_DOUBLE_EQ(s.verifier, 0);
  EXPECT_EQ(s.guards, "all") << "issue 31: every hit passes the guards unless the route says otherwise";
  EXPECT_DOUBLE_EQ(s.ttl, 120);  // the route's exact_cache_ttl unless set
  EXPECT_FALSE(Parse(base)->routes[0].semantic_cache);
  c = Parse(base + "semantic_cache = { embedder = \"hash:512\", threshold = 0.64, verifier = 0.9, band = 0.05, "
                   "guards = \"all\", ttl = 30 }\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->routes[0].semantic_cache->verifier, 0.9);
  EXPECT_EQ(c->routes[0].semantic_cache->guards, "all");
  EXPECT_DOUBLE_EQ(c->routes[0].semantic_cache->ttl, 30);
  EXPECT_NE(ErrorOf(base + "semantic_cache = { threshold = 0.9 }\n").find("key 'embedder' is required"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "semantic_cache = { embedder = \"hash\", threshold = 1.5 }\n").find("key 'threshold'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "semantic_cache = { embedder = \"hash\", guards = \"some\" }\n").find("key 'guards'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "semantic_cache = { embedder = \"hash\", treshold = 0.9 }\n").find("treshold"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "semantic_cache = true\n").find("must be a table"), std::string::npos);
  // Files named by the embedder SPEC and verifier_weights are relative to the config file.
  StatusOr<GatewayConfig> files = ParseGatewayConfig(
      base + "semantic_cache = { embedder = \"local:models/bge.gguf\", verifier = 0.9, verifier_weights = \"v.json\" }\n",
      "/etc/tachyon/gw.toml", FakeEnv);
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  EXPECT_EQ(files->routes[0].semantic_cache->embedder, "local:/etc/tachyon/models/bge.gguf");
  EXPECT_EQ(files->routes[0].semantic_cache->verifier_weights, "/etc/tachyon/v.json");
  EXPECT_EQ(ParseGatewayConfig(base + "semantic_cache = { embedder = \"words:/abs/w.f32\" }\n", "/etc/gw.toml", FakeEnv)
                ->routes[0]
                .semantic_cache->embedder,
            "words:/abs/w.f32");
}

const char* kTwoOpenai = R"(
[[backend]]
name = "small"
kind = "openai"
base_url = "http://127.0.0.1:9001/v1"
[[backend]]
name = "large-a"
kind = "openai"
base_url = "http://127.0.0.1:9002/v1"
[[backend]]
name = "large-b"
kind = "openai"
base_url = "http://127.0.0.1:9003/v1"
)";

TEST(GatewayConfigTest, AClassifyRouteItsClassesRulesAndClassifier) {
  StatusOr<GatewayConfig> c = Parse(std::string(kTwoOpenai) + R"(
[[route]]
model = "auto"
aliases = ["gpt-*"]
policy = "classify"
default = "large"
classifier = { model = "router.bin", min_probability = 0.6, labels = { extraction = "small", writing = "large" } }

[[route.class]]
name = "small"
backends = ["small"]
fallback = ["large-a"]

[[route.class]]
name = "large"
backends = ["large-a", "large-b"]
policy = "least-outstanding"

[[route.rule]]
name = "extract"
class = "small"
user_regex = "(?i)^extract"
max_output_tokens = 256

[[route.rule]]
class = "large"
tools = true
model = "*-large"
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const RouteConfig& r = c->routes[0];
  EXPECT_EQ(r.policy, PolicyKind::kClassify);
  EXPECT_EQ(r.aliases, (std::vector<std::string>{"gpt-*"}));
  EXPECT_EQ(r.backends, (std::vector<std::string>{"small", "large-a", "large-b"}));
  ASSERT_EQ(r.classes.size(), 2u);
  EXPECT_EQ(r.classes[0].policy, PolicyKind::kLatency);  // the default within a class
  EXPECT_EQ(r.classes[0].fallback, (std::vector<std::string>{"large-a"}));
  EXPECT_EQ(r.classes[1].policy, PolicyKind::kLeastOutstanding);
  EXPECT_EQ(r.default_class, 1);
  ASSERT_EQ(r.rules.size(), 2u);
  EXPECT_EQ(r.rules[0].name, "extract");
  EXPECT_EQ(r.rules[0].class_idx, 0);
  EXPECT_TRUE(r.rules[0].user_regex->Search("Extract the names"));
  EXPECT_EQ(r.rules[0].max_output_tokens, 256);
  EXPECT_EQ(r.rules[1].name, "#2");
  EXPECT_EQ(r.rules[1].class_idx, 1);
  EXPECT_EQ(r.rules[1].tools, std::optional<bool>(true));
  EXPECT_FALSE(r.rules[1].json.has_value());
  ASSERT_TRUE(r.classifier.has_value());
  EXPECT_EQ(r.classifier->model, "router.bin");
  EXPECT_DOUBLE_EQ(r.classifier->min_probability, 0.6);
  EXPECT_EQ(r.classifier->labels.size(), 2u);
}

TEST(GatewayConfigTest, ClassifyErrorsSayWhatIsWrong) {
  const std::string b = kTwoOpenai;
  const std::string head = b + "[[route]]\nmodel = 'auto'\npolicy = 'classify'\n";
  EXPECT_NE(ErrorOf(head).find("at least one [[route.class]]"), std::string::npos);
  EXPECT_NE(ErrorOf(head + "backends = ['small']\n[[route.class]]\nname='s'\nbackends=['small']\n")
                .find("no backends of its own"),
            std::string::npos);
  const std::string one = head + "[[route.class]]\nname = 's'\nbackends = ['small']\n";
  EXPECT_NE(ErrorOf(head + "[[route.class]]\nname = 's'\nbackends = ['nope']\n").find("no [[backend]] is named 'nope'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(one + "[[route.rule]]\nclass = 'x'\ntools = true\n").find("no [[route.class]] is named 'x'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(one + "[[route.rule]]\nclass = 's'\n").find("a rule needs a condition"), std::string::npos);
  const std::string bad_regex = ErrorOf(one + "[[route.rule]]\nclass = 's'\nuser_regex = '(oops'\n");
  EXPECT_NE(bad_regex.find("user_regex"), std::string::npos) << bad_regex;
  EXPECT_NE(bad_regex.find("t.toml:"), std::string::npos) << bad_regex;
  EXPECT_NE(ErrorOf(one + "[[route.rule]]\nclass = 's'\ntools = true\nsize = 3\n").find("unknown key"),
            std::string::npos);
  // Keys of the route itself come before its [[route.class]] tables (TOML puts later keys in the class).
  const std::string cls = "[[route.class]]\nname = 's'\nbackends = ['small']\n";
  EXPECT_NE(ErrorOf(head + "default = 'zzz'\n" + cls).find("no [[route.class]] is named 'zzz'"), std::string::npos);
  EXPECT_NE(ErrorOf(head + "classifier = { model = 'r.bin', labels = { a = 'nowhere' } }\n" + cls).find("must map"),
            std::string::npos);
  EXPECT_NE(ErrorOf(b + "[[route]]\nmodel='c'\nbackends=['small']\ndefault='s'\n").find("policy = \"classify\""),
            std::string::npos);
}

TEST(GatewayConfigTest, TrimTable) {
  StatusOr<GatewayConfig> c = Parse(std::string(kTwoOpenai) + R"(
[[route]]
model = "chat"
backends = ["small"]
[route.trim]
whitespace = true
duplicates = true
min_duplicate_words = 4
history_tokens = 3000
documents = true
documents_top_k = 5
documents_min_score = 0.25
max_document_tokens = 1500
tokenizer = "vocab.gguf"
)");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->routes[0].trim.has_value());
  const TrimOptions& o = c->routes[0].trim->options;
  EXPECT_TRUE(o.whitespace && o.duplicates && o.documents);
  EXPECT_EQ(o.min_duplicate_words, 4);
  EXPECT_EQ(o.history_tokens, 3000);
  EXPECT_EQ(o.documents_top_k, 5);
  EXPECT_DOUBLE_EQ(o.documents_min_score, 0.25);
  EXPECT_EQ(o.max_document_tokens, 1500);
  EXPECT_EQ(c->routes[0].trim->tokenizer, "vocab.gguf");
  const std::string route = std::string(kTwoOpenai) + "[[route]]\nmodel = 'c'\nbackends = ['small']\n";
  EXPECT_NE(ErrorOf(route + "trim = { }\n").find("turns no step on"), std::string::npos);
  EXPECT_NE(ErrorOf(route + "trim = { whitespace = true, budget = 3 }\n").find("key 'budget': unknown key"),
            std::string::npos);
  EXPECT_NE(ErrorOf(route + "trim = { history_tokens = -1 }\n").find("history_tokens"), std::string::npos);
}

TEST(GatewayConfigTest, HedgeTable) {
  const std::string route = std::string(kTwoOpenai) + "[[route]]\nmodel = 'c'\nbackends = ['small', 'large-a']\n";
  StatusOr<GatewayConfig> c = Parse(route + "hedge = { after_ms = 250, max = 1 }\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->routes[0].hedge.has_value());
  EXPECT_DOUBLE_EQ(c->routes[0].hedge->after_seconds, 0.25);
  EXPECT_EQ(c->routes[0].hedge->quantile, 0);
  EXPECT_EQ(c->routes[0].hedge->max, 1);
  EXPECT_DOUBLE_EQ(c->routes[0].hedge->max_rate, 0.2);
  c = Parse(route + "hedge = { after = \"p90\", min_ms = 80, max_ms = 900, max_rate = 0.3, max = 2 }\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_DOUBLE_EQ(c->routes[0].hedge->quantile, 0.9);
  EXPECT_DOUBLE_EQ(c->routes[0].hedge->min_seconds, 0.08);
  EXPECT_DOUBLE_EQ(c->routes[0].hedge->max_seconds, 0.9);
  EXPECT_DOUBLE_EQ(c->routes[0].hedge->max_rate, 0.3);
  EXPECT_EQ(c->routes[0].hedge->max, 2);
  EXPECT_FALSE(Parse(route).value().routes[0].hedge.has_value());
  EXPECT_NE(ErrorOf(route + "hedge = { }\n").find("needs one of after_ms"), std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after_ms = 5, after = 'p90' }\n").find("needs one of after_ms"),
            std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after = 'fast' }\n").find("must be a percentile"), std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after = 'p100' }\n").find("must be a percentile"), std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after_ms = 250, min_ms = 5 }\n").find("bounds after = \"pNN\" only"),
            std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after = 'p90', min_ms = 500, max_ms = 100 }\n").find("not be above max_ms"),
            std::string::npos);
  // One bound against the other's default: the error names the key that is there (the fuzzer found a crash here).
  EXPECT_NE(ErrorOf(route + "hedge = { after = 'p90', max_ms = 1 }\n").find("key 'max_ms': min_ms ("), std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after = 'p90', min_ms = 600000 }\n").find("key 'min_ms': min_ms (600000)"),
            std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after_ms = 0 }\n").find("after_ms"), std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after_ms = 9, max = 0 }\n").find("'max'"), std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = { after_ms = 9, delay = 1 }\n").find("key 'delay': unknown key"),
            std::string::npos);
  EXPECT_NE(ErrorOf(route + "hedge = 250\n").find("must be a table"), std::string::npos);
  EXPECT_NE(ErrorOf(std::string(kTwoOpenai) + "[[route]]\nmodel = 'c'\nbackends = ['small']\nhedge = { after_ms = 9 }\n")
                .find("two backends or more"),
            std::string::npos);
}

TEST(GatewayConfigTest, CoalesceAndTheSemanticCachesAuditKeys) {
  const std::string route = std::string(kTwoOpenai) + "[[route]]\nmodel = 'c'\nbackends = ['small']\n";
  EXPECT_TRUE(Parse(route).value().routes[0].coalesce) << "single flight is on by default";
  EXPECT_FALSE(Parse(route + "coalesce = false\n").value().routes[0].coalesce);
  StatusOr<GatewayConfig> c = Parse(route + "semantic_cache = { embedder = 'hash' }\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->routes[0].semantic_cache->audit, SemanticAuditOptions{}) << "audits are off by default";
  EXPECT_EQ(c->routes[0].semantic_cache->audit.sample, 0);
  c = Parse(route + "semantic_cache = { embedder = 'hash', audit_sample = 0.25, audit_concurrency = 16, "
                    "audit_compare = 'similar', audit_agree = 0.8, auto_threshold = true, max_false_hit_rate = 0.05 }\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  const SemanticAuditOptions& a = c->routes[0].semantic_cache->audit;
  EXPECT_DOUBLE_EQ(a.sample, 0.25);
  EXPECT_EQ(a.concurrency, 16);
  EXPECT_EQ(a.compare, "similar");
  EXPECT_DOUBLE_EQ(a.agree, 0.8);
  EXPECT_TRUE(a.auto_threshold);
  EXPECT_DOUBLE_EQ(a.max_false_hit_rate, 0.05);
  auto error = [&](const std::string& keys) {
    return ErrorOf(route + "semantic_cache = { embedder = 'hash', " + keys + " }\n");
  };
  EXPECT_NE(error("audit_sample = 1.5").find("audit_sample"), std::string::npos);
  EXPECT_NE(error("audit_concurrency = 0").find("audit_concurrency"), std::string::npos);
  EXPECT_NE(error("audit_compare = 'fuzzy'").find("must be \"auto\", \"exact\" or \"similar\""), std::string::npos);
  EXPECT_NE(error("max_false_hit_rate = -0.1").find("max_false_hit_rate"), std::string::npos);
  EXPECT_NE(error("auto_threshold = true").find("needs audit_sample > 0"), std::string::npos);
}

TEST(GatewayConfigTest, ErrorsNameTheFileTheLineAndTheKey) {
  EXPECT_EQ(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"grpc\"\n"),
            "t.toml:3: backend #1: key 'kind': must be \"local\", \"openai\", \"anthropic\" or \"embedding\", not \"grpc\"");
  EXPECT_EQ(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\npolcy = 1\n"),
            "t.toml:5: backend #1: key 'polcy': unknown key");
  EXPECT_NE(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"ftp://x\"\n").find(
                "t.toml:4: backend #1: key 'base_url'"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n"
                    "api_key_env = \"NOPE\"\n"),
            "t.toml:5: backend #1: key 'api_key_env': the environment variable NOPE is not set");
  EXPECT_EQ(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n"
                    "[[route]]\nmodel = \"m\"\nbackends = [\"b\"]\n"),
            "t.toml:7: route #1: key 'backends': no [[backend]] is named 'b'");
  EXPECT_EQ(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n"
                    "[[route]]\nmodel = \"m\"\nbackends = [\"a\"]\npolicy = \"random\"\n"),
            "t.toml:8: route #1: key 'policy': unknown policy 'random' (fallback, round-robin, least-outstanding, "
            "latency, prefix-affinity, classify)");
  EXPECT_EQ(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n"
                    "connect_timeout = \"5s\"\n"),
            "t.toml:5: backend #1: key 'connect_timeout': must be a number");
  EXPECT_NE(ErrorOf("[[backend]\nname = 1").find("t.toml:1:"), std::string::npos) << "TOML syntax";
  EXPECT_NE(ErrorOf("[[backend]]\nname = \"a\"\nkind = \"openai\"\nbase_url = \"http://x/v1\"\n").find("no [[route]]"),
            std::string::npos);
  EXPECT_EQ(ErrorOf("[routes]\n"), "t.toml:1: unknown key 'routes' (expected [[backend]], [[route]], [[key]], [server], "
                                    "[cache], [limits], [responses] or [telemetry])");
  EXPECT_NE(ErrorOf("[[backend]]\nname='a'\nkind='openai'\nbase_url='http://x'\n[[backend]]\nname='a'\nkind='openai'\n"
                    "base_url='http://y'\n").find("a second backend named 'a'"),
            std::string::npos);
  EXPECT_EQ(LoadGatewayConfig("/nonexistent/t.toml").status().code(), StatusCode::kNotFound);
}

TEST(GatewayConfigTest, TelemetryTable) {
  const std::string base = "[[backend]]\nname='a'\nkind='openai'\nbase_url='http://x/v1'\n"
                           "[[route]]\nmodel='m'\nbackends=['a']\n[telemetry]\n";
  StatusOr<GatewayConfig> c = Parse(base + "otlp_endpoint = 'http://collector:4318'\nsample_ratio = 0.25\n"
                                           "headers_env = 'OTLP_HEADERS'\ncapture_content = true\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_TRUE(c->telemetry.has_value());
  EXPECT_EQ(c->telemetry->otlp_endpoint, "http://collector:4318");
  EXPECT_EQ(c->telemetry->service_name, "tachyon");
  EXPECT_EQ(c->telemetry->sample_ratio, 0.25);
  EXPECT_TRUE(c->telemetry->capture_content);
  ASSERT_EQ(c->telemetry->headers.size(), 2u);
  EXPECT_EQ(c->telemetry->headers[1].second, "a");
  EXPECT_FALSE(Parse(base.substr(0, base.find("[telemetry]")))->telemetry.has_value());
  EXPECT_NE(ErrorOf(base).find("'otlp_endpoint'"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "otlp_endpoint = 'collector:4318'\n").find("'otlp_endpoint'"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "otlp_endpoint = 'http://c:4318'\notlp_protocol = 'http/protobuf'\n").find("http/json"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "otlp_endpoint = 'http://c:4318'\nsample_ratio = 2\n").find("'sample_ratio'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "otlp_endpoint = 'http://c:4318'\nheaders_env = 'BROKEN_OTLP_HEADERS'\n")
                .find("$BROKEN_OTLP_HEADERS"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "otlp_endpoint = 'http://c:4318'\nsampel_ratio = 1\n").find("unknown key"),
            std::string::npos);
}

TEST(GatewayConfigTest, KeyTables) {
  const std::string base = "[[backend]]\nname='a'\nkind='openai'\nbase_url='http://x/v1'\n"
                           "[[route]]\nmodel='chat'\nbackends=['a']\n[[route]]\nmodel='embed-small'\nbackends=['a']\n";
  StatusOr<GatewayConfig> c =
      Parse(base + "[[key]]\nname='team-a'\nkey_env='TEAM_A_KEY'\ntenant='a'\nroutes=['chat','embed*']\n"
                   "requests_per_minute=600\ntokens_per_minute=200000\n"
                   "[[key]]\nname='team-b'\nkey_sha256='" + HexOf(Sha256("sk-team-b")) + "'\nmax_tokens_per_day=5\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ASSERT_EQ(c->keys.size(), 2u);
  EXPECT_EQ(c->keys[0].sha256, Sha256("sk-team-a"));
  EXPECT_EQ(c->keys[0].tenant, "a");
  EXPECT_EQ(c->keys[0].routes, (std::vector<std::string>{"chat", "embed*"}));
  EXPECT_EQ(c->keys[0].requests_per_minute, 600);
  EXPECT_EQ(c->keys[0].tokens_per_minute, 200000);
  EXPECT_EQ(c->keys[1].sha256, Sha256("sk-team-b"));
  EXPECT_EQ(c->keys[1].tenant, "team-b") << "the tenant defaults to the name";
  EXPECT_EQ(c->keys[1].max_tokens_per_day, 5);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\n").find("needs one of key_env"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\nkey_env='UNSET_KEY'\n").find("$UNSET_KEY is not set"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\nkey_sha256='abc'\n").find("64 hex digits"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\nkey_env='TEAM_A_KEY'\n[[key]]\nname='x'\nkey_env='TEAM_B_KEY'\n")
                .find("a second key named 'x'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\nkey_env='TEAM_A_KEY'\n[[key]]\nname='y'\nkey_env='TEAM_A_KEY'\n")
                .find("the same key as 'x'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\nkey_env='TEAM_A_KEY'\nroutes=['nope*']\n").find("matches no [[route]]"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x y'\nkey_env='TEAM_A_KEY'\n").find("'name'"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\nkey_env='TEAM_A_KEY'\nrequests_per_minute=-1\n")
                .find("'requests_per_minute'"),
            std::string::npos);
  EXPECT_NE(ErrorOf(base + "[[key]]\nname='x'\nkey_env='TEAM_A_KEY'\nrpm=1\n").find("unknown key"),
            std::string::npos);
}

TEST(GatewayConfigTest, LimitsTable) {
  const std::string base = "[[backend]]\nname='a'\nkind='openai'\nbase_url='http://x/v1'\n"
                           "[[route]]\nmodel='chat'\nbackends=['a']\n";
  EXPECT_EQ(Parse(base)->limits.store, "") << "absent: the [cache] store when it is Redis";
  EXPECT_EQ(Parse(base)->limits.replicas, 1);
  StatusOr<GatewayConfig> c = Parse(base + "[limits]\nstore='redis://10.0.0.5:6379/3'\nreplicas=4\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->limits.store, "redis://10.0.0.5:6379/3");
  EXPECT_EQ(c->limits.replicas, 4);
  EXPECT_EQ(Parse(base + "[limits]\nstore='local'\n")->limits.store, "local");
  EXPECT_NE(ErrorOf(base + "[limits]\nstore='sqlite:x.db'\n").find("must be \"local\""), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[limits]\nstore='redis://h:99999'\n").find("store"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[limits]\nreplicas=0\n").find("'replicas'"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[limits]\nreplica=2\n").find("unknown key"), std::string::npos);
  EXPECT_NE(ErrorOf("limits=3\n" + base).find("[limits]"), std::string::npos);
  // Where they are held: [limits] store, else a Redis [cache] store with its settings, else per process.
  EXPECT_FALSE(SharedLimitsOf(*Parse(base)).has_value());
  const std::string redis_cache = "[cache]\nstore='rediss://cache:6380'\nverify_tls=false\n";
  std::optional<SharedLimitsOptions> o = SharedLimitsOf(*Parse(base + redis_cache));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->url, "rediss://cache:6380");
  EXPECT_FALSE(o->verify_tls);
  EXPECT_FALSE(SharedLimitsOf(*Parse(base + redis_cache + "[limits]\nstore='local'\n")).has_value());
  o = SharedLimitsOf(*Parse(base + redis_cache + "[limits]\nstore='redis://limits:6379'\nreplicas=2\n"));
  ASSERT_TRUE(o.has_value());
  EXPECT_EQ(o->url, "redis://limits:6379");
  EXPECT_TRUE(o->verify_tls) << "another store: none of the cache's settings";
  EXPECT_EQ(o->replicas, 2);
}

TEST(GatewayConfigTest, ResponsesTable) {
  const std::string base = "[[backend]]\nname='a'\nkind='openai'\nbase_url='http://x/v1'\n"
                           "[[route]]\nmodel='chat'\nbackends=['a']\n";
  EXPECT_EQ(Parse(base)->responses.store, "memory") << "no [cache] table: memory";
  EXPECT_EQ(Parse(base + "[cache]\nstore='sqlite:/tmp/x.db'\n")->responses.store, "cache");
  EXPECT_EQ(Parse(base + "[cache]\nstore='memory'\n")->responses.store, "memory");
  StatusOr<GatewayConfig> c = Parse(base + "[cache]\nstore='redis://r:6379'\n"
                                           "[responses]\nstore='memory'\nttl=3600\nmax_entries=5\nmax_bytes=1000\n");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->responses.store, "memory");
  EXPECT_EQ(c->responses.ttl, 3600);
  EXPECT_EQ(c->responses.max_entries, 5u);
  EXPECT_EQ(c->responses.max_bytes, 1000u);
  EXPECT_EQ(Parse(base + "[responses]\nstore='cache'\n")->responses.store, "cache");
  EXPECT_NE(ErrorOf(base + "[responses]\nstore='redis://x'\n").find("\"memory\" or \"cache\""), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[responses]\nttl=0\n").find("'ttl'"), std::string::npos);
  EXPECT_NE(ErrorOf(base + "[responses]\nsize=1\n").find("unknown key"), std::string::npos);
}

TEST(GatewayConfigTest, FingerprintsChangeWithTheBackendsTable) {
  const std::string base = "[[backend]]\nname='a'\nkind='openai'\nbase_url='http://x/v1'\n"
                           "[[route]]\nmodel='m'\nbackends=['a']\n";
  StatusOr<GatewayConfig> a = Parse(base), b = Parse(base), c = Parse(
      "[[backend]]\nname='a'\nkind='openai'\nbase_url='http://y/v1'\n[[route]]\nmodel='m'\nbackends=['a']\n");
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  EXPECT_EQ(a->backends[0].fingerprint, b->backends[0].fingerprint);
  EXPECT_NE(a->backends[0].fingerprint, c->backends[0].fingerprint);
}

TEST(GatewayConfigTest, TheDocumentedExampleIsValid) {
  StatusOr<GatewayConfig> c = LoadGatewayConfig(std::string(TACHYON_SOURCE_DIR) + "/examples/tachyon.toml", FakeEnv);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->backends.size(), 7u);
  EXPECT_EQ(c->backends[6].remote.dialect, UpstreamDialect::kAnthropic);
  EXPECT_EQ(c->backends[3].kind, "embedding");
  EXPECT_EQ(c->backends[3].embedding.embedder.name, "bge-small");
  EXPECT_EQ(c->routes.size(), 5u);
  EXPECT_TRUE(c->routes[4].prompt_cache.automatic);
  EXPECT_EQ(c->routes[2].policy, PolicyKind::kPrefixAffinity);
  EXPECT_EQ(c->routes[3].policy, PolicyKind::kClassify);
  EXPECT_EQ(c->routes[3].rules.size(), 2u);
  EXPECT_TRUE(c->routes[3].rules[0].user_regex->Search("Extract the dates"));
  ASSERT_TRUE(c->routes[0].trim);
  EXPECT_EQ(c->routes[0].trim->options.history_tokens, 6000);
  EXPECT_EQ(c->backends[1].remote.api_key, "sk-b");
  EXPECT_TRUE(c->routes[0].exact_cache);
  ASSERT_TRUE(c->routes[0].semantic_cache);
  EXPECT_EQ(c->routes[0].semantic_cache->embedder, "hash");
  ASSERT_EQ(c->keys.size(), 2u);
  EXPECT_EQ(c->keys[0].sha256, Sha256("sk-team-a"));
  EXPECT_EQ(c->keys[1].sha256, Sha256("abc"));
}

}  // namespace
}  // namespace tachyon
