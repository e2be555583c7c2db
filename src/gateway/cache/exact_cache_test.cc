#include "gateway/cache/exact_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <thread>

#include "gateway/cache/cache_db.h"
#include "gateway/cache/store_write_queue.h"

namespace tachyon {
namespace {

CompletionRequest Parse(const std::string& body) {
  auto parsed = ParseCompletionRequest(body, Endpoint::kChatCompletions);
  EXPECT_TRUE(std::holds_alternative<CompletionRequest>(parsed)) << body;
  return std::get<CompletionRequest>(parsed);
}

GatewayRequest Request(const std::string& body, std::string cache_control = "") {
  return GatewayRequest{.request = std::make_shared<CompletionRequest>(Parse(body)),
                        .id = "chatcmpl-1",
                        .created = 7,
                        .cache_control = std::move(cache_control)};
}

constexpr char kHi[] = R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0})";

TEST(ExactCacheKeyTest, EverythingThatChangesTheAnswerAndNothingElse) {
  const std::string base = ExactCacheKeyText(Parse(kHi), "chat", "");
  // Key order, 0 vs 0.0, stream, stream_options and user do not change the answer.
  EXPECT_EQ(ExactCacheKeyText(Parse(R"({"temperature":0.0,"messages":[{"content":"hi","role":"user"}],"model":"chat",
                                       "stream":true,"stream_options":{"include_usage":true},"user":"u"})"),
                              "chat", ""),
            base);
  // The system prompt, sampling, tools, the route and the tenant do.
  EXPECT_NE(ExactCacheKeyText(Parse(R"({"model":"chat","messages":[{"role":"system","content":"be brief"},
                                       {"role":"user","content":"hi"}],"temperature":0})"),
                              "chat", ""),
            base);
  EXPECT_NE(ExactCacheKeyText(Parse(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0,
                                       "max_tokens":5})"),
                              "chat", ""),
            base);
  EXPECT_NE(ExactCacheKeyText(Parse(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0,
                                       "tools":[{"type":"function","function":{"name":"f"}}]})"),
                              "chat", ""),
            base);
  EXPECT_NE(ExactCacheKeyText(Parse(kHi), "other", ""), base);
  EXPECT_NE(ExactCacheKeyText(Parse(kHi), "chat", "tenant-b"), base);
  // The model name is in the key only where it reaches an upstream (issue 31: two
  // aliases of one route sent upstream as asked must not share an answer).
  const std::string mini = R"({"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"temperature":0})";
  const std::string o4 = R"({"model":"o4-mini","messages":[{"role":"user","content":"hi"}],"temperature":0})";
  EXPECT_EQ(ExactCacheKeyText(Parse(mini), "chat", ""), ExactCacheKeyText(Parse(o4), "chat", ""));
  EXPECT_NE(ExactCacheKeyText(Parse(mini), "chat", "", true), ExactCacheKeyText(Parse(o4), "chat", "", true));
  EXPECT_EQ(ExactCacheKeyText(Parse(mini), "chat", "", true), ExactCacheKeyText(Parse(mini), "chat", "", true));
  // The scheme's version leads: what a store kept under the old scheme is never found.
  EXPECT_EQ(base.rfind(std::string(kCacheKeyVersion) + "\n", 0), 0u) << base;
}

TEST(ExactCacheStoreTest, LruByEntriesAndBytesAndTtl) {
  ExactCache cache(2, 1 << 20);
  const Clock::time_point t0 = Clock::Real().Now();
  cache.Put("a", {.text = "A"}, t0, 10);
  cache.Put("b", {.text = "B"}, t0, 10);
  ASSERT_TRUE(cache.Find("a", t0));  // a is now the most recent
  cache.Put("c", {.text = "C"}, t0, 10);
  EXPECT_FALSE(cache.Find("b", t0)) << "the least recently used goes first";
  EXPECT_EQ(cache.Find("a", t0)->answer.text, "A");
  EXPECT_EQ(cache.entries(), 2u);
  EXPECT_FALSE(cache.Find("c", t0 + std::chrono::seconds(11))) << "expired";
  EXPECT_EQ(cache.entries(), 1u);
  ExactCache small(100, 400);
  small.Put("x", {.text = std::string(200, 'x')}, t0, 10);
  small.Put("y", {.text = std::string(200, 'y')}, t0, 10);
  EXPECT_FALSE(small.Find("x", t0)) << "over max_bytes: the oldest goes";
  EXPECT_TRUE(small.Find("y", t0));
  EXPECT_LE(small.bytes(), 400u);
  small.Put("z", {.text = std::string(1000, 'z')}, t0, 10);
  EXPECT_FALSE(small.Find("z", t0)) << "larger than the whole cache: not kept";
}

// The SQLite store behind the memory LRU: entries come back after a restart,
// most recent first, without the expired and the evicted.
TEST(ExactCacheStoreTest, SqliteKeepsEntriesAcrossARestart) {
  const std::string dir = ::testing::TempDir() + "/tachyon_cache_db_" + std::to_string(::getpid());
  const std::string path = dir + "/sub/cache.db";
  std::filesystem::remove_all(dir);
  ManualClock clock;
  const Clock::time_point t0 = clock.Now();
  {
    auto db = *CacheDb::Open(path);  // the directory is made
    ExactCache cache(2, 1 << 20, std::move(db), &clock);
    cache.Put("a", {.model = "chat", .text = "A", .finish_reason = "stop", .has_usage = true, .usage = {1, 2}}, t0, 60);
    cache.Put("short", {.text = "S"}, t0, 0.001);
    cache.Put("b", {.text = "B"}, t0, 60);
    cache.Put("c", {.text = "C"}, t0, 60);  // evicts "a" (2 entries at most)
    cache.db()->Flush();
  }
  clock.AdvanceSeconds(1);  // "short" expires
  ExactCache reopened(10, 1 << 20, *CacheDb::Open(path), &clock);
  ASSERT_TRUE(reopened.Load().ok());
  EXPECT_EQ(reopened.entries(), 2u);
  EXPECT_FALSE(reopened.Find("a", clock.Now()));
  EXPECT_FALSE(reopened.Find("short", clock.Now()));
  ASSERT_TRUE(reopened.Find("c", clock.Now()));
  EXPECT_EQ(reopened.Find("c", clock.Now())->answer.text, "C");
  EXPECT_EQ(reopened.Find("b", clock.Now())->answer.text, "B");
  clock.AdvanceSeconds(60);
  EXPECT_FALSE(reopened.Find("c", clock.Now())) << "60 s later the rest have expired too";
  std::filesystem::remove_all(dir);
  EXPECT_FALSE(CacheDb::Open("/proc/no/such/dir/cache.db").ok());
}

// Issue 31: the file was created 0644, and expired rows were never deleted (the
// file grew across restarts). It is 0600 now, and a restart prunes expired rows and
// those past the row bound, oldest first.
TEST(ExactCacheStoreTest, SqliteFileIsPrivateAndPrunedAtStart) {
  const std::string dir = ::testing::TempDir() + "/tachyon_cache_prune_" + std::to_string(::getpid());
  const std::string path = dir + "/cache.db";
  std::filesystem::remove_all(dir);
  {
    std::shared_ptr<CacheDb> db = *CacheDb::Open(path);
    const double now = UnixTimeSeconds();
    for (int i = 0; i < 10; ++i) {
      db->Put(CacheTable::kExact, {.key = "live" + std::to_string(i),
                                   .answer = {.text = "x"},
                                   .stored_unix = now + i,
                                   .expires_unix = now + 3600});
      db->Put(CacheTable::kExact, {.key = "old" + std::to_string(i),
                                   .answer = {.text = "x"},
                                   .stored_unix = now - 100,
                                   .expires_unix = now - 1});
    }
    db->Flush();
  }
  const auto perms = std::filesystem::status(path).permissions();
  EXPECT_EQ(perms & (std::filesystem::perms::group_all | std::filesystem::perms::others_all),
            std::filesystem::perms::none);
  // A file an older version left readable by others is narrowed at open.
  std::filesystem::permissions(path, std::filesystem::perms::others_read, std::filesystem::perm_options::add);
  std::shared_ptr<CacheDb> db = *CacheDb::Open(path, /*max_rows=*/4);
  EXPECT_EQ(std::filesystem::status(path).permissions() & std::filesystem::perms::others_all,
            std::filesystem::perms::none);
  // Load asks for more than the bound: the rows themselves are gone, not just skipped.
  StatusOr<std::vector<StoredEntry>> rows = db->Load(CacheTable::kExact, 0, 100);
  ASSERT_TRUE(rows.ok());
  ASSERT_EQ(rows->size(), 4u);
  EXPECT_EQ((*rows)[0].key, "live9");  // the newest stay
  EXPECT_EQ((*rows)[3].key, "live6");
  std::filesystem::remove_all(dir);
}

// Issue 31: a store slower than the answers it is given used to queue them without
// bound. Past the bound a put is dropped and counted; deletes wait longer.
TEST(StoreWriteQueueTest, PutsPastTheBoundAreDroppedAndCounted) {
  MetricsRegistry metrics;
  std::mutex gate;
  std::unique_lock<std::mutex> closed(gate);  // the writer's first batch waits here
  std::atomic<bool> entered{false};
  std::atomic<int> applied{0};
  {
    StoreWriteQueue queue(
        1,
        [&](std::vector<StoreWriteQueue::Op>& ops) {
          entered = true;
          std::lock_guard<std::mutex> wait(gate);
          applied += static_cast<int>(ops.size());
        },
        QueueDropCounter(&metrics, "store_write"), /*max_queued=*/4);
    queue.Put(CacheTable::kExact, {.key = "first"});  // taken by the writer, which then waits
    while (!entered) std::this_thread::yield();
    for (int i = 0; i < 10; ++i) queue.Put(CacheTable::kExact, {.key = "p" + std::to_string(i)});
    for (int i = 0; i < 20; ++i) queue.Delete(CacheTable::kExact, "d" + std::to_string(i));
    closed.unlock();
    queue.Flush();
  }
  // 4 puts wait, 6 are dropped; deletes wait up to 16 queued in all: 12 more, 8 dropped.
  const std::string series = "tachyon:cache_queue_dropped_total{queue=\"store_write\"} ";
  const std::string text = metrics.Render();
  const size_t at = text.find(series);
  ASSERT_NE(at, std::string::npos) << text;
  EXPECT_EQ(std::stod(text.substr(at + series.size())), 14) << text;
  EXPECT_EQ(applied, 1 + 4 + 12);
}

TEST(ExactCacheStageTest, MissStoreHitAndTheBypasses) {
  MetricsRegistry metrics;
  ExactCacheStage stage({.routes = {{"chat", {.ttl_seconds = 60}}}}, nullptr, &metrics);
  GatewayRequest first = Request(kHi);
  EXPECT_FALSE(stage.Process(first));
  EXPECT_EQ(first.cache_status, "miss");
  ASSERT_FALSE(first.cache_key.empty());
  const CapturedAnswer answer{.model = "chat", .text = "Hello there, how can I help?", .finish_reason = "stop",
                              .has_usage = true, .usage = {3, 7}};
  stage.OnAnswer(first, CapturedAnswer{.text = "partial", .finish_reason = "tool_calls"});  // not stored
  GatewayRequest again = Request(kHi);
  EXPECT_FALSE(stage.Process(again));
  stage.OnAnswer(first, answer);
  GatewayRequest hit = Request(kHi);
  std::optional<StageAnswer> a = stage.Process(hit);
  ASSERT_TRUE(a);
  EXPECT_EQ(hit.cache_status, "hit");
  EXPECT_GE(hit.cache_age_seconds, 0);
  EXPECT_EQ(a->answered_by, "exact-cache");
  nlohmann::json body = nlohmann::json::parse(a->result.body);
  EXPECT_EQ(body["choices"][0]["message"]["content"], answer.text);
  EXPECT_EQ(body["id"], "chatcmpl-1");  // the new request's id
  EXPECT_EQ(body["usage"]["completion_tokens"], 7);

  // Cache-Control: no-store passes by; no-cache looks nothing up.
  GatewayRequest no_store = Request(kHi, "no-store");
  EXPECT_FALSE(stage.Process(no_store));
  EXPECT_EQ(no_store.cache_status, "bypass");
  EXPECT_TRUE(no_store.cache_key.empty());
  GatewayRequest no_cache = Request(kHi, "max-age=0, no-cache");
  EXPECT_FALSE(stage.Process(no_cache));
  EXPECT_EQ(no_cache.cache_status, "miss");
  EXPECT_FALSE(no_cache.cache_key.empty());
  // Sampled requests (temperature defaults to 1) and other routes are not cached.
  GatewayRequest sampled = Request(R"({"model":"chat","messages":[{"role":"user","content":"hi"}]})");
  EXPECT_FALSE(stage.Process(sampled));
  EXPECT_EQ(sampled.cache_status, "bypass");
  GatewayRequest other = Request(R"({"model":"other","messages":[{"role":"user","content":"hi"}],"temperature":0})");
  EXPECT_FALSE(stage.Process(other));
  EXPECT_EQ(other.cache_status, "");
  // Logprobs are not stored, so a request that asks for them passes by (a hit would say null).
  GatewayRequest logprobs =
      Request(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0,"logprobs":true})");
  EXPECT_FALSE(stage.Process(logprobs));
  EXPECT_EQ(logprobs.cache_status, "bypass");
  const std::string text = metrics.Render();
  EXPECT_NE(text.find("tachyon:cache_lookups_total{kind=\"exact\",result=\"hit\",route=\"chat\"} 1"), std::string::npos) << text;
  EXPECT_NE(text.find("tachyon:cache_entries{kind=\"exact\"} 1"), std::string::npos);
  // Lookups timed: the first miss, the stored-then-found hit, and the miss before the store.
  EXPECT_NE(text.find("tachyon:cache_lookup_seconds_count{kind=\"exact\"} 3"), std::string::npos) << text;
  // A request without a model, which the gateway sent to its only route: the same entry (model is not in the key).
  GatewayRequest unnamed = Request(R"({"messages":[{"role":"user","content":"hi"}],"temperature":0})");
  unnamed.route = "chat";
  EXPECT_TRUE(stage.Process(unnamed));
  EXPECT_EQ(unnamed.cache_status, "hit");
}

TEST(ExactCacheStageTest, StreamingReplayInPiecesWithUsage) {
  GatewayRequest r = Request(R"({"model":"chat","messages":[{"role":"user","content":"hi"}],"temperature":0,
                                 "stream":true,"stream_options":{"include_usage":true}})");
  const std::string text = std::string(100, 'a') + "\xc3\xa9" + std::string(50, 'b');  // a 2-byte character at 100
  StageAnswer a = RenderCachedAnswer({.model = "chat", .text = text, .finish_reason = "length", .has_usage = true,
                                      .usage = {1, 2}},
                                     r);
  ASSERT_GE(a.chunks.size(), 4u);  // 3 content pieces, the finish chunk, usage
  std::string joined;
  for (const BackendChunk& c : a.chunks) joined += c.text;
  EXPECT_EQ(joined, text);
  for (const BackendChunk& c : a.chunks) EXPECT_FALSE(nlohmann::json::parse(c.event).is_discarded());
  EXPECT_EQ(nlohmann::json::parse(a.chunks[0].event)["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(a.chunks[a.chunks.size() - 2].finish_reason, "length");
  EXPECT_TRUE(nlohmann::json::parse(a.chunks.back().event).contains("usage"));
}

}  // namespace
}  // namespace tachyon
