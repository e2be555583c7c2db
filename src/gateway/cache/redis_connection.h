// RedisConnection: one blocking connection to a Redis server, over TCP or TLS,
// authenticated and on its database before it is handed out.
//
// hiredis (Debian 12 ships 0.14) formats commands and reads replies here
// (redisFormatCommandArgv, redisReader); the bytes go through a socket of our own
// so that `rediss://` can run through OpenSSL, which that hiredis cannot. Every new
// connection sends AUTH (when the URL or password_env gives a password) and SELECT
// (a database other than 0) first; an error reply to either is a failed connect,
// with the reply's first word as the reason.
//
// Not thread-safe: one thread uses a connection at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "base/status.h"

struct redisReply;
struct redisReader;
typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

namespace tachyon {

// redis://[[USER]:PASSWORD@]HOST[:PORT][/DB] or rediss://... (TLS).
struct RedisAddress {
  std::string host = "127.0.0.1";
  int port = 6379;
  int db = 0;
  std::string user;      // ACL user ("": the default user)
  std::string password;  // "": no AUTH
  bool tls = false;
  bool verify_tls = true;  // rediss: check the server's certificate and name
  std::string ca_file;     // rediss: PEM bundle; "": the system's
};
StatusOr<RedisAddress> ParseRedisUrl(const std::string& url);
// The URL with its password replaced by "***", for logs and /v1/cache.
std::string RedactRedisUrl(const std::string& url);

struct RedisReplyDeleter {
  void operator()(redisReply* r) const;
};
using RedisReplyPtr = std::unique_ptr<redisReply, RedisReplyDeleter>;

// The text of a reply (string, status or error), or "".
std::string RedisText(const redisReply* r);
// An error reply's reason for metrics and logs: its first word lower-cased
// ("noauth", "wrongpass", "readonly", "oom"), "error" when it has none; "" for
// a reply that is not an error.
std::string RedisErrorReason(const redisReply* r);

class RedisConnection {
 public:
  // Connects within timeout_seconds, then every read or write waits at most
  // io_timeout_seconds. On failure: the status says why, and *reason (when given)
  // is a short word for metrics: "connect", "tls", "noauth", "wrongpass", ...
  static StatusOr<std::unique_ptr<RedisConnection>> Open(const RedisAddress& address, double timeout_seconds,
                                                         double io_timeout_seconds, std::string* reason = nullptr);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // Queues one command; GetReply sends what is queued and reads the next reply.
  void Append(const std::vector<std::string>& args);
  // The next reply; null when the connection failed (it is then unusable).
  RedisReplyPtr GetReply();
  // Append + GetReply.
  RedisReplyPtr Command(const std::vector<std::string>& args);

 private:
  RedisConnection() = default;
  bool Flush();
  bool ReadSome();
  bool Broken() {  // the connection is lost: every later call fails at once
    broken_ = true;
    return false;
  }

  int fd_ = -1;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  redisReader* reader_ = nullptr;
  std::string out_;  // formatted commands not yet sent
  bool broken_ = false;
};

}  // namespace tachyon
