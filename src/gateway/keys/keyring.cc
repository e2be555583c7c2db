#include "gateway/keys/keyring.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "base/check.h"
#include "base/constant_time.h"
#include "gateway/keys/shared_limits.h"
#include "gateway/route/task_router.h"

namespace tachyon {
namespace {

constexpr double kDay = 86400;
constexpr double kSlack = 1e-9;  // floating-point room in the GCRA comparisons

std::string Num(int64_t n) { return std::to_string(n); }

}  // namespace

std::string Sha256(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  CHECK(EVP_Digest(data.data(), data.size(), digest, &size, EVP_sha256(), nullptr) == 1) << "SHA-256 failed";
  return std::string(reinterpret_cast<const char*>(digest), size);
}

std::string HexOf(std::string_view bytes) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char c : bytes) {
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

bool FromHex(std::string_view hex, std::string* bytes) {
  auto value = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  if (hex.size() % 2 != 0) return false;
  bytes->clear();
  for (size_t i = 0; i < hex.size(); i += 2) {
    const int hi = value(hex[i]), lo = value(hex[i + 1]);
    if (hi < 0 || lo < 0) return false;
    bytes->push_back(static_cast<char>(hi * 16 + lo));
  }
  return true;
}

std::string RateLimitDuration(double seconds) {
  if (seconds <= 0) return "0s";
  char text[48];
  if (seconds < 1) {
    std::snprintf(text, sizeof(text), "%dms", static_cast<int>(std::ceil(seconds * 1000)));
  } else if (seconds < 60) {
    std::snprintf(text, sizeof(text), "%gs", std::ceil(seconds * 10) / 10);
  } else {
    const int64_t whole = static_cast<int64_t>(std::ceil(seconds));
    if (whole < 3600) {
      std::snprintf(text, sizeof(text), "%lldm%llds", static_cast<long long>(whole / 60),
                    static_cast<long long>(whole % 60));
    } else {
      std::snprintf(text, sizeof(text), "%lldh%lldm%llds", static_cast<long long>(whole / 3600),
                    static_cast<long long>(whole / 60 % 60), static_cast<long long>(whole % 60));
    }
  }
  return text;
}

bool RateLimit::Fits(double cost, double now, double* retry_after) const {
  if (limit <= 0) return true;
  const double interval = period / static_cast<double>(limit);
  const double next = std::max(tat, now) + cost * interval;
  if (next - now <= period + kSlack) return true;
  *retry_after = next - period - now;
  return false;
}

void RateLimit::Charge(double cost, double now) {
  if (limit <= 0) return;
  const double interval = period / static_cast<double>(limit);
  tat = cost >= 0 ? std::max(tat, now) + cost * interval : std::max(now, tat + cost * interval);
}

int64_t RateLimit::Remaining(double now) const {
  if (limit <= 0) return 0;
  const double interval = period / static_cast<double>(limit);
  const double used = std::max(0.0, tat - now);
  return std::max<int64_t>(0, static_cast<int64_t>(std::floor((period - used) / interval + kSlack)));
}

double RateLimit::Reset(double now) const { return std::max(0.0, tat - now); }

Keyring::Keyring(std::vector<KeyConfig> keys, MetricsRegistry* metrics, std::shared_ptr<SharedLimits> shared)
    : shared_(std::move(shared)) {
  CounterFamily& requests = metrics->AddCounter("tachyon:key_requests_total",
                                                "Requests of each key by the HTTP status of their answer",
                                                {"key", "status"});
  CounterFamily& tokens = metrics->AddCounter("tachyon:key_tokens_total",
                                              "Tokens of each key's answered requests (prompt, completion)",
                                              {"key", "kind"});
  CounterFamily& limited = metrics->AddCounter("tachyon:key_limited_total",
                                               "Requests refused with 429, by key and the limit they met "
                                               "(requests, tokens, daily_tokens)",
                                               {"key", "limit"});
  for (KeyConfig& config : keys) {
    auto key = std::make_shared<Key>();
    key->counters.requests.limit = config.requests_per_minute;
    key->counters.tokens.limit = config.tokens_per_minute;
    key->shared = shared_;
    key->requests_total = &requests;
    key->prompt_tokens = &tokens.With({config.name, "prompt"});
    key->completion_tokens = &tokens.With({config.name, "completion"});
    key->limited_requests = &limited.With({config.name, "requests"});
    key->limited_tokens = &limited.With({config.name, "tokens"});
    key->limited_daily = &limited.With({config.name, "daily_tokens"});
    key->config = std::move(config);
    keys_.push_back(std::move(key));
  }
}

std::shared_ptr<const Keyring::Key> Keyring::Find(std::string_view secret) const {
  const std::string hash = Sha256(secret);
  std::shared_ptr<const Key> found;
  for (const auto& key : keys_) {  // every key, so the time does not say which matched
    if (ConstantTimeEquals(hash, key->config.sha256) && found == nullptr) found = key;
  }
  return found;
}

bool Keyring::MayUse(const Key& key, const std::string& route) {
  if (key.config.routes.empty()) return true;
  return std::any_of(key.config.routes.begin(), key.config.routes.end(),
                     [&](const std::string& glob) { return GlobMatch(glob, route); });
}

LimitHit CheckLimits(const KeyConfig& c, LimitCounters* s, int64_t estimate, int64_t scale, double now,
                     double* retry_after) {
  const int64_t today = static_cast<int64_t>(std::floor(now / kDay));
  if (s->day != today) {
    s->day = today;
    s->day_tokens = 0;
  }
  s->requests.limit = c.requests_per_minute;
  s->tokens.limit = c.tokens_per_minute;
  const int64_t tokens = estimate * scale;
  if (!s->requests.Fits(static_cast<double>(scale), now, retry_after)) return LimitHit::kRequests;
  if (c.tokens_per_minute > 0 && tokens > c.tokens_per_minute) {
    *retry_after = 60;
    return LimitHit::kTooLarge;
  }
  if (!s->tokens.Fits(static_cast<double>(tokens), now, retry_after)) return LimitHit::kTokens;
  if (c.max_tokens_per_day > 0 && s->day_tokens + tokens > c.max_tokens_per_day) {
    *retry_after = static_cast<double>(today + 1) * kDay - now;
    return LimitHit::kDaily;
  }
  s->requests.Charge(static_cast<double>(scale), now);
  s->tokens.Charge(static_cast<double>(tokens), now);
  s->day_tokens += tokens;
  return LimitHit::kNone;
}

Keyring::Admission Keyring::Admit(const Key& key, int64_t prompt_tokens_estimate, double now) {
  Admission out;
  const KeyConfig& c = key.config;
  const bool limited = c.requests_per_minute > 0 || c.tokens_per_minute > 0 || c.max_tokens_per_day > 0;
  SharedLimits::Answer shared;
  const bool in_redis = limited && key.shared && key.shared->Admit(c, prompt_tokens_estimate, &shared);
  // Falling back: each cost times the replicas, so this replica admits its share.
  const int64_t scale = in_redis ? 0 : limited && key.shared ? key.shared->replicas() : 1;
  std::lock_guard<std::mutex> lock(key.mutex);
  LimitCounters& s = key.counters;
  double retry = 0;
  LimitHit hit;
  if (in_redis) {  // the state Redis gave, on this process's clock
    hit = static_cast<LimitHit>(shared.code);
    retry = shared.retry_after;
    s.requests.limit = c.requests_per_minute;
    s.tokens.limit = c.tokens_per_minute;
    s.requests.tat = now + shared.requests_used;
    s.tokens.tat = now + shared.tokens_used;
    s.day = static_cast<int64_t>(std::floor(now / kDay));
    s.day_tokens = shared.day_tokens;
  } else {
    hit = CheckLimits(c, &s, prompt_tokens_estimate, scale, now, &retry);
  }
  const int64_t share = std::max<int64_t>(scale, 1);
  auto rate_message = [&](int64_t limit, const char* what) {
    return "Rate limit reached for key '" + c.name + "': " + Num(limit / share) + " " + what +
           " per minute. Try again in " + RateLimitDuration(retry) + ".";
  };
  switch (hit) {
    case LimitHit::kNone:
      out.admitted = true;
      out.charge = {.tokens = prompt_tokens_estimate,
                    .scale = scale,
                    .day = in_redis ? shared.day : static_cast<int64_t>(std::floor(now / kDay))};
      break;
    case LimitHit::kRequests:
      out.limit = "requests";
      out.message = rate_message(c.requests_per_minute, "requests");
      key.limited_requests->Add();
      break;
    case LimitHit::kTooLarge:
      out.limit = "tokens";
      out.message = "Request too large for key '" + c.name + "': its prompt is about " +
                    Num(prompt_tokens_estimate) + " tokens, more than the key's " +
                    Num(c.tokens_per_minute / share) + " tokens per minute.";
      key.limited_tokens->Add();
      break;
    case LimitHit::kTokens:
      out.limit = "tokens";
      out.message = rate_message(c.tokens_per_minute, "tokens");
      key.limited_tokens->Add();
      break;
    case LimitHit::kDaily:
      out.limit = "daily_tokens";
      out.message = "Daily token budget reached for key '" + c.name + "': " + Num(s.day_tokens) + " of " +
                    Num(c.max_tokens_per_day) + " tokens used today (UTC). Try again in " +
                    RateLimitDuration(retry) + ".";
      key.limited_daily->Add();
      break;
  }
  // The headers speak of what this replica would admit: its share while falling back.
  if (c.requests_per_minute > 0) {
    out.headers.emplace_back("x-ratelimit-limit-requests", Num(c.requests_per_minute / share));
    out.headers.emplace_back("x-ratelimit-remaining-requests", Num(s.requests.Remaining(now) / share));
    out.headers.emplace_back("x-ratelimit-reset-requests", RateLimitDuration(s.requests.Reset(now)));
  }
  if (c.tokens_per_minute > 0) {
    out.headers.emplace_back("x-ratelimit-limit-tokens", Num(c.tokens_per_minute / share));
    out.headers.emplace_back("x-ratelimit-remaining-tokens", Num(s.tokens.Remaining(now) / share));
    out.headers.emplace_back("x-ratelimit-reset-tokens", RateLimitDuration(s.tokens.Reset(now)));
  }
  if (!out.admitted) {
    out.retry_after = retry;
    out.headers.emplace_back("retry-after", Num(static_cast<int64_t>(std::ceil(std::max(retry, 0.001)))));
    key.requests_total->With({c.name, "429"}).Add();
  }
  return out;
}

void Keyring::Finish(const Key& key, const Charge& charge, int64_t prompt_tokens, int64_t completion_tokens,
                     int status, double now) {
  key.requests_total->With({key.config.name, std::to_string(status)}).Add();
  if (prompt_tokens > 0) key.prompt_tokens->Add(static_cast<double>(prompt_tokens));
  if (completion_tokens > 0) key.completion_tokens->Add(static_cast<double>(completion_tokens));
  // Without usage (an upstream that sent none, an error), the estimate stands.
  const int64_t used = prompt_tokens + completion_tokens > 0 ? prompt_tokens + completion_tokens : charge.tokens;
  const int64_t correction = used - charge.tokens;
  if (correction == 0) return;
  if (charge.scale == 0) {
    if (key.shared) key.shared->Correct(key.config, correction, charge.day);
    return;
  }
  std::lock_guard<std::mutex> lock(key.mutex);
  LimitCounters& s = key.counters;
  s.tokens.Charge(static_cast<double>(correction * charge.scale), now);
  if (s.day == charge.day) s.day_tokens = std::max<int64_t>(0, s.day_tokens + correction * charge.scale);
}

void Keyring::Count(const Key& key, int status) {
  key.requests_total->With({key.config.name, std::to_string(status)}).Add();
}

void Keyring::Inherit(const Keyring& previous) {
  for (auto& key : keys_) {
    for (const auto& old : previous.keys_) {
      if (old->config.name != key->config.name) continue;
      std::scoped_lock lock(key->mutex, old->mutex);
      LimitCounters& s = key->counters;
      const LimitCounters& was = old->counters;
      if (old->config.requests_per_minute == key->config.requests_per_minute) s.requests.tat = was.requests.tat;
      if (old->config.tokens_per_minute == key->config.tokens_per_minute) s.tokens.tat = was.tokens.tat;
      s.day = was.day;
      s.day_tokens = was.day_tokens;
    }
  }
}

nlohmann::json Keyring::Describe(double now) const {
  // With shared limits, the usage is Redis's (every replica's), read in one round trip.
  std::vector<const KeyConfig*> configs;
  for (const auto& key : keys_) configs.push_back(&key->config);
  std::vector<SharedLimits::Answer> shared;
  const bool in_redis = shared_ != nullptr && shared_->Peek(configs, &shared);
  nlohmann::json data = nlohmann::json::array();
  for (size_t i = 0; i < keys_.size(); ++i) {
    const Key& key = *keys_[i];
    const KeyConfig& c = key.config;
    LimitCounters s;
    {
      std::lock_guard<std::mutex> lock(key.mutex);
      s = key.counters;
    }
    const int64_t today = static_cast<int64_t>(std::floor(now / kDay));
    if (in_redis) {
      s.requests.tat = now + shared[i].requests_used;
      s.tokens.tat = now + shared[i].tokens_used;
      s.day = today;
      s.day_tokens = shared[i].day_tokens;
    }
    nlohmann::json limits = {{"requests_per_minute", c.requests_per_minute},
                             {"tokens_per_minute", c.tokens_per_minute},
                             {"max_tokens_per_day", c.max_tokens_per_day}};
    nlohmann::json usage = nlohmann::json::object();
    if (c.requests_per_minute > 0) usage["remaining_requests"] = s.requests.Remaining(now);
    if (c.tokens_per_minute > 0) usage["remaining_tokens"] = s.tokens.Remaining(now);
    usage["tokens_today"] = s.day == today ? s.day_tokens : 0;
    usage["prompt_tokens_total"] = key.prompt_tokens->value();
    usage["completion_tokens_total"] = key.completion_tokens->value();
    data.push_back({{"name", c.name},
                    {"tenant", c.tenant},
                    {"routes", c.routes.empty() ? nlohmann::json::array({"*"}) : nlohmann::json(c.routes)},
                    {"limits", limits},
                    {"usage", usage}});
  }
  nlohmann::json held = {{"store", shared_ ? shared_->describe() : "local"}};
  if (shared_) {
    held["shared"] = shared_->up();
    held["replicas"] = shared_->replicas();
  }
  return {{"object", "list"}, {"data", data}, {"limits", held}};
}

}  // namespace tachyon
