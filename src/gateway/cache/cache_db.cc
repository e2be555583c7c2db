#include "gateway/cache/cache_db.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace tachyon {
namespace {

constexpr size_t kBatch = 256;

Status SqliteError(sqlite3* db, const std::string& what) {
  return UnavailableError(what + ": " + (db != nullptr ? sqlite3_errmsg(db) : "out of memory"));
}

Status Exec(sqlite3* db, const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error != nullptr ? error : "unknown error";
    sqlite3_free(error);
    return UnavailableError(std::string(sql).substr(0, 40) + ": " + message);
  }
  return Status::Ok();
}

std::string Column(sqlite3_stmt* s, int i) {
  const unsigned char* text = sqlite3_column_text(s, i);
  return text != nullptr ? std::string(reinterpret_cast<const char*>(text), sqlite3_column_bytes(s, i)) : "";
}

}  // namespace

StatusOr<std::unique_ptr<CacheDb>> CacheDb::Open(const std::string& path, size_t max_rows, MetricsRegistry* metrics) {
  std::unique_ptr<CacheDb> c(new CacheDb());
  c->path_ = path;
  c->max_rows_ = max_rows;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  std::error_code ec;
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  if (ec) return UnavailableError("cache store " + path + ": " + ec.message());
  // Created 0600 before SQLite opens it (its -wal and -shm files take the same mode);
  // a file an older version made readable by others is narrowed.
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return UnavailableError("cache store " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) == 0 && (st.st_mode & 077) != 0) {
    if (::fchmod(fd, st.st_mode & 0700) == 0) {
      std::fprintf(stderr, "tachyon: cache store %s: was readable by other users; now 0600\n", path.c_str());
    }
  }
  ::close(fd);
  if (sqlite3_open_v2(path.c_str(), &c->db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    Status s = SqliteError(c->db_, "cache store " + path);
    return s;
  }
  sqlite3_busy_timeout(c->db_, 2000);
  for (const char* sql : {"PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL",
                          "CREATE TABLE IF NOT EXISTS exact_cache (key TEXT PRIMARY KEY, endpoint INTEGER, "
                          "model TEXT, text TEXT, finish_reason TEXT, has_usage INTEGER, prompt_tokens INTEGER, "
                          "completion_tokens INTEGER, stored REAL, expires REAL)",
                          "CREATE TABLE IF NOT EXISTS semantic_cache (key TEXT PRIMARY KEY, endpoint INTEGER, "
                          "model TEXT, text TEXT, finish_reason TEXT, has_usage INTEGER, prompt_tokens INTEGER, "
                          "completion_tokens INTEGER, stored REAL, expires REAL, route TEXT, tenant TEXT, "
                          "scope TEXT, embedder TEXT, question TEXT, vector BLOB)",
                          "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, endpoint INTEGER, "
                          "model TEXT, text TEXT, finish_reason TEXT, has_usage INTEGER, prompt_tokens INTEGER, "
                          "completion_tokens INTEGER, stored REAL, expires REAL, route TEXT, tenant TEXT)"}) {
    Status s = Exec(c->db_, sql);
    if (!s.ok()) return s.WithContext("cache store " + path);
  }
  // Files written before entries named their route and tenant gain the columns.
  for (const char* column : {"route", "tenant"}) {
    const std::string sql = std::string("ALTER TABLE exact_cache ADD COLUMN ") + column + " TEXT DEFAULT ''";
    (void)Exec(c->db_, sql.c_str());  // fails when the column is there already
  }
  c->Prune();
  c->writes_ = std::make_unique<StoreWriteQueue>(kBatch, [raw = c.get()](auto& ops) { raw->Apply(ops); },
                                                 QueueDropCounter(metrics, "store_write"));
  return c;
}

void CacheDb::Prune() {
  last_prune_ = std::chrono::steady_clock::now();
  for (const char* table : {"exact_cache", "semantic_cache", "responses"}) {
    sqlite3_stmt* s = nullptr;
    const std::string expired = std::string("DELETE FROM ") + table + " WHERE expires <= ?";
    if (sqlite3_prepare_v2(db_, expired.c_str(), -1, &s, nullptr) == SQLITE_OK) {
      sqlite3_bind_double(s, 1, UnixTimeSeconds());
      if (sqlite3_step(s) != SQLITE_DONE) {
        std::fprintf(stderr, "tachyon: cache store %s: pruning: %s\n", path_.c_str(), sqlite3_errmsg(db_));
      }
    }
    sqlite3_finalize(s);
    if (max_rows_ == 0) continue;
    s = nullptr;
    const std::string over = std::string("DELETE FROM ") + table + " WHERE key NOT IN (SELECT key FROM " + table +
                             " ORDER BY stored DESC LIMIT ?)";
    if (sqlite3_prepare_v2(db_, over.c_str(), -1, &s, nullptr) == SQLITE_OK) {
      sqlite3_bind_int64(s, 1, static_cast<sqlite3_int64>(std::min<size_t>(max_rows_, INT64_MAX)));
      if (sqlite3_step(s) != SQLITE_DONE) {
        std::fprintf(stderr, "tachyon: cache store %s: pruning: %s\n", path_.c_str(), sqlite3_errmsg(db_));
      }
    }
    sqlite3_finalize(s);
  }
}

CacheDb::~CacheDb() {
  writes_.reset();  // applies what is queued
  if (db_ != nullptr) sqlite3_close(db_);
}

StatusOr<std::vector<StoredEntry>> CacheDb::Load(CacheTable table, double now_unix, size_t limit) {
  StatusOr<std::vector<StoredEntry>> result = std::vector<StoredEntry>();
  writes_->WhileIdle([&] { result = LoadIdle(table, now_unix, limit); });
  return result;
}

StatusOr<std::vector<StoredEntry>> CacheDb::LoadIdle(CacheTable table, double now_unix, size_t limit) {
  sqlite3_stmt* s = nullptr;
  const std::string sql = std::string(
                              "SELECT key, endpoint, model, text, finish_reason, has_usage, prompt_tokens, "
                              "completion_tokens, stored, expires, route, tenant") +
                          (table == CacheTable::kSemantic    ? ", scope, embedder, question, vector FROM semantic_cache"
                           : table == CacheTable::kResponses ? " FROM responses"
                                                             : " FROM exact_cache") +
                          " WHERE expires > ? ORDER BY stored DESC LIMIT ?";
  if (sqlite3_prepare_v2(db_, sql.c_str(), -1, &s, nullptr) != SQLITE_OK) {
    return SqliteError(db_, "cache store " + path_);
  }
  sqlite3_bind_double(s, 1, now_unix);
  sqlite3_bind_int64(s, 2, static_cast<sqlite3_int64>(std::min<size_t>(limit, INT64_MAX)));
  std::vector<StoredEntry> out;
  int rc;
  while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
    StoredEntry e;
    e.key = Column(s, 0);
    e.answer.endpoint = sqlite3_column_int(s, 1) == 1 ? Endpoint::kChatCompletions : Endpoint::kCompletions;
    e.answer.model = Column(s, 2);
    e.answer.text = Column(s, 3);
    e.answer.finish_reason = Column(s, 4);
    e.answer.has_usage = sqlite3_column_int(s, 5) != 0;
    e.answer.usage = {sqlite3_column_int64(s, 6), sqlite3_column_int64(s, 7)};
    e.stored_unix = sqlite3_column_double(s, 8);
    e.expires_unix = sqlite3_column_double(s, 9);
    e.route = Column(s, 10);
    e.tenant = Column(s, 11);
    if (table == CacheTable::kSemantic) {
      e.scope = Column(s, 12);
      e.embedder = Column(s, 13);
      e.question = Column(s, 14);
      const int bytes = sqlite3_column_bytes(s, 15);
      const void* blob = sqlite3_column_blob(s, 15);
      if (blob == nullptr || bytes <= 0 || bytes % sizeof(float) != 0) continue;  // not a vector: never served
      e.vector.resize(static_cast<size_t>(bytes) / sizeof(float));
      std::memcpy(e.vector.data(), blob, static_cast<size_t>(bytes));
    }
    out.push_back(std::move(e));
  }
  sqlite3_finalize(s);
  if (rc != SQLITE_DONE) return SqliteError(db_, "cache store " + path_);
  return out;
}

void CacheDb::Put(CacheTable table, StoredEntry entry) { writes_->Put(table, std::move(entry)); }
void CacheDb::Delete(CacheTable table, std::string key) { writes_->Delete(table, std::move(key)); }
void CacheDb::Flush() { writes_->Flush(); }

void CacheDb::Apply(std::vector<StoreWriteQueue::Op>& ops) {
  if (std::chrono::steady_clock::now() - last_prune_ > std::chrono::duration<double>(kPruneSeconds)) Prune();
  // One transaction a batch; each row is whole or absent whatever happens to the process.
  if (!Exec(db_, "BEGIN").ok()) {
    std::fprintf(stderr, "tachyon: cache store %s: BEGIN failed: %s\n", path_.c_str(), sqlite3_errmsg(db_));
    return;
  }
  // [0] exact, [1] semantic, [2] responses (the exact table's columns).
  sqlite3_stmt *put[3] = {nullptr, nullptr, nullptr}, *del[3] = {nullptr, nullptr, nullptr};
  for (int t : {0, 2}) {
    const std::string insert = std::string("INSERT OR REPLACE INTO ") + (t == 0 ? "exact_cache" : "responses") +
                               " (key, endpoint, model, text, finish_reason, has_usage, prompt_tokens, "
                               "completion_tokens, stored, expires, route, tenant) "
                               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
    sqlite3_prepare_v2(db_, insert.c_str(), -1, &put[t], nullptr);
  }
  sqlite3_prepare_v2(db_,
                     "INSERT OR REPLACE INTO semantic_cache (key, endpoint, model, text, finish_reason, has_usage, "
                     "prompt_tokens, completion_tokens, stored, expires, route, tenant, scope, embedder, question, "
                     "vector) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     -1, &put[1], nullptr);
  sqlite3_prepare_v2(db_, "DELETE FROM exact_cache WHERE key = ?", -1, &del[0], nullptr);
  sqlite3_prepare_v2(db_, "DELETE FROM semantic_cache WHERE key = ?", -1, &del[1], nullptr);
  sqlite3_prepare_v2(db_, "DELETE FROM responses WHERE key = ?", -1, &del[2], nullptr);
  auto text = [](sqlite3_stmt* s, int i, const std::string& v) {
    sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  };
  for (const StoreWriteQueue::Op& op : ops) {
    const StoredEntry& e = op.entry;
    const int t = op.table == CacheTable::kSemantic ? 1 : op.table == CacheTable::kResponses ? 2 : 0;
    sqlite3_stmt* s = op.put ? put[t] : del[t];
    if (s == nullptr) continue;
    sqlite3_reset(s);
    text(s, 1, e.key);
    if (op.put) {
      sqlite3_bind_int(s, 2, e.answer.endpoint == Endpoint::kChatCompletions ? 1 : 0);
      text(s, 3, e.answer.model);
      text(s, 4, e.answer.text);
      text(s, 5, e.answer.finish_reason);
      sqlite3_bind_int(s, 6, e.answer.has_usage ? 1 : 0);
      sqlite3_bind_int64(s, 7, e.answer.usage.prompt_tokens);
      sqlite3_bind_int64(s, 8, e.answer.usage.completion_tokens);
      sqlite3_bind_double(s, 9, e.stored_unix);
      sqlite3_bind_double(s, 10, e.expires_unix);
      text(s, 11, e.route);
      text(s, 12, e.tenant);
      if (t == 1) {
        text(s, 13, e.scope);
        text(s, 14, e.embedder);
        text(s, 15, e.question);
        sqlite3_bind_blob(s, 16, e.vector.data(), static_cast<int>(e.vector.size() * sizeof(float)),
                          SQLITE_TRANSIENT);
      }
    }
    if (sqlite3_step(s) != SQLITE_DONE) {
      std::fprintf(stderr, "tachyon: cache store %s: write failed: %s\n", path_.c_str(), sqlite3_errmsg(db_));
    }
  }
  for (sqlite3_stmt* s : {put[0], put[1], put[2], del[0], del[1], del[2]}) sqlite3_finalize(s);
  if (!Exec(db_, "COMMIT").ok()) {
    std::fprintf(stderr, "tachyon: cache store %s: COMMIT failed: %s\n", path_.c_str(), sqlite3_errmsg(db_));
    (void)Exec(db_, "ROLLBACK");  // what failed is already reported
  }
}

}  // namespace tachyon
