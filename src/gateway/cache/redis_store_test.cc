// RedisStore against a real redis-server started on a free port (skipped when
// redis-server is not installed) and stopped by its pid.
#include "gateway/cache/redis_store.h"

#include <gtest/gtest.h>
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdlib>
#include <thread>

#include "gateway/cache/exact_cache.h"
#include "gateway/cache/semantic_cache.h"
#include "tests/support/eventually.h"
#include "tests/support/redis_server.h"

namespace tachyon {
namespace {

using Clock = std::chrono::steady_clock;
using testing::Eventually;  // the store's state lives in redis-server, another process

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
  EXPECT_NE(metrics.Render().find("tachyon:cache_store_errors_total{store=\"redis\",reason=\""), std::string::npos);
  server_->Start();  // empty: no persistence
  EXPECT_TRUE(Eventually([&] { return store->available(); }));
  // Back: the cache read the store anew, so what the restarted Redis lost is gone here too.
  EXPECT_TRUE(Eventually([&] { return cache.entries() == 0; }));
  EXPECT_FALSE(cache.Find("k", Clock::now()));
  cache.Put("k3", {.text = "z", .finish_reason = "stop"}, Clock::now(), 60);
  EXPECT_TRUE(cache.Find("k3", Clock::now()));
}

TEST(RedisUrlTest, HostPortDatabaseUserPasswordAndTls) {
  RedisAddress a = *ParseRedisUrl("redis://10.0.0.2:7000/3");
  EXPECT_EQ(a.host, "10.0.0.2");
  EXPECT_EQ(a.port, 7000);
  EXPECT_EQ(a.db, 3);
  EXPECT_TRUE(a.password.empty());
  EXPECT_FALSE(a.tls);
  EXPECT_EQ(ParseRedisUrl("redis://").value().port, 6379);
  EXPECT_FALSE(ParseRedisUrl("redis://h:0").ok());
  EXPECT_FALSE(ParseRedisUrl("redis://h:1/x").ok());
  EXPECT_FALSE(ParseRedisUrl("http://h").ok());
  // [[USER]:PASSWORD@], %-escapes decoded; an @ in the password must be escaped, a ':' may stay.
  RedisAddress b = *ParseRedisUrl("rediss://app:p%40ss:w0rd@cache.internal:6380/2");
  EXPECT_TRUE(b.tls);
  EXPECT_EQ(b.user, "app");
  EXPECT_EQ(b.password, "p@ss:w0rd");
  EXPECT_EQ(b.host, "cache.internal");
  EXPECT_EQ(b.port, 6380);
  EXPECT_EQ(b.db, 2);
  RedisAddress c = *ParseRedisUrl("redis://:secret@[::1]:7001");
  EXPECT_TRUE(c.user.empty());
  EXPECT_EQ(c.password, "secret");
  EXPECT_EQ(c.host, "::1");
  EXPECT_EQ(c.port, 7001);
  EXPECT_FALSE(ParseRedisUrl("redis://:bad%zz@h").ok());
  RedisAddress d = *ParseRedisUrl("redis://app@h");  // a user alone: the password comes from password_env
  EXPECT_EQ(d.user, "app");
  EXPECT_TRUE(d.password.empty());
  // A password never reaches a log or an error message.
  EXPECT_EQ(RedactRedisUrl("redis://app:s3cret@h:1/2"), "redis://app:***@h:1/2");
  EXPECT_EQ(RedactRedisUrl("redis://:s3cret@h"), "redis://:***@h");
  EXPECT_EQ(RedactRedisUrl("redis://h:1"), "redis://h:1");
  EXPECT_EQ(ParseRedisUrl("redis://:s3cret@h:99999").status().message().find("s3cret"), std::string::npos);
  // Opening never fails for a Redis that is down: the store is unavailable.
  std::unique_ptr<RedisStore> down = *RedisStore::Open("redis://127.0.0.1:" + std::to_string(testing_util::FreePort()));
  EXPECT_FALSE(down->available());
  EXPECT_TRUE(down->Load(CacheTable::kExact, 0, 10)->empty());
}


TEST(RedisRetryTest, DoublesFromHalfASecondUpToThirty) {
  EXPECT_EQ(RedisRetryDelaySeconds(0), 0);
  EXPECT_EQ(RedisRetryDelaySeconds(1), 0.5);
  EXPECT_EQ(RedisRetryDelaySeconds(2), 1.0);
  EXPECT_EQ(RedisRetryDelaySeconds(4), 4.0);
  EXPECT_EQ(RedisRetryDelaySeconds(7), 30.0);
  EXPECT_EQ(RedisRetryDelaySeconds(1000), 30.0);
}

// The connections a Redis has accepted since it started (INFO stats).
int64_t ConnectionsReceived(const RedisAddress& address) {
  auto c = RedisConnection::Open(address, 1, 2);
  if (!c.ok()) return -1;
  RedisReplyPtr info = (*c)->Command({"INFO", "stats"});
  const std::string text = RedisText(info.get());
  const size_t at = text.find("total_connections_received:");
  return at == std::string::npos ? -1 : std::atoll(text.c_str() + at + 27);
}

// Issue 31, finding 6: a Redis that needs a password. Before, every command got
// NOAUTH, and the reader looped connect -> "reachable again" -> load -> fail with no
// pause: ~10k connections a second and a log growing ~1 MB/s.
TEST(RedisAuthTest, APasswordInTheUrlOrFromOptionsAndAWrongOneBacksOff) {
  if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
  testing_util::RedisServer server(testing_util::FreePort(), {"--requirepass", "s3cret"});
  const std::string with_password = "redis://:s3cret@127.0.0.1:" + std::to_string(server.port()) + "/1";
  // The right password, in the URL and as an option: one replica's put reaches the other.
  MetricsRegistry metrics;
  std::shared_ptr<CacheStore> a = *RedisStore::Open(with_password, &metrics);
  std::shared_ptr<CacheStore> b = *RedisStore::Open(server.url() + "/1", &metrics, {.password = "s3cret"});
  ASSERT_TRUE(a->available());
  ASSERT_TRUE(b->available());
  ExactCache cache_a(100, 1 << 20, a), cache_b(100, 1 << 20, b);
  cache_a.Put("k", {.text = "x", .finish_reason = "stop"}, Clock::now(), 60);
  a->Flush();
  EXPECT_TRUE(Eventually([&] { return cache_b.Find("k", Clock::now()).has_value(); }));
  EXPECT_EQ(a->describe().find("s3cret"), std::string::npos) << a->describe();
  // In database 1, as the URL says: database 0 holds nothing.
  RedisAddress db0 = *ParseRedisUrl("redis://:s3cret@127.0.0.1:" + std::to_string(server.port()));
  auto c = RedisConnection::Open(db0, 1, 2);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ((*c)->Command({"DBSIZE"})->integer, 0);

  // No password, and a wrong one: unavailable, counted by reason, and the threads
  // back off instead of spinning.
  MetricsRegistry refused_metrics;
  std::unique_ptr<RedisStore> none = *RedisStore::Open(server.url(), &refused_metrics);
  std::unique_ptr<RedisStore> wrong = *RedisStore::Open(server.url(), &refused_metrics, {.password = "nope"});
  EXPECT_FALSE(none->available());
  EXPECT_FALSE(wrong->available());
  EXPECT_TRUE(none->Load(CacheTable::kExact, 0, 10)->empty());
  ExactCache refused_cache(100, 1 << 20, std::shared_ptr<CacheStore>(std::move(wrong)));
  const int64_t before = ConnectionsReceived(db0);
  for (int i = 0; i < 50; ++i) {
    refused_cache.Put("w" + std::to_string(i), {.text = "x", .finish_reason = "stop"}, Clock::now(), 60);
  }
  // Real time must pass here: the stores' threads back off on the real clock
  // (their waits are condition variables with deadlines), and what is measured is
  // how often they try in 3 s.
  std::this_thread::sleep_for(std::chrono::seconds(3));
  const int64_t during = ConnectionsReceived(db0) - before;
  // Two stores, a reader and a writer each, over 3 s of doubling pauses: a handful.
  EXPECT_LT(during, 20) << "connections in 3 s while the password is refused";
  const std::string text = refused_metrics.Render();
  EXPECT_NE(text.find("tachyon:cache_store_errors_total{store=\"redis\",reason=\"noauth\"}"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:cache_store_errors_total{store=\"redis\",reason=\"wrongpass\"}"), std::string::npos) << text;
}

// rediss://: TLS through OpenSSL, the certificate checked against a CA file, or not
// at all with verify_tls = false; a server the CA does not vouch for is refused.
TEST(RedisTlsTest, RedissWithACaFileAndWithoutVerification) {
  if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
  if (std::system("command -v openssl > /dev/null 2>&1") != 0) GTEST_SKIP() << "the openssl tool is not installed";
  const std::string dir = ::testing::TempDir() + "/tachyon_redis_tls_" + std::to_string(::getpid());
  std::system(("mkdir -p " + dir).c_str());
  const std::string make = "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=127.0.0.1 "
                           "-addext subjectAltName=IP:127.0.0.1 -keyout " + dir + "/key.pem -out " + dir +
                           "/cert.pem > /dev/null 2>&1 && openssl req -x509 -newkey rsa:2048 -nodes -days 1 "
                           "-subj /CN=other -keyout " + dir + "/other-key.pem -out " + dir + "/other.pem > /dev/null 2>&1";
  ASSERT_EQ(std::system(make.c_str()), 0);
  testing_util::RedisServer server(testing_util::FreePort(),
                                   {"--tls-cert-file", dir + "/cert.pem", "--tls-key-file", dir + "/key.pem",
                                    "--tls-ca-cert-file", dir + "/cert.pem", "--tls-auth-clients", "no",
                                    "--requirepass", "s3cret"},
                                   /*tls=*/true);
  const std::string url = "rediss://:s3cret@127.0.0.1:" + std::to_string(server.port());
  std::shared_ptr<CacheStore> a = *RedisStore::Open(url, nullptr, {.ca_file = dir + "/cert.pem"});
  std::shared_ptr<CacheStore> b = *RedisStore::Open(url, nullptr, {.verify_tls = false});
  ASSERT_TRUE(a->available());
  ASSERT_TRUE(b->available());
  ExactCache cache_a(100, 1 << 20, a), cache_b(100, 1 << 20, b);
  cache_a.Put("k", {.text = "over tls", .finish_reason = "stop"}, Clock::now(), 60);
  a->Flush();
  EXPECT_TRUE(Eventually([&] { return cache_b.Find("k", Clock::now()).has_value(); }));
  // Another CA: refused, with the reason counted as tls.
  MetricsRegistry metrics;
  std::unique_ptr<RedisStore> untrusted = *RedisStore::Open(url, &metrics, {.ca_file = dir + "/other.pem"});
  EXPECT_FALSE(untrusted->available());
  EXPECT_NE(metrics.Render().find("reason=\"tls\""), std::string::npos);
  // Plain TCP to a TLS port is not a Redis that answers.
  std::unique_ptr<RedisStore> plain =
      *RedisStore::Open("redis://127.0.0.1:" + std::to_string(server.port()), nullptr, {.password = "s3cret"});
  EXPECT_FALSE(plain->available());
  std::system(("rm -rf " + dir).c_str());
}

}  // namespace
}  // namespace tachyon
