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
//       waits T/L: a smooth limit with no burst of 2L at a window's edge, as a
//       fixed window has, and exact: no request over the limit is ever admitted.
//   max_tokens_per_day                        a budget per UTC day.
//
// Tokens are counted when known: the prompt's estimate at admission, corrected
// with the usage (prompt + completion) when the answer ends. Requests refused
// (401, 403, 429) count against nothing.
//
// The limits here hold per process; a limit shared by replicas through Redis
// is the next step (issue 37).
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

class Keyring {
 public:
  struct Key {
    KeyConfig config;
    mutable std::mutex mutex;
    mutable RateLimit requests, tokens;  // guarded by mutex
    mutable int64_t day = -1;            // guarded by mutex: the UTC day of day_tokens
    mutable int64_t day_tokens = 0;      // guarded by mutex
    // Metrics, labelled by key name.
    CounterFamily* requests_total = nullptr;  // {key, status}
    Counter* prompt_tokens = nullptr;
    Counter* completion_tokens = nullptr;
    Counter* limited_requests = nullptr;
    Counter* limited_tokens = nullptr;
    Counter* limited_daily = nullptr;
  };

  // What admission decided, with the headers every answer of the key carries.
  struct Admission {
    bool admitted = false;
    std::string limit;      // refused: "requests", "tokens" or "daily_tokens"
    std::string message;    // refused: why, for the client
    double retry_after = 0; // refused: seconds
    int64_t charged_tokens = 0;  // admitted: the prompt estimate charged (corrected at Finish)
    std::vector<std::pair<std::string, std::string>> headers;  // x-ratelimit-*, retry-after
  };

  Keyring(std::vector<KeyConfig> keys, MetricsRegistry* metrics);

  bool empty() const { return keys_.empty(); }
  size_t size() const { return keys_.size(); }

  // The key whose secret this is (every key's hash compared in constant time);
  // null: none. The key outlives the keyring while a request holds it.
  std::shared_ptr<const Key> Find(std::string_view secret) const;
  // Whether the key may use the route (its globs; none: every route).
  static bool MayUse(const Key& key, const std::string& route);

  // Admission of a request with this prompt-token estimate at `now` (unix
  // seconds): every limit checked, then all charged, or none.
  static Admission Admit(const Key& key, int64_t prompt_tokens_estimate, double now);
  // The answer's end: the real token counts replace the estimate; `status` labels the request.
  static void Finish(const Key& key, int64_t charged_estimate, int64_t prompt_tokens, int64_t completion_tokens,
                     int status, double now);
  // A request of the key refused before admission (403) or after (an error answer), for the metrics.
  static void Count(const Key& key, int status);

  // Takes over the limits' state of the keys of the same name and limits (a reload).
  void Inherit(const Keyring& previous);

  // GET /v1/keys: names, tenants, routes, limits and current usage; never a secret or its hash.
  nlohmann::json Describe(double now) const;

 private:
  std::vector<std::shared_ptr<Key>> keys_;
};

// "12ms", "1.5s", "6m0s": a duration as OpenAI's x-ratelimit-reset-* headers write it.
std::string RateLimitDuration(double seconds);

}  // namespace tachyon
