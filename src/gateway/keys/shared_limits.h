// SharedLimits: the keys' rate limits held in Redis, so that every gateway
// replica pointed at one server enforces one limit ([limits] store; by default
// the [cache] store when it is redis://; docs/gateway.md, "Keys and limits").
//
// Each admission is one round trip: a Lua script (EVALSHA) that reads the key's
// GCRA state (one TAT per limit) and its tokens of the day, decides exactly as
// the per-process limiter does (CheckLimits in keyring.h), charges everything or
// nothing, and answers what the x-ratelimit-* headers need. A script runs
// atomically, so two replicas admitting at once see each other's charges: a
// limit of 5 a minute admits 5, whoever asks. The clock is the Redis server's
// (TIME), so the replicas' own clocks do not matter.
//
// The keys are tachyon:limit:{NAME}:requests, :tokens and :day:N (the day's
// tokens; N the UTC day number); the braces keep one key's state in one Redis
// Cluster slot. The TATs expire when they are in the past (an absent TAT is a
// full limit), the day's count after two days.
//
// Replicas: each one writes a heartbeat into the sorted set tachyon:limit:replicas
// every 2 s; the live replicas are those seen in the last 10 s. While Redis
// cannot be reached (or refuses: NOAUTH, READONLY, OOM, ...), admissions fall
// back to the per-process limiter with each cost multiplied by the number of
// replicas last seen (`replicas` from the config before Redis was ever reached),
// so that each replica admits its share, limit / replicas; its state starts from
// the last one Redis gave. The change of state is logged once each way. A
// request never waits for a Redis that is known to be down; the heartbeat thread
// tries again after a delay that doubles from 0.5 s up to 30 s.
//
// Token corrections (the usage at an answer's end) are queued and applied by the
// heartbeat thread: no answer waits on them. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "base/status.h"
#include "gateway/cache/redis_connection.h"
#include "obs/metrics.h"

namespace tachyon {

struct KeyConfig;

struct SharedLimitsOptions {
  std::string url;         // redis:// or rediss://
  std::string password;    // when the URL has none
  bool verify_tls = true;  // rediss://
  std::string ca_file;
  int replicas = 1;        // the share's divisor until Redis says how many replicas are alive
  double io_timeout_seconds = 0.25;  // a request waits at most this on Redis before the fallback
  bool operator==(const SharedLimitsOptions&) const = default;
};

class SharedLimits {
 public:
  // What Redis decided for one request (or, peeking, the state without a request).
  struct Answer {
    int code = 0;               // a LimitHit (keyring.h)
    double retry_after = 0;     // refused: seconds
    double requests_used = 0;   // seconds of the period in use after the decision (TAT - now), requests
    double tokens_used = 0;     // the same for tokens
    int64_t day = 0;            // the UTC day number on Redis's clock
    int64_t day_tokens = 0;     // tokens charged that day
  };

  // Starts the heartbeat thread; a Redis that is not up yet is logged and the
  // limits fall back until it is. metrics may be null.
  static StatusOr<std::unique_ptr<SharedLimits>> Open(SharedLimitsOptions options, MetricsRegistry* metrics);
  ~SharedLimits();
  SharedLimits(const SharedLimits&) = delete;
  SharedLimits& operator=(const SharedLimits&) = delete;

  // The admission of a request of the key with this prompt-token estimate:
  // checked and charged in Redis. False when Redis cannot decide now (down, or it
  // failed just now): the caller falls back to its own limiter.
  bool Admit(const KeyConfig& key, int64_t estimate, Answer* out);
  // The key's state without charging anything (GET /v1/keys); false as Admit.
  bool Peek(const std::vector<const KeyConfig*>& keys, std::vector<Answer>* out);
  // The answer's end: `tokens` more (or fewer, when negative) than the estimate
  // charged on `day`. Queued; dropped while Redis is down.
  void Correct(const KeyConfig& key, int64_t tokens, int64_t day);

  // Whether the limits are held in Redis now.
  bool up() const { return up_.load(std::memory_order_relaxed); }
  // The replicas alive at the last heartbeat (at least 1): the fallback's divisor.
  int64_t replicas() const { return replicas_.load(std::memory_order_relaxed); }
  // The store, its password hidden.
  std::string describe() const;
  // Waits until the queued corrections are applied or dropped (tests).
  void Flush();

 private:
  struct Correction {
    std::string name;
    int64_t tokens_per_minute = 0;
    int64_t tokens = 0;
    int64_t day = 0;
  };

  SharedLimits() = default;
  // A connection from the pool, or a new one; null (the store marked down) when none can be had.
  std::unique_ptr<RedisConnection> Take();
  void Give(std::unique_ptr<RedisConnection> c);
  // Runs a script by its SHA-1, sending its text when the server does not know it yet.
  RedisReplyPtr Script(RedisConnection& c, const std::string& sha, const std::string& text,
                       const std::vector<std::string>& keys, const std::vector<std::string>& args);
  void Down(const std::string& reason, const std::string& message);
  void Up();
  void Loop();  // the heartbeat thread
  bool Heartbeat(RedisConnection& c, std::string* reason, std::string* message);

  SharedLimitsOptions options_;
  RedisAddress address_;
  std::string id_;  // this replica in the heartbeat set
  std::atomic<bool> up_{false};
  std::atomic<int64_t> replicas_{1};
  Gauge* up_gauge_ = nullptr;
  CounterFamily* errors_ = nullptr;  // {reason}

  std::mutex pool_mutex_;
  std::vector<std::unique_ptr<RedisConnection>> pool_;  // guarded by pool_mutex_: idle connections

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Correction> corrections_;  // guarded by mutex_
  bool busy_ = false;                   // guarded by mutex_: corrections being applied
  bool stopping_ = false;               // guarded by mutex_
  std::string failing_;                 // guarded by mutex_: the failure logged; "" while up
  std::thread thread_;
};

// The Redis keys of a key's limits (exposed for tests).
std::string LimitRedisKey(const std::string& name, const char* what);

}  // namespace tachyon
