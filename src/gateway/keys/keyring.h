// Keys, tenants and limits: many teams behind one gateway ([[key]] in the
// config; docs/gateway.md, "Keys and limits").
//
// A Keyring holds the keys by the SHA-256 of their secret (a config may hold
// only the hash) and finds a presented secret by hashing it and comparing it
// with every key's hash in constant time. Each key has a tenant (the scope of
// its cache entries), the routes it may use (globs), and limits:
//
//   requests_per_minute, tokens_per_minute   GCRA (the generic cell rate algorithm):
//       one number per limit, the theoretical arrival time (TAT). A request of
//       cost c is admitted when max(TAT, now) + c*T/L - now <= T (T = 60 s, L the
//       limit), and then TAT moves there. L back-to-back requests pass, the next
//       waits T/L. Exact: between two admissions t seconds apart at most
//       L + L*t/T are admitted, and no burst exceeds L (a fixed window lets 2L
//       through within moments around its edge).
//   max_tokens_per_day                        a budget per UTC day.
//
// Tokens are counted when known: the prompt's estimate at admission, corrected
// with the usage (prompt + completion) when the answer ends. Requests refused
// (401, 403, 429) count against nothing.
//
// The limits hold per process, or, with a SharedLimits (a Redis store), across
// every replica that shares it (shared_limits.h), each replica falling back to
// its share while Redis is down.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "obs/metrics.h"

namespace tachyon {

// The SHA-256 of `data`, 32 raw bytes.
std::string Sha256(std::string_view data);
// Lower-case hex of bytes; and back (false on anything but 2n hex digits).
std::string HexOf(std::string_view bytes);
bool FromHex(std::string_view hex, std::string* bytes);

struct KeyConfig {
  std::string name;    // in metrics, logs and /v1/keys (never the secret)
  std::string sha256;  // 32 raw bytes: SHA-256 of the secret
  std::string tenant;  // cache scope; the config's default: the name
  std::vector<std::string> routes;  // globs of the routes the key may use; empty: all
  int64_t requests_per_minute = 0;  // 0: unlimited
  int64_t tokens_per_minute = 0;
  int64_t max_tokens_per_day = 0;
  bool operator==(const KeyConfig&) const = default;
};

// One limit's state (GCRA over a period of `period` seconds).
struct RateLimit {
  int64_t limit = 0;  // per period; 0: none
  double period = 60;
  double tat = 0;     // theoretical arrival time, seconds on the limiter's clock

  // Whether cost fits now, and if not in how many seconds it would.
  bool Fits(double cost, double now, double* retry_after) const;
  void Charge(double cost, double now);  // cost may be negative (a refund), never below now
  int64_t Remaining(double now) const;   // requests (or tokens) that would pass at once
  double Reset(double now) const;        // seconds until the limit is back to full
};

// Which limit a request met. The admission script of SharedLimits answers the same codes.
enum class LimitHit { kNone = 0, kRequests = 1, kTooLarge = 2, kTokens = 3, kDaily = 4 };

// A key's limits' state on one clock.
struct LimitCounters {
  RateLimit requests, tokens;
  int64_t day = -1;         // the UTC day number of day_tokens
  int64_t day_tokens = 0;
};

// The decision on one request of the key `c` with this prompt-token estimate at
// `now`: every limit checked in order (requests, a prompt larger than the
// tokens limit, tokens, the day's budget), then all charged, or none. Each cost
// is multiplied by `scale`, so that a replica falling back to its own limiter
// admits limit / scale. *retry_after: when refused, the seconds until it would pass.
LimitHit CheckLimits(const KeyConfig& c, LimitCounters* s, int64_t estimate, int64_t scale, double now,
                     double* retry_after);

class SharedLimits;

class Keyring {
 public:
  struct Key {
    KeyConfig config;
    mutable std::mutex mutex;
    // Guarded by mutex: the limits' state. With shared limits, the last state
    // Redis gave (the fallback starts from it); without, the limits themselves.
    mutable LimitCounters counters;
    std::shared_ptr<SharedLimits> shared;  // null: the limits are this process's
    // Metrics, labelled by key name.
    CounterFamily* requests_total = nullptr;  // {key, status}
    Counter* prompt_tokens = nullptr;
    Counter* completion_tokens = nullptr;
    Counter* limited_requests = nullptr;
    Counter* limited_tokens = nullptr;
    Counter* limited_daily = nullptr;
  };

  // What an admitted request was charged, for Finish to correct.
  struct Charge {
    int64_t tokens = 0;  // the prompt estimate
    int64_t scale = 1;   // the cost's multiplier in the local limiter; 0: charged in Redis
    int64_t day = 0;     // the UTC day it was charged on (Redis's clock when shared)
  };

  // What admission decided, with the headers every answer of the key carries.
  struct Admission {
    bool admitted = false;
    std::string limit;      // refused: "requests", "tokens" or "daily_tokens"
    std::string message;    // refused: why, for the client
    double retry_after = 0; // refused: seconds
    Charge charge;          // admitted: corrected at Finish
    std::vector<std::pair<std::string, std::string>> headers;  // x-ratelimit-*, retry-after
  };

  // shared: where the limits live across replicas; null: in this process.
  Keyring(std::vector<KeyConfig> keys, MetricsRegistry* metrics, std::shared_ptr<SharedLimits> shared = nullptr);

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }

  // The key whose secret this is (every key's hash compared in constant time);
  // null: none. The key outlives the keyring while a request holds it.
  std::shared_ptr<const Key> Find(std::string_view secret) const;
  // Whether the key may use the route (its globs; none: every route).
  static bool MayUse(const Key& key, const std::string& route);

  // Admission of a request with this prompt-token estimate at `now` (unix
  // seconds): every limit checked, then all charged, or none (CheckLimits), in
  // Redis when the key's limits are shared and Redis can be asked, else here.
  static Admission Admit(const Key& key, int64_t prompt_tokens_estimate, double now);
  // The answer's end: the real token counts replace the estimate; `status` labels the request.
  static void Finish(const Key& key, const Charge& charge, int64_t prompt_tokens, int64_t completion_tokens,
                     int status, double now);
  // A request of the key refused before admission (403) or after (an error answer), for the metrics.
  static void Count(const Key& key, int status);

  // Takes over the limits' state of the keys of the same name and limits (a
  // reload; shared limits are in Redis and need nothing).
  void Inherit(const Keyring& previous);

  // GET /v1/keys: names, tenants, routes, limits and current usage (every
  // replica's when the limits are in Redis), and where the limits are held;
  // never a secret or its hash.
  nlohmann::json Describe(double now) const;

 private:
  std::vector<std::shared_ptr<Key>> keys_;
  std::shared_ptr<SharedLimits> shared_;
};

// "12ms", "1.5s", "6m0s": a duration as OpenAI's x-ratelimit-reset-* headers write it.
std::string RateLimitDuration(double seconds);

}  // namespace tachyon
