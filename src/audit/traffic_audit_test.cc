#include "audit/traffic_audit.h"

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "embed/embedder.h"
#include "gateway/embedder_spec.h"
#include "gateway/trim/prompt_audit.h"

namespace tachyon {
namespace {

// A chat request line of a capture.
CapturedRequest Chat(double ts, const std::string& user, nlohmann::json extra = nlohmann::json::object()) {
  CapturedRequest r;
  r.ts = ts;
  r.route = "chat";
  r.endpoint = "/v1/chat/completions";
  r.status = 200;
  r.stream = true;
  r.ttft_ms = 100;
  r.e2e_ms = 1000;
  r.prompt_tokens = 100;
  r.completion_tokens = 50;
  r.body = {{"model", "chat"}, {"temperature", 0}, {"messages", {{{"role", "user"}, {"content", user}}}}};
  for (auto& [k, v] : extra.items()) r.body[k] = v;
  return r;
}

nlohmann::json Audit(const std::vector<CapturedRequest>& rows, TrafficAuditOptions options = {}) {
  auto audit = TrafficAudit::Create(std::move(options));
  EXPECT_TRUE(audit.ok()) << audit.status().message();
  for (const CapturedRequest& r : rows) (*audit)->Add(r);
  return (*audit)->Finish();
}

nlohmann::json Lever(const nlohmann::json& report, const std::string& name) {
  for (const auto& lever : report["levers"]) {
    if (lever["lever"] == name) return lever;
  }
  ADD_FAILURE() << "no lever " << name;
  return nullptr;
}

// Puts a system message first.
void WithSystem(CapturedRequest& r, const std::string& system) {
  r.body["messages"].insert(r.body["messages"].begin(),
                            nlohmann::json::object({{"role", "system"}, {"content", system}}));
}

TEST(TrafficAuditTest, TheLeversInThePlaybooksOrderWithTheirKeys) {
  const nlohmann::json r = Audit({Chat(0, "hello there"), Chat(1, "another question")});
  ASSERT_EQ(r["levers"].size(), 8u);
  const char* names[] = {"streaming", "semantic_cache", "routing", "prompt_trimming", "prefix_caching",
                         "continuous_batching", "quantization", "speculative_decoding"};
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(r["levers"][i]["step"], i + 1);
    EXPECT_EQ(r["levers"][i]["lever"], names[i]);
    EXPECT_TRUE(r["levers"][i].contains("recommendation"));
    EXPECT_TRUE(r["levers"][i].contains("config"));
  }
  for (const char* key : {"requests", "duration_s", "ttft_p50_ms", "ttft_p95_ms", "e2e_p50_ms", "e2e_p95_ms"}) {
    EXPECT_TRUE(r.contains(key)) << key;
  }
  EXPECT_EQ(r["requests"], 2);
  EXPECT_DOUBLE_EQ(r["duration_s"].get<double>(), 2.0) << "from the first arrival to the last end (1 + 1 s)";
  EXPECT_EQ(r["ranking"].size(), 8u);
}

TEST(TrafficAuditTest, NonStreamingShareAndPerceivedTtft) {
  std::vector<CapturedRequest> rows;
  for (int i = 0; i < 4; ++i) rows.push_back(Chat(i, "question " + std::to_string(i)));
  rows[3].stream = false;
  rows[3].ttft_ms = 5000;
  rows[3].e2e_ms = 5000;
  CapturedRequest completion = Chat(5, "");
  completion.endpoint = "/v1/completions";
  completion.body = {{"model", "chat"}, {"prompt", "Once upon a time"}};
  completion.stream = false;
  rows.push_back(completion);
  const nlohmann::json r = Audit(rows);
  const nlohmann::json s = Lever(r, "streaming");
  EXPECT_DOUBLE_EQ(s["non_streaming_share"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(s["non_streaming_chat_share"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r["ttft_p50_ms"].get<double>(), 100) << "a whole answer's TTFT is its E2E";
}

TEST(TrafficAuditTest, ExactDuplicatesAndTheHitsTheExactCacheWouldHaveHad) {
  // A, A, B, A at temperature 0: two repeats, both hits.
  const nlohmann::json greedy = Audit({Chat(0, "A"), Chat(1, "A"), Chat(2, "B"), Chat(3, "A")});
  const nlohmann::json g = Lever(greedy, "semantic_cache");
  EXPECT_DOUBLE_EQ(g["exact_duplicate_share"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(g["exact_hit_rate"].get<double>(), 0.5);
  // The stream flag and the user field do not change the key; sampled requests are repeats but never hits.
  std::vector<CapturedRequest> sampled = {Chat(0, "A", {{"temperature", 0.7}}), Chat(1, "A", {{"temperature", 0.7}}),
                                          Chat(2, "A", {{"temperature", 0.7}, {"user", "u2"}, {"stream", true}})};
  const nlohmann::json s = Lever(Audit(sampled), "semantic_cache");
  EXPECT_DOUBLE_EQ(s["exact_duplicate_share"].get<double>(), 0.6667);
  EXPECT_DOUBLE_EQ(s["exact_hit_rate"].get<double>(), 0);
  // A failed first answer is not stored: the repeat misses, the one after hits.
  std::vector<CapturedRequest> failed = {Chat(0, "A"), Chat(1, "A"), Chat(2, "A")};
  failed[0].status = 502;
  failed[0].error = "upstream_5xx";
  EXPECT_DOUBLE_EQ(Lever(Audit(failed), "semantic_cache")["exact_hit_rate"].get<double>(), 0.3333);
  // Past the TTL the answer is gone.
  TrafficAuditOptions short_ttl;
  short_ttl.cache_ttl_seconds = 10;
  EXPECT_DOUBLE_EQ(Lever(Audit({Chat(0, "A"), Chat(100, "A")}, short_ttl), "semantic_cache")["exact_hit_rate"].get<double>(),
                   0);
}

TEST(TrafficAuditTest, SemanticDuplicatesWithinTheThresholdInTheSameScope) {
  auto embedder = MakeEmbedder("hash");
  ASSERT_TRUE(embedder.ok());
  const std::string a = "What is the capital city of France?", b = "what is the capital city of France",
                    c = "How do I sort a list in Python quickly?";
  std::vector<std::string> texts = {a, b, c};
  auto v = (*embedder)->Embed(texts);
  ASSERT_TRUE(v.ok());
  const int dim = (*embedder)->dimension();
  const float ab = Dot(v->data(), v->data() + dim, dim), ac = Dot(v->data(), v->data() + 2 * dim, dim);
  ASSERT_GT(ab, ac);
  TrafficAuditOptions options;
  options.threshold = (ab + ac) / 2;  // b is a's paraphrase, c is not
  const nlohmann::json r = Audit({Chat(0, a), Chat(1, b), Chat(2, c)}, options);
  const nlohmann::json s = Lever(r, "semantic_cache");
  EXPECT_DOUBLE_EQ(s["exact_duplicate_share"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(s["semantic_duplicate_share"].get<double>(), 0.3333);
  EXPECT_DOUBLE_EQ(s["semantic_hit_rate"].get<double>(), 0.3333);
  // One entry per answer: a paraphrase's answer is stored in the entry the first
  // question made (whose own answer failed), and the first question asked again gets it.
  std::vector<CapturedRequest> rows = {Chat(0, a), Chat(1, b), Chat(2, a)};
  rows[0].status = 502;
  rows[0].error = "upstream_5xx";
  const nlohmann::json again = Lever(Audit(rows, options), "semantic_cache");
  EXPECT_DOUBLE_EQ(again["exact_hit_rate"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(again["semantic_hit_rate"].get<double>(), 0.3333) << "the third, from what the second stored";
  // Another system prompt is another scope: no duplicate.
  CapturedRequest other = Chat(1, b);
  WithSystem(other, "Be terse.");
  EXPECT_DOUBLE_EQ(Lever(Audit({Chat(0, a), other}, options), "semantic_cache")["semantic_duplicate_share"].get<double>(), 0);
}

TEST(TrafficAuditTest, SharedPrefixTokensByBlocksOfTheEarlierPrompts) {
  // "system:" + 1017 bytes + "\n" + "user:" = 1030 common bytes: 8 whole 128-byte blocks (1024 bytes).
  const std::string system(1017, 's');
  auto with_system = [&](double ts, const std::string& user) {
    CapturedRequest r = Chat(ts, user);
    WithSystem(r, system);
    return r;
  };
  CapturedRequest first = with_system(0, std::string(249, 'a'));   // 1280 bytes of prompt text
  CapturedRequest second = with_system(1, std::string(249, 'b'));  // shares 1024 of its 1280
  second.cached_tokens = 40;
  first.cached_tokens = 0;
  const nlohmann::json r = Audit({first, second});
  const nlohmann::json p = Lever(r, "prefix_caching");
  // 100 tokens each; the second's shared tokens are 100 x 1024 / 1280 = 80 of 200.
  EXPECT_DOUBLE_EQ(p["shared_prefix_token_share"].get<double>(), 0.4);
  EXPECT_DOUBLE_EQ(p["cached_token_share"].get<double>(), 0.2);
}

TEST(TrafficAuditTest, HostedPrefixesCountWhenLongAndRecentEnough) {
  const std::string system(8000, 'x');  // about 2,000 tokens by bytes / 4
  auto hosted = [&](double ts) {
    CapturedRequest r = Chat(ts, "q" + std::to_string(ts));
    WithSystem(r, system);
    r.backend = "claude";
    r.backend_kind = "anthropic";
    r.prompt_tokens = 2000;
    return r;
  };
  // The second comes 60 s after the first (within 5 minutes), the third 1,000 s later.
  const nlohmann::json p = Lever(Audit({hosted(0), hosted(60), hosted(1060)}), "prefix_caching");
  EXPECT_EQ(p["hosted_requests"], 3);
  EXPECT_DOUBLE_EQ(p["hosted_long_prefix_share"].get<double>(), 0.6667);
  EXPECT_DOUBLE_EQ(p["hosted_cacheable_share"].get<double>(), 0.3333);
  EXPECT_EQ(p["config"], "[[route]] prompt_cache = \"auto\"");
}

TEST(TrafficAuditTest, RemovableTokensAreTheTrimmersOnTheSystemPrompts) {
  const std::string system =
      "You are a helpful assistant for our store.\n\nAlways answer in plain English please.\n"
      "Always answer in plain English please.\n";
  CapturedRequest r = Chat(0, "hi");
  WithSystem(r, system);
  auto counter = TokenCounter::ForModel("");
  auto embedder = MakeEmbedder("hash");
  auto report = AuditPrompt(system + "\n", **counter, **embedder);
  ASSERT_TRUE(report.ok());
  ASSERT_GT(report->removable_tokens, 0);
  const nlohmann::json out = Audit({r, Chat(1, "plain")});
  const nlohmann::json t = Lever(out, "prompt_trimming");
  EXPECT_EQ(t["distinct_system_prompts"], 1);
  EXPECT_EQ(t["system_prompts_with_removable_tokens"], 1);
  // Removable bytes / 4 over both prompts' text in bytes / 4.
  const double first_units = static_cast<double>(("system:" + system + "\nuser:hi\n").size()) / 4;
  const double second_units = static_cast<double>(std::string("user:plain\n").size()) / 4;
  const double removable = static_cast<double>(report->removable_tokens) / 4;
  EXPECT_NEAR(t["removable_token_share"].get<double>(), removable / (first_units + second_units), 1e-4);
}

TEST(TrafficAuditTest, DocumentsOverTheBudget) {
  CapturedRequest r = Chat(0, "summarize");
  r.body["documents"] = {{{"text", std::string(4000, 'd')}}, {{"text", std::string(4000, 'e')}}};  // 2,000 "tokens"
  TrafficAuditOptions options;
  options.documents_budget = 1500;
  const nlohmann::json t = Lever(Audit({r, Chat(1, "x")}, options), "prompt_trimming");
  EXPECT_DOUBLE_EQ(t["documents_over_budget_share"].get<double>(), 0.5);
}

TEST(TrafficAuditTest, SmallTasksByTheLengthRuleWithoutARouter) {
  std::vector<CapturedRequest> rows = {Chat(0, "a"), Chat(1, "b"), Chat(2, "c"), Chat(3, "d")};
  rows[2].completion_tokens = 900;
  rows[3].prompt_tokens = 4000;
  const nlohmann::json r = Lever(Audit(rows), "routing");
  EXPECT_DOUBLE_EQ(r["small_task_share"].get<double>(), 0.5);
  EXPECT_NE(r["method"].get<std::string>().find("length rule"), std::string::npos);
}

TEST(TrafficAuditTest, ConcurrencyAndQueueingOfLocalEngines) {
  std::vector<CapturedRequest> rows = {Chat(0, "a"), Chat(0.5, "b"), Chat(3, "c")};  // each 1 s long
  for (auto& r : rows) {
    r.backend = "engine";
    r.backend_kind = "local";
    r.queue_ms = 50;
  }
  const nlohmann::json b = Lever(Audit(rows), "continuous_batching");
  EXPECT_EQ(b["concurrency_max"], 2);
  EXPECT_EQ(b["local_requests"], 3);
  EXPECT_DOUBLE_EQ(b["queueing_share_of_ttft"].get<double>(), 0.5);
  // Concurrency averaged over 0..4 s: 3 request-seconds / 4 s.
  EXPECT_DOUBLE_EQ(b["concurrency_mean"].get<double>(), 0.75);
}

TEST(TrafficAuditTest, LongAndRepetitiveOutputs) {
  std::vector<CapturedRequest> rows = {Chat(0, "a"), Chat(1, "b"), Chat(2, "c"), Chat(3, "d")};
  rows[0].completion_tokens = 600;
  rows[1].completion_tokens = 300;
  rows[0].output_ngram_share = 0.8;
  rows[1].output_ngram_share = 0.1;
  const nlohmann::json s = Lever(Audit(rows), "speculative_decoding");
  EXPECT_DOUBLE_EQ(s["long_output_share"].get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(s["repetitive_output_share"].get<double>(), 0.5);
  EXPECT_EQ(s["outputs_measured"], 2);
}

TEST(TrafficAuditTest, TheTtftModelIsFitOnTheStreamedAnswersAndPredictsTheLeversGain) {
  // TTFT = 10 ms + 0.5 ms per uncached prompt token, exactly; every prompt shares a long prefix.
  const std::string system(4000, 'p');
  std::vector<CapturedRequest> rows;
  for (int i = 0; i < 40; ++i) {
    CapturedRequest r = Chat(i, "question number " + std::to_string(i));
    WithSystem(r, system);
    r.prompt_tokens = 1000 + 10 * i;
    r.ttft_ms = 10 + 0.5 * static_cast<double>(r.prompt_tokens);
    rows.push_back(r);
  }
  const nlohmann::json out = Audit(rows);
  const nlohmann::json& model = out["routes"]["chat"]["ttft_model"];
  EXPECT_NEAR(model["ms_per_prompt_token"].get<double>(), 0.5, 1e-4);
  EXPECT_NEAR(model["intercept_ms"].get<double>(), 10, 1e-3);
  const nlohmann::json p = Lever(out, "prefix_caching");
  EXPECT_GT(p["shared_prefix_token_share"].get<double>(), 0.9);
  EXPECT_LT(p["predicted_ttft_p95_ms"].get<double>(), out["ttft_p95_ms"].get<double>());
  EXPECT_EQ(out["ranking"][0], "prefix_caching") << "the one lever this traffic pays for";
}

TEST(TrafficAuditTest, SmallTasksByAClassifyRoutesRulesAndTheSmallBackendsOwnTtft) {
  StatusOr<GatewayConfig> config = ParseGatewayConfig(R"toml(
[[backend]]
name = "mini"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
[[backend]]
name = "big"
kind = "openai"
base_url = "http://127.0.0.1:9/v1"
[[route]]
model = "auto"
policy = "classify"
default = "large"
[[route.class]]
name = "small"
backends = ["mini"]
[[route.class]]
name = "large"
backends = ["big"]
[[route.rule]]
class = "small"
user_regex = "^(Classify|Extract)"
)toml",
                                                      "t.toml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  // 20 small tasks answered by the big model (slow) and 20 large ones; 20 answers of mini in the capture (fast).
  std::vector<CapturedRequest> rows;
  for (int i = 0; i < 60; ++i) {
    const bool small = i < 20 || i >= 40;
    CapturedRequest r = Chat(i, std::string(small ? "Classify this: " : "Write an essay on ") + std::to_string(i));
    r.route = "auto";
    r.backend = i >= 40 ? "mini" : "big";
    r.ttft_ms = i >= 40 ? 20 : 400;
    rows.push_back(r);
  }
  TrafficAuditOptions options;
  options.config = &*config;
  const nlohmann::json out = Audit(rows, options);
  const nlohmann::json routing = Lever(out, "routing");
  EXPECT_DOUBLE_EQ(routing["small_task_share"].get<double>(), 0.6667);
  EXPECT_NE(routing["method"].get<std::string>().find("classify"), std::string::npos);
  // The 20 small tasks the big model answered get mini's 20 ms: 20 of 60 requests stay at 400 ms.
  EXPECT_DOUBLE_EQ(out["ttft_p95_ms"].get<double>(), 400);
  EXPECT_DOUBLE_EQ(routing["predicted_ttft_p95_ms"].get<double>(), 400) << "the large tasks still set the p95";
  // A capture without mini's answers: --small-ttft-ms stands for its TTFT; without it, no prediction.
  std::vector<CapturedRequest> big_only;
  for (int i = 0; i < 40; ++i) {
    CapturedRequest r = Chat(i, std::string(i == 0 ? "Write an essay" : "Extract the date from: ") + std::to_string(i));
    r.route = "auto";
    r.backend = "big";
    r.ttft_ms = 400;
    big_only.push_back(r);
  }
  EXPECT_FALSE(Lever(Audit(big_only, options), "routing")["predicted_ttft_p95_ms"].is_number());
  options.small_ttft_ms = 20;
  const nlohmann::json routed = Lever(Audit(big_only, options), "routing");
  EXPECT_DOUBLE_EQ(routed["small_task_share"].get<double>(), 0.975);
  EXPECT_DOUBLE_EQ(routed["predicted_ttft_p95_ms"].get<double>(), 20);
}

TEST(TrafficAuditTest, QuantizationReadsTheLocalModelsWeightTypes) {
  const std::string model = std::string(TACHYON_SHARED_DIR) + "/fixtures/models/stories260K.gguf";
  if (!std::ifstream(model)) GTEST_SKIP() << model << " is absent (needs ../shared)";
  StatusOr<GatewayConfig> config = ParseGatewayConfig(
      "[[backend]]\nname = \"stories\"\nkind = \"local\"\nmodel = \"" + model +
          "\"\n[[route]]\nmodel = \"chat\"\nbackends = [\"stories\"]\n",
      "t.toml");
  ASSERT_TRUE(config.ok()) << config.status().message();
  TrafficAuditOptions options;
  options.config = &*config;
  const nlohmann::json q = Lever(Audit({Chat(0, "a")}, options), "quantization");
  ASSERT_EQ(q["local_models"].size(), 1u);
  EXPECT_EQ(q["local_models"][0]["backend"], "stories");
  EXPECT_TRUE(q["local_models"][0]["tensor_types"].contains("F32")) << q.dump();
  EXPECT_NE(q["config"].get<std::string>().find("tachyon model quantize"), std::string::npos) << "float weights";
}

TEST(TrafficAuditTest, ResponsesRequestsAreReadAsTheChatRequestsTheyBecome) {
  // The same question through /v1/responses and /v1/chat/completions: one exact key.
  CapturedRequest responses = Chat(1, "A");
  responses.endpoint = "/v1/responses";
  responses.body = {{"model", "chat"}, {"temperature", 0}, {"input", "A"}};
  const nlohmann::json report = Audit({Chat(0, "A"), responses});
  EXPECT_EQ(report["requests"], 2);
  EXPECT_EQ(report["other_endpoints"], 0);
  EXPECT_DOUBLE_EQ(Lever(report, "semantic_cache")["exact_hit_rate"].get<double>(), 0.5);
  responses.body = {{"model", "chat"}, {"input", "x"}, {"tools", {{{"type", "web_search"}}}}};
  EXPECT_EQ(Audit({responses})["unreadable_bodies"], 1);
}

TEST(TrafficAuditTest, MalformedLinesAndOtherEndpointsAreCountedNotFatal) {
  auto audit = TrafficAudit::Create({});
  ASSERT_TRUE(audit.ok());
  (*audit)->AddMalformed(3, "not a JSON object");
  CapturedRequest embeddings;
  embeddings.endpoint = "/v1/embeddings";
  (*audit)->Add(embeddings);
  CapturedRequest broken = Chat(0, "x");
  broken.body = {{"messages", "not an array"}};
  (*audit)->Add(broken);
  CapturedRequest bare = Chat(1, "y");
  bare.body = nullptr;
  (*audit)->Add(bare);
  const nlohmann::json r = (*audit)->Finish();
  EXPECT_EQ(r["malformed_lines"], 1);
  EXPECT_EQ(r["other_endpoints"], 1);
  EXPECT_EQ(r["unreadable_bodies"], 1);
  EXPECT_EQ(r["requests_without_body"], 1);
  EXPECT_EQ(r["requests"], 2);
}

TEST(CaptureLineTest, ReadsOurLinesAndOtherLogsWithTheSameFields) {
  CapturedRequest r;
  std::string error;
  ASSERT_TRUE(ParseCaptureLine(R"({"ts":1764912915.123,"route":"chat","endpoint":"/v1/chat/completions",)"
                               R"("stream":true,"status":200,"ttft_ms":12.5,"e2e_ms":80,"prompt_tokens":10,)"
                               R"("body":{"model":"gpt","messages":[]}})",
                               &r, &error))
      << error;
  EXPECT_DOUBLE_EQ(r.ts, 1764912915.123);
  EXPECT_EQ(r.model, "gpt") << "from the body";
  EXPECT_TRUE(r.body.is_object());
  ASSERT_TRUE(ParseCaptureLine(R"({"ts":"2026-12-05T05:15:15.500Z","body":"{\"prompt\":\"hi\",\"stream\":true}"})",
                               &r, &error))
      << error;
  EXPECT_DOUBLE_EQ(r.ts, 1796447715.5);
  EXPECT_EQ(r.endpoint, "/v1/completions");
  EXPECT_TRUE(r.stream) << "from the body when the line has no stream field";
  EXPECT_FALSE(ParseCaptureLine("[1,2]", &r, &error));
  EXPECT_FALSE(ParseCaptureLine(R"({"ttft_ms":"fast"})", &r, &error));
  EXPECT_NE(error.find("ttft_ms"), std::string::npos);
  EXPECT_FALSE(ParseCaptureLine(R"({"ts":"yesterday"})", &r, &error));
}

TEST(CaptureLineTest, NumbersOutOfRangeAreBrokenLines) {
  CapturedRequest r;
  std::string error;
  EXPECT_FALSE(ParseCaptureLine(R"({"e2e_ms":1e999})", &r, &error)) << "not finite";
  EXPECT_FALSE(ParseCaptureLine(R"({"e2e_ms":1e16})", &r, &error));
  EXPECT_NE(error.find("e2e_ms"), std::string::npos);
  EXPECT_FALSE(ParseCaptureLine(R"({"ts":1e300})", &r, &error));
  EXPECT_FALSE(ParseCaptureLine(R"({"prompt_tokens":-1e20})", &r, &error));
  EXPECT_FALSE(ParseCaptureLine(R"({"status":70000})", &r, &error));
  EXPECT_FALSE(ParseCaptureLine(R"({"ts":"99999999-01-01T00:00:00Z"})", &r, &error));
  EXPECT_TRUE(ParseCaptureLine(R"({"status":null,"prompt_tokens":null})", &r, &error)) << error;
}

TEST(TrafficAuditTest, ArrivalsFarApartStillChartInAFewBuckets) {
  // A file whose arrivals span 30 million years: ~121 buckets of whole days, not
  // a count per day (the fuzzer's out-of-memory).
  const nlohmann::json r = Audit({Chat(0, "a"), Chat(1e15, "b")});
  const nlohmann::json& arrivals = r["distributions"]["arrivals"];
  EXPECT_LE(arrivals["counts"].size(), 122u);
  EXPECT_EQ(std::fmod(arrivals["bucket_s"].get<double>(), 86400.0), 0.0);
}

}  // namespace
}  // namespace tachyon
