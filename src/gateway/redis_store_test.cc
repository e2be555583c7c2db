// RedisStore against a real redis-server started on a free port (skipped when
// redis-server is not installed) and stopped by its pid.
#include "gateway/redis_store.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "gateway/exact_cache.h"
#include "gateway/semantic_cache.h"
#include "tests/support/redis_server.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;

template <typename F>
bool Eventually(F condition, double seconds = 3.0) {
  const Clock::time_point end = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  while (Clock::now() < end) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

class RedisStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
    server_ = std::make_unique<testing_util::RedisServer>(testing_util::FreePort());
  }
  std::unique_ptr<testing_util::RedisServer> server_;
};

TEST_F(RedisStoreTest, ReplicasShareEntriesAndPurges) {
  std::shared_ptr<CacheStore> a = *RedisStore::Open(server_->url());
  std::shared_ptr<CacheStore> b = *RedisStore::Open(server_->url());
  ASSERT_TRUE(a->available());
  ExactCache exact_a(100, 1 << 20, a), exact_b(100, 1 << 20, b);
  const CapturedAnswer answer{.model = "chat", .text = "shared answer", .finish_reason = "stop", .has_usage = true,
                              .usage = {4, 2}};
  exact_a.Put("k1", answer, Clock::now(), 60, "chat", "tenant-a");
  ASSERT_TRUE(Eventually([&] { return exact_b.Find("k1", Clock::now()).has_value(); }));
  const ExactCache::Entry got = *exact_b.Find("k1", Clock::now());
  EXPECT_EQ(got.answer.text, "shared answer");
  EXPECT_EQ(got.answer.usage.completion_tokens, 2);
  EXPECT_EQ(got.tenant, "tenant-a");
  // A purge on one replica reaches the other.
  EXPECT_EQ(exact_a.Purge("", "tenant-a"), 1u);
  EXPECT_TRUE(Eventually([&] { return !exact_b.Find("k1", Clock::now()).has_value(); }));

  // Semantic entries travel with their vectors.
  SemanticCache semantic_a(100, 1 << 20, a), semantic_b(100, 1 << 20, b);
  SemanticEntry e;
  e.key = "s1";
  e.route = "chat";
  e.scope = "scope";
  e.embedder = "emb";
  e.question = "who are you";
  e.vector = {0.6f, 0.8f, 0.0f};
  e.answer = answer;
  semantic_a.Put(e, 60);
  const float query[] = {0.6f, 0.8f, 0.0f};
  ASSERT_TRUE(Eventually([&] { return !semantic_b.Search("emb", "scope", query, 1, Clock::now()).empty(); }));
  auto found = semantic_b.Search("emb", "scope", query, 1, Clock::now());
  EXPECT_EQ(found[0].entry->question, "who are you");
  EXPECT_NEAR(found[0].similarity, 1.0f, 1e-6);

  // A replica started later reads what is there.
  a->Flush();
  std::shared_ptr<CacheStore> c = *RedisStore::Open(server_->url());
  SemanticCache semantic_c(100, 1 << 20, c);
  ASSERT_TRUE(semantic_c.Load().ok());
  EXPECT_EQ(semantic_c.entries(), 1u);
  ExactCache exact_c(100, 1 << 20, c);
  ASSERT_TRUE(exact_c.Load().ok());
  EXPECT_EQ(exact_c.entries(), 0u) << "purged";
}

TEST_F(RedisStoreTest, ARedisThatGoesAwayMakesTheCacheMissUntilItIsBack) {
  MetricsRegistry metrics;
  std::shared_ptr<CacheStore> store = *RedisStore::Open(server_->url(), &metrics);
  ExactCache cache(100, 1 << 20, store);
  cache.Put("k", {.text = "x", .finish_reason = "stop"}, Clock::now(), 60);
  store->Flush();
  ASSERT_TRUE(cache.Find("k", Clock::now()));
  server_->Stop();
  ASSERT_TRUE(Eventually([&] { return !store->available(); }));
  EXPECT_FALSE(cache.Find("k", Clock::now())) << "while Redis is down, a lookup misses";
  cache.Put("k2", {.text = "y", .finish_reason = "stop"}, Clock::now(), 60);  // dropped by the store, no crash
  store->Flush();
  EXPECT_NE(metrics.Render().find("tachyon:cache_store_errors_total{store=\"redis\"}"), std::string::npos);
  server_->Start();  // empty: no persistence
  EXPECT_TRUE(Eventually([&] { return store->available(); }));
  // Back: the cache read the store anew, so what the restarted Redis lost is gone here too.
  EXPECT_TRUE(Eventually([&] { return cache.entries() == 0; }));
  EXPECT_FALSE(cache.Find("k", Clock::now()));
  cache.Put("k3", {.text = "z", .finish_reason = "stop"}, Clock::now(), 60);
  EXPECT_TRUE(cache.Find("k3", Clock::now()));
}

TEST(RedisUrlTest, HostPortAndDatabase) {
  RedisAddress a = *ParseRedisUrl("redis://10.0.0.2:7000/3");
  EXPECT_EQ(a.host, "10.0.0.2");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.db, 3);
  EXPECT_EQ(ParseRedisUrl("redis://").value().port, 6379);
  EXPECT_FALSE(ParseRedisUrl("redis://h:0").ok());
  EXPECT_FALSE(ParseRedisUrl("redis://h:1/x").ok());
  EXPECT_FALSE(ParseRedisUrl("http://h").ok());
  // Opening never fails for a Redis that is down: the store is unavailable.
  std::unique_ptr<RedisStore> down = *RedisStore::Open("redis://127.0.0.1:" + std::to_string(testing_util::FreePort()));
  EXPECT_FALSE(down->available());
  EXPECT_TRUE(down->Load(CacheTable::kExact, 0, 10)->empty());
}

}  // namespace
}  // namespace tachyon
