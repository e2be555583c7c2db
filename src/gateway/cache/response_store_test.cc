#include "gateway/cache/response_store.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "gateway/cache/cache_db.h"
#include "gateway/cache/redis_store.h"
#include "tests/support/eventually.h"
#include "tests/support/redis_server.h"

namespace tachyon {
namespace {

ResponseStore::Entry Of(const std::string& tenant, const std::string& text) {
  return {.tenant = tenant, .response = {{"text", text}}, .conversation = nlohmann::json::array()};
}

TEST(ResponseStoreTest, ScopedByTenantAndExpiring) {
  ResponseStore store(10, 1 << 20, 60);
  ASSERT_TRUE(store.Put("resp_1", Of("a", "one"), 100));
  ASSERT_NE(store.Get("resp_1", "a", 101), nullptr);
  EXPECT_EQ(store.Get("resp_1", "a", 101)->response["text"], "one");
  EXPECT_EQ(store.Get("resp_1", "b", 101), nullptr) << "another tenant never sees it";
  EXPECT_FALSE(store.Delete("resp_1", "b", 101));
  EXPECT_EQ(store.Get("resp_1", "a", 160), nullptr) << "expired";
  EXPECT_EQ(store.size(), 0u);
  ASSERT_TRUE(store.Put("resp_2", Of("a", "two"), 100));
  EXPECT_TRUE(store.Delete("resp_2", "a", 101));
  EXPECT_EQ(store.Get("resp_2", "a", 101), nullptr);
  EXPECT_EQ(store.bytes(), 0u);
}

TEST(ResponseStoreTest, BoundedByEntriesAndBytesOldestFirst) {
  ResponseStore store(2, 1 << 20, 60);
  store.Put("r1", Of("", "1"), 0);
  store.Put("r2", Of("", "2"), 0);
  store.Put("r3", Of("", "3"), 0);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.Get("r1", "", 1), nullptr);
  EXPECT_NE(store.Get("r3", "", 1), nullptr);
  ResponseStore small(100, 200, 60);
  for (int i = 0; i < 10; ++i) small.Put("r" + std::to_string(i), Of("", std::string(40, 'x')), 0);
  EXPECT_LE(small.bytes(), 200u);
  EXPECT_NE(small.Get("r9", "", 1), nullptr);
  EXPECT_FALSE(small.Put("huge", Of("", std::string(500, 'x')), 0)) << "larger than the whole store";
}

TEST(ResponseStoreTest, PurgesATenantOrAll) {
  ResponseStore store(10, 1 << 20, 60);
  store.Put("r1", Of("a", "1"), 0);
  store.Put("r2", Of("b", "2"), 0);
  store.Put("r3", Of("a", "3"), 0);
  EXPECT_EQ(store.Purge("a"), 2u);
  EXPECT_EQ(store.Get("r1", "a", 1), nullptr);
  EXPECT_NE(store.Get("r2", "b", 1), nullptr);
  EXPECT_EQ(store.Purge(""), 1u);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
}

}  // namespace
}  // namespace tachyon

namespace tachyon {
namespace {

TEST(ResponseStoreTest, KeptInSqliteAcrossARestart) {
  const std::string path = ::testing::TempDir() + "/responses_" + std::to_string(::getpid()) + ".db";
  std::filesystem::remove(path);
  const double now = UnixTimeSeconds();
  {
    std::shared_ptr<CacheStore> db = *CacheDb::Open(path);
    ResponseStore store(10, 1 << 20, 60, db);
    ASSERT_TRUE(store.Load(now).ok());
    ResponseStore::Entry e = Of("a", "kept");
    e.conversation.push_back({{"type", "message"}, {"id", "msg_1"}});
    store.Put("resp_1", e, now);
    store.Put("resp_2", Of("a", "dropped"), now);
    EXPECT_TRUE(store.Delete("resp_2", "a", now));
    db->Flush();
  }
  std::shared_ptr<CacheStore> db = *CacheDb::Open(path);
  ResponseStore reopened(10, 1 << 20, 60, db);
  ASSERT_TRUE(reopened.Load(now).ok());
  std::shared_ptr<const ResponseStore::Entry> e = reopened.Get("resp_1", "a", now + 1);
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->response["text"], "kept");
  EXPECT_EQ(e->conversation[0]["id"], "msg_1");
  EXPECT_EQ(reopened.Get("resp_1", "b", now + 1), nullptr) << "still the tenant's only";
  EXPECT_EQ(reopened.Get("resp_2", "a", now + 1), nullptr) << "deleted stays deleted";
  std::filesystem::remove(path);
}

TEST(ResponseStoreTest, ReplicasShareThemThroughRedis) {
  if (std::system("command -v redis-server > /dev/null 2>&1") != 0) GTEST_SKIP() << "redis-server is not installed";
  testing_util::RedisServer redis(testing_util::FreePort());
  std::shared_ptr<CacheStore> a_db = *RedisStore::Open(redis.url()), b_db = *RedisStore::Open(redis.url());
  ResponseStore a(10, 1 << 20, 60, a_db), b(10, 1 << 20, 60, b_db);
  const double now = UnixTimeSeconds();
  ASSERT_TRUE(a.Load(now).ok());
  ASSERT_TRUE(b.Load(now).ok());
  a.Put("resp_x", Of("t", "from a"), now);
  ASSERT_TRUE(testing::Eventually([&] { return b.Get("resp_x", "t", UnixTimeSeconds()) != nullptr; }));
  EXPECT_EQ(b.Get("resp_x", "t", UnixTimeSeconds())->response["text"], "from a");
  EXPECT_TRUE(b.Delete("resp_x", "t", UnixTimeSeconds()));
  EXPECT_TRUE(testing::Eventually([&] { return a.Get("resp_x", "t", UnixTimeSeconds()) == nullptr; }));
  // A replica started later reads what is there.
  a.Put("resp_y", Of("t", "later"), now);
  a_db->Flush();
  std::shared_ptr<CacheStore> c_db = *RedisStore::Open(redis.url());
  ResponseStore c(10, 1 << 20, 60, c_db);
  ASSERT_TRUE(c.Load(UnixTimeSeconds()).ok());
  EXPECT_NE(c.Get("resp_y", "t", UnixTimeSeconds()), nullptr);
}

}  // namespace
}  // namespace tachyon
