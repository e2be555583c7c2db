#include "gateway/cache/semantic_cache.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "embed/hash_embedder.h"
#include "gateway/cache/cache_db.h"
#include "gateway/cache/int8_dot.h"
#include "gateway/cache/vector_index.h"
#include "kernels/cpu_features.h"

namespace tachyon {
namespace {

std::vector<float> RandomUnit(std::mt19937& rng, int dim) {
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(dim));
  for (float& x : v) x = normal(rng);
  NormalizeRows(v.data(), 1, dim);
  return v;
}

TEST(VectorIndexTest, FlatThenGraphScopesApartRemovals) {
  constexpr int kDim = 32;
  std::mt19937 rng(3);
  VectorIndex index(kDim);
  std::vector<std::vector<float>> vectors;
  const size_t n = VectorIndex::kFlatLimit * 3;  // past the flat limit: a graph
  for (size_t i = 0; i < n; ++i) {
    vectors.push_back(RandomUnit(rng, kDim));
    index.Add("a", i + 1, vectors.back().data());
  }
  index.Add("b", 100000, vectors[5].data());
  EXPECT_EQ(index.size(), n + 1);
  EXPECT_EQ(index.scopes(), 2u);
  EXPECT_EQ(index.graph_entries(), n);
  // Each stored vector finds itself first (cosine 1) in its own scope.
  int found = 0;
  for (size_t i = 0; i < n; i += 7) {
    auto top = index.Search("a", vectors[i].data(), 3);
    ASSERT_FALSE(top.empty());
    if (top[0].first == i + 1) {
      ++found;
      EXPECT_NEAR(top[0].second, 1.0f, 0.02) << "int8 graph nodes: approximate cosines";
    }
    EXPECT_GE(top[0].second, top.back().second);
  }
  EXPECT_GE(found, static_cast<int>(0.98 * ((n + 6) / 7)));
  // Scope b holds one entry: vector 5 of scope a is found there only under its own id.
  auto b = index.Search("b", vectors[5].data(), 4);
  ASSERT_EQ(b.size(), 1u);
  EXPECT_EQ(b[0].first, 100000u);
  EXPECT_TRUE(index.Search("c", vectors[5].data(), 4).empty());
  // Removed entries are never returned; removing most of them rebuilds the graph.
  index.Remove("a", 1);
  for (const auto& [id, cosine] : index.Search("a", vectors[0].data(), 5)) EXPECT_NE(id, 1u);
  for (size_t i = 1; i < n - 10; ++i) index.Remove("a", i + 1);
  EXPECT_EQ(index.size(), 11u);
  auto rest = index.Search("a", vectors[n - 1].data(), 20);
  EXPECT_EQ(rest.size(), 10u);
  EXPECT_EQ(rest[0].first, n);
  // A removed id comes back when added again.
  index.Add("a", 2, vectors[1].data());
  EXPECT_EQ(index.Search("a", vectors[1].data(), 1)[0].first, 2u);
  // Flat partitions: removal swaps rows and keeps the others findable.
  VectorIndex flat(kDim);
  for (size_t i = 0; i < 5; ++i) flat.Add("s", i + 1, vectors[i].data());
  flat.Remove("s", 2);
  EXPECT_EQ(flat.Search("s", vectors[4].data(), 1)[0].first, 5u);
  EXPECT_EQ(flat.Search("s", vectors[1].data(), 10).size(), 4u);
  for (size_t i = 0; i < 5; ++i) flat.Remove("s", i + 1);
  EXPECT_EQ(flat.scopes(), 0u);
}

TEST(VectorIndexTest, Int8DotAvx2MatchesTheReference) {
  if (!CpuHasAvx2()) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> value(-127, 127);
  for (int n : {0, 1, 15, 16, 17, 384, 1000}) {
    std::vector<int8_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      a[i] = static_cast<int8_t>(value(rng));
      b[i] = static_cast<int8_t>(value(rng));
    }
    EXPECT_EQ(Int8DotAvx2(a.data(), b.data(), n), Int8DotRef(a.data(), b.data(), n)) << n;
  }
}

CompletionRequest Parse(const std::string& body) {
  auto parsed = ParseCompletionRequest(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parsed)) << body;
  return std::get<CompletionRequest>(parsed);
}

std::string Chat(const std::string& question, const std::string& system = "You are a helpful assistant.") {
  nlohmann::json body = {{"model", "chat"},
                         {"temperature", 0},
                         {"messages",
                          {{{"role", "system"}, {"content", system}}, {{"role", "user"}, {"content", question}}}}};
  return body.dump();
}

GatewayRequest Request(const std::string& body, std::string tenant = "") {
  return GatewayRequest{.request = std::make_shared<CompletionRequest>(Parse(body)),
                        .id = "chatcmpl-2",
                        .created = 9,
                        .tenant = std::move(tenant)};
}

TEST(SemanticKeyTest, ScopeIsEverythingButTheLastUserMessage) {
  std::string q1, s1, q2, s2;
  ASSERT_TRUE(SemanticKey(Parse(Chat("Who are you?")), "chat", "", &q1, &s1));
  ASSERT_TRUE(SemanticKey(Parse(Chat("who are you")), "chat", "", &q2, &s2));
  EXPECT_EQ(q1, "Who are you?");
  EXPECT_EQ(s1, s2);
  ASSERT_TRUE(SemanticKey(Parse(Chat("Who are you?", "Talk like a pirate.")), "chat", "", &q2, &s2));
  EXPECT_NE(s1, s2) << "the system prompt is in the scope";
  ASSERT_TRUE(SemanticKey(Parse(Chat("Who are you?")), "chat", "tenant-b", &q2, &s2));
  EXPECT_NE(s1, s2) << "the tenant is in the scope";
  ASSERT_TRUE(SemanticKey(Parse(Chat("Who are you?")), "other", "", &q2, &s2));
  EXPECT_NE(s1, s2) << "the route is in the scope";
  // Text parts are joined; anything else, or a last message not the user's, has nothing to compare.
  ASSERT_TRUE(SemanticKey(Parse(R"({"messages":[{"role":"user","content":[{"type":"text","text":"a"},
                                  {"type":"text","text":"b"}]}]})"),
                          "chat", "", &q2, &s2));
  EXPECT_EQ(q2, "a\nb");
  EXPECT_FALSE(SemanticKey(Parse(R"({"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]})"),
                           "chat", "", &q2, &s2));
  EXPECT_FALSE(SemanticKey(Parse(R"({"messages":[{"role":"user","content":"   "}]})"), "chat", "", &q2, &s2));
}

SemanticRouteOptions Options(HitOptions hit) {
  return {.embedder = std::shared_ptr<Embedder>(*HashEmbedder::Create({})),
          .verifier = std::make_shared<PairVerifier>(),
          .hit = hit,
          .ttl_seconds = 60};
}

const CapturedAnswer kAnswer{.model = "chat", .text = "I am Tachyon's demo assistant.", .finish_reason = "stop",
                             .has_usage = true, .usage = {12, 7}};

TEST(SemanticCacheStageTest, ParaphraseHitsWithinScopeOnly) {
  MetricsRegistry metrics;
  auto store = std::make_shared<SemanticCache>(100, 1 << 20);
  SemanticCacheStage stage({{"chat", Options({.threshold = 0.8, .band = 0.05})}}, store, &metrics);
  GatewayRequest first = Request(Chat("Who are you?"));
  EXPECT_FALSE(stage.Process(first));
  EXPECT_EQ(first.cache_status, "miss");
  ASSERT_FALSE(first.semantic_scope.empty());
  EXPECT_EQ(first.semantic_question, "Who are you?");
  stage.OnAnswer(first, CapturedAnswer{.text = "cut", .finish_reason = "tool_calls"});  // not stored
  store->FlushPuts();
  EXPECT_EQ(store->entries(), 0u);
  stage.OnAnswer(first, kAnswer);
  store->FlushPuts();
  EXPECT_EQ(store->entries(), 1u);

  GatewayRequest reworded = Request(Chat("who are you"));
  std::optional<StageAnswer> a = stage.Process(reworded);
  ASSERT_TRUE(a);
  EXPECT_EQ(reworded.cache_status, "hit");
  EXPECT_EQ(a->answered_by, "semantic-cache");
  EXPECT_GT(reworded.cache_similarity, 0.8);
  nlohmann::json body = nlohmann::json::parse(a->result.body);
  EXPECT_EQ(body["choices"][0]["message"]["content"], kAnswer.text);
  EXPECT_EQ(body["id"], "chatcmpl-2");

  // Another system prompt, tenant or an unrelated question: no hit.
  GatewayRequest pirate = Request(Chat("who are you", "Talk like a pirate."));
  EXPECT_FALSE(stage.Process(pirate));
  GatewayRequest tenant = Request(Chat("who are you"), "tenant-b");
  EXPECT_FALSE(stage.Process(tenant));
  GatewayRequest unrelated = Request(Chat("What is the capital of France?"));
  EXPECT_FALSE(stage.Process(unrelated));
  EXPECT_EQ(unrelated.cache_status, "miss");
  // Sampled requests pass by.
  GatewayRequest sampled = Request(R"({"model":"chat","messages":[{"role":"user","content":"Who are you?"}]})");
  EXPECT_FALSE(stage.Process(sampled));
  EXPECT_EQ(sampled.cache_status, "bypass");

  const std::string text = metrics.Render();
  EXPECT_NE(text.find("tachyon:cache_lookups_total{kind=\"semantic\",result=\"hit\",route=\"chat\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:cache_similarity_count{result=\"hit\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:cache_entries{kind=\"semantic\"} 1"), std::string::npos) << text;
}

TEST(SemanticCacheStageTest, GuardsAndVerifierTurnAwayLookalikes) {
  MetricsRegistry metrics;
  auto store = std::make_shared<SemanticCache>(100, 1 << 20);
  // Every hit checked by the guards and the verifier, at a low cosine threshold.
  SemanticCacheStage stage(
      {{"chat", Options({.threshold = 0.5, .verifier_min = 0.9, .band = 0.05, .guards_on_hits = true})}}, store,
      &metrics);
  GatewayRequest first = Request(Chat("Book a table for 4 people at 7 pm"));
  EXPECT_FALSE(stage.Process(first));
  stage.OnAnswer(first, kAnswer);
  store->FlushPuts();
  GatewayRequest numbers = Request(Chat("Book a table for 6 people at 7 pm"));
  EXPECT_FALSE(stage.Process(numbers));
  GatewayRequest same = Request(Chat("book a table for 4 people at 7 pm"));
  EXPECT_TRUE(stage.Process(same));
  GatewayRequest other_word = Request(Chat("Book a room for 4 people at 7 pm"));
  EXPECT_FALSE(stage.Process(other_word));
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("tachyon:cache_semantic_rejections_total{reason=\"numbers\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:cache_semantic_rejections_total{reason=\"verifier\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:cache_similarity_count{result=\"near_miss\"} 2"), std::string::npos) << text;
}

SemanticEntry Entry(const std::string& key, const std::string& scope, std::vector<float> v,
                    const std::string& tenant = "") {
  SemanticEntry e;
  e.key = key;
  e.route = "chat";
  e.tenant = tenant;
  e.scope = scope;
  e.embedder = "test";
  e.question = key;
  e.vector = std::move(v);
  e.answer = {.model = "chat", .text = "answer " + key, .finish_reason = "stop"};
  return e;
}

TEST(SemanticCacheStoreTest, BoundsTtlPurgeAndRestart) {
  const std::string dir = ::testing::TempDir() + "/tachyon_semantic_db_" + std::to_string(::getpid());
  const std::string path = dir + "/cache.db";
  std::filesystem::remove_all(dir);
  std::mt19937 rng(5);
  const std::vector<float> a = RandomUnit(rng, 16), b = RandomUnit(rng, 16), c = RandomUnit(rng, 16);
  ManualClock clock;
  {
    std::shared_ptr<CacheDb> db = *CacheDb::Open(path);
    SemanticCache cache(2, 1 << 20, db, nullptr, &clock);
    cache.Put(Entry("a", "s", a), 60);
    cache.Put(Entry("short", "s", c), 0.001);
    cache.Put(Entry("b", "s", b, "tenant-b"), 60);
    EXPECT_EQ(cache.entries(), 2u);  // "a" evicted (at most 2)
    clock.AdvanceSeconds(1);
    // "short" is expired: dropped when found.
    auto found = cache.Search("test", "s", c, 4, clock.Now());
    for (const auto& candidate : found) EXPECT_NE(candidate.entry->key, "short");
    EXPECT_EQ(cache.entries(), 1u);
    cache.Put(Entry("c", "s", c), 60);
    db->Flush();
  }
  SemanticCache reopened(10, 1 << 20, *CacheDb::Open(path), nullptr, &clock);
  ASSERT_TRUE(reopened.Load().ok());
  EXPECT_EQ(reopened.entries(), 2u);
  auto top = reopened.Search("test", "s", b, 1, clock.Now());
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].entry->key, "b");
  EXPECT_EQ(top[0].entry->answer.text, "answer b");
  EXPECT_NEAR(top[0].similarity, 1.0f, 1e-5);
  EXPECT_TRUE(reopened.Search("test", "other scope", b, 1, clock.Now()).empty());
  EXPECT_TRUE(reopened.Search("other embedder", "s", b, 1, clock.Now()).empty());
  EXPECT_EQ(reopened.Purge("", "tenant-b"), 1u);
  EXPECT_EQ(reopened.entries(), 1u);
  EXPECT_EQ(reopened.Purge("chat"), 1u);
  EXPECT_EQ(reopened.entries(), 0u);
  std::filesystem::remove_all(dir);
}

// A remote embedder that changed its model under the same id: stored vectors of
// 16 dimensions, queries of 8. The query used to be read as 16 floats (past its
// end) against every entry; now it finds nothing and the stale entries go.
TEST(SemanticCacheStoreTest, AnotherDimensionUnderOneEmbedderIsAMissAndDropsTheOldEntries) {
  const std::string dir = ::testing::TempDir() + "/tachyon_semantic_dim_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::mt19937 rng(9);
  const std::vector<float> old_a = RandomUnit(rng, 16), old_b = RandomUnit(rng, 16);
  {
    std::shared_ptr<CacheDb> db = *CacheDb::Open(dir + "/cache.db");
    SemanticCache cache(10, 1 << 20, db);
    cache.Put(Entry("a", "s", old_a), 60);
    cache.Put(Entry("b", "s", old_b), 60);
    db->Flush();
  }
  // Restarted with the new model: the store's entries are of the old dimension.
  std::shared_ptr<CacheDb> db = *CacheDb::Open(dir + "/cache.db");
  SemanticCache cache(10, 1 << 20, db);
  ASSERT_TRUE(cache.Load().ok());
  ASSERT_EQ(cache.entries(), 2u);
  const std::vector<float> query = RandomUnit(rng, 8);
  EXPECT_TRUE(cache.Search("test", "s", query, 4, Clock::Real().Now()).empty());
  EXPECT_EQ(cache.entries(), 0u) << "entries that can never match again are dropped";
  // The new dimension's entries are found as usual.
  cache.Put(Entry("new", "s", query), 60);
  auto top = cache.Search("test", "s", query, 1, Clock::Real().Now());
  ASSERT_EQ(top.size(), 1u);
  EXPECT_EQ(top[0].entry->key, "new");
  // An old-dimension entry arriving later (another replica not yet upgraded) takes
  // over the id: the newest dimension wins, and a query of the other misses.
  cache.Put(Entry("late", "s", old_a), 60);
  EXPECT_EQ(cache.entries(), 1u);
  EXPECT_TRUE(cache.Search("test", "s", query, 4, Clock::Real().Now()).empty());
  db->Flush();
  SemanticCache reopened(10, 1 << 20, *CacheDb::Open(dir + "/cache.db"));
  ASSERT_TRUE(reopened.Load().ok());
  EXPECT_EQ(reopened.entries(), 0u) << "the dropped entries were deleted from the store too";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tachyon
