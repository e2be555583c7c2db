#include "server/response_store.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace tachyon
